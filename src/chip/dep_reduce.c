/* dep_reduce.c — drops the dependencies of a task being submitted that
 * others of its dependencies already imply (run.h: dep_reduce).
 *
 * Why: the TensorMap orders a write after every live reader of its bytes.
 * A task that rewrites part of a buffer that whole-buffer readers read
 * takes an edge to each of them that is still live, although it also
 * waits for a task that itself waited for them. In bench's W4 (a
 * producer, 64 consumers of its output, each writing its own row of one
 * buffer, a reducer reading that buffer whole, the next producer
 * rewriting the first output), with the orchestrator ahead of the cores,
 * submit linked 13 edges a task on average (the producer 49 to 66, a
 * consumer one to each live reducer) where 2 carry the order. Each linked
 * edge costs the orchestrator a CAS on a line a core may be writing and
 * its producer's completion a locked decrement of the consumer's fanin
 * (docs/chip.md, locked instructions per task).
 *
 * Each task keeps `pre`: every task up to pre is its ancestor, or had
 * retired (completed) when it was submitted. Then, as the capture's
 * reduction does (graph_record.c), producer p of the new task is dropped
 * when
 *   1. p <= c(q) for another producer q, where c(q) = q if q->pre >= q - 1
 *      (every task before q is behind q) and q->pre otherwise; or
 *   2. p is a recorded dependency of another producer q (its nodes).
 * Either way the new task starts only after q completes, and q only after
 * p completed (or p had completed before q was submitted), so p's
 * completion, and its kernel's writes through the acq_rel chain of fanin
 * decrements, happen-before the new task as before, and the orders the
 * graph allows are the same. Only live tasks' slots and nodes are read:
 * every listed producer is at or after r->retired (collect_dep), and so
 * is every task up to a pre (pre >= retired - 1 at its submit).
 *
 * Rule 1 is also applied while the producers are listed (run.h,
 * dep_ordered): one reported after a listed q with p <= c(q) is not
 * listed, so its slot is not read or marked. Here it drops those reported
 * before the q that covers them.
 *
 * Cost: O(producers) for rule 1, plus at most REDUCE_LOOKS of the
 * producers' own nodes for rule 2 (a partial pass only drops fewer: each
 * drop is sound on its own). A chain's task (one producer) skips both. */
#include "chip/run.h"

#define REDUCE_LOOKS 64

/* dep_mark of a task implied by a producer of the task `self` being
 * submitted; never a task id, PTO_TASK_NONE, nor collect_dep's mark (self). */
static pto_task_id implied_mark(pto_task_id self) { return -2 - self; }

/* Rule 1: keeps the producers no other one covers; returns how many. */
static uint32_t drop_covered(pto_run *r, pto_task_id *preds, uint32_t n) {
  int64_t c1 = -1, c2 = -1; /* the two largest c(p), and whose the first is */
  pto_task_id who = -1;
  for (uint32_t i = 0; i < n; i++) {
    int64_t c = dep_covered(r, preds[i]);
    if (c > c1) {
      c2 = c1;
      c1 = c;
      who = preds[i];
    } else if (c > c2) {
      c2 = c;
    }
  }
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (preds[i] > (preds[i] == who ? c2 : c1)) preds[m++] = preds[i];
  return m;
}

/* Rule 2: marks the recorded producers of the producers (REDUCE_LOOKS of
 * them at most), then keeps the unmarked ones; returns how many. A
 * producer is marked only when it is at most another's dep_max: when no
 * producer's dep_max reaches the oldest producer, none is, and nothing is
 * read or marked (a stencil's producers, of one step, were linked to the
 * step before: no benchmark workload drops a producer by this rule, which
 * read their nodes and wrote a mark on each of their producers' slots,
 * lines the cores write when they complete them). */
static uint32_t drop_recorded(pto_run *r, pto_task_id implied, pto_task_id *preds, uint32_t n) {
  pto_task_id oldest = preds[0];
  for (uint32_t i = 1; i < n; i++)
    if (preds[i] < oldest) oldest = preds[i];
  bool reaches = false;
  for (uint32_t i = 0; i < n && !reaches; i++)
    reaches = run_slot(r, preds[i])->dep_max >= oldest;
  if (!reaches) return n;
  uint32_t looks = REDUCE_LOOKS;
  for (uint32_t i = 0; i < n && looks > 0; i++) {
    const task *q = run_slot(r, preds[i]);
    uint32_t k = q->ndeps < looks ? q->ndeps : looks;
    looks -= k;
    uint64_t node = (q->dep_end - k) % r->ndeps;
    for (; k > 0; k--, node = node + 1 == r->ndeps ? 0 : node + 1) {
      pto_task_id p = r->dep_from[node];
      if (p >= r->retired) run_slot(r, p)->dep_mark = implied;
    }
  }
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (run_slot(r, preds[i])->dep_mark != implied) preds[m++] = preds[i];
  return m;
}

uint32_t dep_reduce(pto_run *r, pto_task_id self, pto_task_id *preds, uint32_t n, int64_t cover,
                    int64_t *pre) {
  /* what the listed producers cover (the largest dep_covered: kept by
   * rule 1, and valid if rule 2 drops it, since it is then an ancestor of
   * another), or what had retired */
  int64_t c = cover > r->retired - 1 ? cover : r->retired - 1;
  /* No producer: nothing this submit marked, so the walk below would stop
   * at the first slot, the oldest live task's, which a core is likely
   * completing: not read at all (a line fewer from a core per independent
   * task) */
  if (n == 0) {
    *pre = c;
    return 0;
  }
  const pto_task_id implied = implied_mark(self);
  if (n >= 2) n = drop_covered(r, preds, n);
  if (n >= 2) n = drop_recorded(r, implied, preds, n);
  /* the new task's pre: what its producers cover, then the producers
   * (and the tasks marked behind them) that follow without a gap */
  while (c + 1 < self) {
    pto_task_id mark = run_slot(r, c + 1)->dep_mark;
    if (mark != self && mark != implied) break;
    c++;
  }
  *pre = c;
  return n;
}
