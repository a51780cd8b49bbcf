/* test_handoff.c — dependencies released where they finish (handoff.h): a
 * core that completes a task runs one successor that completion makes
 * ready itself, without the ready queue or a scheduler pass, and only
 * one the queue would have given it next.
 *
 * Every graph starts behind a gate task that holds its core until the
 * orchestrator has submitted the rest, so that what becomes ready when is
 * fixed by the graph, not by timing; pto_run_stats.handoffs counts the
 * blocks kept, and each kernel records the order it ran in.
 *   - chain: every link of a 64-task chain is kept (the role mode and
 *     scheduler threads), and shows on the core's trace track;
 *   - a chain through dummies (every third link, then 12000 in a row):
 *     each dummy is completed where its producer completed, and the link
 *     after it is still kept; the same captured and replayed 3 times;
 *   - priorities: a successor is kept only while nothing of a higher
 *     level is queued (a queued higher task runs first), and kept over
 *     lower queued work; on a node's chip (its queue order kept,
 *     node_hooks.h) also only while nothing of its level is queued
 *     (FIFO); elsewhere it runs ahead of queued work of its level, at
 *     most HANDOFF_AHEAD_MAX blocks of a chain in a row, and the queued
 *     task is then the chain's next;
 *   - COMMUTE: a successor waiting for another task's bytes is not run
 *     before it gets them; the core that releases them keeps it;
 *   - SPMD: a task of several blocks is not kept, and its successor goes
 *     through the queue; results stay right;
 *   - async: a kept block that completes asynchronously completes itself,
 *     not the block its core was dispatched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "chip/handoff.h"
#include "chip/node_hooks.h"
#include "pto/pto.h"
#include "trace_json.h"

#define MAXREC 256

static int k_gate, k_rec, k_acc, k_spmd, k_sum, k_async;
static _Atomic int g_open, g_started, g_n;
static int g_order[MAXREC];
static _Atomic int g_inside, g_overlap; /* COMMUTE tasks running at once */
static _Atomic uint64_t g_token;
static _Atomic int g_have_token;

static void nap(void) {
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

/* Waits for *flag to reach v; a failed run's orchestrator gives up after
 * 20 s (a safety net: every wait here is for something already set in
 * motion). */
static void wait_for(_Atomic int *flag, int v) {
  for (int i = 0; i < 200000 && atomic_load(flag) < v; i++)
    nap();
  assert_true(atomic_load(flag) >= v);
}

static void record(const pto_kctx *c) {
  int at = atomic_fetch_add(&g_n, 1);
  if (at < MAXREC) g_order[at] = (int)c->scalars[0];
}

/* scalar 0: its label; scalar 1: the gate bit it waits for */
static int gate_kernel(const pto_kctx *c) {
  atomic_fetch_add(&g_started, 1);
  int bit = (int)c->scalars[1];
  while (!(atomic_load_explicit(&g_open, memory_order_acquire) & bit) && !pto_kctx_cancelled(c))
    nap();
  record(c);
  return 0;
}

static int rec_kernel(const pto_kctx *c) {
  record(c);
  return 0;
}

/* COMMUTE: acc[0] += scalar 1, slowly enough for an overlap to show */
static int acc_kernel(const pto_kctx *c) {
  if (atomic_fetch_add(&g_inside, 1) != 0) atomic_store(&g_overlap, 1);
  float *acc = pto_tensor_f32(&c->tensors[0]);
  float v = acc[0];
  nap();
  acc[0] = v + (float)c->scalars[1];
  atomic_fetch_sub(&g_inside, 1);
  record(c);
  return 0;
}

/* block b: out[b] = in[0] + b */
static int spmd_kernel(const pto_kctx *c) {
  const float *in = pto_tensor_f32(&c->tensors[0]);
  float *out = pto_tensor_f32(&c->tensors[1]);
  out[c->block_idx] = in[0] + (float)c->block_idx;
  return 0;
}

/* out[0] = sum of in[0 .. scalar 1) */
static int sum_kernel(const pto_kctx *c) {
  const float *in = pto_tensor_f32(&c->tensors[0]);
  float *out = pto_tensor_f32(&c->tensors[1]);
  float s = 0;
  for (int i = 0; i < (int)c->scalars[1]; i++)
    s += in[i];
  out[0] = s;
  record(c);
  return 0;
}

static int async_kernel(const pto_kctx *c) {
  uint64_t t;
  int rc = pto_kctx_async_begin(c, &t);
  if (rc) return rc;
  record(c);
  atomic_store(&g_token, t);
  atomic_store(&g_have_token, 1);
  return 0;
}

/* task_slots: 0 keeps the default (which a sanitizer run of the suite
 * makes 2048: PTO_TASK_SLOTS) */
static pto_chip *make_chip_slots(int aiv, bool sched_threads, const char *trace, bool queue_order,
                                 uint32_t task_slots) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  if (task_slots) cfg.task_slots = task_slots;
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = aiv;
  cfg.schedulers = 1;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gate", gate_kernel, &k_gate), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "rec", rec_kernel, &k_rec), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "acc", acc_kernel, &k_acc), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "spmd", spmd_kernel, &k_spmd), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "sum", sum_kernel, &k_sum), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "async", async_kernel, &k_async), PTO_OK);
  if (trace) assert_int_equal(pto_chip_set_trace(chip, trace), PTO_OK);
  if (queue_order) chip_keep_queue_order(chip);
  atomic_store(&g_open, 0);
  atomic_store(&g_started, 0);
  atomic_store(&g_n, 0);
  atomic_store(&g_inside, 0);
  atomic_store(&g_overlap, 0);
  atomic_store(&g_have_token, 0);
  memset(g_order, -1, sizeof g_order);
  return chip;
}

