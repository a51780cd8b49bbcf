/* node_task.c — node tasks on the parent side: dependency inference
 * through the node TensorMap (read-after-write, write-after-write,
 * write-after-read, by the bytes a view touches; back-pressure when it is
 * full), the ready queues and the dispatch of single, group and host tasks
 * to idle children, completion and poisoning, and the progress loop that
 * collects replies and checks the children while the orchestration waits
 * (node_step, node_until). */
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/commute.h" /* PTO_MAX_COMMUTE_ARGS */
#include "comm/signal.h"  /* SIG_EPOCH_MAX */
#include "common/clock.h"
#include "common/region.h"
#include "common/tensor_check.h"
#include "node/fnref.h"
#include "node/node_internal.h"
#include "node/node_mpi.h"

#define BLOCK_SLICE_MS 100 /* longest the parent sleeps before re-checking deadlines */

/* ---- tasks ---- */

static node_task *task_of(pto_node *n, int64_t id) {
  return id >= n->base_id && id < n->base_id + n->ntasks ? &n->tasks[id - n->base_id] : NULL;
}
static bool finished(const node_task *t) { return t->state == TS_DONE || t->state == TS_FAILED; }

/* ---- ready queues ---- */

static void q_push(pto_node *n, task_queue *q, node_task *t) {
  t->next_ready = -1;
  if (q->tail < 0)
    q->head = t->id;
  else
    task_of(n, q->tail)->next_ready = t->id;
  q->tail = t->id;
}

/* Unlinks `id` (whose predecessor in q is prev, -1 = none). */
static void q_unlink(pto_node *n, task_queue *q, int64_t prev, int64_t id) {
  int64_t next = task_of(n, id)->next_ready;
  if (prev < 0)
    q->head = next;
  else
    task_of(n, prev)->next_ready = next;
  if (q->tail == id) q->tail = prev;
}

static void q_reset(task_queue *q) { q->head = q->tail = -1; }

/* The queue a READY task waits in: its child's, any worker's, or the
 * group queue. */
static task_queue *queue_of(pto_node *n, const node_task *t) {
  if (t->nchildren > 1) return &n->ready_group;
  return t->children[0] < 0 ? &n->ready_any : &n->ready_slot[t->children[0]];
}

static void make_ready(pto_node *n, node_task *t) {
  t->state = TS_READY;
  q_push(n, queue_of(n, t), t);
}

static void add_consumer(node_task *p, int64_t id) {
  if (p->nconsumers && p->consumers[p->nconsumers - 1] == id) return;
  if (p->nconsumers == p->capconsumers) {
    int cap = p->capconsumers ? 2 * p->capconsumers : 4;
    int64_t *c = realloc(p->consumers, (size_t)cap * sizeof *c);
    if (!c) abort(); /* a few bytes: no sane recovery */
    p->consumers = c;
    p->capconsumers = cap;
  }
  p->consumers[p->nconsumers++] = id;
}

static void poison(pto_node *n, node_task *t, int64_t cause) {
  if (finished(t) || t->state == TS_RUNNING) return;
  t->state = TS_FAILED; /* a READY one stays queued: dispatch skips it */
  n->unfinished--;
  t->status = PTO_EPOISONED;
  node_set_err(&t->err, PTO_EPOISONED,
               "node task %" PRId64 " skipped: its dependency %" PRId64 " failed", t->id, cause);
  for (int i = 0; i < t->nconsumers; i++) {
    node_task *c = task_of(n, t->consumers[i]);
    if (c) poison(n, c, t->id);
  }
}

static void finish(pto_node *n, node_task *t) {
  t->state = t->status ? TS_FAILED : TS_DONE;
  n->unfinished--;
  if (t->status && !n->first_err) { /* the first root error; poisoned ones are not roots */
    n->first_err = t->status;
    n->first_info = t->err;
  }
  for (int i = 0; i < t->nconsumers; i++) {
    node_task *c = task_of(n, t->consumers[i]);
    if (!c) continue;
    if (t->status)
      poison(n, c, t->id);
    else if (c->state == TS_WAITING && --c->deps_left == 0)
      make_ready(n, c);
  }
  while (n->oldest_live < n->base_id + n->ntasks && task_of(n, n->oldest_live)->state == TS_DONE)
    n->oldest_live++; /* stops at a failure, whose entries must keep poisoning */
}

/* Chip `failed` of group task t failed: the parts still running cannot
 * succeed, and their kernels may wait for the failed chip (in a collective,
 * a barrier or a signal wait) until the domain's deadline. Each is told to
 * end its waits now (comm.h, pto_comm.cancel): the word names the frame it
 * runs, so a cancel that comes after that frame ended ends nothing of the
 * chip's next task. The observer wakes the ones parked on shared windows;
 * the others poll and see it at their next look. A chip rank on another
 * MPI rank reads its own mailbox: rank 0's relay forwards the word, rank
 * c's puts it there and says so, and then the parent wakes it
 * (node_mpi_wake). t NULL, failed COMM_CANCEL_RUN: every chip task running
 * (the run was cancelled). */
