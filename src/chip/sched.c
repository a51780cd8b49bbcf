/* sched.c — schedulers: ready queues per resource shape, dispatch onto the
 * scheduler's own cores (one running + one pending slot per core),
 * completion polling, fanout release with exactly-once readiness, and
 * gang start (sync_start: fast path, or the drain protocol of drain.c).
 * A scheduler is a role (role.h): its passes run on whichever pto thread
 * has work for it (a core that finished a block, the orchestrator that made
 * a task ready), or, with cfg.sched_threads, on a dedicated thread. */
#include <stdio.h>
#include <string.h>

#include "chip/contract.h"
#include "chip/handoff.h"
#include "chip/head_take.h"
#include "chip/priority.h"
#include "chip/ready_batch.h"
#include "chip/run.h"
#include "chip/steal.h"
#include "common/clock.h"
#include "common/fence.h"

/* ---- ready queues ---- */

_Static_assert(sizeof(task *) == sizeof(_Atomic uint64_t), "cells reuse the items storage");

void ready_queue_init(ready_queue *q, uint32_t cap, task **storage, _Atomic uint64_t *up_cells) {
  /* The claim lock is held for a few loads and stores (rq_claim,
   * head_take.h, a placement behind a busy core), but it is contended: a
   * head-taking core and the role holder's pass claim from one queue at
   * once. A spin lock: a mutex parked the loser (0.5 futex calls per task
   * on W4's replay), and an adaptive one still cost two locked
   * instructions and two libc calls a hold (docs/chip.md, "The claim
   * lock"). */
  pto_spinlock_init(&q->lock);
  q->items = storage;
  q->last_taker = -1;
  q->cap = cap;
  q->head = 0;
  atomic_init(&q->count, 0);
  /* the shape queues use the storage as their cells (the sync queue, as
   * tasks: it is initialised here too and never touches lf) */
  rq_init(&q->lf, (_Atomic uint64_t *)(void *)storage, cap);
  q->up_cells = up_cells;
  atomic_init(&q->up_used, 0);
  for (int l = 0; l < PTO_PRIORITY_MAX && up_cells; l++)
    rq_init(&q->up[l], up_cells + (size_t)l * cap, cap);
}

/* The shape queues (lock-free, ready_queue.h), a FIFO per priority level
 * (priority.h). */
static void rq_push(pto_run *r, ready_queue *q, task *t) {
  prio_mark(q, t->priority);
  rq *lv = prio_queue(q, t->priority);
  uint64_t p = rq_push_claim(lv);
  rq_push_publish(lv, p, (uint32_t)(t - r->slots));
}

static uint64_t rq_queued(ready_queue *q) { return prio_queued(q); }

/* Claims up to `max` blocks from the head of level queue lv, across tasks,
 * in queue order (only the head task's remaining blocks when
 * `partial_only` and the head is partly claimed; none when it is not). */
static int rq_claim_level(pto_run *r, rq *lv, int max, task **ts, int32_t *blocks,
                          bool partial_only) {
  int n = 0;
  uint32_t idx;
  uint64_t h = rq_pop_head(lv);
  while (n < max && rq_pop_cell(lv, h, &idx)) {
    task *t = &r->slots[idx];
    if (partial_only && t->next_block == 0) break;
    while (n < max && t->next_block < t->block_num) {
      ts[n] = t;
      blocks[n++] = t->next_block++;
    }
    if (t->next_block < t->block_num) break; /* stays at the head */
    rq_pop_advance(lv, ++h);                 /* t may retire after this */
    if (partial_only) break;
  }
  return n;
}

/* Claims up to `max` blocks of q, returns how many, with the task and
 * block index of each: first the rest of a partly claimed task, then the
 * levels from the highest down (priority.h). Behind a busy core
 * (`behind_busy`), only level 0 and only while the levels above are
 * empty. Pushers never take the lock; claimers (the role holders of
 * several schedulers sharing the queue) do, once per claim of many
 * blocks, so that the blocks of a task are claimed before any other's:
 * chips that run the same graph dispatch in the same order (a
 * collective's ranks rely on it). With one scheduler the lock is taken
 * only on the AIC and AIV queues in role mode, where a core may claim its
 * next block itself (head_take.h) beside the role holder: passes of one
 * scheduler never overlap (role.h), and the sched_threads mode has one
 * thread. */
static int rq_claim(pto_run *r, ready_queue *q, int max, task **ts, int32_t *blocks,
                    bool behind_busy, bool held) {
  /* `held`: the caller holds the lock already */
  bool head_taken = !r->sched_threads && (q == &r->queues[SHAPE_AIC] || q == &r->queues[SHAPE_AIV]);
  bool lock = !held && (r->nsched > 1 || head_taken);
  if (lock) pto_spinlock_lock(&q->lock);
  int n = 0;
  if (!prio_up_used(q)) {
    n = rq_claim_level(r, &q->lf, max, ts, blocks, false);
  } else if (!behind_busy || !prio_up_queued(q)) {
    int top = behind_busy ? 0 : PTO_PRIORITY_MAX;
    for (int l = top; l >= 0 && n == 0; l--) /* at most one task is partly claimed */
      n = rq_claim_level(r, prio_queue(q, l), max, ts, blocks, true);
    for (int l = top; l >= 0 && n < max; l--)
      n += rq_claim_level(r, prio_queue(q, l), max - n, ts + n, blocks + n, false);
  }
  if (lock) pto_spinlock_unlock(&q->lock);
  return n;
}

/* The sync_start queue (locked: its head waits until a whole gang fits). */
static void sync_push(ready_queue *q, task *t) {
  pto_spinlock_lock(&q->lock);
  uint32_t n = atomic_load_explicit(&q->count, memory_order_relaxed);
  q->items[(q->head + n) % q->cap] = t;
  /* relaxed: the lock orders the items; the count is also peeked unlocked */
  atomic_store_explicit(&q->count, n + 1, memory_order_relaxed);
  pto_spinlock_unlock(&q->lock);
}

static void rq_pop_locked(ready_queue *q) {
  q->head = (q->head + 1) % q->cap;
  atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed); /* under the lock */
}

/* ---- completion ---- */

static void stat_max(_Atomic uint64_t *max, uint64_t v) {
  uint64_t m = atomic_load_explicit(max, memory_order_relaxed);
  while (v > m && !atomic_compare_exchange_weak_explicit(max, &m, v, memory_order_relaxed,
                                                         memory_order_relaxed)) {
  }
}

static void record_spread(pto_run *r, task *t) {
  uint64_t a = atomic_load_explicit(&t->first_start_ns, memory_order_relaxed);
  uint64_t b = atomic_load_explicit(&t->last_start_ns, memory_order_relaxed);
  uint64_t d = b > a ? b - a : 0;
  atomic_fetch_add_explicit(&r->spread_sum_ns, d, memory_order_relaxed);
  stat_max(&r->spread_max_ns, d);
}

#define RELEASE_ORDERED 16 /* consumers a completion releases in submission order */
#define DUMMY_STACK     64 /* dummy consumers completed inline before recursing */

/* Drops consumer c's fanin for a producer that completed: whoever drops it
 * to zero makes c ready (a dummy: onto the caller's work stack). acq_rel:
 * our kernel's writes happen-before c runs; pairs with the other
 * producers' decrements and the submit's drop of its failed edges. */
static void make_ready(pto_run *r, task *t, bool orch);

static void release_consumer(pto_run *r, task *c, task **stack, int *top) {
  if (atomic_fetch_sub_explicit(&c->fanin, 1, memory_order_acq_rel) != 1) return;
  if (c->shape == SHAPE_DUMMY && *top < DUMMY_STACK)
    stack[(*top)++] = c;
  else
    make_ready(r, c, false); /* any thread: no lock-free join (commute.h) */
}

static void commute_release(pto_run *r, task *t);
static bool batch_begin(ready_batch *b);
static void batch_end(pto_run *r, ready_batch *b, bool opened);
static inline bool keep_here(pto_run *r, task *t);
static void queue_ready(pto_run *r, task *t);
static void queue_push(pto_run *r, task *t);

/* A hand-off in progress on this thread (handoff.h): set by
 * sched_complete_here (and sched_release_held) around what it makes ready. */
static _Thread_local handoff *this_handoff;

/* t's fanout list, closed: the node of its newest consumer, or < 0 for
 * none. No consumer links itself after this. acq_rel: acquire pairs with
 * the orchestrator's release CAS of each node; release makes our kernel's
 * writes visible to a consumer that finds the list closed. A graph
 * launch's list is fixed (no submit links into it, and nobody looks for it
 * closed): read, not closed, one locked instruction less per task.
 * Relaxed: the launch wrote it before its first push, which
 * happens-before t ran. */
static int64_t fanout_take(task *t) {
  return t->fixed_fanout
             ? atomic_load_explicit(&t->fanout_head, memory_order_relaxed)
             : atomic_exchange_explicit(&t->fanout_head, FANOUT_CLOSED, memory_order_acq_rel);
}

