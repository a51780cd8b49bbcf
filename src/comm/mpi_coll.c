/* mpi_coll.c — the MPI backend's own collectives: a pto collective whose
 * descriptors agree on every rank (coll.c checks them first: in its call
 * table on shared windows, mpi_direct, where blocks below 32 KiB stay on
 * the windows; else in records every rank sends every peer: mpi_exchange,
 * below, which also carries the data of calls up to 32 KiB) becomes the matching nonblocking MPI
 * collective (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibcast, MPI_Ialltoall)
 * on a communicator of the domain's ranks, one per window buffer: calls on one scratch buffer come
 * in the same order on every rank (one collective at a time per scratch), calls on different
 * buffers may interleave between threads, and MPI matches collectives on a communicator by their
 * order (and messages between two ranks by theirs).
 *
 * Progress: the kernel thread that called issues the request and tests it
 * itself (MPI_THREAD_MULTIPLE, which the backend requires anyway), never
 * parking (poll, below), until the request completes, the domain's
 * deadline passes or the run is cancelled. A relay thread making every
 * MPI call for the kernels was built and measured: its two hand-offs per
 * call made an 8-byte allreduce on 2 ranks 20x slower, and it was removed
 * (docs/comm.md, "Why not a relay thread").
 *
 * A request that did not complete cannot be withdrawn (MPI has no cancel
 * for collectives, and a send may have been matched). A record exchange's
 * (below) works on the buffer's staging: at its deadline it is left in
 * flight, its buffer is marked broken and every later call on it fails at
 * once, naming the reason, instead of matching the wrong call. A
 * collective's works on the caller's src and dst, which MPI owns until it
 * completes: it is issued only once every rank's record came (each rank
 * issues its own right after the exchange), so it completes unless a rank
 * dies or freezes, and a call that reaches its deadline or is cancelled in
 * it waits for it before returning its error (finish): returning with the
 * request in flight would let MPI go on reading and writing the kernel's
 * src and dst (a tile, a task's OUTPUT) after they were the program's
 * again (mpi.coll_late.np2). That wait has a bound, PTO_MPI_COLL_GRACE_MS
 * (30 s by default): a request still pending then, as when a rank froze
 * or never calls, ends the job with MPI_Abort, saying why (end_job;
 * mpi.coll_frozen_*.np2), since the call can neither return nor wait for
 * ever, and where no node runs nothing else would end it. The bound is an
 * option of its own, not the call's deadline again: a deadline may be
 * short where a late peer still comes (coll_late's 1 ms, a peer 100 ms
 * late), and the node's heartbeat names a frozen chip rank, which MPI
 * cannot (control_timeout_ms, 30 s by default: with the default 10 s
 * waits the node usually fails the run first). A rank that dies ends the
 * job too (Open MPI's default, or the node, which ends the job of a
 * failed node). */
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/call_guard.h"
#include "comm/coll_reduce.h"
#include "comm/mpi_win.h"
#include "common/clock.h"
#include "common/options.h"
#include "common/wait.h"

/* ---- f16 and bf16: MPI has no type for them; a user op on MPI_UINT16_T
 * computes in f32 and rounds per step, as coll_reduce does ---- */

#define HALF_OP(name, dt, op)                                                                      \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                             \
    (void)t;                                                                                       \
    coll_reduce(inout, in, *len, dt, op);                                                          \
  }
HALF_OP(f16_sum, PTO_F16, PTO_RED_SUM)
HALF_OP(f16_max, PTO_F16, PTO_RED_MAX)
HALF_OP(f16_min, PTO_F16, PTO_RED_MIN)
HALF_OP(f16_prod, PTO_F16, PTO_RED_PROD)
HALF_OP(bf16_sum, PTO_BF16, PTO_RED_SUM)
HALF_OP(bf16_max, PTO_BF16, PTO_RED_MAX)
HALF_OP(bf16_min, PTO_BF16, PTO_RED_MIN)
HALF_OP(bf16_prod, PTO_BF16, PTO_RED_PROD)

static MPI_User_function *const half_fns[2][4] = {
    {f16_sum, f16_max, f16_min, f16_prod},
    {bf16_sum, bf16_max, bf16_min, bf16_prod},
};
static MPI_Op half_ops[2][4];
static pthread_once_t half_once = PTHREAD_ONCE_INIT;

/* Created once, kept until MPI_Finalize (which frees them). */
static void half_ops_create(void) {
  for (int d = 0; d < 2; d++)
    for (int o = 0; o < 4; o++)
      if (MPI_Op_create(half_fns[d][o], 1, &half_ops[d][o]) != MPI_SUCCESS)
        half_ops[d][o] = MPI_OP_NULL;
}

