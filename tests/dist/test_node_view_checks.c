/* test_node_view_checks.c — node-level paths that accept a view use the
 * same overflow-checked checks as the chip: a host tensor view whose
 * strides reach far outside its buffer (or wrap 64 bits) is refused by
 * pto_node_submit_host and pto_node_read with PTO_EINVAL, and the task
 * never runs; a valid view of the same tensor still works.
 * A host task whose argument lies in a window is refused on one host, where
 * host workers are processes of their own that map no window (before, the
 * worker died on its first touch: PTO_ECHIP_DIED); the orchestrator still
 * reads the window.
 *
 * The node leases a device id of its own (TEST_DEV0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node_create.h"

#include "scenes/dist_scene.h"

#define N         64
#define TEST_DEV0 64 /* 60, 61 belong to test_dist_concurrent */

static int orch_init(pto_chip *chip, int rank, void *arg) {
  (void)chip;
  (void)rank;
  (void)arg;
  return 0;
}

/* Writes 1 into every element of tensor 0 (runs in the worker process). */
static int host_touch(const pto_args *a, void *arg) {
  (void)arg;
  const pto_tensor *t = &a->tensors[0];
  for (int64_t i = 0; i < pto_tensor_numel(t); i++)
    *(float *)pto_tensor_at_linear(t, i) = 1.0f;
  return 0;
}

typedef struct nv_ctx {
  int rc_submit, rc_read, rc_good_submit, rc_good_read;
  float out[N];
} nv_ctx;

static void node_orch(pto_node_orch *no, void *arg) {
  nv_ctx *c = arg;
  pto_node *n = pto_node_orch_node(no);
  int64_t sh = N;
  pto_tensor t;
  if (pto_node_host_tensor(n, PTO_F32, 1, &sh, &t)) return;
  memset(t.buf, 0, N * sizeof(float));
  /* 2 elements, the second 2^62 + 8 elements away: its byte offset wraps
   * to 32, inside the buffer, but the element lies far outside it */
  pto_tensor bad = t;
  bad.shape[0] = 2;
  bad.stride[0] = (INT64_C(1) << 62) + 8;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &bad);
  c->rc_submit = pto_node_submit_host(no, 0, host_touch, NULL, &a, NULL);
  c->rc_read = pto_node_read(no, &bad, c->out);
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  c->rc_good_submit = pto_node_submit_host(no, 0, host_touch, NULL, &a, NULL);
  c->rc_good_read = pto_node_read(no, &t, c->out);
}

/* A node of one chip and one host worker (the tests run one after the
 * other: each destroys its node before the next leases the device). */
static pto_node *make_node(void) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  static const int devs[1] = {TEST_DEV0};
  dist_config(&o, 1, orch_init, &cfg);
  cfg.device_ids = devs;
  cfg.nworkers = 1;
  cfg.chip.clusters = 1;
  cfg.host_bytes = 1u << 20;
  cfg.window_space = 16u << 20;
  cfg.startup_timeout_ms = 20000;
  cfg.task_timeout_ms = 5000;
  cfg.quiet = true;
  return node_create_ok(&cfg);
}

static void test_bad_views_refused(void **state) {
  (void)state;
  pto_node *n = make_node();
  pto_error_info err;
  nv_ctx c;
  memset(&c, 0x55, sizeof c);
  pto_node_run(n, node_orch, &c, &err);
  if (c.rc_submit != PTO_EINVAL || c.rc_read != PTO_EINVAL)
    fprintf(stderr,
            "view with wrapping strides: submit_host returned %s, read returned %s "
            "(expected PTO_EINVAL for both)\n",
            pto_status_name(c.rc_submit), pto_status_name(c.rc_read));
  assert_int_equal(c.rc_submit, PTO_EINVAL);
  assert_int_equal(c.rc_read, PTO_EINVAL);
  pto_node_destroy(n);
}

typedef struct win_ctx {
  int rc_submit, rc_read;
  float out[N];
} win_ctx;

static void window_orch(pto_node_orch *no, void *arg) {
  win_ctx *c = arg;
  static const int chips[1] = {0};
  pto_window_buffer wb = {"w", N * sizeof(float)};
  pto_domain d;
  if (pto_node_domain_create(no, chips, 1, &wb, 1, &d)) return;
  int64_t sh = N;
  pto_tensor w;
  if (pto_node_window_tensor(no, d, 0, "w", PTO_F32, 1, &sh, &w)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &w);
  c->rc_submit = pto_node_submit_host(no, 0, host_touch, NULL, &a, NULL);
  c->rc_read = pto_node_read(no, &w, c->out);
}

static void test_host_task_window_view_refused(void **state) {
  (void)state;
  pto_node *n = make_node();
  pto_error_info err;
  win_ctx c;
  memset(&c, 0x55, sizeof c);
  int rc = pto_node_run(n, window_orch, &c, &err);
  if (c.rc_submit != PTO_EINVAL ||
      !strstr(err.details, "tensor 0: its bytes lie in domain 1's window of rank 0") ||
      !strstr(err.details, "host workers are processes of their own that map no window"))
    fail_msg("a host task on a window view: submit returned %s, the run %s: %s (expected "
             "PTO_EINVAL naming the window)",
             pto_status_name(c.rc_submit), pto_status_name(rc), err.details);
  assert_int_equal(c.rc_read, PTO_OK); /* the orchestrator maps the windows */
  for (int i = 0; i < N; i++)
    assert_true(c.out[i] == 0.0f); /* zeroed at creation, never written */
  pto_node_destroy(n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_views_refused),
      cmocka_unit_test(test_host_task_window_view_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
