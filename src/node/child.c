/* child.c — the life of a child process: a chip (its own chip runtime and
 * communication context, created after fork so its threads start in the
 * child) or a host sub-worker. It reports ready, then takes frames from its
 * mailbox until told to exit or its parent is gone. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "chip/kernel_why.h"
#include "chip/node_hooks.h"
#include "chip/trace_hooks.h"
#include "comm/delivery.h"
#include "common/clock.h"
#include "common/last_error.h"
#include "common/thread_start.h"
#include "node/lease.h"
#include "node/node_internal.h"

#define CHILD_POLL_MS 500 /* how often an idle child checks its parent is alive */

/* Chips created by node children in this process (see node_internal.h). */
static _Atomic uint64_t chip_generation;

uint64_t node_chip_generation(void) {
  return atomic_load_explicit(&chip_generation, memory_order_acquire);
}

typedef struct beat_ctx {
  node_mbox *mb;
  _Atomic bool stop;
} beat_ctx;

static bool stopping(void *arg) {
  /* relaxed: a stop request, nothing is published through it */
  return atomic_load_explicit(&((beat_ctx *)arg)->stop, memory_order_relaxed);
}

/* Runs for the life of the child: while this process is scheduled at all,
 * the parent sees its heartbeat move (a stopped or frozen process stops it). */
static void *heartbeat_main(void *arg) {
  beat_ctx *b = arg;
  while (!stopping(b)) {
    atomic_fetch_add_explicit(&b->mb->beat, 1, memory_order_relaxed); /* a liveness counter */
    pto_wait(NULL, stopping, b, pto_deadline_ms(HEARTBEAT_MS)); /* sleeps: no event to wait on */
  }
  return NULL;
}

typedef struct take_wait {
  node_mbox *mb;
  uint32_t last;
} take_wait;

static bool frame_posted(void *arg) {
  take_wait *t = arg;
  /* relaxed: mbox_take re-reads with acquire; the stop is re-read with acquire */
  return atomic_load_explicit(&t->mb->posted, memory_order_relaxed) != t->last ||
         atomic_load_explicit(&t->mb->stop, memory_order_relaxed);
}

/* A failed run wakes its kernels' window waits (node_hooks.h). */
static void wake_waits(void *comm) { comm_wake_mine(comm); }

/* Why the chip's run stopped at the node's cancel of its task (node_hooks.h). */
static const char *cancel_why(void *comm, char *buf, size_t n) {
  return comm_stop_why(comm, buf, n);
}

/* Checking mode (docs/contracts.md, "Node runs"): the node task's
 * arguments bound its remote stores (comm/window_check.c), and the views it
 * lets any rank write are left to the other ranks' checks by this chip's
 * (chip_set_node_task); on = false clears both. */
static void check_task_args(pto_chip *chip, pto_comm *comm, const pto_args *a, bool on) {
  pto_tensor shared[PTO_MAX_TENSOR_ARGS];
  int ns = 0;
  for (int i = 0; on && i < a->ntensors; i++)
    if (a->access[i] != PTO_INPUT) shared[ns++] = a->tensors[i];
  comm->check_args = on ? a : NULL;
  chip_set_node_task(chip, on, shared, ns);
}

