/* handoff.h — dependencies released where they finish: a core that
 * completes a task runs one of the successors that completion makes
 * ready itself, next, without the ready queue and without a scheduler
 * pass.
 *
 * Through the queue, a successor that the finishing core would run anyway
 * costs a push, a role request, the role's exchange and release, a
 * dispatch and the core's claim: 6 of the 12 locked instructions a
 * dependent task costs (docs/chip.md). On the hand-off it costs none of
 * them. The core (core.c), after the block of dispatch id d, of task t:
 *
 *   if (handoff_completes(r, c, t)                // t is this block alone
 *       && handoff_worth(r, c, t)                 // a successor may be kept
 *       && handoff_core_may_keep(r, c, d))        // nothing else wants c
 *     loop:
 *       kept = complete t here (sched.c, sched_complete_here: queue_ready
 *              keeps the first ready successor that handoff_fit takes, pushes
 *              the others and, if one is kept, announces them at once)
 *       if (!kept) break
 *       run kept (same dispatch id: no claim, nothing published); t = kept
 *       if (kept went asynchronous) break         // its token completes it
 *       h.keep = handoff_core_may_keep(r, c, d)   // kept ones complete here anyway
 *     slot d deferred (the completion is done), publish finished = d,
 *     sched_handoff_end: the pass the block's end asks for anyway, then
 *     the announces left
 *   else: publish finished = d and ask for a pass, as without hand-off
 *
 * What a core keeps, and when (every rule re-checked at each link):
 *   - one block of one core of its type (SHAPE_AIC on an AIC core,
 *     SHAPE_AIV on an AIV one), of no gang, with nothing queued at a
 *     higher priority level in its shape's queue (a pass claims the
 *     highest level first), and no MIX block queued (a pass places those
 *     first, and one may need this core);
 *   - on a node's chip (pto_chip.queue_order: its kernels may wait for
 *     other ranks', and may depend on the order its blocks start in),
 *     only the successor the queue would have given this core next:
 *     nothing queued at its level either (the level is FIFO). On any
 *     other chip it may also run ahead of older work of its level,
 *     HANDOFF_AHEAD_MAX blocks in a row at most: the successor's inputs
 *     are in this core's cache, and the queue's order only decides which
 *     of several ready tasks starts first (a stencil's 2 cores spent 0.32
 *     of their time in kernels of 1 us instead of 0.25, docs/chip.md);
 *   - only while no block waits on this core's pending slot (it came
 *     first), no gang is queued or being drained (the drain waits for
 *     cores to fall idle), and the run is not stopping;
 *   - never under checking mode or a controlled schedule (those order
 *     every block themselves: queue_ready hands the task to them first),
 *     and never after a block that went asynchronous (its completion
 *     comes from its token).
 * The queue checks are racy hints, as a pass's peeks are: work pushed
 * while the core decides waits for the one block kept, no longer.
 *
 * Starvation: a chain can run on one core for as long as each link finds
 * nothing else this core would have been given (the rules above), which
 * is what the queue would have done too (the finishing core takes the
 * next block first, sched.c placements). Work that arrives for this core
 * (queued above the kept block's level, or at it on a node's chip or
 * after HANDOFF_AHEAD_MAX blocks run ahead of it, a MIX block, a gang, a
 * pending block) ends the chain after the block running then: a queued
 * task waits for at most HANDOFF_AHEAD_MAX blocks of a chain that
 * overtakes it, and then is the chain's next (head_take.h).
 *
 * Nothing shared is written for a kept block: the task is the core's
 * alone from its fanin's last drop on (exactly one thread makes a task
 * ready), so the hand-off adds no step to any protocol. The trace shows
 * it on the core that ran it, the watchdog sees its `cur_task` and the
 * completions it counts, and the run's stats count it in `blocks` and
 * `handoffs`. */
#ifndef PTO_CHIP_HANDOFF_H
#define PTO_CHIP_HANDOFF_H

#include "chip/priority.h"