static void cancel_parts(pto_node *n, const node_task *t, int failed) {
  for (int s = 0; s < n->cfg.nchips; s++) {
    const child_slot *c = &n->child[s];
    if (s == failed || c->task < 0 || (t && c->task != t->id) || !c->gen) continue;
    mbox_cancel(&n->ctl->mbox[s], c->gen, failed);
    comm_wake(&n->observer, s);
    if (c->kind == SLOT_RANK) node_mpi_posted(n, s); /* the relay forwards it */
  }
}

static void part_done(pto_node *n, int s, const node_reply *r) {
  child_slot *c = &n->child[s];
  node_task *t = task_of(n, c->task);
  c->task = -1;
  if (!t) return;
  if (s < n->cfg.nchips) {
    pto_node_chip_stats *cs = &n->stats.chip[s];
    cs->node_tasks++;
    cs->tasks += r->tasks;
    cs->blocks += r->blocks;
    cs->host_us += r->host_us;
    cs->device_us += r->device_us;
  }
  /* the first error of the task, but one that follows another chip's own
   * ("rank 1 called with invalid arguments") yields to that one */
  if (r->status && (!t->status || (t->err_secondary && !r->secondary))) {
    t->err_secondary = r->secondary;
    t->status = r->status;
    t->err = r->err;
    t->err.code = r->status;
    char d[sizeof t->err.details];
    snprintf(d, sizeof d, "%s", r->err.details);
    snprintf(t->err.details, sizeof t->err.details, "%s %d, node task %" PRId64 ": %.440s",
             slot_kind(n, s), slot_index(n, s), t->id, d);
  }
  if (--t->parts_left == 0) {
    node_check_after(n, t); /* checking mode: its writes to node host memory */
    finish(n, t);
  } else if (r->status) {
    cancel_parts(n, t, s);
  }
}

/* ---- cancel (pto_node_cancel) ---- */

/* A cancel of this run came and is not applied yet (owner thread). */
static bool cancel_due(pto_node *n) {
  if (n->cancelled) return false;
  /* acquire pairs with pto_node_cancel's release (relaxed would do: the
   * word is the whole message) */
  uint64_t want = atomic_load_explicit(&n->cancel_req, memory_order_acquire);
  return want && want == atomic_load_explicit(&n->run_live, memory_order_relaxed);
}

/* The run was cancelled: no task starts from here on (the ones not started
 * fail with PTO_ECANCELLED; a later submit is refused), the chip tasks
 * running are told to end their waits (their kernels go on to their end),
 * and the run's error is PTO_ECANCELLED unless it had one. */
static void apply_cancel(pto_node *n) {
  n->cancelled = true;
  int64_t skipped = 0;
  for (int64_t i = 0; i < n->ntasks; i++) {
    node_task *t = &n->tasks[i];
    if (t->state != TS_WAITING && t->state != TS_READY) continue;
    t->state = TS_FAILED; /* a READY one stays queued: dispatch skips it */
    n->unfinished--;
    t->status = PTO_ECANCELLED;
    node_set_err(&t->err, PTO_ECANCELLED,
                 "node task %" PRId64 " did not start: the node run was cancelled", t->id);
    skipped++;
  }
  int running = 0;
  for (int s = 0; s < n->cfg.nchips; s++)
    running += n->child[s].task >= 0 && n->child[s].gen;
  cancel_parts(n, NULL, COMM_CANCEL_RUN);
  node_first_err(n, PTO_ECANCELLED,
                 "node run cancelled (pto_node_cancel): %" PRId64
                 " node tasks not started were skipped, %d chip tasks running were told to end "
                 "their waits",
                 skipped, running);
}

/* ---- progress ---- */

static bool slot_free(const pto_node *n, int s) { return !n->child[s].gen && !n->reserved[s]; }

static bool task_finished(pto_node *n, void *arg) {
  (void)n;
  return finished(arg);
}

/* Posts task t to child slots[0..k). In checking mode it waits for t's end
 * before it returns (one task at a time: node_check.c). */
static void launch(pto_node *n, node_task *t, const int *slots, int k) {
  if (!node_check_before(n, t, slots[0])) {
    t->parts_left = 1;
    finish(n, t);
    return;
  }
  static node_frame f; /* large; the parent is single-threaded */
  memset(&f, 0, sizeof f);
  f.type = FRAME_TASK;
  f.task_id = t->id;
  /* the task's number in the run's launch order: what a cell's epoch
   * compares is which task started later; none past the last (signal.h) */
  f.epoch = ++n->started <= SIG_EPOCH_MAX ? (uint32_t)n->started : SIG_EPOCH_NONE;
  f.chip_fn = t->chip_fn;
  f.host_fn = t->host_fn;
  f.host_arg = t->host_arg;
  f.args = t->args;
  node_check_frame(n, t, &f);
  f.trace_origin_ns = n->trace_path ? n->trace_origin_ns : 0;
  f.group_size = k;
  f.group = 0;
  for (int i = 0; i < k; i++)
    if (slots[i] < 64) f.group |= 1ull << slots[i];
  t->state = TS_RUNNING;
  t->parts_left = k;
  t->start_ns = pto_now_ns();
  node_sched_launch(n, t, slots, k, &f);
  for (int i = 0; i < k; i++) {
    f.group_rank = i;
    /* each chip task of a rank writes a trace file of its own */
    f.trace_run = t->kind == TASK_CHIP && n->trace_path ? n->trace_runs[slots[i]]++ : 0;
    node_post(n, slots[i], &f, t->id);
  }
  /* without dispatch: the wait's steps collect replies and watch deadlines */
  if (node_check_on(n)) node_until(n, task_finished, t, false, UINT64_MAX, 0);
}

