/* comm_backend.h — the interface a transport implements for domains:
 * window creation in two phases around the allocation barrier, byte-range
 * put/get/accumulate at window offsets, epoch-tagged signals, quiet and
 * barrier. Everything above it (views, bounds, chunking, dtypes) lives in
 * ops.c and is shared by every backend; a backend only moves bytes and
 * orders them. Offsets are bytes from the start of a rank's window, the
 * same on every rank (windows are symmetric), so a backend never needs a
 * peer's address (MPI RMA has none). */
#ifndef PTO_COMM_BACKEND_H
#define PTO_COMM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pto/comm.h"
#include "pto/tensor.h"

typedef struct comm_domain_desc comm_domain_desc;
typedef struct comm_win comm_win; /* backend-private, one per (process, domain) */

/* The seam with the node runtime: which backend a domain uses
 * (comm_domain_desc.backend), picked by comm_domain_open (domain.c).
 *   COMM_BACKEND_SHM (0, a zeroed descriptor): POSIX shared memory between
 *     the chip processes of one node, windows at desc.base in every process.
 *   COMM_BACKEND_MPI: MPI-3 RMA windows (src/comm/mpi.c). Domain rank r is
 *     the process of MPI_COMM_WORLD rank chips[r] (under mpirun, node chip c
 *     is world rank c). Opening the domain is collective over its ranks (the
 *     window and its communicator are created there). desc.prefix is not
 *     used. desc.base 0: the backend places the windows; else the caller
 *     reserved [base, base + nranks * win_bytes) (PROT_NONE) in this
 *     process and each rank's RMA window is created on its slot there.
 *     comm_domain_open takes the base from window_base(). In a build
 *     without MPI (PTO_MPI=OFF) opening fails with PTO_EMPI, "pto was built
 *     without MPI". */
typedef enum comm_backend_kind { COMM_BACKEND_SHM = 0, COMM_BACKEND_MPI = 1 } comm_backend_kind;

/* Stops a blocking backend wait early (the chip run was cancelled). */
typedef bool (*comm_cancel_fn)(void *arg);

/* A collective a backend runs with its own transport's collectives
 * (comm_backend.coll; coll.c decides when). Every rank of the domain makes
 * the same call (coll.c checks the descriptors first); calls on one
 * scratch buffer (`buf`, the window buffer the scratch lies in) are issued
 * in the same order on every rank, calls on different buffers may
 * interleave, so a backend keeps them apart per buffer. */
typedef enum comm_coll_kind {
  COMM_ALLREDUCE = 1,
  COMM_ALLGATHER = 2,
  COMM_REDUCE_SCATTER = 3,
  COMM_BROADCAST = 4,
  COMM_ALLTOALL = 5,
} comm_coll_kind;

typedef struct comm_coll_call {
  comm_coll_kind kind;
  pto_dtype dtype;
  int op;          /* a reducible pto_red_op (allreduce, reduce-scatter) */
  int root;        /* broadcast */
  int64_t count;   /* elements per block: allgather/alltoall/reduce-scatter
                      move nranks blocks */
  const void *src; /* == dst: in place (allreduce); broadcast: unused */
  void *dst;
  int buf;
} comm_coll_call;

/* A record exchange (comm_backend.exchange): every rank of the domain
 * sends each peer p one record, hdr (hdr_bytes, the same for every peer)
 * followed by blocks[p] (block_bytes; no block when blocks or blocks[p] is
 * NULL), and receives one record from every peer, on the collectives of
 * window buffer `buf` (ordered with them as comm_coll_call's). A record is
 * at most max_bytes on every rank (the same bound everywhere, so that ranks
 * whose calls differ still meet and can name the difference). On 0,
 * recv[p] (the caller's array of nranks) is rank p's record, 8-aligned
 * (recv[me] is NULL), valid until the next exchange or collective on buf. */
typedef struct comm_exchange {
  int buf;
  const void *hdr;
  size_t hdr_bytes;
  const void *const *blocks; /* nranks entries, or NULL */
  size_t block_bytes;
  size_t max_bytes;
  const unsigned char **recv;
  /* The call's (epoch << 32 | call number on buf): names a one-way
   * exchange until it is settled; an exchange of a later epoch withdraws
   * what an earlier one left pending (a failed task's). */
  uint64_t tag;
  /* A one-way exchange (a small broadcast's): root >= 0, root_bytes the
   * root's block by this rank's arguments. Only the root sends its record,
   * and the call waits only for it (the root for none): on 0 recv[root]
   * alone is filled (on the root none). The other ranks' headers come
   * later, acknowledged in batches: settle, which the caller makes before
   * its exchange of every call whose number is a multiple of the
   * backend's settle_run, and at its task's end. The backend runs it as a
   * whole exchange (every recv[p] filled) when a record would not go as
   * one message. */
  int root; /* -1: a whole exchange */
  size_t root_bytes;
} comm_exchange;
typedef int (*comm_settle_fn)(void *arg, uint64_t tag, const unsigned char **recv);

typedef struct comm_backend {
  const char *name;
  /* Phase 1: create this rank's window and zero it (before the barrier).
   * On failure, why (may be left "") says what was wrong. */
  int (*create)(const comm_domain_desc *d, int my_rank, comm_win **out, char *why, size_t why_len);
  /* Phase 2, after every rank created its window: reach every peer. */
  int (*attach)(comm_win *w, char *why, size_t why_len);
  /* Where rank 0's window lies in this process when the backend placed the
   * windows itself (rank r's at + r * win_bytes); NULL: at desc.base. */
  uint64_t (*window_base)(const comm_win *w);
  /* Unmaps; unlink = also remove this rank's named object. give_up (NULL:
   * never), asked before and while the backend waits for its peers to
   * release the window together: true when one may never come (the node
   * stopped this chip: a chip died, or stopped answering), so the release
   * is abandoned at once instead of at the domain's deadline. */
  void (*destroy)(comm_win *w, bool unlink, comm_cancel_fn give_up, void *give_up_arg);
  /* Plain copy of n bytes to peer's window at off (may land late). */
  int (*put)(comm_win *w, int peer, uint64_t off, const void *src, size_t n);
  /* Copy from peer's window; completes earlier puts to that peer first. */
  int (*get)(comm_win *w, int peer, uint64_t off, void *dst, size_t n);
  /* Element-wise atomic add of count elements of dt (may land late). */
  int (*accumulate)(comm_win *w, int peer, uint64_t off, pto_dtype dt, const void *src,
                    size_t count);
  /* Completes every earlier put/accumulate to peer, then updates its cell
   * at off with release ordering (epoch-tagged, see signal.h); *written =
   * the word it wrote, 0 when the update was dropped as stale. */
  int (*signal)(comm_win *w, int peer, uint64_t off, pto_signal_op op, int32_t v, uint32_t epoch,
                uint64_t *written);
  /* Acquire-load of my own cell word at off. */
  uint64_t (*signal_load)(comm_win *w, uint64_t off);
  /* Parks until my cell may have changed or deadline_ns; returns false
   * when the deadline passed. cond(arg) is re-checked by the caller. */
  bool (*signal_park)(comm_win *w, bool (*cond)(void *), void *arg, uint64_t deadline_ns);
  /* Wakes rank's waiters parked in signal_park or barrier, when rank's
   * window is mapped in this process (waiters that poll need no wake). */
  void (*wake)(comm_win *w, int rank);
  /* Start (end = false) or end of node task `epoch` on this rank; `group`
   * has bit c set for every node chip c that runs the same (group) task.
   * end: its kernels finished (marked before the end-of-task quiet). */
  void (*task_mark)(comm_win *w, uint32_t epoch, uint64_t group, bool end);
  /* Completes every earlier put/accumulate (peer < 0: to every peer).
   * end_of_task: the node task ends here. */
  int (*quiet)(comm_win *w, int peer, bool end_of_task);
  /* Quiet, then wait until every rank arrived at barrier `seq` of `epoch`.
   * Fills why (for the error details) on timeout or cancellation. */
  int (*barrier)(comm_win *w, uint32_t epoch, uint32_t seq, uint64_t deadline_ns,
                 comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len);
  /* Optional (NULL: the backend has no collectives of its own): runs c and
   * returns 0 once the result is in c->dst on this rank; PTO_EWAIT_TIMEOUT
   * after timeout_ms of waiting (the clock is read only when the call must
   * wait: a small call that completes at once reads none), PTO_ESHUTDOWN
   * when cancel(cancel_arg), PTO_EMPI, with why filled. A call that reached
   * its deadline or was cancelled returns only once the backend no longer
   * uses c->src and c->dst (the MPI backend waits for its request, which
   * MPI cannot withdraw, PTO_MPI_COLL_GRACE_MS at most, then ends the job
   * with MPI_Abort). */
  int (*coll)(comm_win *w, const comm_coll_call *c, int64_t timeout_ms, comm_cancel_fn cancel,
              void *cancel_arg, char *why, size_t why_len);
  /* With coll: runs the record exchange x, with the errors of coll (an
   * exchange that did not complete may still write the backend's own
   * buffers, never the caller's). */
  int (*exchange)(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                  void *cancel_arg, char *why, size_t why_len);
  /* With exchange: the check of the one-way exchanges on buf, whose
   * other ranks sent the root nothing: at a call `tag` whose number is a
   * multiple of settle_run(w) (before its exchange), or `last`, at
   * the task's end (tag: the last call), it completes what the ranks
   * acknowledged of their calls before and calls check(check_arg, t,
   * recv) for each call t, recv[p] being rank p's header of it (recv[me]
   * mine); returns the first nonzero check, or a failure with the errors
   * of exchange and *at the tag of the call it names. */
  int (*settle)(comm_win *w, int buf, uint64_t tag, bool last, comm_settle_fn check,
                void *check_arg, uint64_t *at, int64_t timeout_ms, comm_cancel_fn cancel,
                void *cancel_arg, char *why, size_t why_len);
  /* With settle: the calls of one acknowledgement, the same on every rank
   * of the domain, fixed once the peers are reached (attach). */
  int (*settle_run)(const comm_win *w);
  /* With exchange: the most data a record of a call of `kind` carries to
   * one peer (coll.c's calls whose blocks fit it send them with their
   * records; larger ones exchange descriptors, then run coll), and with
   * kind 0 the most of any call's (what every receive of a record
   * takes, so that ranks whose calls differ still meet): the same on
   * every rank of the domain, fixed once the peers are reached (attach). */
  size_t (*record_max)(const comm_win *w, int kind);
  /* Optional: rank's window as mapped in this process, for the
   * collectives' call table (coll.c): my own stores into my window and
   * loads of peers' words, ordered by release/acquire on the words
   * themselves and woken with wake, without put or signal. Where it gives
   * one, put lands before it returns (a later release store publishes it).
   * NULL (or a NULL result): the backend has no such mapping, or its
   * stores must go through put and signal (fault injection and controlled
   * runs hold them back). */
  unsigned char *(*direct)(comm_win *w, int rank);
} comm_backend;

extern const comm_backend comm_backend_shm;
#ifdef PTO_HAVE_MPI
extern const comm_backend comm_backend_mpi;
#endif

#endif
