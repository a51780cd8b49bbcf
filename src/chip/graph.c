/* graph.c — captured graphs (pto/graph.h): the record (graph_rec.h, filled
 * by graph_record.c) turned into replayable arrays, the checks a launch
 * makes before it starts a run, and the replay itself, an orchestration
 * function that fills the task slots from the arrays.
 *
 * Why a capture keeps every task live (orch_retire does nothing while it
 * runs): the TensorMap forgets a producer once it retires, and so would
 * the record's edges to it; a replay starts with no task done, so it needs
 * every edge. It also keeps every heap byte allocated once, so the
 * capture's heap layout is one valid placement of all OUTPUT buffers at
 * once, which a launch reproduces at a new base. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/graph_rec.h"
#include "chip/ready_batch.h"
#include "chip/run.h"
#include "common/clock.h"
#include "common/last_error.h"
#include "pto/graph.h"

/* ---- the record made replayable ---- */

static int cmp_pair(const void *x, const void *y) {
  const graph_pair *a = x, *b = y;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  return a->b < b->b ? -1 : a->b > b->b;
}

typedef struct buf_order {
  const uint8_t *lo;
  uint64_t hi;
  int32_t i;
} buf_order;

static int cmp_order(const void *x, const void *y) {
  const buf_order *a = x, *b = y;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

/* Overlapping pairs of intervals, by a sweep over them sorted by start:
 * calls fn for each (i < j as buffer indexes). O(n log n + pairs). */
static int overlaps(const graph_buf *bufs, uint8_t *const *bases, uint32_t n,
                    int (*fn)(void *, int32_t, int32_t, int64_t), void *arg) {
  buf_order *o = malloc(sizeof *o * (n ? n : 1));
  if (!o) return PTO_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *b = bases ? bases[i] : bufs[i].buf;
    o[i] = (buf_order){b, (uint64_t)(uintptr_t)b + bufs[i].bytes, (int32_t)i};
  }
  qsort(o, n, sizeof *o, cmp_order);
  int rc = 0;
  for (uint32_t i = 0; i < n && !rc; i++)
    for (uint32_t j = i + 1; j < n && !rc && (uint64_t)(uintptr_t)o[j].lo < o[i].hi; j++) {
      int32_t a = o[i].i, b = o[j].i;
      int64_t dist = o[j].lo - o[i].lo;
      if (a > b) {
        int32_t s = a;
        a = b;
        b = s;
        dist = -dist;
      }
      rc = fn(arg, a, b, dist);
    }
  free(o);
  return rc;
}

static int add_pair(void *arg, int32_t a, int32_t b, int64_t dist) {
  pto_graph *g = arg;
  if ((g->npairs & (g->npairs - 1)) == 0) { /* 0, 1, 2, 4, ...: doubling */
    graph_pair *p = realloc(g->pairs, sizeof *p * (g->npairs ? 2 * g->npairs : 1));
    if (!p) return PTO_ENOMEM;
    g->pairs = p;
  }
  g->pairs[g->npairs++] = (graph_pair){a, b, dist};
  return 0;
}

/* Successor lists from the predecessor lists, the initial fanins, each
 * task's first predecessor, the roots, and the capture's overlapping
 * buffer pairs. */
