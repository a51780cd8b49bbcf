/* node_proc.c — the node's children as processes: forking them (before
 * any thread starts), reaping them, telling how one ended, the deadlines
 * and heartbeats a child must keep while the parent waits for it, posting
 * a frame to a child's mailbox, and the cleanup that kills every child and
 * unlinks every object of the run when one dies or hangs (node_fatal). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/options.h"
#include "common/thread_start.h"
#include "node/node_internal.h"
#include "node/node_mpi.h"
#include "node/run_guard.h"

/* ---- children ---- */

bool node_reap(pto_node *n) {
  bool died = false;
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->alive) continue;
    if (c->kind != SLOT_PROCESS) {
      /* acquire pairs with the release that set `ended` after wstatus */
      if (!atomic_load_explicit(&c->ended, memory_order_acquire)) continue;
      if (c->kind == SLOT_THREAD) pthread_join(c->thread, NULL);
      c->alive = false;
      died = true;
      continue;
    }
    int st;
    pid_t got = waitpid(c->pid, &st, WNOHANG);
    if (got == c->pid) {
      c->alive = false;
      c->wstatus = st;
      died = true;
    } else if (got < 0 && errno == ECHILD) {
      /* no such child: the kernel reaped it, its status with it (this
       * process ignores SIGCHLD, or set SA_NOCLDWAIT). Before, it was
       * never seen to end: a dead chip was called stopped or frozen once
       * its heartbeat ran out (control_timeout_ms), and every destroy
       * waited that long for exits it could not see. */
      c->alive = false;
      c->status_unknown = true;
      died = true;
    }
  }
  return died;
}

/* A waitpid per child process is a system call each: called on every
 * step of the progress loop and every spin of the parent's wait, it made
 * a node task's cost grow with the chips it does not use (a chain of
 * one-block node tasks on chip 0: 158 us a task with 1 chip, 1128 us with
 * 16, bench/node_chips_bench.c). Deaths are looked for at most this often;
 * a death is still seen within the period, or at the parent's next wake,
 * whichever is later (its wait re-checks every BLOCK_SLICE_MS). */
#define REAP_PERIOD_NS 200000ull

bool node_reap_due(pto_node *n) {
  uint64_t now = pto_now_ns();
  if (now - n->reaped_ns < REAP_PERIOD_NS) return false;
  n->reaped_ns = now;
  return node_reap(n);
}

static void describe_exit(const pto_node *n, int s, char *buf, size_t len) {
  const child_slot *c = &n->child[s];
  int st = c->wstatus;
  char how[320];
  /* the child's own words, when it failed to start (child.c) */
  node_mbox *mb = c->kind == SLOT_RANK ? NULL : &n->ctl->mbox[s];
  if (mb && !WIFSIGNALED(st) && mbox_state(mb) == CHILD_FAILED && mb->start_why[0])
    snprintf(how, sizeof how, "failed to start: %s", mb->start_why);
  else if (c->status_unknown && c->kind == SLOT_PROCESS) /* reaped by the kernel (node_reap) */
    snprintf(how, sizeof how,
             "exited: its process is gone, and its exit status with it (this process ignores "
             "SIGCHLD or set SA_NOCLDWAIT, so the kernel reaped it)");
  else if (c->status_unknown) /* a rank's process, gone without a word (proc_watch.h) */
    snprintf(how, sizeof how,
             "exited: its process is gone without a word to rank 0 (_exit or a signal); its "
             "exit status is known to mpirun only");
  else if (WIFSIGNALED(st))
    snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(st),
             strsignal(WTERMSIG(st)));
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
    snprintf(how, sizeof how, "failed to start (chip creation or chip_init failed)");
  else
    snprintf(how, sizeof how, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  if (c->kind == SLOT_RANK)
    snprintf(buf, len, "chip rank %d (%.70s, device %d, pid %d) %.160s%s%.200s", s, c->where,
             n->device_ids[s], (int)c->pid, how, c->why[0] ? ": " : "", c->why);
  else if (s < n->cfg.nchips)
    snprintf(buf, len, "chip rank %d (device %d, pid %d) %s", s, n->device_ids[s], (int)c->pid,
             how);
  else
    snprintf(buf, len, "host worker %d (pid %d) %s", s - n->cfg.nchips, (int)c->pid, how);
}

