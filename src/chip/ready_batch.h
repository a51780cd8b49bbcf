/* ready_batch.h — tasks made ready together, pushed together: one
 * fetch_add of a queue's tail for each run of them that goes to the same
 * queue (shape and priority level), and one pass request per queue, not one
 * of each per task.
 *
 * Who batches (sched.c): a completion (complete_task) gathers the
 * consumers it makes ready, and the COMMUTE tasks its end grants bytes
 * to, and pushes them once it is done; a graph launch makes the tasks its
 * fill finds ready ready as batches (sched_make_ready_batch). A batch is open on one
 * thread at a time, the outermost opener's: a completion nested in it
 * (a dummy consumer completed inline) adds to it.
 *
 *   open (this thread had none); queue_ready appends instead of pushing;
 *   full (READY_BATCH tasks), or closed: push what it holds, then request
 *   the passes for each queue pushed to (announce_ready; in a hand-off,
 *   into the announces the hand-off makes anyway)
 *
 * Nothing changes in the queue's protocol (ready_queue.h): the positions
 * a batch claims at once are claimed by one thread in a row, as its
 * pushes one by one would be, each then published; a claimer that finds
 * one not yet published stops there, and the pass request comes after
 * they all are (test_ready_explorer explores it). What a batch delays is
 * the push itself, by at most the completion that gathers it (a launch:
 * the fill of up to READY_BATCH slots, graph.c).
 *
 * Order is kept: the tasks of one queue are pushed in the order they
 * were made ready (a completion's consumers in submission order,
 * RELEASE_ORDERED), and a hand-off keeps no successor while a task of its
 * shape at its level or above waits in the batch (rb_holds_from), as it
 * keeps none while one waits in the queue. */
#ifndef PTO_CHIP_READY_BATCH_H
#define PTO_CHIP_READY_BATCH_H

#include "chip/priority.h"

/* Tasks a batch holds before it is pushed: a completion's consumers
 * released in order (RELEASE_ORDERED) fit with room to spare. */
#define READY_BATCH 64

typedef struct ready_batch {
  task *t[READY_BATCH];
  int n;
} ready_batch;

/* Whether b holds a task of shape sh at priority `level` or above. */
static inline bool rb_holds_from(const ready_batch *b, int sh, int level) {
  for (int i = 0; i < b->n; i++)
    if (b->t[i]->shape == sh && b->t[i]->priority >= level) return true;
  return false;
}

/* Pushes what b holds, in its order, one position claim per run of tasks
 * bound for the same queue; empties b. Returns the shapes pushed to
 * (1 << shape). */
static inline uint32_t rb_push(pto_run *r, ready_batch *b) {
  uint32_t pushed = 0;
  for (int i = 0; i < b->n;) {
    /* read before the run is published: a published task may be claimed,
     * completed and its slot given to a new task at once */
    const int shape = b->t[i]->shape, level = b->t[i]->priority;
    int j = i + 1;
    while (j < b->n && b->t[j]->shape == shape && b->t[j]->priority == level)
      j++;
    ready_queue *q = &r->queues[shape];
    prio_mark(q, level);
    rq *lv = prio_queue(q, level);
    uint64_t p = rq_push_claim_n(lv, (uint32_t)(j - i));
    for (int k = i; k < j; k++)
      rq_push_publish(lv, p + (uint64_t)(k - i), (uint32_t)(b->t[k] - r->slots));
    pushed |= 1u << shape;
    i = j;
  }
  b->n = 0;
  return pushed;
}

#endif
