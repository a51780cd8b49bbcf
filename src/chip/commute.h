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
 *   release: t leaves the held set; each of its waiters, oldest first,
 *            acquires (granted: queued by the releaser once the lock is
 *            dropped) or waits on the held task it now conflicts with.
 *            When the oldest waiter has exactly t's views (an
 *            accumulation into one tensor: the common case), it is
 *            granted and inherits the rest of t's waiters whole, in O(1):
 *            held tasks never share bytes, so none conflicts with it, and
 *            every waiter of t conflicts with t's bytes, so with it. (Each
 *            release retrying every waiter made a histogram of 10^5 adds
 *            into 64 bins cost 9.6 us per task, 2.6x its INOUT chains.)
 *            Likewise an acquire whose views are exactly those of a held
 *            task found by its span (cm_table.hint) waits on it at once;
 *            only an acquire that may succeed scans the held set.
 * It never deadlocks: a task holds all its bytes or none (no hold and
 * wait), no core or thread ever blocks on it (a task that cannot acquire
 * is parked in the table, not on a core), and a waiter always waits on a
 * held task, which runs (its blocks are queued) and releases. A lost
 * wake-up is impossible because deciding to wait and joining the holder's
 * waiters are one critical section, as are leaving the held set and
 * retrying the waiters. tests/unit/test_commute_explorer.c explores
 * acquire and release (these very functions) over every interleaving of
 * 3 tasks and catches a split acquire (check, unlock, then wait).
 *
 * Starvation: a waiter is retried at every release of the holder it waits
 * on, before any later arrival can take the released bytes (same critical
 * section); it can still be overtaken when it overlaps two holders and a
 * newcomer takes the first one's bytes while it waits on the second.
 *
 * The table is indexed by task slot (the lists hold slot indexes), and its
 * per-slot views are written by the orchestrator at submit, before the
 * task is published. */
#ifndef PTO_CHIP_COMMUTE_H
#define PTO_CHIP_COMMUTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/region.h"

/* COMMUTE arguments one task may have (their normalised views travel in
 * the task's argument storage). */
#define PTO_MAX_COMMUTE_ARGS 4

typedef struct cm_link {
  /* the orchestrator's, written before the task is published */
  const region_view *views; /* its COMMUTE views, nviews of them */
  uint64_t lo, hi;          /* the bytes they span: the first test (cm_acquire, cm_release) */
  int32_t nviews;
  /* under the table's lock */
  int32_t held_prev, held_next; /* the held set, a doubly linked list */
  int32_t wait_head, wait_tail; /* tasks waiting on this one, oldest first */
  int32_t wait_next;            /* next in the list this task is on (waiters or granted) */
  int32_t held;                 /* 1 while in the held set */
} cm_link;

/* How two tasks' COMMUTE views compare: conflict (some bytes meet) and
 * same (exactly the same views: every task that conflicts with one
 * conflicts with the other). */
typedef struct cm_ops {
  bool (*conflict)(void *env, int32_t a, int32_t b);
  bool (*same)(void *env, int32_t a, int32_t b);
  void *env;
} cm_ops;

#define CM_HINTS 256 /* cm_table.hint entries (a power of two) */

typedef struct cm_table {
  pthread_mutex_t lock; /* the run's wrappers take it; the step functions below do not */
  cm_link *links;       /* by task slot */
  uint32_t n;
  int32_t held_head; /* -1: none */
  /* The last task held with a given span (by a hash of lo, hi), -1 none:
   * an acquire whose views are exactly a held task's waits on it without
   * scanning the held set (a stale or colliding entry only costs the
   * scan) */
  int32_t hint[CM_HINTS];
} cm_table;

int cm_init(cm_table *c, uint32_t nslots);
void cm_destroy(cm_table *c);
/* No task held or waiting (a run's start, with no thread inside). */
void cm_reset(cm_table *c);

/* Sets l's views (the caller's storage, one per bit of mask) to the
 * normalised COMMUTE views ts[i], i in mask, with their span: a submit
 * (orch.c) and a graph launch (graph.c), before the task is published. */
void cm_set_views(cm_link *l, region_view *views, const pto_tensor *ts, int nt, uint32_t mask);

/* The step functions, called with the lock held (the explorer drives them
 * as atomic steps). Acquire: true when t is now held; false when it waits
 * on a holder (it will be granted by that holder's release). */
bool cm_acquire(cm_table *c, int32_t t, const cm_ops *ops);
/* Release of held t: returns the first task granted (the rest follow by
 * wait_next, -1 ends), which the caller queues after dropping the lock. */
int32_t cm_release(cm_table *c, int32_t t, const cm_ops *ops);
/* Whether held or waiting tasks remain (a successful run ends with none). */
bool cm_busy(const cm_table *c);

/* The real comparisons, by the tasks' normalised views (env: the table):
 * any view of a overlaps any view of b; a's views are b's, byte for byte
 * (the orchestrator zeroes them before it fills them in). */
bool cm_views_conflict(void *env, int32_t a, int32_t b);
bool cm_views_same(void *env, int32_t a, int32_t b);

#endif
