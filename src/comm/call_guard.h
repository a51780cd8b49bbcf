/* call_guard.h — a thread stuck inside a call that never returns ends the
 * job, from a watchdog thread.
 *
 * A deadline bounds a wait only while the waiting thread gets control
 * back. Inside MPI it may not: Open MPI 4.1's TCP transport, closing the
 * connection of a peer that died during a large message, takes an
 * endpoint's lock it already holds (mca_btl_tcp_frag_send ->
 * mca_btl_tcp_endpoint_close -> ... -> mca_btl_tcp_endpoint_send), and
 * the call that progressed it (MPI_Testall) never returns. A guard covers
 * such a call: its thread arms it with the most the call may take (its
 * deadline, its grace and a margin) and disarms it on the way out; a
 * guard seen armed, by the same arming, for longer than that is fired by
 * the watchdog thread (its fire function ends the job, naming the call).
 *
 * Arming reads no clock: it counts the guard's generation up (odd: armed)
 * after storing the allowance. The watchdog looks at every guard each
 * CALL_GUARD_TICK_MS and times an arming from when it first saw it, so a
 * guard fires after its allowance at the earliest, and at most a tick
 * later. One thread arms a guard at a time (the caller orders them: one
 * collective at a time per window buffer, one holder of a window's lock).
 *
 * The watchdog runs while some guard is watched: started by the first
 * call_guard_watch, it ends after the last call_guard_unwatch. A fork's
 * child watches nothing (its parent's threads are not there). */
#ifndef PTO_COMM_CALL_GUARD_H
#define PTO_COMM_CALL_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#define CALL_GUARD_TICK_MS 100

typedef struct call_guard call_guard;
/* From the watchdog thread, with the registry's lock held: the guarded
 * thread was inside for stuck_ms (the allowance passed). It should not
 * return; if it does, the guard fires again after another allowance. */
typedef void (*call_guard_fire)(call_guard *g, double stuck_ms);

struct call_guard {
  _Atomic uint64_t gen;       /* odd while armed; the arming thread's */
  _Atomic int64_t allow_ms;   /* the current arming's allowance */
  call_guard_fire fire;       /* set by call_guard_watch */
  void *arg;                  /* the watcher's own, for fire */
  uint64_t seen_gen, seen_ns; /* the watchdog's: the arming it saw, since when */
  call_guard *next;           /* the registry's, under its lock */
};

/* Watches g (zeroed by the caller, arg set) until call_guard_unwatch:
 * 0, or PTO_ESYSTEM when the watchdog thread could not be started. */
int call_guard_watch(call_guard *g, call_guard_fire fire);
void call_guard_unwatch(call_guard *g);

/* Until call_guard_disarm, the thread may stay at most allow_ms. */
static inline void call_guard_arm(call_guard *g, int64_t allow_ms) {
  atomic_store_explicit(&g->allow_ms, allow_ms, memory_order_relaxed);
  uint64_t v = atomic_load_explicit(&g->gen, memory_order_relaxed);
  atomic_store_explicit(&g->gen, v | 1, memory_order_release);
}
static inline void call_guard_disarm(call_guard *g) {
  uint64_t v = atomic_load_explicit(&g->gen, memory_order_relaxed);
  if (v & 1) atomic_store_explicit(&g->gen, v + 1, memory_order_release);
}

#endif
