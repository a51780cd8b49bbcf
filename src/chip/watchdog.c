/* watchdog.c — turns any stall into PTO_ESCHED_TIMEOUT naming what is
 * stuck: a running task (and its core), ready work nobody dispatches, a
 * dependency deadlock, or an orchestrator that stopped submitting; and a
 * stall or a run's end that breaks pto's own bookkeeping into
 * PTO_EINTERNAL naming the breach. */
#include "chip/priority.h"
#include "chip/run.h"
#include "common/clock.h"

static bool queues_nonempty(pto_run *r, task **head) {
  for (int q = 0; q < SHAPE_COUNT; q++)
    for (int l = PTO_PRIORITY_MAX; l >= 0; l--) {
      /* lock-free shape queues (ready_queue.h), a level per priority
       * (priority.h): the task at the head, if published (a diagnostic
       * snapshot) */
      rq *lf = prio_queue(&r->queues[q], l);
      uint32_t idx;
      if (rq_pop_cell(lf, rq_pop_head(lf), &idx)) {
        *head = &r->slots[idx];
        return true;
      }
    }
  /* the orchestrator's gather (gather.h): ready, in no queue yet */
  if (gather_count(gather_load(&r->gather))) {
    *head = &r->slots[atomic_load_explicit(&r->gather.cell[0], memory_order_relaxed)];
    return true;
  }
  ready_queue *rq = &r->sync_queue;
  pto_spinlock_lock(&rq->lock);
  bool any = atomic_load_explicit(&rq->count, memory_order_relaxed) > 0;
  if (any) *head = rq->items[rq->head];
  pto_spinlock_unlock(&rq->lock);
  return any;
}

bool run_books_broken(pto_run *r, bool ended, uint64_t idle_ms) {
  char when[64] = "at the run's end";
  if (!ended)
    snprintf(when, sizeof when, "after %llu ms without progress", (unsigned long long)idle_ms);
  int64_t sub = atomic_load_explicit(&r->submitted, memory_order_acquire);
  int64_t done = atomic_load_explicit(&r->completed, memory_order_acquire);
  if (done > sub || (ended && done != sub)) {
    run_fail(r, PTO_EINTERNAL, PTO_TASK_NONE, -1,
             "%s: %lld task completions counted for %lld submitted tasks (a block ran that no "
             "task of this run dispatched, or a task completed twice)",
             when, (long long)done, (long long)sub);
    return true;
  }
  for (int ql = 0; ql < SHAPE_COUNT * PRIO_LEVELS; ql++) {
    int q = ql / PRIO_LEVELS;
    rq *lf = prio_queue(&r->queues[q], ql % PRIO_LEVELS);
    uint64_t h = rq_pop_head(lf), n = rq_size(lf);
    uint32_t idx;
    if (!n || (!ended && rq_pop_cell(lf, h, &idx))) continue;
    if (ended)
      run_fail(r, PTO_EINTERNAL, PTO_TASK_NONE, -1,
               "%s: the %s ready queue still holds %llu positions from %llu on, after every task "
               "completed",
               when, shape_name(q), (unsigned long long)n, (unsigned long long)h);
    else
      run_fail(r, PTO_EINTERNAL, PTO_TASK_NONE, -1,
               "%s: the %s ready queue's head, position %llu, was claimed by a push that never "
               "published it: no later ready task of that shape can be dispatched",
               when, shape_name(q), (unsigned long long)h);
    return true;
  }
  /* every task completed: nothing may be left gathered, nor a holder
   * counted (its hold ends before its core leaves the run) */
  if (ended) {
    uint64_t gw = gather_load(&r->gather);
    int32_t holders = atomic_load_explicit(&r->gather.holders, memory_order_relaxed);
    if (gather_count(gw) || holders) {
      run_fail(r, PTO_EINTERNAL, PTO_TASK_NONE, -1,
               "%s: the orchestrator's gather still holds %u tasks and %d holders after every "
               "task completed",
               when, gather_count(gw), (int)holders);
      return true;
    }
  }
  /* with no thread inside, nobody changes the COMMUTE table: every task
   * completed, so none may be left holding bytes or waiting for them */
  if (ended && cm_busy(&r->cm)) {
    run_fail(r, PTO_EINTERNAL, PTO_TASK_NONE, -1,
             "%s: the COMMUTE table still holds task slot %d after every task completed", when,
             (int)cm_first_held(&r->cm));
    return true;
  }
  return false;
}