/* t, its consumers released, is DONE and counted. */
static void task_done(pto_run *r, task *t) {
  /* A graph launch's task: its fanin and counts set back to what the
   * graph's next launch starts from (graph.c: a warm launch writes no
   * slot), on a line this thread holds already. Nobody reads them again
   * in this run: its predecessors' decrements and peeks came before it
   * was ready, and its blocks were all claimed and counted. Relaxed:
   * the next run starts after this one's threads left it (run_enter). */
  if (t->fixed_fanout) {
    atomic_store_explicit(&t->fanin, t->fanin0, memory_order_relaxed);
    atomic_store_explicit(&t->units_done, 0, memory_order_relaxed);
    t->next_block = 0;
  }
  /* release: everything above happens-before retirement of t */
  task_set_state(r, t, TASK_DONE, memory_order_release);
  int64_t done = atomic_fetch_add_explicit(&r->completed, 1, memory_order_seq_cst) + 1;
  /* the fence pairs with orch_wait_completions (store wake_at, fence,
   * re-check): either the orchestrator sees this completion or we see its
   * wake_at (tests/unit/test_wait_model.c); right after the RMW, which on
   * x86-64 is that fence already (common/fence.h) */
  PTO_FENCE_AFTER_RMW();
  if (done >= atomic_load_explicit(&r->orch_wake_at, memory_order_seq_cst))
    pto_event_signal(&r->orch_ev);
}

/* The completion of a task with one consumer or none, whose list
 * fanout_take read as `node`: most tasks of a chain, a pipeline or a
 * replayed graph. It is the general completion below, less its work
 * stack and batch: a consumer that becomes ready is kept by this core's
 * hand-off (before t is DONE), or else, once t is DONE, pushed where the
 * batch would have pushed it, made ready by its COMMUTE table, or, a
 * dummy, returned in *dummy for the caller to complete next, as the work
 * stack would. The consumer's slot is read only after the drop that made
 * it ready, as release_consumer reads it: a graph launch may still be
 * filling it until then. False, with nothing done, for several
 * consumers. */
static bool complete_lone(pto_run *r, task *t, int64_t node, task **dummy) {
  task *c = NULL;
  *dummy = NULL;
  if (node >= 0) {
    if (r->deps[node].next >= 0) return false;
    c = r->deps[node].consumer;
    /* fan-in combining (handoff.h): the drop is held, made later */
    if (handoff_hold(r, this_handoff, t, node) ||
        atomic_fetch_sub_explicit(&c->fanin, 1, memory_order_acq_rel) != 1)
      c = NULL;
    else if (c->shape != SHAPE_DUMMY && !c->commute && keep_here(r, c))
      c = NULL;
  }
  task_done(r, t);
  if (!c) return true;
  if (c->shape == SHAPE_DUMMY)
    *dummy = c;
  else if (c->commute)
    make_ready(r, c, false);
  else
    queue_push(r, c);
  return true;
}

/* first's list, not read yet (complete_general) */
#define FANOUT_UNREAD INT64_MIN

/* complete_task's general way, for `first` and the dummies it completes
 * inline; first_node: first's list as fanout_take read it, or
 * FANOUT_UNREAD. Its own function: its frame (a work stack, a batch) is
 * not paid on the lone way. */
static __attribute__((noinline)) void complete_general(pto_run *r, task *first,
                                                       int64_t first_node) {
  task *stack[DUMMY_STACK];
  int top = 0;
  /* the tasks it makes ready are pushed together at its end (ready_batch.h) */
  ready_batch batch;
  bool opened = batch_begin(&batch);
  stack[top++] = first;
  while (top > 0) {
    task *t = stack[--top];
    if (t->sync_start) record_spread(r, t);
    /* before its consumers: a later non-COMMUTE access waits for this
     * completion anyway, and waiters get the bytes as early as possible */
    if (t->commute) commute_release(r, t);
    int64_t node = t == first && first_node != FANOUT_UNREAD ? first_node : fanout_take(t);
    /* The list is newest first. Up to RELEASE_ORDERED consumers are read
     * first and released oldest first, in submission order, as they would
     * have queued had they been ready at submit: in a tree, the first
     * child continues the critical path. Reading ahead is safe: no
     * consumer of ours can become ready, and retire, before our decrement.
     * A longer list is released in its own order. */
    /* the core's own task, its only consumer waiting for others too: the
     * drop is held, to be made with its siblings' (handoff.h, fan-in
     * combining) */
    if (t == first && handoff_hold(r, this_handoff, t, node)) node = -1;
    task *first_few[RELEASE_ORDERED];
    int n = 0;
    for (; node >= 0 && n < RELEASE_ORDERED; node = r->deps[node].next)
      first_few[n++] = r->deps[node].consumer;
    if (node < 0) {
      while (n > 0)
        release_consumer(r, first_few[--n], stack, &top);
    } else {
      for (int i = 0; i < n; i++)
        release_consumer(r, first_few[i], stack, &top);
      while (node >= 0) {
        task *c = r->deps[node].consumer;
        node = r->deps[node].next; /* read before the release: c may retire right after */
        release_consumer(r, c, stack, &top);
      }
    }
    task_done(r, t);
  }
  batch_end(r, &batch, opened);
}

/* Completes t: closes its fanout list, releases consumers (each becomes
 * ready exactly once: whoever drops its fanin to zero), releases the
 * producers it pinned, and marks it DONE. Dummy consumers complete inline,
 * through a small work stack (or, one at a time, this loop) instead of
 * recursion. A gang's task, a COMMUTE task, and every task in checking
 * mode or under a controlled schedule (which take ready tasks as they
 * come) go the general way. */
static inline __attribute__((always_inline)) void complete_task_inline(pto_run *r, task *first) {
  if (r->contract || r->ctl) {
    complete_general(r, first, FANOUT_UNREAD);
    return;
  }
  for (task *t = first, *next; t; t = next) {
    if (t->sync_start || t->commute) {
      complete_general(r, t, FANOUT_UNREAD);
      return;
    }
    int64_t node = fanout_take(t);
    if (!complete_lone(r, t, node, &next)) {
      complete_general(r, t, node);
      return;
    }
  }
}

/* complete_task inlined where a core completes its own block (hand-off,
 * sched_complete_here), called elsewhere. */
static void complete_task(pto_run *r, task *first) { complete_task_inline(r, first); }

/* The scheduler running on this thread, if any: it dispatches right after
 * its completion pass, so the tasks that pass makes ready need no wake-up
 * of the others unless some are left in the queues once it has placed what
 * it can (sched_wake_leftover). Deciding at push time instead, by counting
 * idle cores, is wrong twice over: a MIX block counted a busy core as free,
 * and several tasks readied in one pass all counted the same cores; either
 * way the others slept until their park timed out. */
static _Thread_local sched *this_sched;
/* The core this thread simulates, if any (role mode: its own completion
 * pass places the next single-core block on it first, no wake-up). */
static _Thread_local core *this_core;

void sched_bind_core(core *c) { this_core = c; }

static void sched_wake_leftover(sched *s);
static void sched_role_run(sched *s, bool leftover);
static void sched_role_hold(sched *s, bool leftover, bool entered);

/* The most cores a run may have for cores_all_busy to look at each of
 * them: beyond it the look could cost more than the pass it saves. */
#define BUSY_LOOK_MAX 16

/* Whether every core that could run a single-core block of shape sh has
 * a block in flight (dispatched, or kept in a hand-off: its `finished`
 * behind its `dispatched`), read after the push that readied it. Then no
 * pass is needed for that push: each such core stores `finished` later
 * and then requests a pass of its scheduler or runs it (core.c
 * core_serve's end: sched_kick or sched_handoff_end; a lost steal too),
 * and that pass starts after our push and places it. The push and this
 * look against a core's `finished` store and its kick are a Dekker pair:
 * the fence here, and on the core's side the role's locked
 * read-modify-write and the fence after it (sched_kick), so that either
 * we see the block's end (and request the pass ourselves) or its pass
 * sees our push (test_busy_skip_explorer). A core with nothing in flight,
 * or one that took no part in the run (both words are 0 from the run's
 * start): false. The caller looks only at runs of at most BUSY_LOOK_MAX
 * cores (one compare on larger chips, no call). noinline: gcc 12
 * -fsanitize=thread rejects (-Wtsan) the fence inlined in kick_others. */
static __attribute__((noinline)) bool cores_all_busy(pto_run *r, shape sh) {
  atomic_thread_fence(memory_order_seq_cst);
  bool aic = sh == SHAPE_AIC;
  int n = 0;
  for (int i = 0; i < r->ncores; i++) {
    const core *c = &r->cores[i];
    if ((c->type == PTO_CORE_AIC) != aic) continue;
    n++;
    /* relaxed after the fence; `dispatched` is its dispatcher's, and only
     * grows during the run */
    if (atomic_load_explicit(&c->finished, memory_order_relaxed) >=
        atomic_load_explicit(&c->dispatched, memory_order_relaxed))
      return false;
  }
  return n > 0;
}

/* A requester that is no core (the orchestrator) asks scheduler sc for a
 * pass: the idle core pulling for it serves the request when it can take
 * a block of this shape (role.h), else the requester runs the pass.
 * Returns true when it was left to the puller. */
static bool sched_request(pto_run *r, sched *sc, shape sh) {
  role_request(&sc->role);
  int p = role_puller(&sc->role);
  /* no signal: a puller never parks while it pulls (core.c), it polls the
   * requests */
  if (p >= 0 && (r->cores[p].type == PTO_CORE_AIC) == (sh == SHAPE_AIC)) return true;
  sched_role_run(sc, false);
  return false;
}

bool sched_ready_queued(pto_run *r) {
  for (int q = 0; q < SHAPE_COUNT; q++)
    if (rq_queued(&r->queues[q]) > 0) return true;
  return false;
}

void sched_pull(sched *s) { sched_role_run(s, true); }

uint64_t sched_queued_blocks(pto_run *r) {
  uint64_t n = 0;
  for (int q = 0; q < SHAPE_COUNT; q++)
    n += rq_queued(&r->queues[q]);
  return n;
}

/* The tasks a COMMUTE table step granted, queued now that no lock is held
 * (queueing may run passes). */
