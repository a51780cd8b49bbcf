/* test_commute.c — COMMUTE access (src/chip/commute.c, tensormap.c's
 * TMAP_COMMUTE): tasks that accumulate into the same bytes never run at
 * the same time, tasks on disjoint bytes of one buffer do, and the group is
 * ordered against plain accesses before and after it.
 *
 * Nothing here depends on timing to pass. Exclusion: every block counts
 * itself in, per byte range, while it runs, and records the most it ever
 * saw inside (1 when excluded, whatever the timing; a broken exclusion may
 * pass a run by luck, never fail a correct one). Concurrency of disjoint
 * ones: two commute tasks on the two halves of one buffer each wait until
 * the other has started (a rendezvous), with a 10 s deadline as the safety
 * net: serialised, the first would wait out the deadline and report it.
 * And the trace marks COMMUTE blocks and blocks of a priority. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"

#define NBINS  8
#define NTASKS 400

static _Atomic int g_inside[NBINS], g_max_inside[NBINS];
static _Atomic int g_started[2], g_timed_out;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* tensor 0 (COMMUTE, i32): one bin; scalar 0: its index, scalar 1: the
 * value added. Counts itself inside the bin while it adds, non-atomically
 * (a read, a yield, a write: a lost update if another task ran inside). */
static int k_add(const pto_kctx *c) {
  int bin = (int)c->scalars[0];
  int in = atomic_fetch_add(&g_inside[bin], 1) + 1;
  int m = atomic_load(&g_max_inside[bin]);
  while (in > m && !atomic_compare_exchange_weak(&g_max_inside[bin], &m, in)) {
  }
  int32_t *p = (int32_t *)c->tensors[0].buf + c->tensors[0].offset;
  int32_t v = *(volatile int32_t *)p;
  sched_yield();
  *(volatile int32_t *)p = v + (int32_t)c->scalars[1];
  atomic_fetch_sub(&g_inside[bin], 1);
  return 0;
}

/* tensor 0 (INOUT or OUTPUT_EXISTING, i32, NBINS): x = x * 2 + scalar 0 */
static int k_scale(const pto_kctx *c) {
  int32_t *p = (int32_t *)c->tensors[0].buf + c->tensors[0].offset;
  for (int i = 0; i < NBINS; i++)
    p[i] = p[i] * 2 + (int32_t)c->scalars[0];
  return 0;
}

/* scalar 0: which half (0, 1): waits until the other half's task started */
static int k_meet(const pto_kctx *c) {
  int me = (int)c->scalars[0];
  atomic_store(&g_started[me], 1);
  uint64_t deadline = now_ns() + 10000000000ull;
  while (!atomic_load(&g_started[1 - me])) {
    if (now_ns() > deadline || pto_kctx_cancelled(c)) {
      atomic_store(&g_timed_out, 1);
      return 0;
    }
    sched_yield();
  }
  return 0;
}

typedef struct fixture {
  int k_add, k_scale, k_meet;
  int32_t bins[NBINS];
  int32_t pair[64];
  int32_t expect[NBINS];
  int bad_rc, prio_rc;
} fixture;

static pto_tensor bin_view(int32_t *bins, int i) {
  pto_tensor all, v;
  int64_t shape[1] = {NBINS}, start[1] = {i}, one[1] = {1};
  pto_tensor_init(&all, bins, sizeof(int32_t) * NBINS, PTO_I32, 1, shape);
  pto_tensor_slice(&all, start, one, &v);
  return v;
}

static void submit_add(pto_orch *o, fixture *f, int bin, int32_t value) {
  pto_tensor v = bin_view(f->bins, bin);
  pto_args a;
  pto_args_init(&a);
  pto_args_commute(&a, &v);
  pto_args_scalar(&a, (uint64_t)bin);
  pto_args_scalar(&a, (uint64_t)(uint32_t)value);
  pto_submit(o, f->k_add, &a, NULL, NULL);
}

static void submit_scale(pto_orch *o, fixture *f, int32_t k) {
  pto_tensor all;
  int64_t shape[1] = {NBINS};
  pto_tensor_init(&all, f->bins, sizeof f->bins, PTO_I32, 1, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &all);
  pto_args_scalar(&a, (uint64_t)(uint32_t)k);
  pto_submit(o, f->k_scale, &a, NULL, NULL);
}

/* Plain INOUT, a commute group, plain INOUT, another group, computed
 * alongside in submission order (the adds commute, so any order of a
 * group gives the same sum). */
static void orch_groups(pto_orch *o, void *arg) {
  fixture *f = arg;
  uint32_t seed = 12345;
  for (int i = 0; i < NBINS; i++)
    f->expect[i] = f->bins[i];
  for (int round = 0; round < 2; round++) {
    submit_scale(o, f, round + 1);
    for (int i = 0; i < NBINS; i++)
      f->expect[i] = f->expect[i] * 2 + round + 1;
    for (int n = 0; n < NTASKS / 2; n++) {
      seed = seed * 1103515245u + 12345u;
      int bin = (int)(seed >> 16) % NBINS;
      int32_t v = (int32_t)(seed >> 8 & 0xff);
      submit_add(o, f, bin, v);
      f->expect[bin] += v;
    }
  }
  submit_scale(o, f, 7);
  for (int i = 0; i < NBINS; i++)
    f->expect[i] = f->expect[i] * 2 + 7;
}

