/* run.c — the run's error latch: the first error of a run (run_fail,
 * run_fail_stall) is recorded once, then every thread of the run is told to
 * stop and woken (run_wake_all). Every chip file reports through it; it
 * depends on no other chip file. */
#include <stdarg.h>
#include <stdio.h>

#include "chip/run.h"

const char *run_kernel_name(const pto_run *r, const task *t) {
  return t->kernel >= 0 ? r->chip->kernels[t->kernel].name : "dummy";
}

void run_wake_all(pto_run *r) {
  for (int i = 0; i < r->ncores; i++)
    pto_event_signal(&r->cores[i].ev);
  for (int i = 0; i < r->nsched; i++)
    pto_event_signal(&r->scheds[i].ev);
  pto_event_signal(&r->orch_ev);
  pto_event_signal(&r->watchdog_ev);
}

static void run_latch(pto_run *r, int code, pto_stall_class stall, pto_task_id task_id, int core_id,
                      const char *fmt, va_list ap) {
  pthread_mutex_lock(&r->err_lock);
  if (atomic_load_explicit(&r->status, memory_order_relaxed) == 0) {
    r->err.code = code;
    r->err.stall = stall;
    r->err.task_id = task_id;
    r->err.core_id = core_id;
    if (task_id >= 0 && task_id < atomic_load_explicit(&r->submitted, memory_order_acquire)) {
      task *t = run_slot(r, task_id);
      if (t->id == task_id)
        snprintf(r->err.kernel, sizeof r->err.kernel, "%s", run_kernel_name(r, t));
    }
    vsnprintf(r->err.details, sizeof r->err.details, fmt, ap);
    /* release: the error record is complete before anyone sees the status */
    atomic_store_explicit(&r->status, code, memory_order_release);
  }
  pthread_mutex_unlock(&r->err_lock);
  atomic_store_explicit(&r->stop, 1, memory_order_release); /* pairs with run_stopping() */
  run_wake_all(r);
}

void run_fail(pto_run *r, int code, pto_task_id task_id, int core_id, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  run_latch(r, code, PTO_STALL_NONE, task_id, core_id, fmt, ap);
  va_end(ap);
}

void run_fail_stall(pto_run *r, pto_stall_class stall, pto_task_id task_id, int core_id,
                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  run_latch(r, PTO_ESCHED_TIMEOUT, stall, task_id, core_id, fmt, ap);
  va_end(ap);
}
