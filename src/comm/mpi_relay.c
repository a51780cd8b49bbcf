/* mpi_relay.c — the relay thread of the MPI backend's collectives
 * (PTO_MPI_COLL_RELAY=1): one thread per process makes every MPI call of
 * the collectives; a kernel thread posts a job (mpi_job: what to issue)
 * and waits for it with pto_wait (spin, yield, park on an event).
 *
 * A job's state: POSTED (pushed on the stack) -> ISSUING (the relay runs
 * issue) -> ISSUED (its requests are tested) -> DONE (the poster's again).
 * A poster whose deadline passes or whose run is cancelled moves POSTED or
 * ISSUED to ABANDONED: the relay then owns the job, never issues it (from
 * POSTED), or tests it to its end (MPI cannot withdraw it), and frees it.
 * The relay stops at MPI_Finalize (a delete callback of an attribute on
 * MPI_COMM_SELF, which MPI calls first thing there), leaving abandoned
 * jobs behind. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "comm/mpi_relay.h"
#include "common/clock.h"
#include "common/options.h"
#include "common/wait.h"

enum { POSTED, ISSUING, ISSUED, DONE, ABANDONED };

static struct {
  pthread_mutex_t mu; /* starting and stopping */
  bool started, failed;
  pthread_t th;
  _Atomic(mpi_job *) posted; /* a stack: pushed by posters, taken whole */
  _Atomic bool stop;
  pto_event post_ev; /* the relay parks here */
  pto_event done_ev; /* posters park here */
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

bool mpi_relay_on(void) { return pto_option_cached(PTO_OPT_MPI_COLL_RELAY) != 0; }

static bool has_work(void *arg) {
  (void)arg;
  return atomic_load(&R.posted) || atomic_load(&R.stop);
}

/* The new jobs, oldest first; each issued (or freed when abandoned). */
static mpi_job *take(mpi_job *active, bool *progress) {
  mpi_job *j = atomic_exchange(&R.posted, NULL), *fifo = NULL;
  while (j) {
    mpi_job *next = j->next;
    j->next = fifo;
    fifo = j;
    j = next;
  }
  while (fifo) {
    j = fifo;
    fifo = fifo->next;
    int s = POSTED;
    if (!atomic_compare_exchange_strong(&j->state, &s, ISSUING)) {
      free(j); /* abandoned before it was issued */
      continue;
    }
    *progress = true;
    j->nreq = 0;
    j->err = j->issue(j->arg, j->req, &j->nreq);
    if (j->err != MPI_SUCCESS) {
      /* the requests already issued stay in flight: the issuer marked
       * its buffer broken */
      atomic_store(&j->state, DONE);
      pto_event_signal(&R.done_ev);
      continue;
    }
    atomic_store(&j->state, ISSUED);
    j->next = active;
    active = j;
  }
  return active;
}

/* Tests every active job once; the completed ones leave the list. */
static mpi_job *test(mpi_job *active, bool *progress) {
  mpi_job **at = &active;
  bool done = false;
  while (*at) {
    mpi_job *j = *at;
    int flag = 0;
    j->err = MPI_Testall(j->nreq, j->req, &flag, MPI_STATUSES_IGNORE);
    if (!flag && j->err == MPI_SUCCESS) {
      at = &j->next;
      continue;
    }
    *at = j->next;
    *progress = true;
    int s = ISSUED;
    if (atomic_compare_exchange_strong(&j->state, &s, DONE))
      done = true;
    else
      free(j); /* abandoned */
  }
  if (done) pto_event_signal(&R.done_ev);
  return active;
}

static void *relay_main(void *arg) {
  (void)arg;
  pto_wait_thread_begin();
  mpi_job *active = NULL;
  uint64_t slice = (uint64_t)pto_option_cached(PTO_OPT_SPIN_NS), idle_since = pto_now_ns();
  while (!atomic_load(&R.stop)) {
    bool progress = false;
    active = take(active, &progress);
    active = test(active, &progress);
    if (!active && !atomic_load(&R.posted)) {
      pto_wait_idle(&R.post_ev, has_work, NULL);
      idle_since = pto_now_ns();
    } else if (progress) {
      idle_since = pto_now_ns();
    } else if (pto_now_ns() - idle_since > slice) {
      /* as the kernel's own poll (mpi_coll.c): the peers are other
       * processes, which may need this CPU */
      sched_yield();
      idle_since = pto_now_ns();
    } else {
      pto_cpu_relax();
    }
  }
  pto_wait_thread_end();
  return NULL;
}

static int stop_at_finalize(MPI_Comm comm, int key, void *val, void *extra) {
  (void)comm, (void)key, (void)val, (void)extra;
  pthread_mutex_lock(&R.mu);
  if (R.started) {
    atomic_store(&R.stop, true);
    pto_event_signal(&R.post_ev);
    pthread_join(R.th, NULL);
    R.started = false;
  }
  pthread_mutex_unlock(&R.mu);
  return MPI_SUCCESS;
}

static bool relay_start(void) {
  pthread_mutex_lock(&R.mu);
  if (!R.started && !R.failed) {
    pto_event_init(&R.post_ev, false);
    pto_event_init(&R.done_ev, false);
    int key;
    R.failed = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_at_finalize, &key, NULL) !=
                   MPI_SUCCESS ||
               MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL) != MPI_SUCCESS ||
               pthread_create(&R.th, NULL, relay_main, NULL) != 0;
    R.started = !R.failed;
  }
  bool ok = R.started;
  pthread_mutex_unlock(&R.mu);
  return ok;
}

typedef struct poster {
  mpi_job *j;
  comm_cancel_fn cancel;
  void *arg;
  bool cancelled;
} poster;

static bool job_done(void *arg) {
  poster *p = arg;
  if (atomic_load(&p->j->state) == DONE) return true;
  p->cancelled = p->cancel && p->cancel(p->arg);
  return p->cancelled;
}

bool mpi_relay_run(mpi_job *j, uint64_t deadline_ns, comm_cancel_fn cancel, void *cancel_arg,
                   bool *cancelled) {
  *cancelled = false;
  if (!relay_start()) {
    j->err = MPI_ERR_INTERN;
    return true;
  }
  atomic_store(&j->state, POSTED);
  j->next = atomic_load(&R.posted);
  while (!atomic_compare_exchange_weak(&R.posted, &j->next, j)) {
  }
  pto_event_signal(&R.post_ev);
  poster p = {j, cancel, cancel_arg, false};
  for (;;) {
    if (pto_wait(&R.done_ev, job_done, &p, deadline_ns) && !p.cancelled) return true;
    /* give the job to the relay, unless it completed meanwhile; wait out
     * an issue in progress (the issue reads the caller's arguments) */
    int s = atomic_load(&j->state);
    if (s == DONE) return true;
    if (s != ISSUING && atomic_compare_exchange_strong(&j->state, &s, ABANDONED)) {
      *cancelled = p.cancelled;
      return false;
    }
    deadline_ns = 0; /* the state changed under us: look again */
    sched_yield();
  }
}