/* Whether a COMMUTE view of t overlaps a COMMUTE view of a task running on
 * a child: t then waits (docs/node.md). The parent alone dispatches, so the
 * running tasks are the children's, no lock and no table: a few views per
 * running task, compared by their bytes (common/region.h). */
static bool commute_busy(const pto_node *n, const node_task *t) {
  if (!t->commute) return false;
  for (int s = 0; s < n->nchildren; s++) {
    const node_task *r = n->child[s].task >= 0 ? task_of((pto_node *)n, n->child[s].task) : NULL;
    if (!r || r == t || !r->commute || r->state != TS_RUNNING) continue;
    for (int i = 0; i < t->args.ntensors; i++)
      for (int j = 0; t->args.access[i] == PTO_COMMUTE && j < r->args.ntensors; j++)
        if (r->args.access[j] == PTO_COMMUTE &&
            region_overlap(&t->args.tensors[i], &r->args.tensors[j]))
          return true;
  }
  return false;
}

/* The first READY task of q (dropping tasks poisoned while queued), or NULL. */
static node_task *q_first_ready(pto_node *n, task_queue *q) {
  while (q->head >= 0) {
    node_task *t = task_of(n, q->head);
    if (t->state == TS_READY) return t;
    q_unlink(n, q, -1, q->head);
  }
  return NULL;
}

/* Under a controlled schedule: at a wait of the orchestration, when no
 * child is busy, starts the one READY task (of any queue) the controller
 * picks; a host task for any worker goes to the first worker. */
static void dispatch_controlled(pto_node *n) {
  if (!n->at_wait) return;
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].gen) return;
  static node_task *cand[4096]; /* the parent is single-threaded */
  int k = 0;
  task_queue *qs[NODE_MAX_CHILDREN + 2];
  int nq = 0;
  qs[nq++] = &n->ready_group;
  qs[nq++] = &n->ready_any;
  for (int s = 0; s < n->nchildren; s++)
    qs[nq++] = &n->ready_slot[s];
  for (int i = 0; i < nq; i++)
    for (int64_t id = qs[i]->head; id >= 0 && k < 4096; id = task_of(n, id)->next_ready)
      if (task_of(n, id)->state == TS_READY) cand[k++] = task_of(n, id);
  int pick = node_sched_pick(n, cand, k);
  if (pick < 0) return;
  node_task *t = cand[pick];
  task_queue *q = queue_of(n, t);
  int64_t prev = -1;
  for (int64_t id = q->head; id != t->id; id = task_of(n, id)->next_ready)
    prev = id;
  q_unlink(n, q, prev, t->id);
  int any = n->cfg.nchips;
  launch(n, t, t->children[0] < 0 ? &any : t->children, t->nchildren);
}

/* Starts READY tasks on idle children. A task that waits for busy children
 * keeps them reserved for it, so later tasks cannot starve it. Looks only
 * at the heads of the ready queues (and at group tasks until no chip is
 * left free): no pass rescans the live tasks. */
static void dispatch(pto_node *n) {
  if (node_sched_on(n)) {
    dispatch_controlled(n);
    return;
  }
  memset(n->reserved, 0, sizeof n->reserved);
  int free_chips = 0;
  for (int s = 0; s < n->cfg.nchips; s++)
    free_chips += slot_free(n, s);
  /* group tasks, in the order they became ready: started when all their
   * chips are free, else those chips are kept for them */
  for (int64_t prev = -1, id = n->ready_group.head; id >= 0 && free_chips > 0;) {
    node_task *t = task_of(n, id);
    int64_t next = t->next_ready;
    if (t->state != TS_READY) {
      q_unlink(n, &n->ready_group, prev, id);
    } else {
      bool ok = !commute_busy(n, t);
      for (int i = 0; i < t->nchildren; i++)
        ok = ok && slot_free(n, t->children[i]);
      if (ok) q_unlink(n, &n->ready_group, prev, id);
      for (int i = 0; i < t->nchildren; i++) {
        free_chips -= slot_free(n, t->children[i]);
        n->reserved[t->children[i]] = true;
      }
      if (ok) {
        launch(n, t, t->children, t->nchildren);
      } else {
        prev = id;
      }
    }
    id = next;
  }
  /* single-child tasks: the head of each child's queue */
  for (int s = 0; s < n->nchildren; s++) {
    task_queue *q = &n->ready_slot[s];
    node_task *t = q_first_ready(n, q);
    if (!t) continue;
    if (slot_free(n, s) && !commute_busy(n, t)) {
      q_unlink(n, q, -1, t->id);
      launch(n, t, &s, 1);
    }
    n->reserved[s] = true; /* busy, or waited for by its queue */
  }
  /* host tasks for any worker: the free, unreserved workers */
  for (int w = 0; w < n->cfg.nworkers; w++) {
    int s = n->cfg.nchips + w;
    if (!slot_free(n, s)) continue;
    node_task *t = q_first_ready(n, &n->ready_any);
    if (!t || commute_busy(n, t)) break; /* FIFO: the head waits, the rest behind it */
    q_unlink(n, &n->ready_any, -1, t->id);
    launch(n, t, &s, 1);
  }
}

