/* test_head_take.c — a core that completed its own task takes its next
 * block from the head of its ready queue (src/chip/head_take.h), beside
 * the role holders' passes, which claim from the same queue: every task
 * of an independent graph runs exactly once, in a graph launch (its
 * roots queued 64 at a time while the slots are filled) and in a dynamic
 * run (pushed one by one), on 2 and 4 cores of one scheduler and on 4
 * cores of two schedulers, launch after launch.
 *
 * A head taken twice (the head not moved on, or two claimers without the
 * claim lock) runs a task twice; a head left unclaimed while taken runs
 * it twice too (the pass claims it again); a task never run is missed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

#define NT 4096

static _Atomic int32_t runs[NT];
static int32_t out[NT];
static int kid;

/* out[i] = 3 i + 1, and counts its runs */
static int k_mark(const pto_kctx *c) {
  int64_t i = (int64_t)c->scalars[0];
  atomic_fetch_add_explicit(&runs[i], 1, memory_order_relaxed);
  *(int32_t *)c->tensors[0].buf = (int32_t)(3 * i + 1);
  return 0;
}

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < NT; i++) {
    pto_tensor t;
    int64_t shape[1] = {1};
    pto_tensor_init(&t, &out[i], sizeof out[i], PTO_I32, 1, shape);
    pto_args a;
    pto_args_init(&a);
    pto_args_add(&a, PTO_OUTPUT_EXISTING, &t);
    pto_args_scalar(&a, (uint64_t)i);
    pto_submit(o, kid, &a, NULL, NULL);
  }
}

static void clear(void) {
  for (int i = 0; i < NT; i++)
    atomic_store(&runs[i], 0);
  memset(out, 0, sizeof out);
}

static void check(const char *what, int n) {
  for (int i = 0; i < NT; i++) {
    int32_t k = atomic_load(&runs[i]);
    if (k != 1 || out[i] != 3 * i + 1)
      fail_msg("%s %d: task %d ran %d times (expected once), out %d (expected %d)", what, n, i, k,
               out[i], 3 * i + 1);
  }
}

static void run_shape(int clusters, int aiv, int schedulers) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.aiv_per_cluster = aiv;
  cfg.aic_per_cluster = 0;
  cfg.schedulers = schedulers;
  cfg.task_slots = 2 * NT;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "mark", k_mark, &kid), PTO_OK);
  pto_error_info err;
  pto_run_stats st;
  uint64_t kept = 0;
  for (int n = 0; n < 3; n++) { /* dynamic */
    clear();
    int rc = pto_chip_run(chip, orchestrate, NULL, &st, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    check("dynamic run", n);
    kept += st.handoffs;
  }
  clear();
  pto_graph *g = NULL;
  int rc = pto_graph_capture(chip, orchestrate, NULL, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  check("capture", 0);
  for (int n = 1; n <= 8; n++) {
    clear();
    rc = pto_graph_launch(chip, g, NULL, &st, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    assert_int_equal(st.blocks, NT);
    check("launch", n);
    kept += st.handoffs;
  }
  /* how often the path ran depends on the schedule: said, not asserted */
  printf("%d x %d AIV, %d scheduler(s): %llu blocks taken by their cores or kept\n", clusters, aiv,
         schedulers, (unsigned long long)kept);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

static void test_two_cores(void **state) {
  (void)state;
  run_shape(1, 2, 1);
}

static void test_four_cores(void **state) {
  (void)state;
  run_shape(2, 2, 1);
}

static void test_two_schedulers(void **state) {
  (void)state;
  run_shape(2, 2, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_cores),
      cmocka_unit_test(test_four_cores),
      cmocka_unit_test(test_two_schedulers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