static bool no_thread_left(void *arg) {
  pto_node *n = arg;
  node_reap(n); /* joins the threads that ended */
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].alive && n->child[s].kind == SLOT_THREAD) return false;
  return true;
}

/* Stops every child that is a thread of this process (under mpirun: chip 0
 * and the host workers of rank 0) and joins it. This comes before any
 * window is unmapped: chip 0's kernels may be waiting on one (in the same
 * address range as the observer's view, on rank 0). A stopped chip's waits
 * end at once (comm_stopping; the observer's view of its windows wakes the
 * parked ones), and its kernels that compute see pto_kctx_cancelled true:
 * the stop is also written into its cancel word as a cancel of the frame
 * it runs (COMM_CANCEL_STOP), the word its chip run reads (child.c,
 * chip_set_node_cancel), so the first of them that sees it fails the run.
 * Before, such a kernel ran to its end, and the failed node waited for it
 * (FAILED_STOP_MS under mpirun, then went on with chip 0 still running).
 * The run fails and the thread leaves; a host worker leaves after its
 * callback. Returns false when one is still running at the control
 * deadline (counted from the first stop): a kernel or callback that never
 * returns keeps the windows mapped. A failed node under mpirun waits
 * FAILED_STOP_MS at most (below). */
#define FAILED_STOP_MS 2000 /* stop_threads' wait in a failed node under mpirun */

static bool stop_threads(pto_node *n) {
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->alive || c->kind != SLOT_THREAD) continue;
    node_mbox *mb = &n->ctl->mbox[s];
    /* release pairs with the acquire loads in serve() and comm_stopping */
    atomic_store_explicit(&mb->stop, 1, memory_order_release);
    /* the frame it runs (0: none; a chip between frames leaves at serve's
     * look at stop): a word that names it touches no other frame */
    if (s < n->cfg.nchips && c->gen) mbox_cancel(mb, c->gen, COMM_CANCEL_STOP);
    pto_event_signal(&mb->to_child);
    if (s < n->cfg.nchips) comm_wake(&n->observer, s);
    if (!n->stop_deadline_ns) {
      int64_t ms = n->cfg.control_timeout_ms >= 0 ? n->cfg.control_timeout_ms
                                                  : pto_option(PTO_OPT_SHUTDOWN_MS);
      /* A failed node under mpirun ends the job at its destroy
       * (node_mpi_stop) and unmaps no window a thread left running may
       * use: waiting longer buys nothing. A stop ends a chip's waits at
       * once, but not an MPI call with a dead rank (osc/rdma's
       * compare-and-swap to it spins for ever): the failed run waited
       * control_timeout_ms (30 s) for that thread. */
      if (n->mpi && n->fatal && ms > FAILED_STOP_MS) ms = FAILED_STOP_MS;
      n->stop_deadline_ns = pto_deadline_ms(ms);
    }
  }
  while (!no_thread_left(n) && pto_now_ns() < n->stop_deadline_ns)
    pto_wait(&n->ctl->parent_ev, no_thread_left, n, n->stop_deadline_ns);
  return no_thread_left(n);
}

/* Kills every child, unlinks every object of the run; the node stays failed.
 * Children that are threads are stopped and joined first (stop_threads);
 * MPI ranks cannot be killed one by one: node_mpi_stop ends the job when
 * any is left. */