/* One non-blocking step: deaths, replies, deadlines, then dispatch. */
static int step(pto_node *n, bool may_dispatch) {
  if (n->fatal) return n->fatal;
  if (cancel_due(n)) apply_cancel(n);
  node_mpi_wake(n); /* chip ranks whose task's cancel arrived */
  int rc = node_check_deaths(n);
  if (rc) return rc;
  uint64_t now = pto_now_ns();
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->gen) continue;
    node_reply r;
    if (mbox_poll_reply(&n->ctl->mbox[s], c->gen, &r)) {
      c->gen = 0;
      if (c->task >= 0) {
        part_done(n, s, &r);
      } else {
        c->reply = r;
        c->replied = true;
      }
      continue;
    }
    rc = node_check_deadlines(n, s, now);
    if (rc) return rc;
  }
  if (may_dispatch && n->running) dispatch(n);
  return 0;
}

/* A reply arrived or a child died. (A child still starting is no reason
 * to wake: it signals the parent when its state changes, and a child that
 * fails to start exits, which reap() sees.) */
bool node_anything(void *arg) {
  pto_node *n = arg;
  /* relaxed: a wake-up hint; node_mpi_wake re-reads with acquire */
  if (atomic_load_explicit(&n->cancel_arrived, memory_order_relaxed)) return true;
  if (n->running && cancel_due(n)) return true;
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    /* relaxed: a wake-up hint; step() re-reads with acquire */
    if (c->gen && atomic_load_explicit(&n->ctl->mbox[s].done, memory_order_relaxed) == c->gen)
      return true;
  }
  return node_reap_due(n);
}

typedef struct wake_on {
  pto_node *n;
  node_pred pred;
  void *arg;
} wake_on;

static bool anything_or(void *arg) {
  wake_on *w = arg;
  return node_anything(w->n) || w->pred(w->n, w->arg);
}

/* Steps until pred holds, the node fails, or deadline_ns passes (PTO_E* code
 * `late` then). Sleeps in between until a reply, a death, pred (a child's
 * state change signals the parent too) or the next deadline check. */
int node_until(pto_node *n, node_pred pred, void *arg, bool may_dispatch, uint64_t deadline_ns,
               int late) {
  wake_on w = {n, pred, arg};
  bool outer = n->at_wait;
  n->at_wait = may_dispatch; /* a controlled schedule starts tasks only here */
  for (;;) {
    int rc = step(n, may_dispatch);
    if (rc || pred(n, arg)) {
      n->at_wait = outer;
      return rc;
    }
    uint64_t now = pto_now_ns();
    if (now >= deadline_ns) {
      n->at_wait = outer;
      return late;
    }
    uint64_t slice = now + BLOCK_SLICE_MS * 1000000ull;
    pto_wait(&n->ctl->parent_ev, anything_or, &w, slice < deadline_ns ? slice : deadline_ns);
  }
}

/* An orchestration-side error also fails the run (like a chip's submit). */
int node_latch(pto_node *n, int rc, const char *what) {
  node_latch_foreign(n);
  return rc ? node_first_err(n, rc, "node orchestration: %s failed: %s", what, pto_strerror(rc))
            : 0;
}

void node_end_foreign(pto_node *n) {
  atomic_store_explicit(&n->orch_live, NULL, memory_order_seq_cst);
  /* acquire pairs with node_foreign_leave's release: its store is seen */
  while (atomic_load_explicit(&n->foreign_busy, memory_order_acquire))
    sched_yield(); /* a few instructions of another thread */
  node_latch_foreign(n);
}

void node_latch_foreign(pto_node *n) {
  const char *call = atomic_exchange_explicit(&n->foreign_call, NULL, memory_order_acquire);
  if (call)
    node_first_err(n, PTO_EINVAL,
                   "pto_node_%s was called from a thread other than the one running the node's "
                   "orchestration; a node orchestrator takes calls from its own thread only",
                   call);
}

/* ---- submission ---- */

typedef struct dep_ctx {
  pto_node *n;
  node_task *t;
  bool poisoned;
  int64_t cause;
} dep_ctx;

/* True: the new task is ordered after producer (done, failed so the new
 * task is poisoned, or an edge). */
static bool on_dep(void *arg, int64_t producer) {
  dep_ctx *d = arg;
  node_task *p = task_of(d->n, producer);
  if (p == d->t) return false;
  if (!p || p->state == TS_DONE) return true;
  if (p->state == TS_FAILED) {
    d->poisoned = true;
    d->cause = producer;
    return true;
  }
  if (p->nconsumers && p->consumers[p->nconsumers - 1] == d->t->id) return true;
  add_consumer(p, d->t->id);
  d->t->deps_left++;
  return true;
}

