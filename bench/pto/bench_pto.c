/* bench/pto/bench_pto.c — the workloads as pto tasks, through the public
 * API only: one chip, AIV kernels, tensors tagged INPUT / OUTPUT_EXISTING
 * / INOUT so that pto infers every dependency from the data.
 *
 * Configuration rule (docs/benchmarks.md): pto_chip_config_init()
 * defaults, except that the simulated cores that run kernels number exactly
 * `workers` — the CPUs every peer gets:
 *   workers even: clusters = workers / 2, 2 AIV per cluster;
 *   workers odd:  clusters = workers, 1 AIV per cluster;
 *   no AIC cores (these kernels are AIV kernels);
 *   schedulers = pto's default min(3, clusters).
 * PTO_BENCH_AIV=1 makes it one AIV per cluster for any `workers`, and
 * PTO_SCHEDULERS sets the schedulers (at most one per cluster), so that
 * several schedulers can be measured on two CPUs.
 * The orchestrator (the calling thread) and the scheduler threads come on
 * top, as the StarPU submitting thread does.
 *
 * Prebuilt class: build() captures the orchestration (pto/graph.h: a real,
 * untimed run, whose writes the harness clears before each execution) on a
 * chip of the same shape whose rings hold a whole graph live at once
 * (task_slots, dep_entries and tensormap_entries raised, docs/graphs.md);
 * exec() launches it: no TensorMap, no inference. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "pto/pto.h"

enum { K_EMPTY, K_PRODUCE, K_CONSUME, K_REDUCE, K_TASK, K_COUNT };

static pto_chip *g_chip;
static int g_kernel[K_COUNT];
static char g_desc[200];

static uint64_t *word0(const pto_tensor *t) { return (uint64_t *)t->buf + t->offset; }

static int k_empty(const pto_kctx *c) {
  bench_kernel_empty(word0(&c->tensors[0]));
  return 0;
}

static int k_produce(const pto_kctx *c) {
  bench_kernel_produce(word0(&c->tensors[0]), word0(&c->tensors[1]));
  return 0;
}

static int k_consume(const pto_kctx *c) {
  bench_kernel_consume(word0(&c->tensors[0]), word0(&c->tensors[1]));
  return 0;
}

static int k_reduce(const pto_kctx *c) {
  bench_kernel_reduce(word0(&c->tensors[0]), word0(&c->tensors[1]));
  return 0;
}

/* tensors[0] = output slot; tensors[1 ..] = input ranges, each a
 * [k][BENCH_SLOT_WORDS] view of k consecutive slots of one step's row.
 * scalars: kernel iterations, task index. */
static int k_task(const pto_kctx *c) {
  const uint64_t *in[256];
  int n = 0;
  for (int a = 1; a < c->ntensors; a++) {
    const pto_tensor *t = &c->tensors[a];
    for (int64_t q = 0; q < t->shape[0] && n < 256; q++)
      in[n++] = word0(t) + q * t->stride[0];
  }
  bench_kernel_task_raw(c->scalars[0], (int)c->scalars[1], in, n, word0(&c->tensors[0]));
  return 0;
}

static int g_workers;

/* PTO_BENCH_BATCH=1: the dynamic class's orchestrations submit in one
 * batch (pto_orch_batch_begin/end, pto/orch.h), pushed PTO_ORCH_BATCH_MAX
 * ready tasks at a time. Not the configuration rule's: a measurement of
 * the batch. */
static bool g_batch;
static bool g_stats; /* PTO_BENCH_STATS=1: each dynamic run's pto_run_stats on stderr */

/* The chip of the configuration rule for `workers` CPUs, its kernels
 * registered in K_* order (so g_kernel[] holds on every such chip);
 * `whole_graph`: rings that hold the largest workload's graph live at once,
 * for a capture. */
