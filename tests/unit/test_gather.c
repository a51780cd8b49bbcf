/* test_gather.c — the orchestrator's gather (src/chip/gather.h,
 * docs/chip.md "The orchestrator's gather"): a task ready at its submit
 * while every core of its type is busy is gathered, not pushed; a core
 * that falls idle takes it, with the orchestrator in its caller's code and
 * no further call into pto; what one take gets runs in submission order;
 * a failed run's gathered task does not run in the next run; and bursts
 * of short tasks all run while the orchestrator waits in its own code.
 *
 * The busy cores run a kernel that waits until the orchestrator's code
 * lets it go, so that the submit finds them busy every time; the
 * orchestrator then waits for the gathered task with a deadline, without
 * any pto call (each would push what it gathered). The protocol itself,
 * over every interleaving, is test_gather_explorer's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pto/pto.h"

#define NT 10

static int g_wait_k, g_count_k;
static _Atomic int g_started; /* blocks of the waiting kernel begun */
static _Atomic int g_release; /* the orchestrator lets them end */
static _Atomic int g_ran;     /* blocks of the counting kernel run */
static int g_order[NT];       /* the scalar of each, in order */
static int64_t g_buf[NT + 2];

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Runs until released (at most 5 s); scalar 1: then fails (PTO_EKERNEL). */
static int k_wait(const pto_kctx *c) {
  atomic_fetch_add(&g_started, 1);
  for (int i = 0; i < 50000 && !atomic_load(&g_release); i++) {
    struct timespec ts = {0, 100000L};
    nanosleep(&ts, NULL);
  }
  return c->scalars[0] == 1 ? PTO_EKERNEL : 0;
}

static int k_count(const pto_kctx *c) {
  int at = atomic_fetch_add_explicit(&g_ran, 1, memory_order_acq_rel);
  if (at < NT) g_order[at] = (int)c->scalars[0];
  return 0;
}

/* Waits up to 5 s for `n` of `what` (no pto call). */
static int await(_Atomic int *what, int n) {
  for (int i = 0; i < 5000 && atomic_load(what) < n; i++)
    pause_ms(1);
  return atomic_load(what);
}

/* A task of kernel k writing cell i alone (independent of the others). */
static void submit_on(pto_orch *o, int k, int i, uint64_t scalar) {
  int64_t n = 1;
  pto_tensor t;
  pto_tensor_init(&t, &g_buf[i], sizeof g_buf[i], PTO_I64, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, scalar);
  assert_int_equal(pto_submit(o, k, &a, NULL, NULL), PTO_OK);
}

static pto_chip *chip_of(int aiv) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = aiv;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "wait", k_wait, &g_wait_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &g_count_k), PTO_OK);
  return chip;
}

static void reset_counts(void) {
  atomic_store(&g_started, 0);
  atomic_store(&g_release, 0);
  atomic_store(&g_ran, 0);
  memset(g_order, -1, sizeof g_order);
}

typedef struct job {
  int busy;    /* waiting blocks, one per core */
  int n;       /* counting tasks submitted while they wait */
  int fail;    /* the first waiting block fails */
  bool awaits; /* the orchestrator waits for the counting tasks itself */
} job;

/* `busy` waiting blocks, then (once all have begun) `n` counting tasks,
 * gathered; then the waiting blocks are let go and, with `awaits`, the
 * orchestrator waits in its own code for the counting tasks to run. */
static void orch_busy_then_ready(pto_orch *o, void *arg) {
  const job *j = arg;
  for (int i = 0; i < j->busy; i++)
    submit_on(o, g_wait_k, NT + i, j->fail && i == 0);
  assert_int_equal(await(&g_started, j->busy), j->busy);
  for (int i = 0; i < j->n; i++)
    submit_on(o, g_count_k, i, (uint64_t)i);
  pause_ms(20);
  assert_int_equal(atomic_load(&g_ran), 0); /* every core busy */
  atomic_store(&g_release, 1);
  if (j->awaits) assert_int_equal(await(&g_ran, j->n), j->n); /* taken by a core */
}

/* Two AIV cores both busy: the task is gathered, and a core falling idle
 * takes it while the orchestrator waits in its own code. */
