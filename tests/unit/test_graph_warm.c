/* test_graph_warm.c — warm graph launches (docs/graphs.md, "Warm
 * launches"): when the chip's run before was this graph's successful
 * launch, the next launch writes no task slot (each completion set its
 * slot's fanin and counts back) and pushes the roots. Checked here: every
 * warm launch computes what a sequential run computes, with new data and
 * scalars each time, and pto_graph_info counts it as warm; and each thing
 * that leaves the slots otherwise makes the next launch a cold one that is
 * still right: a launch that failed half way, a dynamic run, another
 * graph's launch, a traced launch; a refused launch starts no run and
 * keeps the next one warm; a graph with more roots than one push batch is
 * never launched warm. White box (run.h): in a warm launch, a task that
 * has not run yet reads as pending, not as done by the launch before.
 * Each scene prints the first wrong element with the actual and expected
 * values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "chip/run.h" /* white box: task_state */
#include "pto/pto.h"

#define N     96 /* elements per buffer */
#define CHAIN 20 /* INOUT tasks on a after its producer */
#define SCAL  3  /* scalars per task: k, mode, fail */
#define WIDE  80 /* independent tasks of the wide graph: more than one push batch (64) */

enum { MODE_SET = 0, MODE_ACC = 1 };
enum { FAIL = 1, PROBE = 2 }; /* the third scalar */

#define NTASKS (3 + CHAIN)

/* the state of the last task (the join) as a PROBE task saw it */
static int probe_seen = -1;

/* mode SET: out = in * 3 + k; mode ACC: out = out * 3 + in + k; over the
 * block's share of out. fail != 0: the kernel fails (before writing). */
static int k_step(const pto_kctx *c) {
  if (c->scalars[2] == FAIL) return pto_kctx_fail(c, PTO_EKERNEL, "told to fail");
  if (c->scalars[2] == PROBE && c->block_idx == 0) {
    pto_run *r = (pto_run *)c->run;
    probe_seen = task_state(r, run_slot(r, NTASKS - 1), memory_order_acquire);
  }
  const pto_tensor *out = &c->tensors[0], *in = &c->tensors[1];
  int64_t n = pto_tensor_numel(out);
  int64_t lo = n * c->block_idx / c->block_num, hi = n * (c->block_idx + 1) / c->block_num;
  for (int64_t i = lo; i < hi; i++) {
    /* unsigned: the chain's values wrap (as the sequential computation's) */
    uint32_t *o = pto_tensor_at_linear(out, i);
    uint32_t x = *(uint32_t *)pto_tensor_at_linear(in, i);
    *o = (c->scalars[1] == MODE_ACC ? *o * 3u : 0u) + x * (c->scalars[1] == MODE_ACC ? 1u : 3u) +
         (uint32_t)c->scalars[0];
  }
  return 0;
}

static int kid;

typedef struct prog {
  int32_t *x, *a, *b;
  bool wide; /* WIDE independent tasks on a's elements instead */
} prog;

static void view(pto_tensor *t, int32_t *p, int64_t n) {
  int64_t shape[1] = {n};
  pto_tensor_init(t, p, sizeof(int32_t) * (size_t)n, PTO_I32, 1, shape);
}

static void step(pto_orch *o, pto_access mode, pto_tensor *out, const pto_tensor *in, uint64_t k,
                 int blocks) {
  pto_args a;
  pto_args_init(&a);
  pto_args_add(&a, mode, out);
  pto_args_input(&a, in);
  pto_args_scalar(&a, k);
  pto_args_scalar(&a, mode == PTO_INOUT ? MODE_ACC : MODE_SET);
  pto_args_scalar(&a, 0);
  pto_submit_opts op = {.block_num = blocks};
  assert_int_equal(pto_submit(o, kid, &a, &op, NULL), PTO_OK);
}

/* a = x*3 + k (2 blocks), b = x*3 + k (roots); CHAIN times a = a*3 + x + k
 * (1 or 2 blocks); b = b*3 + a + k (the join). Or, wide: WIDE roots, task
 * i sets a[i] = x[i]*3 + k. */
