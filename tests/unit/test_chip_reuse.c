/* test_chip_reuse.c — one chip, many runs (docs/chip.md, "Run lifecycle"):
 * the chip's threads and run state are made at its first run and reset by
 * every later one, so nothing of run N may show in run N+1.
 *
 *  - many runs of varied shapes (chains, fan-out, MIX, several blocks,
 *    sync_start gangs, scoped OUTPUT buffers) with failures interleaved (a
 *    kernel error, a cancelled kernel, a watchdog timeout, a bad submit,
 *    a task ring that stays full past alloc_timeout_ms):
 *    every run's status, results and stats are its own;
 *  - a dependency mark left in a task slot by run N must not drop a
 *    dependency in run N+1 (task ids restart at 0, slots are reused);
 *  - a straggler: a kernel of run N that ignores cancellation and returns
 *    long after its run ended; the next run says the chip cannot run yet
 *    and which core holds it, the one after it returned runs normally and
 *    the straggler's late block shows in no later run;
 *  - an async completion of run N that comes during run N+1 is refused
 *    (PTO_EASYNC_INVALID to its caller) and leaves run N+1 alone;
 *  - pto_chip_destroy with a kernel still stuck returns within
 *    shutdown_ms; the straggler frees the chip when it returns (ASan);
 *  - pto_chip_destroy during a run (from its orchestration, or from
 *    another thread while a kernel runs) does nothing and pto_last_error
 *    says why; from the orchestration the run fails with PTO_EBUSY naming
 *    it; the next run of the chip runs normally;
 *  - a run wakes only the cores it uses: back-to-back one-task runs are
 *    entered by one core each, empty runs by none;
 *  - the watchdog's window is per run: runs that each idle for most of
 *    watchdog_ms, back to back, are never stopped before watchdog_ms of
 *    their own (under load, one whose idling overran it may be);
 *  - a run that fails while ready tasks are still queued (a kernel error,
 *    pto_orch_fatal, a watchdog timeout), with the default role and with
 *    scheduler threads: none of its queued blocks runs in the next run,
 *    whose one task runs once and writes its output. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "chip/run.h" /* white box: which threads took part in a run */
#include "hang_alarm.h"
#include "pto/pto.h"

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- kernels ---- */

static int64_t *i64(const pto_kctx *c, int i) { return (int64_t *)c->tensors[i].buf; }

/* INOUT t0[0] += 1 */
static int k_inc(const pto_kctx *c) {
  i64(c, 0)[0]++;
  return 0;
}
/* t0[block] = scalar0 + block */
static int k_put(const pto_kctx *c) {
  i64(c, 0)[c->block_idx] = (int64_t)c->scalars[0] + c->block_idx;
  return 0;
}
/* MIX: t0[block * 3 + part] = scalar0 (part 0 AIC, 1-2 the AIVs) */
static int k_mix_aic(const pto_kctx *c) {
  i64(c, 0)[c->block_idx * 3] = (int64_t)c->scalars[0];
  return 0;
}
static int k_mix_aiv(const pto_kctx *c) {
  i64(c, 0)[c->block_idx * 3 + 1 + c->sub_block_id] = (int64_t)c->scalars[0];
  return 0;
}
/* sync_start gang: every block counts itself in t0[0] and waits for all */
static int k_gang(const pto_kctx *c) {
  _Atomic int64_t *n = (_Atomic int64_t *)i64(c, 0);
  atomic_fetch_add(n, 1);
  while (atomic_load(n) < c->block_num)
    if (pto_kctx_cancelled(c)) return -1;
  return 0;
}
/* t1[i] = t0[i] * 2 for an INPUT t0 of 8 values */
static int k_double(const pto_kctx *c) {
  for (int i = 0; i < 8; i++)
    i64(c, 1)[i] = i64(c, 0)[i] * 2;
  return 0;
}
static int k_fail(const pto_kctx *c) {
  (void)c;
  return 7; /* not a pto status: PTO_EKERNEL */
}
/* polls cancellation and returns when told: the well-behaved long kernel */
static _Atomic int polled_in, polled_out;
static int k_poll(const pto_kctx *c) {
  atomic_fetch_add(&polled_in, 1);
  while (!pto_kctx_cancelled(c))
    sleep_us(200);
  atomic_fetch_add(&polled_out, 1);
  return 0;
}
/* begins an async completion that never comes */
static int k_async_lost(const pto_kctx *c) {
  uint64_t t;
  return pto_kctx_async_begin(c, &t);
}
/* sleeps, then writes scalar0 to t0[0] */
static int k_slow_write(const pto_kctx *c) {
  sleep_us(20000);
  i64(c, 0)[0] = (int64_t)c->scalars[0];
  return 0;
}
/* t1[0] = t0[0] */
static int k_copy(const pto_kctx *c) {
  i64(c, 1)[0] = i64(c, 0)[0];
  return 0;
}
/* the head of a chain that outlasts alloc_timeout_ms: returns when the
 * run is cancelled (or after 5 s), without writing */
static int k_slow_head(const pto_kctx *c) {
  for (int i = 0; i < 5000 && !pto_kctx_cancelled(c); i++)
    sleep_us(1000);
  return 0;
}
/* ignores cancellation until released */
static _Atomic int stuck_release, stuck_in, stuck_out;
static int k_stuck(const pto_kctx *c) {
  (void)c;
  atomic_store(&stuck_in, 1);
  while (!atomic_load(&stuck_release))
    sleep_us(1000);
  atomic_store(&stuck_out, 1);
  return 0;
}

/* holds its AIV core until the orchestrator opens the gate (or the run is
 * cancelled), then returns scalar0 (0, or an error) */
