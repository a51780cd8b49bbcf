/* diff_graph.h — random task graphs and their sequential reference, for
 * the differential tests (test_differential.c: fresh chips and second
 * runs; test_reuse_differential.c: persistent chips whose runs fail at
 * random points in between).
 *
 * Random graphs over overlapping views (slices, transposes, strided and
 * reshaped views) of a few small buffers, seen as i32, i16 or i64 over the
 * same bytes, some built from a raw interior pointer, with multi-block
 * tasks, dummy tasks, explicit dependencies and scopes with
 * runtime-allocated intermediates. The kernel is order-sensitive (out =
 * out * 3 + inputs + k, in each view's own element size), so a missed
 * read-after-write, write-after-write or write-after-read edge changes
 * the result. COMMUTE outputs (i32 views only) add instead (out = out +
 * inputs + k, modulo 2^32): the tasks of a COMMUTE group may run in any
 * order, and every order gives the sequential result exactly, while a
 * missed exclusion loses an update and a missed edge against a plain
 * access changes it. In half the graphs, REDUX outputs (i32 views only,
 * 1-4 blocks, no input overlapping the output) add or take the signed
 * maximum: the sequential result exactly, whatever the schedule, as long
 * as the contributions are folded before the next other access to their
 * bytes. Every task has a random priority, which must not change any
 * result. Test-only: every function is used by both tests. */
#ifndef PTO_TESTS_DIFF_GRAPH_H
#define PTO_TESTS_DIFF_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/region.h"
#include "pto/pto.h"

#define NBUF  3
#define ROWS  12
#define COLS  12
#define NELEM (ROWS * COLS)
/* Rows may be padded (row stride > COLS) so that views span several 4 KiB
 * chunks of a buffer, as the TensorMap indexes by chunk. */
#define MAX_STRIDE 1100
#define BUFELEMS   (ROWS * MAX_STRIDE)
#define MAX_TASKS  48
#define MAX_IN     3

static uint64_t rng_state;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

/* The count environment variable `name` asks for (a positive integer),
 * else dflt; the seed `name` asks for, else dflt. */
static inline int env_count(const char *name, int dflt) {
  const char *e = getenv(name);
  return e && atoi(e) > 0 ? atoi(e) : dflt;
}
static inline uint64_t env_seed(const char *name, uint64_t dflt) {
  const char *e = getenv(name);
  return e ? strtoull(e, NULL, 0) : dflt;
}

/* Element i of t as an unsigned value of its own size (2, 4 or 8 bytes). */
static uint64_t load(const pto_tensor *t, int64_t i) {
  uint64_t v = 0;
  memcpy(&v, pto_tensor_at_linear(t, i), pto_dtype_size((pto_dtype)t->dtype));
  return v;
}
static void store(const pto_tensor *t, int64_t i, uint64_t v) {
  memcpy(pto_tensor_at_linear(t, i), &v, pto_dtype_size((pto_dtype)t->dtype));
}

/* ---- the kernel, shared by pto and the sequential reference ----
 * tensors: [0] output (INOUT, OUTPUT_EXISTING, OUTPUT, COMMUTE or REDUX),
 * [1..] inputs; scalars: [0] k, [1] 1 when the output is also read
 * (INOUT), 2 when it is added to (COMMUTE, REDUX sum), 3 when it takes the
 * signed i32 maximum (REDUX max).
 * Block b of B handles the output elements [b*n/B, (b+1)*n/B) in row-major
 * order of the output view; inputs are read at (i mod numel(input)). */
static void mix_block(const pto_tensor *ts, int nt, const uint64_t *sc, int b, int nb) {
  const pto_tensor *out = &ts[0];
  int64_t n = pto_tensor_numel(out);
  int64_t lo = n * b / nb, hi = n * (b + 1) / nb;
  uint64_t tmp[2 * NELEM]; /* i16 views have up to twice as many elements */
  for (int64_t i = lo; i < hi; i++) {
    uint64_t v = sc[0];
    for (int k = 1; k < nt; k++) {
      int64_t m = pto_tensor_numel(&ts[k]);
      v += load(&ts[k], i % m) * (uint64_t)(k + 1);
    }
    tmp[i - lo] = v;
  }
  /* scalar 1: 0 write, 1 read-write (x3), 2 add, 3 i32 max */
  uint64_t keep = sc[1] == 1 ? 3u : sc[1] == 2 ? 1u : 0u;
  for (int64_t i = lo; i < hi; i++) {
    int32_t a = (int32_t)(uint32_t)load(out, i), b = (int32_t)(uint32_t)tmp[i - lo];
    store(out, i, sc[1] == 3 ? (uint32_t)(b > a ? b : a) : load(out, i) * keep + tmp[i - lo]);
  }
}