static pto_chip *make_chip_order(int aiv, bool sched_threads, const char *trace, bool queue_order) {
  return make_chip_slots(aiv, sched_threads, trace, queue_order, 0);
}

static pto_chip *make_chip(int aiv, bool sched_threads, const char *trace) {
  return make_chip_order(aiv, sched_threads, trace, false);
}

/* Submits kernel k labelled `label`, after `dep` (-1: none), with the
 * given priority and an optional COMMUTE tensor; returns its id. */
static pto_task_id submit(pto_orch *o, int k, int label, pto_task_id dep, int prio,
                          const pto_tensor *commute, uint64_t arg) {
  pto_args a;
  pto_args_init(&a);
  if (commute) pto_args_commute(&a, commute);
  pto_args_scalar(&a, (uint64_t)label);
  pto_args_scalar(&a, arg);
  pto_submit_opts opts = {
      .block_num = 1, .deps = dep >= 0 ? &dep : NULL, .ndeps = dep >= 0, .priority = prio};
  pto_task_id id = -1;
  assert_int_equal(pto_submit(o, k, &a, &opts, &id), PTO_OK);
  return id;
}

static void run_ok(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *st) {
  pto_error_info err;
  int rc = pto_chip_run(chip, fn, arg, st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
}

static void expect_order(const int *want, int n) {
  assert_int_equal(atomic_load(&g_n), n);
  for (int i = 0; i < n; i++) {
    if (g_order[i] != want[i]) {
      fprintf(stderr, "position %d ran %d, expected %d; order:", i, g_order[i], want[i]);
      for (int j = 0; j < n; j++)
        fprintf(stderr, " %d", g_order[j]);
      fprintf(stderr, "\n");
    }
    assert_int_equal(g_order[i], want[i]);
  }
}

/* ---- chain ---- */

#define CHAIN 64

static void chain_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_task_id prev = submit(o, k_gate, 0, -1, 0, NULL, 1);
  for (int i = 1; i <= CHAIN; i++)
    prev = submit(o, k_rec, i, prev, 0, NULL, 0);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

/* Counts the trace's slices of kernel `name` on the track named `track`. */
static int slices_on(const char *path, const char *name, const char *track) {
  char err[256] = "";
  trace_json_doc *d = NULL;
  int rc = trace_json_load(path, &d, err, sizeof err);
  if (rc) fprintf(stderr, "load %s: %s\n", path, err);
  assert_int_equal(rc, 0);
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  assert_non_null(evs);
  double want_tid = -1;
  for (uint32_t i = 0; i < evs->n; i++) { /* the track's thread_name metadata */
    const trace_json *e = &evs->u.items[i];
    const char *n = trace_json_str(e, "name");
    const char *tn = trace_json_str(trace_json_get(e, "args"), "name");
    if (n && tn && !strcmp(n, "thread_name") && strstr(tn, track))
      trace_json_num(e, "tid", &want_tid);
  }
  int count = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *n = trace_json_str(e, "name"), *ph = trace_json_str(e, "ph");
    double tid = -2;
    trace_json_num(e, "tid", &tid);
    if (n && ph && ph[0] == 'X' && !strcmp(n, name) && tid == want_tid) count++;
  }
  trace_json_free(d);
  return count;
}