static void orchestrate(pto_orch *o, void *arg) {
  prog *p = arg;
  pto_tensor x, a, b;
  if (p->wide) {
    for (int i = 0; i < WIDE; i++) {
      view(&x, p->x + i, 1);
      view(&a, p->a + i, 1);
      step(o, PTO_OUTPUT_EXISTING, &a, &x, (uint64_t)i, 1);
    }
    return;
  }
  view(&x, p->x, N);
  view(&a, p->a, N);
  view(&b, p->b, N);
  step(o, PTO_OUTPUT_EXISTING, &a, &x, 1, 2);
  step(o, PTO_OUTPUT_EXISTING, &b, &x, 2, 1);
  for (int i = 0; i < CHAIN; i++)
    step(o, PTO_INOUT, &a, &x, (uint64_t)(10 + i), 1 + i % 2);
  step(o, PTO_INOUT, &b, &a, 3, 2);
}

/* The scalars of launch `seed`: task i's k, its mode as captured, and a
 * failure at task `fail` (-1: none); the first chain task probes. */
static void scalars_for(uint64_t *s, int seed, int fail) {
  for (int i = 0; i < NTASKS; i++) {
    s[SCAL * i] = (uint64_t)(seed * 5 + i);
    s[SCAL * i + 1] = i < 2 ? MODE_SET : MODE_ACC;
    s[SCAL * i + 2] = i == fail ? FAIL : i == 2 ? PROBE : 0;
  }
}

static void sequential(const int32_t *x, const uint64_t *s, int32_t *a, int32_t *b) {
  for (int e = 0; e < N; e++) {
    uint32_t xe = (uint32_t)x[e], ae = xe * 3u + (uint32_t)s[0], be = xe * 3u + (uint32_t)s[SCAL];
    for (int i = 0; i < CHAIN; i++)
      ae = ae * 3u + xe + (uint32_t)s[SCAL * (2 + i)];
    be = be * 3u + ae + (uint32_t)s[SCAL * (2 + CHAIN)];
    a[e] = (int32_t)ae;
    b[e] = (int32_t)be;
  }
}

static void expect_equal(const char *what, int launch, const int32_t *got, const int32_t *want,
                         int n) {
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) {
      fail_msg("launch %d: %s[%d] = %d, expected %d", launch, what, i, got[i], want[i]);
    }
}

typedef struct fixture {
  pto_chip *chip;
  pto_graph *g;
  int32_t x[N], a[N], b[N], wa[N], wb[N];
  prog p;
  int launches;
} fixture;

static pto_chip *new_chip(void) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 2;
  cfg.task_slots = 128;
  cfg.watchdog_ms = 3000; /* a launch that lost a release fails instead of hanging */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "step", k_step, &kid), PTO_OK);
  return chip;
}

static void capture(fixture *f, bool wide) {
  for (int i = 0; i < N; i++)
    f->x[i] = i % 13 - 6;
  f->p = (prog){f->x, f->a, f->b, wide};
  pto_error_info err;
  int rc = pto_graph_capture(f->chip, orchestrate, &f->p, &f->g, NULL, &err);
  if (rc) fail_msg("capture: %s", err.details);
}

static void info(const fixture *f, int64_t launches, int64_t warm) {
  pto_graph_info gi;
  assert_int_equal(pto_graph_get_info(f->g, &gi), PTO_OK);
  if (gi.launches != launches || gi.warm_launches != warm)
    fail_msg("launches %lld (warm %lld), expected %lld (warm %lld)", (long long)gi.launches,
             (long long)gi.warm_launches, (long long)launches, (long long)warm);
}

/* Launch with new data (x from seed) and scalars; `fail`: the task that
 * fails (-1: none). Checks the result against the sequential one, or the
 * failure. */