static MPI_Op red_op(pto_dtype dt, int op) {
  if (dt == PTO_F16 || dt == PTO_BF16) {
    pthread_once(&half_once, half_ops_create);
    return half_ops[dt == PTO_BF16][op & 3];
  }
  static const MPI_Op ops[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
  return ops[op & 3];
}

static MPI_Datatype red_type(pto_dtype dt) {
  switch (dt) {
  case PTO_F32: return MPI_FLOAT;
  case PTO_F64: return MPI_DOUBLE;
  case PTO_I32: return MPI_INT32_T;
  case PTO_F16:
  case PTO_BF16: return MPI_UINT16_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static void err_why(char *why, size_t n, const char *call, int err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(err, msg, &len);
  snprintf(why, n, "%s failed: %s", call, msg);
}

/* ---- records in pieces to the peers on this host ----
 * Open MPI's shared-memory transport (btl vader; sm from Open MPI 5) sends
 * a message at once up to its eager limit (4096 bytes with its header:
 * 4040 bytes of data went so, 4064 took a rendezvous) and beyond it with a
 * rendezvous, a round trip more: exchanging 4176 bytes with a peer of the
 * host took 2.5-3.1 us, in pieces of at most 4032 bytes 0.7-0.9; 8272
 * bytes 2.8-3.3 against 1.1-1.2, 16464 3.2-3.9 against 2.0, 32848 4.3
 * against 3.7. A record is its length, a 64-byte header and the call's
 * block, so a block of 4 KiB, a size programs use, crossed the limit: an
 * allreduce of 4 KiB on 2 ranks of one host's RMA windows took 2.9x
 * MPI_Allreduce's time (3.0 us; 0.7 us at 2 KiB), 0.99x in pieces.
 * Across hosts (TCP, eager up to 64 KiB) pieces cost more than they save
 * (a 4176-byte exchange 22 -> 31 us, 32848 bytes 28 -> 100), so only
 * records to peers on this host go in pieces, and only where the job
 * leaves that transport in (its btl and pml selections). The limit and
 * selections are MCA parameters, read from the environment (OMPI_MCA_*,
 * which mpirun's --mca sets too), defaults otherwise: the MPI tool
 * interface has them exactly, but its init and finalize took 206 ms,
 * which every domain's creation would pay. A parameter file's values are
 * not seen. */
#define PIECE_MIN     1024
#define EAGER_DEFAULT 4096 /* btl_vader_eager_limit's and btl_sm_eager_limit's default */

/* Whether an MCA selection ("vader,self", "^tcp"; NULL or "" for none)
 * allows the component named `a` or `b`. */
static bool selection_allows(const char *sel, const char *a, const char *b) {
  if (!sel || !sel[0]) return true;
  bool excl = sel[0] == '^', named = false;
  char list[256];
  snprintf(list, sizeof list, "%s", sel + excl);
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
    named = named || strcmp(t, a) == 0 || strcmp(t, b) == 0;
  return excl ? !named : named;
}

/* An eager limit `v` (an MCA parameter's value, NULL: unset, `def`) less
 * 64 bytes for the transport's header, in 64s; false when v is not a
 * plain number (not guessed). */
static bool eager_less_header(const char *v, unsigned long long def, size_t *bytes) {
  char *end = NULL;
  unsigned long long eager = v ? strtoull(v, &end, 0) : def;
  if (v && (end == v || *end)) return false;
  *bytes = eager > 64 ? (size_t)((eager - 64) & ~63ull) : 0;
  return true;
}

/* The piece size of records to peers on this host: the shared-memory
 * transport's eager limit less its header; 0 for whole records. */
static size_t record_piece(void) {
  if (!selection_allows(getenv("OMPI_MCA_btl"), "vader", "sm") ||
      !selection_allows(getenv("OMPI_MCA_pml"), "ob1", "ob1"))
    return 0;
  const char *v = getenv("OMPI_MCA_btl_vader_eager_limit");
  size_t piece;
  if (!eager_less_header(v ? v : getenv("OMPI_MCA_btl_sm_eager_limit"), EAGER_DEFAULT, &piece))
    return 0;
  return piece >= PIECE_MIN ? piece : 0;
}

/* The longest one-way record (below, "one-way exchanges"): it goes as one
 * message, which the transport should send at once. To a peer on this
 * host, one piece (the shared-memory transport's eager limit: above it a
 * rendezvous, a round trip more) and at most a 4 KiB block; to a peer on
 * another host, TCP's eager limit (64 KiB by default), and at most a 32
 * KiB block (the root's ring of 2 runs of 64 records is then 4 MiB,
 * touched as far as records fill it). Across two hosts a whole exchange
 * of a 32 KiB broadcast's records took 28.6 us, MPI_Bcast 13.2 (the root
 * waited for its peer's record, a round trip); one-way, 13.6-13.7. */
#define ONEWAY_REC_NEAR   4224 /* 4096 + 128: a 4 KiB block, its header and length */
#define ONEWAY_REC_FAR    ((32u << 10) + 128u) /* a 32 KiB block, its header and length */
#define TCP_EAGER_DEFAULT 65536                /* btl_tcp_eager_limit's default */

/* The longest one-way record to a peer on another host: TCP's eager limit
 * less its header, between ONEWAY_REC_NEAR and ONEWAY_REC_FAR (above);
 * ONEWAY_REC_NEAR where the job may take another transport (its btl and
 * pml selections), whose limits are not read. */
static size_t record_far(void) {
  size_t most;
  if (!selection_allows(getenv("OMPI_MCA_btl"), "tcp", "tcp") ||
      !selection_allows(getenv("OMPI_MCA_pml"), "ob1", "ob1") ||
      !eager_less_header(getenv("OMPI_MCA_btl_tcp_eager_limit"), TCP_EAGER_DEFAULT, &most))
    return ONEWAY_REC_NEAR;
  return most < ONEWAY_REC_NEAR ? ONEWAY_REC_NEAR : most > ONEWAY_REC_FAR ? ONEWAY_REC_FAR : most;
}

/* The run of one-way calls acknowledged at once (below, "one-way
 * exchanges"): a root waits, at each run's end, for what its peers
 * acknowledged a run before, so it may run 1-2 runs ahead of them. That
 * is enough on one host, where a record takes a few microseconds. Across
 * hosts (Open MPI's TCP transport, two network-namespace hosts on one
 * machine) a root's 8-byte record reached its peer in about 15 us and a
 * root's call took about 8: with runs of 16 the root waited 13 us at
 * every run's end (a 2-rank 8-byte broadcast 1.23-1.31x MPI_Bcast's
 * time), with runs of 64 it runs far enough ahead (1.07-1.12x). On one
 * host longer runs only cost: the root's ring of records is 2 runs long,
 * and a 2-rank 8-byte broadcast on RMA windows took 0.50-0.63 us with
 * runs of 64 against 0.36-0.37 with 16. docs/comm.md, "One-way
 * broadcasts", has the commands. */
#define ONEWAY_RUN_NEAR 16 /* every rank of the domain on one host */
#define ONEWAY_RUN_FAR  64 /* ranks on several hosts */

/* The most data one rank's record carries to a peer (coll.c's fused
 * calls; a larger call exchanges descriptors, then runs MPI's nonblocking
 * collective). On one host, 32 KiB (less for some calls: mpi_record_max,
 * below), less on a large domain, so that a
 * buffer's staging (2n records, below) stays within RECORD_STAGE: below
 * it the records (one message to each peer) beat the descriptors'
 * exchange followed by MPI_Iallreduce (docs/comm.md), and above it the
 * records' copies through the staging cost more than they save. Between
 * 2 ranks on two hosts (TCP), 1 MiB: there the descriptors' exchange is a
 * round trip of about 20 us before MPI's collective starts, which a
 * record carrying the data does not wait for: allreduce of 64 KiB-1 MiB
 * 1.06-1.78x MPI_Allreduce through the descriptors, 0.88-1.08x through
 * the records, broadcast of 64-256 KiB 1.35-1.59x against 1.23-1.30x
 * (medians of 3 runs; docs/comm.md has them and the commands). More
 * ranks on several hosts, not measured, keep 32 KiB. (Their staging is 4
 * MiB a buffer, allocated at its first exchange and touched only as far
 * as records fill it.) PTO_MPI_RECORD_BYTES sets it instead (the
 * smallest any rank sets). */
#define RECORD_NEAR  ((size_t)32 << 10)
#define RECORD_FAR   ((size_t)1 << 20)
#define RECORD_STAGE ((size_t)2 << 20)

/* n ranks; `alone`: each alone on its host */
static size_t record_max(int n, bool alone) {
  if (alone && n == 2) return RECORD_FAR;
  if ((size_t)n <= RECORD_STAGE / (2 * RECORD_NEAR)) return RECORD_NEAR;
  size_t b = RECORD_STAGE / (2 * (size_t)n) & ~(size_t)63;
  return b < RECORD_NEAR ? b : RECORD_NEAR;
}

/* On one host some calls' data moves faster on MPI's path than in the
 * records: a record costs a copy into the staging and one out of it, and
 * from 4 KiB it goes in pieces, where MPI's path moves the caller's
 * buffers. pto's time over Open MPI's call, RMA windows of one host,
 * records of 32 KiB against these bounds, medians of 6 alternated rounds
 * (bench/results/coll_mpi_record_kinds/, commands there):
 * - between 2 ranks an allreduce, allgather or all-to-all beyond the
 *   records is one exchange of the caller's buffers (pair_exchange):
 *   allreduce of 32 KiB 0.83 -> 0.56x, allgather of 16 and 32 KiB 1.37
 *   -> 1.16x and 1.81 -> 1.10x, all-to-all of 16 and 32 KiB blocks 1.27
 *   -> 1.14x and 1.84 -> 1.12x, while at 8 KiB the records won (the
 *   allgather's 0.83x against 1.27x through the exchange, in a sweep of
 *   the bound): RECORD_NEAR_PAIR;
 * - a broadcast of 32 KiB through MPI_Ibcast: 1.25 -> 1.20x on 2 ranks,
 *   1.43 -> 1.18x on 4 (of 16 KiB the records won: 0.93-0.99x against
 *   1.31x); an allreduce of 32 KiB on 4 ranks through MPI_Iallreduce 1.07
 *   -> 0.86x; an all-to-all of 24 and 32 KiB blocks on 3 or 4 ranks, whose
 *   records go in more than 5 pieces (the rest then one message, beyond
 *   the eager limit: message_at), 2.1-3.1x in records against 1.16-1.30x
 *   through MPI_Ialltoall: RECORD_NEAR_MPI;
 * - a reduce-scatter's records won or were level at every size up to 32
 *   KiB blocks (on 4 ranks blocks of 16 KiB 0.80x against 1.23x), and so
 *   were 4 ranks' allgathers: 32 KiB.
 * Across hosts, or where PTO_MPI_RECORD_BYTES sets the bound, every call
 * has the one bound (xkinds false). */
#define RECORD_NEAR_PAIR ((size_t)8 << 10)
#define RECORD_NEAR_MPI  ((size_t)16 << 10)

size_t mpi_record_max(const comm_win *w, int kind) {
  size_t b = w->xrecmax, k = b;
  if (!w->xkinds) return b;
  if (w->d.nranks == 2 &&
      (kind == COMM_ALLREDUCE || kind == COMM_ALLGATHER || kind == COMM_ALLTOALL))
    k = RECORD_NEAR_PAIR;
  else if (kind == COMM_BROADCAST || kind == COMM_ALLREDUCE || kind == COMM_ALLTOALL)
    k = RECORD_NEAR_MPI;
  return k < b ? k : b;
}

/* The peers on this host (bit per domain rank), the pieces of the records
 * to them, the run of one-way calls, the longest one-way record and the
 * most data of a record, the same on every rank (the smallest piece any
 * rank found: the two ends of a pair must cut and join alike; the longer
 * run when any rank has a peer on another host). */
static int near_peers(comm_win *w, char *why, size_t why_len) {
  MPI_Comm node;
  MPI_Group all, local;
  int err = MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, "MPI_Comm_split_type (the ranks on this host)", err);
    return PTO_EMPI;
  }
  int k;
  MPI_Comm_size(node, &k);
  int in[PTO_COMM_MAX_RANKS], out[PTO_COMM_MAX_RANKS];
  for (int i = 0; i < k && i < PTO_COMM_MAX_RANKS; i++)
    in[i] = i;
  MPI_Comm_group(node, &local);
  MPI_Comm_group(w->comm, &all);
  MPI_Group_translate_ranks(local, k, in, all, out);
  MPI_Group_free(&local);
  MPI_Group_free(&all);
  MPI_Comm_free(&node);
  w->xnear = 0;
  for (int i = 0; i < k; i++)
    if (out[i] != MPI_UNDEFINED && out[i] != w->my_rank) w->xnear |= (uint64_t)1 << out[i];
  /* the longest one-way record I may send or take: one message to each
   * peer, on this host and on others */
  size_t piece = record_piece(), one = k < w->d.nranks ? record_far() : ONEWAY_REC_FAR;
  size_t near = piece && piece < ONEWAY_REC_NEAR ? piece : ONEWAY_REC_NEAR;
  if (k > 1 && near < one) one = near;
  /* [0]: the piece; [1]: 1 when all my peers are on this host; [2]: the
   * one-way record; [3]: 1 when I am alone on this host; [4]: the
   * records' data as PTO_MPI_RECORD_BYTES sets it, ULONG_MAX unset */
  long long set = pto_option(PTO_OPT_MPI_RECORD_BYTES);
  unsigned long mine[5] = {(unsigned long)piece, k == w->d.nranks, (unsigned long)one, k == 1,
                           set < 0 ? ULONG_MAX : (unsigned long)set};
  unsigned long min[5] = {0, 0, 0, 0, 0};
  err = MPI_Allreduce(mine, min, 5, MPI_UNSIGNED_LONG, MPI_MIN, w->comm);
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, "MPI_Allreduce (the records' piece size and run)", err);
    return PTO_EMPI;
  }
  w->xpiece = (size_t)min[0];
  w->xrun = min[1] ? ONEWAY_RUN_NEAR : ONEWAY_RUN_FAR;
  w->xonemax = (size_t)min[2];
  w->xrecmax = min[4] != ULONG_MAX ? (size_t)min[4] : record_max(w->d.nranks, min[3]);
  w->xkinds = min[1] && min[4] == ULONG_MAX; /* one host, the bound not set */
  return 0;
}

static void stuck(call_guard *g, double stuck_ms);

int mpi_coll_open(comm_win *w, char *why, size_t why_len) {
  if (w->my_rank < 0) return 0;
  int rc = near_peers(w, why, why_len);
  if (rc) return rc;
  for (int i = 0; i < w->d.nbuffers; i++) {
    w->bstuck[i].g.arg = w;
    if (call_guard_watch(&w->bstuck[i].g, stuck)) {
      snprintf(why, why_len, "cannot start the thread that watches for calls stuck in MPI");
      return PTO_ESYSTEM;
    }
  }
  for (int i = 0; i < w->d.nbuffers; i++) {
    int err = MPI_Comm_dup(w->comm, &w->bcomm[i]);
    if (err != MPI_SUCCESS) {
      w->bcomm[i] = MPI_COMM_NULL;
      err_why(why, why_len, "MPI_Comm_dup (the collectives' communicators)", err);
      return PTO_EMPI;
    }
    MPI_Comm_set_errhandler(w->bcomm[i], MPI_ERRORS_RETURN);
  }
  return 0;
}

static int oneway_withdraw(comm_win *w, int buf, uint32_t epoch, char *why, size_t why_len);

static void guard_begin(comm_win *w, int buf, const char *what, int64_t timeout_ms);
static void guard_end(comm_win *w, int buf);

void mpi_coll_close(comm_win *w, bool all_here, bool finalized) {
  for (int i = 0; i < PTO_COMM_MAX_BUFFERS; i++) {
    char why[256];
    /* what a failed task left of its one-way exchanges (a task that ended
     * well settled them) */
    if (w->xone[i] && !finalized) {
      guard_begin(w, i, "the withdrawal of the one-way broadcasts' messages", 0);
      oneway_withdraw(w, i, 0, why, sizeof why);
      guard_end(w, i);
    }
    call_guard_unwatch(&w->bstuck[i].g);
    /* a broken buffer's requests are still pending: its communicator and
     * staging stay */
    if (w->bbroken[i] && !finalized) continue;
    if (w->bcomm[i] != MPI_COMM_NULL && all_here && !finalized) MPI_Comm_free(&w->bcomm[i]);
    free(w->xstage[i]);
    w->xstage[i] = NULL;
    free(w->xone[i]);
    w->xone[i] = NULL;
  }
}

static const char *call_name(comm_coll_kind k) {
  switch (k) {
  case COMM_ALLREDUCE: return "MPI_Iallreduce";
  case COMM_ALLGATHER: return "MPI_Iallgather";
  case COMM_REDUCE_SCATTER: return "MPI_Ireduce_scatter_block";
  case COMM_BROADCAST: return "MPI_Ibcast";
  case COMM_ALLTOALL: return "MPI_Ialltoall";
  }
  return "?";
}

/* The bytes of each rank's block. */
static size_t call_bytes(const comm_coll_call *c) {
  return (size_t)c->count * pto_dtype_size(c->dtype);
}

/* What a broadcast's root sends. Its send only reads the buffer, so it
 * sends src itself and copies src into its own dst once the send started
 * (*copy_after), meanwhile the peers take the data, unless the two
 * overlap: then src is moved into dst first and dst is sent. */
static const void *bcast_root_buffer(const comm_coll_call *c, bool *copy_after) {
  size_t bytes = call_bytes(c);
  uintptr_t s = (uintptr_t)c->src, d = (uintptr_t)c->dst;
  *copy_after = s && (s + bytes <= d || d + bytes <= s);
  if (*copy_after) return c->src;
  if (c->src != c->dst) memmove(c->dst, c->src, bytes);
  return c->dst;
}

/* Issues c on comm. Counts fit int: coll.c sends larger calls elsewhere.
 * *copy_after: the caller copies src into dst once the call started (a
 * broadcast's root: bcast_root_buffer). */
static int start(const comm_coll_call *c, MPI_Comm comm, int me, MPI_Request *req,
                 bool *copy_after) {
  int bytes = (int)call_bytes(c), count = (int)c->count;
  const void *src = c->src == c->dst ? MPI_IN_PLACE : c->src;
  switch (c->kind) {
  case COMM_ALLREDUCE:
    return MPI_Iallreduce(src, c->dst, count, red_type(c->dtype), red_op(c->dtype, c->op), comm,
                          req);
  case COMM_ALLGATHER:
    return MPI_Iallgather(c->src, bytes, MPI_BYTE, c->dst, bytes, MPI_BYTE, comm, req);
  case COMM_REDUCE_SCATTER:
    return MPI_Ireduce_scatter_block(c->src, c->dst, count, red_type(c->dtype),
                                     red_op(c->dtype, c->op), comm, req);
  case COMM_BROADCAST: {
    /* MPI_Ibcast reads the root's buffer and never writes it */
    const void *b = me == c->root ? bcast_root_buffer(c, copy_after) : c->dst;
    return MPI_Ibcast((void *)b, bytes, MPI_BYTE, c->root, comm, req);
  }
  case COMM_ALLTOALL:
    return MPI_Ialltoall(c->src, bytes, MPI_BYTE, c->dst, bytes, MPI_BYTE, comm, req);
  }
  return MPI_ERR_ARG;
}

typedef struct pieces pieces;

typedef struct req_poll {
  MPI_Request *req;
  int nreq;
  int err;
  comm_cancel_fn cancel;
  void *cancel_arg;
  bool cancelled;
  pieces *pc; /* a record exchange whose receives go on in pieces (below), or NULL */
  bool late;  /* finish, owned: they completed, without error, after it gave up */
} req_poll;

static bool pieces_test(req_poll *p);

/* A poll of n requests, stopped early by cancel (NULL: never). */
static req_poll reqs(MPI_Request *req, int n, comm_cancel_fn cancel, void *cancel_arg) {
  return (req_poll){
      .req = req, .nreq = n, .err = MPI_SUCCESS, .cancel = cancel, .cancel_arg = cancel_arg};
}

/* MPI_Testall of n requests, with the error of one that failed: Open MPI
 * reports it as MPI_ERR_IN_STATUS ("error code in status": the call
 * failed without its cause) and frees the request, so the cause is only
 * in its status (MPI_ERR_TRUNCATE: a record longer than its receive).
 * Statuses are asked for up to TESTALL_STATUSES requests (an exchange's
 * on up to 9 ranks in one message each), or for all n into `keep` (NULL:
 * not kept); beyond, the error stays MPI_ERR_IN_STATUS. */
#define TESTALL_STATUSES 16
static int testall(int n, MPI_Request *req, int *flag, MPI_Status *keep) {
  MPI_Status mine[TESTALL_STATUSES], *st = keep ? keep : mine;
  bool named = keep || n <= TESTALL_STATUSES;
  int err = MPI_Testall(n, req, flag, named ? st : MPI_STATUSES_IGNORE);
  for (int i = 0; err == MPI_ERR_IN_STATUS && named && i < n; i++)
    if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) err = st[i].MPI_ERROR;
  return err;
}

static bool req_ready(void *arg) {
  req_poll *p = arg;
  int flag = 0;
  /* one request's error comes back as itself (MPI_ERR_TRUNCATE: a
   * one-way record longer than its receive); several requests' through
   * testall */
  if (p->pc)
    flag = pieces_test(p);
  else if (p->nreq == 1)
    p->err = MPI_Test(p->req, &flag, MPI_STATUS_IGNORE);
  else
    p->err = testall(p->nreq, p->req, &flag, NULL);
  if (flag || p->err != MPI_SUCCESS) return true;
  p->cancelled = p->cancel && p->cancel(p->cancel_arg);
  return p->cancelled;
}

/* Tests the requests until they complete or timeout_ms passed, reading the
 * clock only once a first spin ended with them pending (two clock reads were
 * about a sixth of pto's own work in an 8-byte allreduce, and the first
 * test finds them pending in most calls, the peer's record a round trip
 * away: after it, the two reads were still 4.7% of rank 0's samples in an
 * 8-byte allreduce on 2 ranks of RMA windows): spins about
 * PTO_SPIN_NS while this process's threads leave a CPU free
 * (pto_wait_unparked_own), then yields once, and again. The yield is for
 * the peer ranks, which are other processes, on a loaded or oversubscribed
 * host (Open MPI's own waits yield so with mpi_yield_when_idle). It does
 * not count the ranks registered as sharing the CPUs (wait.c), as the
 * other waits do: yielding at every look, as they then would, made the
 * MPI collectives of 64 KiB on 4 ranks sharing 2 CPUs slower. */
static bool poll(req_poll *p, int64_t timeout_ms) {
  if (req_ready(p) || pto_wait_spin_own(req_ready, p)) return true;
  uint64_t deadline_ns = pto_deadline_ms(timeout_ms);
  uint64_t slice = (uint64_t)pto_option_cached(PTO_OPT_SPIN_NS);
  for (;;) {
    uint64_t now = pto_now_ns();
    if (now >= deadline_ns) return req_ready(p);
    uint64_t until = deadline_ns - now > slice ? now + slice : deadline_ns;
    if (pto_wait_unparked_own(req_ready, p, until)) return true;
    sched_yield();
  }
}

/* The buffer's communicator, or why not (0 when usable). */
static int usable(comm_win *w, int buf, char *why, size_t why_len) {
  if (buf < 0 || buf >= w->d.nbuffers || w->bcomm[buf] == MPI_COMM_NULL) {
    snprintf(why, why_len, "no communicator for window buffer %d", buf);
    return PTO_EINVAL;
  }
  if (w->bbroken[buf]) {
    snprintf(why, why_len,
             "an earlier collective on window buffer %s did not complete (timed out or "
             "stopped) and MPI cannot withdraw it: the buffer's collectives are out of step "
             "(use another scratch buffer, or a new run)",
             w->d.buffers[buf].name);
    return PTO_EMPI;
  }
  return 0;
}

