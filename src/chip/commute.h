/* commute.h — mutual exclusion of COMMUTE tasks (PTO_COMMUTE arguments).
 *
 * The TensorMap does not order two COMMUTE accesses to the same bytes
 * (tensormap.h), so such tasks may become ready together; this is what
 * keeps them from running at the same time. Exclusion is by bytes: a task
 * conflicts with another when a COMMUTE view of one overlaps a COMMUTE
 * view of the other (common/region.h), so commute tasks on disjoint bytes
 * of one buffer run concurrently.
 *
 * Protocol: a task with COMMUTE views acquires them when it becomes ready
 * (sched_make_ready), before it is queued, and releases them when it
 * completes (complete_task), before its consumers are released. Both are
 * one short critical section under one lock per run:
 *   acquire: no held task conflicts -> t is held (queued as usual);
 *            else t waits on the first held task it conflicts with
 *            (appended to that holder's waiters) and is not queued;
 *   release: t leaves the held set; each of its waiters, in list order,
 *            acquires (granted: queued by the releaser once the lock is
 *            dropped) or waits on the held task it now conflicts with.
 *            When the first waiter has exactly t's views (an
 *            accumulation into one tensor: the common case), it is
 *            granted and inherits the rest of t's waiters whole, in O(1):
 *            held tasks never share bytes, so none conflicts with it, and
 *            every waiter of t conflicts with t's bytes, so with it. (Each
 *            release retrying every waiter made a histogram of 10^5 adds
 *            into 64 bins cost 9.6 us per task, 2.6x its INOUT chains.)
 *            Likewise an acquire whose views are exactly those of a held
 *            task found by its span (cm_table.hint) waits on it at once;
 *            only an acquire that may succeed scans the held set.
 *   join (no lock; cm_ready tries it first): when the hint names a held
 *            task h with exactly t's views, t is pushed on h's inbox
 *            (cm_link.inbox, a lock-free stack) with one compare-and-swap
 *            that succeeds only while h is held. h's release closes the
 *            inbox (an exchange) under the lock first, and its tasks join
 *            h's waiters as they are, newest first, as waiters with h's
 *            views: a list spliced on by its two ends, none of its links
 *            read or written (lines the orchestrator wrote). So t
 *            waits on a held task without the lock, as if its acquire had
 *            found h by the hint; when the swap finds the inbox closed
 *            (h released), t acquires under the lock as above. In a
 *            histogram, where most adds find their bin held, the
 *            orchestrator then takes the lock only for a free bin.
 * It never deadlocks: a task holds all its bytes or none (no hold and
 * wait), no core or thread ever blocks on it (a task that cannot acquire
 * is parked in the table, not on a core), and a waiter always waits on a
 * held task, which runs (its blocks are queued) and releases. A lost
 * wake-up is impossible because deciding to wait and joining the holder's
 * waiters are one critical section, as are leaving the held set and
 * retrying the waiters; a join is one swap that sees the inbox open, and
 * the release's exchange that closes it takes every task pushed before.
 * tests/unit/test_commute_explorer.c explores
 * acquire and release (these very functions) over every interleaving of
 * 3 tasks and catches a split acquire (check, unlock, then wait).
 *
 * Starvation: a waiter is retried at every release of the holder it waits
 * on, before any later arrival can take the released bytes (same critical
 * section); it can still be overtaken when it overlaps two holders and a
 * newcomer takes the first one's bytes while it waits on the second. The
 * tasks that joined one holder go after its older waiters, newest first
 * among themselves (a few: those submitted while it held), and before any
 * task that joins a later holder.
 *
 * Lines per hand-over (the histogram's cost: each is a miss on a line
 * another core wrote): the holder's own link (its inbox's exchange), the
 * next holder's (written, and its successor read; fetched by the previous
 * hand-over, a prefetch) and the held-set entry and hint the next holder
 * takes over. What a release must know of the next holder's views is in
 * the holder's link (cm_link.wsame), not in the next holder's.
 *
 * The table is indexed by task slot (the lists hold slot indexes), and its
 * per-slot views are written by the orchestrator at submit, before the
 * task is published. */
#ifndef PTO_CHIP_COMMUTE_H
#define PTO_CHIP_COMMUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cacheline.h"
#include "common/region.h"

/* COMMUTE arguments one task may have (their normalised views travel in
 * the task's argument storage). */
#define PTO_MAX_COMMUTE_ARGS 4