static void commute_queue(pto_run *r, const cm_grants *g) {
  for (int32_t w = g->head; w >= 0;) {
    /* read before queueing: once queued, w may run, complete and be
     * released, which rewrites its link */
    int32_t next = r->cm.links[w].wait_next;
    queue_ready(r, &r->slots[w]);
    w = next;
  }
}

/* A COMMUTE task that became ready takes its bytes (queued then), waits
 * in the table for the holder it conflicts with, or is left to the lock's
 * holder (commute.h, cm_ready). `orch`: on the orchestrator's thread,
 * where it may join a held task with its views without the lock. */
static void commute_ready(pto_run *r, task *t, bool orch) {
  const cm_ops ops = {cm_views_conflict, cm_views_same, &r->cm};
  cm_grants g = {-1, -1};
  cm_ready(&r->cm, (int32_t)(t - r->slots), orch, &ops, &g);
  commute_queue(r, &g);
}

/* t completed: its bytes go to the tasks waiting on it that can now take
 * them. The lock also orders t's kernel writes before a granted task's
 * run. */
static void commute_release(pto_run *r, task *t) {
  const cm_ops ops = {cm_views_conflict, cm_views_same, &r->cm};
  cm_grants g = {-1, -1};
  cm_done(&r->cm, (int32_t)(t - r->slots), &ops, &g);
  commute_queue(r, &g);
}

/* `orch`: called by the orchestrator (a submit, a graph launch's roots). */
static void make_ready(pto_run *r, task *t, bool orch) {
  if (t->shape == SHAPE_DUMMY) {
    complete_task(r, t);
    return;
  }
  if (t->commute) {
    commute_ready(r, t, orch); /* queued if granted; else a release queues it */
    return;
  }
  queue_ready(r, t);
}

static void announce_ready(pto_run *r, int q, bool by_handoff);

/* The batch of ready tasks open on this thread (ready_batch.h), if any. */
static _Thread_local ready_batch *this_batch;

_Static_assert(PTO_ORCH_BATCH_MAX == READY_BATCH, "a submit batch pushes when it is full");

static bool gather_joins(const pto_run *r, const task *t);
static void gather_add(pto_run *r, task *t);

/* A task ready at its submit: under pto_orch_batch_begin it joins the
 * orchestrator's batch (pushed when full, or by sched_orch_flush), else
 * the orchestrator's gather where it may (gather_joins), else it is
 * pushed now, after what was gathered before it. The batch is this
 * thread's open one only during the call, so that no pass this thread
 * runs elsewhere adds to it. */
void sched_make_ready(pto_run *r, task *t) {
  if (this_batch) { /* a completion's, on this thread */
    make_ready(r, t, true);
    return;
  }
  if (!r->batch_depth && gather_joins(r, t)) {
    gather_add(r, t);
    return;
  }
  sched_gather_take(r); /* what was gathered before it goes first */
  if (!r->batch_depth) {
    make_ready(r, t, true);
    return;
  }
  this_batch = r->orch_batch;
  make_ready(r, t, true);
  this_batch = NULL;
}

static bool batch_begin(ready_batch *b) {
  if (this_batch) return false; /* an outer completion's: ours goes there */
  b->n = 0;
  this_batch = b;
  return true;
}

/* After pushes to the queues in `pushed` (1 << q, announce_ready's q):
 * asks for the passes that place them, once per queue, or, in a hand-off,
 * adds them to the announces it makes anyway (handoff_announce). An
 * announce may run passes here, whose completions batch on their own. */
static void pushed_announce(pto_run *r, uint32_t pushed) {
  /* release pairs with a scheduler thread's acquire of ready_gen before it
   * parks; only scheduler threads wait on it (role mode: every push is
   * followed by a pass) */
  if (r->sched_threads) atomic_fetch_add_explicit(&r->ready_gen, 1, memory_order_release);
  if (this_handoff) {
    this_handoff->pushed |= pushed;
    return;
  }
  ready_batch *open = this_batch;
  this_batch = NULL;
  for (int q = 0; q <= SHAPE_COUNT; q++)
    if (pushed & (1u << q)) announce_ready(r, q, false);
  this_batch = open;
}

/* Pushes what b holds and asks for the passes that place it. */
static void batch_flush(pto_run *r, ready_batch *b) {
  uint32_t pushed = rb_push(r, b);
  if (pushed) pushed_announce(r, pushed);
}

void sched_orch_flush(pto_run *r) {
  sched_gather_take(r);
  if (r->orch_batch->n) batch_flush(r, r->orch_batch);
}

/* ---- the orchestrator's gather (gather.h) ---- */

/* Whether a task ready at its submit joins the gather: a single-core
 * task of no gang, no COMMUTE argument and the lowest priority level (a
 * higher level's task goes to its queue at once, ahead of what waits
 * there), in a run whose queues the cores serve themselves (not checking
 * mode, not a controlled schedule, no scheduler threads). */
static bool gather_joins(const pto_run *r, const task *t) {
  return r->gather_on && !r->contract && !r->ctl && !t->sync_start && !t->commute &&
         t->priority == 0 && (t->shape == SHAPE_AIC || t->shape == SHAPE_AIV);
}

/* Whether what an epoch of shape sh gathers will be taken without the
 * orchestrator: an idle core holds, or every core of the type has a block
 * in flight, and each looks when it falls idle (gather.h). Read after the
 * epoch's first append (cores_all_busy starts with its fence). */
static bool gather_covered(pto_run *r, shape sh) {
  return gather_held(&r->gather) || (r->ncores <= BUSY_LOOK_MAX && cores_all_busy(r, sh));
}

/* Pushes the tasks a take got, in their order, and asks for the passes
 * that place them, as a completion pushes what it released. */
static void gather_push(pto_run *r, const uint32_t *idx, uint32_t n) {
  ready_batch b;
  b.n = 0;
  for (uint32_t i = 0; i < n; i++)
    b.t[b.n++] = &r->slots[idx[i]];
  batch_flush(r, &b);
}

void sched_gather_take(pto_run *r) {
  uint32_t idx[GATHER_MAX];
  uint32_t n = gather_take(&r->gather, idx);
  if (n) gather_push(r, idx, n);
}

void sched_gather_idle(pto_run *r) {
  if (!r->gather_on) return;
  /* orders this core's `finished` store (release) before the loads:
   * Dekker with the first append's look at the cores (gather.h) */
  atomic_thread_fence(memory_order_seq_cst);
  if (!gather_held(&r->gather)) sched_gather_take(r);
}

/* The orchestrator gathers ready task t: appended to the epoch (one of
 * another shape is taken first); the epoch's first task is taken back
 * and pushed at once when nobody would take it, and a full epoch is
 * taken. */
static void gather_add(pto_run *r, task *t) {
  gather *g = &r->gather;
  uint64_t w = gather_load(g);
  if (gather_count(w) && r->gather_shape != t->shape) {
    sched_gather_take(r);
    w = gather_load(g);
  }
  r->gather_shape = (int8_t)t->shape;
  task_set_state(r, t, TASK_READY, memory_order_relaxed);
  const uint32_t idx = (uint32_t)(t - r->slots);
  do
    gather_put_cell(g, w, idx);
  while (!gather_try_commit(g, &w));
  /* w: the word this task was appended to */
  if (!gather_count(w) && !gather_covered(r, t->shape)) {
    sched_gather_take(r); /* pushed at once after all */
    return;
  }
  r->gathered++;
  if (gather_count(w) + 1 == GATHER_MAX) sched_gather_take(r);
}

static void batch_end(pto_run *r, ready_batch *b, bool opened) {
  if (!opened) return;
  this_batch = NULL;
  batch_flush(r, b);
}

void sched_make_ready_batch(pto_run *r, const uint32_t *idx, uint32_t n) {
  ready_batch b;
  bool opened = batch_begin(&b);
  for (uint32_t i = 0; i < n; i++)
    sched_make_ready(r, &r->slots[idx[i]]);
  batch_end(r, &b, opened);
}

/* Ready task t (no dummy, no COMMUTE task) kept by this thread's
 * hand-off, to run next on its core (handoff.h), when it fits there and
 * no task of its level or above waits in this completion's batch. */
static inline bool keep_here(pto_run *r, task *t) {
  handoff *h = this_handoff;
  if (!h) return false;
  int fit = handoff_fit(h, t);
  ready_batch *b = this_batch;
  if (fit == HANDOFF_NO || (b && rb_holds_from(b, t->shape, t->priority))) return false;
  task_set_state(r, t, TASK_READY, memory_order_relaxed);
  h->kept = t;
  h->ahead = fit == HANDOFF_AHEAD ? h->ahead + 1 : 0;
  return true;
}

/* Queues ready task t and asks for the passes that place it; under
 * checking mode or a controlled schedule, hands it to the orchestrator's
 * thread instead (after the COMMUTE acquire: exclusion holds there too).
 * In a hand-off, the first task the finishing core can run next is kept
 * for it instead, and the passes for the others are asked for once the
 * completion is done (handoff.h). */
static void queue_ready(pto_run *r, task *t) {
  if (r->contract) { /* checking mode: the orchestrator runs it (contract.h) */
    contract_ready(r, t);
    return;
  }
  if (r->ctl) { /* a controlled schedule chooses when and where it runs */
    r->ctl_ready(r, t);
    return;
  }
  if (!keep_here(r, t)) queue_push(r, t);
}

/* Ready task t, not kept here: into this thread's open batch, or pushed
 * to its queue and announced. */