static _Atomic int gate_in, gate_open;
static int k_gate(const pto_kctx *c) {
  atomic_fetch_add(&gate_in, 1);
  while (!atomic_load(&gate_open) && !pto_kctx_cancelled(c))
    sleep_us(200);
  return (int)c->scalars[0];
}

typedef struct kids {
  int inc, put, mix, gang, dbl, fail, poll, async_lost, slow_write, copy, stuck, slow_head, gate;
} kids;
static kids K;

static pto_chip *make_chip(int clusters, int64_t watchdog_ms, int64_t shutdown_ms) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.watchdog_ms = watchdog_ms;
  cfg.shutdown_ms = shutdown_ms;
  cfg.task_slots = 64; /* small rings: slots and argument storage wrap within a run */
  cfg.alloc_timeout_ms =
      watchdog_ms / 2; /* a ring full that long fails a run, before the watchdog */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "inc", k_inc, &K.inc), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "put", k_put, &K.put), PTO_OK);
  pto_kernel_desc mix = {.name = "mix", .aic = k_mix_aic, .aiv = k_mix_aiv, .aiv_count = 2};
  assert_int_equal(pto_kernel_register(chip, &mix, &K.mix), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gang", k_gang, &K.gang), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "double", k_double, &K.dbl), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fail", k_fail, &K.fail), PTO_OK);
  assert_int_equal(pto_kernel_register_aic(chip, "poll", k_poll, &K.poll), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "async_lost", k_async_lost, &K.async_lost),
                   PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "slow_write", k_slow_write, &K.slow_write),
                   PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "copy", k_copy, &K.copy), PTO_OK);
  assert_int_equal(pto_kernel_register_aic(chip, "stuck", k_stuck, &K.stuck), PTO_OK);
  assert_int_equal(pto_kernel_register_aic(chip, "slow_head", k_slow_head, &K.slow_head), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gate", k_gate, &K.gate), PTO_OK);
  return chip;
}

static pto_tensor vec(int64_t *buf, int64_t n) {
  pto_tensor t;
  pto_tensor_init(&t, buf, sizeof *buf * (size_t)n, PTO_I64, 1, &n);
  return t;
}

/* put: value + i into buf[i], one block per element. */
static int submit_put(pto_orch *o, int64_t *buf, int n, uint64_t value) {
  pto_tensor t = vec(buf, n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, value);
  pto_submit_opts so = {.block_num = n};
  return pto_submit(o, K.put, &a, &so, NULL);
}

/* ---- many runs of varied shapes, failures interleaved ---- */

enum {
  SH_EMPTY,
  SH_CHAIN,
  SH_FANOUT,
  SH_MIX,
  SH_BLOCKS,
  SH_GANG,
  SH_SCOPED,
  SH_KERNEL_ERROR,
  SH_CANCELLED,
  SH_WATCHDOG,
  SH_BAD_SUBMIT,
  SH_RING_TIMEOUT,
  SH_COUNT
};
static const char *const sh_name[SH_COUNT] = {"empty",         "chain",        "fan-out",
                                              "MIX",           "blocks",       "sync_start gang",
                                              "scoped OUTPUT", "kernel error", "cancelled kernel",
                                              "watchdog",      "bad submit",   "task ring timeout"};

typedef struct vrun {
  int shape, run;
  int64_t a[200]; /* results */
  int64_t b[8];
  int rc; /* first failing call in the orchestration */
} vrun;

static void varied_orch(pto_orch *o, void *arg) {
  vrun *v = arg;
  pto_args a;
  switch (v->shape) {
  case SH_EMPTY: break;
  case SH_CHAIN: { /* 150 tasks: more than task_slots, so slots wrap */
    pto_tensor t = vec(v->a, 1);
    for (int i = 0; i < 150 && !v->rc; i++) {
      pto_args_init(&a);
      pto_args_inout(&a, &t);
      v->rc = pto_submit(o, K.inc, &a, NULL, NULL);
    }
    break;
  }
  case SH_FANOUT: /* 100 independent tasks */
    for (int i = 0; i < 100 && !v->rc; i++) {
      pto_tensor t = vec(&v->a[i], 1);
      pto_args_init(&a);
      pto_args_output_existing(&a, &t);
      pto_args_scalar(&a, (uint64_t)(v->run * 1000 + i));
      v->rc = pto_submit(o, K.put, &a, NULL, NULL);
    }
    break;
  case SH_MIX: {
    pto_tensor t = vec(v->a, 3 * 4);
    pto_args_init(&a);
    pto_args_output_existing(&a, &t);
    pto_args_scalar(&a, (uint64_t)v->run);
    pto_submit_opts so = {.block_num = 4};
    v->rc = pto_submit(o, K.mix, &a, &so, NULL);
    break;
  }
  case SH_BLOCKS: v->rc = submit_put(o, v->a, 37, (uint64_t)v->run); break;
  case SH_GANG: {
    pto_tensor t = vec(v->a, 1);
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    pto_submit_opts so = {.block_num = 4, .sync_start = true};
    v->rc = pto_submit(o, K.gang, &a, &so, NULL);
    break;
  }
  case SH_SCOPED: { /* a scoped OUTPUT, doubled into the caller's memory */
    int64_t shape = 8;
    pto_tensor tmp, dst = vec(v->b, 8);
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    pto_tensor_desc(&tmp, PTO_I64, 1, &shape);
    pto_args_init(&a);
    pto_args_output(&a, &tmp);
    pto_args_scalar(&a, (uint64_t)v->run);
    pto_submit_opts so = {.block_num = 8};
    v->rc = pto_submit(o, K.put, &a, &so, NULL);
    pto_args_init(&a);
    pto_args_input(&a, &tmp);
    pto_args_output_existing(&a, &dst);
    if (!v->rc) v->rc = pto_submit(o, K.dbl, &a, NULL, NULL);
    pto_scope_end(o);
    break;
  }
  case SH_KERNEL_ERROR: v->rc = pto_submit(o, K.fail, NULL, NULL, NULL); break;
  case SH_CANCELLED: { /* a polling kernel runs while another fails */
    int in = atomic_load(&polled_in);
    pto_submit(o, K.poll, NULL, NULL, NULL);
    /* it has started (not a fixed sleep: a slow machine under TSan once
     * took longer, and the failure then cancelled a kernel never begun) */
    for (uint64_t t0 = now_ms(); atomic_load(&polled_in) == in && now_ms() - t0 < 5000;)
      sleep_us(200);
    pto_submit(o, K.fail, NULL, NULL, NULL);
    break;
  }
  case SH_WATCHDOG: pto_submit(o, K.async_lost, NULL, NULL, NULL); break;
  case SH_BAD_SUBMIT: v->rc = pto_submit(o, 9999, NULL, NULL, NULL); break;
  case SH_RING_TIMEOUT: { /* a slow head of a chain longer than task_slots */
    pto_tensor t = vec(v->a, 1);
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    v->rc = pto_submit(o, K.slow_head, &a, NULL, NULL);
    for (int i = 0; i < 100 && !v->rc; i++) {
      pto_args_init(&a);
      pto_args_inout(&a, &t);
      v->rc = pto_submit(o, K.inc, &a, NULL, NULL);
    }
    break;
  }
  }
}

