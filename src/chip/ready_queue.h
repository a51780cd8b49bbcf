/* ready_queue.h — the ready queue of one resource shape: a bounded FIFO of
 * task slot indexes that any pto thread pushes to without a lock (the
 * orchestrator, a core completing a producer: one fetch_add and one store)
 * and that schedulers claim blocks from in order.
 *
 * Positions are 64-bit counters that never wrap in practice: `tail` is the
 * next position to push, `head` the task whose blocks are being claimed;
 * position p lives in cell p % cap (cap a power of two). A cell is one word,
 * ((p + 1) << RQ_IDX_BITS) | slot index, tagged with its position, so a
 * claimer tells "position h is published" from "the cell still holds the
 * previous lap" by the tag alone:
 *
 *   push:   p = rq_push_claim(q);  rq_push_publish(q, p, idx);
 *   claim (claimers hold the queue's claim lock, sched.c: a task's blocks
 *          are claimed from the head in order, and the head moves only
 *          when the last block of its task is taken):
 *           h = rq_pop_head(q);
 *           while (rq_pop_cell(q, h, &idx)) {   // else empty, or h not yet
 *             take blocks of idx;               // published: its pusher
 *             if (none left) rq_pop_advance(q, ++h); else break;
 *           }                                   // requests a pass after
 *
 * No cell is overwritten before its task was fully claimed, without a
 * check: a task is made ready (pushed) exactly once, and only live tasks
 * are queued, at most cap = task_slots of them. When position p is pushed,
 * the cap positions p - cap .. p - 1 cannot all still be queued (with p
 * they would be cap + 1 distinct live tasks: a slot that appears twice was
 * retired in between, so fully claimed, and the head moves in order), so
 * the head had passed p - cap, and that move happens-before the push
 * (through the claim lock and the task's run, completion, retirement and
 * the slot's next submit). tests/unit/test_ready_explorer.c checks the
 * invariant, FIFO block order and exactly-once claiming over every
 * interleaving of 2-3 threads, with broken variants caught.
 *
 * Each step is one atomic operation, so the explorer drives the real
 * functions one at a time. */
#ifndef PTO_CHIP_READY_QUEUE_H
#define PTO_CHIP_READY_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cacheline.h"
#include "common/options.h"

/* A cell holds a slot index in RQ_IDX_BITS bits: the slots of a run are
 * task_slots rounded up to a power of two (rq_cap_for), and pto_chip_create
 * refuses task_slots above PTO_TASK_SLOTS_MAX, so every index fits. */
#define RQ_IDX_BITS 25
#define RQ_IDX_MASK ((UINT64_C(1) << RQ_IDX_BITS) - 1)
_Static_assert((uint64_t)PTO_TASK_SLOTS_MAX - 1 <= RQ_IDX_MASK &&
                   (PTO_TASK_SLOTS_MAX & (PTO_TASK_SLOTS_MAX - 1)) == 0,
               "a slot index of the largest task ring must fit a ready queue cell");

typedef struct rq {
  /* pushers and poppers on their own lines */
  PTO_LINE_ALIGNED _Atomic uint64_t head;   /* next position to pop */
  PTO_LINE_ALIGNED _Atomic uint64_t tail;   /* next position to push */
  PTO_LINE_ALIGNED _Atomic uint64_t *cells; /* cap words */
  uint64_t cap;                             /* a power of two (a mask, not a division) */
} rq;

static inline uint64_t rq_word(uint64_t pos, uint32_t idx) {
  return ((pos + 1) << RQ_IDX_BITS) | idx;
}
static inline bool rq_word_is(uint64_t w, uint64_t pos) {
  return (w >> RQ_IDX_BITS) == (((pos + 1) << RQ_IDX_BITS) >> RQ_IDX_BITS);
}

/* The capacity for queues of at most n live tasks: cells must hold cap
 * words. */
static inline uint64_t rq_cap_for(uint64_t n) {
  uint64_t cap = 1;
  while (cap < n)
    cap <<= 1;
  return cap;
}

