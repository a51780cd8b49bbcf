/* node_internal.h — private state of a node: its children, the control
 * block shared with them, node tasks and the live domains of a run. The
 * parent side is single-threaded (it forks, so it must not run threads). */
#ifndef PTO_NODE_INTERNAL_H
#define PTO_NODE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "chip/tensormap.h"
#include "comm/comm.h"
#include "common/last_error.h"
#include "node/mailbox.h"
#include "node/node_schedule.h"
#include "pto/node.h"

#define NODE_MAX_CHILDREN (PTO_NODE_MAX_CHIPS + PTO_NODE_MAX_WORKERS)

typedef struct node_ctl {
  pto_event parent_ev; /* signalled by every child reply/state change */
  /* node host memory's bytes handed out (pto_node_host_alloc): one count
   * for every process and thread of the node, a forked worker's host task
   * and a thread of rank 0's as the orchestrator's */
  _Atomic uint64_t host_used;
  node_mbox mbox[]; /* chips first, then host workers */
} node_ctl;

typedef enum task_kind { TASK_CHIP = 0, TASK_HOST = 1 } task_kind;
typedef enum task_state {
  TS_WAITING = 0, /* dependencies outstanding */
  TS_READY,
  TS_RUNNING,
  TS_DONE,
  TS_FAILED, /* ran and failed, or poisoned */
} task_state;

typedef struct node_task {
  int64_t id;
  task_kind kind;
  int nchildren;
  int children[PTO_NODE_MAX_CHIPS]; /* child slots (chips, or one worker; -1 = any worker) */
  pto_orch_fn chip_fn;
  pto_host_fn host_fn;
  void *host_arg;
  pto_args args;
  task_state state;
  int deps_left;
  int64_t *consumers;
  int nconsumers, capconsumers;
  int parts_left;
  int status;
  pto_error_info err;
  bool err_secondary; /* err follows another part's own (node_reply.secondary) */
  uint64_t start_ns;
  int64_t next_ready; /* next task id in its ready queue, -1 = last */
  bool commute;       /* has COMMUTE arguments: never runs beside an overlapping one */
} node_task;

/* READY tasks waiting for their children, in the order they became ready,
 * linked through node_task.next_ready (ids; -1 = empty). */
typedef struct task_queue {
  int64_t head, tail;
} task_queue;

/* How a child runs: a forked process (without mpirun), a thread of the
 * parent (under mpirun: chip 0 and the host workers on rank 0), or another
 * MPI rank (under mpirun: chip c > 0 is rank c, reached through the relay). */
typedef enum slot_how { SLOT_PROCESS = 0, SLOT_THREAD, SLOT_RANK } slot_how;

typedef struct child_slot {
  pid_t pid;
  bool alive;
  uint8_t kind;         /* slot_how */
  pthread_t thread;     /* SLOT_THREAD */
  _Atomic bool ended;   /* SLOT_THREAD, SLOT_RANK: it left (wstatus set before, release) */
  bool other_host;      /* SLOT_RANK on another host than rank 0 */
  char where[80];       /* SLOT_RANK: "MPI rank 2 on host h" */
  char why[240];        /* SLOT_RANK: why it failed to start */
  uint64_t watch_start; /* SLOT_RANK on this host: its process's start time (proc_watch.h) */
  bool status_unknown;  /* its process is gone, its exit status unknown here (a rank; a child
                         * the kernel reaped: SIGCHLD ignored) */
  uint64_t gone_ns;     /* SLOT_RANK: when rank 0's relay first saw its process gone */
  int wstatus;
  int64_t task; /* running node task id, -1 = none (or a control frame) */
  uint32_t gen; /* outstanding frame gen, 0 = none */
  uint64_t posted_ns;
  uint32_t beat_seen; /* the child's heartbeat at beat_ns */
  uint64_t beat_ns;
  node_reply reply; /* reply of a control frame */
  bool replied;
} child_slot;