static int graph_build(pto_graph *g) {
  uint32_t n = g->ntasks;
  g->fanin = calloc(n ? n : 1, sizeof *g->fanin);
  g->succ = malloc(sizeof *g->succ * (g->npreds ? g->npreds : 1));
  g->roots = malloc(sizeof *g->roots * (n ? n : 1));
  g->run_views = malloc(sizeof *g->run_views * (g->nargs ? g->nargs : 1));
  g->run_scalars = malloc(sizeof *g->run_scalars * (g->nscalars ? g->nscalars : 1));
  g->bases = calloc(g->nbufs + 1, sizeof *g->bases);
  g->run_cm = malloc(sizeof *g->run_cm * (g->ncm ? g->ncm : 1));
  if (!g->fanin || !g->succ || !g->roots || !g->run_views || !g->run_scalars || !g->bases ||
      !g->run_cm)
    return PTO_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    graph_task *t = &g->tasks[i];
    g->fanin[i] = (int32_t)t->npred;
    t->first_pred = UINT32_MAX;
    for (uint32_t k = 0; k < t->npred; k++) {
      uint32_t p = (uint32_t)g->preds[t->pred0 + k];
      g->tasks[p].nsucc++;
      if (p < t->first_pred) t->first_pred = p;
    }
    if (!t->npred) g->roots[g->nroots++] = i;
    g->nsync += t->sync_start;
  }
  uint32_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    g->tasks[i].succ0 = at;
    at += g->tasks[i].nsucc;
    g->tasks[i].nsucc = 0;
  }
  /* newest consumer first, as a fanout list is: a completion releases its
   * first few consumers oldest first (sched.c, RELEASE_ORDERED) */
  for (uint32_t i = n; i > 0; i--) {
    graph_task *t = &g->tasks[i - 1];
    for (uint32_t k = 0; k < t->npred; k++) {
      graph_task *p = &g->tasks[g->preds[t->pred0 + k]];
      g->succ[p->succ0 + p->nsucc++] = i - 1;
    }
  }
  int rc = overlaps(g->bufs, NULL, g->nbufs, add_pair, g);
  if (!rc && g->npairs) qsort(g->pairs, g->npairs, sizeof *g->pairs, cmp_pair);
  return rc;
}

/* The orchestration a capture runs: the caller's, with the run recording. */
typedef struct capture_call {
  pto_orch_fn fn;
  void *arg;
  pto_graph *g;
} capture_call;

static void capture_orch(pto_orch *o, void *arg) {
  capture_call *c = arg;
  pto_run *r = o->run;
  r->capture = c->g;
  c->fn(o, c->arg);
  /* the reductions left open fold now, while the record still takes
   * their combine tasks (the run's end would fold them unrecorded) */
  if (!run_latched(r)) redux_flush_all(r);
  r->capture = NULL; /* retirement resumes: the run's end retires everything */
}

static int capture_graph(pto_chip *chip, pto_orch_fn fn, void *arg, pto_graph **graph,
                         pto_run_stats *stats, pto_error_info *err) {
  if (graph) *graph = NULL;
  pto_graph *g = calloc(1, sizeof *g);
  if (!graph || !g || !fn || !chip) {
    free(g);
    if (stats) memset(stats, 0, sizeof *stats); /* as a run's: filled in every case */
    error_info_reset(err);
    err->code = g ? PTO_EGRAPH : PTO_ENOMEM;
    snprintf(err->details, sizeof err->details, "pto_graph_capture: %s",
             !g       ? "out of memory"
             : !graph ? "graph (the result) is NULL"
             : !chip  ? "chip is NULL"
                      : "orchestration function is NULL");
    return err->code;
  }
  g->chip = chip;
  g->chip_uid = chip->uid;
  capture_call c = {fn, arg, g};
  int rc = pto_chip_run(chip, capture_orch, &c, stats, err);
  if (!rc && (rc = graph_build(g)) != 0) {
    err->code = rc;
    snprintf(err->details, sizeof err->details,
             "pto_graph_capture: out of memory building "
             "the graph's arrays");
  }
  if (rc) {
    pto_graph_destroy(g);
    return rc;
  }
  *graph = g;
  return PTO_OK;
}

/* A graph's launch state (g->busy): idle, being launched, or destroyed
 * while it was being launched (its launch frees it as it ends: a kernel or
 * another thread may destroy it mid-launch, whose tasks point into it). */
enum { GRAPH_IDLE = 0, GRAPH_LAUNCHING, GRAPH_DOOMED, GRAPH_HELD };

static void graph_free(pto_graph *g) {
  free(g->tasks);
  free(g->views);
  free(g->args);
  free(g->scalars);
  free(g->fixed);
  free(g->inits);
  free(g->preds);
  free(g->bufs);
  free(g->bufmap);
  free(g->mark);
  free(g->succ);
  free(g->fanin);
  free(g->roots);
  free(g->pairs);
  free(g->run_views);
  free(g->run_scalars);
  free(g->run_cm);
  free(g->bases);
  free(g);
}

