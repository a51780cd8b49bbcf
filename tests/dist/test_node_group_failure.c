/* test_node_group_failure.c — a chip of a group task that fails ends its
 * peers' waits at once. Chip 1's kernel fails while chips 0 and 2 wait for
 * it (in an allreduce, a barrier or a signal wait), with a domain deadline
 * of 60 s: the run reports chip 1's error within a few seconds, not at the
 * deadline, and the peers' own errors (their waits were ended) do not hide
 * it. On one chip alike: a kernel that fails ends a signal wait of another
 * kernel of the same chip's run at once, not at a parked waiter's periodic
 * re-check (the park10s build re-checks every 10 s). And peers that compute
 * and poll pto_kctx_cancelled (no wait at all) see it turn true at once,
 * not at their bound of POLL_MS. After each failed run
 * a good one (an allreduce of the three chips) gives the right sums: the
 * cancellation of run N reaches no task of run N + 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "node_create.h"

#include "common/clock.h"
#include "pto/coll.h"
#include "scenes/dist_scene.h"

enum { NCHIPS = 3, N = 16 };
enum { K_GROUP = 0, K_LOCAL_FAIL = 1, K_LOCAL_WAIT = 2 };
/* what the peers of the failing chip do; GOOD: no one fails */
enum { MODE_GOOD = 0, MODE_ALLREDUCE, MODE_BARRIER, MODE_SIGNAL, MODE_LOCAL, MODE_POLL };
#define DEADLINE_MS    60000
#define BUDGET_MS      3000 /* a failure named well before the deadline */
#define POLL_MS        5000 /* MODE_POLL: how long the peers compute uncancelled */
#define POLL_BUDGET_MS 1000 /* ... and the failure named well before that */
/* MODE_POLL: what a peer writes to its result */
#define POLL_CANCELLED 1.0f /* it saw pto_kctx_cancelled */
#define POLL_BOUND     2.0f /* it computed to the bound uncancelled */

static int ids[3];

/* tensors: this rank's scratch, the "sig" cell, the result; scalars: mode,
 * domain, MODE_POLL's bound (pto_now_ns: the chips share the host's
 * clock). Chip 1 fails (unless GOOD); the others wait for it, or compute
 * (sleep 1 ms at a time) until pto_kctx_cancelled or the bound. */
static int group_kernel(const pto_kctx *ctx) {
  int mode = (int)DIST_SCALAR(ctx, 0);
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 1);
  int chip = pto_comm_chip(pto_kctx_comm(ctx));
  if (mode != MODE_GOOD && chip == 1) return pto_kctx_fail(ctx, PTO_EFATAL, "chip 1 gives up");
  if (mode == MODE_POLL) {
    uint64_t bound = DIST_SCALAR(ctx, 2);
    float *out = pto_tensor_f32(&ctx->tensors[2]), v = POLL_CANCELLED;
    while (!pto_kctx_cancelled(ctx)) {
      if (pto_now_ns() >= bound) {
        v = POLL_BOUND;
        break;
      }
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    for (int i = 0; i < N; i++)
      out[i] = v;
    return 0;
  }
  if (mode == MODE_BARRIER) return pto_barrier(ctx, dom);
  if (mode == MODE_SIGNAL) /* chip 1 would notify it */
    return pto_signal_wait(ctx, dom, &ctx->tensors[1], PTO_CMP_GE, 1, -1);
  float in[N];
  for (int i = 0; i < N; i++)
    in[i] = (float)(chip * 100 + i);
  int64_t n = N;
  pto_tensor src;
  pto_tensor_init(&src, in, sizeof in, PTO_F32, 1, &n);
  return pto_allreduce(ctx, dom, &ctx->tensors[0], &ctx->tensors[2], &src, PTO_RED_SUM,
                       PTO_COLL_AUTO);
}

/* MODE_LOCAL on chip 0: one kernel fails 50 ms after the other parks in a
 * signal wait that no one will satisfy */
static int local_fail_kernel(const pto_kctx *ctx) {
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return pto_kctx_fail(ctx, PTO_EFATAL, "chip 0's other kernel gives up");
}
static int local_wait_kernel(const pto_kctx *ctx) {
  return pto_signal_wait(ctx, (pto_domain)ctx->scalars[0], &ctx->tensors[0], PTO_CMP_GE, 1, -1);
}

static int group_init(pto_chip *chip, int rank, void *arg) {
  (void)rank, (void)arg;
  int rc = pto_kernel_register_aiv(chip, "group", group_kernel, &ids[0]);
  if (!rc) rc = pto_kernel_register_aiv(chip, "local_fail", local_fail_kernel, &ids[1]);
  if (!rc) rc = pto_kernel_register_aiv(chip, "local_wait", local_wait_kernel, &ids[2]);
  return rc ? rc : ids[0] == K_GROUP && ids[1] == K_LOCAL_FAIL && ids[2] == K_LOCAL_WAIT ? 0 : 1;
}

/* chip 0 alone: both kernels in one run (no dependency between them) */
static void local_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_submit(o, K_LOCAL_FAIL, &a, NULL, NULL);
  pto_args_init(&a);
  pto_args_inout(&a, &t->args->tensors[0]);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_submit(o, K_LOCAL_WAIT, &a, NULL, NULL);
}

typedef struct run_arg {
  int mode;
  float *out; /* node host memory: NCHIPS results of N floats */
} run_arg;

