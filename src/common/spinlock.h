/* spinlock.h — a lock for critical sections of a few loads and stores that
 * several pto threads contend for: test, then exchange to take it (acquire),
 * a store to give it back (release, no locked instruction), and a waiter
 * that spins a short while, then yields (with more pto threads than CPUs
 * the holder may be the one preempted). Never parks: only for sections
 * that cannot block. */
#ifndef PTO_COMMON_SPINLOCK_H
#define PTO_COMMON_SPINLOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/wait.h"

#define PTO_SPINLOCK_SPINS 64 /* pauses before each yield */

typedef struct pto_spinlock {
  atomic_int held;
} pto_spinlock;

static inline void pto_spinlock_init(pto_spinlock *l) { atomic_init(&l->held, 0); }

/* A waiter's round `round` (0, 1, ...) of waiting for a spin lock: a pause
 * for the first PTO_SPINLOCK_SPINS rounds, then a yield. Also for a lock
 * whose word is ordered otherwise (commute.c's: seq_cst, a Dekker pair). */
static inline void pto_spin_backoff(unsigned round) {
  if (round < PTO_SPINLOCK_SPINS)
    pto_cpu_relax();
  else
    sched_yield();
}

static inline bool pto_spinlock_try(pto_spinlock *l) {
  return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

static inline void pto_spinlock_lock(pto_spinlock *l) {
  for (unsigned i = 0; !pto_spinlock_try(l); i++)
    pto_spin_backoff(i);
}

static inline void pto_spinlock_unlock(pto_spinlock *l) {
  atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif
