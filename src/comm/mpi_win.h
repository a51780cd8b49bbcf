/* mpi_win.h — private to the MPI backend (mpi.c, mpi_coll.c): the window
 * header every rank's window begins with, and the per-(process, domain)
 * state of a window. */
#ifndef PTO_COMM_MPI_WIN_H
#define PTO_COMM_MPI_WIN_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "comm/call_guard.h"
#include "comm/comm.h"
#include "comm/fault.h"
#include "common/wait.h"

#define MPI_BOUNCE_BYTES (64u << 10)
#define MPI_BOUNCE_PUT   4096u /* puts up to this size use the bounce buffer */

/* The window header (the first COMM_HEADER_BYTES of every window). */
typedef struct mpi_hdr {
  /* barrier: arrive[r] = epoch << 32 | seq of the last barrier rank r
   * reached, written by rank r with MPI_Accumulate(MPI_REPLACE) */
  uint64_t arrive[PTO_COMM_MAX_RANKS];
  pto_event ev; /* shared windows: woken by every signal, store and arrival */
  /* f16/bf16 adds into this window: 0 free, else the holder's rank + 1
   * (cas_add_half) */
  uint64_t add_lock;
  /* controlled node runs (desc.controlled; mpi.c, "Controlled runs"), each
   * word read and written with MPI's atomics: held-back stores landed in
   * this window so far (peers add 1 once a landing is complete here); the
   * count this rank had taken when it last found what it waits for not
   * there; the epoch of the last node task whose kernels finished here */
  uint64_t landed, seen, task_done;
  /* shared windows: the CPUs this rank's process may use (wait.c's set),
   * for the waits of its peers, as shm.c's header */
  cpu_set_t cpus;
} mpi_hdr;
_Static_assert(sizeof(mpi_hdr) <= COMM_HEADER_BYTES, "window header too large");

/* A buffer's guard against a call that never comes back from MPI
 * (mpi_coll.c, guard_begin): what the call is, for the message. */
typedef struct mpi_stuck {
  call_guard g; /* first: the watchdog hands it back; g.arg is the window */
  _Atomic(const char *) what;
  _Atomic int64_t timeout_ms;
} mpi_stuck;