/* cells: cap words, all zero (calloc'd), which rq_init does not write. A
 * zero word is no position's: a tag is (p + 1) mod 2^39, nonzero for every
 * position a queue reaches (p < 2^39 - 1), so a zero cell reads as "not
 * published" exactly as a previous lap's word would. It is read only for
 * its first-lap position (a cell i still zero has had no push: the tail is
 * at most i), and the first push to position i >= cap finds the word of
 * i - cap there, as before. Not writing them keeps a queue's untouched
 * pages out of the process's memory: the priority levels' queues
 * (priority.h) of a run that uses none cost nothing, and a queue's cells
 * become resident only as far as its pushes have reached. cap is a power
 * of two (rq_cap_for). */
static inline void rq_init(rq *q, _Atomic uint64_t *cells, uint64_t cap) {
  atomic_init(&q->head, 0);
  atomic_init(&q->tail, 0);
  q->cells = cells;
  q->cap = cap;
}

/* Push, step 1: claims position p. Relaxed: the position carries no data;
 * the cell's release store publishes the task. */
static inline uint64_t rq_push_claim(rq *q) {
  return atomic_fetch_add_explicit(&q->tail, 1, memory_order_relaxed);
}
/* Push of n tasks made ready together (a batch, ready_batch.h), step 1:
 * claims positions p .. p + n - 1 with one fetch_add; each is then
 * published as a single push's (step 2). A claimer that meets one not yet
 * published stops there, as for a single push: the pusher requests its
 * pass after publishing them all. */
static inline uint64_t rq_push_claim_n(rq *q, uint32_t n) {
  return atomic_fetch_add_explicit(&q->tail, n, memory_order_relaxed);
}
/* Push, step 2: release pairs with rq_pop_cell's acquire: everything the
 * pusher wrote to the task (state, blocks claimed so far) is visible to
 * its popper. */
static inline void rq_push_publish(rq *q, uint64_t p, uint32_t idx) {
  atomic_store_explicit(&q->cells[p & (q->cap - 1)], rq_word(p, idx), memory_order_release);
}

/* Claim, step 1: the head position (claimers serialise on their lock; the
 * load is atomic for the watchdog's and rq_size's unlocked peeks). */
static inline uint64_t rq_pop_head(rq *q) {
  return atomic_load_explicit(&q->head, memory_order_relaxed);
}
/* Claim, step 2: is position h published? Then *idx is its task. Acquire
 * pairs with rq_push_publish. */
static inline bool rq_pop_cell(rq *q, uint64_t h, uint32_t *idx) {
  uint64_t w = atomic_load_explicit(&q->cells[h & (q->cap - 1)], memory_order_acquire);
  *idx = (uint32_t)(w & RQ_IDX_MASK);
  return rq_word_is(w, h);
}
/* Claim, step 3, once every block of the head task is claimed: the head
 * moves to h. Release: the claimer's reads of the cell happen-before a
 * later claimer's (the lock orders them too) and before any overwrite of
 * the cell (the capacity argument above). */
static inline void rq_pop_advance(rq *q, uint64_t h) {
  atomic_store_explicit(&q->head, h, memory_order_release);
}

/* Queued positions, a racy hint (claimed but unpublished ones count).
 * Always inlined: in the one unit chip/ compiles to (PTO_UNITY) gcc left
 * it a call in the cores' loop, 10 instructions a task of a replay. */
static inline __attribute__((always_inline)) uint64_t rq_size(rq *q) {
  uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
  return t > h ? t - h : 0;
}

/* Between runs, with no thread inside a run (so every claimed position was
 * published): drops whatever a failed run left queued, in O(1). The head
 * jumps to the tail and the cells keep their tags: a position below the
 * new head is never read again, a cell is next written for a position at
 * or above it (p - cap < head: nobody waits on the word it replaces), and
 * the capacity argument above starts again from an empty queue, among
 * the tasks of the new run only. Without it, run N+1 claims run N's stale
 * cells: old blocks run again, or a push overwrites the cell the head
 * waits on (test_ready_explorer models it, test_chip_reuse shows it). */
static inline void rq_discard(rq *q) {
  atomic_store_explicit(&q->head, atomic_load_explicit(&q->tail, memory_order_relaxed),
                        memory_order_relaxed);
}

#endif