/* A byte run [lo, hi) of addresses (node_check.c). */
typedef struct node_span {
  uintptr_t lo, hi;
} node_span;

/* The handle a node orchestration function gets: one of the node's
 * (n->orch), a different one each run (n->orch[n->runs % NODE_ORCH_HANDLES]),
 * so that a handle kept from one run is not the next run's; it is its
 * run's while n->orch_live points to it (node_orch_foreign). A handle is
 * handed out again after NODE_ORCH_HANDLES runs. */
#define NODE_ORCH_HANDLES 4096
struct pto_node_orch {
  pto_node *node; /* set when first handed out, never changed */
};

struct pto_node {
  pto_node_config cfg;
  bool mpi;                     /* chips are MPI ranks (node_mpi.c) */
  struct root_relay *mpi_relay; /* rank 0's relay thread */
  char mpi_host[64];            /* rank 0's host name */
  char host_shm[64];            /* under MPI: the host memory's shared-memory object */
  int device_ids[PTO_NODE_MAX_CHIPS];
  int lease_fds[PTO_NODE_MAX_CHIPS];
  int nchildren;
  child_slot child[NODE_MAX_CHILDREN];
  uint64_t reaped_ns; /* the parent's last look for deaths (node_reap_due) */
  pid_t parent_pid;
  node_ctl *ctl;
  size_t ctl_bytes;
  unsigned char *host; /* node host memory: ctl->host_used bytes of it handed out */
  bool host_kept;      /* pto_node_host_keep: destroy leaves host mapped */
  void *space;         /* reserved address space for windows */
  uint64_t space_used;
  char prefix[48];                    /* run-unique shm name prefix, e.g. "/pto.123.0.ab12cd" */
  char *trace_path;                   /* cfg.trace_path, owned; NULL = not tracing */
  uint64_t trace_origin_ns;           /* time zero of the current run's trace */
  int trace_runs[PTO_NODE_MAX_CHIPS]; /* chip tasks posted per rank this run */
  pto_comm observer;                  /* the orchestrator's view of the domains */
  /* chip ranks whose task's cancel reached their mailbox (bit per chip,
   * set by rank 0's relay): the parent wakes their waits (node_mpi_wake) */
  _Atomic uint64_t cancel_arrived;
  comm_domain_desc doms[COMM_MAX_DOMAINS];
  bool dom_live[COMM_MAX_DOMAINS];
  int32_t next_dom;
  int fatal;                 /* the node is broken (a child died or hung) */
  uint64_t stop_deadline_ns; /* node_kill_all: threads to be joined by then; 0 = none stopped */
  pto_error_info fatal_err;
  /* the current run */
  _Atomic bool running; /* a pto_node_run is in progress (taken by compare-and-swap) */
  /* pto_node_cancel: the number of the run in progress (0: none; the
   * owner sets it), and the run a cancel asked to end (any thread, a
   * signal handler among them); the owner applies it once (cancelled) */
  _Atomic uint64_t run_live, cancel_req;
  uint64_t run_seq; /* runs begun */
  bool cancelled;   /* the current run was cancelled (node_task.c) */
  tmap tm;
  node_task *tasks;
  int64_t base_id, ntasks, captasks, oldest_live;
  int64_t next_id; /* node-lifetime task ids */
  /* node tasks of the current run launched so far: the next one's signal
   * epoch is started + 1 while that fits (comm/signal.h) */
  uint64_t started;
  int64_t unfinished; /* tasks of the run neither done nor failed */
  /* dispatch looks only at queue heads, never at every live task */
  task_queue ready_slot[NODE_MAX_CHILDREN]; /* single-child tasks, by child slot */
  task_queue ready_any;                     /* host tasks for any worker */
  task_queue ready_group;                   /* tasks of several chips */
  bool reserved[NODE_MAX_CHILDREN];         /* per dispatch pass: kept for a waiting task */
  int first_err;
  pto_error_info first_info;
  /* a call refused on a thread other than the orchestration's, by name:
   * the only thing that thread writes (node_orch_foreign); the owner
   * latches it (node_latch_foreign) */
  _Atomic(const char *) foreign_call;
  /* foreign calls between their look at orch_live and their store of
   * foreign_call: the run's end waits for them before its last latch */
  _Atomic int foreign_busy;
  pto_node_orch orch[NODE_ORCH_HANDLES]; /* the orchestrations' handles */
  pto_node_orch *_Atomic orch_live;      /* the run's, during pto_node_run */
  pthread_t orch_owner;                  /* the thread running the orchestration */
  uint64_t runs;                         /* pto_node_run calls that ran an orchestration */
  pto_node_stats stats;                  /* of the current (then last) run */
  /* checking mode (node_check.c): node host memory's first check_host
   * bytes, then a host task's window regions check_reg[0..check_nreg), as
   * they were when the running task was launched; its end compares that
   * layout, whatever node host memory has grown to meanwhile */
  unsigned char *check_snap;
  size_t check_cap;
  size_t check_host;
  node_span check_reg[PTO_MAX_TENSOR_ARGS];
  int check_nreg;
  int check_slot;         /* the running task's (first) child slot */
  pto_host_fn *skip_read; /* host functions out of the read check (pto_node_skip_read_check) */
  int nskip_read;
  /* controlled schedules (node_schedule.c): the config's record and replay
   * paths (owned), the current run's controller, and whether the
   * orchestration waits (the only place it starts node tasks) */
  char *sched_record, *sched_replay;
  node_sched *sched;
  bool at_wait;
};

