/* gather.h — the orchestrator's gather: tasks ready at their submit, held
 * back while no core would take them from a queue sooner, and pushed
 * together by whoever takes them (docs/chip.md, "The orchestrator's
 * gather").
 *
 * Why: pushing a task ready at its submit claims the queue's tail, asks
 * for a pass and looks at the cores, on lines the cores read and write; a
 * loop of short independent tasks pays those per task (W2). Gathered, they
 * cost the orchestrator a store and a compare-and-swap on lines of its own,
 * and the push and the pass request are paid once per take.
 *
 *   orchestrator (alone appends):   w = word; cell[count(w)] = t;
 *                                   CAS word w -> w + 1 (retry on a take)
 *     the first task of an epoch (count was 0), after its CAS: covered?
 *       (an idle core holds, or every core of its type is busy) else take
 *       it back and push it at once
 *   taker (anyone):                 w = word; read cell[0, count(w));
 *                                   CAS word w -> next epoch, count 0
 *   holder (an idle core that       holders++; look (take) once per hold;
 *    looks once per hold):          holders--, then take (the re-check)
 *   a core falling idle that does   fence; if holders == 0: take
 *    not hold (core_wait_work)
 *
 * Nothing is left gathered while every core that could take it waits for
 * nothing: the first append's CAS and the orchestrator's look at the
 * holders and at the cores' `finished`/`dispatched` against a holder's
 * decrement and a core's `finished` store, each followed by its load of
 * the word (Dekker pairs over seq_cst). If the orchestrator saw a holder
 * or a busy core, that holder's end or that core's fall to idle comes
 * after the append in the one order and takes it; if not, the
 * orchestrator takes its own task back and pushes it. Later appends of the
 * same epoch need no look: whoever covered the first takes them all. An
 * epoch holds tasks of one shape (sched.c): "every core of its type busy"
 * covers that type only.
 *
 * A take reads the cells before its CAS; the CAS succeeds only if no
 * append or take moved the word since, so the cells it read were those
 * appended in that epoch, each taken once. The epoch takes the word's
 * high bits: a taker would have to sleep between its load and its CAS
 * through 2^56 takes for the word to come back to the value it read.
 *
 * tests/unit/test_gather_explorer.c drives these steps over every
 * interleaving of the orchestrator and two cores, with broken variants
 * caught, and run N+1 after run N ends at any step. */
#ifndef PTO_CHIP_GATHER_H
#define PTO_CHIP_GATHER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cacheline.h"

#define GATHER_MAX        64 /* tasks an epoch holds; the orchestrator takes a full one */
#define GATHER_COUNT_BITS 8

typedef struct gather {
  /* epoch << GATHER_COUNT_BITS | count: cell[0, count) gathered */
  PTO_LINE_ALIGNED _Atomic uint64_t word;
  _Atomic uint32_t cell[GATHER_MAX]; /* task slot indices */
  /* idle cores holding (core.c): each looks at the word once per hold */
  PTO_LINE_ALIGNED _Atomic int32_t holders;
} gather;

/* Also the reset between runs (orch_reset): empty, nobody holding. A
 * run's end leaves both so (the orchestration's end takes what it
 * gathered; a holder ends its hold before its core leaves the run); the
 * reset does not rely on it (test_gather_explorer: a reset that keeps a
 * count runs an earlier run's task, one that keeps the holders strands
 * the next run's). */
static inline void gather_init(gather *g) {
  atomic_store_explicit(&g->word, 0, memory_order_relaxed);
  atomic_store_explicit(&g->holders, 0, memory_order_relaxed);
}

static inline uint32_t gather_count(uint64_t w) {
  return (uint32_t)(w & ((1u << GATHER_COUNT_BITS) - 1));
}

/* The word, for an append's or a take's first try; seq_cst: a taker's
 * load follows its holders' decrement or its `finished` store (Dekker). */
static inline uint64_t gather_load(gather *g) {
  return atomic_load_explicit(&g->word, memory_order_seq_cst);
}

/* Whether anything looks gathered: a hint (relaxed), for a holder's look
 * before its take, which loads the word again. */
static inline bool gather_waiting(gather *g) {
  return gather_count(atomic_load_explicit(&g->word, memory_order_relaxed)) != 0;
}

/* The orchestrator's append of slot idx, in two steps. First the cell
 * that word w names, then the move to w + 1 (release, with the task's
 * slot written before it; seq_cst: before the look at the holders and
 * cores). false: a take moved the word since w (w is now the new word,
 * read with acquire: the taker's reads of the cells come before the
 * cell store of the next try), so store into the new cell and try
 * again. */
static inline void gather_put_cell(gather *g, uint64_t w, uint32_t idx) {
  atomic_store_explicit(&g->cell[gather_count(w)], idx, memory_order_relaxed);
}
static inline bool gather_try_commit(gather *g, uint64_t *w) {
  return atomic_compare_exchange_strong_explicit(&g->word, w, *w + 1, memory_order_seq_cst,
                                                 memory_order_acquire);
}

/* A take, in steps: with w from gather_load (or a failed try), the cells
 * it counts, then the move to the next epoch, empty. Returns the count
 * taken; 0 with *w moved on: read the cells again; 0 with an empty *w:
 * nothing to take. */
static inline uint32_t gather_read_cells(gather *g, uint64_t w, uint32_t *out) {
  uint32_t n = gather_count(w);
  for (uint32_t i = 0; i < n; i++)
    out[i] = atomic_load_explicit(&g->cell[i], memory_order_relaxed);
  return n;
}
static inline bool gather_try_empty(gather *g, uint64_t *w) {
  uint64_t next = ((*w >> GATHER_COUNT_BITS) + 1) << GATHER_COUNT_BITS;
  return atomic_compare_exchange_strong_explicit(&g->word, w, next, memory_order_seq_cst,
                                                 memory_order_acquire);
}

/* The whole take: the tasks gathered, into out (GATHER_MAX room), or 0. */
static inline uint32_t gather_take(gather *g, uint32_t *out) {
  uint64_t w = gather_load(g);
  for (;;) {
    uint32_t n = gather_read_cells(g, w, out);
    if (!n) return 0;
    if (gather_try_empty(g, &w)) return n;
  }
}

/* A core's hold, which covers every epoch begun while it lasts. The end
 * comes before the take that re-checks (seq_cst: Dekker with the first
 * append's look at the holders). */
static inline void gather_hold_begin(gather *g) {
  atomic_fetch_add_explicit(&g->holders, 1, memory_order_seq_cst);
}
static inline void gather_hold_end(gather *g) {
  atomic_fetch_sub_explicit(&g->holders, 1, memory_order_seq_cst);
}
static inline bool gather_held(gather *g) {
  return atomic_load_explicit(&g->holders, memory_order_seq_cst) > 0;
}

#endif