/* The result a run of this shape must leave, or a sentence why not. */
static const char *check_varied(const vrun *v, int rc, const pto_run_stats *st,
                                const pto_error_info *err, char *why, size_t n) {
  int want_rc = v->shape == SH_KERNEL_ERROR || v->shape == SH_CANCELLED ? PTO_EKERNEL
                : v->shape == SH_WATCHDOG                               ? PTO_ESCHED_TIMEOUT
                : v->shape == SH_BAD_SUBMIT                             ? PTO_EINVAL
                : v->shape == SH_RING_TIMEOUT                           ? PTO_ETASK_RING_DEADLOCK
                                                                        : PTO_OK;
  if (rc != want_rc) {
    snprintf(why, n, "returned %s (%.200s), expected %s", pto_status_name(rc), err->details,
             pto_status_name(want_rc));
    return why;
  }
  if (err->code != rc) {
    snprintf(why, n, "err.code %s, expected %s", pto_status_name(err->code), pto_status_name(rc));
    return why;
  }
  static const uint64_t tasks[SH_COUNT] = {0, 150, 100, 1, 1, 1, 2, 1, 2, 1, 0, 64};
  static const uint64_t blocks[SH_COUNT] = {0, 150, 100, 4, 37, 4, 9, 1, 2, 1, 0, 0};
  if (st->tasks != tasks[v->shape] || (rc == 0 && st->blocks != blocks[v->shape])) {
    snprintf(why, n, "stats: %llu tasks, %llu blocks, expected %llu, %llu",
             (unsigned long long)st->tasks, (unsigned long long)st->blocks,
             (unsigned long long)tasks[v->shape], (unsigned long long)blocks[v->shape]);
    return why;
  }
  for (int i = 0; i < 200; i++) {
    int64_t want = 0;
    switch (v->shape) {
    case SH_CHAIN: want = i == 0 ? 150 : 0; break;
    case SH_FANOUT: want = i < 100 ? v->run * 1000 + i : 0; break;
    case SH_MIX: want = i < 12 ? v->run : 0; break;
    case SH_BLOCKS: want = i < 37 ? v->run + i : 0; break;
    case SH_GANG: want = i == 0 ? 4 : 0; break;
    default: break;
    }
    if (v->a[i] != want) {
      snprintf(why, n, "a[%d] = %lld, expected %lld", i, (long long)v->a[i], (long long)want);
      return why;
    }
  }
  for (int i = 0; i < 8 && v->shape == SH_SCOPED; i++)
    if (v->b[i] != 2 * (v->run + i)) {
      snprintf(why, n, "b[%d] = %lld, expected %lld", i, (long long)v->b[i],
               (long long)(2 * (v->run + i)));
      return why;
    }
  return NULL;
}

static void test_many_runs_varied(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 120, 2000);
  int counts[SH_COUNT] = {0};
  /* a permutation of shapes, so each shape follows several others */
  for (int run = 0; run < SH_COUNT * 5; run++) {
    vrun v;
    memset(&v, 0, sizeof v);
    v.run = run;
    v.shape = (run * 7 + run / SH_COUNT) % SH_COUNT;
    pto_run_stats st;
    pto_error_info err;
    int before_out = atomic_load(&polled_out);
    /* the short watchdog for the run that fails by it, the short wait
     * for room in the task ring for the run that fails by that; the others
     * run under long ones (white box, between runs): on a loaded machine
     * a correct run can go 120 ms without progress, and a chain's
     * orchestrator 60 ms without a task retired (a chain run failed with
     * PTO_ETASK_RING_DEADLOCK at a load average of 16 on 2 CPUs) */
    chip->cfg.watchdog_ms = v.shape == SH_WATCHDOG ? 120 : 10000;
    chip->cfg.alloc_timeout_ms = v.shape == SH_RING_TIMEOUT ? 60 : 5000;
    int rc = pto_chip_run(chip, varied_orch, &v, &st, &err);
    char why[512];
    const char *bad = check_varied(&v, rc, &st, &err, why, sizeof why);
    if (!bad && v.shape == SH_CANCELLED && atomic_load(&polled_out) != before_out + 1)
      bad = "the polling kernel did not return after the run was cancelled";
    if (bad)
      fail_msg("run %d (%s, after %d runs of this chip): %s", run, sh_name[v.shape], run, bad);
    counts[v.shape]++;
  }
  pto_chip_destroy(chip);
  printf("%d runs on one chip:", SH_COUNT * 5);
  for (int s = 0; s < SH_COUNT; s++)
    printf(" %s x%d%s", sh_name[s], counts[s], s + 1 < SH_COUNT ? "," : "\n");
  for (int s = 0; s < SH_COUNT; s++)
    assert_true(counts[s] >= 3);
}