/* Where a view may live: node host memory, or the windows of a live
 * domain (both mapped at the same address in every process of the node).
 * Returns NULL, or why not (in why[len]). */
const char *node_view_problem(const pto_node *n, const pto_tensor *t, char *why, size_t len) {
  const char *p = tensor_problem(t, false, why, len);
  if (p) return p;
  uint64_t a, z; /* absolute addresses of the bytes it touches */
  region_span(t, &a, &z);
  if (a >= (uintptr_t)n->host && z <= (uintptr_t)n->host + n->cfg.host_bytes) return NULL;
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    const comm_domain_desc *d = &n->doms[i];
    if (n->dom_live[i] && a >= d->base && z <= d->base + d->win_bytes * (uint64_t)d->nranks)
      return NULL;
  }
  snprintf(why, len,
           "its bytes [%p, %p) are neither node host memory (pto_node_host_tensor) nor a window "
           "of a live domain (pto_node_window_tensor): the node's other processes cannot see them",
           (void *)a, (void *)z);
  return why;
}

/* Orchestration-side argument errors name what was wrong (node_internal.h). */
int node_refuse(pto_node *n, int code, const char *what, const char *fmt, ...) {
  char msg[sizeof n->first_info.details - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return node_first_err(n, code, "node orchestration: %s: %s", what, msg);
}

static int check_args(pto_node *n, const pto_args *args, const char *what) {
  if (!args) return 0;
  if (args->ntensors < 0 || args->ntensors > PTO_MAX_TENSOR_ARGS || args->nscalars < 0 ||
      args->nscalars > PTO_MAX_SCALAR_ARGS)
    return node_refuse(n, PTO_EINVAL, what,
                       "args hold %d tensors and %d scalars (at most %d and %d)", args->ntensors,
                       args->nscalars, PTO_MAX_TENSOR_ARGS, PTO_MAX_SCALAR_ARGS);
  int ncommute = 0;
  for (int i = 0; i < args->ntensors; i++) {
    int m = args->access[i];
    if (m == PTO_OUTPUT)
      return node_refuse(n, PTO_EINVAL, what,
                         "tensor %d is PTO_OUTPUT, which node tasks do not support (use "
                         "pto_node_host_tensor and PTO_OUTPUT_EXISTING)",
                         i);
    if (m == PTO_REDUX)
      return node_refuse(
          n, PTO_EINVAL, what,
          "tensor %d is PTO_REDUX, which node tasks do not support (reduce on a chip, or "
          "with the collectives)",
          i);
    if (m == PTO_COMMUTE && ++ncommute > PTO_MAX_COMMUTE_ARGS)
      return node_refuse(n, PTO_EINVAL, what,
                         "tensor %d (COMMUTE): a task has at most %d COMMUTE arguments", i,
                         PTO_MAX_COMMUTE_ARGS);
    if (m != PTO_INPUT && m != PTO_OUTPUT_EXISTING && m != PTO_INOUT && m != PTO_NO_DEP &&
        m != PTO_COMMUTE)
      return node_refuse(n, PTO_EINVAL, what, "tensor %d has access mode %d, not a pto_access", i,
                         m);
    char why[256];
    if (node_view_problem(n, &args->tensors[i], why, sizeof why))
      return node_refuse(n, PTO_EINVAL, what, "tensor %d: %s", i, why);
  }
  return 0;
}

/* NULL when the bytes [a, z) are mapped in this (rank 0's) process as far
 * as windows go, else why not: under mpirun a domain with a chip on another
 * host has MPI RMA windows (node_domain.c), of which each rank maps its
 * own only, and rank 0's process holds chip 0's (a thread of it). */
static const char *window_elsewhere(const pto_node *n, uint64_t a, uint64_t z, char *why,
                                    size_t len) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    const comm_domain_desc *d = &n->doms[i];
    if (!n->dom_live[i] || d->backend != COMM_BACKEND_MPI || z <= d->base ||
        a >= d->base + d->win_bytes * (uint64_t)d->nranks)
      continue;
    for (int r = 0; r < d->nranks; r++) {
      uint64_t w0 = d->base + (uint64_t)r * d->win_bytes, w1 = w0 + d->win_bytes;
      if (d->chips[r] == 0 || z <= w0 || a >= w1) continue;
      snprintf(why, len,
               "its bytes lie in domain %d's window of rank %d (chip %d, %s), an MPI RMA window "
               "(%s) that only chip %d maps: copy it to node host memory in a task on chip %d "
               "and read that",
               d->id, r, d->chips[r], n->child[d->chips[r]].where,
               pto_option(PTO_OPT_MPI_SHARED_WINDOWS) ? "the domain spans hosts"
                                                      : "PTO_MPI_SHARED_WINDOWS is 0",
               d->chips[r], d->chips[r]);
      return why;
    }
  }
  return NULL;
}

/* NULL when the bytes [a, z) lie in no live domain's window, else why a
 * forked host worker cannot touch them: on one host the workers are
 * processes of their own, forked before any domain, that map no window
 * (the orchestrator does: pto_node_read of a window view works). */