_Noreturn void mpi_end_job(comm_win *w, const char *fmt, ...) {
  int world = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  char msg[1024];
  int len =
      snprintf(msg, sizeof msg, "pto comm: domain %d rank %d (MPI rank %d, pid %d): ", w->d.id,
               w->my_rank, world, (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + len, sizeof msg - 1 - (size_t)len, fmt, ap);
  va_end(ap);
  len = (int)strlen(msg);
  msg[len++] = '\n';
  if (write(2, msg, (size_t)len) < 0) { /* nowhere else to say it */
  }
  comm_job_end(w->d.prefix);
  MPI_Abort(w->comm, 1);
  _exit(1); /* MPI_Abort does not return */
}

/* A collective on the caller's src and dst that did not complete by its
 * deadline (or was cancelled), nor in the grace after it: the call can
 * neither return (MPI would write the caller's memory later, as the
 * request is never withdrawn) nor wait for ever (a rank that froze, or
 * never calls, would keep this kernel in the call for good, and nothing
 * else ends it where no node runs). So it ends the job, saying why. */
static void end_job(comm_win *w, int buf, const char *what, bool cancelled, int64_t timeout_ms,
                    int64_t grace_ms, double waited_ms) {
  mpi_end_job(w,
              "%s on window buffer %s %s%lld ms), %s the %.0f ms it then waited "
              "(PTO_MPI_COLL_GRACE_MS %lld): a rank of the domain did not make the call, or froze "
              "in it. MPI still owns the call's src and dst and cannot withdraw the request, so "
              "returning would let MPI write them later: ending the MPI job (MPI_Abort)",
              what, w->d.buffers[buf].name,
              cancelled ? "was cancelled before it completed (deadline "
                        : "did not complete by its deadline (",
              (long long)timeout_ms, cancelled ? "and did not complete in" : "nor in", waited_ms,
              (long long)grace_ms);
}

/* ---- a thread stuck inside MPI (call_guard.h) ----
 *
 * A deadline bounds a call only while MPI returns control: each call on
 * a buffer (mpi_coll, mpi_exchange, mpi_settle, and the withdrawal of a
 * failed task's one-way exchanges) arms the buffer's guard with its
 * deadline, the grace and STUCK_MARGIN_MS; a thread still inside MPI by
 * then, which no path of these calls leaves it, ends the job from the
 * watchdog thread (Open MPI 4.1 deadlocked so in MPI_Testall when a peer
 * on another host died during a 2 MiB exchange: mpi.coll_die_pair_two_hosts
 * hung 1 run in 8). One call at a time per buffer: the caller holds its
 * coll_lock, or ends the task. (mpi.c guards its RMA calls alike.) */

int64_t mpi_stuck_allow_ms(int64_t timeout_ms) {
  int64_t more = (int64_t)pto_option_cached(PTO_OPT_MPI_COLL_GRACE_MS) + STUCK_MARGIN_MS;
  return timeout_ms > INT64_MAX - more ? INT64_MAX : timeout_ms + more;
}

static void stuck(call_guard *g, double stuck_ms) {
  comm_win *w = g->arg;
  mpi_stuck *s = (mpi_stuck *)g;
  mpi_end_job(w,
              "%s on window buffer %s did not complete by its deadline (%lld ms), nor in the grace "
              "after it (PTO_MPI_COLL_GRACE_MS %lld) and %d ms more: the thread making it has been "
              "inside MPI for %.0f ms, stuck there (Open MPI 4.1's TCP transport deadlocks so when "
              "a peer dies during a large message). MPI may still write the call's memory: ending "
              "the MPI job (MPI_Abort)",
              atomic_load_explicit(&s->what, memory_order_relaxed),
              w->d.buffers[(int)(s - w->bstuck)].name,
              (long long)atomic_load_explicit(&s->timeout_ms, memory_order_relaxed),
              (long long)pto_option_cached(PTO_OPT_MPI_COLL_GRACE_MS), STUCK_MARGIN_MS, stuck_ms);
}

/* The thread making `what` on buf stays inside MPI at most timeout_ms,
 * the grace and STUCK_MARGIN_MS (no bound without a deadline). */
static void guard_begin(comm_win *w, int buf, const char *what, int64_t timeout_ms) {
  if (timeout_ms < 0) return;
  mpi_stuck *s = &w->bstuck[buf];
  atomic_store_explicit(&s->what, what, memory_order_relaxed);
  atomic_store_explicit(&s->timeout_ms, timeout_ms, memory_order_relaxed);
  call_guard_arm(&s->g, mpi_stuck_allow_ms(timeout_ms));
}
static void guard_end(comm_win *w, int buf) { call_guard_disarm(&w->bstuck[buf].g); }

/* Tests the requests the call `what` issued on buf to the end: 0 when they
 * completed. When the deadline passed or the run is cancelled first:
 * requests on the caller's memory (`owned`: a collective's src and dst,
 * which MPI owns until it completes; see the top of this file) are waited
 * for, PTO_MPI_COLL_GRACE_MS more at most, then the call fails saying so,
 * and the buffer's collectives stay in step, every rank's request having
 * completed; one still pending then ends the job (end_job). Requests on
 * the backend's staging (a record exchange) stay in flight, and the
 * buffer is broken. */
static int finish(comm_win *w, int buf, req_poll *p, int64_t timeout_ms, bool owned,
                  const char *what, char *why, size_t why_len) {
  if (poll(p, timeout_ms) && !p->cancelled) {
    if (p->err == MPI_SUCCESS) return 0;
    err_why(why, why_len, what, p->err);
    return PTO_EMPI;
  }
  if (owned) {
    uint64_t t0 = pto_now_ns(); /* not before: a call that completes reads no clock */
    int64_t grace = (int64_t)pto_option_cached(PTO_OPT_MPI_COLL_GRACE_MS);
    req_poll rest = reqs(p->req, p->nreq, NULL, NULL);
    bool done = poll(&rest, grace);
    double waited_ms = (double)(pto_now_ns() - t0) / 1e6;
    if (!done) end_job(w, buf, what, p->cancelled, timeout_ms, grace, waited_ms);
    p->late = rest.err == MPI_SUCCESS;
    snprintf(why, why_len,
             "%s on window buffer %s %s; MPI owns the call's src and dst until it completes, so "
             "the call waited for it (%.0f ms more%s)",
             what, w->d.buffers[buf].name,
             p->cancelled ? "was stopped" : "did not complete in time", waited_ms,
             rest.err == MPI_SUCCESS ? "" : ", with an error");
  } else {
    w->bbroken[buf] = true; /* the requests stay in flight */
    snprintf(why, why_len, "%s on window buffer %s %s", what, w->d.buffers[buf].name,
             p->cancelled ? "was stopped" : "did not complete (a rank did not call it, or died)");
  }
  return p->cancelled ? PTO_ESHUTDOWN : PTO_EWAIT_TIMEOUT;
}

/* Between 2 ranks some calls are one exchange: each rank sends the peer
 * its block (MPI_Isend/MPI_Irecv on a tag of their own), as Open MPI's
 * blocking calls do for 2 ranks, where its nonblocking ones (libnbc) were
 * slower (3 alternations or more each, docs/comm.md):
 * - an allreduce: with the peer on another host (TCP) MPI_Iallreduce
 *   took 1.12-1.26x MPI_Allreduce's time at 2-16 MiB, the exchange
 *   0.90-1.01x. On one host's RMA windows libnbc's was faster in one
 *   phase of the host (2 MiB 0.39x against 0.47x, 16 MiB 0.82x against
 *   0.94x) and slower in another (64 KiB-4 MiB 0.85-1.03x against
 *   0.38-0.61x, 16 MiB 1.13-1.25x against 0.79-1.09x): the exchange
 *   holds the target in both. Each rank reduces the peer's src into dst.
 * - an allgather or all-to-all with the peer on this host:
 *   MPI_Iallgather took 2.2-2.7x MPI_Allgather's time at 64 KiB-2 MiB,
 *   the exchange 0.97-1.20x; MPI_Ialltoall 1.13x at 256 KiB, the exchange
 *   1.02-1.04x. Across two hosts the exchange gained nothing there
 *   (allgather 2 MiB 0.81-0.90x against 0.84-0.96x).
 * - a broadcast with the peer on this host: the root's one send
 *   (pair_bcast), docs/comm.md, "A 2-rank broadcast is one send".
 * Both ranks decide alike: each finds the other on this host, or not (an
 * allreduce is one exchange either way).
 * Both reduce in rank order, rank 0's block first, as the mesh's fold:
 * the same bits on both (a op b is not b op a for a NaN against max or
 * min, or two NaNs' payloads). */
#define PAIR_TAG 0x72
static bool pair_exchange(const comm_win *w, const comm_coll_call *c) {
  if (w->d.nranks != 2) return false;
  bool near = w->xnear >> (1 - w->my_rank) & 1;
  return c->kind == COMM_ALLREDUCE ||
         ((c->kind == COMM_ALLGATHER || c->kind == COMM_ALLTOALL || c->kind == COMM_BROADCAST) &&
          near);
}

static const char *pair_what(comm_coll_kind k) {
  switch (k) {
  case COMM_ALLREDUCE: return "the 2-rank allreduce's exchange (MPI_Isend/MPI_Irecv)";
  case COMM_ALLGATHER: return "the 2-rank allgather's exchange (MPI_Isend/MPI_Irecv)";
  case COMM_ALLTOALL: return "the 2-rank all-to-all's exchange (MPI_Isend/MPI_Irecv)";
  case COMM_BROADCAST: return "the 2-rank broadcast's send (MPI_Isend/MPI_Irecv)";
  default: return "the 2-rank exchange (MPI_Isend/MPI_Irecv)";
  }
}

/* Posts the exchange: the peer's block into `into`, `from` to the peer,
 * bytes each way. A receive left alone by a failed send is withdrawn (an
 * unmatched one ends at once); one that matched and does not end within
 * the grace owns `into` (maybe dst): the job ends (end_job). The peer's
 * send may still come: the buffer's calls are out of step. */
static int pair_post(comm_win *w, const comm_coll_call *c, void *into, const void *from,
                     size_t bytes, MPI_Request req[2]) {
  int peer = 1 - w->my_rank;
  MPI_Comm comm = w->bcomm[c->buf];
  int err = MPI_Irecv(into, (int)bytes, MPI_BYTE, peer, PAIR_TAG, comm, &req[0]);
  if (err != MPI_SUCCESS) return err;
  err = MPI_Isend(from, (int)bytes, MPI_BYTE, peer, PAIR_TAG, comm, &req[1]);
  if (err != MPI_SUCCESS) {
    w->bbroken[c->buf] = true;
    MPI_Cancel(&req[0]);
    int64_t grace = (int64_t)pto_option_cached(PTO_OPT_MPI_COLL_GRACE_MS);
    req_poll rp = reqs(&req[0], 1, NULL, NULL);
    uint64_t t0 = pto_now_ns();
    if (!poll(&rp, grace))
      end_job(w, c->buf, pair_what(c->kind), false, 0, grace, (double)(pto_now_ns() - t0) / 1e6);
  }
  return err;
}

/* An allreduce's exchange, then dst = rank 0's block op rank 1's. The
 * peer's block lands in dst, or, in place, in a block of its own (left
 * behind when the call did not complete: a request may still write it).
 * An exchange that completed after the deadline, while finish waited for
 * it, still leaves the result in dst, as MPI's collective would (the call
 * fails all the same). */
static int pair_allreduce(comm_win *w, const comm_coll_call *c, int64_t timeout_ms,
                          comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  size_t bytes = call_bytes(c);
  bool in_place = c->src == c->dst;
  void *theirs = in_place ? malloc(bytes) : c->dst;
  if (!theirs) {
    snprintf(why, why_len, "no memory for the peer's %zu bytes of an in-place allreduce", bytes);
    return PTO_ENOMEM;
  }
  const char *what = pair_what(c->kind);
  MPI_Request req[2];
  int err = pair_post(w, c, theirs, c->src, bytes, req);
  if (err != MPI_SUCCESS) {
    if (in_place) free(theirs);
    err_why(why, why_len, what, err);
    return PTO_EMPI;
  }
  req_poll p = reqs(req, 2, cancel, cancel_arg);
  int rc = finish(w, c->buf, &p, timeout_ms, true, what, why, why_len);
  if (rc && !p.late) return rc;
  const void *first = w->my_rank == 0 ? c->src : theirs;
  const void *second = w->my_rank == 0 ? theirs : c->src;
  if (first == c->dst) /* dst holds rank 0's block */
    coll_reduce(c->dst, second, c->count, c->dtype, (pto_red_op)c->op);
  else /* dst holds rank 1's */
    coll_reduce_after(first, c->dst, c->count, c->dtype, (pto_red_op)c->op);
  if (in_place) free(theirs);
  return rc;
}

/* An allgather's or all-to-all's exchange: the peer's block into dst's
 * block of the peer, my own (an all-to-all's: src's block of mine) into
 * mine meanwhile (coll.c passes a src that overlaps dst as a copy). */
static int pair_move(comm_win *w, const comm_coll_call *c, int64_t timeout_ms,
                     comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  size_t bytes = call_bytes(c);
  int me = w->my_rank, peer = 1 - me;
  bool a2a = c->kind == COMM_ALLTOALL;
  unsigned char *d = c->dst;
  const unsigned char *src = c->src;
  const char *what = pair_what(c->kind);
  MPI_Request req[2];
  int err =
      pair_post(w, c, d + (size_t)peer * bytes, a2a ? src + (size_t)peer * bytes : src, bytes, req);
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, what, err);
    return PTO_EMPI;
  }
  memcpy(d + (size_t)me * bytes, a2a ? src + (size_t)me * bytes : src, bytes);
  req_poll p = reqs(req, 2, cancel, cancel_arg);
  return finish(w, c->buf, &p, timeout_ms, true, what, why, why_len);
}

