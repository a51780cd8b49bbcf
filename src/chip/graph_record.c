/* graph_record.c — what submit records while a capture runs (run.h:
 * graph_capture_reduce, graph_capture_task, graph_capture_refuse), into
 * the record of graph_rec.h. On the orchestrator's thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/graph_rec.h"
#include "chip/run.h"

/* ---- growing arrays ---- */

static bool graph_grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
  if (need <= *cap) return true;
  uint32_t c = *cap ? *cap : 64;
  while (c < need)
    c *= 2;
  void *n = realloc(*p, size * c);
  if (!n) return false;
  *p = n;
  *cap = c;
  return true;
}

/* ---- capture (the orchestrator's thread, from submit) ---- */

/* The buffer index of base pointer p: an open-addressing table of
 * indexes + 1 (0: empty), at most half full, so that a graph of many
 * buffers records each in constant time. */
static uint32_t buf_hash(const void *p, uint32_t mask) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & mask;
}

static bool bufmap_grow(pto_graph *g) {
  uint32_t cap = g->bufmap_cap ? g->bufmap_cap * 2 : 64;
  int32_t *m = calloc(cap, sizeof *m);
  if (!m) return false;
  for (uint32_t i = 0; i < g->nbufs; i++) {
    uint32_t h = buf_hash(g->bufs[i].buf, cap - 1);
    while (m[h])
      h = (h + 1) & (cap - 1);
    m[h] = (int32_t)i + 1;
  }
  free(g->bufmap);
  g->bufmap = m;
  g->bufmap_cap = cap;
  return true;
}

/* The bound buffer whose base is v->buf, added on first use; -1: out of
 * memory. */
static int32_t bound_buffer(pto_graph *g, const pto_tensor *v) {
  if (2 * (g->nbufs + 1) > g->bufmap_cap && !bufmap_grow(g)) return -1;
  uint32_t mask = g->bufmap_cap - 1, h = buf_hash(v->buf, mask);
  for (; g->bufmap[h]; h = (h + 1) & mask) {
    graph_buf *b = &g->bufs[g->bufmap[h] - 1];
    if (b->buf == v->buf) {
      if (v->buf_bytes > b->bytes) b->bytes = v->buf_bytes;
      return g->bufmap[h] - 1;
    }
  }
  if (!graph_grow((void **)&g->bufs, &g->bufs_cap, g->nbufs + 1, sizeof *g->bufs)) return -1;
  g->bufs[g->nbufs] = (graph_buf){v->buf, v->buf_bytes, v->dtype};
  g->bufmap[h] = (int32_t)g->nbufs + 1;
  return (int32_t)g->nbufs++;
}

static int cmp_id(const void *a, const void *b) {
  pto_task_id x = *(const pto_task_id *)a, y = *(const pto_task_id *)b;
  return x < y ? -1 : x > y;
}

/* c(p): every task up to c(p) is p or an ancestor of p. */
static int64_t covered(const graph_task *t, int64_t p) { return t->pre >= p - 1 ? p : t->pre; }

/* Drops each producer of the new task that another of its producers
 * already follows: its edge is implied. Why it matters: with nothing
 * retiring, the TensorMap keeps every reader of a region that no later
 * write covers (the readers of a whole buffer whose parts are written),
 * and each writer of a part would take an edge to every such reader ever,
 * edges growing with the square of the rounds. Two sound rules:
 *   - p is dropped when p <= c(p') for another producer p', c as above
 *     (each task's `pre`: the largest m with all of 0..m its ancestors:
 *     the largest c of its producers, extended by producers that follow
 *     it without a gap);
 *   - p is dropped when it is a recorded producer of another producer.
 * Each dropped producer is an ancestor of one of higher id, and the
 * producer of highest id is never dropped, so every dropped one is reached
 * through a kept one. Returns the producers kept, compacted in place. */
uint32_t graph_capture_reduce(pto_run *r, pto_task_id *preds, uint32_t n) {
  pto_graph *g = r->capture;
  int64_t c1 = -1, c2 = -1; /* the two largest c(p), and whose the first is */
  pto_task_id who = -1;
  for (uint32_t i = 0; i < n; i++) {
    int64_t c = covered(&g->tasks[preds[i]], preds[i]);
    if (c > c1) {
      c2 = c1;
      c1 = c;
      who = preds[i];
    } else if (c > c2) {
      c2 = c;
    }
  }
  uint32_t stamp = g->ntasks + 1; /* this task's: marks of earlier ones differ */
  for (uint32_t i = 0; i < n; i++) {
    const graph_task *q = &g->tasks[preds[i]];
    for (uint32_t k = 0; k < q->npred; k++)
      g->mark[g->preds[q->pred0 + k]] = stamp;
  }
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (preds[i] > (preds[i] == who ? c2 : c1) && g->mark[preds[i]] != stamp) preds[m++] = preds[i];
  qsort(preds, m, sizeof *preds, cmp_id); /* ascending, for the task's `pre` */
  return m;
}

/* Whether p is in the chip's heap (a launch places it in its piece). */
static bool in_heap(const pto_run *r, const void *p) { return ring_holds(&r->heap, p); }

