/* signal.h — the epoch-tagged signal cell. A cell is one 64-bit word:
 * high 32 bits = epoch (the node task that last wrote it), low 32 bits =
 * the value. A reader of epoch e sees value 0 in a cell tagged with any
 * other epoch, so credits left by an earlier call, an aborted task or an
 * earlier run can never satisfy a wait or be added to: reuse is safe by
 * construction, without host-side resets. Epoch 0 is never used by a task
 * (a zeroed window reads 0 everywhere). */
#ifndef PTO_COMM_SIGNAL_H
#define PTO_COMM_SIGNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pto/comm.h"

static inline uint64_t sig_pack(uint32_t epoch, int32_t v) {
  return (uint64_t)epoch << 32 | (uint32_t)v;
}
static inline uint32_t sig_epoch(uint64_t w) { return (uint32_t)(w >> 32); }
/* The value a task of `epoch` sees in cell word w. */
static inline int32_t sig_value(uint64_t w, uint32_t epoch) {
  return sig_epoch(w) == epoch ? (int32_t)(uint32_t)w : 0;
}
static inline bool sig_cmp(int32_t seen, pto_cmp cmp, int32_t v) {
  return cmp == PTO_CMP_EQ ? seen == v : seen >= v;
}

/* What sig_next returns for an add whose sum does not fit the cell's
 * int32 value: nothing is written, and the notify fails naming it (a count
 * that wrapped, INT32_MAX + 1 read as INT32_MIN, passed as success). A
 * word of epoch 0, never written by a task. */
#define SIG_OVERFLOW ((uint64_t)1)

/* The word op writes over `old` for a task of `epoch`, or 0 when the update
 * is dropped: `old` is from a later epoch (a late signal of a finished
 * task), or SIG_OVERFLOW when an add would overflow the value. 0 is never
 * a written word: epoch 0 is never used by a task. */
static inline uint64_t sig_next(uint64_t old, pto_signal_op op, int32_t v, uint32_t epoch) {
  uint32_t oe = sig_epoch(old);
  if (oe != epoch && (int32_t)(epoch - oe) < 0) return 0; /* stale signal */
  int32_t base = sig_value(old, epoch), nv = v;
  if (op == PTO_SIGNAL_ADD && __builtin_add_overflow(base, v, &nv)) return SIG_OVERFLOW;
  return sig_pack(epoch, nv);
}

/* Applies op to the cell for a task of `epoch` and returns the word it
 * wrote, 0 when the update was dropped, or SIG_OVERFLOW, writing nothing
 * (see sig_next). The word is what
 * a waiter that sees it observes: the trace's notify-to-wait arrows join a
 * notify and a wait by it.
 * Release: every store this thread made (or that happened before it) is
 * visible to the acquire-load of a waiter that sees the new word. */
static inline uint64_t sig_update(_Atomic uint64_t *cell, pto_signal_op op, int32_t v,
                                  uint32_t epoch) {
  /* relaxed first read: only a guess for the CAS below */
  uint64_t old = atomic_load_explicit(cell, memory_order_relaxed);
  for (;;) {
    uint64_t nw = sig_next(old, op, v, epoch);
    if (!nw || nw == SIG_OVERFLOW) return nw;
    /* release pairs with the waiter's acquire load in signal_load */
    if (atomic_compare_exchange_weak_explicit(cell, &old, nw, memory_order_release,
                                              memory_order_relaxed))
      return nw;
  }
}

#endif