static void queue_push(pto_run *r, task *t) {
  task_set_state(r, t, TASK_READY, memory_order_relaxed);
  ready_batch *b = this_batch;
  if (b && !t->sync_start) {
    b->t[b->n++] = t;
    if (b->n == READY_BATCH) batch_flush(r, b);
    return;
  }
  /* read before the push: once published, t may be claimed, run,
   * completed and its slot given to a new task at once (as rb_push) */
  const int q = t->sync_start ? SHAPE_COUNT : t->shape;
  if (q == SHAPE_COUNT)
    sync_push(&r->sync_queue, t);
  else
    rq_push(r, &r->queues[q], t);
  pushed_announce(r, 1u << q);
}

static void kick_others(pto_run *r, int q, const sched *skip, bool by_handoff);

/* Asks for the passes that place a block pushed to queue q: shape q's, or
 * (q == SHAPE_COUNT) the sync_start (gang) queue. `by_handoff`: a core
 * announces what its hand-off pushed (handoff_announce). */
static void announce_ready(pto_run *r, int q, bool by_handoff) {
  sched *s = this_sched;
  if (s && s->run == r && q != SHAPE_COUNT) {
    s->wake_pending = true; /* decided after its dispatch pass */
    return;
  }
  kick_others(r, q, s, by_handoff);
}

/* Asks every scheduler but `skip` for a pass (or, for a block the
 * orchestrator or a hand-off readied, one that pulls), until queue q
 * (announce_ready's) is empty. */
static void kick_others(pto_run *r, int q, const sched *skip, bool by_handoff) {
  const sched *s = this_sched;
  const bool sync_start = q == SHAPE_COUNT;
  /* a single-core block readied by a thread that is no core (the
   * orchestrator), or pushed by a core's hand-off (by_handoff), may be
   * left to an idle core that pulls */
  bool delegable = !r->sched_threads && !sync_start && (!this_core || by_handoff) && !s &&
                   shape_aic((shape)q) + shape_aiv((shape)q) == 1;
  /* pushed by a thread that is no core (the orchestrator), and every core
   * that could take it is busy: their block ends bring the passes (a pass
   * of ours, up to half the orchestrator's time on W2, could place it
   * nowhere sooner). Not for a core's hand-off: its pass puts the block
   * in a busy core's pending slot off that core's critical path, which
   * it then starts at once (a tree of 0.3 us blocks ran 7-10% slower
   * with the hand-off's pass left out too). */
  if (delegable && !this_core && r->ncores <= BUSY_LOOK_MAX && cores_all_busy(r, (shape)q)) return;
  for (int i = 0; i < r->nsched; i++) {
    if (&r->scheds[i] == skip) continue;
    if (delegable) {
      /* the puller's pass tells the others what it leaves (leftover) */
      if (sched_request(r, &r->scheds[i], (shape)q)) break;
    } else {
      sched_kick(r, &r->scheds[i]);
    }
    /* role mode: a pass ran or its holder will run one; once the queue is
     * empty the others have nothing to take (relaxed peek: a stale count
     * only kicks one more scheduler) */
    if (!r->sched_threads && !sync_start && rq_queued(&r->queues[q]) == 0) break;
  }
}

/* The pushes a hand-off made, announced (announce_ready) once per queue,
 * leaving out scheduler `done` (NULL: none), whose pass ran after them. */
static void handoff_announce(handoff *h, const sched *done) {
  pto_run *r = h->run;
  for (int q = 0; q <= SHAPE_COUNT; q++) {
    if (!(h->pushed & (1u << q))) continue;
    if (!done)
      announce_ready(r, q, true);
    else if (q == SHAPE_COUNT || r->sched_threads || rq_queued(&r->queues[q])) /* blocks left */
      kick_others(r, q, done, true);
  }
  h->pushed = 0;
}

/* Nothing waits behind a block of a priority above 0 (priority.h): the
 * block h kept stands in its slot's place for the passes' has_room. The
 * word is written only when it changes: other cores' passes read its
 * line, and a chain keeps blocks of one priority, most often 0, which
 * the dispatch wrote already. Nobody else writes it meanwhile: the
 * slot's next dispatch comes after this block's end is published, and a
 * pass's take (take_lone) marks a block not started, which this one is
 * not. */
static void kept_movable(handoff *h) {
  _Atomic bool *movable = &h->c->slot[h->d & 1].movable;
  const bool now = h->kept->priority == 0;
  if (atomic_load_explicit(movable, memory_order_relaxed) != now)
    atomic_store_explicit(movable, now, memory_order_relaxed);
}

task *sched_complete_here(handoff *h, task *t) {
  h->kept = NULL;
  h->completed = true;
  this_handoff = h;
  complete_task_inline(h->run, t); /* its one unit: nobody else counts it */
  this_handoff = NULL;
  /* the others of this completion go to the schedulers now, before the
   * kept block runs; without one kept, after the block's end is
   * published (sched_handoff_end), in the pass that it asks for anyway */
  if (h->kept) {
    kept_movable(h);
    if (h->pushed) handoff_announce(h, NULL);
  }
  return h->kept;
}

task *sched_release_held(handoff *h, bool may_keep) {
  task *s = h->held;
  int32_t n = h->held_n;
  h->held = NULL;
  h->held_n = 0;
  /* acq_rel, as release_consumer's: the held tasks' writes go with it */
  if (!s || atomic_fetch_sub_explicit(&s->fanin, n, memory_order_acq_rel) != n) return NULL;
  /* s is ready: as the completions that held it back would have made it,
   * kept here when nothing else runs next and it fits */
  const bool keep = h->keep;
  h->keep = keep && may_keep;
  h->kept = NULL;
  this_handoff = h;
  h->releasing = true; /* a dummy s completes here: its own release is not held */
  ready_batch b;
  bool opened = batch_begin(&b);
  make_ready(h->run, s, false);
  batch_end(h->run, &b, opened);
  h->releasing = false;
  this_handoff = NULL;
  h->keep = keep;
  if (h->kept) kept_movable(h);
  /* another block runs next here: what was pushed is announced now */
  if (h->pushed && (h->kept || !may_keep)) handoff_announce(h, NULL);
  return h->kept;
}

void sched_handoff_end(handoff *h) {
  pto_run *r = h->run;
  sched *own = &r->scheds[h->c->sched];
  sched_kick(r, own); /* polls the block's end, places what was pushed */
  if (h->pushed) handoff_announce(h, own);
}

/* After a dispatch pass of a scheduler that made tasks ready: whatever it
 * could not place goes to the others now. Every push is thus followed by a
 * wake of all other schedulers or by a dispatch attempt of the pusher that
 * leaves nothing behind unannounced; a core that frees up later makes its
 * own scheduler dispatch. */
static void sched_wake_leftover(sched *s) {
  if (!s->wake_pending) return;
  s->wake_pending = false;
  pto_run *r = s->run;
  bool left = false;
  /* relaxed: our own pushes are seen; a later claim by another scheduler
   * only makes the wake-up unnecessary */
  for (int q = 0; q < SHAPE_COUNT && !left; q++)
    left = rq_queued(&r->queues[q]) > 0;
  if (!left) return; /* a syscall per parked scheduler saved on the critical path */
  sched_kick_others(r, s);
}

void sched_task_done_unit(pto_run *r, task *t, int units) {
  /* read first: once our units count, another thread may complete t and the
   * orchestrator may recycle the slot */
  int total = t->units_total;
  /* its one unit's end completes it: nothing to count (the thread that
   * sees the end, whose acquire already covers the kernel's writes) */
  if (total == units) {
    complete_task(r, t);
    return;
  }
  /* acq_rel: the last unit's thread sees every other block's writes */
  int done = atomic_fetch_add_explicit(&t->units_done, units, memory_order_acq_rel) + units;
  if (done == total) complete_task(r, t);
}

/* A core's blocks in flight as its scheduler sees them: 0 idle, 1
 * running, 2 running with one pending. */
static inline uint64_t inflight(const core *c) { return c->issued - c->seen; }

/* Polls the cores with blocks in flight, only them (core_sets.h: the walk
 * up the busy segments meets each once while completed ones move down). */
static bool poll_completions(sched *s) {
  pto_run *r = s->run;
  bool did = false;
  for (int t = 0; t < 2; t++) {
    core_set *set = &s->sets[t];
    for (int p = cs_end(set, 0); p < cs_size(set); p++) {
      core *c = s->cores[cs_at(set, p)];
      /* acquire pairs with the core's release of `finished`: its kernel's writes */
      uint64_t f = atomic_load_explicit(&c->finished, memory_order_acquire);
      while (c->seen < f) {
        cs_down(set, c->sched_idx, (int)inflight(c));
        c->seen++;
        s->news |= (uint8_t)((inflight(c) == 0) << t); /* it fell idle */
        const core_payload *pl = &c->slot[c->seen & 1];
        if (!pl->deferred) sched_task_done_unit(r, payload_task(pl), 1);
        did = true;
      }
    }
  }
  return did;
}

/* ---- placement on own cores ---- */

/* Whether core c is parked on its event: a block placed on it costs a
 * futex wake. Its waiters count, a relaxed hint that may change at any
 * time, never a decision about whether a block fits. */
static bool core_parked(const core *c) {
  return atomic_load_explicit(&c->ev.waiters, memory_order_relaxed) != 0;
}

static int per_cluster(const pto_run *r) {
  return r->cfg->aic_per_cluster + r->cfg->aiv_per_cluster;
}