/* ---- a dependency mark left in a slot by an earlier run ---- */

typedef struct mark_run {
  int64_t x, y, junk[4];
  int64_t run;
} mark_run;

/* tasks 0, 1: junk; 2: slow write of x; 3, 4: junk; 5: y = x. In run N
 * the submit of task 5 marks task 2's slot with "listed by task 5"; in
 * run N+1 task 5 must still wait for task 2. */
static void mark_orch(pto_orch *o, void *arg) {
  mark_run *m = arg;
  pto_tensor x = vec(&m->x, 1), y = vec(&m->y, 1);
  for (int i = 0; i < 6; i++) {
    pto_args a;
    pto_args_init(&a);
    if (i == 2) {
      pto_args_output_existing(&a, &x);
      pto_args_scalar(&a, (uint64_t)m->run);
      pto_submit(o, K.slow_write, &a, NULL, NULL);
    } else if (i == 5) {
      pto_args_input(&a, &x);
      pto_args_output_existing(&a, &y);
      pto_submit(o, K.copy, &a, NULL, NULL);
    } else {
      pto_tensor j = vec(&m->junk[i < 2 ? i : i - 1], 1);
      pto_args_output_existing(&a, &j);
      pto_args_scalar(&a, 0);
      pto_submit(o, K.put, &a, NULL, NULL);
    }
  }
}

static void test_dep_mark_of_earlier_run(void **state) {
  (void)state;
  pto_chip *chip = make_chip(1, 10000, 2000);
  mark_run m = {0};
  for (int run = 1; run <= 3; run++) {
    m.run = run;
    pto_error_info err;
    int rc = pto_chip_run(chip, mark_orch, &m, NULL, &err);
    if (rc) fail_msg("run %d: %s: %s", run, pto_status_name(rc), err.details);
    if (m.y != run)
      fail_msg("run %d: task 5 read x = %lld, expected %d: it did not wait for task 2 (a "
               "dependency mark left in task 2's slot by run %d dropped the edge)",
               run, (long long)m.y, run, run - 1);
  }
  pto_chip_destroy(chip);
}

/* ---- a straggler from run N ---- */

typedef struct strag {
  int with_stuck;
  int64_t a[16];
} strag;

static void strag_orch(pto_orch *o, void *arg) {
  strag *s = arg;
  if (s->with_stuck) {
    pto_submit(o, K.stuck, NULL, NULL, NULL);
    while (!atomic_load(&stuck_in))
      sleep_us(200);
    pto_submit(o, K.fail, NULL, NULL, NULL);
    return;
  }
  submit_put(o, s->a, 16, 100);
}

static void test_straggler_does_not_reach_next_run(void **state) {
  (void)state;
  atomic_store(&stuck_release, 0);
  atomic_store(&stuck_in, 0);
  atomic_store(&stuck_out, 0);
  pto_chip *chip = make_chip(1, 10000, 100);
  strag s = {.with_stuck = 1};
  pto_error_info err;
  /* traced: run N's trace (and its threads' counters) may still change
   * under a thread left inside, so neither is read (before, the trace was
   * written while the late kernel's thread could still append to it) */
  char trace[64];
  snprintf(trace, sizeof trace, "/tmp/pto_strag_%d.json", (int)getpid());
  unlink(trace);
  assert_int_equal(pto_chip_set_trace(chip, trace), PTO_OK);
  /* run N: a kernel fails while another never looks at cancellation */
  assert_false(pto_chip_stuck(chip));
  pto_run_stats st_n;
  int rc = pto_chip_run(chip, strag_orch, &s, &st_n, &err);
  assert_true(pto_chip_stuck(chip)); /* its tensors must stay alive */
  printf("run N: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_EKERNEL);
  if (!strstr(err.details, "did not leave the run"))
    fail_msg("run N's error does not say that core 0 is still inside it: \"%s\"", err.details);
  if (!strstr(err.details, "no trace written"))
    fail_msg("run N's error does not say its trace was not written: \"%s\"", err.details);
  assert_int_equal(access(trace, F_OK), -1);
  assert_int_equal(st_n.tasks, 2);
  assert_int_equal(st_n.blocks, 0); /* the orchestrator's figures only */
  assert_int_equal(pto_chip_set_trace(chip, NULL), PTO_OK);
  /* run N+1, the straggler still inside: refused, naming the core */
  s.with_stuck = 0;
  rc = pto_chip_run(chip, strag_orch, &s, NULL, &err);
  printf("run N+1 (straggler inside): %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_ESHUTDOWN);
  if (!strstr(err.details, "core 0 is still running task 0"))
    fail_msg("run N+1 does not name the core that holds the chip: \"%s\"", err.details);
  for (int i = 0; i < 16; i++)
    assert_int_equal(s.a[i], 0); /* nothing ran */
  /* the straggler returns: it finishes its block in run N's state */
  atomic_store(&stuck_release, 1);
  while (!atomic_load(&stuck_out))
    sleep_us(200);
  uint64_t t0 = now_ms();
  do {
    pto_run_stats st;
    rc = pto_chip_run(chip, strag_orch, &s, &st, &err);
    if (rc == PTO_ESHUTDOWN) { /* it is on its way out */
      assert_true(now_ms() - t0 < 5000);
      sleep_us(1000);
      continue;
    }
    if (rc) fail_msg("run N+2: %s: %s", pto_status_name(rc), err.details);
    if (st.tasks != 1 || st.blocks != 16)
      fail_msg("run N+2: %llu tasks, %llu blocks, expected 1 and 16 (run N's late block must not "
               "count in it)",
               (unsigned long long)st.tasks, (unsigned long long)st.blocks);
  } while (rc);
  assert_false(pto_chip_stuck(chip)); /* it has left */
  for (int i = 0; i < 16; i++)
    assert_int_equal(s.a[i], 100 + i);
  /* and again, with the error record clean, traced */
  memset(s.a, 0, sizeof s.a);
  assert_int_equal(pto_chip_set_trace(chip, trace), PTO_OK);
  assert_int_equal(pto_chip_run(chip, strag_orch, &s, NULL, &err), PTO_OK);
  assert_int_equal(access(trace, F_OK), 0);
  unlink(trace);
  assert_int_equal(err.code, PTO_OK);
  assert_int_equal(err.task_id, PTO_TASK_NONE);
  assert_int_equal(s.a[15], 115);
  pto_chip_destroy(chip);
}

static void test_destroy_with_stuck_kernel(void **state) {
  (void)state;
  atomic_store(&stuck_release, 0);
  atomic_store(&stuck_in, 0);
  atomic_store(&stuck_out, 0);
  pto_chip *chip = make_chip(1, 10000, 100);
  strag s = {.with_stuck = 1};
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, strag_orch, &s, NULL, &err), PTO_EKERNEL);
  uint64_t t0 = now_ms();
  pto_chip_destroy(chip); /* must not wait for the kernel */
  uint64_t ms = now_ms() - t0;
  printf("pto_chip_destroy with a kernel stuck: %llu ms (shutdown_ms = 100)\n",
         (unsigned long long)ms);
  if (ms > 2000)
    fail_msg("pto_chip_destroy took %llu ms with shutdown_ms = 100", (unsigned long long)ms);
  /* the straggler returns into the destroyed chip's state, leaves and
   * frees it (ASan: no use after free, no leak) */
  atomic_store(&stuck_release, 1);
  while (!atomic_load(&stuck_out))
    sleep_us(200);
  sleep_us(100000);
}