static int mix_kernel(const pto_kctx *c) {
  mix_block(c->tensors, c->ntensors, c->scalars, c->block_idx, c->block_num);
  return 0;
}

/* ---- random graphs ---- */

typedef struct gtask {
  int kind; /* 0 kernel, 1 dummy, 2 scope begin, 3 scope end */
  int nt;
  pto_access acc[1 + MAX_IN];
  pto_tensor view[1 + MAX_IN]; /* buf encodes buffer i and a byte shift (see bind) */
  int tmp_out;                 /* writes intermediate #tmp_out (OUTPUT), -1 none */
  int tmp_in;                  /* reads intermediate #tmp_in as input 1, -1 none */
  uint64_t k, rw;
  int blocks;
  int ndeps;
  int deps[2];  /* earlier graph task indexes (kernel or dummy) */
  int priority; /* 0 .. PTO_PRIORITY_MAX */
  int op;       /* REDUX: PTO_REDUX_SUM or PTO_REDUX_MAX */
} gtask;

typedef struct graph {
  int n;
  gtask t[MAX_TASKS];
  int row_stride;
  uint32_t init[NBUF][BUFELEMS];
} graph;

/* The indexes of g's kernel tasks, in order; their count. */
static inline int kernel_tasks(const graph *g, int *kernels) {
  int nk = 0;
  for (int i = 0; i < g->n; i++)
    if (g->t[i].kind == 0) kernels[nk++] = i;
  return nk;
}

/* Views name buffer b shifted by `shift` bytes as (void *)((shift << 2) |
 * (b + 1)); bind() turns that into real memory. */
static void *buf_code(int b, int64_t shift) { return (void *)(intptr_t)((shift << 2) | (b + 1)); }

/* A random view of buffer `b` (never self-overlapping), as i32 or, over
 * the same bytes, i16 or i64; sometimes rebuilt from a raw interior
 * pointer (base = buffer + part of the offset), as an application that
 * does pointer arithmetic would. */
static pto_tensor random_view_of(int b, int row_stride, bool i32_only) {
  pto_tensor base, v;
  static const pto_dtype dts[] = {PTO_I32, PTO_I32, PTO_I16, PTO_I64};
  pto_dtype dt = i32_only ? PTO_I32 : dts[rnd_in(0, 3)];
  const int es = (int)pto_dtype_size(dt); /* row strides are even: i64 rows stay whole */
  const int cols = COLS * 4 / es, rs = row_stride * 4 / es;
  int64_t shape[2] = {ROWS, cols}, strides[2] = {rs, 1};
  pto_tensor_init_strided(&base, buf_code(b, 0), sizeof(uint32_t) * BUFELEMS, dt, 2, shape, strides,
                          0);
  int kind = rnd_in(0, 4);
  int r0 = rnd_in(0, ROWS - 1), c0 = rnd_in(0, cols - 1);
  int64_t start[2] = {r0, c0};
  int64_t sh[2] = {rnd_in(1, ROWS - r0), rnd_in(1, cols - c0)};
  switch (kind) {
  case 0: /* rectangular slice */ pto_tensor_slice(&base, start, sh, &v); break;
  case 1: { /* transposed slice */
    pto_tensor s;
    pto_tensor_slice(&base, start, sh, &s);
    pto_tensor_transpose(&s, 0, 1, &v);
    break;
  }
  case 2: { /* every other column of some rows */
    int64_t vs[2] = {rnd_in(1, ROWS - r0), rnd_in(1, (cols - c0 + 1) / 2)};
    int64_t st[2] = {rs, 2};
    pto_tensor_view(&base, 2, vs, st, r0 * rs + c0, &v);
    break;
  }
  case 3: { /* a run of whole rows, reshaped to 1-D */
    int64_t rows = rnd_in(1, ROWS - r0);
    int64_t s2[2] = {rows, cols}, st2[2] = {r0, 0};
    pto_tensor s;
    pto_tensor_slice(&base, st2, s2, &s);
    int64_t flat = rows * cols;
    if (row_stride != COLS || pto_tensor_reshape(&s, 1, &flat, &v) != PTO_OK)
      v = s; /* padded rows are not contiguous: keep the 2-D view */
    break;
  }
  default: /* the whole buffer */ v = base; break;
  }
  if (v.offset > 0 && rnd_in(0, 2) == 0) { /* base = buffer + part of the offset */
    int64_t shift = rnd_in(1, (int)v.offset);
    v.buf = buf_code(b, shift * es);
    v.buf_bytes -= (size_t)(shift * es);
    v.offset -= shift;
  }
  return v;
}