static void report_stall(pto_run *r, uint64_t idle_ms) {
  if (run_books_broken(r, false, idle_ms)) return;
  /* 1. a block that runs and runs: every block running now started
   * before the stall (a start follows a dispatch, which is progress), so
   * the oldest task among them is named, running for idle_ms at least */
  int stuck = -1;
  pto_task_id id = PTO_TASK_NONE;
  for (int i = 0; i < r->ncores; i++) {
    pto_task_id t = atomic_load_explicit(&r->cores[i].cur_task, memory_order_relaxed);
    if (t != PTO_TASK_NONE && (stuck < 0 || t < id)) {
      id = t;
      stuck = i;
    }
  }
  if (stuck >= 0) {
    run_fail_stall(r, PTO_STALL_TASK_STUCK, id, stuck,
                   "no progress for %llu ms: task %lld has been running on core %d (cluster %d, "
                   "%s) all that time",
                   (unsigned long long)idle_ms, (long long)id, stuck, r->cores[stuck].cluster,
                   r->cores[stuck].type == PTO_CORE_AIC ? "AIC" : "AIV");
    return;
  }
  task *head = NULL;
  if (queues_nonempty(r, &head)) {
    run_fail_stall(r, PTO_STALL_NO_DISPATCH, head->id, -1,
                   "no progress for %llu ms: task %lld (%d blocks%s) is ready but no core takes it",
                   (unsigned long long)idle_ms, (long long)head->id, head->block_num,
                   head->sync_start ? ", sync_start" : "");
    return;
  }
  /* acquire pairs with submit's release: slots of ids below are filled */
  int64_t sub = atomic_load_explicit(&r->submitted, memory_order_acquire);
  int64_t done = atomic_load_explicit(&r->completed, memory_order_acquire);
  for (uint32_t i = 0; i < r->nasync; i++) {
    /* acquire pairs with pto_kctx_async_begin's CAS: the slot's task is live */
    if (!(atomic_load_explicit(&r->async[i].state, memory_order_acquire) & 1)) continue;
    task *t = atomic_load_explicit(&r->async[i].t, memory_order_relaxed);
    if (!t) continue;
    run_fail_stall(
        r, PTO_STALL_DEP_DEADLOCK, t->id, -1,
        "no progress for %llu ms: task %lld (%s) waits for an asynchronous completion "
        "(slot %u) that never came; %lld tasks are unfinished (its dependents wait on it)",
        (unsigned long long)idle_ms, (long long)t->id, run_kernel_name(r, t), i,
        (long long)(sub - done));
    return;
  }
  if (done < sub) {
    pto_task_id first = PTO_TASK_NONE;
    int64_t lo = sub - (int64_t)r->nslots + 1;
    for (int64_t id = lo < 0 ? 0 : lo; id < sub && first < 0; id++)
      if (task_state(r, run_slot(r, id), memory_order_acquire) == TASK_PENDING) first = id;
    run_fail_stall(r, PTO_STALL_DEP_DEADLOCK, first, -1,
                   "no progress for %llu ms: %lld tasks wait on dependencies that never complete "
                   "(oldest waiting: %lld)",
                   (unsigned long long)idle_ms, (long long)(sub - done), (long long)first);
    return;
  }
  if (!atomic_load_explicit(&r->orch_done, memory_order_acquire)) {
    run_fail_stall(r, PTO_STALL_ORCH_STARVED, PTO_TASK_NONE, -1,
                   "no progress for %llu ms: every task finished and the orchestrator submitted "
                   "nothing new and has not returned",
                   (unsigned long long)idle_ms);
  }
}

/* Progress is derived from the counters the run keeps anyway: any submit,
 * dispatch, block end, completion, drain step or async completion moves it. */
static uint64_t progress(pto_run *r) {
  uint64_t p = (uint64_t)atomic_load_explicit(&r->submitted, memory_order_relaxed) +
               (uint64_t)atomic_load_explicit(&r->completed, memory_order_relaxed) +
               atomic_load_explicit(&r->drain_gen, memory_order_relaxed) +
               atomic_load_explicit(&r->async_done, memory_order_relaxed) +
               (uint64_t)atomic_load_explicit(&r->orch_done, memory_order_relaxed);
  for (int i = 0; i < r->ncores; i++)
    p += atomic_load_explicit(&r->cores[i].dispatched, memory_order_relaxed) +
         atomic_load_explicit(&r->cores[i].finished, memory_order_relaxed);
  return p;
}

