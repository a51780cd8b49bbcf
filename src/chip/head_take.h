/* head_take.h — a core that completed its own task (handoff.h) and keeps
 * no successor takes its next block from the head of its ready queue
 * itself, instead of publishing its block's end and running a pass of
 * its scheduler to be given that very block.
 *
 * Why: on independent tasks every block cost one pass (completion poll,
 * drain step, five dispatch shapes, placement, dispatch) under the
 * scheduler's role, and the role is one thread at a time: on W2's replay
 * (2 cores) the role was held about 94% of the time (perf: the pass, the
 * role, the completion and the dispatch were 47% of each core's
 * samples), so the cores waited for each other's passes.
 *
 *   after the task's completion here kept nothing (sched_complete_here),
 *   under the same rules as a kept successor (handoff_core_may_keep: no
 *   block placed behind ours, no gang, no drain, no MIX queued, not
 *   stopping), nothing pushed by that completion (its announce comes at
 *   the chain's end, not after blocks taken here), role mode (a
 *   scheduler thread would not see the block), the queue of the core's
 *   shape at level 0 only (no priority level in use: a pass orders
 *   those):
 *     lock the queue's claim lock; if the head position is published,
 *     its task is one block of the core's type, not partly claimed,
 *     and nothing was placed behind the core's block meanwhile (its
 *     dispatch register still at that block), claim it (next_block,
 *     head moves on) as a pass's claim would, and mark the core's slot
 *     not movable (no pass puts a block behind a core that takes its own
 *     next one); unlock; run the block under the same dispatch id,
 *     complete it here, and so on (core.c)
 *
 * The queue's protocol is unchanged: a head-taking core is one more
 * claimer, and every claimer holds the queue's claim lock (with one
 * scheduler too, in role mode: ready_queue.h's claim steps, explored with
 * 2-3 claimers under the lock by test_ready_explorer). The chain is the
 * hand-off's: the block runs under the dispatch id of the block the core
 * was given, is completed here, and the chain's end publishes `finished`
 * with the slot deferred and asks for the pass a block's end asks for
 * (test_role_explorer explores that). What the core takes is what a pass
 * would have given it first (the finishing core first, the queue's head
 * first); nothing is taken from another core: a block still queued is
 * claimed by whoever comes first, and one placed on a core stays there.
 *
 * Order with the passes: a pass places a block behind a busy core (its
 * pending slot) under the same lock, looking at the core's room again
 * there (sched.c, dispatch_shape). So either the pass's placement comes
 * first, and the core sees its dispatch register moved and takes
 * nothing, or the core's take comes first, and the pass sees the slot
 * not movable and places nothing behind it. A block claimed before the
 * one the core takes never waits behind it (a kernel that waits for
 * another block's progress, a collective's ranks, would deadlock on
 * that).
 *
 * Short blocks: one core takes the heads (head_yields). Two cores taking
 * heads in turn move the claim lock's and the head's lines between their
 * CPUs at every take, which on blocks of tens of ns costs more than the
 * second core adds: W2's replay on 2 cores (20 000 empty tasks) took 70-76
 * ns a task whenever both cores took heads, 30-35 when one did, and which
 * of the two happened depended on where the OS had put the threads. So a
 * core about to take the head leaves it when the core that took the last
 * head itself (the queue's `last_taker`, written under the lock) has a
 * lower number, at least HEAD_YIELD_QUEUED blocks are queued, and its own
 * blocks average under PTO_HEAD_YIELD_NS (default 100): the take returns
 * nothing, and the pass its chain's end asks for places no block on this
 * core (its `left_heads`, read by sched.c's placements), which falls
 * idle. The lowest-numbered core taking heads keeps them. Nothing waits for it longer
 * than a hold: the queue is still the other core's to take from, and the
 * idle core looks at the queues again after one pull hold, whether or not
 * it becomes its scheduler's puller (core.c, core_look_after_yield), and
 * takes a block if one is queued, so a block that a running kernel waits
 * for starts within PTO_PULL_HOLD_NS (unit.test_head_yield's hidden
 * dependency). pto_run_stats.head_yields counts the yields. */