static int make_chip(int workers, bool whole_graph, pto_chip **out) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  /* PTO_BENCH_AIV=1: one AIV per cluster (clusters = workers) whatever the
   * parity, to measure several schedulers (PTO_SCHEDULERS) on few CPUs */
  const char *aiv = getenv("PTO_BENCH_AIV");
  if (workers % 2 == 0 && !(aiv && strcmp(aiv, "1") == 0)) {
    cfg.clusters = workers / 2;
    cfg.aiv_per_cluster = 2;
  } else {
    cfg.clusters = workers;
    cfg.aiv_per_cluster = 1;
  }
  cfg.aic_per_cluster = 0;
  /* pto's default: init leaves 0, which pto_chip_create makes min(3,
   * clusters); PTO_SCHEDULERS, if set, at most one per cluster. (Turning
   * 0 into 1 here gave every chip of 2 or more clusters one scheduler.) */
  if (cfg.schedulers > cfg.clusters) cfg.schedulers = cfg.clusters;
  if (whole_graph) { /* full mode: 10^5 tasks, about 3 edges each (W4) */
    if (cfg.task_slots < 1u << 17) cfg.task_slots = 1u << 17;
    if (cfg.dep_entries < 1u << 19) cfg.dep_entries = 1u << 19;
    if (cfg.tensormap_entries < 1u << 18) cfg.tensormap_entries = 1u << 18;
  }
  int rc = pto_chip_create(&cfg, out);
  if (rc != 0) {
    fprintf(stderr, "pto_chip_create: %s: %s\n", pto_status_name(rc), pto_last_error());
    return rc;
  }
  static const struct {
    const char *name;
    pto_kernel_fn fn;
  } k[K_COUNT] = {{"empty", k_empty},
                  {"produce", k_produce},
                  {"consume", k_consume},
                  {"reduce", k_reduce},
                  {"task", k_task}};
  for (int i = 0; i < K_COUNT && rc == 0; i++)
    rc = pto_kernel_register_aiv(*out, k[i].name, k[i].fn, &g_kernel[i]);
  return rc;
}

static int pto_bench_init(int workers) {
  g_workers = workers;
  int rc = make_chip(workers, false, &g_chip);
  if (rc) return rc;
  const pto_chip_config *cfg = pto_chip_get_config(g_chip); /* as resolved */
  int cores = cfg->clusters * cfg->aiv_per_cluster;
  const char *batch = getenv("PTO_BENCH_BATCH");
  g_batch = batch && strcmp(batch, "1") == 0;
  const char *stats = getenv("PTO_BENCH_STATS");
  g_stats = stats && strcmp(stats, "1") == 0;
  /* PTO_BENCH_TRACE=FILE: the chip's runs traced into FILE
   * (pto_chip_set_trace; a trace costs the runs their speed) */
  const char *trace = getenv("PTO_BENCH_TRACE");
  if (trace && *trace && (rc = pto_chip_set_trace(g_chip, trace)) != 0) return rc;
  snprintf(g_desc, sizeof(g_desc),
           "%d cluster%s x %d AIV (%d kernel core%s) + %d scheduler%s + orchestrator thread%s",
           cfg->clusters, cfg->clusters == 1 ? "" : "s", cfg->aiv_per_cluster, cores,
           cores == 1 ? "" : "s", cfg->schedulers, cfg->schedulers == 1 ? "" : "s",
           g_batch ? ", submits in batches (PTO_BENCH_BATCH)" : "");
  return 0;
}

static void pto_bench_fini(void) {
  pto_chip_destroy(g_chip);
  g_chip = NULL;
}

static const char *pto_bench_describe(void) { return g_desc; }

/* ---- orchestrations ---- */

typedef struct job {
  int n;
  uint64_t *slots;
  const bench_graph *g;
  pto_orch_fn fn; /* under PTO_BENCH_BATCH: the orchestration batched() runs */
} job;

static void batched(pto_orch *o, void *arg) {
  job *j = arg;
  pto_orch_batch_begin(o);
  j->fn(o, arg);
  pto_orch_batch_end(o);
}

static void slot_tensor(pto_tensor *t, uint64_t *slot) {
  int64_t shape[1] = {BENCH_SLOT_WORDS};
  pto_tensor_init(t, slot, BENCH_SLOT_BYTES, PTO_I64, 1, shape);
}