void pto_graph_destroy(pto_graph *g) {
  if (!g) return;
  /* mid-launch: its launch frees it; held by its chip (a thread of its
   * last launch still inside): the chip does (acq_rel: against their
   * ends) */
  int s = atomic_load_explicit(&g->busy, memory_order_acquire);
  while (s == GRAPH_LAUNCHING || s == GRAPH_HELD)
    if (atomic_compare_exchange_weak_explicit(&g->busy, &s, GRAPH_DOOMED, memory_order_acq_rel,
                                              memory_order_acquire))
      return;
  graph_free(g);
}

/* A launch whose run ended with a thread still inside (run_loan.hold): the
 * graph stays the chip's (relaunches refused, a destroy deferred) until
 * graph_release_held, which the chip calls, holding itself (running),
 * once that thread has left, or as it is freed. */
static void *graph_hold_for_chip(void *arg) {
  graph_launch *l = arg;
  pto_graph *g = l->g;
  l->held = true; /* its launch touches g no more: the chip may free it */
  g->launches++;
  g->warm = false;
  g->warm_seq = l->seq;
  int launching = GRAPH_LAUNCHING; /* destroyed meanwhile: it stays so, the chip frees it */
  atomic_compare_exchange_strong_explicit(&g->busy, &launching, GRAPH_HELD, memory_order_acq_rel,
                                          memory_order_acquire);
  return g;
}

static void graph_release_held(void *held) {
  pto_graph *g = held;
  int expect = GRAPH_HELD;
  if (!atomic_compare_exchange_strong_explicit(&g->busy, &expect, GRAPH_IDLE, memory_order_acq_rel,
                                               memory_order_acquire))
    graph_free(g); /* destroyed while held */
}

int pto_graph_get_info(const pto_graph *g, pto_graph_info *info) {
  if (!g || !info) return PTO_EGRAPH;
  *info = (pto_graph_info){g->ntasks,    g->npreds,   (int32_t)g->nbufs, (int32_t)g->nscalars,
                           g->heap_span, g->launches, g->warm_launches};
  return PTO_OK;
}

int pto_graph_buffer(const pto_graph *g, int i, pto_tensor *out) {
  if (!g || !out || i < 0 || (uint32_t)i >= g->nbufs) return PTO_EGRAPH;
  memset(out, 0, sizeof *out);
  out->buf = g->bufs[i].buf;
  out->buf_bytes = g->bufs[i].bytes;
  out->dtype = g->bufs[i].dtype;
  return PTO_OK;
}

/* ---- launch: the checks before any run starts ---- */

typedef struct pair_check {
  const pto_graph *g;
  uint32_t found;
  char *why;
  size_t n;
} pair_check;

/* Two bound buffers overlap now: they must have, at the same distance. */
static int check_pair(void *arg, int32_t a, int32_t b, int64_t dist) {
  pair_check *c = arg;
  graph_pair key = {a, b, 0};
  const graph_pair *p =
      c->g->npairs ? bsearch(&key, c->g->pairs, c->g->npairs, sizeof key, cmp_pair) : NULL;
  if (p && p->dist == dist) {
    c->found++;
    return 0;
  }
  if (p)
    snprintf(c->why, c->n,
             "bound buffers %d and %d overlap %lld bytes apart, but were %lld bytes apart at "
             "capture: the captured dependencies follow the old overlap",
             a, b, (long long)dist, (long long)p->dist);
  else
    snprintf(c->why, c->n,
             "bound buffers %d and %d overlap (%lld bytes apart) but were disjoint at capture: "
             "the captured graph has no edges between their tasks",
             a, b, (long long)dist);
  return PTO_EGRAPH;
}