static void core_dispatch(sched *s, core *c, task *t, int32_t block, int32_t sub) {
  uint64_t before = inflight(c);
  cs_up(&s->sets[c->type], c->sched_idx, (int)before);
  s->news |= (uint8_t)((before == 1) << c->type); /* a block behind a busy core */
  uint64_t d = ++c->issued;
  payload_set(&c->slot[d & 1], t, block, sub);
  /* nothing waits behind a block of a priority above 0 (priority.h): its
   * successor, the critical path's next block, finds its core free */
  atomic_store_explicit(&c->slot[d & 1].movable,
                        shape_aic(t->shape) + shape_aiv(t->shape) == 1 && !t->sync_start &&
                            t->priority == 0,
                        memory_order_relaxed);
  atomic_store_explicit(&c->slot[d & 1].completes_here, t->units_total == 1 && !t->sync_start,
                        memory_order_relaxed);
  /* the finishing core placing its own next block is awake: no signal
   * (and no fence) needed, it reads `dispatched` before it waits; a
   * parked one counts against the run's wake budget until it runs,
   * flagged before the dispatch is published, so the core that sees the
   * dispatch sees the flag and gives the count back (wake_budget.h) */
  bool wake = c != this_core;
  if (wake && core_parked(c)) wb_woke(&s->run->wake, &c->woken);
  /* release: the payload (and the flag) are written before the core sees
   * the new id */
  atomic_store_explicit(&c->dispatched, d, memory_order_release);
  if (wake) pto_event_signal(&c->ev);
}

/* Whether core c, busy, takes its next block from its queue's head itself
 * when its block ends (head_take.h): its block completes its task there,
 * in role mode, with no priority level in use (a pass orders those). A
 * block placed behind it would start no sooner, and it would end the
 * core's chain of head takes (handoff_core_may_keep: nothing behind its
 * block): on W2's replay, in the runs where both cores took heads, the
 * passes that placed blocks behind them kept 30-40% of the blocks off
 * the chains (docs/chip.md, Dispatch). */
static bool takes_heads(const core *c) {
  return atomic_load_explicit(&c->slot[c->issued & 1].completes_here, memory_order_relaxed) &&
         head_take_mode(c->run, c);
}

/* Whether core c may take one more block with at most `max_inflight` in
 * flight: a pending block goes only behind a single-core block of no gang
 * (movable), so that of a core's two blocks in flight either may move to
 * an idle core (steal.h: the first one, when the core has claimed
 * neither), and not behind a core that takes its next block itself. */
static bool has_room(const core *c, uint64_t max_inflight) {
  uint64_t n = inflight(c);
  return n == 0 || (n <= max_inflight &&
                    atomic_load_explicit(&c->slot[c->issued & 1].movable, memory_order_relaxed) &&
                    !takes_heads(c));
}

/* Finds the cores of cluster `cl` (index into s->clusters) for one block of
 * shape sh with at most `max_inflight` queued on each; fills out[] (AIC
 * first, then AIV) and returns true if the whole block fits. */
static bool fit_cluster(sched *s, int cl, shape sh, uint64_t max_inflight, core **out) {
  pto_run *r = s->run;
  int pc = per_cluster(r), aic = r->cfg->aic_per_cluster;
  core **cc = &s->cores[cl * pc];
  int n = 0, need_aiv = shape_aiv(sh);
  if (shape_aic(sh)) {
    if (!aic || !has_room(cc[0], max_inflight)) return false;
    out[n++] = cc[0];
  }
  for (int k = aic; k < pc && need_aiv > 0; k++)
    if (has_room(cc[k], max_inflight)) {
      out[n++] = cc[k];
      need_aiv--;
    }
  return need_aiv == 0;
}

static void place_block(sched *s, core **cores, task *t, int32_t block, int ncores) {
  int sub = 0;
  for (int i = 0; i < ncores; i++)
    core_dispatch(s, cores[i], t, block, cores[i]->type == PTO_CORE_AIV ? sub++ : 0);
}

/* Cores looked at for being awake beyond the ones a placement needs: the
 * idle segment's top is the likeliest awake (core_sets.h), so a few
 * looks find the awake ones without reading every idle core's line. */
#define AWAKE_LOOKS 8

/* Up to max idle cores of the set (but `skip`), awake ones first (the
 * thread running this pass, or one not parked): a parked core costs a
 * futex wake, and when work is scarce the awake ones keep up alone. The
 * idle segment is read from its top, max + AWAKE_LOOKS cores at most.
 * Parked ones, when `short_of_budget` is given, only as many as the run's
 * wake budget allows, setting *short_of_budget when that left some out
 * (wake_budget.h); NULL: all of them (a gang's blocks must start
 * together). */
static int idle_awake_first(sched *s, const core_set *set, core *skip, core **out, int max,
                            bool *short_of_budget) {
  int n = 0, np = 0;
  /* parked ones beyond what the budget lets it wake are looked at only
   * to find awake ones behind them, AWAKE_LOOKS at most */
  int room = short_of_budget ? wb_allowance(&s->run->wake) : max, use = max < room ? max : room;
  for (int k = cs_idle(set) - 1; k >= 0 && n < max && n + np < use + AWAKE_LOOKS; k--) {
    core *c = s->cores[cs_at(set, k)];
    if (c == skip) continue;
    if (c != this_core && core_parked(c))
      s->parked[np++] = c;
    else
      out[n++] = c;
  }
  int awake = n;
  for (int i = 0; i < np && i < room && n < max; i++)
    out[n++] = s->parked[i];
  /* blocks want more cores, idle ones are left, and the budget is spent */
  if (short_of_budget)
    *short_of_budget = n < max && n - awake == room && cs_idle(set) > n + (skip != NULL);
  return n;
}

/* Placements of up to `max` blocks of shape sh on this scheduler's cores,
 * each core used at most once, written to out (per-block groups of cores,
 * AIC first). Single-core shapes may use a busy core's pending slot
 * (max_inflight 1); MIX and gang blocks need idle cores (0). The cores
 * looked at are the candidates only (core_sets.h), at most max +
 * AWAKE_LOOKS of them once enough are found; parked ones within the wake
 * budget when `short_of_budget` is given (idle_awake_first; a gang passes
 * NULL); out must hold s->ncores entries. */
static int placements(sched *s, shape sh, uint64_t max_inflight, core **out, int max,
                      bool *short_of_budget) {
  pto_run *r = s->run;
  int per = shape_aic(sh) + shape_aiv(sh), n = 0;
  if (per == 1) {
    const core_set *set = &s->sets[sh == SHAPE_AIC ? PTO_CORE_AIC : PTO_CORE_AIV];
    /* the finishing core first: its next block needs no wake-up */
    core *me = this_core;
    bool mine =
        me && me->run == r && me->sched == s->id && (me->type == PTO_CORE_AIC) == (sh == SHAPE_AIC);
    /* a core that left its queue's head to another gets none of its
     * blocks in the pass its chain's end asks for (head_take.h,
     * head_yields): it looks at the queue again after a hold */
    core *skip = mine && me->left_heads ? me : NULL;
    if (mine && !skip && has_room(me, max_inflight) && max > 0)
      out[n++] = me;
    else
      me = NULL;
    /* then idle cores, awake ones first, then (max_inflight 1) running
     * ones with room behind their block */
    n += idle_awake_first(s, set, me ? me : skip, out + n, max - n, short_of_budget);
    for (int p = cs_end(set, 0); p < cs_end(set, 1) && max_inflight && n < max; p++) {
      core *c = s->cores[cs_at(set, p)];
      if (c != me && has_room(c, max_inflight)) out[n++] = c;
    }
    return n;
  }
  /* MIX: the clusters of the idle cores that bound the shape, each once */
  int pc = per_cluster(r);
  const core_set *set = &s->sets[shape_aic(sh) ? PTO_CORE_AIC : PTO_CORE_AIV];
  uint32_t stamp = ++s->cl_stamp;
  if (stamp == 0) { /* wrapped: marks of 0 (never marked) or of the last lap
                     * would read as this pass's, and no cluster be looked at */
    memset(s->cl_mark, 0, (size_t)r->cfg->clusters * sizeof *s->cl_mark);
    stamp = s->cl_stamp = 1;
  }
  for (int k = cs_idle(set) - 1; k >= 0 && n < max; k--) {
    int cl = cs_at(set, k) / pc;
    if (s->cl_mark[cl] == stamp) continue;
    s->cl_mark[cl] = stamp;
    if (fit_cluster(s, cl, sh, max_inflight, &out[n * per])) n++; /* one MIX block per cluster */
  }
  return n;
}

/* What scheduler o's published counts (publish_counts) show: its idle
 * cores of this type (pending false) or its pending blocks of it (true):
 * hints, lines its role holders write only when a count changes or a pass
 * has news. seq_cst: the second half of the Dekker pair of
 * steal_or_hand_over (a plain load on x86). */
static uint32_t shown(const sched *o, int type, bool pending) {
  return atomic_load_explicit(pending ? &o->pending[type] : &o->idle[type], memory_order_seq_cst);
}

/* What the other schedulers' published counts show, summed. */
static uint32_t others_shown(sched *s, int type, bool pending) {
  pto_run *r = s->run;
  uint32_t n = 0;
  for (int i = 0; i < r->nsched; i++)
    if (&r->scheds[i] != s) n += shown(&r->scheds[i], type, pending);
  return n;
}

/* A count stored when it changed, or, `news`, always and seq_cst: the
 * first half of the Dekker pair (steal_or_hand_over). Release either way
 * (a plain store on x86): a pass that reads a count sees the dispatches
 * the role made before storing it. */
static void publish(_Atomic uint32_t *hint, uint32_t v, bool news) {
  if (news)
    atomic_store_explicit(hint, v, memory_order_seq_cst);
  else if (atomic_load_explicit(hint, memory_order_relaxed) != v)
    atomic_store_explicit(hint, v, memory_order_release);
}

/* Publishes s's idle cores and pending blocks by type, for the other
 * schedulers' passes (several schedulers only), storing a count only when
 * it changed (those passes read the line), or, for a type this pass has
 * news of (s->news), always (steal_or_hand_over). */