static void run_chip_task(pto_node *n, int slot, pto_chip *chip, pto_comm *comm,
                          const node_frame *f, node_reply *r) {
  if (n->trace_path) {
    /* The rank is the trace's process; time zero is the node run's. Each
     * chip task writes a file of its own (the parent concatenates them). */
    char name[32], path[PATH_MAX];
    snprintf(name, sizeof name, "rank %d (device %d)", slot, n->device_ids[slot]);
    chip_set_trace_process(chip, slot, name, f->trace_origin_ns);
    chip_set_trace_task_base(chip, f->trace_run ? chip_trace_task_end(chip) : 0); /* final ids */
    r->status = node_rank_trace_path(n, slot, f->trace_run, path, sizeof path)
                    ? pto_chip_set_trace(chip, path)
                    : PTO_EINVAL; /* cannot happen: checked at create with the largest run */
    if (r->status) {
      r->err.code = r->status;
      snprintf(r->err.details, sizeof r->err.details, "cannot set the chip's trace file");
      return;
    }
  }
  /* a controlled node schedule: this task's chip schedule and delivery
   * order, recorded or replayed in files of their own */
  char rec[PATH_MAX], rep[PATH_MAX], rec_land[PATH_MAX + 8], rep_land[PATH_MAX + 8], why[400];
  uint64_t seed = 0;
  bool ctl = node_sched_chip_task(n, f, slot, &seed, rec, rep, sizeof rec);
  snprintf(rec_land, sizeof rec_land, "%s.land", rec);
  snprintf(rep_land, sizeof rep_land, "%s.land", rep);
  r->status = chip_set_schedule(chip, ctl ? seed : 0, rec[0] ? rec : NULL, rep[0] ? rep : NULL);
  if (!r->status)
    r->status = delivery_begin(rec[0] ? rec_land : NULL, rep[0] ? rep_land : NULL, why, sizeof why);
  if (r->status) {
    r->err.code = r->status;
    snprintf(r->err.details, sizeof r->err.details, "%s",
             r->status == PTO_ENOMEM ? "controlled schedule: out of memory" : why);
    return;
  }
  comm->task_gen = f->gen; /* a cancel of this frame ends its waits */
  /* ... and turns pto_kctx_cancelled true in its kernels, stopping its run */
  chip_set_node_cancel(chip, comm->cancel, f->gen, cancel_why, comm);
  comm_task_begin(comm, f->epoch, f->group);
  pto_node_task t = {&f->args, slot, f->group_rank, f->group_size, comm, f->task_id};
  pto_run_stats st;
  memset(&st, 0, sizeof st);
  if (n->cfg.chip.check) check_task_args(chip, comm, &f->args, true);
  r->status = pto_chip_run(chip, f->chip_fn, &t, &st, &r->err);
  if (n->cfg.chip.check) check_task_args(chip, comm, &f->args, false);
  r->tasks = st.tasks;
  r->blocks = st.blocks;
  r->host_us = st.host_us;
  r->device_us = st.device_us;
  /* a failed run's one-way broadcasts are not checked at the end: its
   * peers are being cancelled, and the error to report is the run's */
  if (r->status) comm_coll_unchecked_drop(comm);
  int end = comm_task_end(comm);
  int dend = delivery_end(why, sizeof why);
  char details[384];
  int cerr = comm_task_error(comm, details, sizeof details);
  if (r->status == 0 && end) r->status = end;
  if (r->status == 0 && dend) {
    r->status = r->err.code = dend;
    snprintf(r->err.details, sizeof r->err.details, "%s", why);
  }
  if (r->status == 0 && cerr) r->status = cerr; /* an op failed but the kernel ignored it */
  if (r->status) {
    r->err.code = r->status;
    if (cerr) { /* the comm details say what the chip's details cannot: whole, first (the
                   node's prefix leaves 440 bytes), then the chip's (the kernel, its block) */
      char chip_details[sizeof r->err.details];
      snprintf(chip_details, sizeof chip_details, "%s", r->err.details);
      snprintf(r->err.details, sizeof r->err.details, "%s%s%.*s", details,
               chip_details[0] ? "; " : "", (int)(440 - 2 - strlen(details)), chip_details);
      r->secondary = comm_task_error_secondary(comm);
    } else if (r->status == PTO_ESHUTDOWN && comm_stopping(comm)) {
      /* the run stopped at the node's cancel (pto_kctx_cancelled): it
       * follows the error that made the node cancel the task */
      r->secondary = true;
    }
  }
}

/* A domain control frame (open, attach) with the comm layer's details of
 * its failure in the reply (the backend's why: an MPI error, say). */
static void dom_control(pto_comm *c, const node_frame *f, node_reply *r) {
  pthread_mutex_lock(&c->err_lock);
  c->err_code = 0; /* between tasks: an earlier task's error is reported */
  c->err_details[0] = 0;
  pthread_mutex_unlock(&c->err_lock);
  r->status = f->type == FRAME_DOM_OPEN ? comm_domain_open(c, &f->dom, f->dom_rank)
                                        : comm_domain_attach(c, f->dom.id);
  if (!r->status) return;
  r->err.code = r->status;
  pthread_mutex_lock(&c->err_lock);
  snprintf(r->err.details, sizeof r->err.details, "%s", c->err_details);
  pthread_mutex_unlock(&c->err_lock);
}