static void orch_chain(pto_orch *o, void *arg) {
  job *j = arg;
  pto_tensor t;
  slot_tensor(&t, j->slots);
  for (int i = 0; i < j->n; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    if (pto_submit(o, g_kernel[K_EMPTY], &a, NULL, NULL) != 0) return;
  }
}

static void orch_indep(pto_orch *o, void *arg) {
  job *j = arg;
  for (int i = 0; i < j->n; i++) {
    pto_tensor t;
    slot_tensor(&t, j->slots + (size_t)i * BENCH_SLOT_WORDS);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t);
    if (pto_submit(o, g_kernel[K_EMPTY], &a, NULL, NULL) != 0) return;
  }
}

/* The BENCH_FAN consumer slots are one buffer: each consumer writes its
 * row, the reducer reads the whole buffer (one argument instead of 64),
 * and pto finds the 64 writers from the regions. */
static void orch_fanout(pto_orch *o, void *arg) {
  job *j = arg;
  pto_tensor r, a, b, bj[BENCH_FAN];
  slot_tensor(&r, j->slots);
  slot_tensor(&a, j->slots + BENCH_SLOT_WORDS);
  int64_t shape[2] = {BENCH_FAN, BENCH_SLOT_WORDS};
  pto_tensor_init(&b, j->slots + 2 * BENCH_SLOT_WORDS, (size_t)BENCH_FAN * BENCH_SLOT_BYTES,
                  PTO_I64, 2, shape);
  for (int q = 0; q < BENCH_FAN; q++) {
    int64_t start[2] = {q, 0}, sh[2] = {1, BENCH_SLOT_WORDS};
    pto_tensor_slice(&b, start, sh, &bj[q]);
  }
  for (int k = 0; k < j->n; k++) {
    pto_args x;
    pto_args_init(&x);
    pto_args_input(&x, &r);
    pto_args_output_existing(&x, &a);
    if (pto_submit(o, g_kernel[K_PRODUCE], &x, NULL, NULL) != 0) return;
    for (int q = 0; q < BENCH_FAN; q++) {
      pto_args_init(&x);
      pto_args_input(&x, &a);
      pto_args_inout(&x, &bj[q]);
      if (pto_submit(o, g_kernel[K_CONSUME], &x, NULL, NULL) != 0) return;
    }
    pto_args_init(&x);
    pto_args_input(&x, &b);
    pto_args_output_existing(&x, &r);
    if (pto_submit(o, g_kernel[K_REDUCE], &x, NULL, NULL) != 0) return;
  }
}

/* Each step's slots are one buffer (a row); a task writes its own slot
 * and reads each interval of the previous row as one view. */
static void orch_graph(pto_orch *o, void *arg) {
  job *j = arg;
  const bench_graph *g = j->g;
  pto_tensor row, prev;
  memset(&prev, 0, sizeof(prev)); /* step 0 reads nothing */
  for (int t = 0; t < g->steps; t++) {
    int w = g->row_start[t + 1] - g->row_start[t];
    int64_t shape[2] = {w, BENCH_SLOT_WORDS};
    pto_tensor_init(&row, j->slots + (size_t)g->row_start[t] * BENCH_SLOT_WORDS,
                    (size_t)w * BENCH_SLOT_BYTES, PTO_I64, 2, shape);
    for (int i = g->row_start[t]; i < g->row_start[t + 1]; i++) {
      pto_args a;
      pto_args_init(&a);
      pto_tensor v;
      int64_t start[2] = {g->point[i], 0}, sh[2] = {1, BENCH_SLOT_WORDS};
      pto_tensor_slice(&row, start, sh, &v);
      pto_args_output_existing(&a, &v);
      for (int k = g->ivl_start[i]; k < g->ivl_start[i + 1]; k++) {
        int64_t st[2] = {g->ivl_lo[k], 0},
                s2[2] = {g->ivl_hi[k] - g->ivl_lo[k] + 1, BENCH_SLOT_WORDS};
        pto_tensor_slice(&prev, st, s2, &v);
        pto_args_input(&a, &v);
      }
      pto_args_scalar(&a, g->iters);
      pto_args_scalar(&a, (uint64_t)i);
      if (pto_submit(o, g_kernel[K_TASK], &a, NULL, NULL) != 0) return;
    }
    prev = row;
  }
}

