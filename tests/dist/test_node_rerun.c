/* test_node_rerun.c — a node runs again, right after a run that failed,
 * with exact results and promptly (well before any deadline): nothing of
 * the failed run (a cancel word, a signal cell, a collective's state, a
 * domain, the error latch, the counters) reaches the next one. Each failed
 * run is followed by runs of other shapes: the same three-chip domain, a
 * two-chip domain over other chips, two group tasks in one run.
 *
 * Failed runs: chip 1 fails between two allreduces while its peers wait in
 * the second; chip 1 fails while its peers wait in a barrier; a host task
 * fails while a group task runs; chip 1's kernel outlives the chip
 * watchdog while its peers wait in a barrier; a group task fails and an
 * independent group task of the same run, on the same domain, runs after
 * it. */
#include <errno.h>
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

enum { NCHIPS = 3, N = 16, DEV0 = 88 };
enum { K_WORK = 0 };
/* what chip 1 does in K_WORK (the others do the work) */
enum { F_NONE = 0, F_FAIL_MID = 1, F_FAIL_BARRIER = 2, F_HANG = 3 };
#define DEADLINE_MS 20000
#define BUDGET_MS   3000

static int kid = -1;

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* tensors: this rank's scratch, the result (N f32); scalars: fault,
 * domain, rounds, base. rounds allreduces of (base + 100 chip + i), then
 * a barrier; the result is the last sum. */
static int work_kernel(const pto_kctx *ctx) {
  int fault = (int)DIST_SCALAR(ctx, 0);
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 1);
  int rounds = (int)DIST_SCALAR(ctx, 2), base = (int)DIST_SCALAR(ctx, 3);
  int chip = pto_comm_chip(pto_kctx_comm(ctx));
  bool victim = chip == 1 && fault != F_NONE;
  if (victim && fault == F_FAIL_BARRIER) return pto_kctx_fail(ctx, PTO_EFATAL, "chip 1 gives up");
  if (victim && fault == F_HANG) {
    sleep_ms(1500); /* past the chip watchdog */
    return 0;
  }
  float in[N];
  int64_t n = N;
  pto_tensor src;
  pto_tensor_init(&src, in, sizeof in, PTO_F32, 1, &n);
  for (int r = 0; r < rounds; r++) {
    if (victim && r == 1) return pto_kctx_fail(ctx, PTO_EFATAL, "chip 1 gives up mid-way");
    for (int i = 0; i < N; i++)
      in[i] = (float)(base + r + 100 * chip + i);
    int rc = pto_allreduce(ctx, dom, &ctx->tensors[0], &ctx->tensors[1], &src, PTO_RED_SUM,
                           PTO_COLL_AUTO);
    if (rc) return rc;
  }
  return pto_barrier(ctx, dom);
}

static int rerun_init(pto_chip *chip, int rank, void *arg) {
  (void)rank, (void)arg;
  int rc = pto_kernel_register_aiv(chip, "work", work_kernel, &kid);
  return rc ? rc : kid == K_WORK ? 0 : 1;
}

static int host_fail(const pto_args *a, void *arg) {
  (void)a, (void)arg;
  sleep_ms(30);
  return PTO_EFATAL;
}

typedef struct group_spec {
  int nchips;
  int chips[NCHIPS];
  int fault, rounds, base;
  float *out; /* nchips x N */
} group_spec;

typedef struct run_spec {
  int ngroups;      /* group tasks, one after the other (each its own scratch) */
  group_spec g[2];  /* over one domain of g[0]'s chips */
  bool host_failer; /* a failing host task beside */
  int rc[4];
} run_spec;