static const char *window_unmapped_by_workers(const pto_node *n, uint64_t a, uint64_t z, char *why,
                                              size_t len) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    const comm_domain_desc *d = &n->doms[i];
    uint64_t end = d->base + d->win_bytes * (uint64_t)d->nranks;
    if (!n->dom_live[i] || z <= d->base || a >= end) continue;
    int r = (int)(((a > d->base ? a : d->base) - d->base) / d->win_bytes);
    snprintf(why, len,
             "its bytes lie in domain %d's window of rank %d (chip %d): host workers are "
             "processes of their own that map no window: copy it to node host memory "
             "(pto_node_host_tensor) in a chip task and pass that",
             d->id, r, d->chips[r]);
    return why;
  }
  return NULL;
}

/* Rank 0's process touches the tensor (a read), or a host worker does (a
 * host task): under mpirun (workers are threads of rank 0) its bytes must
 * not lie in a window only another rank maps; on one host a worker's must
 * lie in no window at all. */
static int check_here(pto_node *n, const pto_tensor *t, const char *what, int i) {
  if (!n->mpi && i < 0) return 0; /* the orchestrator maps every window */
  uint64_t a, z;
  region_span(t, &a, &z);
  char why[384];
  if (!(n->mpi ? window_elsewhere : window_unmapped_by_workers)(n, a, z, why, sizeof why)) return 0;
  return i < 0 ? node_refuse(n, PTO_EINVAL, what, "the tensor: %s", why)
               : node_refuse(n, PTO_EINVAL, what, "tensor %d: %s", i, why);
}

/* Under mpirun: the chip function must be found in the other ranks
 * (fnref). (Host tensors travel to a chip on another host: host_ship.h.) */
static int check_mpi_task(pto_node *n, pto_orch_fn fn, const char *what) {
  fnref ref;
  char why[300];
  if (fnref_encode((const void *)fn, true, &ref, why, sizeof why))
    return node_refuse(n, PTO_EINVAL, what,
                       "under mpirun, the chip function cannot reach the other ranks: %s", why);
  return 0;
}

typedef struct room_wait {
  int64_t oldest; /* oldest_live when the TensorMap was found full */
  int64_t want;   /* retire this many tasks before trying again */
  node_task *self;
} room_wait;

/* Every task but the one being submitted has finished. */
static bool others_finished(const pto_node *n, const node_task *self) {
  return n->unfinished == (finished(self) ? 0 : 1);
}

static bool tmap_room(pto_node *n, void *arg) {
  room_wait *w = arg;
  return n->oldest_live - w->oldest >= w->want || others_finished(n, w->self);
}

static int refuse_overflow(pto_node *n, const node_task *t) {
  return node_first_err(
      n, PTO_ETENSORMAP_OVERFLOW,
      "node orchestration: submit of node task %" PRId64 ": the node TensorMap is full "
      "(%u entries, pto_node_config.tensormap_entries) and cannot drain: node task %" PRId64
      " failed, and the entries of every task after it are kept so that readers of its "
      "outputs are poisoned; raise tensormap_entries",
      t->id, n->tm.capacity, n->oldest_live);
}

/* Records one access of task t, waiting for room while the TensorMap is
 * full (back-pressure: the children go on running, tasks retire and their
 * entries are dropped). Full with every other task finished means the
 * oldest live task failed: its entries and every later task's are kept to
 * poison later readers, so no room can come. */
static int record_access(pto_node *n, node_task *t, const pto_tensor *v, tmap_mode mode,
                         dep_ctx *d) {
  for (;;) {
    int rc = tmap_access(&n->tm, v, mode, t->id, n->oldest_live, on_dep, d);
    if (rc != PTO_ETENSORMAP_OVERFLOW) return rc;
    if (others_finished(n, t)) return refuse_overflow(n, t);
    /* retry after a sixteenth of the live tasks retired: the purge of a full
     * map walks all of it, so it must not run for every retired task */
    room_wait w = {n->oldest_live, 1 + (n->next_id - n->oldest_live) / 16, t};
    rc = node_until(n, tmap_room, &w, true, UINT64_MAX, 0);
    if (rc) return rc;
  }
}