/* The bytes of node host memory handed out so far, by any process or
 * thread of the node (relaxed: a count, no data is published through it;
 * the bytes are the callers'). */
static inline size_t node_host_used(const pto_node *n) {
  return (size_t)atomic_load_explicit(&n->ctl->host_used, memory_order_relaxed);
}

/* The handle a node orchestration gets. `owner` is the thread running it
 * (pto_node_run's caller): the node's tasks, TensorMap, domains and error
 * latch have that one writer and no lock. */
/* Whether a call of the node orchestration API is refused: its handle is
 * not the run in progress (kept past its run, or from an earlier run: it
 * does nothing, returns PTO_EINVAL and says why in pto_last_error; a kept
 * handle once read pto_node_run's dead stack frame and crashed, then acted
 * on the next run), or it comes from another thread than the
 * orchestration's: then it does nothing but leave its name for the owner
 * to latch, and its caller returns PTO_EINVAL. A node orchestrator has
 * one thread, as a chip's (docs/node.md). */
/* A call from another thread than the owner's leaves its name in
 * n->foreign_call while the run lives (orch_live == no): true then. The
 * run's end clears orch_live, then waits for the calls that saw it set
 * (foreign_busy, seq_cst with the clear) and latches what they left
 * (node_end_foreign): a call is either refused as after the run or fails
 * the run. */
/* Takes the node as a run does (running: one run, destroy or other claim
 * at a time, whichever thread); false when it is taken. The taker stores
 * running = false (release) when done. */