/* How serve() ended: FRAME_EXIT (its reply is sent once the chip is gone),
 * the parent process gone (a forked child), or stopped by the parent (a
 * thread of the parent's process: mb->stop). */
typedef enum serve_end { SERVE_EXIT, SERVE_ORPHANED, SERVE_STOPPED } serve_end;

/* The reason a host function gave with pto_host_fail, for the task this
 * thread runs: cleared before each host task, read when it failed. */
static _Thread_local struct {
  bool set;
  char text[320];
} host_why;

int pto_host_fail(const pto_args *args, int code, const char *fmt, ...) {
  /* it fails the task whatever the code: 0 (or more) would be success */
  if (code >= 0) code = PTO_EKERNEL;
  if (!args || !fmt) return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(host_why.text, sizeof host_why.text, fmt, ap);
  va_end(ap);
  host_why.set = true;
  return code;
}

/* Takes frames until one of serve_end; *exit_reply is FRAME_EXIT's reply. */
static serve_end serve(pto_node *n, int slot, pto_chip *chip, pto_comm *comm, node_frame *f,
                       bool orphan_check, node_reply *exit_reply) {
  node_mbox *mb = &n->ctl->mbox[slot];
  pto_event *parent_ev = &n->ctl->parent_ev;
  bool is_chip = chip != NULL;
  uint32_t last = 0;
  for (;;) {
    take_wait tw = {mb, last};
    bool woken = pto_wait(&mb->to_child, frame_posted, &tw, pto_deadline_ms(CHILD_POLL_MS));
    /* acquire pairs with the release store of stop_threads (node_proc.c) */
    if (atomic_load_explicit(&mb->stop, memory_order_acquire)) return SERVE_STOPPED;
    if (!woken) {
      if (orphan_check && getppid() != n->parent_pid) return SERVE_ORPHANED;
      continue;
    }
    if (!mbox_take(mb, last, f)) continue;
    last = f->gen;
    node_reply r;
    memset(&r, 0, sizeof r);
    r.gen = f->gen;
    r.err.task_id = PTO_TASK_NONE;
    r.err.core_id = -1;
    switch ((frame_type)f->type) {
    case FRAME_TASK:
      if (is_chip) {
        run_chip_task(n, slot, chip, comm, f, &r);
      } else {
        /* checking mode: run twice, the second time on flipped memory */
        host_why.set = false;
        int hrc =
            f->read_check ? node_check_host_run(n, f, &r.err) : f->host_fn(&f->args, f->host_arg);
        /* a code of the callback's own (a C `return 1`, a negative that
         * is no pto status) is PTO_EKERNEL, as a kernel's: the run returns
         * a PTO_E* code, never the callback's positive one */
        r.status = hrc ? kernel_fail_code(hrc) : 0;
        r.err.code = r.status;
        if (hrc && !r.err.details[0])
          snprintf(r.err.details, sizeof r.err.details, "host task returned %d%s%s", hrc,
                   host_why.set      ? ": "
                   : r.status != hrc ? " (not a pto status: a failure of the task's own)"
                                     : "",
                   host_why.set ? host_why.text : "");
        host_why.set = false;
      }
      break;
    case FRAME_DOM_OPEN:
    case FRAME_DOM_ATTACH: dom_control(comm, f, &r); break;
    case FRAME_DOM_CLOSE: comm_domain_close(comm, f->dom.id, true); break;
    case FRAME_EXIT: *exit_reply = r; return SERVE_EXIT;
    }
    mbox_reply(mb, &r, parent_ev);
  }
}