static pto_tensor random_view(int b, int row_stride) {
  return random_view_of(b, row_stride, false);
}

static void random_graph(graph *g) {
  memset(g, 0, sizeof *g);
  static const int strides[] = {COLS, 300, MAX_STRIDE};
  g->row_stride = strides[rnd_in(0, 2)];
  for (int b = 0; b < NBUF; b++)
    for (int i = 0; i < BUFELEMS; i++)
      g->init[b][i] = rnd();
  int ntasks = rnd_in(4, MAX_TASKS - 4);
  int ntmp = 0;
  bool redux = rnd_in(0, 1); /* half the graphs: the others can be captured */
  for (int i = 0; g->n < ntasks; i++) {
    bool pair = rnd_in(0, 5) == 0 && g->n + 4 <= MAX_TASKS;
    if (pair) { /* scope { tmp = f(view) ; view2 (+)= g(tmp) } */
      gtask *s = &g->t[g->n++];
      s->kind = 2;
      gtask *a = &g->t[g->n++];
      a->kind = 0;
      a->nt = 2;
      a->acc[0] = PTO_OUTPUT;
      int64_t sh[2] = {rnd_in(1, 6), rnd_in(1, 6)};
      pto_tensor_desc(&a->view[0], PTO_I32, 2, sh);
      a->acc[1] = PTO_INPUT;
      a->view[1] = random_view(rnd_in(0, NBUF - 1), g->row_stride);
      a->tmp_out = ntmp;
      a->tmp_in = -1;
      a->k = rnd();
      a->rw = 0;
      a->blocks = 1;
      gtask *c = &g->t[g->n++];
      c->kind = 0;
      c->nt = 2;
      c->acc[0] = rnd_in(0, 1) ? PTO_INOUT : PTO_OUTPUT_EXISTING;
      c->view[0] = random_view(rnd_in(0, NBUF - 1), g->row_stride);
      c->acc[1] = PTO_INPUT;
      c->tmp_out = -1;
      c->tmp_in = ntmp++;
      c->k = rnd();
      c->rw = c->acc[0] == PTO_INOUT;
      c->blocks = rnd_in(1, 3);
      g->t[g->n++].kind = 3;
      continue;
    }
    gtask *t = &g->t[g->n];
    t->tmp_out = t->tmp_in = -1;
    if (rnd_in(0, 9) == 0) {
      t->kind = 1; /* dummy with explicit deps on earlier tasks */
    } else {
      t->kind = 0;
      t->nt = 1 + rnd_in(0, MAX_IN);
      /* COMMUTE adds and REDUX adds or maxima, i32 only: adds of one width
       * commute, an i16 add and an i32 add over the same bytes do not */
      static const pto_access outs[] = {PTO_INOUT, PTO_OUTPUT_EXISTING, PTO_COMMUTE, PTO_REDUX};
      t->acc[0] = outs[rnd_in(0, redux ? 3 : 2)];
      t->op = rnd_in(0, 1) ? PTO_REDUX_SUM : PTO_REDUX_MAX;
      t->rw = t->acc[0] == PTO_INOUT     ? 1
              : t->acc[0] == PTO_COMMUTE ? 2
              : t->acc[0] == PTO_REDUX   ? (t->op == PTO_REDUX_SUM ? 2 : 3)
                                         : 0;
      t->view[0] = random_view_of(rnd_in(0, NBUF - 1), g->row_stride,
                                  t->acc[0] == PTO_COMMUTE || t->acc[0] == PTO_REDUX);
      for (int k = 1; k < t->nt; k++) {
        t->acc[k] = PTO_INPUT;
        t->view[k] = random_view(rnd_in(0, NBUF - 1), g->row_stride);
      }
      t->k = rnd();
      t->blocks = rnd_in(1, 4);
    }
    int nprev = 0, prev[MAX_TASKS];
    for (int j = 0; j < g->n; j++)
      if (g->t[j].kind <= 1) prev[nprev++] = j;
    t->ndeps = nprev && rnd_in(0, 3) == 0 ? rnd_in(1, nprev < 2 ? nprev : 2) : 0;
    for (int d = 0; d < t->ndeps; d++)
      t->deps[d] = prev[rnd_in(0, nprev - 1)];
    t->priority = rnd_in(0, PTO_PRIORITY_MAX);
    g->n++;
  }
}