static void publish_counts(sched *s) {
  if (s->run->nsched == 1) return;
  for (int t = 0; t < 2; t++) {
    bool news = s->news & (1u << t);
    publish(&s->idle[t], (uint32_t)cs_idle(&s->sets[t]), news);
    publish(&s->pending[t], (uint32_t)cs_pending(&s->sets[t]), news);
  }
}

/* The spots (single-core placements) whose core still has room, in
 * order; returns how many. */
static int still_room(core **spots, int n, uint64_t max_inflight) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (has_room(spots[i], max_inflight)) spots[k++] = spots[i];
  return k;
}

/* Places queued blocks of shape sh on this scheduler's cores with at most
 * max_inflight in flight. A single-core block goes to a busy core's
 * pending slot (max_inflight 1) only when no other scheduler has an idle
 * core of its type: there it starts at once, here it would wait out the
 * busy core's block. What is left in the queue is not lost: every push
 * requests a pass of each scheduler (sched_make_ready's loop, or
 * sched_wake_leftover's kicks), so a scheduler that has an idle core at
 * its pass places it there; one that has none places it pending unless
 * it, in turn, sees another idle; and if the hints mislead them all (a
 * pass that just took its last idle core publishes at its end), every
 * core is busy and the first block to end brings a pass that takes it,
 * the soonest it could have started anyway. */
static bool dispatch_shape(sched *s, shape sh, uint64_t max_inflight) {
  pto_run *r = s->run;
  ready_queue *q = &r->queues[sh];
  /* racy peek, read once; a miss is caught by the pass its pusher
   * requests after it */
  uint64_t queued = rq_queued(q);
  if (queued == 0) return false;
  int type = sh == SHAPE_AIC ? PTO_CORE_AIC : PTO_CORE_AIV;
  if (max_inflight > 0 && r->nsched > 1 && others_shown(s, type, false)) {
    s->news |= (uint8_t)(1u << type); /* handed over */
    return false;
  }
  /* an idle core of ours left parked for want of wake budget: the block
   * waits in the queue for the pass a woken core asks for (wake_budget.h),
   * not behind a busy core */
  if (max_inflight > 0 && cs_idle(&s->sets[type]) > 0) return false;
  int per = shape_aic(sh) + shape_aiv(sh);
  /* as many placements as blocks are queued, at most: a queued task has
   * one at least; while every placement found a block, twice as many */
  int batch = queued < (uint64_t)s->ncores ? (int)queued : s->ncores, placed = 0;
  bool short_of_budget = false; /* the wake budget, not the queue, bounded the last placements */
  /* a block behind a busy core, in role mode, is placed under the
   * queue's claim lock, with the core's room looked at again there: a
   * core taking its next block from the queue (head_take.h) marks itself
   * not movable and checks that nothing was placed behind it under that
   * lock, so no block claimed before the one it takes waits behind it */
  bool behind = max_inflight > 0 && !r->sched_threads;
  for (;;) {
    int n = placements(s, sh, max_inflight, s->spots, batch, &short_of_budget);
    if (n == 0) break;
    if (behind) {
      pto_spinlock_lock(&q->lock);
      n = still_room(s->spots, n, max_inflight);
    }
    int got = n ? rq_claim(r, q, n, s->claim_tasks, s->claim_blocks, max_inflight > 0, behind) : 0;
    for (int i = 0; i < got; i++)
      place_block(s, &s->spots[i * per], s->claim_tasks[i], s->claim_blocks[i], per);
    if (behind) pto_spinlock_unlock(&q->lock);
    if (n == 0) break;
    placed += got;
    if (got < n) { /* the queue ran out first */
      short_of_budget = false;
      break;
    }
    if (batch >= s->ncores) break;
    batch = batch > s->ncores / 2 ? s->ncores : 2 * batch;
  }
  /* blocks left queued only for want of wake budget: the pass's end asks
   * a woken core for the next pass (wake_budget.h). Only here: a steal
   * short of budget leaves a block behind a busy core, which runs it
   * anyway; taken as starved, a stale pending hint made passes repeat
   * forever (each found room, took nothing, and was short again) */
  if (short_of_budget) s->starved = true;
  return placed > 0;
}

/* Moves dispatch id d, not started on core c, to our idle core x if the
 * take wins (steal.h). The payload is read before the take and used only
 * if it wins: the claim was d - 1 throughout, so d's slot still held d. */
static bool take_pending(sched *s, core *x, core *c, uint64_t d) {
  const payload moved = payload_get(&c->slot[d & 1]);
  if (!steal_take(&c->claim, d)) return false;
  core_dispatch(s, x, moved.t, moved.block, moved.sub_block);
  return true;
}

/* The block core c (ours or another scheduler's) has not started while
 * another of its blocks is ahead of it or behind it, read from c's own
 * words (steal.h, steal_target): its last dispatch d, its claim word, its
 * last finished id. 0: none. */
static uint64_t core_pending(const core *c) {
  /* acquire: d's payload, written before `dispatched` moved */
  uint64_t d = atomic_load_explicit(&c->dispatched, memory_order_acquire);
  if (d < 2) return 0;
  uint64_t k = atomic_load_explicit(&c->claim, memory_order_acquire);
  return steal_target(d, k, atomic_load_explicit(&c->finished, memory_order_acquire));
}

uint64_t sched_core_unstarted(const core *c) {
  /* acquire: d's payload and flags, written before `dispatched` moved */
  uint64_t d = atomic_load_explicit(&c->dispatched, memory_order_acquire);
  uint64_t k = atomic_load_explicit(&c->claim, memory_order_acquire);
  return steal_target_lone(d, k, atomic_load_explicit(&c->finished, memory_order_acquire));
}

/* Our idle core x takes core c's block that has not started, if it has
 * one: a failed take means c's claim word moved on (it claimed a block),
 * so it reads c's words again. */
static bool take_from(sched *s, core *x, core *c) {
  for (uint64_t p; (p = core_pending(c)) != 0;)
    if (take_pending(s, x, c, p)) return true;
  return false;
}

/* Our idle core x takes a block pending on a core of its type: one of
 * ours first (with two in flight by this role's counts), then, when
 * `foreign`, one of the schedulers whose published counts show one. */
static bool take_for(sched *s, core *x, bool foreign) {
  const core_set *set = &s->sets[x->type];
  for (int p = cs_end(set, 1); p < cs_size(set); p++) /* ours with two blocks in flight */
    if (take_from(s, x, s->cores[cs_at(set, p)])) return true;
  pto_run *r = s->run;
  for (int o = 0; o < r->nsched && foreign; o++) {
    sched *other = &r->scheds[o];
    if (other == s || !shown(other, x->type, true)) continue;
    /* its cores with two blocks in flight, as its role holder's core set
     * shows them now: a racy read of valid core indexes (core_sets.h),
     * each one's words then say what may be taken */
    const core_set *os = &other->sets[x->type];
    for (int p = cs_end(os, 1), n = cs_size(os); p < n; p++)
      if (take_from(s, x, other->cores[cs_at(os, p)])) return true;
  }
  return false;
}

/* Cores of the one-in-flight segment a lone look reads: a bounded look
 * (three words each), so that a core's park costs the same on a chip of
 * thousands of cores. The segment's start is the likeliest: a dispatch
 * to an idle core moves that core to it (core_sets.h, cs_up). */
#define LONE_LOOKS 8

/* Our idle core x takes a single-core block placed on a core of ours of
 * its type that has no other block in flight and has not started it
 * (steal.h, steal_target_lone): read from that core's words, then the
 * same take as a pending block's. Looked for only when asked: by a core
 * about to park (sched_lone_ask), which would otherwise park while a
 * block placed on a core the OS left queued behind another thread waits
 * for the OS to run that core; and by the orchestrator, for a block it
 * saw unstarted at two of its looks. */
static bool take_lone(sched *s, core *x) {
  const core_set *set = &s->sets[x->type];
  int from = cs_end(set, 0), to = cs_end(set, 1);
  if (to - from > LONE_LOOKS) to = from + LONE_LOOKS;
  for (int p = from; p < to; p++) {
    core *c = s->cores[cs_at(set, p)];
    uint64_t t = sched_core_unstarted(c);
    /* movable: a single-core block of no gang and priority 0 (a part of a
     * MIX block or a gang's stays where it was placed) */
    if (t && atomic_load_explicit(&c->slot[t & 1].movable, memory_order_relaxed) &&
        take_pending(s, x, c, t)) {
      /* nothing goes behind the block taken (has_room) before c has seen
       * the take: a block placed there would wait for c to run, and its
       * marked claim word lets nobody take it (steal_target) */
      atomic_store_explicit(&c->slot[t & 1].movable, false, memory_order_relaxed);
      return true;
    }
  }
  return false;
}

/* Each idle core of ours takes a single-core block pending on a busy core
 * of its type (steal.h): called when nothing queued was left for it, so
 * the block would otherwise wait out the busy core's running one. Awake
 * cores first (the thread running this pass, or one not parked); a parked
 * one costs a futex wake, which is still the shorter wait. Both blocks of
 * a core with two in flight are single-core blocks of its type and of no
 * gang (has_room: MIX and sync_start blocks are placed on idle cores
 * only, and nothing goes behind them). */
