/* test_release_order.c — a completing producer releases its consumers in
 * submission order (sched.c complete_task, RELEASE_ORDERED of them; a
 * longer fan-out in its list's order), so that those made ready together
 * queue as they would have at submit: in a tree, the first child carries
 * the critical path.
 *
 * One AIV core: a gate task holds until the orchestrator has submitted
 * every consumer of it, so all of them become ready in the one completion;
 * the single core then runs them in queue order. Expected: consumers 0..N-1
 * in submission order for N = 4 and N = 16; for N = 40 (longer than the
 * ordered window) each runs exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "pto/pto.h"

#define MAXN 40

static int g_gate_k, g_k;
static _Atomic int g_open, g_count;
static int g_order[MAXN];
static float g_buf[64];

static int k_gate(const pto_kctx *c) {
  /* a failed run cancels it: it never outwaits the run */
  while (!atomic_load_explicit(&g_open, memory_order_acquire) && !pto_kctx_cancelled(c)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static int k_record(const pto_kctx *c) {
  int at = atomic_fetch_add(&g_count, 1);
  if (at < MAXN) g_order[at] = (int)c->scalars[0];
  return 0;
}

static pto_tensor whole(void) {
  int64_t n = 64;
  pto_tensor t;
  pto_tensor_init(&t, g_buf, sizeof g_buf, PTO_F32, 1, &n);
  return t;
}

static void orch(pto_orch *o, void *arg) {
  int n = *(int *)arg;
  pto_tensor t = whole();
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  assert_int_equal(pto_submit(o, g_gate_k, &a, NULL, NULL), 0);
  for (int i = 0; i < n; i++) { /* readers of the gate's output only */
    pto_args_init(&a);
    pto_args_input(&a, &t);
    pto_args_scalar(&a, (uint64_t)i);
    assert_int_equal(pto_submit(o, g_k, &a, NULL, NULL), 0);
  }
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void run_fanout(int n, int ordered) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 1;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "gate", k_gate, &g_gate_k), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "record", k_record, &g_k), 0);
  atomic_store(&g_open, 0);
  atomic_store(&g_count, 0);
  pto_error_info err;
  if (pto_chip_run(chip, orch, &n, NULL, &err) != 0) {
    print_error("run failed: %s\n", err.details);
    fail();
  }
  assert_int_equal(atomic_load(&g_count), n);
  int seen[MAXN] = {0};
  for (int i = 0; i < n; i++) {
    assert_true(g_order[i] >= 0 && g_order[i] < n);
    seen[g_order[i]]++;
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(seen[i], 1);
  for (int i = 0; ordered && i < n; i++)
    if (g_order[i] != i) {
      char got[4 * MAXN + 1];
      int len = 0;
      for (int k = 0; k < n; k++)
        len += snprintf(got + len, sizeof got - (size_t)len, "%d ", g_order[k]);
      print_error("%d consumers ran in the order %s; expected 0 .. %d\n", n, got, n - 1);
      fail();
    }
  pto_chip_destroy(chip);
}

static void test_four_consumers_in_submission_order(void **state) {
  (void)state;
  run_fanout(4, 1);
}

static void test_sixteen_consumers_in_submission_order(void **state) {
  (void)state;
  run_fanout(16, 1);
}

static void test_a_wide_fanout_runs_each_once(void **state) {
  (void)state;
  run_fanout(MAXN, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_four_consumers_in_submission_order),
      cmocka_unit_test(test_sixteen_consumers_in_submission_order),
      cmocka_unit_test(test_a_wide_fanout_runs_each_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