/* ---- pto_chip_destroy during a run ---- */

typedef struct destroyer {
  pto_chip *chip;
  int64_t a[4];
  char why[200]; /* pto_last_error() on the destroying thread */
} destroyer;

static void destroy_in_orch(pto_orch *o, void *arg) {
  destroyer *d = arg;
  submit_put(o, d->a, 4, 10);
  pto_chip_destroy(pto_orch_chip(o));
  snprintf(d->why, sizeof d->why, "%s", pto_last_error());
  submit_put(o, d->a, 4, 20); /* the chip is still there: refused, as the run failed */
}

static void gate_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, 0);
  pto_submit(o, K.gate, &a, NULL, NULL);
}

static void *destroy_when_gated(void *arg) {
  destroyer *d = arg;
  while (!atomic_load(&gate_in))
    sleep_us(200);
  pto_chip_destroy(d->chip);
  snprintf(d->why, sizeof d->why, "%s", pto_last_error());
  atomic_store(&gate_open, 1);
  return NULL;
}

static void orch_put4(pto_orch *o, void *arg) { submit_put(o, ((destroyer *)arg)->a, 4, 30); }

static void expect_refused_destroy(pto_chip *chip, int rc, int want, const pto_error_info *err,
                                   const destroyer *d) {
  if (rc != want || (want && !strstr(err->details, "pto_chip_destroy")))
    fail_msg("run with pto_chip_destroy inside: rc %d (%s) '%s', expected %s", rc,
             pto_status_name(rc), err->details, want ? "PTO_EBUSY naming it" : "PTO_OK");
  if (!strstr(d->why, "pto_chip_destroy") || !strstr(d->why, "running"))
    fail_msg("pto_last_error after the refused destroy: '%s'", d->why);
  /* the chip is whole: the next run runs */
  int64_t b[4] = {0};
  destroyer next = {.chip = chip};
  pto_error_info e2;
  assert_int_equal(pto_chip_run(chip, orch_put4, &next, NULL, &e2), PTO_OK);
  memcpy(b, next.a, sizeof b);
  for (int i = 0; i < 4; i++)
    if (b[i] != 30 + i)
      fail_msg("after the refused destroy: a[%d] = %lld, expected %d", i, (long long)b[i], 30 + i);
}

static void test_destroy_during_a_run(void **state) {
  (void)state;
  pto_chip *chip = make_chip(1, 10000, 2000);
  destroyer d = {.chip = chip};
  pto_error_info err;
  int rc = pto_chip_run(chip, destroy_in_orch, &d, NULL, &err);
  expect_refused_destroy(chip, rc, PTO_EBUSY, &err, &d);

  /* from another thread, while a kernel of the run holds its core */
  atomic_store(&gate_in, 0);
  atomic_store(&gate_open, 0);
  destroyer d2 = {.chip = chip};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, destroy_when_gated, &d2), 0);
  rc = pto_chip_run(chip, gate_orch, NULL, NULL, &err);
  pthread_join(th, NULL);
  expect_refused_destroy(chip, rc, PTO_OK, &err, &d2);
  pto_chip_destroy(chip); /* between runs: destroyed (ASan: nothing leaks) */
}

/* ---- a late async completer of run N ---- */

