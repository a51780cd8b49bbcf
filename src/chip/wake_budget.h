/* wake_budget.h — how many parked cores a run wakes at once.
 *
 * A block placed on a parked core costs a futex wake and a thread that
 * needs a CPU. On a chip of thousands of cores and a machine of a few
 * CPUs, waking one parked core per ready block made thousands of threads
 * runnable at once: short independent blocks then cost 20x more at 1024
 * clusters than at 8, and the ring's progress check saw no task retire for
 * 500 ms. So a run keeps at most `limit` cores (the CPUs its threads may
 * use) woken and not yet running; a pass that would wake more leaves the
 * blocks queued, and each woken core, once it runs, gives its place back
 * and, if a pass went without, asks every scheduler for a pass. The
 * cascade still starts every queued block on an idle core, at most
 * `limit` wakes at a time: blocks that must run together (a kernel that
 * waits for another block) still do, never queued behind a busy core
 * while an idle one parks (sched.c: dispatch_shape).
 *
 * The steps (no lock; `woken` is one core's flag, set by its scheduler's
 * role holder only and cleared by the core):
 *
 *   pass:  n = wb_allowance(b)                  // parked cores it may wake
 *          place on at most n parked cores:  wb_woke(b, &c->woken) each
 *          blocks left for want of budget:   if (wb_starve(b)) pass again
 *   core:  after its wait, before its block:  if (wb_awake(b, &c->woken))
 *                                                 kick every scheduler
 *
 * No queued block is left without a pass (the Dekker pair, seq_cst): the
 * pass stores `starved` and then reads `waking`; the core decrements
 * `waking` and then reads `starved`. In the one order of seq_cst
 * operations one of the two reads follows the other's write: either the
 * pass sees room and passes again, or the core sees `starved` and kicks,
 * and a kicked pass acquires the push it must see (the pass's starved
 * store released it). tests/unit/test_wake_explorer.c drives the steps
 * over every interleaving, with a broken variant (the core decrements
 * after reading starved) that leaves a block queued with no wake coming.
 * A hint otherwise: `waking` may briefly exceed `limit` (several
 * schedulers read the allowance at once; MIX and gang blocks are placed
 * without it), which costs wakes, never a block. */
#ifndef PTO_CHIP_WAKE_BUDGET_H
#define PTO_CHIP_WAKE_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct wake_budget {
  _Atomic int32_t waking;  /* cores woken that have not run yet */
  _Atomic int32_t starved; /* a pass left blocks queued for want of budget */
  int32_t limit;           /* set at chip creation */
} wake_budget;

/* At a run's start (no thread inside the run). */
static inline void wb_reset(wake_budget *b, int32_t limit) {
  atomic_store_explicit(&b->waking, 0, memory_order_relaxed);
  atomic_store_explicit(&b->starved, 0, memory_order_relaxed);
  b->limit = limit > 0 ? limit : 1;
}

/* Pass: parked cores it may wake now (a racy read: a hint). */
static inline int wb_allowance(wake_budget *b) {
  int32_t w = atomic_load_explicit(&b->waking, memory_order_relaxed);
  return w < b->limit ? b->limit - w : 0;
}

/* Pass, placing a block on a core it believes parked: counts it as
 * waking unless it already is (the core has not run since). Only the
 * core's scheduler's role holder sets the flag, so a load and a store
 * suffice; counted before the flag is set, so the core's decrement never
 * precedes the increment it pairs with. One atomic operation a step: */
static inline bool wb_counted(_Atomic uint32_t *woken) {
  return atomic_load_explicit(woken, memory_order_relaxed) != 0;
}
static inline void wb_count(wake_budget *b) {
  atomic_fetch_add_explicit(&b->waking, 1, memory_order_relaxed);
}
static inline void wb_flag(_Atomic uint32_t *woken) {
  atomic_store_explicit(woken, 1, memory_order_seq_cst);
}
static inline void wb_woke(wake_budget *b, _Atomic uint32_t *woken) {
  if (wb_counted(woken)) return;
  wb_count(b);
  wb_flag(woken);
}

/* Pass, having left blocks queued while parked cores idle: the first half
 * of the Dekker pair, a store then a load. True when room appeared
 * meanwhile: pass again. */
static inline void wb_mark_starved(wake_budget *b) {
  atomic_store_explicit(&b->starved, 1, memory_order_seq_cst);
}
static inline bool wb_room(wake_budget *b) {
  return atomic_load_explicit(&b->waking, memory_order_seq_cst) < b->limit;
}
static inline bool wb_starve(wake_budget *b) {
  wb_mark_starved(b);
  return wb_room(b);
}

/* Core, after its wait: gives its place back if it was counted (a
 * relaxed load of its own flag first, on the line of its dispatch
 * register, so a core that was not woken pays nothing), then the second
 * half of the Dekker pair: the decrement, then a load of `starved` and,
 * if set, the exchange that makes one core the one that asks. True when a
 * pass went without: the caller kicks every scheduler. */
static inline void wb_unflag(_Atomic uint32_t *woken) {
  atomic_store_explicit(woken, 0, memory_order_relaxed);
}
static inline void wb_give_back(wake_budget *b) {
  atomic_fetch_sub_explicit(&b->waking, 1, memory_order_seq_cst);
}
static inline bool wb_starved_seen(wake_budget *b) {
  return atomic_load_explicit(&b->starved, memory_order_seq_cst) != 0;
}
static inline bool wb_starved_take(wake_budget *b) {
  return atomic_exchange_explicit(&b->starved, 0, memory_order_seq_cst) != 0;
}
static inline bool wb_awake(wake_budget *b, _Atomic uint32_t *woken) {
  if (!wb_counted(woken)) return false;
  wb_unflag(woken);
  wb_give_back(b);
  return wb_starved_seen(b) && wb_starved_take(b);
}

#endif