static int graph_check(pto_chip *chip, pto_graph *g, const pto_graph_bindings *b, char *why,
                       size_t n) {
  /* the pointer alone is not the chip: one made where a destroyed chip
   * was has its address (compared, never read through) */
  if (chip != g->chip || chip->uid != g->chip_uid)
    return snprintf(why, n,
                    "the graph was captured on another chip%s: its kernel ids, rings and "
                    "heap are that chip's",
                    chip == g->chip ? " (since destroyed; this one was made at its address)" : ""),
           PTO_EGRAPH;
  int32_t nb = b ? b->nbuffers : 0, ns = b ? b->nscalars : 0;
  if (nb && (nb != (int32_t)g->nbufs || !b->buffers))
    return snprintf(why, n, "bindings give %d buffers%s, the graph has %u (or 0: as captured)", nb,
                    b->buffers ? "" : " (buffers NULL)", g->nbufs),
           PTO_EGRAPH;
  if (ns && (ns != (int32_t)g->nscalars || !b->scalars))
    return snprintf(why, n, "bindings give %d scalars%s, the graph has %u (or 0: as captured)", ns,
                    b->scalars ? "" : " (scalars NULL)", g->nscalars),
           PTO_EGRAPH;
  if (nb < 0 || ns < 0) return snprintf(why, n, "negative binding count"), PTO_EGRAPH;
  const ring *heap = chip->run ? &chip->run->heap : NULL;
  for (uint32_t i = 0; i < g->nbufs; i++) {
    const pto_tensor *t = nb ? &b->buffers[i] : NULL;
    uint8_t *base = t && t->buf ? t->buf : g->bufs[i].buf;
    if (t && t->buf) {
      if (t->buf_bytes != g->bufs[i].bytes)
        return snprintf(why, n, "buffer %u is bound to %zu bytes, captured with %zu", i,
                        t->buf_bytes, g->bufs[i].bytes),
               PTO_EGRAPH;
      if (t->dtype != g->bufs[i].dtype)
        return snprintf(why, n, "buffer %u is bound as %s, captured as %s", i,
                        pto_dtype_name((pto_dtype)t->dtype),
                        pto_dtype_name((pto_dtype)g->bufs[i].dtype)),
               PTO_EGRAPH;
      if (heap && base < heap->base + heap->cap && base + t->buf_bytes > heap->base)
        return snprintf(why, n,
                        "buffer %u is bound inside the chip's heap, where the launch "
                        "places the graph's OUTPUT buffers",
                        i),
               PTO_EGRAPH;
    }
    if (base != g->bases[i]) { /* the views no longer hold the bases: even if a */
      g->bases[i] = base;      /* later buffer is refused, the next launch rebases */
      g->rebased = false;
    }
  }
  if (!g->rebased) { /* bases moved: the overlaps are checked again */
    pair_check c = {g, 0, why, n};
    int rc = overlaps(g->bufs, g->bases, g->nbufs, check_pair, &c);
    if (rc == PTO_ENOMEM) snprintf(why, n, "out of memory checking the bindings' overlap");
    if (rc) {
      g->rebased = false; /* the bases above are not what the views hold */
      return rc;
    }
    if (c.found != g->npairs)
      return g->rebased = false,
             snprintf(why, n,
                      "%u bound buffer pairs that overlapped at capture no longer "
                      "overlap: the captured dependencies follow the old overlap",
                      g->npairs - c.found),
             PTO_EGRAPH;
  }
  if (ns)
    memcpy(g->run_scalars, b->scalars, sizeof(uint64_t) * (size_t)ns);
  else if (g->nscalars)
    memcpy(g->run_scalars, g->scalars, sizeof(uint64_t) * g->nscalars);
  return PTO_OK;
}

/* ---- the replay: an orchestration that fills the slots ---- */

/* Slot i as its task was captured: ready to run once its fanin drops
 * to zero, with its successor list fixed. `guarded` (a launch that
 * pushes as it fills, replay_orch): the fanin is not written here but by
 * the fill of its first predecessor, with one more for this fill's
 * guard; and this fill writes those of the successors it comes first
 * for. Else the fanin is written here, before any push. */
static void fill_slot(pto_run *r, pto_graph *g, uint32_t i, bool guarded) {
  const graph_task *gt = &g->tasks[i];
  task *t = &r->slots[i];
  t->id = i;
  t->kernel = gt->kernel;
  t->shape = gt->shape;
  t->block_num = gt->block_num;
  t->units_total = gt->units_total;
  t->sync_start = gt->sync_start;
  t->priority = gt->priority;
  t->redux_args = gt->redux_args;
  memcpy(t->redux_op, gt->redux_op, sizeof t->redux_op);
  t->commute = gt->commute_args != 0;
  if (t->commute) /* the views that exclude each other, as submit sets them */
    cm_link_views(&r->cm.links[i], g->run_cm + gt->cm0, g->run_views + gt->arg0, NULL, gt->ntensors,
                  gt->commute_args);
  t->scope_depth = 0;
  t->dep_mark = PTO_TASK_NONE;
  t->ntensors = gt->ntensors;
  t->nscalars = gt->nscalars;
  t->tensors = g->run_views + gt->arg0;
  t->scalars = (gt->fixed ? g->fixed : g->run_scalars) + gt->scalar0;
  t->heap_end = r->heap.head;
  t->args_end = r->args.head;
  t->dep_end = g->npreds;
  t->ndeps = 0; /* its nodes are successor lists: nothing for dep_reduce to read */
  t->dep_max = -1;
  t->pre = -1;
  /* the successor list as dependency nodes, in the pool's first entries */
  for (uint32_t k = 0; k < gt->nsucc; k++) {
    uint32_t s = g->succ[gt->succ0 + k];
    dep_node *d = &r->deps[gt->succ0 + k];
    d->consumer = &r->slots[s];
    d->next = k + 1 < gt->nsucc ? (int64_t)(gt->succ0 + k + 1) : -1;
    /* before any predecessor of s can complete: they are filled (and so
     * pushed) after this one; relaxed: this task's push or its own guard
     * drop publishes it */
    if (guarded && g->tasks[s].first_pred == i)
      atomic_store_explicit(&r->slots[s].fanin, g->fanin[s] + 1, memory_order_relaxed);
  }
  atomic_store_explicit(&t->fanout_head, gt->nsucc ? (int64_t)gt->succ0 : FANOUT_EMPTY,
                        memory_order_relaxed);
  t->fixed_fanout = true; /* no submit links into it: its completion only reads it */
  t->fanin0 = g->fanin[i];
  t->next_block = 0;
  atomic_store_explicit(&t->units_done, 0, memory_order_relaxed);
  task_set_state(r, t, TASK_PENDING, memory_order_relaxed);
  if (!guarded || !g->fanin[i]) /* a root's: nobody else writes it */
    atomic_store_explicit(&t->fanin, g->fanin[i], memory_order_relaxed);
  atomic_store_explicit(&t->cohort_go, 0, memory_order_relaxed);
  atomic_store_explicit(&t->drain_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&t->first_start_ns, UINT64_MAX, memory_order_relaxed);
  atomic_store_explicit(&t->last_start_ns, 0, memory_order_relaxed);
}

/* The first `filled` tasks as submitted: `submitted` counts them for the
 * watchdog, the run's end and its stats, as a dynamic run's submits do.
 * Release: their slots are visible to whoever reads it. */
static void publish_filled(pto_run *r, uint32_t filled) {
  r->next_id = filled;
  atomic_store_explicit(&r->submitted, filled, memory_order_release);
}