static _Atomic uint64_t async_token;
static int k_async_keep(const pto_kctx *c) {
  uint64_t t;
  int rc = pto_kctx_async_begin(c, &t);
  if (!rc) atomic_store(&async_token, t);
  return rc;
}
static int kid_async_keep;

typedef struct late {
  int phase;
  uint64_t token;
  int rc_late;
  int64_t a[4];
} late;

static void late_orch(pto_orch *o, void *arg) {
  late *l = arg;
  if (l->phase == 0) { /* run N: a block goes async, then the run fails */
    pto_submit(o, kid_async_keep, NULL, NULL, NULL);
    while (!atomic_load(&async_token))
      sleep_us(200);
    pto_submit(o, K.fail, NULL, NULL, NULL);
    return;
  }
  /* run N+1: run N's completer comes late, in the middle of this run */
  submit_put(o, l->a, 4, 40);
  l->rc_late = pto_chip_async_complete(pto_orch_chip(o), l->token);
  submit_put(o, l->a, 4, 40);
}

static void test_late_async_completer(void **state) {
  (void)state;
  pto_chip *chip = make_chip(1, 10000, 2000);
  assert_int_equal(pto_kernel_register_aiv(chip, "async_keep", k_async_keep, &kid_async_keep),
                   PTO_OK);
  atomic_store(&async_token, 0);
  late l = {0};
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, late_orch, &l, NULL, &err), PTO_EKERNEL);
  l.token = atomic_load(&async_token);
  l.phase = 1;
  pto_run_stats st;
  int rc = pto_chip_run(chip, late_orch, &l, &st, &err);
  printf("run N's token 0x%llx completed during run N+1: %s; run N+1: %s%s%s\n",
         (unsigned long long)l.token, pto_status_name(l.rc_late), pto_status_name(rc),
         rc ? ": " : "", rc ? err.details : "");
  if (rc)
    fail_msg("a late completion of run N failed run N+1: %s: %s", pto_status_name(rc), err.details);
  assert_int_equal(l.rc_late, PTO_EASYNC_INVALID); /* the completer is told */
  assert_int_equal(st.tasks, 2);
  assert_int_equal(st.blocks, 8);
  for (int i = 0; i < 4; i++)
    assert_int_equal(l.a[i], 40 + i);
  pto_chip_destroy(chip);
}

/* ---- a run wakes only the cores it uses ---- */

static void one_task_orch(pto_orch *o, void *arg) {
  pto_tensor t = vec(arg, 1);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, 5);
  pto_submit(o, K.put, &a, NULL, NULL);
}

static void empty_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

/* Cores that took part in the run just ended (their last generation). */
static int cores_in_last_run(pto_chip *chip) {
  pto_run *r = chip->run;
  uint64_t gen = run_phase_gen(atomic_load(&r->phase));
  int n = 0;
  for (int i = 0; i < r->ncores; i++)
    n += r->cores[i].last_gen == gen;
  return n;
}

static void test_run_wakes_only_its_cores(void **state) {
  (void)state;
  pto_chip *chip = make_chip(5, 10000, 2000); /* 15 cores */
  int64_t x = 0;
  int more = 0, empty_woke = 0;
  for (int i = 0; i < 200; i++) {
    bool empty = i % 4 == 3;
    assert_int_equal(pto_chip_run(chip, empty ? empty_orch : one_task_orch, &x, NULL, NULL),
                     PTO_OK);
    int n = cores_in_last_run(chip);
    if (empty)
      empty_woke += n;
    else
      more += n != 1;
  }
  printf("200 back-to-back runs on 15 cores: %d one-task runs entered by more than one core, "
         "%d core entries in empty runs\n",
         more, empty_woke);
  if (more || empty_woke)
    fail_msg("%d one-task runs were entered by more than one core and empty runs by %d cores "
             "(expected only the core that ran the task: each entry costs the end of the run a "
             "wake-up and a wait)",
             more, empty_woke);
  assert_int_equal(x, 5);
  pto_chip_destroy(chip);
}

/* ---- the watchdog's window is per run ---- */

/* An orchestration that submits nothing for idle_us, watching the run's
 * status: failed_ns is when it first saw the run failed (0: it never did). */
typedef struct idle_run {
  long idle_us;
  uint64_t failed_ns;
} idle_run;

static void idle_orch(pto_orch *o, void *arg) {
  idle_run *ir = arg;
  uint64_t end = now_ns() + (uint64_t)ir->idle_us * 1000u;
  while (now_ns() < end) {
    if (pto_orch_status(o)) {
      ir->failed_ns = now_ns();
      return;
    }
    sleep_us(1000);
  }
}

/* The watchdog fires only once watchdog_ms passed with no progress, its
 * window starting in the run it watches: a run it stops has lasted
 * watchdog_ms at least when it fails. Runs that idle for 5/8 of
 * watchdog_ms, back to back, must not fail because of an earlier run's
 * window. Under load an orchestrator's 50 ms sleep may itself last 80 ms
 * or more (a preempted thread, TSan), and the watchdog is then right to
 * fire; so what is checked is when it fired: no earlier than watchdog_ms
 * into the run. When it fired is bounded from above by the time the
 * orchestration first saw the run failed (it polls every millisecond), or
 * by the run's return; a window carried over from the run before would fire
 * about 30 ms into the run. */
