/* run.c — the run's error latch: the first error of a run (run_fail,
 * run_fail_stall) is recorded once, then every thread of the run is told to
 * stop and woken (run_wake_all). Every chip file reports through it; it
 * depends on no other chip file. Also the two steps by which a chip thread
 * takes part in a run (run_enter, run_leave; chip.c runs the other side). */
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
  bool first = atomic_load_explicit(&r->status, memory_order_relaxed) == 0;
  if (first) {
    r->err.code = code;
    r->err.stall = stall;
    r->err.task_id = task_id;
    r->err.core_id = core_id;
    r->err.arg = -1; /* PTO_ECONTRACT sets it after (contract.c) */
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
  /* the kernels' waits outside the chip (a node chip's window waits) */
  if (first && r->chip->fail_wake) r->chip->fail_wake(r->chip->fail_wake_arg);
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

/* ---- a chip thread's part in a run ----
 * The chip's threads outlive runs. pto_chip_run resets the run state, then
 * publishes phase = gen << 1 | 1; at the end it stores stop, then phase =
 * gen << 1, then waits for every thread whose `entered` is gen to leave.
 * A thread enters only once the run has work for it (a core: a block was
 * dispatched to it; its waker signals its event), so a run wakes only the
 * threads it uses. It enters with a store of `entered` and a re-read of `phase`
 * (both seq_cst, against the end's store of phase and read of entered,
 * Dekker): either the end sees it inside and waits for it, or it sees the
 * run over and backs off. So no thread touches a run's state once the run
 * has ended, and the next run's reset never races with a straggler. */

typedef struct enter_wait {
  pto_run *r;
  uint64_t last;
  run_want_fn want;
  void *arg;
} enter_wait;

/* A run is in progress that the thread has not served and that has work
 * for it, or the chip goes. Reading phase first (acquire), then the work:
 * the work's counters were reset before the phase was published. */
static bool run_to_enter(void *p) {
  enter_wait *w = p;
  if (atomic_load_explicit(&w->r->quit, memory_order_acquire)) return true;
  uint64_t ph = atomic_load_explicit(&w->r->phase, memory_order_acquire);
  return (ph & 1) && run_phase_gen(ph) != w->last && w->want(w->arg);
}

bool run_enter(pto_run *r, pto_event *ev, _Atomic uint64_t *entered, uint64_t *last_gen,
               run_want_fn want, void *arg) {
  for (;;) {
    enter_wait w = {r, *last_gen, want, arg};
    pto_wait_idle(ev, run_to_enter, &w); /* parked between runs: no CPU */
    if (atomic_load_explicit(&r->quit, memory_order_acquire)) return false;
    uint64_t ph = atomic_load_explicit(&r->phase, memory_order_seq_cst);
    if (!(ph & 1) || run_phase_gen(ph) == *last_gen || !want(arg)) continue;
    uint64_t gen = run_phase_gen(ph);
    *last_gen = gen;
    atomic_store_explicit(entered, gen, memory_order_seq_cst);
    /* acquire (seq_cst): the reset of the run's state happens-before */
    if (atomic_load_explicit(&r->phase, memory_order_seq_cst) == ph) return true;
    /* the run ended meanwhile, without us: nothing of it was touched */
    atomic_store_explicit(entered, 0, memory_order_seq_cst);
    pto_event_signal(&r->ended_ev);
  }
}

void run_leave(pto_run *r, _Atomic uint64_t *entered) {
  /* release: this thread's last touch of the run happens-before the reset */
  atomic_store_explicit(entered, 0, memory_order_seq_cst);
  pto_event_signal(&r->ended_ev);
}
