/* test_dist_broken_publisher.c — a test-tree-only program that announces
 * its data with a plain remote store into the peer's signal cell instead of
 * pto_notify (the reference's dropped-write bug). With ordering fault
 * injection on, the reader must see stale data every time (deterministic:
 * the cell lands first and the data is held until the reader's task has
 * ended); so the acceptance scenes, which pass with it on, would catch the
 * bug. The correct publisher (notify) is checked alongside. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "comm/comm.h"
#include "comm/signal.h"
#include "scenes/dist_scene.h"

static int k_pub;

static int pub_kernel(const pto_kctx *ctx) { /* tensors: in, dst (mine), sig (mine), out */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  bool broken = DIST_SCALAR(ctx, 1) != 0;
  pto_comm *c = pto_kctx_comm(ctx);
  const pto_tensor *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  if (pto_comm_rank(c, dom) == 0) { /* the publisher */
    int rc = pto_remote_store(ctx, dom, 1, dst, &ctx->tensors[0]);
    if (rc || !broken) return rc ? rc : pto_notify(ctx, dom, 1, sig, PTO_SIGNAL_SET, 1);
    /* the bug: a plain store of "signal = 1" into the peer's cell */
    int64_t word = (int64_t)sig_pack(c->epoch, 1), one = 1;
    pto_tensor w;
    pto_tensor_init(&w, &word, sizeof word, PTO_I64, 1, &one);
    return pto_remote_store(ctx, dom, 1, sig, &w);
  }
  int rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) dist_copy(&ctx->tensors[3], dst);
  return rc;
}

static int pub_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "publisher", pub_kernel, &k_pub);
}

typedef struct pub_io {
  pto_tensor in, out;
  bool broken;
} pub_io;

static void pub_node(pto_node_orch *no, void *arg) {
  pub_io *io = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t n = DIST_SIZE, one = 1;
    pto_tensor in = dist_row(&io->in, r), dst, sig;
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst);
    pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
    pto_args_input(&a, &in);
    pto_args_inout(&a, &dst);
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &io->out);
  }
  dist_scalars(&a, 0, 4, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_args_scalar(&a, io->broken);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

/* Returns true when rank 1 received rank 0's row. */
static bool publish(bool broken, bool fault, unsigned seed) {
  pto_scene_opts o = {0};
  o.fault_inject = fault;
  o.seed = seed;
  pto_node_config cfg;
  dist_config(&o, 2, pub_init, &cfg);
  pto_node *n;
  assert_int_equal(pto_node_create(&cfg, &n, NULL), 0);
  pub_io io = {.broken = broken};
  int64_t sh = DIST_SIZE;
  dist_inputs(n, 2, &io.in);
  pto_node_host_tensor(n, PTO_F32, 1, &sh, &io.out);
  pto_error_info err;
  int rc = pto_node_run(n, pub_node, &io, &err);
  if (rc) fprintf(stderr, "run: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  float want[DIST_SIZE];
  for (int i = 0; i < DIST_SIZE; i++)
    want[i] = (float)i;
  bool ok = memcmp(io.out.buf, want, sizeof want) == 0;
  if (!ok && !broken) {
    pto_scene_report rep = {0};
    scene_check_f32(&rep, "correct publisher out", io.out.buf, want, DIST_SIZE, 0.0f);
  }
  pto_node_destroy(n);
  return ok;
}

static void test_broken_publisher_is_caught(void **state) {
  (void)state;
  for (unsigned seed = 1; seed <= 5; seed++) {
    bool ok = publish(true, true, seed);
    if (ok) fprintf(stderr, "seed %u: the broken publisher was NOT caught\n", seed);
    assert_false(ok);
  }
}

static void test_correct_publisher_passes(void **state) {
  (void)state;
  assert_true(publish(false, false, 0));
  for (unsigned seed = 1; seed <= 3; seed++)
    assert_true(publish(false, true, seed));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broken_publisher_is_caught),
      cmocka_unit_test(test_correct_publisher_passes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