void node_kill_all(pto_node *n) {
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].alive && n->child[s].kind == SLOT_PROCESS) kill(n->child[s].pid, SIGKILL);
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->alive || c->kind != SLOT_PROCESS) continue;
    while (waitpid(c->pid, &c->wstatus, 0) < 0 && errno == EINTR) {
    }
    c->alive = false;
  }
  bool joined = stop_threads(n);
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    if (!n->dom_live[i]) continue;
    comm_shm_unlink(&n->doms[i], -1);
    /* a thread still running may still use the mapping: it stays (the
     * job then ends with MPI_Abort, node_mpi_stop) */
    if (joined) comm_domain_close(&n->observer, n->doms[i].id, false);
    n->dom_live[i] = false;
  }
  n->space_used = 0;
}

int node_fatal(pto_node *n, int code, const char *fmt, ...) {
  if (n->fatal) return n->fatal;
  n->fatal = code;
  va_list ap;
  va_start(ap, fmt);
  node_set_verr(&n->fatal_err, code, fmt, ap);
  va_end(ap);
  node_kill_all(n);
  if (!n->cfg.quiet)
    fprintf(stderr, "pto node: %s: %s\n", pto_status_name(code), n->fatal_err.details);
  return code;
}

int node_first_err(pto_node *n, int code, const char *fmt, ...) {
  if (n->fatal || n->first_err) return code;
  n->first_err = code;
  va_list ap;
  va_start(ap, fmt);
  node_set_verr(&n->first_info, code, fmt, ap);
  va_end(ap);
  return code;
}

/* A dead child fails the node (PTO_ECHIP_DIED, naming it). */
int node_check_deaths(pto_node *n) {
  node_reap_due(n); /* the wait condition may have reaped already: look at `alive` */
  for (int s = 0; s < n->nchildren; s++)
    if (!n->child[s].alive) {
      char d[sizeof n->fatal_err.details];
      describe_exit(n, s, d, sizeof d);
      return node_fatal(n, PTO_ECHIP_DIED, "%s", d);
    }
  return 0;
}

/* "(pid P)", or for a chip on another MPI rank "(MPI rank c on host h, pid P)". */
static const char *who(const pto_node *n, int s, char *buf, size_t len) {
  const child_slot *c = &n->child[s];
  if (c->kind == SLOT_RANK)
    snprintf(buf, len, "(%s, pid %d)", c->where, (int)c->pid);
  else
    snprintf(buf, len, "(pid %d)", (int)c->pid);
  return buf;
}

/* While the parent waits for child s (an outstanding frame): its heartbeat
 * must move, a control frame be answered and a task finished within their
 * deadlines; a miss fails the node (PTO_ECONTROL_TIMEOUT, naming it). */
int node_check_deadlines(pto_node *n, int s, uint64_t now) {
  child_slot *c = &n->child[s];
  char w[128];
  /* relaxed: a liveness counter, nothing is published through it */
  uint32_t beat = atomic_load_explicit(&n->ctl->mbox[s].beat, memory_order_relaxed);
  if (beat != c->beat_seen) {
    c->beat_seen = beat;
    c->beat_ns = now;
  }
  /* Both deadlines below are control_timeout_ms, from the last beat and
   * from the frame's post: a child whose heartbeat stopped as well (for
   * several periods) is stopped or frozen, whichever deadline ran out
   * first, and is named so; one that beats but does not answer is slow. */
  uint64_t silent_ms = (now - c->beat_ns) / 1000000u;
  uint64_t age_ms = (now - c->posted_ns) / 1000000u;
  bool taken = mbox_taken(&n->ctl->mbox[s], c->gen);
  bool unanswered = (!taken || c->task < 0) && age_ms > (uint64_t)n->cfg.control_timeout_ms;
  if (n->cfg.control_timeout_ms >= 0 && (silent_ms > (uint64_t)n->cfg.control_timeout_ms ||
                                         (unanswered && silent_ms > 5u * (uint64_t)HEARTBEAT_MS)))
    return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                      "%s %d %s stopped responding: no heartbeat for %" PRIu64
                      " ms (process stopped or frozen)",
                      slot_kind(n, s), slot_index(n, s), who(n, s, w, sizeof w), silent_ms);
  if (unanswered && n->cfg.control_timeout_ms >= 0)
    return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                      "%s %d %s did not answer a control "
                      "message within %" PRId64 " ms",
                      slot_kind(n, s), slot_index(n, s), who(n, s, w, sizeof w),
                      n->cfg.control_timeout_ms);
  if (c->task >= 0 && n->cfg.task_timeout_ms >= 0 && age_ms > (uint64_t)n->cfg.task_timeout_ms)
    return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                      "%s %d %s did not finish node task %" PRId64 " within %" PRId64 " ms",
                      slot_kind(n, s), slot_index(n, s), who(n, s, w, sizeof w), c->task,
                      n->cfg.task_timeout_ms);
  /* a host callback has no watchdog of its own: it gets a deadline by default */
  if (c->task >= 0 && s >= n->cfg.nchips && n->cfg.host_task_timeout_ms >= 0 &&
      age_ms > (uint64_t)n->cfg.host_task_timeout_ms)
    return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                      "host worker %d (pid %d) did not finish node task %" PRId64 " within %" PRId64
                      " ms (host_task_timeout_ms)",
                      slot_index(n, s), (int)c->pid, c->task, n->cfg.host_task_timeout_ms);
  return 0;
}

