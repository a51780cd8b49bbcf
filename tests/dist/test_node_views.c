/* test_node_views.c — node-level dependencies follow the bytes a host
 * tensor view touches, however the view was built: a view whose base is an
 * interior pointer of a host tensor, or the same bytes as another dtype,
 * orders against views of the whole tensor (host sub-worker tasks and
 * pto_node_read). A slow first task and a fast second one show a missing
 * edge as a wrong value.
 *
 * The node leases device ids of its own (TEST_DEV0) so that this file
 * never queues behind the other dist tests' leases. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "scenes/dist_scene.h"

#define N         64
#define TEST_DEV0 48

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int orch_init(pto_chip *chip, int rank, void *arg) {
  (void)chip;
  (void)rank;
  (void)arg;
  return 0;
}

/* Sleeps scalar 0 ms, then sets every byte of tensor 0 to scalar 1. */
static int host_fill(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms((int64_t)a->scalars[0]);
  const pto_tensor *t = &a->tensors[0];
  size_t es = pto_dtype_size((pto_dtype)t->dtype);
  for (int64_t i = 0; i < pto_tensor_numel(t); i++)
    memset(pto_tensor_at_linear(t, i), (int)a->scalars[1], es);
  return 0;
}

/* Sleeps scalar 0 ms, then copies tensor 0's elements, packed, to tensor 1. */
static int host_copy(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms((int64_t)a->scalars[0]);
  pto_tensor_copy_out(&a->tensors[0], a->tensors[1].buf);
  return 0;
}

typedef struct views {
  pto_tensor x, y;              /* host tensors: N f32 each */
  pto_tensor x_inner, x_as_i64; /* x + 8 (8 f32); all of x as i64 */
  float seen[N];                /* pto_node_read of x */
  int rc[6];
} views;

static int fill(pto_node_orch *no, const pto_tensor *t, int sleep, int byte) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, t);
  pto_args_scalar(&a, (uint64_t)sleep);
  pto_args_scalar(&a, (uint64_t)byte);
  return pto_node_submit_host(no, -1, host_fill, NULL, &a, NULL);
}

static int copy(pto_node_orch *no, const pto_tensor *in, const pto_tensor *out, int sleep) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output_existing(&a, out);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit_host(no, -1, host_copy, NULL, &a, NULL);
}

static void orch(pto_node_orch *no, void *arg) {
  views *v = arg;
  /* read-after-write through pto_node_read: a slow writer of x + 8 */
  v->rc[0] = fill(no, &v->x_inner, 150, 0x11);
  v->rc[1] = pto_node_read(no, &v->x, v->seen);
  /* write-after-read: a slow reader of x + 8, then a fast writer of x as i64 */
  v->rc[2] = copy(no, &v->x_inner, &v->y, 150);
  v->rc[3] = fill(no, &v->x_as_i64, 0, 0x22);
  v->rc[4] = pto_node_wait_all(no);
}

static void test_interior_pointer_host_views_are_ordered(void **state) {
  (void)state;
  pto_scene_opts o = {0};
  pto_node_config cfg;
  static const int devs[1] = {TEST_DEV0};
  dist_config(&o, 1, orch_init, &cfg);
  cfg.device_ids = devs;
  cfg.nworkers = 2;
  cfg.chip.clusters = 1;
  cfg.host_bytes = 1u << 20;
  cfg.window_space = 16u << 20;
  cfg.task_timeout_ms = 5000;
  cfg.quiet = true;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rc) fprintf(stderr, "node create: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  views v;
  memset(&v, 0, sizeof v);
  int64_t sh = N, s8 = 8, s32 = N / 2;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &sh, &v.x), 0);
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &sh, &v.y), 0);
  memset(v.x.buf, 0, N * sizeof(float));
  memset(v.y.buf, 0, N * sizeof(float));
  assert_int_equal(
      pto_tensor_init(&v.x_inner, (float *)v.x.buf + 8, 8 * sizeof(float), PTO_F32, 1, &s8), 0);
  assert_int_equal(pto_tensor_init(&v.x_as_i64, v.x.buf, N * sizeof(float), PTO_I64, 1, &s32), 0);
  rc = pto_node_run(n, orch, &v, &err);
  if (rc) fprintf(stderr, "node run: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  for (int i = 0; i < 5; i++)
    assert_int_equal(v.rc[i], 0);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    uint32_t got, want = i >= 8 && i < 16 ? 0x11111111u : 0;
    memcpy(&got, &v.seen[i], 4);
    if (got != want && bad++ < 3)
      fprintf(stderr, "pto_node_read after a writer of x + 8: x[%d] is %08x, want %08x\n", i, got,
              want);
  }
  for (int i = 0; i < 8; i++) {
    uint32_t got, want = 0x11111111u; /* what x + 8 held before the i64 writer */
    memcpy(&got, (float *)v.y.buf + i, 4);
    if (got != want && bad++ < 6)
      fprintf(stderr, "slow reader of x + 8 then a writer of x as i64: y[%d] is %08x, want %08x\n",
              i, got, want);
  }
  for (int i = 0; i < N; i++) {
    uint32_t got, want = 0x22222222u; /* the i64 writer came last */
    memcpy(&got, (float *)v.x.buf + i, 4);
    if (got != want && bad++ < 9)
      fprintf(stderr, "x after the last writer (x as i64): x[%d] is %08x, want %08x\n", i, got,
              want);
  }
  pto_node_destroy(n);
  if (bad) fail_msg("%d values differ from submission order", bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interior_pointer_host_views_are_ordered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