/* A broadcast's one send: the root sends what bcast_root_buffer gives
 * (src, copied into dst meanwhile, or dst), the other rank receives it
 * into dst. A receive that could not be posted leaves the root's send to
 * match a later call's: the buffer's calls are out of step (broken). */
static int pair_bcast(comm_win *w, const comm_coll_call *c, int64_t timeout_ms,
                      comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  size_t bytes = call_bytes(c);
  MPI_Comm comm = w->bcomm[c->buf];
  const char *what = pair_what(c->kind);
  MPI_Request req;
  int err;
  if (w->my_rank == c->root) {
    bool copy_after;
    const void *b = bcast_root_buffer(c, &copy_after);
    err = MPI_Isend(b, (int)bytes, MPI_BYTE, 1 - c->root, PAIR_TAG, comm, &req);
    if (err == MPI_SUCCESS && copy_after)
      memcpy(c->dst, c->src, bytes); /* while the peer takes src */
  } else {
    err = MPI_Irecv(c->dst, (int)bytes, MPI_BYTE, c->root, PAIR_TAG, comm, &req);
    if (err != MPI_SUCCESS) w->bbroken[c->buf] = true;
  }
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, what, err);
    return PTO_EMPI;
  }
  req_poll p = reqs(&req, 1, cancel, cancel_arg);
  return finish(w, c->buf, &p, timeout_ms, true, what, why, why_len);
}

static int coll_data(comm_win *w, const comm_coll_call *c, int64_t timeout_ms,
                     comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  if (pair_exchange(w, c))
    return c->kind == COMM_ALLREDUCE
               ? pair_allreduce(w, c, timeout_ms, cancel, cancel_arg, why, why_len)
           : c->kind == COMM_BROADCAST
               ? pair_bcast(w, c, timeout_ms, cancel, cancel_arg, why, why_len)
               : pair_move(w, c, timeout_ms, cancel, cancel_arg, why, why_len);
  MPI_Request req;
  bool copy_after = false;
  int err = start(c, w->bcomm[c->buf], w->my_rank, &req, &copy_after);
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, call_name(c->kind), err);
    return PTO_EMPI;
  }
  if (copy_after) memcpy(c->dst, c->src, call_bytes(c)); /* while the peers take src */
  req_poll p = reqs(&req, 1, cancel, cancel_arg);
  return finish(w, c->buf, &p, timeout_ms, true, call_name(c->kind), why, why_len);
}

int mpi_coll(comm_win *w, const comm_coll_call *c, int64_t timeout_ms, comm_cancel_fn cancel,
             void *cancel_arg, char *why, size_t why_len) {
  int rc = usable(w, c->buf, why, why_len);
  if (rc) return rc;
  guard_begin(w, c->buf, pair_exchange(w, c) ? pair_what(c->kind) : call_name(c->kind), timeout_ms);
  rc = coll_data(w, c, timeout_ms, cancel, cancel_arg, why, why_len);
  guard_end(w, c->buf);
  return rc;
}

/* ---- the record exchange: one record to and from every peer ----
 *
 * Point to point, not a collective: Open MPI's nonblocking collectives
 * (libnbc) build a schedule per call: the 320-byte records through
 * MPI_Iallgather took 2.6 us on 2 ranks of one host, where MPI_Isend +
 * MPI_Irecv of 8 bytes to the peer took 0.4 and MPI_Allreduce of 8 bytes
 * 0.7 (load 1.1-1.6; docs/comm.md). Each rank posts a receive of
 * max_bytes per peer (a smaller message fits it, so ranks whose records
 * differ still meet), and sends its record from a copy in the buffer's
 * staging, so that a call that never completes leaves only the staging
 * behind, not the caller's memory. Messages between two ranks on one
 * communicator arrive in the order sent, and every call sends exactly one
 * record to every peer, so the records of one call never meet another
 * call's.
 *
 * Every record begins with its length (8 bytes). To a peer on this host
 * (xnear) with pieces (xpiece, above) a record goes as its first piece, at
 * most xpiece bytes, then the rest in pieces of at most xpiece: the
 * receiver's first receive takes at most xpiece bytes, and once every
 * first piece and every first piece sent is done (one MPI_Testall, as a
 * whole record's exchange: a small call tests nothing more), it reads each
 * length and receives the rest, exactly that many bytes. A first piece
 * sent only needs the peer's first receive, which is always posted, so
 * neither phase waits on the other rank's next one (a piece that did not
 * go eagerly would otherwise wait for a receive posted only after it). A
 * record shorter than xpiece is one message, as to any other peer, but
 * one of 257-512 bytes, two (INLINE_MAX, below). */
#define XCHG_TAG  0x70
#define LEN_BYTES sizeof(uint64_t) /* a record's length, before it */

/* Does a record of at most max_bytes to peer p go in pieces? */
static bool in_pieces(const comm_win *w, int p, size_t max_bytes) {
  return w->xpiece && (w->xnear >> p & 1) && max_bytes > w->xpiece;
}

/* The message of a record of len bytes, cut or not, that starts at byte
 * off: its size. Both ends cut by this one rule, the receiver once the
 * length came with the first piece. A cut record's first piece is
 * w->xpiece bytes (or all of it), then come pieces of the same size while
 * the record has at most pieces_max(w) of them in all, else the rest in
 * one message. Pieces of 4032 bytes beat one message up to 16 KiB (16464
 * bytes: 2.0 us against 3.2-3.9) but hardly at 32 KiB (3.7 against 4.3),
 * and there, on 4 ranks sharing 2 CPUs, the 9 pieces a peer made an
 * allgather of 32 KiB 1.23x MPI_Allgather's time against 1.05x in one
 * message: PIECES_MAX. Between 2 ranks a record of up to PIECES_PAIR
 * pieces (a whole 32 KiB one with 4032-byte pieces) goes in pieces: its
 * rest in one message is above the transport's eager limit, a rendezvous,
 * and there the allgather and broadcast of 24-32 KiB blocks took
 * 1.53-1.65x the time of MPI_Allgather and MPI_Bcast in 5 pieces and a
 * rest, 0.96-1.37x in up to 9 (3 alternations; docs/comm.md, "The
 * records' pieces between 2 ranks"). */
/* Open MPI's ob1 sends a message of at most 256 bytes at once through the
 * transport (mca_pml_ob1_send_inline; the bound is ob1's constant, no MCA
 * parameter), a longer one through a send request. On vader, 2 ranks
 * (bench_coll_mpi_exchange, 2 runs), an exchange of one message each way
 * took 573-726 ns at 256 bytes and 1056-1268 at 257-512; as two messages,
 * 256 bytes and the rest, 737-1101 at 257-512, but 1403-1516 at 584 (the
 * rest over the bound) against 1075-1159 in one. A record's length and
 * header (72 bytes) push a block that Open MPI's own collectives send at
 * once over the bound: a cut record of at most twice the bound goes as
 * two messages, the first of INLINE_MAX bytes. (A one-way record stays
 * whole: its receiver sets the pace, and a second message cost it more
 * than the send request costs the root: docs/comm.md.) */
#define INLINE_MAX  256
#define PIECES_MAX  5
#define PIECES_PAIR 9
static int pieces_max(const comm_win *w) { return w->d.nranks == 2 ? PIECES_PAIR : PIECES_MAX; }
static size_t message_at(const comm_win *w, bool cut, uint64_t len, uint64_t off) {
  uint64_t left = len - off, piece = w->xpiece;
  if (!cut) return (size_t)left;
  if (len > INLINE_MAX && len <= 2 * INLINE_MAX) return off ? (size_t)left : INLINE_MAX;
  if (off && len > (uint64_t)pieces_max(w) * piece) return (size_t)left;
  return (size_t)(left < piece ? left : piece);
}
_Static_assert(PIECE_MIN >= 2 * INLINE_MAX, "a first piece holds a record of two messages");

/* Requests of one exchange, at most: per peer a receive and a send of
 * every message of a record (pieces_max for a cut one: message_at) */
static int exchange_reqs(const comm_win *w, size_t max_bytes) {
  int k = 0;
  for (int p = 0; p < w->d.nranks; p++)
    if (p != w->my_rank) k += 2 * (in_pieces(w, p, max_bytes) ? pieces_max(w) : 1);
  return k;
}

/* An exchange's second phase: `first` requests (a receive, then a send,
 * of each peer's first piece) then the others; the peers' slots. */
struct pieces {
  comm_win *w;
  MPI_Comm comm;
  int first;                               /* requests of the first phase */
  bool second;                             /* the first phase is done, its other pieces posted */
  size_t max;                              /* a record's bound, its length included */
  int peer[PTO_COMM_MAX_RANKS];            /* receive i's peer */
  unsigned char *slot[PTO_COMM_MAX_RANKS]; /* and where it lands */
  bool cut[PTO_COMM_MAX_RANKS];            /* that peer's record may go in pieces */
  MPI_Status st[2 * (PTO_COMM_MAX_RANKS - 1)]; /* the first phase's: what came first */
};