static void launch(fixture *f, int seed, int fail) {
  uint64_t s[SCAL * NTASKS];
  pto_graph_info gi;
  assert_int_equal(pto_graph_get_info(f->g, &gi), PTO_OK);
  assert_int_equal(gi.scalars, SCAL * NTASKS);
  scalars_for(s, seed, fail);
  for (int i = 0; i < N; i++) {
    f->x[i] = (i * 7 + seed * 11) % 23 - 11;
    f->a[i] = f->b[i] = -999;
  }
  pto_graph_bindings bd = {.nscalars = SCAL * NTASKS, .scalars = s};
  pto_error_info err;
  pto_run_stats st;
  probe_seen = -1;
  int rc = pto_graph_launch(f->chip, f->g, &bd, &st, &err);
  f->launches++;
  if (fail >= 0) {
    if (rc != PTO_EKERNEL)
      fail_msg("launch %d: rc %d (%s), expected PTO_EKERNEL", f->launches, rc, err.details);
    return;
  }
  if (rc) fail_msg("launch %d: rc %d: %s", f->launches, rc, err.details);
  /* the join waits for the whole chain: not done when its first task runs */
  if (probe_seen != TASK_PENDING)
    fail_msg("launch %d: the last task's state read %d while the chain's first ran, expected "
             "%d (pending)",
             f->launches, probe_seen, TASK_PENDING);
  assert_int_equal(st.tasks, NTASKS);
  sequential(f->x, s, f->wa, f->wb);
  expect_equal("a", f->launches, f->a, f->wa, N);
  expect_equal("b", f->launches, f->b, f->wb, N);
}

static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->chip = new_chip();
  capture(f, false);
}

static void teardown(fixture *f) {
  pto_graph_destroy(f->g);
  pto_chip_destroy(f->chip);
}

/* Launches after the first are warm, each with new data and scalars. */
static void test_warm_launches(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  for (int i = 0; i < 6; i++)
    launch(&f, i, -1);
  info(&f, 6, 5);
  teardown(&f);
}

/* A launch that fails half way leaves fanins and counts part spent: the
 * next launch is cold (and right), the one after it warm again. Failing
 * at the first chain task, in its middle and at the join. */
static void test_failed_launch(void **state) {
  (void)state;
  static const int fails[] = {2, 2 + CHAIN / 2, NTASKS - 1};
  for (int k = 0; k < 3; k++) {
    fixture f;
    setup(&f);
    launch(&f, 1, -1);
    launch(&f, 2, -1);       /* warm */
    launch(&f, 3, fails[k]); /* warm, and fails */
    launch(&f, 4, -1);       /* cold: the failed one left its slots part spent */
    launch(&f, 5, -1);       /* warm */
    info(&f, 5, 3);
    teardown(&f);
  }
}

/* A dynamic run writes the slots: the launch after it is cold. */
static int32_t dyn_out[64], dyn_in[64];
static void dynamic_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor in, out;
  for (int i = 0; i < 64; i++) {
    view(&in, dyn_in + i, 1);
    view(&out, dyn_out + i, 1);
    step(o, PTO_OUTPUT_EXISTING, &out, &in, (uint64_t)i, 1);
  }
}

/* Two launches, a dynamic run, then `later` more runs counted (white box:
 * the chip's run counter moved on), then a cold launch and a warm one. */
static void dynamic_between(uint64_t later) {
  fixture f;
  setup(&f);
  launch(&f, 1, -1);
  launch(&f, 2, -1);
  for (int i = 0; i < 64; i++)
    dyn_in[i] = i;
  assert_int_equal(pto_chip_run(f.chip, dynamic_orch, NULL, NULL, NULL), PTO_OK);
  for (int i = 0; i < 64; i++)
    assert_int_equal(dyn_out[i], 3 * i + i);
  f.chip->run_seq += later;
  launch(&f, 3, -1); /* cold */
  launch(&f, 4, -1); /* warm */
  info(&f, 4, 2);
  teardown(&f);
}

static void test_dynamic_run_between(void **state) {
  (void)state;
  dynamic_between(0);
}

/* The same, with 2^32 - 1 runs more counted between them: the launch is as
 * far from its graph's last one as ever, and must be cold. A counter of 32
 * bits wrapped there, took the launch for the one right after the graph's
 * last, and ran it warm over the dynamic run's slots. */
static void test_run_count_wraps_between(void **state) {
  (void)state;
  dynamic_between(UINT32_MAX);
}