static void rerun_node(pto_node_orch *no, void *p) {
  run_spec *rs = p;
  const group_spec *g0 = &rs->g[0];
  int64_t scratch = (int64_t)pto_coll_scratch_bytes(g0->nchips, N * sizeof(float));
  const pto_window_buffer bufs[] = {{"s0", (size_t)scratch}, {"s1", (size_t)scratch}};
  pto_domain dom;
  if ((rs->rc[0] = pto_node_domain_create(no, g0->chips, g0->nchips, bufs, 2, &dom))) return;
  if (rs->host_failer) {
    pto_args a;
    pto_args_init(&a);
    rs->rc[3] = pto_node_submit_host(no, 0, host_fail, NULL, &a, NULL);
  }
  for (int k = 0; k < rs->ngroups; k++) {
    const group_spec *g = &rs->g[k];
    pto_args a;
    pto_args_init(&a);
    int64_t n = N;
    for (int r = 0; r < g->nchips; r++) {
      pto_tensor t[2];
      if (pto_node_window_tensor(no, dom, r, k ? "s1" : "s0", PTO_U8, 1, &scratch, &t[0])) return;
      pto_tensor_init(&t[1], g->out + r * N, N * sizeof(float), PTO_F32, 1, &n);
      pto_args_inout(&a, &t[0]);
      pto_args_output_existing(&a, &t[1]);
    }
    dist_scalars(&a, K_WORK, 2, 1);
    pto_args_scalar(&a, (uint64_t)g->fault);
    pto_args_scalar(&a, (uint64_t)dom);
    pto_args_scalar(&a, (uint64_t)g->rounds);
    pto_args_scalar(&a, (uint64_t)g->base);
    rs->rc[1 + k] = pto_node_submit_group(no, g->chips, g->nchips, dist_chip_orch, &a, NULL);
  }
}

static pto_node *make_node(void) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  static const int devs[NCHIPS] = {DEV0, DEV0 + 1, DEV0 + 2};
  dist_config(&o, NCHIPS, rerun_init, &cfg);
  cfg.device_ids = devs;
  cfg.nworkers = 1;
  cfg.chip.clusters = 1;
  cfg.wait_timeout_ms = DEADLINE_MS;
  cfg.chip.watchdog_ms = 500;
  cfg.control_timeout_ms = 2 * DEADLINE_MS;
  cfg.quiet = true;
  return node_create_ok(&cfg);
}

static float *out_mem(pto_node *n) {
  float *out = pto_node_host_alloc(n, 2 * NCHIPS * N * sizeof(float));
  assert_non_null(out);
  return out;
}

/* The sum over g's chips of (base + rounds - 1 + 100 chip + i). */
static void check_group(const group_spec *g) {
  for (int r = 0; r < g->nchips; r++)
    for (int i = 0; i < N; i++) {
      float want = 0;
      for (int q = 0; q < g->nchips; q++)
        want += (float)(g->base + g->rounds - 1 + 100 * g->chips[q] + i);
      if (g->out[r * N + i] != want)
        fail_msg("group rank %d (chip %d) element %d: %g, expected %g", r, g->chips[r], i,
                 g->out[r * N + i], want);
    }
}

static int64_t timed_run(pto_node *n, run_spec *rs, int *rc, pto_error_info *err) {
  uint64_t t0 = pto_now_ns();
  *rc = pto_node_run(n, rerun_node, rs, err);
  return (int64_t)((pto_now_ns() - t0) / 1000000u);
}

/* The good runs after a failed one: three shapes, each exact and prompt. */
static void good_runs(pto_node *n, float *out, int salt) {
  for (int shape = 0; shape < 3; shape++) {
    run_spec rs;
    memset(&rs, 0, sizeof rs);
    memset(out, 0, 2 * NCHIPS * N * sizeof(float));
    rs.ngroups = 1;
    rs.g[0] = (group_spec){NCHIPS, {0, 1, 2}, F_NONE, 3, 1000 * salt + 10 * shape, out};
    if (shape == 1) rs.g[0] = (group_spec){2, {2, 0}, F_NONE, 2, 1000 * salt + 7, out};
    if (shape == 2) {
      rs.ngroups = 2;
      rs.g[1] = rs.g[0];
      rs.g[1].rounds = 1;
      rs.g[1].base += 5;
      rs.g[1].out = out + NCHIPS * N;
    }
    pto_error_info err;
    int rc;
    int64_t ms = timed_run(n, &rs, &rc, &err);
    if (rc)
      fprintf(stderr, "good run (shape %d): %s: %s\n", shape, pto_status_name(rc), err.details);
    assert_int_equal(rc, 0);
    assert_true(ms < BUDGET_MS);
    for (int k = 0; k < rs.ngroups; k++)
      check_group(&rs.g[k]);
    pto_node_stats st;
    assert_int_equal(pto_node_stats_get(n, &st), 0);
    assert_int_equal((int)st.node_tasks, rs.ngroups);
  }
}