static void replay_orch(pto_orch *o, void *arg) {
  graph_launch *l = arg;
  pto_graph *g = l->g;
  pto_run *r = o->run;
  uint64_t t0 = pto_now_ns();
  l->started = true;
  l->seq = r->chip->run_seq;
  /* the run's end hands g to the chip if a thread stays inside */
  r->loan = (run_loan){graph_hold_for_chip, graph_release_held, l};
  uint8_t *piece = NULL;
  if (g->heap_span) {
    /* the heap is empty at a run's start: the piece is its first bytes */
    piece = ring_try_alloc(&r->heap, g->heap_span);
    if (!piece) {
      run_fail(r, PTO_EGRAPH, PTO_TASK_NONE, -1,
               "launch: %llu heap bytes for the graph's OUTPUT buffers not free (heap_bytes %llu)",
               (unsigned long long)g->heap_span, (unsigned long long)r->heap.cap);
      return;
    }
  }
  if (!g->rebased || g->bases[g->nbufs] != piece) {
    for (uint32_t i = 0; i < g->nargs; i++) {
      pto_tensor *v = &g->run_views[i];
      *v = g->views[i];
      if (g->args[i].buffer >= 0) {
        v->buf = g->bases[g->args[i].buffer];
      } else {
        v->buf = piece + g->args[i].delta;
        /* the capture's allocation is gone, and only the orchestrator's
         * checks read a tag (a replay makes none): untagged, as a view
         * built by hand over heap memory */
        v->alloc_tag = 0;
      }
    }
    g->bases[g->nbufs] = piece;
    g->rebased = true;
  }
  /* the REDUX copies start from the op's identity at every launch, as at
   * submit: set by the cores before their kernels, and here those of a
   * dummy task and, in checking mode, every one (redux.h) */
  for (uint32_t i = 0; i < g->ninits; i++)
    if (g->inits[i].dummy || r->contract)
      redux_identity_copies(r->chip, g->inits[i].op, &g->run_views[g->inits[i].arg],
                            g->inits[i].units);
  r->dep_head = g->npreds;
  if (g->nsync) atomic_fetch_add_explicit(&r->sync_tasks, g->nsync, memory_order_relaxed);
  /* The slots are filled in order, and a task is pushed as soon as it is
   * ready: the cores run the first tasks while the rest are filled, instead
   * of waiting for all of them (on a chain, the fill was about a quarter of
   * a launch, none of it overlapping the run). Each task's fanin counts one
   * more than its predecessors until its own fill drops it (the guard; a
   * submit needs none, its slot written before its first link): set by the
   * fill of its first predecessor, so before any predecessor can complete,
   * and dropped once its slot is filled, so whoever drops it to zero (a
   * completing predecessor, or this fill when they all completed) finds the
   * slot filled. A task is read by other threads only once a push made it
   * or an ancestor ready, and that push releases its slot (a completion's
   * peek at its consumers reads their fanin first, handoff.h). What the
   * fill finds ready is pushed READY_BATCH at a time (one pass request per
   * batch). All slots first, then the roots, when something reads slots
   * beyond what was pushed: a trace (the submits' slices below), a
   * controlled schedule or checking mode (they count the tasks submitted),
   * COMMUTE links (cm_link_views: a task's exclusion partners) and gangs.
   * tests/unit/test_graph_fill_explorer.c explores the guard and the warm
   * launch below. */
  uint32_t n = g->ntasks;
  const bool fill_all = r->trace || r->ctl || r->contract || g->ncm || g->nsync;
  g->warm_path = !fill_all;
  /* Warm: the chip's run before this one was this graph's successful
   * launch on this path, so every slot holds this graph's task with its
   * fanin and counts as its completion set them back, and its dependency
   * nodes as filled; the states it left are an earlier run's (task_state
   * reads them as PENDING). Nothing to write: the roots are pushed. A
   * graph with more roots than one batch is not launched warm: pushed at
   * once, its independent tasks went through the passes of both cores
   * (W2: 400-560 ns a task on 2 CPUs against 59-65 pushed as filled). */
  if (!fill_all && g->warm && g->warm_seq + 1 == r->chip->run_seq && g->nroots <= READY_BATCH) {
    g->warm_launches++;
    publish_filled(r, n);
    sched_make_ready_batch(r, g->roots, g->nroots);
    return;
  }
  if (fill_all) {
    for (uint32_t i = 0; i < n; i++)
      fill_slot(r, g, i, false);
    publish_filled(r, n);
    if (r->trace) { /* the submits a dynamic run shows, with their arrows */
      uint64_t t1 = pto_now_ns();
      for (uint32_t i = 0; i < n; i++)
        trace_slice_deps(r->trace, r->orch_track, "replay", "orch", t0, t1, i, -1,
                         g->preds + g->tasks[i].pred0, (int)g->tasks[i].npred);
    }
    /* pushed READY_BATCH at a time, each with one pass request */
    sched_make_ready_batch(r, g->roots, g->nroots);
    return;
  }
  uint32_t ready[READY_BATCH], nready = 0;
  for (uint32_t i = 0; i < n; i++) {
    fill_slot(r, g, i, true);
    /* counted before it can run: a completion is never ahead of the count */
    publish_filled(r, i + 1);
    /* the guard: acq_rel pairs with the predecessors' decrements
     * (release_consumer), as a submit's */
    if (!g->fanin[i] || atomic_fetch_sub_explicit(&r->slots[i].fanin, 1, memory_order_acq_rel) == 1)
      ready[nready++] = i;
    /* READY_BATCH slots at most between flushes: ready[] never overflows */
    if (nready && ((i + 1) % READY_BATCH == 0 || i + 1 == n)) {
      sched_make_ready_batch(r, ready, nready);
      nready = 0;
    }
  }
}

