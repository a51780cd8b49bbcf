/* comm.h — private: the domain descriptor that travels from the node to
 * its chips, and the per-process communication context (pto_comm) that
 * kernels reach through pto_kctx.env. The node runtime drives the domain
 * life cycle (open = create and zero my window, attach after the
 * allocation barrier, close at the end of the run); kernels use the ops in
 * ops.c. */
#ifndef PTO_COMM_INTERNAL_H
#define PTO_COMM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/comm_backend.h"
#include "pto/comm.h"
#include "pto/orch.h"

#define COMM_MAX_DOMAINS  16   /* live domains per run */
#define COMM_HEADER_BYTES 4096 /* window header before the first buffer */
#define COMM_PREFIX_MAX   64

typedef struct comm_buffer_desc {
  char name[PTO_COMM_NAME_MAX];
  uint64_t offset; /* from the window start, PTO_COMM_ALIGN-aligned */
  uint64_t bytes;
} comm_buffer_desc;

/* Plain data: copied into mailbox frames. */
struct comm_domain_desc {
  int32_t id;
  int32_t nranks;
  int32_t chips[PTO_COMM_MAX_RANKS]; /* node chip rank of each domain rank */
  int32_t nbuffers;
  comm_buffer_desc buffers[PTO_COMM_MAX_BUFFERS];
  uint64_t win_bytes;           /* per rank, page-rounded, header included */
  uint64_t base;                /* rank r's window is mapped at base + r * win_bytes in
                                   every process of the run (reserved before fork) */
  char prefix[COMM_PREFIX_MAX]; /* shm name prefix: rank r is "<prefix>.r<r>" */
  int64_t wait_timeout_ms;
  uint8_t fault_inject;
  uint8_t backend; /* comm_backend_kind (comm_backend.h): 0 = shared memory */
  uint64_t fault_seed;
  /* a node run under a controlled schedule (docs/schedules.md): held-back
   * stores land in a recorded (or replayed) order, and at the end of a task
   * each landing waits until the reading peer has seen it */
  uint8_t controlled;
  int32_t run_index; /* controlled: the domain's creation index in its node run, by which
                        the delivery records name it and its seed is drawn (the id grows
                        over the node's runs: every run of a seed is then the same) */
};

typedef struct comm_dom {
  comm_domain_desc desc;
  int my_rank; /* -1: observer (the node orchestrator) */
  const comm_backend *be;
  comm_win *win;
  _Atomic uint32_t barrier_seq; /* barriers of this task; reset with the epoch */
  pthread_mutex_t barrier_lock; /* one barrier at a time per rank */
  /* Collectives per scratch buffer in the current task (coll.c): the call
   * number a rank publishes when the backend runs them. The backend's
   * collectives and record exchanges of one window buffer go through one
   * communicator, where they meet in the order made, so a rank makes them
   * one at a time: coll_lock is held from a call's first use of them to
   * its end, and on direct windows from before the call table's round of
   * a call that goes on to them (coll.c native_exchange: each scratch view
   * has its own table, so a round made outside the lock could pass beside
   * another view's call; rounds of calls that end in the table or the
   * mesh need it not); two kernels calling
   * on two scratch views of one buffer at once would otherwise interleave
   * their records and collectives differently on each rank, and race on
   * the entry and on the backend's staging). */
  struct {
    uint32_t epoch;
    int32_t calls;
  } coll_calls[PTO_COMM_MAX_BUFFERS];
  pthread_mutex_t coll_lock[PTO_COMM_MAX_BUFFERS];
  /* How long this process's signal waits on the domain took lately, ns
   * (ops.c, wait_spin): a running average, relaxed (a heuristic). */
  _Atomic uint64_t wait_ns;
  /* Every rank's window lies in this process (coll.c: the call table's
   * condition): fixed by the backend and its settings, found once the
   * peers' windows are reached (comm_domain_attach), before any kernel of
   * the domain runs. */
  bool direct_all;
  /* The backend's settle_run (0: no settle) and record_max (with
   * exchange) by call kind (comm_coll_kind; [0]: of any call), read at
   * attach as direct_all. */
  int settle_run;
  size_t record_max[COMM_ALLTOALL + 1];
  /* With direct_all: rank p's window is at direct_base + p * win_bytes
   * (NULL when the backend maps them otherwise) */
  unsigned char *direct_base;
  /* Set at each attach, unique in the process (never 0): what coll.c's
   * memo of a scratch view's layout is keyed on, so that a domain closed
   * and another attached at the same address is not taken for it. */
  uint64_t uid;
} comm_dom;