static void test_taken_by_a_core_falling_idle(void **state) {
  (void)state;
  reset_counts();
  pto_chip *chip = chip_of(2);
  job j = {.busy = 2, .n = 1, .awaits = true};
  pto_run_stats st;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_busy_then_ready, &j, &st, &err), PTO_OK);
  assert_int_equal(st.gathered, 1);
  assert_int_equal(atomic_load(&g_ran), 1);
  pto_chip_destroy(chip);
}

/* One AIV core, busy: ten tasks gathered, taken at once when it falls
 * idle, and run in submission order. */
static void test_one_take_keeps_order(void **state) {
  (void)state;
  reset_counts();
  pto_chip *chip = chip_of(1);
  job j = {.busy = 1, .n = NT, .awaits = true};
  pto_run_stats st;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_busy_then_ready, &j, &st, &err), PTO_OK);
  assert_int_equal(st.gathered, NT);
  for (int i = 0; i < NT; i++)
    assert_int_equal(g_order[i], i);
  pto_chip_destroy(chip);
}

/* A run that fails with a task gathered (its orchestration returns at
 * once: the take may come from a core or from the run's end), then a
 * clean run on the same chip: only its own tasks run there. */
static void orch_clean(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++)
    submit_on(o, g_count_k, i, (uint64_t)(100 + i));
}

static void test_failed_run_then_clean(void **state) {
  (void)state;
  reset_counts();
  pto_chip *chip = chip_of(2);
  job j = {.busy = 2, .n = 1, .fail = 1};
  pto_run_stats st;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_busy_then_ready, &j, &st, &err), PTO_EKERNEL);
  assert_int_equal(st.gathered, 1);
  reset_counts();
  assert_int_equal(pto_chip_run(chip, orch_clean, NULL, &st, &err), PTO_OK);
  assert_int_equal(atomic_load(&g_ran), 4);
  for (int i = 0; i < 4; i++) /* in any order: two cores */
    assert_true(g_order[i] >= 100 && g_order[i] < 104);
  pto_chip_destroy(chip);
}

/* Blocks of 0-3 us (short: the cores come to hold), in bursts of 1-70
 * tasks (past GATHER_MAX too), each burst waited for by the orchestrator
 * in its own code, with no pto call: every task of every burst runs, by
 * the cores' takes alone (a stranded task times the wait out). */
#define BURSTS 300
static _Atomic int g_done;

static int k_spin(const pto_kctx *c) {
  uint64_t until = (uint64_t)c->scalars[0];
  struct timespec ts;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec >= until) break;
  }
  atomic_fetch_add_explicit(&g_done, 1, memory_order_acq_rel);
  return 0;
}
static int g_spin_k;

static void orch_bursts(pto_orch *o, void *arg) {
  int *failed_at = arg;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int want = 0;
  for (int b = 0; b < BURSTS && *failed_at < 0; b++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int n = 1 + (int)(rng >> 33) % 70;
    for (int i = 0; i < n; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
      int64_t one = 1;
      pto_tensor t;
      pto_tensor_init(&t, &g_buf[i % NT], sizeof g_buf[0], PTO_I64, 1, &one);
      pto_args a;
      pto_args_init(&a);
      pto_args_input(&a, &t); /* readers only: all independent */
      pto_args_scalar(&a, now + (rng >> 33) % 3000);
      assert_int_equal(pto_submit(o, g_spin_k, &a, NULL, NULL), PTO_OK);
    }
    want += n;
    if (await(&g_done, want) < want) *failed_at = b;
  }
}

static void test_bursts_taken_without_the_orchestrator(void **state) {
  (void)state;
  atomic_store(&g_done, 0);
  pto_chip *chip = chip_of(2);
  assert_int_equal(pto_kernel_register_aiv(chip, "spin", k_spin, &g_spin_k), PTO_OK);
  int failed_at = -1;
  pto_run_stats st;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_bursts, &failed_at, &st, &err), PTO_OK);
  if (failed_at >= 0) print_error("burst %d: its tasks did not all run within 5 s\n", failed_at);
  assert_int_equal(failed_at, -1);
  print_message("bursts: %llu of %llu tasks gathered, %llu pull holds\n",
                (unsigned long long)st.gathered, (unsigned long long)st.tasks,
                (unsigned long long)st.pull_holds);
  assert_true(st.gathered > 0);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_taken_by_a_core_falling_idle),
      cmocka_unit_test(test_one_take_keeps_order),
      cmocka_unit_test(test_failed_run_then_clean),
      cmocka_unit_test(test_bursts_taken_without_the_orchestrator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