static int refuse(int rc, const char *why, pto_run_stats *stats, pto_error_info *err) {
  if (stats) memset(stats, 0, sizeof *stats);
  error_info_reset(err);
  err->code = rc;
  snprintf(err->details, sizeof err->details, "pto_graph_launch refused: %s", why);
  return rc;
}

static int launch_graph(pto_chip *chip, pto_graph *g, const pto_graph_bindings *b,
                        pto_run_stats *stats, pto_error_info *err) {
  char why[400];
  int idle = GRAPH_IDLE;
  if (!g) return refuse(PTO_EGRAPH, "graph is NULL", stats, err);
  if (!chip) return refuse(PTO_EGRAPH, "chip is NULL", stats, err);
  /* held by its chip: given back if the thread inside has left since */
  if (atomic_load_explicit(&g->busy, memory_order_acquire) == GRAPH_HELD) chip_settle(chip);
  if (!atomic_compare_exchange_strong(&g->busy, &idle, GRAPH_LAUNCHING))
    return refuse(PTO_EGRAPH,
                  idle == GRAPH_HELD
                      ? "a thread of its last launch is still inside it (a kernel that ignores "
                        "pto_kctx_cancelled, pto_chip_stuck): it launches again once that thread "
                        "has left"
                      : "the graph is being launched by another thread",
                  stats, err);
  int rc = graph_check(chip, g, b, why, sizeof why);
  graph_launch l = {g, false, 0, false};
  if (rc)
    refuse(rc, why, stats, err);
  else {
    g->warm_path = false;
    rc = pto_chip_run(chip, replay_orch, &l, stats, err);
    /* its run ended with a thread inside, which may still read g: the
     * chip holds g now (and may free it: g is not touched again here) */
    if (l.held) return rc;
    /* refused by the chip (busy, stuck: replay_orch never ran) is no
     * launch; chip->run_seq is not read here, another thread's run may
     * be writing it */
    if (l.started) {
      g->launches++;
      g->warm = !rc && g->warm_path;
      g->warm_seq = l.seq;
    }
  }
  int launching = GRAPH_LAUNCHING;
  /* destroyed meanwhile (pto_graph_destroy): freed now that nothing uses it */
  if (!atomic_compare_exchange_strong_explicit(&g->busy, &launching, GRAPH_IDLE,
                                               memory_order_acq_rel, memory_order_acquire))
    graph_free(g);
  return rc;
}

int pto_graph_capture(pto_chip *chip, pto_orch_fn fn, void *arg, pto_graph **graph,
                      pto_run_stats *stats, pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(capture_graph(chip, fn, arg, graph, stats, err), err->details);
}

int pto_graph_launch(pto_chip *chip, pto_graph *g, const pto_graph_bindings *b,
                     pto_run_stats *stats, pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(launch_graph(chip, g, b, stats, err), err->details);
}