static void test_chain_is_kept(void **state) {
  (void)state;
  char path[256];
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/pto_test_handoff_%d.json", dir && *dir ? dir : "/tmp",
           (int)getpid());
  for (int threads = 0; threads < 2; threads++) {
    pto_chip *chip = make_chip(1, threads, threads ? NULL : path);
    pto_run_stats st;
    run_ok(chip, chain_orch, NULL, &st);
    int want[CHAIN + 1];
    for (int i = 0; i <= CHAIN; i++)
      want[i] = i;
    expect_order(want, CHAIN + 1);
    printf("%s: %llu blocks, %llu handed off\n", threads ? "scheduler threads" : "role",
           (unsigned long long)st.blocks, (unsigned long long)st.handoffs);
    /* every link became ready at its producer's end, with nothing else
     * queued: none went through the queue */
    assert_int_equal(st.handoffs, CHAIN);
    assert_int_equal(st.blocks, CHAIN + 1);
    pto_chip_destroy(chip);
    if (!threads) { /* the kept blocks show on the core that ran them */
      assert_int_equal(slices_on(path, "rec", "cluster 0 AIV0"), CHAIN);
      unlink(path);
    }
  }
}

/* ---- a chain through dummies ---- */

/* The gate, then CHAIN links, every third of them a dummy, then a run of
 * DUMMY_RUN dummies in a row before one last link, all submitted while
 * the gate holds (in DUMMY_SLOTS task slots): a dummy made
 * ready by a completion of one consumer is completed on the spot, in a
 * loop (sched.c, complete_lone and complete_task), and the link after it
 * is still kept. A completion that recursed per dummy would need
 * DUMMY_RUN frames. */
#define DUMMY_RUN   12000
#define DUMMY_SLOTS 16384

static pto_task_id submit_dummy_after(pto_orch *o, pto_task_id dep) {
  pto_submit_opts opts = {.deps = &dep, .ndeps = 1};
  pto_task_id id = -1;
  assert_int_equal(pto_submit_dummy(o, NULL, &opts, &id), PTO_OK);
  return id;
}

