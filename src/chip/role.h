/* role.h — "scheduling is a role, not a thread": the hand-off that lets
 * whichever pto thread is free (a core that finished a block, the
 * orchestrator that made a task ready, an async completer) run a
 * scheduler's pass, one thread at a time, without a lock anyone waits on.
 *
 * Each scheduler has one role word pair. Whoever has work for the
 * scheduler publishes it first (a core's `finished`, a ready-queue push,
 * a drain word), then requests a pass and tries to take the role:
 *
 *   role_request(r);                       // after publishing the work
 *   while (role_try_enter(r)) {            // else the holder serves it
 *                                          // (or, first: role_enter_first)
 *     uint32_t seen;
 *     do { seen = role_snapshot(r); did = pass(); }
 *     while (did || role_more(r, seen));
 *     if (!role_leave(r, seen)) break;     // re-check after leaving
 *   }
 *
 * Nobody blocks: a thread that finds the role taken leaves its request
 * behind, and the holder either sees it before leaving (role_more) or after
 * (role_leave's re-check, Dekker over seq_cst: the requester's increment
 * and exchange against the holder's release and load), in which case it
 * takes the role again unless the requester took it itself. Every request
 * is thus followed by a pass that starts after it. The steps are plain
 * functions so tests/unit/test_role_explorer.c drives them over every
 * interleaving of 2-3 threads, with a broken variant (a leave without the
 * re-check) that loses a request. */
#ifndef PTO_CHIP_ROLE_H
#define PTO_CHIP_ROLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct role {
  _Atomic uint32_t req;   /* requests so far (wraps) */
  _Atomic uint32_t held;  /* 1 while a thread runs the role's passes */
  _Atomic int32_t puller; /* 1 + the idle core that serves requests, 0: none */
} role;

/* Also the reset between runs (chip.c run_reset): free, no puller, no
 * request. A run's end leaves the role free and no puller named (a holder
 * leaves and a puller ends before its thread leaves the run); the reset
 * does not rely on it: a role left held or a puller left named loses
 * every request of the next run (test_role_explorer, test_pull_explorer:
 * run N ending at every step, then run N+1). */
static inline void role_init(role *r) {
  atomic_init(&r->req, 0);
  atomic_init(&r->held, 0);
  atomic_init(&r->puller, 0);
}

/* Step 1, after publishing the work the pass must see. seq_cst: ordered
 * before the try_enter below against the holder's leave and re-check. */
static inline void role_request(role *r) {
  atomic_fetch_add_explicit(&r->req, 1, memory_order_seq_cst);
}

/* Step 2, one atomic operation each: the role looks free (a cheap peek;
 * seq_cst: read after our request in the one order of seq_cst operations,
 * so a holder seen here re-checks after it), then the exchange that takes
 * it (acquire: the previous holder's passes happen-before ours). */
static inline bool role_peek_free(role *r) {
  return atomic_load_explicit(&r->held, memory_order_seq_cst) == 0;
}
static inline bool role_exchange(role *r) {
  return atomic_exchange_explicit(&r->held, 1, memory_order_seq_cst) == 0;
}
/* True when the caller now holds the role. */
static inline bool role_try_enter(role *r) { return role_peek_free(r) && role_exchange(r); }

/* Steps 1 and 2 for a requester that would run the pass itself (a core
 * whose block ended): it tries to enter first, and requests only when
 * that fails. A holder it becomes needs no request (its own pass starts
 * after the work it published); after a failed entry the request and
 * try_enter above follow as for any requester, so the holder it met
 * either sees the request before leaving or re-checks after. One locked
 * instruction less per pass when the role is free (the request's), one
 * more only when the peek saw it free and the exchange lost. */
static inline bool role_enter_first(role *r) {
  if (role_try_enter(r)) return true;
  role_request(r);
  return role_try_enter(r);
}

/* Step 3 (holder): the requests the next pass serves (acquire: pairs with
 * role_request, so the pass sees the work published before each). */
static inline uint32_t role_snapshot(role *r) {
  return atomic_load_explicit(&r->req, memory_order_seq_cst);
}

/* Step 4 (holder, after a pass): did requests arrive since `seen`? */
static inline bool role_more(role *r, uint32_t seen) {
  return atomic_load_explicit(&r->req, memory_order_seq_cst) != seen;
}

/* Step 5, two atomic operations: release the role, then re-check; true
 * when a request may have arrived that no holder serves: the caller must
 * try to enter again. */
static inline void role_release(role *r) {
  atomic_store_explicit(&r->held, 0, memory_order_seq_cst);
}
static inline bool role_recheck(role *r, uint32_t seen) { return role_more(r, seen); }
static inline bool role_leave(role *r, uint32_t seen) {
  role_release(r);
  return role_recheck(r, seen);
}

/* ---- an idle core pulls ----
 *
 * A requester that is not one of the scheduler's cores (the orchestrator
 * that made a task ready), or a core that pushed tasks and keeps a
 * successor to run next (sched.c, handoff_announce), need not run the
 * pass itself when an idle core of the scheduler stands in as its puller:
 * it requests, and leaves the pass to the puller, which is waiting for
 * work anyway (spinning, or yielding when every CPU is taken).
 *
 *   requester:  role_request(r);                   // after the push
 *               if (role_puller(r) < 0) run as above   // else left to it
 *               (no signal: a puller polls the requests and never parks
 *               while it is the puller, core.c)
 *   puller:     seen = role_snapshot(r);
 *               if (!role_pull_begin(r, me)) -> not the puller, plain wait
 *               if (anything queued) serve(&seen);     // requests before seen
 *               while waiting: if (role_more(r, seen)) serve(&seen);
 *               role_pull_end(r);
 *               if (role_more(r, seen)) serve(&seen);  // the re-check
 *   serve(&seen): seen = role_snapshot(r); run the role loop above (no new
 *               request: the holder, if any, serves the pending ones)
 *
 * Dekker over seq_cst again: a requester that saw the puller requested
 * before reading it, so before the puller's role_pull_end, whose re-check
 * then sees the request; one that read no puller runs the pass itself. A
 * request before the puller's first snapshot is not lost either: that
 * snapshot reads it (seq_cst), so the push before it is visible and the
 * queue check after role_pull_begin finds it. test_role_explorer.c
 * explores it, with a broken variant (an end without the re-check). */
static inline bool role_pull_begin(role *r, int core_id) {
  int32_t none = 0;
  return atomic_compare_exchange_strong_explicit(&r->puller, &none, core_id + 1,
                                                 memory_order_seq_cst, memory_order_relaxed);
}
static inline void role_pull_end(role *r) {
  atomic_store_explicit(&r->puller, 0, memory_order_seq_cst);
}
/* The puller's core id, or -1. */
static inline int role_puller(role *r) {
  return atomic_load_explicit(&r->puller, memory_order_seq_cst) - 1;
}

#endif