static void group_node(pto_node_orch *no, void *p) {
  run_arg *ra = p;
  const int chips[NCHIPS] = {0, 1, 2};
  int64_t scratch = (int64_t)pto_coll_scratch_bytes(NCHIPS, N * sizeof(float));
  const pto_window_buffer bufs[] = {{"scratch", (size_t)scratch}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, NCHIPS, bufs, 2, &dom)) return;
  int64_t one = 1, n = N;
  pto_args a;
  pto_args_init(&a);
  if (ra->mode == MODE_LOCAL) {
    pto_tensor sig;
    if (pto_node_window_tensor(no, dom, 0, "sig", PTO_I64, 1, &one, &sig)) return;
    pto_args_inout(&a, &sig);
    pto_args_scalar(&a, (uint64_t)dom);
    pto_node_submit(no, 0, local_orch, &a, NULL);
    return;
  }
  for (int r = 0; r < NCHIPS; r++) {
    pto_tensor t[3];
    if (pto_node_window_tensor(no, dom, r, "scratch", PTO_U8, 1, &scratch, &t[0]) ||
        pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &t[1]))
      return;
    pto_tensor_init(&t[2], ra->out + r * N, N * sizeof(float), PTO_F32, 1, &n);
    pto_args_inout(&a, &t[0]);
    pto_args_inout(&a, &t[1]);
    pto_args_output_existing(&a, &t[2]);
  }
  dist_scalars(&a, K_GROUP, 3, 1);
  pto_args_scalar(&a, (uint64_t)ra->mode);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_args_scalar(&a, pto_now_ns() + (uint64_t)POLL_MS * 1000000u);
  pto_node_submit_group(no, chips, NCHIPS, dist_chip_orch, &a, NULL);
}

static pto_node *make_node(void) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  dist_config(&o, NCHIPS, group_init, &cfg);
  cfg.wait_timeout_ms = DEADLINE_MS;
  cfg.chip.watchdog_ms = 2 * DEADLINE_MS;
  cfg.control_timeout_ms = 2 * DEADLINE_MS;
  cfg.quiet = true;
  return node_create_ok(&cfg);
}

static void good_run(pto_node *n, float *out) {
  memset(out, 0, NCHIPS * N * sizeof(float));
  run_arg ra = {MODE_GOOD, out};
  pto_error_info err;
  int rc = pto_node_run(n, group_node, &ra, &err);
  if (rc) fprintf(stderr, "good run: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  for (int r = 0; r < NCHIPS; r++)
    for (int i = 0; i < N; i++) {
      float want = (float)(300 + 3 * i); /* (0 + 100 + 200) + 3 i */
      if (out[r * N + i] != want)
        fail_msg("chip %d element %d: %g, expected %g", r, i, out[r * N + i], want);
    }
}

static void failed_run(int mode, const char *cause) {
  pto_node *n = make_node();
  float *out = pto_node_host_alloc(n, NCHIPS * N * sizeof(float));
  assert_non_null(out);
  good_run(n, out);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < NCHIPS * N; i++)
      out[i] = -7.0f; /* a peer that did not run leaves it */
    run_arg ra = {mode, out};
    pto_error_info err;
    uint64_t t0 = pto_now_ns();
    int rc = pto_node_run(n, group_node, &ra, &err);
    int64_t ms = (int64_t)((pto_now_ns() - t0) / 1000000u);
    fprintf(stderr, "%s after %lld ms: %s\n", pto_status_name(rc), (long long)ms, err.details);
    assert_int_equal(rc, PTO_EFATAL);
    assert_non_null(strstr(err.details, cause));
    assert_true(ms < BUDGET_MS); /* before: the peers waited out DEADLINE_MS */
    if (mode == MODE_POLL) {
      for (int r = 0; r < NCHIPS; r += 2)
        fprintf(stderr, "chip %d's kernel: %s\n", r,
                out[r * N] == POLL_CANCELLED ? "saw pto_kctx_cancelled"
                : out[r * N] == POLL_BOUND   ? "computed to its bound"
                                             : "did not start");
      assert_true(ms < POLL_BUDGET_MS); /* before: the peers computed to POLL_MS */
      assert_true(out[0] != POLL_BOUND && out[2 * N] != POLL_BOUND);
    }
    good_run(n, out);
  }
  pto_node_destroy(n);
}

static void test_peers_in_an_allreduce(void **state) {
  (void)state;
  failed_run(MODE_ALLREDUCE, "chip 1 gives up");
}

static void test_peers_in_a_barrier(void **state) {
  (void)state;
  failed_run(MODE_BARRIER, "chip 1 gives up");
}

static void test_peers_in_a_signal_wait(void **state) {
  (void)state;
  failed_run(MODE_SIGNAL, "chip 1 gives up");
}

static void test_a_kernel_of_the_same_run(void **state) {
  (void)state;
  failed_run(MODE_LOCAL, "chip 0's other kernel gives up");
}

/* The peers compute and poll pto_kctx_cancelled: the node's cancel of
 * their task (chip 1 failed) makes it true in them. */
static void test_peers_polling_cancelled(void **state) {
  (void)state;
  failed_run(MODE_POLL, "chip 1 gives up");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peers_in_an_allreduce),
      cmocka_unit_test(test_peers_in_a_barrier),
      cmocka_unit_test(test_peers_in_a_signal_wait),
      cmocka_unit_test(test_a_kernel_of_the_same_run),
      cmocka_unit_test(test_peers_polling_cancelled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