typedef struct cm_link {
  /* the orchestrator's, written before the task is published */
  const region_view *views; /* its COMMUTE views, nviews of them */
  uint64_t lo, hi;          /* the bytes they span: the first test (cm_acquire, cm_release) */
  int32_t nviews;
  /* 1: one dense, well-formed view, so its bytes are exactly [lo, hi):
   * compared by the span alone (cm_views_same, cm_views_conflict), without
   * reading the views the orchestrator wrote (a miss under the lock) */
  int8_t exact;
  /* under the table's lock (held: its inbox is open, cm_link_held) */
  int8_t same; /* waiting: its views are known to be its holder's (then
                * every later holder of that list has them too: a list
                * passes on whole only to a waiter with the holder's views) */
  /* held: every task that waits on it has its views (each one's `same`),
   * kept here so that a release hands the bytes on without reading the
   * next holder's link first (a line written long before: a miss) */
  int8_t wsame;
  int8_t pad8;      /* zero: no implicit padding (the explorers compare links bytewise) */
  int32_t held_pos; /* its place in cm_table.held while held */
  int32_t wait_head, wait_tail; /* tasks waiting on this one, in order (starvation, above) */
  int32_t wait_next;            /* next in the list this task is on (waiters or granted) */
  int32_t pend_next;            /* next in the pending stack (cm_pend_push) */
  /* Tasks that joined this one lock-free (cm_join), newest first by
   * wait_next, the oldest's -1: CM_INBOX_CLOSED (not held: a join fails),
   * CM_INBOX_EMPTY (open and empty), 2 + t: t the newest. Opened by its
   * acquire, closed by its release, both under the lock; zero in a fresh
   * table, as every link is until it is first acquired. So it is open
   * exactly while the task is held (cm_link_held). */
  _Atomic int32_t inbox;
  /* The oldest of them: written by the join that finds the inbox empty,
   * before its swap (read only after a close that took a task, so never
   * while a failed join writes it) */
  int32_t inbox_first;
  int32_t pad; /* a link is one line (cm_init) */
} cm_link;

#define CM_INBOX_CLOSED 0
#define CM_INBOX_EMPTY  1

/* Whether l's task is in the held set: its inbox is open. Exact under the
 * table's lock (only the lock's holder opens or closes an inbox; a join
 * only pushes on an open one); without it, as cm_hinted reads it, a hint. */
static inline bool cm_link_held(const cm_link *l) {
  return atomic_load_explicit(&l->inbox, memory_order_relaxed) != CM_INBOX_CLOSED;
}

/* How two tasks' COMMUTE views compare: conflict (some bytes meet) and
 * same (exactly the same views: every task that conflicts with one
 * conflicts with the other). */
typedef struct cm_ops {
  bool (*conflict)(void *env, int32_t a, int32_t b);
  bool (*same)(void *env, int32_t a, int32_t b);
  void *env;
} cm_ops;

#define CM_HINTS 256 /* cm_table.hint entries (a power of two) */

/* A held task in the held set: its span beside it, so that an acquire's
 * scan reads one dense array instead of a line of each held task's link
 * (a histogram's free bin scanned 64 links on 64 lines, under the lock). */
typedef struct cm_held {
  uint64_t lo, hi; /* its link's span */
  int32_t slot;
  int32_t pad; /* zero */
} cm_held;

/* Its lock word, its pending head and the rest each start a line: the
 * orchestrator pushes while cores spin on the lock and its holder writes
 * the held set. */
typedef struct cm_table {
  /* cm_lock: the run's wrappers take it; the step functions below do not */
  PTO_LINE_ALIGNED atomic_int lock;
  /* Tasks ready but not yet acquired: a stack by pend_next, -1 empty
   * (cm_ready: a thread that finds the lock taken leaves its task here
   * for the holder) */
  PTO_LINE_ALIGNED _Atomic int32_t pending;
  PTO_LINE_ALIGNED cm_link *links; /* by task slot */
  uint32_t n;
  cm_held *held; /* the held set, dense, in no order: n entries of room */
  int32_t nheld;
  /* The last task held with a given span (by a hash of lo, hi), -1 none:
   * an acquire whose views are exactly a held task's waits on it without
   * scanning the held set (a stale or colliding entry only costs the
   * scan) */
  _Atomic int32_t hint[CM_HINTS]; /* written under the lock, read by cm_hinted */
} cm_table;

/* The table's lock (cm_lock, cm_trylock, cm_unlock). A spin lock that
 * yields: its critical sections are a few list operations, and a pthread
 * mutex put every contended unlock through a futex wake for a waiter that
 * would have had the lock a few hundred ns later. A waiter yields after a
 * short spin: with more pto threads than CPUs, the holder may be the one
 * preempted (the backoff of common/spinlock.h; not its lock, whose word is
 * acquire/release: this one's is seq_cst, see cm_trylock). Only a release
 * waits for it (cm_done); a task that becomes ready while it is taken is
 * left pending for the holder (cm_ready). */