/* The first phase is done: posts the receives of the rest of every record
 * that came in pieces (its length says how much, its first message's
 * status what came: a one-way record, from a rank that made another call,
 * comes whole and is named by the check), after the requests. */
static int post_rest(req_poll *p) {
  pieces *pc = p->pc;
  for (int i = 0; i < pc->first / 2; i++) {
    if (!pc->cut[i]) continue;
    uint64_t len, off;
    memcpy(&len, pc->slot[i], sizeof len);
    if (len > pc->max) return MPI_ERR_TRUNCATE;          /* no such record is sent */
    if ((off = message_at(pc->w, true, len, 0)) < len) { /* a rest may follow: what came? */
      int got;
      MPI_Get_count(&pc->st[i], MPI_BYTE, &got);
      off = (uint64_t)got;
    }
    for (uint64_t part; off < len; off += part) {
      part = message_at(pc->w, true, len, off);
      int err = MPI_Irecv(pc->slot[i] + off, (int)part, MPI_BYTE, pc->peer[i], XCHG_TAG, pc->comm,
                          &p->req[p->nreq++]);
      if (err != MPI_SUCCESS) return err;
    }
  }
  return MPI_SUCCESS;
}

/* Tests an exchange whose records may come in pieces: the first phase's
 * requests, then the rest's. */
static bool pieces_test(req_poll *p) {
  pieces *pc = p->pc;
  int flag = 0;
  if (!pc->second) {
    p->err = testall(pc->first, p->req, &flag, pc->st);
    if (p->err != MPI_SUCCESS) return true;
    if (!flag) return false;
    pc->second = true;
    p->err = post_rest(p);
    if (p->err != MPI_SUCCESS || p->nreq == pc->first) return true; /* all came whole */
  }
  p->err = testall(p->nreq - pc->first, p->req + pc->first, &flag, NULL);
  return flag || p->err != MPI_SUCCESS;
}

/* The buffer's staging: nranks receive and nranks send slots of `rec`
 * bytes, then the requests of an exchange of records of up to rec bytes;
 * grown when a call needs more. */
static unsigned char *staging(comm_win *w, int buf, size_t rec, char *why, size_t why_len) {
  if (w->xstage[buf] && w->xrec[buf] >= rec) return w->xstage[buf];
  free(w->xstage[buf]);
  w->xrec[buf] = 0;
  int nreq = exchange_reqs(w, rec); /* rec >= a record's bound: enough for it */
  size_t slots = 2 * (size_t)w->d.nranks * rec;
  w->xstage[buf] = malloc(slots + (size_t)nreq * sizeof(MPI_Request));
  if (!w->xstage[buf]) {
    snprintf(why, why_len, "no memory for %d records of %zu bytes", 2 * w->d.nranks, rec);
    return NULL;
  }
  w->xrec[buf] = rec;
  w->xreq[buf] = (MPI_Request *)(w->xstage[buf] + slots);
  return w->xstage[buf];
}

/* The peers of the requests req[0..n-1) (request i with peer peer(i))
 * still open, as "1, 3" in list (MPI_Request_get_status neither completes
 * nor frees them: they stay in flight); returns how many. */
static int open_peers(MPI_Request *req, int n, int me, int dir, char *list, size_t len) {
  int k = 0;
  size_t at = 0;
  for (int i = 1; i < n; i++) {
    int flag = 1;
    MPI_Request_get_status(req[i - 1], &flag, MPI_STATUS_IGNORE);
    if (flag || at + 16 > len) continue;
    at += (size_t)snprintf(list + at, len - at, "%s%d", k++ ? ", " : "", (me + dir * i + n) % n);
  }
  return k;
}

/* A record exchange that timed out: the receives still open say whose
 * record never came; when every record came, the sends still open say
 * which peer has not taken mine (the first pieces' requests, which come
 * first: mpi_exchange). Before, the error said only "a rank did not call
 * it, or died", where the call table's wait names the rank. */
static void missing_peers(const comm_win *w, int buf, MPI_Request *req, bool acks, char *why,
                          size_t why_len) {
  int n = w->d.nranks, me = w->my_rank;
  char list[128] = "";
  const char *noun = acks ? "acknowledgement" : "record";
  bool came = true;
  int k = open_peers(req, n, me, -1, list, sizeof list); /* mpi_exchange's receives */
  if (!k) {
    came = false;
    k = open_peers(req + (n - 1), n, me, +1, list, sizeof list); /* then its sends */
  }
  if (!k) return; /* every request completed meanwhile: finish's words stand */
  snprintf(why, why_len,
           "the exchange of %ss (MPI_Isend/MPI_Irecv) on window buffer %s did not "
           "complete: %s %s %s rank%s %s (%s did not call, or died)",
           noun, w->d.buffers[buf].name, came ? "no" : "my", noun,
           came ? "came from" : "was not taken by", k > 1 ? "s" : "", list, k > 1 ? "they" : "it");
}

struct mpi_oneway;
static struct mpi_oneway *oneway_set(comm_win *w, int buf);
static void oneway_log_whole(comm_win *w, const comm_exchange *x);
static int oneway_start(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                        void *cancel_arg, char *why, size_t why_len);
static bool oneway_fits(const comm_win *w, const comm_exchange *x);
static bool oneway_stale(const comm_win *w, int buf, uint32_t epoch);

static int exchange(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                    void *cancel_arg, char *why, size_t why_len) {
  int rc = 0;
  if (oneway_stale(w, x->buf, (uint32_t)(x->tag >> 32)))
    rc = oneway_withdraw(w, x->buf, (uint32_t)(x->tag >> 32), why, why_len);
  if (rc) return rc;
  int n = w->d.nranks, me = w->my_rank, err = MPI_SUCCESS;
  if (x->max_bytes > INT_MAX - LEN_BYTES || x->hdr_bytes + x->block_bytes > x->max_bytes) {
    snprintf(why, why_len, "a record of %zu bytes over the bound of %zu",
             x->hdr_bytes + x->block_bytes, x->max_bytes);
    return PTO_EINVAL;
  }
  size_t max = LEN_BYTES + x->max_bytes, rec = (max + 63) & ~(size_t)63;
  if (x->root >= 0 && x->root < n && n > 1 && oneway_fits(w, x))
    return oneway_start(w, x, timeout_ms, cancel, cancel_arg, why, why_len);
  unsigned char *st = staging(w, x->buf, rec, why, why_len);
  if (!st) return PTO_ENOMEM;
  unsigned char *rslot = st, *sslot = st + (size_t)n * rec;
  MPI_Comm comm = w->bcomm[x->buf];
  MPI_Request *req = w->xreq[x->buf];
  pieces pc;
  pc.w = w;
  pc.comm = comm;
  pc.first = 2 * (n - 1);
  pc.second = false;
  pc.max = max;
  bool cut_any = false;
  /* requests: the first pieces' receives (peer me - i at i - 1), their
   * sends (peer me + i at n - 2 + i), then the other pieces */
  int nreq = 0, later = pc.first;
  for (int i = 1; i < n && err == MPI_SUCCESS; i++) {
    int p = (me - i + n) % n;
    pc.peer[i - 1] = p;
    pc.slot[i - 1] = rslot + (size_t)p * rec;
    pc.cut[i - 1] = in_pieces(w, p, max);
    cut_any = cut_any || pc.cut[i - 1];
    err = MPI_Irecv(pc.slot[i - 1], (int)(pc.cut[i - 1] ? w->xpiece : max), MPI_BYTE, p, XCHG_TAG,
                    comm, &req[nreq++]);
  }
  /* one copy when every peer gets the same block (or none) */
  bool same = true;
  for (int p = 1; x->blocks && p < n; p++)
    same = same && x->blocks[p] == x->blocks[0];
  for (int i = 1; i < n && err == MPI_SUCCESS; i++) {
    int p = (me + i) % n;
    const void *b = x->blocks ? x->blocks[p] : NULL;
    unsigned char *s = sslot + (same ? 0 : (size_t)p * rec);
    uint64_t len = LEN_BYTES + x->hdr_bytes + (b ? x->block_bytes : 0);
    if (i == 1 || !same) {
      memcpy(s, &len, sizeof len);
      memcpy(s + LEN_BYTES, x->hdr, x->hdr_bytes);
      if (b) memcpy(s + LEN_BYTES + x->hdr_bytes, b, x->block_bytes);
    }
    /* the first message among the first phase's requests, the others after */
    bool cut = in_pieces(w, p, max);
    for (uint64_t off = 0, part; off < len && err == MPI_SUCCESS; off += part) {
      part = message_at(w, cut, len, off);
      err =
          MPI_Isend(s + off, (int)part, MPI_BYTE, p, XCHG_TAG, comm, &req[off ? later++ : nreq++]);
    }
  }
  if (err != MPI_SUCCESS) {
    /* the requests already issued stay in flight */
    w->bbroken[x->buf] = nreq + (later - pc.first) > 1;
    err_why(why, why_len, "MPI_Isend/MPI_Irecv of the records", err);
    return PTO_EMPI;
  }
  /* from the task's first one-way call on, every exchange's header is
   * logged for the acknowledgements; once the records are on their way,
   * not on the round trip */
  oneway_log_whole(w, x);
  req_poll poll_ = reqs(req, later, cancel, cancel_arg);
  poll_.pc = cut_any ? &pc : NULL;
  rc = finish(w, x->buf, &poll_, timeout_ms, false, "the exchange of records (MPI_Isend/MPI_Irecv)",
              why, why_len);
  if (rc == PTO_EWAIT_TIMEOUT) missing_peers(w, x->buf, req, false, why, why_len);
  for (int q = 0; q < n && !rc; q++)
    x->recv[q] = q == me ? NULL : rslot + (size_t)q * rec + LEN_BYTES;
  return rc;
}

int mpi_exchange(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                 void *cancel_arg, char *why, size_t why_len) {
  int rc = usable(w, x->buf, why, why_len);
  if (rc) return rc;
  guard_begin(w, x->buf, "the exchange of records (MPI_Isend/MPI_Irecv)", timeout_ms);
  rc = exchange(w, x, timeout_ms, cancel, cancel_arg, why, why_len);
  guard_end(w, x->buf);
  return rc;
}