/* A random chip for a graph: 1-8 clusters, 1-4 schedulers, tiny to large
 * rings and TensorMap. The watchdog and ring timeouts are safety nets only
 * (no graph needs them): long enough that a loaded machine cannot turn a
 * slow run into a failure. */
static inline void random_chip_config(pto_chip_config *cfg) {
  pto_chip_config_init(cfg);
  cfg->clusters = rnd_in(1, 8);
  cfg->schedulers = rnd_in(1, cfg->clusters < 4 ? cfg->clusters : 4);
  static const uint32_t slots[] = {4, 8, 64, 1024};
  static const uint32_t depn[] = {16, 64, 4096};
  cfg->task_slots = slots[rnd_in(0, 3)];
  cfg->dep_entries = depn[rnd_in(0, 2)];
  cfg->heap_bytes = rnd_in(0, 1) ? 4096 : 1 << 20;
  cfg->tensormap_entries = rnd_in(0, 1) ? 32 : 4096;
  cfg->watchdog_ms = 10000;
  cfg->alloc_timeout_ms = 5000;
}

/* A random chip whose rings hold a whole graph at once, as a capture
 * needs (pto/graph.h): every captured task, edge and OUTPUT buffer stays
 * live until the orchestration returns. The REDUX combine tasks come on
 * top of the graph's MAX_TASKS. */
static inline void whole_graph_chip_config(pto_chip_config *cfg) {
  cfg->task_slots = 4 * MAX_TASKS;
  cfg->dep_entries = cfg->tensormap_entries = 4096;
  cfg->heap_bytes = 1 << 20;
}

/* Rebase views from buffer codes onto real memory. */
static pto_tensor bind(const pto_tensor *v, uint32_t bufs[NBUF][BUFELEMS]) {
  pto_tensor t = *v;
  intptr_t code = (intptr_t)v->buf;
  t.buf = (char *)bufs[(code & 3) - 1] + (code >> 2);
  return t;
}

/* Multi-block tasks must not read what another block of theirs writes:
 * byte sets by enumeration on the small buffers (views bound to `mem`). */
static bool views_touch(const pto_tensor *a, const pto_tensor *b, const void *mem) {
  static unsigned char mark[NBUF * BUFELEMS * sizeof(uint32_t)];
  memset(mark, 0, sizeof mark);
  const pto_tensor *v[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    size_t es = pto_dtype_size((pto_dtype)v[k]->dtype);
    for (int64_t i = 0; i < pto_tensor_numel(v[k]); i++) {
      size_t at = (size_t)((char *)pto_tensor_at_linear(v[k], i) - (const char *)mem);
      for (size_t j = 0; j < es; j++) {
        if (k == 1 && mark[at + j]) return true;
        mark[at + j] = 1;
      }
    }
  }
  return false;
}

static void fix_blocks(graph *g) {
  static uint32_t probe[NBUF][BUFELEMS];
  for (int i = 0; i < g->n; i++) {
    gtask *t = &g->t[i];
    if (t->kind == 0 && t->acc[0] == PTO_REDUX) {
      /* a contribution reads nothing of what it reduces (pto refuses an
       * overlap, as region.h decides it); its blocks have copies of their
       * own, so any block count stays */
      pto_tensor o = bind(&t->view[0], probe);
      int nt = 1;
      for (int k = 1; k < t->nt; k++) {
        pto_tensor in = bind(&t->view[k], probe);
        if (region_overlap(&o, &in)) continue;
        t->acc[nt] = t->acc[k];
        t->view[nt++] = t->view[k];
      }
      t->nt = nt;
      continue;
    }
    if (t->kind != 0 || t->blocks == 1 || t->acc[0] == PTO_OUTPUT) continue;
    pto_tensor o = bind(&t->view[0], probe);
    for (int k = 1; k < t->nt && t->blocks > 1; k++) {
      if (t->tmp_in >= 0 && k == 1) continue;
      pto_tensor in = bind(&t->view[k], probe);
      if (views_touch(&o, &in, probe)) t->blocks = 1;
    }
  }
}

/* ---- sequential reference ---- */

