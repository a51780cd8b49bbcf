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
 *   role holder, for core c with two blocks in flight (issued - seen == 2):
 *     p = steal_target(...)                   // which one has not started
 *     if (steal_take(&c->claim, p)) dispatch p's payload to the idle core
 *
 * Whoever moves the claim from p - 1 first decides. A lost block is
 * published finished without running, its slot marked deferred, so the
 * completion poll counts it (c->seen moves on) without completing its
 * unit: the idle core's run completes it. The holder reads the payload it
 * (or an earlier holder, through the role's acquire) wrote.
 *
 * Which block: a core's words say what it has not started. With d its
 * last dispatch id and k its claim word, k == d - 1 while it runs d - 1
 * (finished below d - 1): d waits behind it and is taken. k == d - 2 while
 * it has claimed neither d - 1 nor d (a core still waking from its futex,
 * or between two blocks): d - 1 is taken, with the same compare-and-swap
 * (d - 2 to d - 1 | STEAL_TAKEN), and the core runs d. Taking only d, and
 * only after the core claimed d - 1, lost the block for good: every take
 * before the claim failed, and the claim itself tells nobody, so d waited
 * out d - 1 while the idle core idled (steal_target; unit.test_steal_waking).
 * A failed take means the word moved on; the taker reads the words again
 * (bounded: the word only grows). Either block may move: a core gets a
 * second block in flight only behind a single-core block of no gang
 * (sched.c, has_room; payload `movable`), never behind a part of a MIX
 * block or a gang's block, which must stay where they were placed.
 *
 * Another scheduler's core: the role holder of a scheduler whose idle
 * core found nothing queued may take a block pending on a core of another
 * scheduler (sched.c, core_pending, take_pending). That core's counts and
 * payloads are its own role's, so the taker reads the core's words instead:
 *   d = dispatched (acquire); k = claim; f = finished;
 *   p = steal_target(d, k, f); read p's payload from slot p & 1;
 *   then steal_take(&c->claim, p)
 * The payload is read before the take and kept only if the take
 * succeeds: the claim was then p - 1 from that read to the take, so p had
 * not finished and its slot could not hold p + 2 yet (the owner reuses a
 * slot only after it saw the block in it finished). Read after the take,
 * it could: the core publishes p finished at once, and the owner may
 * dispatch p + 1 and p + 2. The payload's fields are relaxed atomics for
 * that early read (run.h, core_payload).
 *
 * Nobody left out: the schedulers see each other's idle cores and pending
 * blocks only through counts each publishes (sched.c, publish_counts), so
 * a pass that puts a block behind a busy core, or leaves one queued for
 * another scheduler, and a pass that sees a core of its own fall idle,
 * are a Dekker pair: each stores its counts, then reads the others', both
 * seq_cst. The first then hands the block over (kicks each
 * scheduler showing an idle core of its type, whose next pass takes it),
 * the second takes what the others show pending; at least one of them
 * sees the other. Published at the end of a pass instead, with the look
 * before it, both could miss each other and nothing would retry. Any idle
 * core takes, a parked one too (a futex wake, after the awake ones): the
 * block would otherwise wait out a running one of unknown length.
 *
 * Each step is one atomic operation, so tests/unit/test_steal_explorer.c
 * drives the real functions over every interleaving, with broken variants
 * (a take or a claim that checks and then writes, a foreign take that
 * reads the payload after taking) caught, and checks the liveness above
 * (no block pending behind a running one, or queued, while a core of its
 * type idles, once nothing can move), with broken variants (a take only
 * after the claim, the counts published after the look, no kick for a
 * queued block, takes by awake cores only) caught; and run N ending at
 * any step, the reset below, then run N+1, with resets that keep the
 * claim words, keep or zero the counts, or keep the dispatch registers
 * caught. */
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

/* The dispatch id a taker may take from a core whose last dispatch id is
 * d, claim word k and last finished id f (read in that order), or 0: the
 * first block it has not claimed, when another block of its is ahead of it
 * (running: k == d - 1, f < d - 1) or behind it (k == d - 2). A marked
 * word (a take not yet seen by the core) leaves it one block at most. */
static inline uint64_t steal_target(uint64_t d, uint64_t k, uint64_t f) {
  if (d < 2 || (k & STEAL_TAKEN)) return 0;
  if (k == d - 2) return d - 1;
  return k == d - 1 && f < d - 1 ? d : 0;
}

/* The dispatch id an idle core may take from a core that has one block in
 * flight and has not started it: its last dispatch id d, claim word k and
 * last finished id f (read in that order), or 0. k == d - 1 == f: the
 * core finished and claimed everything before d, and not d. Such a core
 * is awake but not running (the OS left its thread queued behind another
 * on one CPU while the other CPU idles: a yield, or a wake-up placed on
 * the waker's CPU, can keep it there for a scheduler tick, 4 ms), or
 * still waking from its futex, or about to claim d; the take and the
 * claim are the same compare-and-swap as above, so exactly one runs d. */
static inline uint64_t steal_target_lone(uint64_t d, uint64_t k, uint64_t f) {
  return d >= 1 && k == d - 1 && f == d - 1 ? d : 0;
}

/* The reset between runs (chip.c run_reset), while no thread is inside a
 * run. Dispatch ids restart at 1 with every run (core.c core_serve), so a
 * core's claim word restarts at 0: a word left at run N's last id made
 * the core take run N+1's first block as taken from it (steal_claim
 * expects 0) and publish it finished without running it. */
static inline void steal_reset_claim(_Atomic uint64_t *claim) {
  atomic_store_explicit(claim, 0, memory_order_relaxed);
}

/* A scheduler's published counts of one core type restart as what its
 * role will see: all `idle` of its cores of the type idle, none with a
 * pending block. Counts left as run N published them, or zeroed as the
 * other counters are, showed another scheduler no idle core here, so its
 * pass put a block behind its busy core and kicked nobody, while this
 * scheduler's idle core waited with nothing to make it look
 * (test_steal_explorer, run N+1). */
static inline void steal_reset_counts(_Atomic uint32_t *idle, _Atomic uint32_t *pending,
                                      uint32_t nidle) {
  atomic_store_explicit(idle, nidle, memory_order_relaxed);
  atomic_store_explicit(pending, 0, memory_order_relaxed);
}

#endif