static bool steal_pending(sched *s) {
  bool did = false;
  for (int type = 0; type < 2; type++) {
    /* first what costs nothing: this role's counts, the others' hints;
     * only then the idle cores' event lines (core_parked) */
    core_set *set = &s->sets[type];
    if (!cs_idle(set)) continue;
    uint32_t theirs = others_shown(s, type, true); /* blocks the others show pending */
    bool foreign = theirs > 0;
    int pending = cs_pending(set) + (int)theirs;
    if (!pending) continue;
    /* as many idle cores as there are blocks to take (by the counts and
     * hints), awake ones first */
    bool short_of_budget; /* a block left pending runs after its busy core's */
    int n = idle_awake_first(s, set, NULL, s->spots, pending, &short_of_budget);
    /* once one finds nothing, nothing is left for the next */
    for (int i = 0; i < n && take_for(s, s->spots[i], foreign); i++) {
      s->steals++;
      did = true;
    }
  }
  /* a core about to park asked for a look (sched_lone_ask); still idle:
   * nothing was placed on it above */
  core *x = atomic_load_explicit(&s->lone_for, memory_order_relaxed)
                ? atomic_exchange_explicit(&s->lone_for, NULL, memory_order_relaxed)
                : NULL;
  if (x && inflight(x) == 0 && take_lone(s, x)) {
    s->steals++;
    did = true;
  }
  /* the orchestrator asked (sched_lone_ask), a bit per type: an idle
   * core of the type, awake ones first, a parked one too */
  uint32_t types = atomic_load_explicit(&s->lone_any, memory_order_relaxed)
                       ? atomic_exchange_explicit(&s->lone_any, 0, memory_order_relaxed)
                       : 0;
  for (; types; types &= types - 1) {
    const core_set *set = &s->sets[__builtin_ctz(types)];
    core *y;
    bool short_of_budget;
    if (cs_idle(set) && idle_awake_first(s, set, NULL, &y, 1, &short_of_budget) == 1 &&
        take_lone(s, y)) {
      s->steals++;
      did = true;
    }
  }
  return did;
}

/* Every other scheduler showing an idle core of a type we have news of,
 * while a block of that type waits here (behind a busy core of ours, or
 * queued because they showed one) and no core of ours of the type idles:
 * kicked, their next pass takes it (steal.h, "nobody left out"). */
static void hand_over(sched *s) {
  pto_run *r = s->run;
  for (int type = 0; type < 2; type++) {
    if (!(s->news & (1u << type)) || cs_idle(&s->sets[type])) continue;
    if (!cs_pending(&s->sets[type]) &&
        rq_queued(&r->queues[type == PTO_CORE_AIC ? SHAPE_AIC : SHAPE_AIV]) == 0)
      continue;
    for (int i = 0; i < r->nsched; i++) {
      sched *o = &r->scheds[i];
      if (o != s && shown(o, type, false)) sched_kick(r, o);
    }
  }
}

/* The end of a dispatch: idle cores take pending blocks, and blocks that
 * wait here go to the other schedulers' idle cores. With several
 * schedulers, a pass with news (a core of ours fell idle, a block went
 * behind a busy core or was left queued for another scheduler) stores its
 * counts of that type, seq_cst, then reads the others' (seq_cst, shows):
 * the Dekker pair of steal.h. In the one order of seq_cst operations,
 * either this pass's loads follow a concurrent pass's stores, or that
 * pass's loads follow ours; a load that reads such a store also acquires
 * the dispatch before it, so a block shown pending is found in its core's
 * words. (seq_cst operations rather than a fence: ThreadSanitizer models
 * them, and on x86 the store costs what the fence would.) */
static bool steal_or_hand_over(sched *s) {
  bool several = s->run->nsched > 1;
  if (several && s->news) publish_counts(s);
  bool did = steal_pending(s);
  if (several && s->news) {
    if (did) publish_counts(s);
    hand_over(s);
    s->news = 0; /* published */
  }
  return did;
}

static bool dispatch_normal(sched *s) {
  static const shape order[] = {SHAPE_AIC_AIV2, SHAPE_AIC_AIV, SHAPE_AIV2, SHAPE_AIC, SHAPE_AIV};
  bool did = false;
  for (int i = 0; i < SHAPE_COUNT; i++)
    did |= dispatch_shape(s, order[i], 0);
  /* what no idle core of ours takes goes to the others before we queue
   * single-core blocks behind our busy cores */
  sched_wake_leftover(s);
  did |= dispatch_shape(s, SHAPE_AIC, 1);
  did |= dispatch_shape(s, SHAPE_AIV, 1);
  /* a core still idle now found nothing queued of its type */
  did |= steal_or_hand_over(s);
  return did;
}

/* ---- gang start ---- */

/* Any drain step that publishes something wakes the other participants. */
static void drain_moved(pto_run *r) {
  /* release pairs with the acquire in sched_has_work */
  atomic_fetch_add_explicit(&r->drain_gen, 1, memory_order_release);
  for (int s = 0; s < r->nsched; s++)
    sched_kick(r, &r->scheds[s]);
}

static int gang_capacity(sched *s, task *t) {
  return placements(s, t->shape, 0, s->spots, s->ncores, NULL);
}

static void gang_stage(sched *s, task *t, int first, int n) {
  int per = shape_aic(t->shape) + shape_aiv(t->shape);
  int got = placements(s, t->shape, 0, s->spots, n, NULL);
  for (int i = 0; i < got; i++)
    place_block(s, &s->spots[i * per], t, first + i, per);
  if (got < n)
    run_fail(s->run, PTO_ESCHED_TIMEOUT, t->id, -1,
             "scheduler %d could stage only %d of %d blocks of sync_start task %lld", s->id, got, n,
             (long long)t->id);
}

static void gang_launch(pto_run *r, task *t) {
  uint64_t began = atomic_load_explicit(&t->drain_ns, memory_order_relaxed);
  if (began) {
    uint64_t d = pto_now_ns() - began;
    atomic_fetch_add_explicit(&r->drain_lat_sum_ns, d, memory_order_relaxed);
    stat_max(&r->drain_lat_max_ns, d);
  }
  /* release: every staged payload is visible before a core starts the block */
  atomic_store_explicit(&t->cohort_go, 1, memory_order_release);
  for (int i = 0; i < r->ncores; i++)
    pto_event_signal(&r->cores[i].ev);
}

static int op_capacity(void *env, int sched_id) {
  sched *s = env;
  (void)sched_id;
  return gang_capacity(s, run_slot(s->run, drain_task(&s->run->drain)));
}
static int op_stage(void *env, int sched_id, int first, int n) {
  sched *s = env;
  (void)sched_id;
  task *t = run_slot(s->run, drain_task(&s->run->drain));
  if (gang_capacity(s, t) < n) {
    run_fail(s->run, PTO_ESCHED_TIMEOUT, t->id, -1,
             "drain: scheduler %d was given %d blocks of sync_start task %lld but has room for "
             "%d",
             s->id, n, (long long)t->id, gang_capacity(s, t));
    return -1;
  }
  gang_stage(s, t, first, n);
  return 0;
}
static void op_launch(void *env, int64_t task_id) {
  sched *s = env;
  gang_launch(s->run, run_slot(s->run, task_id));
}
static bool op_run_ended(void *env) { return run_stopping(((sched *)env)->run); }
static const drain_ops ops = {op_capacity, op_stage, op_launch, op_run_ended};

/* Serves the head of the sync_start queue: launch on own idle cores if the
 * whole cohort fits (fast path), else hand it to the drain protocol. */
static bool dispatch_sync(sched *s) {
  pto_run *r = s->run;
  ready_queue *q = &r->sync_queue;
  if (atomic_load_explicit(&q->count, memory_order_relaxed) == 0) return false;
  bool did = false;
  task *staged = NULL;
  pto_spinlock_lock(&q->lock);
  if (atomic_load_explicit(&q->count, memory_order_relaxed) > 0) {
    task *t = q->items[q->head];
    if (gang_capacity(s, t) >= t->block_num) {
      rq_pop_locked(q);
      gang_stage(s, t, 0, t->block_num);
      staged = t;
      did = true;
    } else {
      /* stamped before the request publishes the drain (stats only) */
      atomic_store_explicit(&t->drain_ns, pto_now_ns(), memory_order_relaxed);
      if (drain_request(&r->drain, s->id, t->id, t->block_num)) {
        rq_pop_locked(q); /* the drain owns it now */
        did = true;
      }
    }
  }
  pto_spinlock_unlock(&q->lock);
  /* its blocks wait for cohort_go on their cores: the launch, a signal to
   * every core of the chip, need not hold the queue's spin lock (the
   * others would spin through those calls) */
  if (staged) {
    gang_launch(r, staged);
    atomic_fetch_add_explicit(&r->sync_fast, 1, memory_order_relaxed);
  }
  if (did && drain_active(&r->drain)) drain_moved(r);
  return did;
}

/* ---- the scheduler loop ---- */

typedef struct sched_wait {
  sched *s;
  uint64_t gen, drain_gen;
  uint32_t req; /* the kicks (role requests) served so far */
} sched_wait;

static bool sched_has_work(void *p) {
  sched_wait *w = p;
  sched *s = w->s;
  pto_run *r = s->run;
  if (run_stopping(r)) return true;
  if (atomic_load_explicit(&r->ready_gen, memory_order_acquire) != w->gen) return true;
  if (atomic_load_explicit(&r->drain_gen, memory_order_acquire) != w->drain_gen) return true;
  if (role_more(&s->role, w->req)) return true;
  /* only cores with blocks in flight can finish one (the sets are this
   * thread's own: it is the scheduler) */
  for (int t = 0; t < 2; t++) {
    const core_set *set = &s->sets[t];
    for (int p = cs_end(set, 0); p < cs_size(set); p++) {
      const core *c = s->cores[cs_at(set, p)];
      if (atomic_load_explicit(&c->finished, memory_order_relaxed) != c->seen) return true;
    }
  }
  return false;
}