int graph_capture_task(pto_run *r, const task *t, const pto_args *a, const pto_task_id *preds,
                       uint32_t npreds) {
  pto_graph *g = r->capture;
  uint32_t nt = (uint32_t)t->ntensors, ns = (uint32_t)t->nscalars;
  bool fixed = t->kernel == KERNEL_REDUX_COMBINE;
  uint32_t nredux = (uint32_t)__builtin_popcount(t->redux_args), commute_args = 0;
  for (uint32_t i = 0; t->commute && i < nt && i < PTO_MAX_TENSOR_ARGS; i++)
    commute_args |= (uint32_t)(a->access[i] == PTO_COMMUTE) << i;
  uint32_t marks = g->tasks_cap;
  uint32_t *mark = NULL;
  if (!graph_grow((void **)&g->tasks, &g->tasks_cap, g->ntasks + 1, sizeof *g->tasks) ||
      (g->tasks_cap != marks && !(mark = realloc(g->mark, sizeof *g->mark * g->tasks_cap)))) {
    run_fail(r, PTO_ENOMEM, t->id, -1, "capture: out of memory recording task %lld",
             (long long)t->id);
    return PTO_ENOMEM;
  }
  if (mark) { /* stamps of tasks not recorded yet must match none */
    memset(mark + marks, 0, sizeof *mark * (g->tasks_cap - marks));
    g->mark = mark;
  }
  bool ok = (fixed ? graph_grow((void **)&g->fixed, &g->fixed_cap, g->nfixed + ns, sizeof *g->fixed)
                   : graph_grow((void **)&g->scalars, &g->scalars_cap, g->nscalars + ns,
                                sizeof *g->scalars)) &&
            graph_grow((void **)&g->inits, &g->inits_cap, g->ninits + nredux, sizeof *g->inits) &&
            graph_grow((void **)&g->preds, &g->preds_cap, g->npreds + npreds, sizeof *g->preds);
  ok = ok && graph_grow((void **)&g->args, &g->args_cap, g->nargs + nt, sizeof *g->args) &&
       graph_grow((void **)&g->views, &g->views_cap, g->nargs + nt, sizeof *g->views);
  if (!ok) {
    run_fail(r, PTO_ENOMEM, t->id, -1, "capture: out of memory recording task %lld",
             (long long)t->id);
    return PTO_ENOMEM;
  }
  for (uint32_t i = 0; i < nt; i++) {
    const pto_tensor *v = &t->tensors[i];
    graph_arg *ga = &g->args[g->nargs + i];
    if (t->redux_args >> i & 1) {
      /* v is the copies, in the heap; the reduced view's buffer is
       * numbered at its first contribution, the user's first use of it
       * (its combine task comes later) */
      if (!in_heap(r, a->tensors[i].buf) && bound_buffer(g, &a->tensors[i]) < 0) goto oom;
      g->inits[g->ninits++] = (graph_init){g->nargs + i, a->redux_op[i],
                                           t->units_total ? t->units_total : 1, t->kernel == -1};
    }
    if (in_heap(r, v->buf)) {
      /* the capture's heap starts at the ring's base and never wraps
       * (graph.h): the offset from the base is the offset in the piece */
      ga->buffer = -1;
      ga->delta = (const uint8_t *)v->buf - r->heap.base;
    } else {
      ga->buffer = bound_buffer(g, v);
      if (ga->buffer < 0) goto oom;
      ga->delta = 0;
    }
    g->views[g->nargs + i] = *v;
  }
  if (ns)
    memcpy(fixed ? g->fixed + g->nfixed : g->scalars + g->nscalars, t->scalars,
           sizeof(uint64_t) * ns);
  if (npreds) memcpy(g->preds + g->npreds, preds, sizeof(pto_task_id) * npreds);
  /* the largest c of its producers (the kept ones': a dropped one is at
   * most another's c), then each producer right after it (ascending) */
  int64_t pre = -1;
  for (uint32_t k = 0; k < npreds; k++) {
    int64_t c = covered(&g->tasks[preds[k]], preds[k]);
    if (c > pre) pre = c;
  }
  for (uint32_t k = 0; k < npreds; k++)
    if (preds[k] == pre + 1) pre = preds[k];
  g->tasks[g->ntasks++] = (graph_task){.kernel = t->kernel,
                                       .block_num = t->block_num,
                                       .units_total = t->units_total,
                                       .ntensors = t->ntensors,
                                       .nscalars = t->nscalars,
                                       .shape = t->shape,
                                       .sync_start = t->sync_start,
                                       .priority = t->priority,
                                       .fixed = fixed,
                                       .redux_args = t->redux_args,
                                       .commute_args = commute_args,
                                       .arg0 = g->nargs,
                                       .scalar0 = fixed ? g->nfixed : g->nscalars,
                                       .cm0 = g->ncm,
                                       .pred0 = g->npreds,
                                       .npred = npreds,
                                       .pre = pre};
  memcpy(g->tasks[g->ntasks - 1].redux_op, t->redux_op, sizeof t->redux_op);
  g->nargs += nt;
  if (fixed)
    g->nfixed += ns;
  else
    g->nscalars += ns;
  g->ncm += (uint32_t)__builtin_popcount(commute_args);
  g->npreds += npreds;
  if (r->heap.head > r->heap.tail && r->heap.head - r->heap.tail > g->heap_span)
    g->heap_span = r->heap.head - r->heap.tail;
  return PTO_OK;
oom:
  run_fail(r, PTO_ENOMEM, t->id, -1, "capture: out of memory recording a buffer");
  return PTO_ENOMEM;
}

int graph_capture_refuse(pto_run *r, const char *what) {
  run_fail(r, PTO_EGRAPH, PTO_TASK_NONE, -1,
           "capture (task %lld): %s; a captured graph keeps all its tasks, edges and OUTPUT "
           "buffers live until the orchestration returns, and a replay has no host side",
           (long long)r->next_id, what);
  return run_latched(r);
}