/* Another graph's launch (and its capture) in between: cold. */
static void test_other_graph_between(void **state) {
  (void)state;
  fixture f, w;
  setup(&f);
  memset(&w, 0, sizeof w);
  w.chip = f.chip;
  capture(&w, true);
  launch(&f, 1, -1); /* cold: the capture of w ran last */
  launch(&f, 2, -1); /* warm */
  assert_int_equal(pto_graph_launch(f.chip, w.g, NULL, NULL, NULL), PTO_OK);
  launch(&f, 3, -1); /* cold */
  assert_int_equal(pto_graph_launch(f.chip, w.g, NULL, NULL, NULL), PTO_OK);
  launch(&f, 4, -1); /* cold */
  launch(&f, 5, -1); /* warm */
  info(&f, 5, 2);
  pto_graph_destroy(w.g);
  teardown(&f);
}

/* A refused launch starts no run: the slots stay, the next one is warm. */
static void test_refused_launch_keeps_warm(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  launch(&f, 1, -1);
  uint64_t s[2] = {0, 0};
  pto_graph_bindings bad = {.nscalars = 2, .scalars = s};
  pto_error_info err;
  assert_int_equal(pto_graph_launch(f.chip, f.g, &bad, NULL, &err), PTO_EGRAPH);
  launch(&f, 2, -1); /* warm */
  info(&f, 2, 1);
  teardown(&f);
}

/* A launch the chip refuses (PTO_EBUSY: it is running; here from that
 * run's orchestration) starts no run: it is not counted in
 * pto_graph_info.launches ("launches that ran"). Before, it was. */
static int busy_rc;
static char busy_why[512];
static void busy_orch(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_error_info err;
  busy_rc = pto_graph_launch(f->chip, f->g, NULL, NULL, &err);
  snprintf(busy_why, sizeof busy_why, "%s", err.details);
  (void)o;
}

static void test_busy_launch_not_counted(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  launch(&f, 1, -1);
  busy_rc = 0;
  assert_int_equal(pto_chip_run(f.chip, busy_orch, &f, NULL, NULL), PTO_OK);
  if (busy_rc != PTO_EBUSY)
    fail_msg("the launch inside a run returned %s (%s), expected PTO_EBUSY",
             pto_status_name(busy_rc), busy_why);
  info(&f, 1, 0);
  launch(&f, 2, -1); /* cold: a run came between */
  launch(&f, 3, -1); /* warm */
  info(&f, 3, 1);
  teardown(&f);
}

/* A traced launch fills every slot before its first push: not warm, and
 * its own completions leave the slots as a warm launch needs them, but
 * only a launch on the fill-as-you-push path counts; after it, cold. */
static void test_traced_launch_between(void **state) {
  (void)state;
  char path[] = "/tmp/pto_warm_traceXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  fixture f;
  setup(&f);
  launch(&f, 1, -1);
  assert_int_equal(pto_chip_set_trace(f.chip, path), PTO_OK);
  launch(&f, 2, -1); /* traced: cold */
  assert_int_equal(pto_chip_set_trace(f.chip, NULL), PTO_OK);
  launch(&f, 3, -1); /* cold */
  launch(&f, 4, -1); /* warm */
  info(&f, 4, 1);
  teardown(&f);
  unlink(path);
}

/* More roots than one push batch: launched cold every time. */
static void test_many_roots_never_warm(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  f.chip = new_chip();
  capture(&f, true);
  for (int l = 0; l < 3; l++) {
    for (int i = 0; i < WIDE; i++) {
      f.x[i] = i * 5 - l;
      f.a[i] = -1;
    }
    assert_int_equal(pto_graph_launch(f.chip, f.g, NULL, NULL, NULL), PTO_OK);
    for (int i = 0; i < WIDE; i++)
      if (f.a[i] != f.x[i] * 3 + i) fail_msg("a[%d] = %d, expected %d", i, f.a[i], f.x[i] * 3 + i);
  }
  info(&f, 3, 0);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warm_launches),
      cmocka_unit_test(test_failed_launch),
      cmocka_unit_test(test_dynamic_run_between),
      cmocka_unit_test(test_run_count_wraps_between),
      cmocka_unit_test(test_other_graph_between),
      cmocka_unit_test(test_refused_launch_keeps_warm),
      cmocka_unit_test(test_busy_launch_not_counted),
      cmocka_unit_test(test_traced_launch_between),
      cmocka_unit_test(test_many_roots_never_warm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