/* One hand-off in progress on a core's thread (sched.c). */
typedef struct handoff {
  pto_run *run;
  core *c;
  uint64_t d;      /* the dispatch id whose block the core ran first */
  task *kept;      /* the successor it keeps, or NULL */
  uint32_t pushed; /* shapes whose queues it pushed to (1 << shape; the
                    * sync_start queue: 1 << SHAPE_COUNT), not yet announced */
  bool keep;       /* this completion may keep one (handoff_core_may_keep) */
  bool completed;  /* it completed a task here: its block's slot is deferred */
  /* fan-in combining (below): `held_n` drops of task `held`'s fanin, owed
   * by tasks this chain completed, not made yet */
  task *held;
  int32_t held_n;
  bool releasing; /* sched_release_held is making them: no new hold then */
  /* the blocks this chain kept in a row ahead of older queued work of
   * their level (not on a node's chip: handoff_fit) */
  int32_t ahead;
} handoff;

/* The most blocks a chain keeps in a row ahead of queued work of their
 * level: a stencil kept at 2 gained most of what it gained unbounded
 * (0.26 -> 0.35 of its time in 1 us kernels, 0.34 unbounded). */
#define HANDOFF_AHEAD_MAX 8

/* Queued positions at `level` or above, a racy hint. */
static inline uint64_t handoff_queued_from(ready_queue *q, int level) {
  uint64_t n = level == 0 ? rq_size(&q->lf) : 0;
  if (prio_up_used(q))
    for (int l = level > 0 ? level : 1; l <= PTO_PRIORITY_MAX; l++)
      n += rq_size(prio_queue(q, l));
  return n;
}

/* Whether core c, having run the block of dispatch id d, a task of one
 * unit that stays synchronous, completes that task itself: under no
 * checking mode and no controlled schedule (they complete every block
 * themselves). A block it kept is always completed by it (it has no
 * dispatch id a pass could poll), unless it went asynchronous. */
static inline bool handoff_completes(const pto_run *r, const core *c, const task *t) {
  return !r->contract && !r->ctl && t->units_total == 1 && !t->sync_start && !c->defer_current;
}

/* Whether core c, running dispatch id d, may keep a successor now:
 * nothing else wants the core (above). */
static inline bool handoff_core_may_keep(pto_run *r, core *c, uint64_t d) {
  if (run_stopping(r)) return false;
  /* acquire is not needed: only whether a block came behind ours */
  if (atomic_load_explicit(&c->dispatched, memory_order_relaxed) != d) return false;
  if (atomic_load_explicit(&r->sync_queue.count, memory_order_relaxed) || drain_active(&r->drain))
    return false;
  /* MIX shapes: a pass places them first (a chip with no MIX kernel has
   * none queued: three queues' lines not read per block) */
  if (r->chip->mix_kernels)
    for (int s = SHAPE_AIV2; s < SHAPE_COUNT; s++)
      if (prio_queued(&r->queues[s])) return false;
  return true;
}

/* Fan-in combining: a chain that runs several predecessors of one task
 * (a reduction's inputs, W4's 64 consumers of one reducer) drops that
 * task's fanin once, by their number, instead of once each from whichever
 * core ran it, a line that went back and forth between the cores for
 * every drop.
 *
 *   completing t here (sched.c, complete_task), t's only consumer s:
 *     h.held == s: one more drop held (t's); nothing released
 *     nothing held, s's fanin above 1 (s waits for others too: a relaxed
 *     peek, the line handoff_worth read): hold it, h.held = s, n = 1
 *     else: released as usual
 *   before the chain runs its next block b (core.c): unless b releases
 *   h.held too (s among its first HOLD_LOOKS consumers), the held drops
 *   are made, one fetch_sub of n (sched_release_held), which may make s
 *   ready (then kept here if nothing else is); at the chain's end, too
 *
 * Nothing waits longer for it: while held drops are owed, s's fanin also
 * counts the block the core runs next (b releases s), so s could not be
 * ready before b completes anyway; before any other block, and before
 * the core leaves the chain, they are made. A kernel that waits for s
 * (a collective's ranks, say) cannot be b: b is s's predecessor. The
 * drop made once releases every held task's writes to s's runner (one
 * thread's program order, then the fetch_sub's release). A peek that
 * read a fanin about to drop to 1 delays s only until the next block's
 * start. tests/unit/test_fanin_hold_explorer.c explores it. */
#define HOLD_LOOKS 4

