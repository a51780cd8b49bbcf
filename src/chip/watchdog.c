/* watchdog.c — turns any stall into PTO_ESCHED_TIMEOUT naming what is
 * stuck: a running task (and its core), ready work nobody dispatches, a
 * dependency deadlock, or an orchestrator that stopped submitting. */
#include "chip/run.h"
#include "common/clock.h"

static bool stopped(void *p) { return run_stopping((pto_run *)p); }

static bool queues_nonempty(pto_run *r, task **head) {
  for (int q = 0; q < SHAPE_COUNT; q++) {
    /* lock-free shape queues (ready_queue.h): the task at the head, if
     * published (a diagnostic snapshot) */
    rq *lf = &r->queues[q].lf;
    uint32_t idx;
    if (rq_pop_cell(lf, rq_pop_head(lf), &idx)) {
      *head = &r->slots[idx];
      return true;
    }
  }
  ready_queue *rq = &r->sync_queue;
  pthread_mutex_lock(&rq->lock);
  bool any = atomic_load_explicit(&rq->count, memory_order_relaxed) > 0;
  if (any) *head = rq->items[rq->head];
  pthread_mutex_unlock(&rq->lock);
  return any;
}

static void report_stall(pto_run *r, uint64_t idle_ms) {
  /* 1. a block that runs and runs */
  int stuck = -1;
  uint64_t oldest = UINT64_MAX;
  for (int i = 0; i < r->ncores; i++) {
    core *c = &r->cores[i];
    if (atomic_load_explicit(&c->cur_task, memory_order_relaxed) == PTO_TASK_NONE) continue;
    uint64_t s = atomic_load_explicit(&c->cur_start_ns, memory_order_relaxed);
    if (s < oldest) {
      oldest = s;
      stuck = i;
    }
  }
  if (stuck >= 0) {
    pto_task_id id = atomic_load_explicit(&r->cores[stuck].cur_task, memory_order_relaxed);
    run_fail_stall(
        r, PTO_STALL_TASK_STUCK, id, stuck,
        "no progress for %llu ms: task %lld has been running on core %d (cluster %d, %s) "
        "for %llu ms",
        (unsigned long long)idle_ms, (long long)id, stuck, r->cores[stuck].cluster,
        r->cores[stuck].type == PTO_CORE_AIC ? "AIC" : "AIV",
        (unsigned long long)((pto_now_ns() - oldest) / 1000000ull));
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
      if (atomic_load_explicit(&run_slot(r, id)->state, memory_order_acquire) == TASK_PENDING)
        first = id;
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

void *watchdog_main(void *arg) {
  pto_run *r = arg;
  uint64_t period = (uint64_t)r->cfg->watchdog_ms * 1000000ull / 8;
  if (period > 100000000ull) period = 100000000ull;
  uint64_t last = progress(r);
  uint64_t last_ns = pto_now_ns();
  while (!run_stopping(r)) {
    pto_wait(&r->watchdog_ev, stopped, r, pto_now_ns() + period);
    uint64_t p = progress(r);
    uint64_t now = pto_now_ns();
    if (p != last) {
      last = p;
      last_ns = now;
      continue;
    }
    if (!run_stopping(r) && now - last_ns >= (uint64_t)r->cfg->watchdog_ms * 1000000ull)
      report_stall(r, (now - last_ns) / 1000000ull);
  }
  return NULL;
}