static int submit(pto_node_orch *no, task_kind kind, const int *slots, int k, pto_orch_fn cfn,
                  pto_host_fn hfn, void *harg, pto_args *args, pto_task_id *id, const char *what) {
  pto_node *n = no->node;
  if (id) *id = PTO_TASK_NONE;
  if (n->fatal) return n->fatal;
  if (cancel_due(n)) apply_cancel(n);
  if (n->cancelled) return PTO_ECANCELLED; /* the run starts nothing more */
  if (args && args->error) return args->error;
  int rc = check_args(n, args, what);
  if (!rc && n->mpi && kind == TASK_CHIP) rc = check_mpi_task(n, cfn, what);
  for (int i = 0; !rc && kind == TASK_HOST && args && i < args->ntensors; i++)
    rc = check_here(n, &args->tensors[i], what, i);
  if (rc) return rc;
  int64_t gone = n->oldest_live - n->base_id; /* retired: nobody looks them up */
  if (n->ntasks == n->captasks && gone > 0 && gone >= n->ntasks / 2) {
    /* drop them instead of growing: the array holds about the live tasks,
     * not every task of the run (amortized: at least half moved out) */
    for (int64_t i = 0; i < gone; i++)
      free(n->tasks[i].consumers);
    memmove(n->tasks, n->tasks + gone, (size_t)(n->ntasks - gone) * sizeof *n->tasks);
    n->ntasks -= gone;
    n->base_id = n->oldest_live;
  }
  if (n->ntasks == n->captasks) {
    int64_t cap = n->captasks ? 2 * n->captasks : 64;
    size_t bytes;
    node_task *t =
        __builtin_mul_overflow((size_t)cap, sizeof *t, &bytes) ? NULL : realloc(n->tasks, bytes);
    if (!t) return PTO_ENOMEM;
    n->tasks = t;
    n->captasks = cap;
  }
  /* the task exists from here on (its producers may finish while a full
   * TensorMap makes it wait); the extra dependency keeps it from starting
   * before all its accesses are recorded */
  node_task *t = &n->tasks[n->ntasks];
  memset(t, 0, sizeof *t);
  t->id = n->next_id;
  t->kind = kind;
  t->nchildren = k;
  memcpy(t->children, slots, sizeof(int) * (size_t)k);
  t->chip_fn = cfn;
  t->host_fn = hfn;
  t->host_arg = harg;
  if (args)
    t->args = *args;
  else
    pto_args_init(&t->args);
  for (int i = 0; i < t->args.ntensors; i++)
    t->commute |= t->args.access[i] == PTO_COMMUTE;
  t->state = TS_WAITING;
  t->deps_left = 1;
  n->stats.node_tasks++;
  if (kind == TASK_HOST) n->stats.host_tasks++;
  t->next_ready = -1;
  n->ntasks++;
  n->next_id++;
  n->unfinished++;
  dep_ctx d = {n, t, false, -1};
  for (int i = 0; i < t->args.ntensors && !rc; i++) {
    int m = t->args.access[i];
    if (m == PTO_NO_DEP) continue;
    tmap_mode mode = m == PTO_INPUT     ? TMAP_READ
                     : m == PTO_INOUT   ? TMAP_READ_WRITE
                     : m == PTO_COMMUTE ? TMAP_COMMUTE_RW
                                        : TMAP_WRITE;
    rc = record_access(n, t, &t->args.tensors[i], mode, &d);
  }
  if (rc) { /* part of its accesses are recorded: it fails, and poisons their readers */
    if (!finished(t)) {
      t->status = rc;
      node_set_err(&t->err, rc, "node task %" PRId64 " could not be submitted: %s", t->id,
                   pto_strerror(rc));
      finish(n, t);
    }
    return rc;
  }
  if (id) *id = t->id;
  if (finished(t)) { /* poisoned while it waited for room */
  } else if (d.poisoned) {
    poison(n, t, d.cause);
  } else if (--t->deps_left == 0) {
    make_ready(n, t);
  }
  return step(n, true);
}

/* The chips of a chip task: each one of the node's, none twice; else the
 * run fails naming the first that is not (refused by `call`). */
static int check_chips(pto_node *n, const char *call, pto_orch_fn fn, const int *chips, int k) {
  if (!fn) return node_refuse(n, PTO_EINVAL, call, "fn is NULL");
  if (!chips) return node_refuse(n, PTO_EINVAL, call, "chips is NULL");
  if (k < 1 || k > n->cfg.nchips)
    return node_refuse(n, PTO_EINVAL, call, "%d chips: 1..%d", k, n->cfg.nchips);
  for (int i = 0; i < k; i++) {
    if (chips[i] < 0 || chips[i] >= n->cfg.nchips)
      return k == 1
                 ? node_refuse(n, PTO_EINVAL, call, "chip %d: the node's chips are 0..%d", chips[i],
                               n->cfg.nchips - 1)
                 : node_refuse(n, PTO_EINVAL, call, "chips[%d] is %d: the node's chips are 0..%d",
                               i, chips[i], n->cfg.nchips - 1);
    for (int j = 0; j < i; j++)
      if (chips[j] == chips[i])
        return node_refuse(n, PTO_EINVAL, call, "chip %d is named twice (chips[%d], chips[%d])",
                           chips[i], j, i);
  }
  return 0;
}

int pto_node_submit(pto_node_orch *no, int chip, pto_orch_fn fn, pto_args *args, pto_task_id *id) {
  if (!no || node_orch_foreign(no, "submit")) return PTO_EINVAL;
  int rc = check_chips(no->node, "submit", fn, &chip, 1);
  if (rc) return rc;
  return node_latch(no->node, submit(no, TASK_CHIP, &chip, 1, fn, NULL, NULL, args, id, "submit"),
                    "submit");
}

int pto_node_submit_group(pto_node_orch *no, const int *chips, int k, pto_orch_fn fn,
                          pto_args *args, pto_task_id *id) {
  if (!no || node_orch_foreign(no, "submit_group")) return PTO_EINVAL;
  int rc = check_chips(no->node, "submit_group", fn, chips, k);
  if (rc) return rc;
  return node_latch(no->node,
                    submit(no, TASK_CHIP, chips, k, fn, NULL, NULL, args, id, "submit_group"),
                    "submit_group");
}