/* [*lo, *hi): every rank's copy of d's windows; false when it has none or
 * it does not fit the address space. */
static inline bool comm_dom_windows(const comm_dom *d, uintptr_t *lo, uintptr_t *hi) {
  uint64_t all, end;
  if (!d->desc.win_bytes ||
      __builtin_mul_overflow((uint64_t)d->desc.nranks, d->desc.win_bytes, &all) ||
      __builtin_add_overflow(d->desc.base, all, &end) || end > UINTPTR_MAX)
    return false;
  *lo = (uintptr_t)d->desc.base;
  *hi = (uintptr_t)end;
  return true;
}

/* A scratch view whose one-way broadcasts (coll.c) are not all checked
 * against the peers' calls yet: its domain and call table (a window
 * offset). */
typedef struct comm_coll_pend {
  int32_t dom;
  uint64_t table;
} comm_coll_pend;
#define COMM_COLL_PEND_MAX 32

struct pto_comm {
  int chip;       /* node chip rank, -1 for the orchestrator */
  uint32_t epoch; /* current node task, tags signals and barriers (signal.h) */
  uint64_t group; /* node chips running the current task (bit per chip) */
  comm_dom *doms[COMM_MAX_DOMAINS];
  /* Every open domain's windows (all ranks' copies) lie in [win_lo,
   * win_hi): comm_peer_copy's first test (domain.c, windows_span) */
  uintptr_t win_lo, win_hi;
  pthread_mutex_t err_lock;
  int err_code; /* first failure of the current task */
  char err_details[384];
  /* it follows another chip's own failure, which that chip reports
   * (comm_fail_secondary) */
  bool err_secondary;
  /* Set by the node when it stops this chip (a thread of the node's own
   * process: node_proc.c): every wait of its kernels ends at once with
   * PTO_ESHUTDOWN, before the node unmaps the windows they wait on. NULL:
   * never stopped so (a forked chip is killed instead). */
  const _Atomic uint32_t *stop;
  /* Set by the node when it cancels the node task this chip runs, because
   * another chip of its group failed (node_task.c): (gen << 32) | (that
   * chip + 1), where gen is the mailbox generation of the task's frame,
   * task_gen while it runs. Its waits then end at once with PTO_ESHUTDOWN,
   * as at a stop, and pto_kctx_cancelled turns true in its kernels (the
   * chip runtime reads the same word: chip_set_node_cancel, child.c). A
   * cancel that comes after its task ended names a frame no longer run,
   * so it ends no wait of a later task. NULL: never. */
  const _Atomic uint64_t *cancel;
  uint32_t task_gen;
  /* Checking mode (docs/contracts.md, "Node runs"): the arguments of the
   * node task this chip runs, whose window views are where its remote
   * stores may land (window_check.c); NULL: not checked. */
  const pto_args *check_args;
  /* The scratch views of the current task with one-way broadcasts not yet
   * checked (coll.c, at most COMM_COLL_PEND_MAX: a call that finds the
   * list full waits for every rank instead), under pend_lock (kernels of
   * several blocks call), emptied at the task's begin; coll_settle checks
   * them at its end (comm_task_end: a pointer that coll.c sets, so that
   * this layer calls nothing of the collectives above it). */
  pthread_mutex_t pend_lock;
  int npend;
  comm_coll_pend pend[COMM_COLL_PEND_MAX];
  /* A collective of the current task went through a backend's records
   * (coll.c, native_exchange): coll_settle acknowledges the one-way
   * broadcasts of every window buffer used so at the task's end (set
   * relaxed by kernels, read after they returned). */
  _Atomic bool coll_records;
  int (*coll_settle)(pto_comm *c);
};

/* The task failed: the one-way broadcasts it left unchecked are checked
 * by no one (its peers are being cancelled; the error to report is the
 * task's). */