/* Whether t's one release, of node's consumer, is held back in h (above).
 * Nothing of the consumer's slot but its fanin is read: a graph launch's
 * consumer may not be filled yet (graph.c: its fanin then still counts its
 * fill's guard, so a hold never makes it ready early). */
static inline bool handoff_hold(pto_run *r, handoff *h, const task *t, int64_t node) {
  if (!h || !h->keep || h->releasing || t->commute || node < 0 || r->deps[node].next >= 0)
    return false;
  task *s = r->deps[node].consumer;
  if (h->held == s) {
    h->held_n++;
    return true;
  }
  if (h->held || atomic_load_explicit(&s->fanin, memory_order_relaxed) <= 1) return false;
  h->held = s;
  h->held_n = 1;
  return true;
}

/* Whether task b releases s: s is among b's first HOLD_LOOKS consumers.
 * Acquire: a submit's nodes are published by its release CAS (handoff_worth). */
static inline bool handoff_releases(pto_run *r, task *b, const task *s) {
  int64_t node = atomic_load_explicit(&b->fanout_head, memory_order_acquire);
  for (int i = 0; node >= 0 && i < HOLD_LOOKS; i++, node = r->deps[node].next)
    if (r->deps[node].consumer == s) return true;
  return false;
}

/* Whether task t is what a core of c's type could keep: one block of one
 * core of that type (SHAPE_AIC on an AIC core, SHAPE_AIV on an AIV one),
 * of no gang. */
static inline bool handoff_kind_fits(const core *c, const task *t) {
  return t->block_num == 1 && !t->sync_start &&
         t->shape == (c->type == PTO_CORE_AIC ? SHAPE_AIC : SHAPE_AIV);
}

/* Consumers a completion's peek looks at (handoff_worth). */
#define HANDOFF_LOOKS 16

/* Whether completing task t (core c's block, not completed yet) may make
 * ready a successor c could keep: one of t's newest HANDOFF_LOOKS
 * consumers waits for t alone and is one block of c's type, or t is
 * COMMUTE (its end may grant its bytes to a task that waits for them). A
 * peek at the lines the completion reads next anyway. Without one, the
 * completion stays in the pass, as without hand-off: its role holder
 * serves the requests that come meanwhile (an orchestrator's push) in the
 * same hold, where a completion before the pass would let each take the
 * role for a pass of its own (W2, independent tasks: 11.1 locked
 * instructions a task against 10.4). Acquire: the nodes and consumers
 * linked are published by the orchestrator's release CAS; a consumer
 * cannot retire before t completes, so its node and slot stay. A graph
 * launch's consumer may not be filled yet (graph.c: the fill runs ahead
 * of the cores): its fanin is read first, and 1 means its fill's guard
 * was dropped (t has not completed, so with the guard it would be 2 or
 * more); acquire pairs with that drop's release, so its slot is read
 * only once written. */
static inline bool handoff_worth(pto_run *r, const core *c, task *t) {
  if (t->commute) return true;
  int64_t node = atomic_load_explicit(&t->fanout_head, memory_order_acquire);
  for (int i = 0; node >= 0 && i < HANDOFF_LOOKS; i++, node = r->deps[node].next) {
    const task *s = r->deps[node].consumer;
    if (atomic_load_explicit(&s->fanin, memory_order_acquire) == 1 && handoff_kind_fits(c, s))
      return true;
  }
  return false;
}

/* Whether ready task t is the one the finishing core of h keeps: not
 * (HANDOFF_NO), as the queue would have given it next (HANDOFF_NEXT), or
 * ahead of queued work of its level (HANDOFF_AHEAD). */
enum { HANDOFF_NO, HANDOFF_NEXT, HANDOFF_AHEAD };
static inline int handoff_fit(const handoff *h, const task *t) {
  if (!h->keep || h->kept || !handoff_kind_fits(h->c, t)) return HANDOFF_NO;
  ready_queue *q = &h->run->queues[t->shape];
  int level = t->priority;
  if (level < PTO_PRIORITY_MAX && handoff_queued_from(q, level + 1)) return HANDOFF_NO;
  if (!rq_size(prio_queue(q, level))) return HANDOFF_NEXT;
  return h->run->chip->queue_order || h->ahead >= HANDOFF_AHEAD_MAX ? HANDOFF_NO : HANDOFF_AHEAD;
}

#endif