static inline bool node_claim(pto_node *n) {
  bool idle = false;
  return atomic_compare_exchange_strong_explicit(&n->running, &idle, true, memory_order_acq_rel,
                                                 memory_order_acquire);
}
static inline bool node_foreign_leave(pto_node *n, pto_node_orch *no, const char *call) {
  atomic_fetch_add_explicit(&n->foreign_busy, 1, memory_order_seq_cst);
  bool live = atomic_load_explicit(&n->orch_live, memory_order_seq_cst) == no;
  if (live) atomic_store_explicit(&n->foreign_call, call, memory_order_release);
  atomic_fetch_sub_explicit(&n->foreign_busy, 1, memory_order_release);
  return live;
}
static inline bool node_orch_foreign(pto_node_orch *no, const char *call) {
  pto_node *n = no->node;
  if (n && atomic_load_explicit(&n->orch_live, memory_order_acquire) == no) {
    if (pthread_equal(pthread_self(), n->orch_owner)) return false;
    if (node_foreign_leave(n, no, call)) return true;
  }
  last_error_set(PTO_EINVAL,
                 "pto_node_%s: this pto_node_orch's run has ended; the call did nothing (a "
                 "pto_node_orch is its run's only while the orchestration function runs)",
                 call);
  return true; /* nothing to latch */
}
/* Owner thread: a refused foreign call fails the run, named [node_task.c]. */
void node_latch_foreign(pto_node *n);
/* Owner thread, at the run's very end: clears orch_live, waits for the
 * foreign calls that saw it set, and latches the last one's name
 * [node_task.c]. */
void node_end_foreign(pto_node *n);