static void dummy_chain_orch(pto_orch *o, void *arg) {
  int *links = arg;
  *links = 0;
  pto_task_id prev = submit(o, k_gate, 0, -1, 0, NULL, 1);
  for (int i = 1; i <= CHAIN; i++) {
    if (i % 3 == 0) {
      prev = submit_dummy_after(o, prev);
    } else {
      prev = submit(o, k_rec, i, prev, 0, NULL, 0);
      ++*links;
    }
  }
  for (int i = 0; i < DUMMY_RUN; i++)
    prev = submit_dummy_after(o, prev);
  submit(o, k_rec, CHAIN + 1, prev, 0, NULL, 0);
  ++*links;
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void test_chain_through_dummies_is_kept(void **state) {
  (void)state;
  for (int threads = 0; threads < 2; threads++) {
    pto_chip *chip = make_chip_slots(1, threads, NULL, false, DUMMY_SLOTS);
    pto_run_stats st;
    int links = 0;
    run_ok(chip, dummy_chain_orch, &links, &st);
    int want[CHAIN + 2], n = 0;
    want[n++] = 0;
    for (int i = 1; i <= CHAIN; i++)
      if (i % 3 != 0) want[n++] = i;
    want[n++] = CHAIN + 1;
    expect_order(want, n);
    printf("%s: %llu blocks, %llu handed off, %llu tasks\n", threads ? "scheduler threads" : "role",
           (unsigned long long)st.blocks, (unsigned long long)st.handoffs,
           (unsigned long long)st.tasks);
    assert_int_equal(st.tasks, (uint64_t)(CHAIN + 2 + DUMMY_RUN));
    assert_int_equal(st.blocks, (uint64_t)(links + 1));
    /* every link after the gate became ready at a completion on the core
     * that ran the link before it (through the dummies between): kept */
    assert_int_equal(st.handoffs, (uint64_t)links);
    /* captured and replayed: a launch's lists are fixed (read, not
     * closed), its dummies completed on the core the same way */
    pto_graph *g = NULL;
    pto_error_info err;
    atomic_store(&g_open, 0);
    atomic_store(&g_n, 0);
    int rc = pto_graph_capture(chip, dummy_chain_orch, &links, &g, &st, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    expect_order(want, n);
    for (int launch = 0; launch < 3; launch++) {
      atomic_store(&g_n, 0);
      memset(g_order, -1, sizeof g_order);
      rc = pto_graph_launch(chip, g, NULL, &st, &err);
      if (rc) pto_error_print(&err, stderr);
      assert_int_equal(rc, PTO_OK);
      expect_order(want, n);
      assert_int_equal(st.tasks, (uint64_t)(CHAIN + 2 + DUMMY_RUN));
      assert_int_equal(st.blocks, (uint64_t)(links + 1));
    }
    pto_graph_destroy(g);
    pto_chip_destroy(chip);
  }
}

/* ---- priorities ---- */

typedef struct prio_case {
  bool queue_order; /* a node's chip (node_hooks.h) */
  int gate_prio;    /* the gate's priority: above 0, nothing waits behind it */
  int queued_prio;  /* an independent task queued while the gate runs */
  int succ_prio;    /* the gate's successor */
  int want[3];      /* labels: 0 gate, 1 queued, 2 successor */
  uint64_t handoffs;
} prio_case;

static void prio_orch(pto_orch *o, void *arg) {
  const prio_case *pc = arg;
  pto_task_id g = submit(o, k_gate, 0, -1, pc->gate_prio, NULL, 1);
  wait_for(&g_started, 1); /* the gate runs: what follows queues behind it */
  submit(o, k_rec, 1, -1, pc->queued_prio, NULL, 0);
  submit(o, k_rec, 2, g, pc->succ_prio, NULL, 0);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void test_priorities_kept_only_when_next(void **state) {
  (void)state;
  static const prio_case cases[] = {
      /* a higher task queued: it runs first, the successor waits its turn */
      {true, 1, 2, 0, {0, 1, 2}, 0},
      {true, 1, 2, 1, {0, 1, 2}, 0},
      {false, 1, 2, 0, {0, 1, 2}, 0},
      {false, 1, 2, 1, {0, 1, 2}, 0},
      /* one of the successor's level queued first: FIFO on a node's
       * chip; elsewhere the successor runs ahead of it */
      {true, 1, 0, 0, {0, 1, 2}, 0},
      {true, 1, 1, 1, {0, 1, 2}, 0},
      {false, 1, 0, 0, {0, 2, 1}, 1},
      {false, 1, 1, 1, {0, 2, 1}, 1},
      /* only lower work queued: the successor is kept */
      {true, 1, 0, 1, {0, 2, 1}, 1},
      {true, 2, 1, 3, {0, 2, 1}, 1},
      {false, 2, 1, 3, {0, 2, 1}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const prio_case *pc = &cases[i];
    pto_chip *chip = make_chip_order(1, false, NULL, pc->queue_order);
    pto_run_stats st;
    run_ok(chip, prio_orch, (void *)pc, &st);
    printf("%s: gate %d, queued %d, successor %d: order %d %d %d, %llu handed off\n",
           pc->queue_order ? "queue order" : "ahead", pc->gate_prio, pc->queued_prio, pc->succ_prio,
           g_order[0], g_order[1], g_order[2], (unsigned long long)st.handoffs);
    expect_order(pc->want, 3);
    assert_int_equal(st.handoffs, pc->handoffs);
    pto_chip_destroy(chip);
  }
}

/* A chain of AHEAD_CHAIN tasks behind the gate, and an independent task
 * queued first: the chain runs HANDOFF_AHEAD_MAX links ahead of it, then
 * it, then the rest of the chain (labels: 0 gate, 1 queued, 2.. links). */
#define AHEAD_CHAIN (HANDOFF_AHEAD_MAX + 4)

static void ahead_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_task_id prev = submit(o, k_gate, 0, -1, 0, NULL, 1);
  wait_for(&g_started, 1);
  submit(o, k_rec, 1, -1, 0, NULL, 0);
  for (int i = 0; i < AHEAD_CHAIN; i++)
    prev = submit(o, k_rec, 2 + i, prev, 0, NULL, 0);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void test_ahead_of_queued_work_bounded(void **state) {
  (void)state;
  for (int order = 0; order < 2; order++) {
    pto_chip *chip = make_chip_order(1, false, NULL, order);
    pto_run_stats st;
    run_ok(chip, ahead_orch, NULL, &st);
    int want[AHEAD_CHAIN + 2], n = 0;
    want[n++] = 0;
    if (order) want[n++] = 1; /* FIFO: the queued task first */
    for (int i = 0; i < AHEAD_CHAIN; i++) {
      if (!order && i == HANDOFF_AHEAD_MAX) want[n++] = 1;
      want[n++] = 2 + i;
    }
    printf("%s: %llu blocks, %llu handed off\n", order ? "queue order" : "ahead",
           (unsigned long long)st.blocks, (unsigned long long)st.handoffs);
    expect_order(want, n);
    assert_int_equal(st.blocks, AHEAD_CHAIN + 2);
    /* the links run ahead were kept (the rest may come through a pass) */
    assert_true(st.handoffs >= (uint64_t)(order ? 0 : HANDOFF_AHEAD_MAX));
    pto_chip_destroy(chip);
  }
}

/* ---- COMMUTE ---- */

static float g_accbuf[16];

static void commute_orch(pto_orch *o, void *arg) {
  (void)arg;
  int64_t n = 16;
  pto_tensor acc;
  pto_tensor_init(&acc, g_accbuf, sizeof g_accbuf, PTO_F32, 1, &n);
  /* H holds acc's bytes until gate 2 opens; G (gate 1) then C, which
   * wants acc too; then D, which reads it */
  pto_args a;
  pto_args_init(&a);
  pto_args_commute(&a, &acc);
  pto_args_scalar(&a, 10);
  pto_args_scalar(&a, 2);
  assert_int_equal(pto_submit(o, k_gate, &a, NULL, NULL), PTO_OK); /* H: label 10 */
  pto_task_id g = submit(o, k_gate, 0, -1, 0, NULL, 1);
  pto_task_id c = submit(o, k_acc, 1, g, 0, &acc, 5);
  pto_args_init(&a);
  pto_args_input(&a, &acc);
  pto_args_scalar(&a, 2);
  pto_args_scalar(&a, 0);
  pto_submit_opts opts = {.block_num = 1, .deps = &c, .ndeps = 1};
  assert_int_equal(pto_submit(o, k_rec, &a, &opts, NULL), PTO_OK); /* D */
  wait_for(&g_started, 2);                                         /* H and G both run */
  atomic_store_explicit(&g_open, 1, memory_order_release);         /* G ends, C waits for H */
  wait_for(&g_n, 1);
  atomic_store_explicit(&g_open, 3, memory_order_release); /* H ends: C gets the bytes */
}

static void test_commute_successor_takes_its_bytes(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, false, NULL);
  g_accbuf[0] = 1;
  pto_run_stats st;
  run_ok(chip, commute_orch, NULL, &st);
  printf("order %d %d %d %d, acc %g, %llu handed off\n", g_order[0], g_order[1], g_order[2],
         g_order[3], (double)g_accbuf[0], (unsigned long long)st.handoffs);
  int want[] = {0, 10, 1, 2};
  expect_order(want, 4);
  assert_false(atomic_load(&g_overlap));
  assert_true(g_accbuf[0] == 6.0f);
  /* C (kept by H's core, which released the bytes) and D after it */
  assert_int_equal(st.handoffs, 2);
  pto_chip_destroy(chip);
}

/* ---- SPMD ---- */

#define SPMD_BLOCKS 4
static float g_in[16], g_mid[16], g_out[16];

static void spmd_orch(pto_orch *o, void *arg) {
  (void)arg;
  int64_t n = 16;
  pto_tensor in, mid, out;
  pto_tensor_init(&in, g_in, sizeof g_in, PTO_F32, 1, &n);
  pto_tensor_init(&mid, g_mid, sizeof g_mid, PTO_F32, 1, &n);
  pto_tensor_init(&out, g_out, sizeof g_out, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &in);
  pto_args_scalar(&a, 0);
  pto_args_scalar(&a, 1);
  assert_int_equal(pto_submit(o, k_gate, &a, NULL, NULL), PTO_OK);
  pto_args_init(&a);
  pto_args_input(&a, &in);
  pto_args_output_existing(&a, &mid);
  pto_submit_opts opts = {.block_num = SPMD_BLOCKS};
  assert_int_equal(pto_submit(o, k_spmd, &a, &opts, NULL), PTO_OK);
  pto_args_init(&a);
  pto_args_input(&a, &mid);
  pto_args_output_existing(&a, &out);
  pto_args_scalar(&a, 1);
  pto_args_scalar(&a, SPMD_BLOCKS);
  assert_int_equal(pto_submit(o, k_sum, &a, NULL, NULL), PTO_OK);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void test_spmd_successor_goes_through_the_queue(void **state) {
  (void)state;
  for (int aiv = 1; aiv <= 2; aiv++) {
    pto_chip *chip = make_chip(aiv, false, NULL);
    g_in[0] = 3;
    memset(g_mid, 0, sizeof g_mid);
    g_out[0] = 0;
    pto_run_stats st;
    run_ok(chip, spmd_orch, NULL, &st);
    printf("%d AIV: out %g, %llu blocks, %llu handed off\n", aiv, (double)g_out[0],
           (unsigned long long)st.blocks, (unsigned long long)st.handoffs);
    assert_true(g_out[0] == 4 * 3.0f + 0 + 1 + 2 + 3);
    assert_int_equal(st.blocks, 1 + SPMD_BLOCKS + 1);
    assert_int_equal(st.handoffs, 0);
    pto_chip_destroy(chip);
  }
}

/* ---- async ---- */

static void async_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_task_id g = submit(o, k_gate, 0, -1, 0, NULL, 1);
  pto_task_id a = submit(o, k_async, 1, g, 0, NULL, 0);
  submit(o, k_rec, 2, a, 0, NULL, 0);
  atomic_store_explicit(&g_open, 1, memory_order_release);
  wait_for(&g_have_token, 1);
  assert_int_equal(pto_chip_async_complete(pto_orch_chip(o), atomic_load(&g_token)), PTO_OK);
}

static void test_kept_async_block_completes_itself(void **state) {
  (void)state;
  pto_chip *chip = make_chip(1, false, NULL);
  pto_run_stats st;
  run_ok(chip, async_orch, NULL, &st);
  int want[] = {0, 1, 2};
  expect_order(want, 3);
  assert_int_equal(st.tasks, 3);
  assert_int_equal(st.handoffs, 1); /* the async block; its successor comes by its token */
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_is_kept),
      cmocka_unit_test(test_chain_through_dummies_is_kept),
      cmocka_unit_test(test_priorities_kept_only_when_next),
      cmocka_unit_test(test_ahead_of_queued_work_bounded),
      cmocka_unit_test(test_commute_successor_takes_its_bytes),
      cmocka_unit_test(test_spmd_successor_goes_through_the_queue),
      cmocka_unit_test(test_kept_async_block_completes_itself),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