static void failed_then_good(run_spec *bad, int want_rc, const char *cause) {
  pto_node *n = make_node();
  float *out = out_mem(n);
  good_runs(n, out, 0);
  for (int round = 1; round <= 2; round++) {
    for (int k = 0; k < bad->ngroups; k++)
      bad->g[k].out = out + k * NCHIPS * N;
    pto_error_info err;
    int rc;
    int64_t ms = timed_run(n, bad, &rc, &err);
    fprintf(stderr, "failed run: %s after %lld ms: %s\n", pto_status_name(rc), (long long)ms,
            err.details);
    assert_int_equal(rc, want_rc);
    assert_non_null(strstr(err.details, cause));
    assert_true(ms < BUDGET_MS);
    good_runs(n, out, round);
  }
  pto_node_destroy(n);
}

static void test_fail_mid_allreduces(void **state) {
  (void)state;
  run_spec rs = {.ngroups = 1, .g = {{NCHIPS, {0, 1, 2}, F_FAIL_MID, 3, 0, NULL}}};
  failed_then_good(&rs, PTO_EFATAL, "chip 1 gives up mid-way");
}

static void test_fail_in_barrier(void **state) {
  (void)state;
  run_spec rs = {.ngroups = 1, .g = {{NCHIPS, {0, 1, 2}, F_FAIL_BARRIER, 1, 0, NULL}}};
  failed_then_good(&rs, PTO_EFATAL, "chip 1 gives up");
}

static void test_host_task_fails(void **state) {
  (void)state;
  run_spec rs = {.ngroups = 1, .host_failer = true, .g = {{NCHIPS, {0, 1, 2}, F_NONE, 2, 3, NULL}}};
  failed_then_good(&rs, PTO_EFATAL, "host task returned");
}

static void test_watchdog_in_barrier(void **state) {
  (void)state;
  run_spec rs = {.ngroups = 1, .g = {{NCHIPS, {0, 1, 2}, F_HANG, 1, 0, NULL}}};
  failed_then_good(&rs, PTO_ESCHED_TIMEOUT, "");
}

/* A failed group task, then an independent one over the same domain (its
 * own scratch) in the same run: that one gives exact sums. */
static void test_group_after_failed_group(void **state) {
  (void)state;
  pto_node *n = make_node();
  float *out = out_mem(n);
  for (int round = 0; round < 3; round++) {
    memset(out, 0, 2 * NCHIPS * N * sizeof(float));
    run_spec rs = {.ngroups = 2,
                   .g = {{NCHIPS, {0, 1, 2}, round == 1 ? F_FAIL_BARRIER : F_FAIL_MID, 3, 0, out},
                         {NCHIPS, {0, 1, 2}, F_NONE, 2, 40 + round, out + NCHIPS * N}}};
    pto_error_info err;
    int rc;
    int64_t ms = timed_run(n, &rs, &rc, &err);
    fprintf(stderr, "failed group, then a good one: %s after %lld ms: %s\n", pto_status_name(rc),
            (long long)ms, err.details);
    assert_int_equal(rc, PTO_EFATAL);
    assert_true(ms < BUDGET_MS);
    check_group(&rs.g[1]);
  }
  good_runs(n, out, 9);
  pto_node_destroy(n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fail_mid_allreduces),      cmocka_unit_test(test_fail_in_barrier),
      cmocka_unit_test(test_host_task_fails),          cmocka_unit_test(test_watchdog_in_barrier),
      cmocka_unit_test(test_group_after_failed_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