/* ---- one-way exchanges (comm_exchange.root: a small broadcast's) ----
 *
 * Only the root sends a record, to every other rank, which receives it
 * (and only it) in the call: the root returns once its sends are issued,
 * another rank once the root's record came, as MPI_Bcast's linear
 * algorithm. Each pair's records on the buffer's communicator then still
 * come in call order: a whole exchange sends one each way, a one-way call
 * one from the root. Ranks that disagree on a call (one takes it for
 * one-way, another not, or for another root) pair records of different
 * calls, whose descriptors (call number, collective, root) name the
 * difference, or wait for a record that never comes, until the deadline
 * or the cancel of the run that the rank which found it failed.
 *
 * What the other ranks' records would have told the root comes in
 * acknowledgements instead, on a tag of their own: from the task's first
 * one-way call on, every exchange's header (whole or one-way) is logged by
 * call number, and at every call s that is a multiple of the window's
 * run (RUN: xrun, ONEWAY_RUN_NEAR or _FAR, above) each rank whose last
 * RUN calls (s - RUN .. s - 1) had a one-way one sends every peer their
 * headers (from its first one-way call on) and posts a receive of each
 * peer's; at the next such call (or the task's end: settle) it waits for
 * them and hands every call's headers to the caller's check. So a root
 * runs at most 2 * RUN calls ahead of the slowest rank; a rank waits only
 * for acknowledgements sent a batch earlier. The root's sends leave from
 * a ring of 2 * RUN records, complete by then. At the task's end the
 * calls since the last batch are acknowledged and waited for at once,
 * marked as the end's, with the rank's count of calls (a peer that made
 * fewer or more calls is named).
 * tests/unit/test_coll_records_explorer.c proves it over every
 * interleaving of small cases.
 *
 * A one-way record goes as one message of at most xonemax bytes (the
 * first piece of a record in pieces, in_pieces: the call is one-way only
 * when the root's record, by this rank's arguments, fits), received into
 * a slot of that size: a longer record, from a rank that made another
 * call, is refused by MPI as truncated, and named. */
#define ONEWAY_HDR 128 /* the most a header logs */
#define ACK_TAG    0x71
/* Headers logged, by call number: 4 runs. The check at call s reads those
 * of calls s - 2 RUN .. s - RUN - 1 after calls s - RUN .. s - 1 logged
 * theirs, so 2 runs would do; 4 leave a margin. */
#define LOG_RUNS 4
#define LOG_MAX  (LOG_RUNS * ONEWAY_RUN_FAR)

/* An acknowledgement: the calls first .. first + RUN - 1 (tags), the
 * sender's count of calls on the buffer, and their headers (hdr bytes
 * each, of the calls it made). */
typedef struct oneway_ack {
  uint64_t first;
  uint32_t calls;
  uint32_t end; /* the task's end's: calls is the count (a batch's against an end's, or an end's
                   against a batch's, is a rank that made fewer or more calls) */
} oneway_ack;

struct mpi_oneway {
  uint32_t epoch; /* of the calls logged last (an exchange of another one withdraws the rest) */
  int n, per;     /* ranks; requests per peer set: 2 (n - 1) */
  int run;        /* the window's xrun: calls of one acknowledgement */
  uint64_t oneway[LOG_MAX / 64]; /* bit t % nlog(o): my call t was one-way */
  uint64_t from; /* the tag of my first one-way call in this task, 0: none (none logged yet) */
  uint64_t open; /* the first call of the acknowledgement in flight, or 0 */
  size_t hdr;
  unsigned char *log;   /* nlog(o) headers of ONEWAY_HDR bytes, by call number */
  size_t rec;           /* a record slot's bytes: xonemax, in 64s */
  unsigned char *send;  /* nsend(o) records of rec bytes: the root's */
  unsigned char *rslot; /* a rank's receive of the root's record */
  unsigned char *ack;   /* my acknowledgement in flight, then every peer's (ack_bytes(o) each) */
  MPI_Request rreq;     /* rslot's (done within the call, unless the call failed) */
  MPI_Request *sreq;    /* nsend(o) * (n - 1): the root's sends, by slot */
  MPI_Request *areq;    /* the acknowledgement's: receive from peer me - i at i - 1, send to
                           me + i at n - 2 + i (mpi_exchange's order, which missing_peers reads) */
};

/* The headers logged, the root's records in flight, and an
 * acknowledgement's most bytes, by the window's run. */
static uint32_t nlog(const struct mpi_oneway *o) { return LOG_RUNS * (uint32_t)o->run; }
static uint32_t nsend(const struct mpi_oneway *o) { return 2 * (uint32_t)o->run; }
static size_t ack_bytes(const struct mpi_oneway *o) {
  return sizeof(oneway_ack) + (size_t)o->run * ONEWAY_HDR;
}

static bool oneway_stale(const comm_win *w, int buf, uint32_t epoch) {
  return w->xone[buf] && w->xone[buf]->epoch != epoch;
}

static bool oneway_fits(const comm_win *w, const comm_exchange *x) {
  size_t most = w->xonemax;
  size_t root = LEN_BYTES + x->hdr_bytes + x->root_bytes;
  size_t mine = LEN_BYTES + x->hdr_bytes + (x->blocks ? x->block_bytes : 0);
  return root <= most && mine <= most && x->hdr_bytes <= ONEWAY_HDR;
}

/* The buffer's one-way state, sized by the window's run; NULL when out
 * of memory. */
static struct mpi_oneway *oneway_set(comm_win *w, int buf) {
  struct mpi_oneway *o = w->xone[buf];
  if (o) return o;
  /* what the sizes below follow */
  struct mpi_oneway sized = {.run = w->xrun, .rec = (w->xonemax + 63) & ~(size_t)63};
  int n = w->d.nranks;
  size_t ns = nsend(&sized), ab = ack_bytes(&sized), nreq = (ns + 2) * (size_t)(n - 1);
  o = malloc(sizeof *o + nlog(&sized) * ONEWAY_HDR + (ns + 1) * sized.rec + ((size_t)n + 1) * ab +
             nreq * sizeof(MPI_Request));
  if (!o) return NULL;
  *o = sized;
  o->n = n;
  o->per = 2 * (n - 1);
  o->log = (unsigned char *)(o + 1);
  o->send = o->log + nlog(o) * ONEWAY_HDR;
  o->rslot = o->send + ns * o->rec;
  o->ack = o->rslot + o->rec;
  o->sreq = (MPI_Request *)(o->ack + ((size_t)n + 1) * ab);
  o->areq = o->sreq + ns * (size_t)(n - 1);
  o->rreq = MPI_REQUEST_NULL;
  for (size_t r = 0; r < nreq; r++)
    o->sreq[r] = MPI_REQUEST_NULL;
  w->xone[buf] = o;
  return o;
}

/* Where my call t is logged: its header log_of(o, t), its one-way bit
 * o->oneway's bit log_at(o, t). */
static unsigned log_at(const struct mpi_oneway *o, uint64_t t) { return (uint32_t)t % nlog(o); }
static unsigned char *log_of(const struct mpi_oneway *o, uint64_t t) {
  return o->log + (size_t)log_at(o, t) * ONEWAY_HDR;
}

/* Logs the header of my call x->tag (every exchange's, whole or one-way). */
static void oneway_log(struct mpi_oneway *o, const comm_exchange *x, bool oneway) {
  unsigned t = log_at(o, x->tag);
  memcpy(o->log + (size_t)t * ONEWAY_HDR, x->hdr, x->hdr_bytes);
  o->hdr = x->hdr_bytes;
  uint64_t *word = &o->oneway[t / 64], bit = (uint64_t)1 << (t % 64);
  *word = oneway ? *word | bit : *word & ~bit;
  o->epoch = (uint32_t)(x->tag >> 32);
}

/* A whole exchange's header, once the task has had a one-way call. */
static void oneway_log_whole(comm_win *w, const comm_exchange *x) {
  struct mpi_oneway *o = w->xone[x->buf];
  if (o && o->from) oneway_log(o, x, false);
}

static int oneway_start(comm_win *w, comm_exchange *x, int64_t timeout_ms, comm_cancel_fn cancel,
                        void *cancel_arg, char *why, size_t why_len) {
  int n = w->d.nranks, me = w->my_rank, err = MPI_SUCCESS;
  struct mpi_oneway *o = oneway_set(w, x->buf);
  if (!o) {
    snprintf(why, why_len, "no memory for the one-way records of window buffer %s",
             w->d.buffers[x->buf].name);
    return PTO_ENOMEM;
  }
  if (!o->from) o->from = x->tag; /* the task's first (a new task's withdraw cleared it) */
  oneway_log(o, x, true);
  for (int q = 0; q < n; q++)
    x->recv[q] = NULL;
  MPI_Comm comm = w->bcomm[x->buf];
  if (x->root == me) {
    /* one record for every peer: the root's block is the same for each;
     * its slot's sends completed at the settle a batch ago */
    int slot = (int)((uint32_t)x->tag % nsend(o));
    unsigned char *rec = o->send + (size_t)slot * o->rec;
    MPI_Request *req = o->sreq + (size_t)slot * (size_t)(n - 1);
    const void *b = x->blocks ? x->blocks[(me + 1) % n] : NULL;
    uint64_t len = LEN_BYTES + x->hdr_bytes + (b ? x->block_bytes : 0);
    memcpy(rec, &len, sizeof len);
    memcpy(rec + LEN_BYTES, x->hdr, x->hdr_bytes);
    if (b) memcpy(rec + LEN_BYTES + x->hdr_bytes, b, x->block_bytes);
    for (int i = 1; i < n && err == MPI_SUCCESS; i++)
      err = MPI_Isend(rec, (int)len, MPI_BYTE, (me + i) % n, XCHG_TAG, comm, &req[i - 1]);
    if (err == MPI_SUCCESS) return 0;
    w->bbroken[x->buf] = true; /* the requests already issued stay in flight */
    err_why(why, why_len, "MPI_Isend of the one-way records", err);
    return PTO_EMPI;
  }
  /* another rank takes the root's record alone */
  err = MPI_Irecv(o->rslot, (int)o->rec, MPI_BYTE, x->root, XCHG_TAG, comm, &o->rreq);
  if (err != MPI_SUCCESS) {
    err_why(why, why_len, "MPI_Irecv of the root's one-way record", err);
    return PTO_EMPI;
  }
  req_poll p = reqs(&o->rreq, 1, cancel, cancel_arg);
  int rc = finish(w, x->buf, &p, timeout_ms, false, "the broadcast root's record (MPI_Irecv)", why,
                  why_len);
  if (rc == PTO_EMPI && p.err == MPI_ERR_TRUNCATE) {
    snprintf(why, why_len,
             "rank %d's record for call #%u on window buffer %s is longer than a one-way "
             "broadcast's: it made another call there (or this one with other arguments)",
             x->root, (unsigned)(uint32_t)x->tag, w->d.buffers[x->buf].name);
    rc = PTO_EINVAL;
  } else if (rc) { /* named here, not formatted at every call */
    size_t at = strlen(why);
    snprintf(why + at, why_len - at, " (the root: rank %d)", x->root);
  }
  if (!rc) x->recv[x->root] = o->rslot + LEN_BYTES;
  return rc;
}