static int64_t run(pto_orch_fn fn, job *j) {
  pto_run_stats st;
  pto_error_info err;
  j->fn = fn;
  int64_t t0 = bench_now_ns();
  int rc = pto_chip_run(g_chip, g_batch ? batched : fn, j, &st, &err);
  int64_t ns = bench_now_ns() - t0;
  if (rc != 0) {
    pto_error_print(&err, stderr);
    return -1;
  }
  if (g_stats)
    fprintf(stderr,
            "STATS,tasks=%llu,blocks=%llu,host_us=%.1f,orch_us=%.1f,effective_us=%.1f,"
            "handoffs=%llu,steals=%llu,pull_holds=%llu,head_yields=%llu,gathered=%llu\n",
            (unsigned long long)st.tasks, (unsigned long long)st.blocks, st.host_us, st.orch_us,
            st.effective_us, (unsigned long long)st.handoffs, (unsigned long long)st.steals,
            (unsigned long long)st.pull_holds, (unsigned long long)st.head_yields,
            (unsigned long long)st.gathered);
  return ns;
}

static int64_t pto_bench_chain(int n, uint64_t *slots) {
  job j = {.n = n, .slots = slots};
  return run(orch_chain, &j);
}

static int64_t pto_bench_indep(int n, uint64_t *slots) {
  job j = {.n = n, .slots = slots};
  return run(orch_indep, &j);
}

static int64_t pto_bench_fanout(int rounds, uint64_t *slots) {
  job j = {.n = rounds, .slots = slots};
  return run(orch_fanout, &j);
}

static int64_t pto_bench_graph(const bench_graph *g, uint64_t *slots) {
  job j = {.slots = slots, .g = g};
  return run(orch_graph, &j);
}

/* ---- prebuilt class: a captured graph, replayed ---- */

typedef struct pre_graph {
  pto_chip *chip; /* the capture's: a graph launches on its own chip */
  pto_graph *graph;
  job j;
} pre_graph;

static void pre_destroy(void *p_) {
  pre_graph *p = p_;
  if (!p) return;
  pto_graph_destroy(p->graph);
  pto_chip_destroy(p->chip);
  free(p);
}

static void *pre_build(const bench_work *w) {
  static const pto_orch_fn fn[] = {[BENCH_CHAIN] = orch_chain,
                                   [BENCH_INDEP] = orch_indep,
                                   [BENCH_FANOUT] = orch_fanout,
                                   [BENCH_GRAPH] = orch_graph};
  pre_graph *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->j = (job){.n = w->n, .slots = w->slots, .g = w->g};
  pto_error_info err;
  int rc = make_chip(g_workers, true, &p->chip);
  if (!rc) rc = pto_graph_capture(p->chip, fn[w->kind], &p->j, &p->graph, NULL, &err);
  if (rc) {
    if (p->chip) pto_error_print(&err, stderr);
    pre_destroy(p);
    return NULL;
  }
  return p;
}

static int pre_exec(void *p_) {
  pre_graph *p = p_;
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_graph_launch(p->chip, p->graph, NULL, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  return rc;
}

static const bench_prebuilt pto_prebuilt = {
    "the orchestration captured once (pto_graph_capture), each execution a pto_graph_launch: "
    "precomputed fanins and successor lists, no TensorMap",
    pre_build, pre_exec, pre_destroy};

int main(int argc, char **argv) {
  static const bench_system sys = {
      .name = "pto",
      .init = pto_bench_init,
      .fini = pto_bench_fini,
      .run_chain = pto_bench_chain,
      .run_indep = pto_bench_indep,
      .run_fanout = pto_bench_fanout,
      .run_graph = pto_bench_graph,
      .describe = pto_bench_describe,
      .prebuilt = &pto_prebuilt,
  };
  return bench_main(argc, argv, &sys);
}