/* One scheduler pass: retire completions, drain step, dispatch. Returns
 * whether it did anything. Runs on the scheduler's thread, or on the
 * thread holding its role. Another pass can find more only after a drain
 * step (s->again): the tasks its completions made ready on its own queues
 * were dispatched in this very pass, and everything else that brings work
 * (a block's end, a push by another thread) requests a pass (role.h). */
static bool sched_pass(sched *s) {
  pto_run *r = s->run;
  uint64_t t0 = r->trace ? pto_now_ns() : 0;
  bool did = poll_completions(s);
  if (r->trace && did)
    trace_slice(r->trace, s->trace_track, "complete", "sched", t0, pto_now_ns(), -1, -1);
  t0 = r->trace ? pto_now_ns() : 0;
  /* the gang's id, read before the step: the step that launches it ends
   * the drain, after which there is none to read */
  int64_t gang = r->trace ? drain_task(&r->drain) : -1;
  int st = drain_step(&r->drain, &s->drain, &ops, s);
  s->again = st != DRAIN_NONE && st != DRAIN_WAITING;
  if (s->again) {
    drain_moved(r);
    did = true;
    if (r->trace) {
      int64_t now_gang = drain_task(&r->drain); /* a step that began a drain */
      trace_slice(r->trace, s->trace_track, "drain", "sched", t0, pto_now_ns(),
                  now_gang >= 0 ? now_gang : gang, -1);
    }
  }
  if (r->trace && s->drain.att != s->trace_att && st != DRAIN_NONE) {
    s->trace_att = s->drain.att;
    trace_instant(r->trace, s->trace_track, "drain_attempt", "sched", pto_now_ns(),
                  (int64_t)s->trace_att);
  }
  if (st == DRAIN_NONE && !drain_active(&r->drain)) {
    t0 = r->trace ? pto_now_ns() : 0;
    bool d = dispatch_sync(s);
    if (!drain_active(&r->drain)) d |= dispatch_normal(s);
    if (r->trace && d)
      trace_slice(r->trace, s->trace_track, "dispatch", "sched", t0, pto_now_ns(), -1, -1);
    did |= d;
  }
  /* parked cores left idle for want of wake budget: either room appeared
   * (pass again) or a woken core sees `starved` and asks for a pass */
  if (s->starved) {
    s->starved = false;
    /* room appeared: a pass of our own (a request: the role's loop, or
     * the scheduler thread's wait, serves it) */
    if (!run_stopping(r) && wb_starve(&r->wake)) {
      role_request(&s->role);
      did = true;
    }
  }
  sched_wake_leftover(s);
  publish_counts(s); /* what this pass polled, dispatched or staged */
  s->news = 0;
  return did;
}

/* Role mode: run s's passes here unless another thread holds its role
 * (which then serves our request, role.h). Passes never block; a pass may
 * kick another scheduler, which nests at most once per scheduler. */
static void sched_role_run(sched *s, bool leftover) { sched_role_hold(s, leftover, false); }

/* Whether every task submitted so far has completed (relaxed: stats). */
static bool last_may_be(pto_run *r) {
  return atomic_load_explicit(&r->completed, memory_order_relaxed) >=
         atomic_load_explicit(&r->submitted, memory_order_relaxed);
}

/* The same, `entered`: the caller holds the role already
 * (role_enter_first). */
static void sched_role_hold(sched *s, bool leftover, bool entered) {
  pto_run *r = s->run;
  sched *prev = this_sched;
  while (entered || role_try_enter(&s->role)) {
    entered = false;
    this_sched = s;
    /* a pull serves a requester that kicked no other scheduler: what this
     * pass cannot place goes to them (sched_wake_leftover) */
    if (leftover) s->wake_pending = true;
    if (!s->first_ns) s->first_ns = pto_now_ns();
    uint32_t seen;
    bool any = false;
    do {
      seen = role_snapshot(&s->role);
      any |= sched_pass(s);
    } while ((s->again || role_more(&s->role, seen)) && !run_stopping(r));
    /* The run's last activity (run_stats): the clock is read at the first
     * pass, then only once the orchestration has ended (orch_done: a line
     * nobody writes during the run, unlike `submitted`, which a read here
     * per pass would take from the orchestrator at every submit) and a
     * pass may be the last: every task submitted has completed, or the
     * run stops. A graph launch's orchestration ends as soon as its last
     * slot is filled, so without the count every pass of the replay read
     * the clock (5-12% of a core's samples on W2). The pass that completes
     * the last task sees its own count; a stale `submitted` is only
     * smaller (one stamp more). sched_orch_done covers a last block that
     * ended before. Relaxed: stats. */
    if ((any && !s->last_ns) || (atomic_load_explicit(&r->orch_done, memory_order_relaxed) &&
                                 (last_may_be(r) || run_stopping(r))))
      s->last_ns = pto_now_ns();
    this_sched = prev;
    /* a stopping run's requests need no pass: nothing it places runs.
     * Serving them kept a core from leaving a failed run: its pass kicked
     * another scheduler, whose hand-over kicked this one back, each pass
     * finding the blocks still queued (unit.test_reuse_differential, 'core
     * 7 is still running task -1 of an earlier run', about 1 run in 10 on
     * a loaded machine; the stack: sched_role_run > sched_pass >
     * sched_wake_leftover > sched_kick > sched_role_run > dispatch_shape) */
    if (!role_leave(&s->role, seen) || run_stopping(r)) break;
  }
}

void sched_lone_ask(core *c, bool for_any) {
  pto_run *r = c->run;
  if (r->ctl) return; /* a controlled schedule: no passes (schedule.h) */
  sched *s = &r->scheds[c->sched];
  if (for_any)
    atomic_fetch_or_explicit(&s->lone_any, 1u << c->type, memory_order_relaxed);
  else
    atomic_store_explicit(&s->lone_for, c, memory_order_relaxed);
  /* the pass that looks starts after this request (role.h; a scheduler
   * thread counts it), whose read-modify-write orders the store before
   * it: this thread's own pass when the role is free, else the holder's
   * or the thread's next */
  sched_kick(r, s);
}

void sched_orch_done(pto_run *r) {
  if (r->sched_threads) return; /* their threads stamp when going idle */
  /* Dekker with complete_task (completed, fence, then this pass's load of
   * orch_done): either that pass saw orch_done and stamped, or we see its
   * completion here and a pass of each scheduler stamps now */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&r->completed, memory_order_relaxed) !=
      atomic_load_explicit(&r->submitted, memory_order_relaxed))
    return;
  sched_kick_others(r, NULL);
}

void sched_kick_others(pto_run *r, const sched *except) {
  for (int i = 0; i < r->nsched; i++)
    if (&r->scheds[i] != except) sched_kick(r, &r->scheds[i]);
}

void sched_kick(pto_run *r, sched *s) {
  if (r->ctl) { /* no passes: the controller (on the orchestrator's thread,
                 * schedule.h) dispatches and completes */
    pto_event_signal(&r->orch_ev);
    return;
  }
  /* a request with scheduler threads: they count them, so a kick that
   * publishes nothing else it polls (another scheduler's hand over,
   * steal.h) still brings a pass */
  if (r->sched_threads) {
    role_request(&s->role);
    pto_event_signal(&s->ev);
    return;
  }
  /* role mode: a request only when the role is taken (role_enter_first,
   * whose exchange or request is a locked read-modify-write in any case;
   * the fence after it orders a core's `finished`, stored before its kick,
   * before the pass's loads: cores_all_busy's pair; out of line under
   * TSan, whose gcc rejects it here) */
  bool entered = role_enter_first(&s->role);
  PTO_FENCE_AFTER_RMW_CALL();
  if (entered) sched_role_hold(s, false, true);
}

/* One run of a dedicated scheduler thread: passes until the run stops. */
static void sched_serve(sched *s) {
  pto_run *r = s->run;
  s->first_ns = pto_now_ns();
  s->last_ns = s->first_ns;
  bool busy = false; /* did work since the last time it went idle */
  while (!run_stopping(r)) {
    sched_wait w = {s, atomic_load_explicit(&r->ready_gen, memory_order_acquire),
                    atomic_load_explicit(&r->drain_gen, memory_order_acquire),
                    role_snapshot(&s->role)};
    if (sched_pass(s)) {
      busy = true;
      continue;
    }
    /* every wake-up source signals s->ev: completions, ready tasks, drain
     * steps, shutdown; the clock is read only when going idle */
    if (busy) s->last_ns = pto_now_ns();
    busy = false;
    pto_wait(&s->ev, sched_has_work, &w, UINT64_MAX);
  }
  if (busy) s->last_ns = pto_now_ns();
}

/* Whether the run in progress has given s anything to do yet (every
 * source signals s->ev): a ready task, a drain step, a block end. */
static bool sched_wanted(void *arg) {
  sched *s = arg;
  pto_run *r = s->run;
  /* atomics only: the reset of the run may be storing them right now */
  if (atomic_load_explicit(&r->ready_gen, memory_order_relaxed) ||
      atomic_load_explicit(&r->drain_gen, memory_order_relaxed))
    return true;
  for (int i = 0; i < s->ncores; i++)
    if (atomic_load_explicit(&s->cores[i]->finished, memory_order_relaxed)) return true;
  return false;
}

/* A dedicated scheduler thread (sched_threads mode): made at the chip's
 * first run, parked between runs (run_enter), returns when the chip is
 * destroyed. */
void *sched_main(void *arg) {
  sched *s = arg;
  this_sched = s;
  while (run_enter(s->run, &s->ev, &s->entered, &s->last_gen, sched_wanted, s)) {
    pto_wait_thread_begin();
    sched_serve(s);
    pto_wait_thread_end();
    run_leave(s->run, &s->entered);
  }
  return NULL;
}