/* ---- the watchdog's thread: one per chip, across runs ----
 * Between runs it parks with no deadline (wd_idle set: the next run wakes
 * it). In a run it ticks every watchdog_ms / 8 (at most 100 ms); it is not
 * woken at a run's end, so back-to-back runs cost it nothing: its next tick
 * sees a new generation and starts a fresh window, or none and parks. It
 * reads a run's state only between wd_busy = 1 and 0, after checking that
 * its run is still in progress (seq_cst, against pto_chip_run's store of
 * the ended phase and wait for wd_busy == 0, Dekker), so the end of a run
 * never waits for a sleeping watchdog and the reset never races with it. */

typedef struct wd_wait {
  pto_run *r;
  uint64_t phase; /* the phase it watches, 0: none */
} wd_wait;

static bool wd_quit(pto_run *r) { return atomic_load_explicit(&r->quit, memory_order_acquire); }

/* A run is in progress that is not the one watched, or the chip goes. */
static bool wd_new_phase(void *p) {
  wd_wait *w = p;
  uint64_t ph = atomic_load_explicit(&w->r->phase, memory_order_seq_cst);
  return wd_quit(w->r) || ph != w->phase;
}

/* Enters the critical section if run `phase` is still in progress. */
static bool wd_begin(pto_run *r, uint64_t phase) {
  atomic_store_explicit(&r->wd_busy, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&r->phase, memory_order_seq_cst) == phase) return true;
  atomic_store_explicit(&r->wd_busy, 0, memory_order_seq_cst);
  pto_event_signal(&r->ended_ev);
  return false;
}

static void wd_end(pto_run *r) {
  atomic_store_explicit(&r->wd_busy, 0, memory_order_seq_cst); /* release: our reads are done */
  pto_event_signal(&r->ended_ev);
}

void *watchdog_main(void *arg) {
  pto_run *r = arg;
  uint64_t period = 0; /* a tick: watchdog_ms / 8, at most 100 ms, read per run */
  wd_wait w = {r, 0};
  uint64_t last = 0, last_ns = 0;
  int64_t last_sub = -1; /* submits at the last tick (spread.c) */
  while (!wd_quit(r)) {
    uint64_t ph = atomic_load_explicit(&r->phase, memory_order_seq_cst);
    if (!(ph & 1)) { /* between runs: park until the next one */
      w.phase = ph;
      atomic_store_explicit(&r->wd_idle, 1, memory_order_seq_cst);
      pto_wait_idle(&r->watchdog_ev, wd_new_phase, &w);
      atomic_store_explicit(&r->wd_idle, 0, memory_order_relaxed);
      continue;
    }
    if (ph != w.phase) { /* a run it has not watched: a fresh window */
      if (!wd_begin(r, ph)) continue;
      w.phase = ph;
      /* the config as this run started (read after its phase, like the
       * run's other state, so a white-box test may change it between runs);
       * watchdog_ms is at most PTO_DAY_MS (pto_chip_create): its
       * nanoseconds fit a uint64 */
      period = (uint64_t)r->cfg->watchdog_ms * 1000000ull / 8;
      if (period > 100000000ull) period = 100000000ull;
      last = progress(r);
      last_ns = pto_now_ns();
      last_sub = -1;
      wd_end(r);
    }
    pto_wait(&r->watchdog_ev, wd_new_phase, &w, pto_now_ns() + period);
    if (!wd_begin(r, w.phase)) continue; /* the run ended (or another began) */
    /* an orchestrator alone on its CPU that submitted nothing for a whole
     * tick is busy in its own code, or idle: the cores get its CPU back */
    int64_t sub = atomic_load_explicit(&r->submitted, memory_order_relaxed);
    if (atomic_load_explicit(&r->alone, memory_order_relaxed) == ALONE_YES && sub == last_sub)
      spread_orch_share(r);
    last_sub = sub;
    uint64_t p = progress(r), now = pto_now_ns();
    if (p != last) {
      last = p;
      last_ns = now;
    } else if (!run_stopping(r) && now - last_ns >= (uint64_t)r->cfg->watchdog_ms * 1000000ull) {
      report_stall(r, (now - last_ns) / 1000000ull);
    }
    wd_end(r);
  }
  return NULL;
}
