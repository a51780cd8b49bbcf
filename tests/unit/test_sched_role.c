/* test_sched_role.c — scheduling is a role, not a thread: by default a run
 * has no scheduler threads (a core that finishes a block, or the
 * orchestrator, runs the scheduler's pass), so on a CPU no thread of pto
 * spins or parks only to hand work from one core to the next. With
 * cfg.sched_threads = 1 each scheduler has its own thread again (the
 * device's AICPU model). Both modes must give the same results; the
 * differential test and the gang scenes also run in both (ctest names
 * ending in _sched_threads). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The threads left once those just joined have gone: a joined thread
 * leaves /proc/self/task a moment after its join returns (the kernel
 * clears its tid, which the join waits for, before it releases it), so a
 * count right after pto_chip_destroy may still see one (seen once, in
 * the park10s build: "1 threads after pto_chip_destroy, expected 2", the
 * expected count taken right after the warm-up chip's destroy). Counts until
 * two looks 5 ms apart agree, or, with at_most >= 0, until the count is
 * at most that; 2 s at most (a safety net: nothing waits on it). */
static int threads_settled(int at_most) {
  int n = count_threads();
  for (int i = 0; i < 400; i++) {
    if (at_most >= 0 && n <= at_most) break;
    usleep(5000);
    int m = count_threads();
    if (at_most < 0 && m == n) break;
    n = m;
  }
  return n;
}

static _Atomic int seen_threads;
static _Atomic int chain_counter, chain_bad;

static int k_count(const pto_kctx *c) {
  (void)c;
  atomic_store(&seen_threads, count_threads());
  return 0;
}

/* A chain link: task i must see exactly i links before it. */
static int k_link(const pto_kctx *c) {
  int want = (int)c->scalars[0];
  if (atomic_fetch_add(&chain_counter, 1) != want) atomic_fetch_add(&chain_bad, 1);
  return 0;
}

static int kid_count, kid_link;

typedef struct orch_arg {
  int links, rc;
} orch_arg;

static void count_orch(pto_orch *o, void *arg) {
  orch_arg *a = arg;
  pto_task_id prev = PTO_TASK_NONE, id;
  if ((a->rc = pto_submit(o, kid_count, NULL, NULL, &id))) return;
  for (int i = 0; i < a->links; i++) {
    pto_submit_opts so = {.deps = prev >= 0 ? &prev : NULL, .ndeps = prev >= 0 ? 1 : 0};
    pto_args args;
    pto_args_init(&args);
    pto_args_scalar(&args, (uint64_t)i);
    if ((a->rc = pto_submit(o, kid_link, &args, &so, &id))) return;
    prev = id;
  }
}

static pto_chip *make_chip(int clusters, int schedulers, int sched_threads) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.schedulers = schedulers;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &kid_count), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "link", k_link, &kid_link), PTO_OK);
  return chip;
}

static void run_mode(int sched_threads) {
  const int clusters = 2, schedulers = 2, cores = clusters * 3;
  /* a first chip's run, so helper threads a sanitizer starts on the first
   * pthread_create are there before we count */
  orch_arg warm = {.links = 0};
  pto_chip *chip = make_chip(1, 1, 0);
  assert_int_equal(pto_chip_run(chip, count_orch, &warm, NULL, NULL), PTO_OK);
  pto_chip_destroy(chip);
  int base = threads_settled(-1);
  chip = make_chip(clusters, schedulers, sched_threads);
  assert_int_equal(pto_chip_run(chip, count_orch, &warm, NULL, NULL), PTO_OK);
  /* the chip's threads, made at its first run, stay for the next runs */
  int before = count_threads();
  atomic_store(&chain_counter, 0);
  atomic_store(&chain_bad, 0);
  orch_arg a = {.links = 2000};
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  pto_error_info err;
  int rc = pto_chip_run(chip, count_orch, &a, NULL, &err);
  getrusage(RUSAGE_SELF, &r1);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  int after = threads_settled(base);
  if (after != base) fail_msg("%d threads after pto_chip_destroy, expected %d", after, base);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(a.rc, PTO_OK);
  int links = atomic_load(&chain_counter), bad = atomic_load(&chain_bad);
  if (links != a.links || bad)
    fail_msg("chain: %d links ran, %d out of order (expected %d in order)", links, bad, a.links);
  /* the chip's threads: its cores, the watchdog, and in sched_threads mode
   * one per scheduler; the orchestrator is the caller's thread. Made once,
   * at the first run: the second run starts none. */
  int want = base + cores + 1 + (sched_threads ? schedulers : 0);
  int got = atomic_load(&seen_threads);
  printf("sched_threads=%d: %d threads after the first run, %d during the second (expected %d: "
         "%d before, %d cores, watchdog%s); %.3f voluntary context switches per chain link\n",
         sched_threads, before, got, want, base, cores, sched_threads ? ", 2 schedulers" : "",
         (double)(r1.ru_nvcsw - r0.ru_nvcsw) / a.links);
  if (before != want || got != want)
    fail_msg("%d threads after the first run and %d during the second with sched_threads=%d, "
             "expected %d (%d before + %d cores + watchdog%s)",
             before, got, sched_threads, want, base, cores, sched_threads ? " + 2 schedulers" : "");
}