static inline void comm_coll_unchecked_drop(pto_comm *c) {
  c->npend = 0;
  atomic_store_explicit(&c->coll_records, false, memory_order_relaxed);
}

/* Fills the layout of a domain (buffers, win_bytes); base/prefix/id are the
 * caller's. Returns PTO_EINVAL on bad names/sizes. */
int comm_desc_layout(comm_domain_desc *d, const pto_window_buffer *bufs, int nbufs);
/* comm_desc_layout, saying in why[n] what was wrong when it fails. */
int comm_desc_layout_why(comm_domain_desc *d, const pto_window_buffer *bufs, int nbufs, char *why,
                         size_t n);
/* Where a view lies in a domain's windows [ops.c]: PTO_OK with the window
 * offset of its buf (*woff) and the one buffer (*buf) that holds every byte
 * it touches; PTO_EINVAL for an invalid view, PTO_EBOUNDS for one outside
 * the buffers, with why[n] saying so. Pure (no memory is touched). */
int comm_view_locate(const comm_domain_desc *d, const pto_tensor *t, uint64_t *woff, int *buf,
                     char *why, size_t n);
/* comm_view_locate for the bytes [lo, hi) of buf_ptr of a view the caller
 * has validated already: the collectives check their scratch once, in one
 * pass that also gives its byte range (tensor_dense_numel). */
int comm_span_locate(const comm_domain_desc *d, const void *buf_ptr, uint64_t lo, uint64_t hi,
                     uint64_t *woff, int *buf, char *why, size_t n);

/* Where a local tile lies in a peer's copy of a window (comm_peer_copy). */
typedef struct comm_copy_at {
  const comm_dom *dom;
  int rank;                    /* the rank whose copy it is */
  const comm_buffer_desc *buf; /* the buffer there, NULL: the header or padding */
} comm_copy_at;
/* Does the local memory [lo, hi) touch another rank's copy of a window of
 * one of c's domains? A local tile (the src of a store, the dst of a load,
 * a staging tile, a collective's src, dst and scratch) must be this
 * process's own memory: a view of a peer's copy of a window buffer names
 * offsets for the remote side of an op (pto/comm.h), but read or written
 * here it is the peer's live window on shared memory and an inaccessible
 * reservation on MPI RMA windows. True with *at naming the first such copy
 * it touches. [ops.c] */
bool comm_peer_copy(const pto_comm *c, uintptr_t lo, uintptr_t hi, comm_copy_at *at);
/* "rank 2's copy of window buffer 'x' of domain 5" into buf[n]. */
const char *comm_copy_name(const comm_copy_at *at, char *buf, size_t n);

void comm_init(pto_comm *c, int chip);
/* Closes every domain (unlink: also remove my named objects). */
void comm_fini(pto_comm *c, bool unlink);
/* Phase 1 (rank) / observer mapping (my_rank = -1, after every rank attached).
 * The backend is d->backend's. On failure the details are latched in c
 * (comm_task_error) until the next comm_task_begin. */
int comm_domain_open(pto_comm *c, const comm_domain_desc *d, int my_rank);
/* Phase 2: after the allocation barrier. Details of a failure as open's. */
int comm_domain_attach(pto_comm *c, int32_t id);
void comm_domain_close(pto_comm *c, int32_t id, bool unlink);
/* The cancel word (pto_comm.cancel) of the task of mailbox generation gen
 * (never 0), cancelled as chip `failed` failed. */
/* `failed` of a cancel word when the node run was cancelled
 * (pto_node_cancel), not a chip of the group: comm_cancel_by gives it back */
#define COMM_CANCEL_RUN (-2)
/* `failed` of a cancel word when the node stopped the chip (it failed and
 * stops the chips that are threads of its process: node_proc.c,
 * stop_threads), written as a cancel of the frame the chip runs so that
 * its chip run sees it where it sees a cancel (pto_kctx_cancelled) */
#define COMM_CANCEL_STOP (-3)
static inline uint64_t comm_cancel_word(uint32_t gen, int failed) {
  return (uint64_t)gen << 32 | (uint32_t)(failed + 1);
}
/* The chip whose failure cancelled the task of generation gen, by word
 * (COMM_CANCEL_RUN: the run was cancelled; COMM_CANCEL_STOP: the node
 * stopped the chip); -1 when the word names another task, or none (0). */