/* Did my calls first .. upto (tags of one epoch) include a one-way one? */
static bool oneway_among(const struct mpi_oneway *o, uint64_t first, uint64_t upto) {
  for (uint64_t t = first; t <= upto; t++)
    if ((uint32_t)t && o->oneway[log_at(o, t) / 64] >> (log_at(o, t) % 64) & 1) return true;
  return false;
}

/* Sends every peer my acknowledgement of my calls first .. upto (at most
 * a run) and posts the receives of theirs. */
static int ack_post(comm_win *w, int buf, struct mpi_oneway *o, uint64_t first, uint64_t upto,
                    bool end, char *why, size_t why_len) {
  int n = o->n, me = w->my_rank, err = MPI_SUCCESS;
  oneway_ack *a = (oneway_ack *)o->ack;
  a->first = first;
  a->calls = (uint32_t)upto;
  a->end = end;
  unsigned char *at = o->ack + sizeof *a;
  for (uint64_t t = first; t <= upto; t++, at += o->hdr)
    memcpy(at, log_of(o, t), o->hdr);
  int len = (int)(at - o->ack);
  MPI_Comm comm = w->bcomm[buf];
  for (int i = 1; i < n && err == MPI_SUCCESS; i++) {
    int p = (me - i + n) % n;
    err = MPI_Irecv(o->ack + (size_t)(p + 1) * ack_bytes(o), (int)ack_bytes(o), MPI_BYTE, p,
                    ACK_TAG, comm, &o->areq[i - 1]);
  }
  for (int i = 1; i < n && err == MPI_SUCCESS; i++)
    err = MPI_Isend(o->ack, len, MPI_BYTE, (me + i) % n, ACK_TAG, comm, &o->areq[n - 2 + i]);
  o->open = first;
  if (err == MPI_SUCCESS) return 0;
  w->bbroken[buf] = true;
  err_why(why, why_len, "MPI_Isend/MPI_Irecv of the one-way acknowledgements", err);
  return PTO_EMPI;
}

/* Waits for the acknowledgements in flight (and the root's sends of the
 * calls they cover), then checks every call they cover: its header from
 * each peer against mine; `last`: the peers' counts of calls too. */
static int ack_finish(comm_win *w, int buf, struct mpi_oneway *o, bool last, comm_settle_fn check,
                      void *check_arg, uint64_t *at, int64_t timeout_ms, comm_cancel_fn cancel,
                      void *cancel_arg, char *why, size_t why_len) {
  int n = o->n, me = w->my_rank;
  uint64_t first = o->open;
  const oneway_ack *mine = (const oneway_ack *)o->ack;
  uint64_t upto = (first & ~(uint64_t)UINT32_MAX) | mine->calls;
  o->open = 0;
  *at = first;
  req_poll p = reqs(o->areq, o->per, cancel, cancel_arg);
  int rc =
      finish(w, buf, &p, timeout_ms, false,
             "the acknowledgements of its one-way broadcasts (MPI_Isend/MPI_Irecv)", why, why_len);
  if (rc == PTO_EWAIT_TIMEOUT) missing_peers(w, buf, o->areq, true, why, why_len);
  if (rc) return rc;
  /* the root's sends of these calls: done long since (eager), tested here */
  /* by the batch's first call: the round's own may be a later one, the
   * task's first one-way call (run slots from s0 stay in the ring) */
  int s0 = (int)((uint32_t)first / (uint32_t)o->run * (uint32_t)o->run % nsend(o));
  req_poll sp = reqs(o->sreq + (size_t)s0 * (size_t)(n - 1), o->run * (n - 1), cancel, cancel_arg);
  rc = finish(w, buf, &sp, timeout_ms, false, "the sends of its one-way records (MPI_Isend)", why,
              why_len);
  if (rc) return rc;
  for (int p = 0; p < n; p++) {
    const oneway_ack *a = (const oneway_ack *)(o->ack + (size_t)(p + 1) * ack_bytes(o));
    if (p == me || (a->first == first && a->end == last && (!last || a->calls == mine->calls)))
      continue;
    unsigned from = (unsigned)(uint32_t)first ? (unsigned)(uint32_t)first : 1;
    bool counts = a->end != last || (last && a->calls != mine->calls);
    *at = upto; /* named by this rank's last call of them */
    snprintf(why, why_len,
             "rank %d acknowledged %s calls #%u to #%u%s on window buffer %s, this rank calls "
             "#%u to #%u%s%s",
             p, a->first >> 32 == first >> 32 ? "its" : "an earlier task's",
             (unsigned)(uint32_t)a->first ? (unsigned)(uint32_t)a->first : 1, (unsigned)a->calls,
             a->end ? " (its last)" : "", w->d.buffers[buf].name, from, (unsigned)mine->calls,
             last ? " (its last)" : "",
             counts ? ": the ranks made different numbers of calls there" : "");
    return PTO_EINVAL;
  }
  for (uint64_t t = first; t <= upto && !rc; t++) {
    if (!(uint32_t)t) continue; /* call 0: none */
    const unsigned char *recv[PTO_COMM_MAX_RANKS];
    size_t off = sizeof(oneway_ack) + (size_t)(t - first) * o->hdr;
    for (int q = 0; q < n; q++)
      recv[q] = q == me ? log_of(o, t) : o->ack + (size_t)(q + 1) * ack_bytes(o) + off;
    *at = t;
    rc = check(check_arg, t, recv);
  }
  return rc;
}

int mpi_settle_run(const comm_win *w) { return w->xrun; }

static int settle(comm_win *w, int buf, uint64_t tag, bool last, comm_settle_fn check,
                  void *check_arg, uint64_t *at, int64_t timeout_ms, comm_cancel_fn cancel,
                  void *cancel_arg, char *why, size_t why_len) {
  struct mpi_oneway *o = w->xone[buf];
  int rc = 0;
  if (o->open)
    rc = ack_finish(w, buf, o, false, check, check_arg, at, timeout_ms, cancel, cancel_arg, why,
                    why_len);
  if (rc) return rc;
  /* the calls since the last batch: at a batch's call tag, the batch
   * before it; at the task's end, the calls from the last batch on */
  uint64_t run = (uint64_t)o->run;
  uint64_t first = last ? tag / run * run : tag - run;
  uint64_t upto = last ? tag : tag - 1;
  if (!o->from || o->from > upto) return 0; /* no one-way call of mine yet */
  if (first < o->from) first = o->from;     /* the calls before it were not logged */
  if (!oneway_among(o, first, upto)) return 0;
  rc = ack_post(w, buf, o, first, upto, last, why, why_len);
  if (!rc && last)
    rc = ack_finish(w, buf, o, true, check, check_arg, at, timeout_ms, cancel, cancel_arg, why,
                    why_len);
  return rc;
}

int mpi_settle(comm_win *w, int buf, uint64_t tag, bool last, comm_settle_fn check, void *check_arg,
               uint64_t *at, int64_t timeout_ms, comm_cancel_fn cancel, void *cancel_arg, char *why,
               size_t why_len) {
  struct mpi_oneway *o = buf >= 0 && buf < w->d.nbuffers ? w->xone[buf] : NULL;
  if (!o || o->epoch != (uint32_t)(tag >> 32)) return 0; /* no one-way call in this task */
  int rc = usable(w, buf, why, why_len);
  if (rc) return rc;
  guard_begin(w, buf, "the acknowledgements of the one-way broadcasts (MPI_Isend/MPI_Irecv)",
              timeout_ms);
  rc =
      settle(w, buf, tag, last, check, check_arg, at, timeout_ms, cancel, cancel_arg, why, why_len);
  guard_end(w, buf);
  return rc;
}

/* Withdraws what the one-way exchanges of an earlier task left pending,
 * as a task that failed does (one that ends well waits for its
 * acknowledgements), and starts the state of task `epoch` (0: none, at
 * the window's release): the receives are cancelled (MPI_Cancel, which an
 * unmatched receive honours at once), the sends, which went eagerly,
 * complete. What does not complete within ONEWAY_WITHDRAW_MS stays in
 * flight, and the buffer is broken. */
#define ONEWAY_WITHDRAW_MS 100
static int oneway_withdraw(comm_win *w, int buf, uint32_t epoch, char *why, size_t why_len) {
  struct mpi_oneway *o = w->xone[buf];
  int n = o->n;
  if (o->rreq != MPI_REQUEST_NULL) MPI_Cancel(&o->rreq);
  for (int r = 0; r < n - 1; r++)
    if (o->areq[r] != MPI_REQUEST_NULL) MPI_Cancel(&o->areq[r]);
  req_poll p[3] = {reqs(&o->rreq, 1, NULL, NULL),
                   reqs(o->sreq, (int)nsend(o) * (n - 1), NULL, NULL),
                   reqs(o->areq, o->per, NULL, NULL)};
  for (int i = 0; i < 3; i++)
    if (!poll(&p[i], ONEWAY_WITHDRAW_MS)) {
      w->bbroken[buf] = true;
      snprintf(why, why_len,
               "a one-way broadcast of node task epoch %u on window buffer %s did not complete "
               "and could not be withdrawn",
               (unsigned)o->epoch, w->d.buffers[buf].name);
      return PTO_EMPI;
    }
  o->open = 0;
  memset(o->oneway, 0, sizeof o->oneway);
  o->from = 0;
  o->epoch = epoch;
  return 0;
}