static void run_reference(const graph *g, uint32_t bufs[NBUF][BUFELEMS]) {
  static uint32_t tmp[MAX_TASKS][NELEM];
  pto_tensor tmpv[MAX_TASKS];
  memcpy(bufs, g->init, sizeof g->init);
  for (int i = 0; i < g->n; i++) {
    const gtask *t = &g->t[i];
    if (t->kind != 0) continue;
    pto_tensor ts[1 + MAX_IN];
    for (int k = 0; k < t->nt; k++)
      ts[k] = bind(&t->view[k], bufs);
    if (t->tmp_out >= 0) {
      ts[0] = t->view[0];
      ts[0].buf = tmp[t->tmp_out];
      ts[0].buf_bytes = sizeof tmp[0];
      memset(tmp[t->tmp_out], 0, sizeof tmp[0]);
      tmpv[t->tmp_out] = ts[0];
    }
    if (t->tmp_in >= 0) ts[1] = tmpv[t->tmp_in];
    uint64_t sc[2] = {t->k, t->rw};
    for (int b = 0; b < t->blocks; b++)
      mix_block(ts, t->nt, sc, b, t->blocks);
  }
}

/* ---- pto ---- */

typedef struct pto_graph_run {
  const graph *g;
  uint32_t (*bufs)[BUFELEMS];
  int kid;
  /* a run made to fail (test_reuse_differential.c): graph task fail_at
   * runs kernel fail_kid instead, or, with fatal, the orchestration calls
   * pto_orch_fatal just before submitting it; -1: none */
  int fail_at, fail_kid;
  bool fatal;
  /* > 0: the orchestration submits in batches (pto_orch_batch_begin):
   * one opens at every task index that is a multiple of `batch` and ends
   * half way to the next (the last may be left open: the orchestration's
   * end closes it) */
  int batch;
} pto_graph_run;

static void orchestrate(pto_orch *o, void *arg) {
  pto_graph_run *pr = arg;
  const graph *g = pr->g;
  pto_task_id ids[MAX_TASKS];
  pto_tensor tmpv[MAX_TASKS];
  for (int i = 0; i < g->n; i++) {
    const gtask *t = &g->t[i];
    ids[i] = PTO_TASK_NONE;
    if (pr->batch && i % pr->batch == 0) pto_orch_batch_begin(o);
    if (pr->batch && i % pr->batch == pr->batch / 2) pto_orch_batch_end(o);
    if (i == pr->fail_at && pr->fatal)
      pto_orch_fatal(o, "the orchestration gives up at task %d", i);
    if (t->kind == 2) {
      pto_scope_begin(o, PTO_SCOPE_AUTO);
      continue;
    }
    if (t->kind == 3) {
      pto_scope_end(o);
      continue;
    }
    pto_task_id deps[2];
    for (int d = 0; d < t->ndeps; d++)
      deps[d] = ids[t->deps[d]];
    pto_submit_opts opts = {
        .block_num = t->blocks, .deps = deps, .ndeps = t->ndeps, .priority = t->priority};
    if (t->kind == 1) {
      pto_submit_dummy(o, NULL, &opts, &ids[i]);
      continue;
    }
    pto_args a;
    pto_args_init(&a);
    pto_tensor views[1 + MAX_IN];
    for (int k = 0; k < t->nt; k++) {
      views[k] = t->tmp_out >= 0 && k == 0 ? t->view[0] : bind(&t->view[k], pr->bufs);
      if (t->tmp_in >= 0 && k == 1) views[k] = tmpv[t->tmp_in];
      if (t->acc[k] == PTO_OUTPUT)
        pto_args_output(&a, &views[k]);
      else if (t->acc[k] == PTO_REDUX)
        pto_args_redux(&a, &views[k], t->op);
      else
        pto_args_add(&a, t->acc[k], &views[k]);
    }
    pto_args_scalar(&a, t->k);
    pto_args_scalar(&a, t->rw);
    pto_submit(o, i == pr->fail_at && !pr->fatal ? pr->fail_kid : pr->kid, &a, &opts, &ids[i]);
    if (t->tmp_out >= 0) tmpv[t->tmp_out] = views[0];
  }
}

/* Whether g has REDUX arguments. */
static inline bool graph_has_redux(const graph *g) {
  for (int i = 0; i < g->n; i++)
    if (g->t[i].kind == 0 && g->t[i].acc[0] == PTO_REDUX) return true;
  return false;
}

/* A runtime-allocated OUTPUT starts with whatever the heap held; the
 * kernel for OUTPUT never reads it (rw = 0), so no zeroing is needed. */

static void print_buffers(const char *label, uint32_t b[NBUF][BUFELEMS], int row_stride) {
  for (int k = 0; k < NBUF; k++) {
    fprintf(stderr, "%s buffer %d:", label, k);
    for (int i = 0; i < NELEM; i++) /* the logical [ROWS, COLS] grid; padding is never written */
      fprintf(stderr, "%s%08x", i % COLS ? " " : "\n  ", b[k][i / COLS * row_stride + i % COLS]);
    fprintf(stderr, "\n");
  }
}

#endif
