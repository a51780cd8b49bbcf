/* signal.h — the epoch-tagged signal cell. A cell is one 64-bit word:
 * high 32 bits = epoch (the node task that last wrote it), low 32 bits =
 * the value. A reader of epoch e sees value 0 in a cell tagged with any
 * other epoch, so credits left by an earlier call, an aborted task or an
 * earlier run can never satisfy a wait or be added to: reuse is safe by
 * construction, without host-side resets.
 *
 * The epoch is the node task's number in the order the node started the
 * tasks of its run: 1, 2, ... up to SIG_EPOCH_MAX, never reused within a
 * run. A cell lives no longer than its domain, which lives one run and
 * whose windows start zeroed, so every word a cell ever holds is 0 or of
 * an epoch of that run: epochs compare as plain numbers, a larger one
 * started later, and no two tasks of a cell's life share one (before, the
 * epoch was the node-lifetime task id modulo 2^32, compared by a
 * wrap-around difference: a cell idle for 2^31 tasks, or a zeroed one
 * after the node's 2^31st task, dropped every notify as a late signal,
 * and one left 2^32 tasks before read as current). A task the node
 * started after the run's SIG_EPOCH_MAXth has no epoch (SIG_EPOCH_NONE):
 * its signals, waits, reads, barriers and collectives fail before they
 * touch a word (comm_epoch_check), so no backend sees epoch 0, and no
 * written word is 0 (a zeroed window reads 0 everywhere). */
#ifndef PTO_COMM_SIGNAL_H
#define PTO_COMM_SIGNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pto/comm.h"

#define SIG_EPOCH_NONE 0u         /* a task started past the run's last epoch */
#define SIG_EPOCH_MAX  UINT32_MAX /* the last epoch of a node run */

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

/* The word op writes over `old` for a task of `epoch` (never
 * SIG_EPOCH_NONE), or 0 when the update is dropped: `old` is of a later
 * epoch (a late signal of a task that started before the one now using
 * the cell), or SIG_OVERFLOW when an add would overflow the value. */
static inline uint64_t sig_next(uint64_t old, pto_signal_op op, int32_t v, uint32_t epoch) {
  if (sig_epoch(old) > epoch) return 0; /* late signal */
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