/* ---- frames ---- */

void node_post(pto_node *n, int s, node_frame *f, int64_t task) {
  child_slot *c = &n->child[s];
  c->gen = mbox_post(&n->ctl->mbox[s], f);
  c->task = task;
  c->posted_ns = pto_now_ns();
  c->beat_seen = atomic_load_explicit(&n->ctl->mbox[s].beat, memory_order_relaxed);
  c->beat_ns = c->posted_ns;
  c->replied = false;
  if (c->kind == SLOT_RANK) node_mpi_posted(n, s);
}

/* ---- fork ---- */

/* Forks every child (the parent must not have started threads). On a
 * failed fork the node is failed (node_fatal) and the rest not started. */
void node_fork_children(pto_node *n) {
  fflush(NULL); /* children must not flush the parent's buffered output */
  for (int s = 0; s < n->nchildren; s++) {
    pid_t pid = fork();
    if (pid == 0) node_child_main(n, s);
    if (pid < 0) {
      node_fatal(n, PTO_ESYSTEM, "fork of %s %d failed: %s", slot_kind(n, s), slot_index(n, s),
                 strerror(errno));
      break;
    }
    n->child[s] = (child_slot){.pid = pid, .alive = true, .task = -1};
    run_guard_child(n->prefix, pid);
  }
}

/* ---- threads (under mpirun, on rank 0) ---- */

typedef struct thread_arg {
  pto_node *n;
  int slot;
} thread_arg;

static void *child_thread(void *arg) {
  thread_arg a = *(thread_arg *)arg;
  free(arg);
  child_slot *c = &a.n->child[a.slot];
  int status = node_child_serve(a.n, a.slot, false);
  c->wstatus = (status & 0xff) << 8; /* as an exit status */
  /* release pairs with node_reap's acquire: wstatus is set */
  atomic_store_explicit(&c->ended, true, memory_order_release);
  pto_event_signal(&a.n->ctl->parent_ev);
  return NULL;
}

/* Runs child s as a thread of this process (chip 0 and the host workers of
 * rank 0 under mpirun, where the parent does not fork). */
int node_start_thread(pto_node *n, int s, char *why, size_t len) {
  child_slot *c = &n->child[s];
  *c = (child_slot){.pid = getpid(), .alive = true, .kind = SLOT_THREAD, .task = -1};
  thread_arg *a = malloc(sizeof *a);
  if (!a) {
    snprintf(why, len, "cannot start the thread of %s %d: out of memory", slot_kind(n, s),
             slot_index(n, s));
    return PTO_ENOMEM;
  }
  *a = (thread_arg){n, s};
  if (thread_start(&c->thread, child_thread, a, why, len, "the thread of %s %d", slot_kind(n, s),
                   slot_index(n, s)) != 0) {
    free(a);
    c->alive = false;
    return PTO_ESYSTEM;
  }
  return 0;
}