static void test_watchdog_window_per_run(void **state) {
  (void)state;
  const uint64_t watchdog_ms = 80;
  pto_chip *chip = make_chip(1, (int64_t)watchdog_ms, 2000);
  int timed_out = 0;
  for (int i = 0; i < 8; i++) {
    pto_error_info err;
    idle_run ir = {50000, 0};
    uint64_t t0 = now_ns();
    int rc = pto_chip_run(chip, idle_orch, &ir, NULL, &err);
    uint64_t fired_by = ir.failed_ns ? ir.failed_ns : now_ns();
    if (!rc) continue;
    if (rc != PTO_ESCHED_TIMEOUT || err.stall != PTO_STALL_ORCH_STARVED)
      fail_msg(
          "run %d, idle for 50 ms: %s (%s): %s, expected PTO_OK (or, once the "
          "orchestrator's sleep overran watchdog_ms, PTO_ESCHED_TIMEOUT, orchestrator starved)",
          i, pto_status_name(rc), pto_stall_class_name(err.stall), err.details);
    if (fired_by - t0 < watchdog_ms * 1000000u)
      fail_msg("run %d, idle for 50 ms with watchdog_ms = %llu: %s: %s, fired %.1f ms into the "
               "run (the watchdog carried its window over from an earlier run)",
               i, (unsigned long long)watchdog_ms, pto_status_name(rc), err.details,
               (double)(fired_by - t0) / 1e6);
    timed_out++;
  }
  printf("8 runs idle for 50 ms with watchdog_ms = 80: %d timed out, each at least 80 ms into "
         "its run (an orchestrator's sleep overran)\n",
         timed_out);
  /* and it still fires in a later run */
  idle_run ir = {400000, 0};
  pto_error_info err;
  int rc = pto_chip_run(chip, idle_orch, &ir, NULL, &err);
  printf("a run idle for 400 ms with watchdog_ms = 80: %s (%s)\n", pto_status_name(rc),
         pto_stall_class_name(err.stall));
  assert_int_equal(rc, PTO_ESCHED_TIMEOUT);
  assert_int_equal(err.stall, PTO_STALL_ORCH_STARVED);
  pto_chip_destroy(chip);
}

/* ---- a run that fails with ready work queued ---- */

enum { QF_KERNEL_ERROR, QF_ORCH_FATAL, QF_WATCHDOG, QF_COUNT };
static const char *const qf_name[QF_COUNT] = {"kernel error", "pto_orch_fatal", "watchdog"};

typedef struct queued_run {
  int how;        /* QF_*: how run N fails */
  int64_t a[64];  /* run N: what its queued put tasks write */
  int64_t x;      /* run N+1: its one task's output */
  uint64_t value; /* what run N+1 writes */
} queued_run;

/* Run N: both AIV cores of the one cluster are held by gate tasks; 40
 * independent put tasks queue behind them (the AIV shape queue); then the
 * run fails, with the puts still queued. */
static void queued_fail_orch(pto_orch *o, void *arg) {
  queued_run *q = arg;
  atomic_store(&gate_open, 0);
  int in = atomic_load(&gate_in);
  for (int i = 0; i < 2; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_scalar(&a, q->how == QF_KERNEL_ERROR && i == 0 ? 7 : 0);
    pto_submit(o, K.gate, &a, NULL, NULL);
  }
  for (uint64_t t0 = now_ms(); atomic_load(&gate_in) < in + 2 && now_ms() - t0 < 5000;)
    sleep_us(200);
  for (int i = 0; i < 40; i++) {
    pto_tensor t = vec(&q->a[i], 1);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t);
    pto_args_scalar(&a, 1000 + (uint64_t)i);
    pto_submit(o, K.put, &a, NULL, NULL);
  }
  switch (q->how) {
  case QF_KERNEL_ERROR: atomic_store(&gate_open, 1); break;
  case QF_ORCH_FATAL: pto_orch_fatal(o, "the orchestration gives up with work queued"); break;
  case QF_WATCHDOG: break; /* the gates hold until the watchdog cancels the run */
  }
}

/* Run N+1: one put of q->value into x. */
static void queued_next_orch(pto_orch *o, void *arg) {
  queued_run *q = arg;
  pto_tensor t = vec(&q->x, 1);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, q->value);
  pto_submit(o, K.put, &a, NULL, NULL);
}

static void test_failed_run_with_work_queued(void **state) {
  (void)state;
  static const int want_rc[QF_COUNT] = {PTO_EKERNEL, PTO_EFATAL, PTO_ESCHED_TIMEOUT};
  for (int threads = 0; threads < 2; threads++)
    for (int how = 0; how < QF_COUNT; how++) {
      pto_chip_config cfg;
      pto_chip_config_init(&cfg);
      cfg.clusters = 1;
      cfg.sched_threads = threads;
      cfg.task_slots = 64;
      cfg.watchdog_ms = how == QF_WATCHDOG ? 200 : 10000;
      pto_chip *chip;
      assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
      assert_int_equal(pto_kernel_register_aiv(chip, "put", k_put, &K.put), PTO_OK);
      assert_int_equal(pto_kernel_register_aiv(chip, "gate", k_gate, &K.gate), PTO_OK);
      for (int round = 0; round < 3; round++) {
        static queued_run q;
        memset(&q, 0, sizeof q);
        q.how = how;
        pto_error_info err;
        int rc = pto_chip_run(chip, queued_fail_orch, &q, NULL, &err);
        if (rc != want_rc[how])
          fail_msg("%s, %s, round %d: the failing run returned %s (%s), expected %s", qf_name[how],
                   threads ? "sched_threads" : "role", round, pto_status_name(rc), err.details,
                   pto_status_name(want_rc[how]));
        int64_t before[64];
        memcpy(before, q.a, sizeof before);
        q.value = 77 + (uint64_t)round;
        pto_run_stats st;
        char what[128];
        snprintf(what, sizeof what, "%s, %s, round %d: the run after the failed one", qf_name[how],
                 threads ? "sched_threads" : "role", round);
        hang_alarm_arm(what, 30);
        rc = pto_chip_run(chip, queued_next_orch, &q, &st, &err);
        hang_alarm_disarm();
        int stale = 0;
        for (int i = 0; i < 64; i++)
          stale += q.a[i] != before[i];
        if (rc != PTO_OK || q.x != (int64_t)q.value || st.tasks != 1 || st.blocks != 1 || stale)
          fail_msg("%s, %s, round %d: the run after it returned %s (%s), x = %lld (expected "
                   "%llu), %llu tasks and %llu blocks (expected 1 and 1), %d queued blocks of "
                   "the failed run ran in it",
                   qf_name[how], threads ? "sched_threads" : "role", round, pto_status_name(rc),
                   err.details, (long long)q.x, (unsigned long long)q.value,
                   (unsigned long long)st.tasks, (unsigned long long)st.blocks, stale);
      }
      pto_chip_destroy(chip);
    }
}