void node_child_main(pto_node *n, int slot) {
  /* die with the parent: a crashed node must not leave chips behind */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* Ctrl-C from a terminal reaches the whole process group: the parent
   * decides (its handler cancels the run, pto_node_cancel, or its default
   * action kills the children and itself: run_guard.c). Before, a child
   * ran the handler it was forked with: a Python parent's recorded the
   * signal and raised KeyboardInterrupt in the next Python host function
   * of a sub-worker, failing the node's next run; an application's might
   * end the child (the node then failed with a dead chip). */
  signal(SIGINT, SIG_IGN);
  if (getppid() != n->parent_pid) _exit(1);
  /* the leases belong to the parent: close our copies, never unlock them
   * (the lock is shared with the parent's descriptor) */
  lease_close_inherited(n->lease_fds, n->cfg.nchips);
  _exit(node_child_serve(n, slot, true));
}

int node_child_serve(pto_node *n, int slot, bool orphan_check) {
  node_mbox *mb = &n->ctl->mbox[slot];
  pto_event *parent_ev = &n->ctl->parent_ev;
  beat_ctx beat = {mb, false};
  pthread_t hb; /* threads start only after the fork, as every child thread does */
  char hwhy[200];
  if (thread_start(&hb, heartbeat_main, &beat, hwhy, sizeof hwhy, "its heartbeat thread") != 0) {
    mbox_set_failed(mb, parent_ev, "%s", hwhy);
    return 2;
  }
  bool is_chip = slot < n->cfg.nchips;
  pto_comm comm;
  comm_init(&comm, is_chip ? slot : -1);
  comm.stop = &mb->stop;     /* its kernels' waits end when the parent stops this child */
  comm.cancel = &mb->cancel; /* ... or cancels its task */
  pto_chip *chip = NULL;
  int status = 0;
  node_frame *f = malloc(sizeof *f);
  /* why it failed to start: the parent names it (mbox_set_failed) */
  char why[sizeof mb->start_why] = "";
  if (!f) {
    status = 3;
    snprintf(why, sizeof why, "out of memory");
  }
  if (!status && is_chip) {
    pto_chip_config cfg = n->cfg.chip;
    cfg.env = &comm;
    pto_error_info cerr;
    if (pto_chip_create_ex(&cfg, &chip, &cerr) != 0) {
      snprintf(why, sizeof why, "pto_chip_create: %s: %.200s", pto_status_name(cerr.code),
               cerr.details);
    } else {
      /* the ranks' cores spread over the CPUs, each rank after the lower ones */
      int per = cfg.clusters * (cfg.aic_per_cluster + cfg.aiv_per_cluster);
      chip_set_cpu_first(chip, slot * per);
      chip_keep_queue_order(chip);
      chip_set_fail_wake(chip, wake_waits, &comm);
      /* release pairs with node_chip_generation: before chip_init runs */
      atomic_fetch_add_explicit(&chip_generation, 1, memory_order_release);
    }
    if (chip && n->cfg.chip_init) {
      /* a refusal inside chip_init (a registration) says why here; the
       * text this thread had before (a forked parent's) is not its */
      last_error_set(0, "%s", "");
      int irc = n->cfg.chip_init(chip, slot, n->cfg.chip_init_arg);
      if (irc != 0) {
        char code[48] = ""; /* the name of a pto status */
        if (strcmp(pto_status_name(irc), "PTO_E?") != 0)
          snprintf(code, sizeof code, " (%s)", pto_status_name(irc));
        const char *last = pto_last_error();
        snprintf(why, sizeof why, "chip_init returned %d%s%s%s", irc, code, last[0] ? ": " : "",
                 last);
      }
    }
    if (why[0]) status = 2;
  }
  node_reply exit_reply;
  serve_end end = SERVE_STOPPED;
  if (status) {
    mbox_set_failed(mb, parent_ev, "%s", why);
  } else {
    mbox_set_state(mb, CHILD_READY, parent_ev);
    end = serve(n, slot, chip, &comm, f, orphan_check, &exit_reply);
    if (end == SERVE_ORPHANED) return 0; /* a forked child: _exit follows */
  }
  if (chip) pto_chip_destroy(chip);
  comm_fini(&comm, true);
  free(f);
  node_check_host_end(); /* a host worker's copies of checking mode */
  if (end == SERVE_EXIT) mbox_reply(mb, &exit_reply, parent_ev); /* the chip is gone */
  /* relaxed: the join below orders the heartbeat's last access */
  atomic_store_explicit(&beat.stop, true, memory_order_relaxed);
  pthread_join(hb, NULL);
  return status;
}