static int setup_chip(pto_chip **chip, fixture *f, int clusters, int schedulers) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.schedulers = schedulers;
  cfg.watchdog_ms = 20000;
  int rc = pto_chip_create(&cfg, chip);
  if (rc) return rc;
  pto_kernel_register_aiv(*chip, "add", k_add, &f->k_add);
  pto_kernel_register_aiv(*chip, "scale", k_scale, &f->k_scale);
  pto_kernel_register_aiv(*chip, "meet", k_meet, &f->k_meet);
  return PTO_OK;
}

static void test_groups_exclusive_and_ordered(void **state) {
  (void)state;
  static const int shapes[][2] = {{1, 1}, {4, 2}, {8, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    fixture f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < NBINS; i++) {
      f.bins[i] = i * 1000;
      atomic_store(&g_max_inside[i], 0);
    }
    pto_chip *chip;
    assert_int_equal(setup_chip(&chip, &f, shapes[s][0], shapes[s][1]), PTO_OK);
    pto_error_info err;
    int rc = pto_chip_run(chip, orch_groups, &f, NULL, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    for (int i = 0; i < NBINS; i++) {
      if (f.bins[i] != f.expect[i] || atomic_load(&g_max_inside[i]) != 1)
        fprintf(stderr, "chip %d x %d: bin %d = %d, expected %d; at most %d tasks inside\n",
                shapes[s][0], shapes[s][1], i, f.bins[i], f.expect[i],
                atomic_load(&g_max_inside[i]));
      assert_int_equal(f.bins[i], f.expect[i]);
      assert_int_equal(atomic_load(&g_max_inside[i]), 1);
    }
    pto_chip_destroy(chip);
  }
}

/* Two commute tasks on the two halves of one buffer, each waiting for the
 * other to start. */
static void orch_halves(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_tensor all, half;
  int64_t shape[1] = {64}, len[1] = {32};
  pto_tensor_init(&all, f->pair, sizeof f->pair, PTO_I32, 1, shape);
  for (int h = 0; h < 2; h++) {
    int64_t start[1] = {32 * h};
    pto_tensor_slice(&all, start, len, &half);
    pto_args a;
    pto_args_init(&a);
    pto_args_commute(&a, &half);
    pto_args_scalar(&a, (uint64_t)h);
    pto_submit(o, f->k_meet, &a, NULL, NULL);
  }
}

static void test_disjoint_run_together(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  atomic_store(&g_started[0], 0);
  atomic_store(&g_started[1], 0);
  atomic_store(&g_timed_out, 0);
  pto_chip *chip;
  assert_int_equal(setup_chip(&chip, &f, 1, 1), PTO_OK); /* 2 AIV cores */
  assert_int_equal(pto_chip_run(chip, orch_halves, &f, NULL, NULL), PTO_OK);
  assert_int_equal(atomic_load(&g_timed_out), 0);
  pto_chip_destroy(chip);
}

/* The trace shows a COMMUTE task's blocks with "commute": its priority,
 * and other tasks of a priority above 0 with "priority". */
static void orch_traced(pto_orch *o, void *arg) {
  fixture *f = arg;
  for (int i = 0; i < 6; i++) {
    pto_tensor v = bin_view(f->bins, 0);
    pto_args a;
    pto_args_init(&a);
    pto_args_commute(&a, &v);
    pto_args_scalar(&a, 0);
    pto_args_scalar(&a, 1);
    pto_submit_opts opts = {.priority = i % 2 ? 2 : 0};
    pto_submit(o, f->k_add, &a, &opts, NULL);
  }
  pto_tensor all;
  int64_t shape[1] = {NBINS};
  pto_tensor_init(&all, f->bins, sizeof f->bins, PTO_I32, 1, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &all);
  pto_args_scalar(&a, 1);
  pto_submit_opts opts = {.priority = 3};
  pto_submit(o, f->k_scale, &a, &opts, NULL);
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
    n++;
  return n;
}

static void test_trace_marks(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  pto_chip *chip;
  assert_int_equal(setup_chip(&chip, &f, 2, 1), PTO_OK);
  char path[] = "/tmp/pto_test_commute_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(pto_chip_set_trace(chip, path), PTO_OK);
  assert_int_equal(pto_chip_run(chip, orch_traced, &f, NULL, NULL), PTO_OK);
  pto_chip_destroy(chip);
  FILE *in = fopen(path, "r");
  assert_non_null(in);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, in);
  text[n] = '\0';
  fclose(in);
  unlink(path);
  assert_int_equal(count(text, "\"commute\":0"), 3);
  assert_int_equal(count(text, "\"commute\":2"), 3);
  assert_int_equal(count(text, "\"priority\":3"), 1);
}

/* Bad input: a fifth COMMUTE argument, a priority out of range. */
static void orch_bad(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 5; i++) {
    pto_tensor v = bin_view(f->bins, i);
    pto_args_commute(&a, &v);
  }
  f->bad_rc = pto_submit(o, f->k_add, &a, NULL, NULL);
}

static void orch_bad_prio(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_submit_opts opts = {.priority = PTO_PRIORITY_MAX + 1};
  f->prio_rc = pto_submit_dummy(o, NULL, &opts, NULL);
}

static void test_bad_input(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  pto_chip *chip;
  assert_int_equal(setup_chip(&chip, &f, 1, 1), PTO_OK);
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_bad, &f, NULL, &err), PTO_EINVAL);
  assert_int_equal(f.bad_rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "at most 4 COMMUTE arguments"));
  assert_int_equal(pto_chip_run(chip, orch_bad_prio, &f, NULL, &err), PTO_EINVAL);
  assert_int_equal(f.prio_rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "priority 4: must be 0..3"));
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_exclusive_and_ordered),
      cmocka_unit_test(test_disjoint_run_together),
      cmocka_unit_test(test_trace_marks),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
