/* test_graph_early_roots.c — a graph launch pushes each task as soon as
 * it is ready while it fills the rest (graph.c: a task's fanin is set by
 * its first predecessor's fill, and its own fill drops a guard): roots
 * whose descendants, direct or not, lie far ahead run at once, and every
 * launch computes what a fresh run would.
 *
 * The graph: NT tasks, each writing its own element of B (independent
 * roots), except two chains that reach far ahead of where their roots
 * are: A[0] = 1 (task 0) -> A[1] = A[0] + 1 (task 100) -> A[2] = A[1] + 1
 * (the last task), D[0] = 7 (task 2000) -> D[1] (task 2100) -> D[2] (the
 * one before the last: its root starts once the cores are busy), and
 * C[0] = 5 (task 200) -> C[1] = C[0] + 1 (task 300).
 * A fill that wrote its own task's fanin would let task 100's completion
 * drop a fanin the fill then overwrites: the last task would never run
 * (the watchdog ends the launch, the chain's value is missing); the A and
 * D chains fail so. test_graph_fill_explorer explores the guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

#define NT 16384 /* far more than a launch's push batch (64) */

static int32_t A[3], B[NT], C[2], D[3];
static int kid;

/* out[0] = (has input ? in[0] : 0) + scalar */
static int k_add(const pto_kctx *c) {
  int32_t base = c->ntensors > 1 ? *(int32_t *)c->tensors[1].buf : 0;
  *(int32_t *)c->tensors[0].buf = base + (int32_t)c->scalars[0];
  return 0;
}

static void elem(pto_tensor *t, int32_t *p) {
  int64_t shape[1] = {1};
  pto_tensor_init(t, p, sizeof *p, PTO_I32, 1, shape);
}

/* out = (in ? *in : 0) + k */
static void step(pto_orch *o, int32_t *out, int32_t *in, int32_t k) {
  pto_tensor to, ti;
  pto_args a;
  pto_args_init(&a);
  elem(&to, out);
  pto_args_add(&a, PTO_OUTPUT_EXISTING, &to);
  if (in) {
    elem(&ti, in);
    pto_args_input(&a, &ti);
  }
  pto_args_scalar(&a, (uint64_t)k);
  pto_submit(o, kid, &a, NULL, NULL);
}

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < NT; i++) {
    if (i == 0)
      step(o, &A[0], NULL, 1);
    else if (i == 100)
      step(o, &A[1], &A[0], 1);
    else if (i == NT - 1)
      step(o, &A[2], &A[1], 1);
    else if (i == 200)
      step(o, &C[0], NULL, 5);
    else if (i == 300)
      step(o, &C[1], &C[0], 1);
    else if (i == 2000)
      step(o, &D[0], NULL, 7);
    else if (i == 2100)
      step(o, &D[1], &D[0], 1);
    else if (i == NT - 2)
      step(o, &D[2], &D[1], 1);
    else
      step(o, &B[i], NULL, i);
  }
}

static void clear(void) {
  memset(A, 0xff, sizeof A);
  memset(B, 0xff, sizeof B);
  memset(C, 0xff, sizeof C);
  memset(D, 0xff, sizeof D);
}

static void check(const char *what, int launch) {
  if (A[0] != 1 || A[1] != 2 || A[2] != 3 || C[0] != 5 || C[1] != 6 || D[0] != 7 || D[1] != 8 ||
      D[2] != 9)
    fail_msg("%s %d: A = %d %d %d (expected 1 2 3), C = %d %d (expected 5 6), D = %d %d %d "
             "(expected 7 8 9)",
             what, launch, A[0], A[1], A[2], C[0], C[1], D[0], D[1], D[2]);
  for (int i = 1; i < NT - 2; i++)
    if (i != 100 && i != 200 && i != 300 && i != 2000 && i != 2100 && B[i] != i)
      fail_msg("%s %d: B[%d] = %d, expected %d", what, launch, i, B[i], i);
}

static void test_early_roots(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aiv_per_cluster = 2;
  cfg.aic_per_cluster = 0;
  cfg.task_slots = 2 * NT;
  cfg.watchdog_ms = 5000; /* a safety net: a lost task ends the launch */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "add", k_add, &kid), PTO_OK);
  clear();
  pto_graph *g = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orchestrate, NULL, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  check("capture", 0);
  for (int l = 1; l <= 10; l++) {
    clear();
    pto_run_stats st;
    rc = pto_graph_launch(chip, g, NULL, &st, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    assert_int_equal(st.tasks, NT);
    check("launch", l);
  }
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_early_roots)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