static inline int comm_cancel_by(uint64_t word, uint32_t gen) {
  return word && (uint32_t)(word >> 32) == gen ? (int)(uint32_t)word - 1 : -1;
}

/* Must this chip's waits end now: has the node stopped the chip
 * (c->stop) or cancelled the node task it runs (c->cancel)? */
bool comm_stopping(const pto_comm *c);
/* Why, for the error details (buf[n]): "the node stopped chip 0 (the node
 * failed)" or "the node cancelled chip 0's task: chip 1 of its group
 * failed". */
const char *comm_stop_why(const pto_comm *c, char *buf, size_t n);
/* Wakes the waiters of node chip `chip` in every domain of c where that
 * chip's window is mapped (the node's observer: the waiters then see
 * comm_stopping); elsewhere they poll and see it at their next look. */
void comm_wake(pto_comm *c, int chip);
/* Wakes this chip's own waiters in every domain (its run failed: they see
 * pto_kctx_cancelled). */
void comm_wake_mine(pto_comm *c);
comm_dom *comm_find(const pto_comm *c, int32_t id);
/* A backend that must end the job itself (the MPI backend's collective
 * that MPI owns the caller's memory for and that never completes:
 * mpi_coll.c, end_job) calls comm_job_end with the domain's desc.prefix
 * right before its MPI_Abort; it calls the hook the domains' owner set
 * with comm_set_job_end (the node under mpirun: it unlinks its run's
 * shared objects, as it does before its own MPI_Abort, which may end the
 * process with SIGKILL). No hook set (a program that opens domains
 * itself): nothing. Set once, before any domain opens; read from any
 * thread. */
typedef void (*comm_job_end_fn)(const char *domain_prefix);
void comm_set_job_end(comm_job_end_fn fn);
void comm_job_end(const char *domain_prefix);
/* pto_comm_window_tensor, saying in why[n] what was wrong when it fails. */
int comm_window_tensor_why(const pto_comm *c, pto_domain dom, int rank, const char *name,
                           pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out,
                           char *why, size_t n);

/* Start of a node task run by the node chips in `group` (bit per chip):
 * new epoch (SIG_EPOCH_NONE for a task past the run's last: signal.h),
 * clears the latched error. */
void comm_task_begin(pto_comm *c, uint32_t epoch, uint64_t group);
/* 0, or, for a task without an epoch, the failure of `op` (a signal, wait,
 * read, barrier or collective on domain d, where I am rank `rank`), named:
 * such an op would tag or read words with an epoch that is no task's. */
int comm_epoch_check(pto_comm *c, const char *op, int32_t dom, int rank);
/* End of a node task: lands every held-back store (fault injection). */
int comm_task_end(pto_comm *c);
/* First error details of the task ("" when none). */
int comm_task_error(pto_comm *c, char *details, size_t n);
/* Whether that error follows another chip's own (comm_fail_secondary). */
bool comm_task_error_secondary(pto_comm *c);
/* Latches the first error of the task with its details; returns code. */
int comm_fail(pto_comm *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* comm_fail for an error that follows another chip's own, which that chip
 * reports with the specifics ("rank 1 called with invalid arguments", a
 * wait the node ended): the node reports the other's first (node_task.c). */
int comm_fail_secondary(pto_comm *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Address-space reservation for windows (done once, before fork):
 * PTO_ESYSTEM, errno mmap's, when it cannot be made. */
int comm_space_reserve(size_t bytes, void **base);
void comm_space_release(void *base, size_t bytes);
/* Returns [addr, addr+len) to the reserved, inaccessible state. */
void comm_space_unmap(uint64_t addr, uint64_t len);

/* shm names of rank r's window. */
void comm_shm_name(const comm_domain_desc *d, int rank, char *out, size_t n);
/* Unlinks the name of rank r's window (r < 0: every rank's); a mapping
 * made stays. Names already gone are no error. */
void comm_shm_unlink(const comm_domain_desc *d, int rank);

#endif
