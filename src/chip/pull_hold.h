/* pull_hold.h — how often an idle core looks for work while it pulls for
 * its scheduler (core.c, role.h): continuously, unless its blocks have been
 * running under a quarter of pull_hold_ns (PTO_PULL_HOLD_NS), when it
 * looks once per pull_hold_ns, the first time too.
 *
 * Why: handing a block that short to an idle core costs more than the
 * block. Each look of the idle core takes the lines its requesters and
 * dispatchers write (the scheduler's requests, its own dispatch register)
 * from them, so their next request or dispatch waits for the line to come
 * back: a cache-line round trip per block, for blocks that take less.
 * Looking once per hold instead lets short blocks pile up while the busy
 * threads keep their lines, and a pass then places several at once. Work
 * is never lost by it, only started later: a requester that finds the
 * puller leaves the pass to it, which serves every request at its next
 * look (role.h), and a block placed on the core waits at most one hold,
 * and none while nothing else is queued (core.c, placed_ends_hold: that
 * block is then the work that waits, in a stencil the one the next step
 * needs).
 * Nor does anything pile up while the orchestrator waits for completions
 * it needs to go on (a task it waits for, room in a ring): the core then
 * looks continuously (core.c), so a loop that submits a short block and
 * waits for it pays no hold. Its last wait, for the run's end once its
 * orchestration returned, is not one of those: nothing is submitted after
 * it, and an idle core that looked continuously there took a share of a
 * burst of short blocks from the core running them, a line per block
 * (W4's replay: a producer's 64 consumers made ready at once; 618-639 ns a
 * task against 526-578 with holds there, medians of 3 runs in 5 rounds,
 * alternated, 2 CPUs).
 * Measured in bench/results/history.md ("An idle core looks for short
 * blocks less often").
 *
 * A core times one block in PULL_TIMED_EVERY (two clock reads) and keeps
 * a running average, reset at each run's start (0: no block timed yet, so
 * no hold). Once its blocks run under PULL_SHORT_NS on average, it times
 * one in PULL_TIMED_EVERY_SHORT instead: the two reads (some 25 ns each
 * on a VM's clock) were 10-15% of a core's time on a replayed chain of
 * empty blocks, and blocks that short still give a timed one every few
 * tens of microseconds. */
#ifndef PTO_CHIP_PULL_HOLD_H
#define PTO_CHIP_PULL_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#define PULL_TIMED_EVERY       16   /* a power of two */
#define PULL_TIMED_EVERY_SHORT 256  /* a power of two */
#define PULL_SHORT_NS          1000 /* blocks this short are timed less often */

/* The mask of a core's block count whose zero marks a timed block, for
 * blocks of this running average (0: none timed yet). */
static inline uint32_t pull_timed_mask(uint64_t block_avg_ns) {
  return (block_avg_ns && block_avg_ns < PULL_SHORT_NS ? PULL_TIMED_EVERY_SHORT
                                                       : PULL_TIMED_EVERY) -
         1;
}

/* The running average after a block of `ns` (weight 1/4: a change of
 * kernels shows within a few timed blocks). */
static inline uint64_t pull_block_avg(uint64_t avg, uint64_t ns) {
  return avg ? (3 * avg + ns) / 4 : ns;
}

/* Whether blocks of this running average are short: under a quarter of
 * the hold (and timed at all). The orchestrator takes a CPU of its own
 * only while every core's blocks are short (spread.c). */
static inline bool pull_blocks_short(uint64_t block_avg_ns, uint64_t hold_ns) {
  return block_avg_ns && block_avg_ns < hold_ns / 4;
}

/* Whether the orchestrator waits for completions it needs to go on, so
 * that no core may hold: it waits (wake_at, pto_run.orch_wake_at, is set)
 * and its orchestration has not returned (orch_done), after which its
 * wait is the run's end's. */
static inline bool pull_orch_needs(int64_t wake_at, int32_t orch_done) {
  return wake_at != INT64_MAX && !orch_done;
}

/* How often to look for work, in ns; 0: continuously. */
static inline uint64_t pull_period(uint64_t block_avg_ns, uint64_t hold_ns) {
  return pull_blocks_short(block_avg_ns, hold_ns) ? hold_ns : 0;
}

#endif