/* The tasks that a cm_ready or cm_done granted, by wait_next (-1 ends):
 * the caller queues them, head first, once it holds no lock. */
typedef struct cm_grants {
  int32_t head, tail;
} cm_grants;

int cm_init(cm_table *c, uint32_t nslots);
void cm_destroy(cm_table *c);
/* No task held or waiting (a run's start, with no thread inside). */
void cm_reset(cm_table *c);

/* What the run calls (sched.c), outside any lock:
 *   cm_ready: t became ready. First, with `join`, if the hint names a
 *     held task with exactly t's views, t joins it lock-free (cm_hinted,
 *     cm_join). Only the thread that reuses task slots (the orchestrator)
 *     may join: for it, a hinted task's views stay fixed, and a held
 *     task, once released, is never held again (another thread could read
 *     a slot's views while a new task is written into it, and join that
 *     task when it is held in turn). Else, if the lock is free, t acquires
 *     under it
 *     (after the pending tasks, cm_drain); else t is pushed on the
 *     pending stack, for the holder. Then, while tasks are pending and the
 *     lock is free, the lock is taken and they acquire. A holder checks
 *     the stack after it unlocks, and a pusher tries the lock after its
 *     push, all four accesses seq_cst (Dekker: one of them sees the
 *     other), so a pushed task is always drained. The orchestrator, whose
 *     submits make COMMUTE tasks ready, thus never waits for a core's
 *     release (it spun for 11% of a histogram's time).
 *   cm_done: t completed. Under the lock, t releases (cm_release) and the
 *     pending tasks acquire; then the same check as cm_ready's.
 * Both append the tasks granted to g.
 * tests/unit/test_commute_defer_explorer.c explores them over every
 * interleaving of three tasks, and catches a holder that does not check
 * the stack after it unlocks. */
void cm_ready(cm_table *c, int32_t t, bool join, const cm_ops *ops, cm_grants *g);
void cm_done(cm_table *c, int32_t t, const cm_ops *ops, cm_grants *g);

/* Their steps (atomic ones in the explorer): */
/* No lock, on the orchestrator's thread only (cm_ready): the held task
 * that t may join, from the hint (one with exactly t's views, held when
 * its inbox was read), or -1. */
int32_t cm_hinted(cm_table *c, int32_t t, const cm_ops *ops);
/* No lock: t waits on h (pushed on its inbox) if h is still held: true;
 * false when h's inbox is closed (then t must acquire under the lock). */
bool cm_join(cm_table *c, int32_t h, int32_t t);
void cm_lock(cm_table *c);
bool cm_trylock(cm_table *c);
void cm_unlock(cm_table *c);
void cm_pend_push(cm_table *c, int32_t t);
/* Whether no task is pending. */
bool cm_pend_none(cm_table *c);
/* Under the lock: the pending tasks, oldest first, acquire; the granted
 * ones are appended to g. */
void cm_drain(cm_table *c, const cm_ops *ops, cm_grants *g);
/* g with t appended (its wait_next set to -1). */
void cm_grant(cm_table *c, cm_grants *g, int32_t t);

/* The step functions, called with the lock held (the explorer drives them
 * as atomic steps). Acquire: true when t is now held; false when it waits
 * on a holder (it will be granted by that holder's release). */
bool cm_acquire(cm_table *c, int32_t t, const cm_ops *ops);
/* Release of held t: the tasks it grants are appended to g, in order,
 * which the caller queues after dropping the lock. */
void cm_release(cm_table *c, int32_t t, const cm_ops *ops, cm_grants *g);
/* Whether held, waiting or pending tasks remain (a successful run ends
 * with none). */
bool cm_busy(const cm_table *c);
/* A held task's slot (for a message), -1 none. */
int32_t cm_first_held(const cm_table *c);

/* The real comparisons, by the tasks' normalised views (env: the table):
 * any view of a overlaps any view of b; a's views are b's, field by
 * field. */
bool cm_views_conflict(void *env, int32_t a, int32_t b);
bool cm_views_same(void *env, int32_t a, int32_t b);

/* Sets l's views (the orchestrator's part) from tensors whose bit is set
 * in mask: views[] (room for one per bit) gets them normalised (copied
 * from pre[i] when the caller has them already, else normalised here);
 * lo and hi their span. At submit (pre: its validation's views), and at a
 * launch of a captured graph for its rebased views (pre NULL). */
void cm_link_views(cm_link *l, region_view *views, const pto_tensor *tensors,
                   const region_view *pre, int nt, uint32_t mask);

#endif