int pto_node_submit_host(pto_node_orch *no, int worker, pto_host_fn fn, void *arg, pto_args *args,
                         pto_task_id *id) {
  if (!no || node_orch_foreign(no, "submit_host")) return PTO_EINVAL;
  if (!fn) return node_refuse(no->node, PTO_EINVAL, "submit_host", "fn is NULL");
  if (no->node->cfg.nworkers == 0 || worker >= no->node->cfg.nworkers)
    return node_refuse(no->node, PTO_EINVAL, "submit_host",
                       "worker %d: the node has %d host sub-workers (pto_node_config.nworkers; "
                       "-1: any)",
                       worker, no->node->cfg.nworkers);
  int slot = worker < 0 ? -1 : no->node->cfg.nchips + worker;
  return node_latch(no->node,
                    submit(no, TASK_HOST, &slot, 1, NULL, fn, arg, args, id, "submit_host"),
                    "submit_host");
}

bool node_all_finished(pto_node *n, void *arg) {
  (void)arg;
  return n->unfinished == 0;
}

int pto_node_wait_all(pto_node_orch *no) {
  if (!no || node_orch_foreign(no, "wait_all")) return PTO_EINVAL;
  pto_node *n = no->node;
  node_latch_foreign(n);
  int rc = node_until(n, node_all_finished, NULL, true, UINT64_MAX, 0);
  return rc ? rc : n->first_err;
}

typedef struct read_wait {
  int64_t ids[64];
  int n;
  bool overflow;
} read_wait;

static bool on_writer(void *arg, int64_t producer) {
  read_wait *w = arg;
  if (w->n < 64)
    w->ids[w->n++] = producer;
  else
    w->overflow = true;
  return false; /* tmap_conflicts records nothing */
}

static bool writers_done(pto_node *n, void *arg) {
  read_wait *w = arg;
  if (w->overflow) return node_all_finished(n, NULL);
  for (int i = 0; i < w->n; i++) {
    node_task *t = task_of(n, w->ids[i]);
    if (t && !finished(t)) return false;
  }
  return true;
}

int pto_node_read(pto_node_orch *no, const pto_tensor *t, void *dst) {
  if (!no || node_orch_foreign(no, "read")) return PTO_EINVAL;
  pto_node *n = no->node;
  node_latch_foreign(n);
  char why[256];
  if (!dst) return node_refuse(n, PTO_EINVAL, "read", "dst is NULL");
  if (node_view_problem(n, t, why, sizeof why))
    return node_refuse(n, PTO_EINVAL, "read", "the tensor: %s", why);
  int rc = check_here(n, t, "read", -1);
  if (rc) return rc;
  read_wait w = {{0}, 0, false};
  tmap_conflicts(&n->tm, t, TMAP_READ, n->oldest_live, on_writer, &w);
  rc = node_until(n, writers_done, &w, true, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < w.n; i++) {
    node_task *p = task_of(n, w.ids[i]);
    if (p && p->state == TS_FAILED) return PTO_EPOISONED;
  }
  pto_tensor_copy_out(t, dst);
  return 0;
}

/* ---- runs ---- */

/* Empty task bookkeeping and queues for a new run. The TensorMap and the
 * task array are made by the first run and kept (emptied at each run's
 * end, node_tasks_end), as a chip keeps its rings: made again every run,
 * each run first-touched them page by page, and a node_task is 5.3 KB, so
 * a run of 8000 live host tasks took about 10^4 page faults in its
 * submits (2.2 us a submit against 0.3 without, test_node_limits), and
 * under ASan, whose allocator hands out fresh memory, every run did. */
int node_tasks_begin(pto_node *n) {
  if (!n->tm.pool) {
    int rc = tmap_init(&n->tm, n->cfg.tensormap_entries);
    if (rc) return rc;
  }
  n->base_id = n->oldest_live = n->next_id;
  n->started = 0; /* the run's domains start zeroed: epochs start again at 1 */
  n->ntasks = 0;
  n->unfinished = 0;
  q_reset(&n->ready_any);
  q_reset(&n->ready_group);
  for (int s = 0; s < NODE_MAX_CHILDREN; s++)
    q_reset(&n->ready_slot[s]);
  n->first_err = 0;
  memset(&n->stats, 0, sizeof n->stats);
  n->stats.nchips = n->cfg.nchips;
  return 0;
}

/* Empties the run's tasks and TensorMap, whose memory the next run
 * reuses (node_tasks_begin). */
void node_tasks_end(pto_node *n) {
  for (int64_t i = 0; i < n->ntasks; i++)
    free(n->tasks[i].consumers);
  n->ntasks = 0;
  tmap_clear(&n->tm);
}

/* Frees what node_tasks_end kept (pto_node_destroy). */
void node_tasks_free(pto_node *n) {
  free(n->tasks);
  n->tasks = NULL;
  n->captasks = 0;
  tmap_destroy(&n->tm);
}