#ifndef PTO_CHIP_HEAD_TAKE_H
#define PTO_CHIP_HEAD_TAKE_H

#include "chip/handoff.h"
#include "common/options.h"

/* Blocks queued at least, for a core to leave the heads to another: with
 * fewer, the other core's chain may end soon, and the blocks wait for one
 * core where two would run them (a stencil of 4 short blocks a step on 2
 * cores: blocks placed on the core that left, holding, waited out its
 * hold, unit.test_pull_hold). */
#define HEAD_YIELD_QUEUED 16

/* Whether core `me`, about to take its queue's head, leaves it to core
 * `last`, which took the last head itself (-1: none this run): `last` has
 * a lower number, `queued` blocks are queued, at least HEAD_YIELD_QUEUED,
 * and me's blocks average (`avg`, 0: none timed yet) under `limit` ns (0:
 * never). */
static inline bool head_yields(int32_t last, int32_t me, uint64_t queued, uint64_t avg,
                               uint64_t limit) {
  return last >= 0 && last < me && queued >= HEAD_YIELD_QUEUED && avg && avg < limit;
}

static inline ready_queue *head_queue(pto_run *r, const core *c) {
  return &r->queues[c->type == PTO_CORE_AIC ? SHAPE_AIC : SHAPE_AIV];
}

/* Whether core c takes heads from its queue at all: role mode (a
 * scheduler thread would not see the block), no priority level in use (a
 * pass orders those). sched.c's takes_heads asks it too. */
static inline bool head_take_mode(pto_run *r, const core *c) {
  return !r->sched_threads && !prio_up_used(head_queue(r, c));
}

/* Whether core c's completion should stay on c for a head to take after
 * it: head-take mode, and its queue holds something (a racy peek;
 * head_take looks again under the lock). */
static inline bool head_take_worth(pto_run *r, const core *c) {
  return head_take_mode(r, c) && rq_size(&head_queue(r, c)->lf) > 0;
}

/* The head task of h's core's queue, claimed for it, or NULL (see above).
 * Acquire (rq_pop_cell) pairs with the push's release: the task's slot
 * is visible. */
static inline task *head_take(handoff *h) {
  pto_run *r = h->run;
  core *c = h->c;
  if (!h->keep || h->pushed || !head_take_worth(r, c)) return NULL;
  ready_queue *q = head_queue(r, c);
  task *t = NULL;
  uint32_t idx;
  pto_spinlock_lock(&q->lock);
  /* a block placed behind ours (under this lock, sched.c dispatch_shape)
   * was claimed before any head we could take: it runs first */
  uint64_t at = rq_pop_head(&q->lf);
  if (atomic_load_explicit(&c->dispatched, memory_order_relaxed) == h->d &&
      rq_pop_cell(&q->lf, at, &idx)) {
    task *x = &r->slots[idx];
    if (handoff_kind_fits(c, x) && x->next_block == 0) {
      /* its own chain (the common case) reads nothing more */
      if (q->last_taker != c->id &&
          head_yields(q->last_taker, c->id, rq_size(&q->lf),
                      atomic_load_explicit(&c->block_ns, memory_order_relaxed),
                      (uint64_t)pto_option_cached(PTO_OPT_HEAD_YIELD_NS))) {
        c->left_heads = true; /* its chain ends; its pass places nothing here */
        c->head_yields++;
      } else {
        q->last_taker = c->id;
        h->ahead = 0; /* in the queue's order again (handoff_fit) */
        x->next_block = 1;
        rq_pop_advance(&q->lf, at + 1); /* x may run, complete and retire after this */
        /* under the lock: no block goes behind ours from now on */
        atomic_store_explicit(&c->slot[h->d & 1].movable, false, memory_order_relaxed);
        t = x;
      }
    }
  }
  pto_spinlock_unlock(&q->lock);
  return t;
}

#endif
