/* priority.h — ready work by priority (pto_submit_opts.priority, 0 ..
 * PTO_PRIORITY_MAX). Each shape's ready queue is one lock-free FIFO
 * (ready_queue.h) per priority level: `lf` for level 0, the default, and
 * `up[l - 1]` for level l, so a push stays one fetch_add and one store,
 * with no lock, whatever its level. Claimers (sched.c, rq_claim, under the
 * queue's claim lock as before) take blocks:
 *   1. of a task whose blocks are partly claimed, first, whatever its
 *      level: a task's blocks are claimed before any other task's, the
 *      order ranks that run the same graph rely on (docs/chip.md);
 *   2. then from the highest non-empty level down, each level in FIFO
 *      order.
 * A block goes behind a busy core (its pending slot) only from level 0
 * and only while every higher level is empty: a pending block starts when
 * that core's running one ends, so placing a low block there while a
 * higher one waits for an idle core would run the low one first; a
 * higher block waits in its queue for the first idle core instead. Nor
 * does any block go behind a running block of a priority above 0: that
 * block's successor (the next block of a critical path) then finds its
 * core free when it becomes ready, instead of waiting out a pending low
 * block (bench/commute: a chain of 100 1 ms tasks with 100 independent
 * ones on 2 cores took 148 ms with priorities that stopped at the queues,
 * against 166 without and the 100 it can take). So
 * every pending block is of level 0, and an idle core that takes one
 * (steal.h, its own scheduler's or another's) takes it only after the
 * queues of its type are empty: work taken from another core is never
 * taken before queued work of a higher priority.
 * sync_start tasks keep their one FIFO (their gang's drain needs a head
 * that waits): their priority is not used.
 * Starvation: strict priority, no ageing. A ready block waits while
 * ready blocks of a higher level and its shape keep the cores busy; it
 * waits no longer than the higher-priority work there is.
 * `up_used` says whether any push this run went to a level above 0
 * (written once per run and queue, relaxed): the queues of a run that
 * uses no priority cost one more load of a line nobody writes. A claimer
 * that reads it stale misses only a push whose pass request comes after
 * it, as with the queue's own racy peeks. */
#ifndef PTO_CHIP_PRIORITY_H
#define PTO_CHIP_PRIORITY_H

#include "chip/run.h"

#define PRIO_LEVELS (PTO_PRIORITY_MAX + 1)

static inline rq *prio_queue(ready_queue *q, int level) {
  return level ? &q->up[level - 1] : &q->lf;
}

static inline bool prio_up_used(const ready_queue *q) {
  return atomic_load_explicit(&q->up_used, memory_order_relaxed) != 0;
}

/* Before a push to `level` (stored once per run: no line bounces). */
static inline void prio_mark(ready_queue *q, int level) {
  if (level && !prio_up_used(q)) atomic_store_explicit(&q->up_used, 1, memory_order_relaxed);
}

/* Queued positions over every level, a racy hint. */
static inline uint64_t prio_queued(ready_queue *q) {
  uint64_t n = rq_size(&q->lf);
  if (prio_up_used(q))
    for (int l = 0; l < PTO_PRIORITY_MAX; l++)
      n += rq_size(&q->up[l]);
  return n;
}

/* Whether a level above 0 has queued positions (a racy hint). */
static inline bool prio_up_queued(ready_queue *q) {
  if (!prio_up_used(q)) return false;
  for (int l = 0; l < PTO_PRIORITY_MAX; l++)
    if (rq_size(&q->up[l])) return true;
  return false;
}

#endif
