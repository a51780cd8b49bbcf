/* steal.h — an idle core takes a block pending on a busy one.
 *
 * A single-core block may be dispatched to a busy core's pending slot
 * (sched.c, max_inflight 1): the core starts it the moment its running
 * block ends, with no pass in between. When another core of the same
 * scheduler and type falls idle first with nothing queued, the pending
 * block would wait out the busy core's block while that core idles; the
 * role holder then moves it to the idle core. Exactly one of the two runs
 * it: the busy core claims each block before running it, the holder takes
 * the pending one, both with a compare-and-swap on the busy core's claim
 * word, which holds the id of the last block it claimed (or lost):
 *
 *   core, before running dispatch id n (n - 1 was claimed or lost):
 *     if (!steal_claim(&c->claim, n)) {       // taken from it
 *       steal_lost(&c->claim, n);             // the next claim expects n
 *       mark n's slot deferred; publish finished = n; request a pass
 *     } else run block n
 *   role holder, for core c with a pending block p (issued - seen == 2):
 *     if (steal_take(&c->claim, p)) dispatch p's payload to the idle core
 *
 * Whoever moves the claim from p - 1 first decides. A lost block is
 * published finished without running, its slot marked deferred, so the
 * completion poll counts it (c->seen moves on) without completing its
 * unit: the idle core's run completes it. The holder reads the payload it
 * (or an earlier holder, through the role's acquire) wrote.
 *
 * Another scheduler's core: the role holder of a scheduler whose idle
 * core found nothing queued may take a block pending on a core of another
 * scheduler (sched.c, foreign_pending, take_pending). That core's counts and payloads are
 * its own role's, so the taker reads the core's words instead:
 *   d = dispatched (acquire); claim == d - 1 (d not claimed yet);
 *   finished < d - 1 (the core still runs d - 1); read d's payload from
 *   slot d & 1; then steal_take(&c->claim, d)
 * The payload is read before the take and kept only if the take
 * succeeds: the claim was then d - 1 from that read to the take, so d had
 * not finished and its slot could not hold d + 2 yet (the owner reuses a
 * slot only after it saw the block in it finished). Read after the take,
 * it could: the core publishes d finished at once, and the owner may
 * dispatch d + 1 and d + 2. The payload's fields are relaxed atomics for
 * that early read (run.h, core_payload). Each step is
 * one atomic operation, so tests/unit/test_steal_explorer.c drives the
 * real functions over every interleaving, with broken variants (a take or
 * a claim that checks and then writes, a foreign take that reads the
 * payload after taking) caught. */
#ifndef PTO_CHIP_STEAL_H
#define PTO_CHIP_STEAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Marks a claim word whose block was taken by the role holder. */
#define STEAL_TAKEN (UINT64_C(1) << 63)

/* Core, step 1: claims dispatch id n (acq_rel: pairs with a taker's CAS;
 * the payload itself is ordered by `dispatched`). True: run it. */
static inline bool steal_claim(_Atomic uint64_t *claim, uint64_t n) {
  uint64_t want = n - 1;
  return atomic_compare_exchange_strong_explicit(claim, &want, n, memory_order_acq_rel,
                                                 memory_order_acquire);
}

/* Core, step 2 after a lost claim: the word said n | STEAL_TAKEN; the
 * next claim (n + 1) expects n. Only this core writes the word now: a
 * taker needs it to read n, and n + 1 is not pending before the holder
 * has seen n finished, which this core publishes after this store. */
static inline void steal_lost(_Atomic uint64_t *claim, uint64_t n) {
  atomic_store_explicit(claim, n, memory_order_release);
}

/* Role holder: takes pending dispatch id p from its core. True: it is the
 * holder's to place elsewhere, and the core will not run it. */
static inline bool steal_take(_Atomic uint64_t *claim, uint64_t p) {
  uint64_t want = p - 1;
  return atomic_compare_exchange_strong_explicit(claim, &want, p | STEAL_TAKEN,
                                                 memory_order_acq_rel, memory_order_relaxed);
}

#endif