/* ---- run spans: the schedulers' last activity (run_stats) ---- */

static int k_sleep(const pto_kctx *c) {
  struct timespec ts = {0, (long)c->scalars[0] * 1000000L};
  nanosleep(&ts, NULL);
  return 0;
}

typedef struct span_arg {
  int kid, block_ms, host_ms, rc;
} span_arg;

/* One task of block_ms; with host_ms, the orchestration waits for it and
 * then works on the host for host_ms before it returns. */
static void span_orch(pto_orch *o, void *arg) {
  span_arg *a = arg;
  pto_args args;
  pto_args_init(&args);
  pto_args_scalar(&args, (uint64_t)a->block_ms);
  pto_task_id id;
  if ((a->rc = pto_submit(o, a->kid, &args, NULL, &id)) || !a->host_ms) return;
  if ((a->rc = pto_orch_wait_task(o, id, 10000))) return;
  struct timespec ts = {0, (long)a->host_ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void run_span(int sched_threads, int block_ms, int host_ms, pto_run_stats *st) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  span_arg a = {.block_ms = block_ms, .host_ms = host_ms};
  assert_int_equal(pto_kernel_register_aiv(chip, "sleep", k_sleep, &a.kid), PTO_OK);
  pto_error_info err;
  int rc = pto_chip_run(chip, span_orch, &a, st, &err);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(a.rc, PTO_OK);
}

/* The last block ends after the orchestration: the schedulers' span (and
 * the device's) reaches it. Then the orchestration ends after the last
 * block: the span reaches the orchestration's end (pto_run_stats). */
static void test_run_spans_reach_the_last_activity(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    pto_run_stats st;
    run_span(mode, 30, 0, &st);
    printf("sched_threads=%d, a 30 ms block after the orchestration: orch %.0f us, sched %.0f "
           "us, device %.0f us, effective %.0f us\n",
           mode, st.orch_us, st.sched_us, st.device_us, st.effective_us);
    if (st.sched_us < 29000 || st.device_us < 29000 || st.effective_us < 29000)
      fail_msg("sched_threads=%d: sched_us %.0f, device_us %.0f, effective_us %.0f: each must "
               "cover the 30 ms block that ended last",
               mode, st.sched_us, st.device_us, st.effective_us);
    run_span(mode, 1, 30, &st);
    printf("sched_threads=%d, 30 ms of host work after a 1 ms block: orch %.0f us, sched %.0f "
           "us, device %.0f us, effective %.0f us\n",
           mode, st.orch_us, st.sched_us, st.device_us, st.effective_us);
    if (st.effective_us < 30000 || st.effective_us < st.orch_us)
      fail_msg("sched_threads=%d: effective_us %.0f must cover the orchestration (%.0f us)", mode,
               st.effective_us, st.orch_us);
  }
}

static void test_role_default_no_scheduler_threads(void **state) {
  (void)state;
  run_mode(0);
}

static void test_sched_threads_mode(void **state) {
  (void)state;
  run_mode(1);
}

static void test_sched_threads_config_checked(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.sched_threads = 2;
  pto_chip *chip = NULL;
  pto_error_info err;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_EINVAL);
  assert_null(chip);
  assert_non_null(strstr(err.details, "sched_threads = 2"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_role_default_no_scheduler_threads),
      cmocka_unit_test(test_sched_threads_mode),
      cmocka_unit_test(test_sched_threads_config_checked),
      cmocka_unit_test(test_run_spans_reach_the_last_activity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