struct comm_win {
  comm_domain_desc d;
  int my_rank;
  MPI_Comm comm; /* the domain's ranks in domain order; MPI_COMM_NULL for an observer */
  MPI_Win win;
  bool have_win, locked;
  bool shared; /* every window mapped here (MPI_Win_allocate_shared) */
  bool rput;   /* RMA layout: puts and accumulates by request (mpi.c, completes_at_issue) */
  pto_wait_share share; /* shared: the ranks sharing my CPUs (wait.c), counted at attach */
  unsigned char *base;  /* rank 0's window address in this process */
  void *space;          /* the range an RMA layout reserved itself (desc.base 0) */
  bool mapped;          /* my slot of an RMA layout is mapped (undone at destroy) */
  uint64_t space_bytes;
  fault_queue *fq;       /* NULL unless fault injection is on */
  uint32_t epoch;        /* controlled: the node task running (mpi_task_mark) */
  uint64_t group;        /* controlled: its chips */
  _Atomic uint64_t seen; /* controlled: the highest count published in my header's seen */
  uint64_t landed_at;    /* controlled: the peer's landed count after my last landing */
  pthread_mutex_t mu;    /* RMA layout: one thread's MPI calls at a time (lock()) */
  /* A hold of mu that never comes back from MPI ends the job (mpi.c,
   * op_stuck): armed by the outermost hold (op_depth, under mu) with
   * op_allow_ms; watched from creation to destruction (members only). */
  call_guard op_guard;
  int op_depth;
  int64_t op_allow_ms;
  /* RMA layout: peers (bit per rank) with puts or accumulates of this
   * process not flushed since (mpi.c, flush_dirty); read and written only
   * under mu, which orders them (no atomics needed) */
  uint64_t dirty;
  /* Shared layout: an MPI_Accumulate was issued on this window, by any
   * thread (sticky, relaxed: a quiet ordered after it by the caller's own
   * synchronization sees it). Until then every put and get there is a CPU
   * store or load, which a fence completes: quiet needs no MPI call. */
  _Atomic bool acc_issued;
  /* RMA layout: small puts leave from a copy here, so that they need no
   * wait for their local completion before the caller reuses its buffer
   * (mpi.c, rma_put); bytes in use until every dirty peer was flushed */
  size_t bounce_used;
  unsigned char bounce[MPI_BOUNCE_BYTES];
  /* The collectives of each window buffer (mpi_coll.c): a duplicate of comm
   * per buffer, since collectives on one scratch buffer come in the same
   * order on every rank but those on different buffers may interleave;
   * broken: a call on it did not complete, so its order is lost. */
  MPI_Comm bcomm[PTO_COMM_MAX_BUFFERS];
  bool bbroken[PTO_COMM_MAX_BUFFERS];
  mpi_stuck bstuck[PTO_COMM_MAX_BUFFERS]; /* watched from mpi_coll_open to mpi_coll_close */
  /* The record exchanges of each buffer (mpi_coll.c, mpi_exchange): nranks
   * receive slots then nranks send slots of xrec bytes each, made at the
   * buffer's first exchange and kept (a broken buffer's stay allocated:
   * its requests may still write them). */
  unsigned char *xstage[PTO_COMM_MAX_BUFFERS];
  size_t xrec[PTO_COMM_MAX_BUFFERS];
  MPI_Request *xreq[PTO_COMM_MAX_BUFFERS]; /* the exchange's requests, with its staging */
  /* The one-way exchanges of each buffer (mpi_coll.c, mpi_exchange with a
   * root): the log of the calls' headers, the root's records in flight,
   * the acknowledgements; made at the buffer's first exchange and kept (a
   * broken buffer's stay allocated too) */
  struct mpi_oneway *xone[PTO_COMM_MAX_BUFFERS];
  /* Records to the peers on this host (bit per rank: xnear) go in pieces
   * of xpiece bytes (0: whole), the most that host's shared-memory
   * transport sends eagerly (mpi_coll.c, record_piece); set at open. */
  uint64_t xnear;
  size_t xpiece;
  /* The calls of one acknowledgement of the one-way exchanges (settle_run;
   * mpi_coll.c, near_peers): the same on every rank; set at open. */
  int xrun;
  /* The longest one-way record, one message to each peer (mpi_coll.c,
   * ONEWAY_REC_NEAR and _FAR), and the most data a record carries
   * (record_max: RECORD_NEAR or _FAR): the same on every rank; set at
   * open. */
  size_t xonemax, xrecmax;
  /* Every rank on one host and xrecmax not set by PTO_MPI_RECORD_BYTES:
   * some calls' records carry less (mpi_record_max); set at open. */
  bool xkinds;
};

/* The backend's own collectives (mpi_coll.c): the communicators of each
 * window buffer, made at window creation (collective over the domain's
 * ranks) and freed with the window (all_here: every rank reached the
 * release; finalized: MPI_Finalize came first and took them). */
int mpi_coll_open(comm_win *w, char *why, size_t why_len);

/* A thread inside MPI longer than its call's deadline, the grace and this
 * is stuck there: the watchdog ends the job (call_guard.h; mpi_coll.c's
 * calls on a buffer, mpi.c's holds of the window's lock). */
#define STUCK_MARGIN_MS 2000

/* A guarded call's allowance: its deadline, PTO_MPI_COLL_GRACE_MS and
 * STUCK_MARGIN_MS, saturating at INT64_MAX. */
int64_t mpi_stuck_allow_ms(int64_t timeout_ms);

/* Says "pto comm: domain D rank R (MPI rank M, pid P): " and the message
 * (printf's format) in one line on stderr, in one write (mpirun forwards
 * the ranks' output in the pieces they write), then ends the job after
 * the hook of the domain's owner (the node's unlinking of its run's
 * objects: MPI_Abort may end this process with SIGKILL), on the domain's
 * communicator, as the node does. */
_Noreturn void mpi_end_job(comm_win *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mpi_coll_close(comm_win *w, bool all_here, bool finalized);
int mpi_coll(comm_win *w, const comm_coll_call *c, int64_t timeout_ms, comm_cancel_fn cancel,
             void *cancel_arg, char *why, size_t why_len);
int mpi_exchange(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                 void *cancel_arg, char *why, size_t why_len);
int mpi_settle(comm_win *w, int buf, uint64_t tag, bool last, comm_settle_fn check, void *check_arg,
               uint64_t *at, int64_t timeout_ms, comm_cancel_fn cancel, void *cancel_arg, char *why,
               size_t why_len);
int mpi_settle_run(const comm_win *w);
size_t mpi_record_max(const comm_win *w, int kind);

#endif