/* pto_run_stats.blocks counts the kernel blocks that ran, in a failed run
 * too: 40 tasks of 3 blocks, task `fail_at` failing (its kernel is called),
 * the others counting their calls; blocks placed on cores and then dropped
 * by the stopping run are none. Before, they were counted where placed: 9
 * blocks for 1 call, 23 for 15. In checking mode too (no tensor: no read
 * check runs a block twice): before, a task whose block failed counted
 * none of its blocks that ran (60 blocks for 61 calls). */
static _Atomic int calls;
static int k_count_id, k_fail_id;
static int k_count(const pto_kctx *c) {
  (void)c;
  atomic_fetch_add(&calls, 1);
  struct timespec ts = {0, 100 * 1000};
  nanosleep(&ts, NULL); /* long enough for others to be placed meanwhile */
  return 0;
}
static int k_fail_planned(const pto_kctx *c) {
  atomic_fetch_add(&calls, 1);
  return pto_kctx_fail(c, PTO_EKERNEL, "planned");
}
static void count_orch(pto_orch *o, void *arg) {
  int fail_at = *(int *)arg;
  for (int i = 0; i < 40; i++)
    if (pto_submit_v(o, i == fail_at ? k_fail_id : k_count_id, PTO_BLOCKS(3))) return;
}

static void test_blocks_counted_where_they_ran(void **state) {
  (void)state;
  static const char *const mode_name[3] = {"role", "sched_threads", "checking mode"};
  for (int mode = 0; mode < 3; mode++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 2;
    cfg.sched_threads = mode == 1;
    cfg.check = mode == 2; /* it runs the blocks itself, one at a time */
    cfg.check_seed = 11;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &k_count_id), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "fail", k_fail_planned, &k_fail_id), PTO_OK);
    static const int fail_at[] = {-1, 0, 5, 39, 3, -1};
    for (int j = 0; j < 6; j++) {
      atomic_store(&calls, 0);
      pto_run_stats st;
      pto_error_info err;
      int rc = pto_chip_run(chip, count_orch, (void *)&fail_at[j], &st, &err);
      printf("%s, task %d fails: %s, %llu blocks counted, %d kernel calls\n", mode_name[mode],
             fail_at[j], pto_status_name(rc), (unsigned long long)st.blocks, atomic_load(&calls));
      assert_int_equal(rc, fail_at[j] < 0 ? PTO_OK : PTO_EKERNEL);
      assert_int_equal(st.blocks, (uint64_t)atomic_load(&calls));
      if (fail_at[j] < 0) assert_int_equal(st.blocks, 120);
    }
    pto_chip_destroy(chip);
  }
}

/* A MIX placement marks each cluster it looked at with the pass's stamp
 * (sched.c, placements), a 32-bit counter kept across runs: when it wraps
 * to 0, the marks that are 0 (never marked) must not read as "looked at in
 * this pass". White box: every scheduler's stamp set to its last value,
 * every mark to 0, between runs; the next run's MIX task must run. */
static int64_t mix_out[4 * 3];
static void mix_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor t = vec(mix_out, 4 * 3);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, 7);
  pto_submit_opts so = {.block_num = 4};
  assert_int_equal(pto_submit(o, K.mix, &a, &so, NULL), PTO_OK);
}

static void test_mix_placement_stamp_wraps(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2000, 5000);
  assert_int_equal(pto_chip_run(chip, mix_orch, NULL, NULL, NULL), PTO_OK); /* makes the run */
  pto_run *r = chip->run;
  for (int s = 0; s < r->nsched; s++) {
    r->scheds[s].cl_stamp = UINT32_MAX;
    memset(r->scheds[s].cl_mark, 0, (size_t)chip->cfg.clusters * sizeof *r->scheds[s].cl_mark);
  }
  memset(mix_out, 0, sizeof mix_out);
  pto_error_info err;
  int rc = pto_chip_run(chip, mix_orch, NULL, NULL, &err);
  if (rc) fail_msg("the run after the stamp wrapped: %s: %s", pto_status_name(rc), err.details);
  for (int i = 0; i < 4 * 3; i++)
    if (mix_out[i] != 7) fail_msg("mix_out[%d] = %lld, want 7", i, (long long)mix_out[i]);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_runs_varied),
      cmocka_unit_test(test_dep_mark_of_earlier_run),
      cmocka_unit_test(test_straggler_does_not_reach_next_run),
      cmocka_unit_test(test_destroy_with_stuck_kernel),
      cmocka_unit_test(test_destroy_during_a_run),
      cmocka_unit_test(test_late_async_completer),
      cmocka_unit_test(test_run_wakes_only_its_cores),
      cmocka_unit_test(test_watchdog_window_per_run),
      cmocka_unit_test(test_failed_run_with_work_queued),
      cmocka_unit_test(test_blocks_counted_where_they_ran),
      cmocka_unit_test(test_mix_placement_stamp_wraps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
