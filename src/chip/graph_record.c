/* graph_record.c — what submit records while a capture runs (run.h:
 * graph_capture_task, graph_capture_refuse), into the record of
 * graph_rec.h. On the orchestrator's thread. */
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

/* The buffer whose base is buf, added on first use. */
static int32_t bound_buffer(pto_graph *g, const pto_tensor *v) {
  for (uint32_t i = g->nbufs; i > 0; i--) /* recent ones first: the usual reuse */
    if (g->bufs[i - 1].buf == v->buf) {
      if (v->buf_bytes > g->bufs[i - 1].bytes) g->bufs[i - 1].bytes = v->buf_bytes;
      return (int32_t)(i - 1);
    }
  if (!graph_grow((void **)&g->bufs, &g->bufs_cap, g->nbufs + 1, sizeof *g->bufs)) return -2;
  g->bufs[g->nbufs] = (graph_buf){v->buf, v->buf_bytes, v->dtype};
  return (int32_t)g->nbufs++;
}

int graph_capture_task(pto_run *r, const task *t, const pto_task_id *preds, uint32_t npreds) {
  pto_graph *g = r->capture;
  uint32_t nt = (uint32_t)t->ntensors, ns = (uint32_t)t->nscalars;
  bool ok =
      graph_grow((void **)&g->tasks, &g->tasks_cap, g->ntasks + 1, sizeof *g->tasks) &&
      graph_grow((void **)&g->scalars, &g->scalars_cap, g->nscalars + ns, sizeof *g->scalars) &&
      graph_grow((void **)&g->preds, &g->preds_cap, g->npreds + npreds, sizeof *g->preds);
  ok = ok && graph_grow((void **)&g->args, &g->args_cap, g->nargs + nt, sizeof *g->args) &&
       graph_grow((void **)&g->views, &g->views_cap, g->nargs + nt, sizeof *g->views);
  if (!ok) {
    run_fail(r, PTO_ENOMEM, t->id, -1, "capture: out of memory recording task %lld",
             (long long)t->id);
    return PTO_ENOMEM;
  }
  const uint8_t *heap = r->heap.base;
  for (uint32_t i = 0; i < nt; i++) {
    const pto_tensor *v = &t->tensors[i];
    graph_arg *a = &g->args[g->nargs + i];
    const uint8_t *p = v->buf;
    if (p >= heap && p < heap + r->heap.cap) {
      /* the capture's heap starts at the ring's base and never wraps
       * (graph.h): the offset from the base is the offset in the piece */
      a->buffer = -1;
      a->delta = p - heap;
    } else {
      a->buffer = bound_buffer(g, v);
      if (a->buffer < 0) {
        run_fail(r, PTO_ENOMEM, t->id, -1, "capture: out of memory recording a buffer");
        return PTO_ENOMEM;
      }
      a->delta = 0;
    }
    g->views[g->nargs + i] = *v;
  }
  if (ns) memcpy(g->scalars + g->nscalars, t->scalars, sizeof(uint64_t) * ns);
  if (npreds) memcpy(g->preds + g->npreds, preds, sizeof(pto_task_id) * npreds);
  g->tasks[g->ntasks++] = (graph_task){
      t->kernel, t->block_num, t->units_total, t->ntensors, t->nscalars, t->shape, t->sync_start,
      g->nargs,  g->nscalars,  g->npreds,      npreds,      0,           0};
  g->nargs += nt;
  g->nscalars += ns;
  g->npreds += npreds;
  if (r->heap.head > r->heap.tail && r->heap.head - r->heap.tail > g->heap_span)
    g->heap_span = r->heap.head - r->heap.tail;
  return PTO_OK;
}

int graph_capture_refuse(pto_run *r, const char *what) {
  run_fail(r, PTO_EGRAPH, PTO_TASK_NONE, -1,
           "capture (task %lld): %s; a captured graph keeps all its tasks, edges and OUTPUT "
           "buffers live until the orchestration returns, and a replay has no host side",
           (long long)r->next_id, what);
  return atomic_load_explicit(&r->status, memory_order_acquire);
}