/* Fills *e: code, no task or core, details from fmt. */
static inline void node_set_verr(pto_error_info *e, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static inline void node_set_verr(pto_error_info *e, int code, const char *fmt, va_list ap) {
  memset(e, 0, sizeof *e);
  e->code = code;
  e->task_id = PTO_TASK_NONE;
  e->core_id = -1;
  vsnprintf(e->details, sizeof e->details, fmt, ap);
}
static inline void node_set_err(pto_error_info *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void node_set_err(pto_error_info *e, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  node_set_verr(e, code, fmt, ap);
  va_end(ap);
}

/* Child slots: chips first, then host workers. */
static inline const char *slot_kind(const pto_node *n, int s) {
  return s < n->cfg.nchips ? "chip rank" : "host worker";
}
static inline int slot_index(const pto_node *n, int s) {
  return s < n->cfg.nchips ? s : s - n->cfg.nchips;
}

/* ---- node_proc.c: the children as processes ---- */

/* Forks every child; a failed fork fails the node. */
void node_fork_children(pto_node *n);
/* Runs child s as a thread of this process (under mpirun, on rank 0). */
int node_start_thread(pto_node *n, int s, char *why, size_t len);
/* Reaps children that ended (alive = false, wstatus); true if any did. */
bool node_reap(pto_node *n);
/* node_reap at most once per REAP_PERIOD_NS (node_proc.c): what the
 * progress loop and its wait condition look for deaths with. */
bool node_reap_due(pto_node *n);
/* Kills and reaps every child, unlinks every object of the run. */
void node_kill_all(pto_node *n);
/* Fails the node for good (the first call wins): records the error, kills
 * every child, unlinks every object; returns code. */
int node_fatal(pto_node *n, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Records the run's first error (code, details from fmt) unless the node
 * failed or the run has one already; returns code. */
int node_first_err(pto_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* PTO_ECHIP_DIED (node failed) when a child has died, else 0. */
int node_check_deaths(pto_node *n);
/* The heartbeat and the deadlines of child s while a frame is outstanding. */
int node_check_deadlines(pto_node *n, int s, uint64_t now);
/* Posts frame f to child s (for node task `task`, -1 = a control frame). */
void node_post(pto_node *n, int s, node_frame *f, int64_t task);

/* ---- node_task.c: node tasks and the progress loop ---- */

typedef bool (*node_pred)(pto_node *n, void *arg);
/* Steps (replies, deaths, deadlines, dispatch when may_dispatch) until pred
 * holds, the node fails, or deadline_ns passes (returns `late` then). */
int node_until(pto_node *n, node_pred pred, void *arg, bool may_dispatch, uint64_t deadline_ns,
               int late);
/* A wake-up hint for the parent's waits: a reply arrived or a child died. */
bool node_anything(void *arg);
/* Every task of the run finished. */
bool node_all_finished(pto_node *n, void *arg);
/* An orchestration-side error fails the run too; returns rc. */
int node_latch(pto_node *n, int rc, const char *what);
/* An orchestration call `call` refused: the run fails with code and
 * "node orchestration: <call>: <why>"; returns code. */
int node_refuse(pto_node *n, int code, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Where a node task's view may live: node host memory, or the windows of
 * a live domain. NULL, or why not (in why[len]). */
const char *node_view_problem(const pto_node *n, const pto_tensor *t, char *why, size_t len);
/* Task bookkeeping of a run: begin (TensorMap, queues), end (empties them;
 * the memory stays for the next run), free (at destroy). */
int node_tasks_begin(pto_node *n);
void node_tasks_end(pto_node *n);
void node_tasks_free(pto_node *n);

/* ---- node_check.c: checking mode on a node (docs/contracts.md) ---- */

/* Checking mode is on for this node (cfg.chip.check). */
bool node_check_on(const pto_node *n);
/* Task t is about to be launched on child `slot` (its first): node host
 * memory (and, under mpirun, a host task's window buffers) is snapshot.
 * False (t failed with PTO_ENOMEM) when there is no memory for the
 * snapshot. */
bool node_check_before(pto_node *n, node_task *t, int slot);
/* Task t's last part replied: a byte of node host memory (or of the
 * window buffers snapshot) that changed outside t's OUTPUT_EXISTING /
 * INOUT / NO_DEP / COMMUTE views fails t with PTO_ECONTRACT (unless it
 * failed already). Only one task runs at a time in checking mode, so every
 * change is t's. */
void node_check_after(pto_node *n, node_task *t);
/* Fills f's read_check and host_used for task t's launch: a host task in
 * checking mode whose function did not opt out is run twice by its
 * sub-worker (node_check_host_run). */
void node_check_frame(const pto_node *n, const node_task *t, node_frame *f);
/* In the sub-worker: runs f's host task, then runs it again with every
 * byte of the memory it may reach (node host memory handed out so far, its
 * arguments' buffers) outside its views flipped, and puts back what the
 * first run left. Where either run changed a byte both must have left the
 * same value, else PTO_ECONTRACT with err's details, task_id and arg set
 * (the argument whose output differed). Returns the host function's
 * status otherwise. */
int node_check_host_run(pto_node *n, const node_frame *f, pto_error_info *err);
/* A sub-worker leaves: frees its copies of node_check_host_run. */
void node_check_host_end(void);
/* Frees the snapshot and the opt-outs (pto_node_destroy). */
void node_check_free(pto_node *n);

/* ---- node_domain.c ---- */

/* Releases every domain of the run (control frames unless the node failed). */
void node_release_domains(pto_node *n);

/* rank_trace.c: where chip rank `rank` writes the trace of its chip task number
 * `run` (0, 1, ... within a node run): "<trace_path>.<prefix>.rank<r>.<run>",
 * unique to this node. Returns false if it does not fit in len. */
bool node_rank_trace_path(const pto_node *n, int rank, int run, char *buf, size_t len);
/* rank_trace.c: at the end of a node run, merges the ranks' trace files into
 * trace_path and removes them. Returns 0, or the merge's error (why says more). */
int node_trace_finish(pto_node *n, char *why, size_t whylen);

/* child.c: how many chips node children created in this process so far.
 * A process serves one node chip at a time but, under mpirun, one after
 * another: per-chip state kept in a static (coll_node.c's kernel id) is
 * valid only for the generation that set it. */
uint64_t node_chip_generation(void);
/* child.c: the life of a forked chip or worker child; never returns. */
void node_child_main(pto_node *n, int slot) __attribute__((noreturn));
/* child.c: the life of child `slot` in the calling thread: creates its chip
 * (chip slots), reports ready or failed, serves frames from its mailbox
 * until FRAME_EXIT (answered once the chip is destroyed) or, with
 * orphan_check, until the parent process is gone. Returns the exit status
 * (0; 2: the chip or chip_init failed; 3: out of memory). */
int node_child_serve(pto_node *n, int slot, bool orphan_check);

#endif
