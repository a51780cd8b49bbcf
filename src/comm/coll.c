/* coll.c — the collectives of pto/coll.h, built only on the in-kernel
 * operations (pto_put, pto_notify, pto_signal_wait/read), so every backend
 * runs them.
 *
 * Scratch layout (one window buffer, the same on every rank):
 *   cells   [0..63]       int64 signal cells: SEQ (my call count in this
 *                         node task; notify to myself), ARRIVE (peers'
 *                         descriptors and mesh data landed: +1 per peer and
 *                         call), DONE (peers finished reading my previous
 *                         call: +1 per peer and call), RING (ring step,
 *                         set by the previous rank); the last, BUSY, is
 *                         no signal: the block of this chip in a call on
 *                         the view (one at a time: coll_open)
 *   table   320 + 64 x 4160 my call table (backends with direct windows,
 *                         below): written by me only, its slots read by
 *                         every peer
 *   descs   n x 64        descriptor of rank p's call, written by p
 *   data    (n+2) x S     mesh: slot p (S bytes) written by rank p;
 *                         ring: 2(n-1) slots, slot k written at step k
 *
 * One call (sequence s, counted per node task: the cells are epoch-tagged,
 * so a new task reads 0 everywhere and starts again at s = 1):
 *   1. wait DONE >= (s-1)(n-1): every peer consumed my previous call's
 *      writes into its scratch, so its slots may be overwritten;
 *   2. to every peer: put my descriptor (and, mesh, my data block), then
 *      notify ARRIVE +1 (the notify orders the puts before it);
 *   3. wait ARRIVE >= s(n-1); compare every descriptor with mine: any
 *      difference (or a rank's own argument error) fails the call on every
 *      rank with PTO_EINVAL naming both calls — before any data is used;
 *   4. mesh: reduce/copy the slots locally (rank order); ring: 2(n-1) steps,
 *      each a put into the next rank's ring slot and a SET of its RING cell
 *      to (s-1)2(n-1)+k+1, then a wait on mine for the same value;
 *   5. notify DONE +1 to every peer.
 * Every wait has the domain's deadline (PTO_EWAIT_TIMEOUT names the cell).
 *
 * On a backend whose windows this process can load and store directly
 * (comm_backend.direct: shm without fault injection or a controlled run),
 * steps 2-3 go through the call table instead: call s (counted per scratch
 * and node task, in the table) writes my descriptor, and my whole src when it
 * fits COLL_TABLE_DATA bytes, into my slot s % COLL_TABLE_SLOTS of my own
 * table, then release-stores the slot's generation (epoch, s) and wakes
 * the peers; every rank waits until every peer's slot holds generation
 * (epoch, s), compares the descriptors, and, when the data came with them,
 * reduces or copies it straight from the peers' slots in rank order: no
 * put, no notify, no step 5. The generation makes a stale slot impossible
 * to take (no two tasks of a run share an epoch, comm/signal.h), and the
 * slots need no acknowledgement: a rank writes its slot of call s again
 * (at call s + COLL_TABLE_SLOTS) only once every peer has published call
 * coll_table_reuse(s + SLOTS) = s + COLL_ONEWAY_LAG, so finished reading
 * call s (coll_proto.h; a wait only after one-way calls, below: after a
 * round that waited for every peer it is known already). A small broadcast
 * is one-way: its root publishes and waits for nobody, the other ranks
 * wait for the root only, and the root compares the peers' descriptors
 * COLL_ONEWAY_LAG calls later, or at the task's end (table_exchange).
 * Larger calls run step 1, then the mesh's
 * data: a block that is the same for every peer (allreduce's and
 * allgather's src, the broadcast root's) is pulled, copied once into my
 * own mesh slot, which each peer reads in my window after the round; the
 * per-peer blocks of reduce-scatter and all-to-all are put into each
 * peer's scratch as in step 2; then they publish their descriptor in the
 * table and wait for every peer's in place of ARRIVE (the generation's
 * release store publishes the data before it: a direct backend's puts
 * land at once), then steps 4 and 5; their SEQ cell counts those calls
 * alone (the same ones on every rank: the decision follows the agreed
 * descriptor).
 *
 * On a backend with collectives of its own (comm_backend.coll and
 * .exchange: the MPI backend's), every call first sends each peer one
 * record (its descriptor, and its block for that peer when the block fits
 * fuse_bytes: 32 KiB, on one host 8-16 KiB for some calls, 1 MiB between
 * 2 ranks on two hosts) and receives one from
 * every peer (the backend's record exchange, point to point), and compares the
 * descriptors the same way; a call whose data came with the records then
 * ends with the mesh's last step 4 on them (no step 5: nothing of the
 * scratch is shared; a small broadcast's is one-way, only the root
 * sending, the others' headers acknowledged later: native_exchange),
 * larger PTO_COLL_AUTO/MPI calls run the backend's collective on their
 * data, and mesh/ring run steps 1-5 above. Where that backend's windows
 * are direct too (the MPI backend on shared windows, one host), every
 * call goes through the call table first, as on shm: a call whose data
 * fits the table ends there, with no MPI message (on 4 ranks sharing 2
 * CPUs an 8-byte broadcast took 10-24 us through the records, 4.3 through
 * the table); beyond it pto's own algorithms run on the windows as on shm
 * (native_data): a reduction's at every size, on n ranks an allgather's
 * blocks below n x 512 KiB, a broadcast's below (n - 1) x 256 KiB (both at
 * most 4 MiB), an all-to-all's below 1 MiB; larger ones, and PTO_COLL_MPI
 * calls, follow the table's round, made holding the buffer's lock, with
 * the backend's collective. Reproducible
 * reductions (PTO_RED_REPRODUCIBLE, PTO_COLL_REPRODUCIBLE) fold every
 * rank's block in rank order on every path: the mesh instead of the ring,
 * the records, and above them the backend's gather then a local
 * fold. */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/contract.h"
#include "chip/schedule.h"
#include "comm/coll_proto.h"
#include "comm/coll_reduce.h"
#include "comm/comm.h"
#include "common/clock.h"
#include "common/copy.h"
#include "common/options.h"
#include "common/tensor_check.h"
#include "pto/coll.h"

enum { CELL_SEQ = 0, CELL_ARRIVE = 1, CELL_DONE = 2, CELL_RING = 3 };
/* The last cell is no signal: (epoch << 32) | (block + 1) of this chip's
 * call running on the scratch view, 0 when none (coll_open, coll_close),
 * read and written by this rank only, on every path. */
#define CELL_BUSY  7
#define HDR_CELLS  64
#define DESC_BYTES 48
/* the mesh's descriptors lie a line apart (desc_at) */
#define DESC_STRIDE 64
#define ALIGN64(x)  (((x) + 63) & ~(size_t)63)

/* the kinds of comm_backend.h, which the backend's own collectives share */
typedef comm_coll_kind coll_kind;
#define K_ALLREDUCE      COMM_ALLREDUCE
#define K_ALLGATHER      COMM_ALLGATHER
#define K_REDUCE_SCATTER COMM_REDUCE_SCATTER
#define K_BROADCAST      COMM_BROADCAST
#define K_ALLTOALL       COMM_ALLTOALL

static const char *kind_name(int64_t k) {
  switch (k) {
  case K_ALLREDUCE: return "allreduce";
  case K_ALLGATHER: return "allgather";
  case K_REDUCE_SCATTER: return "reduce_scatter";
  case K_BROADCAST: return "broadcast";
  case K_ALLTOALL: return "alltoall";
  }
  return "?";
}

/* "mesh", or an unknown value as its number ("algorithm 9") in out[n] */
static const char *algo_name(int64_t a, char *out, size_t n) {
  if (a == PTO_COLL_AUTO) return "auto";
  if (a == PTO_COLL_MESH) return "mesh";
  if (a == PTO_COLL_RING) return "ring";
  if (a == PTO_COLL_MPI) return "mpi";
  snprintf(out, n, "algorithm %" PRId64, a);
  return out;
}

/* "sum", or "sum reproducible" (the op a descriptor carries); an unknown
 * op as its number ("op 7") */
static void op_name(int64_t op, char *out, size_t n) {
  int64_t base = op & ~(int64_t)PTO_RED_REPRODUCIBLE;
  const char *rep = op & PTO_RED_REPRODUCIBLE ? " reproducible" : "";
  if (coll_reduce_op_ok((pto_red_op)base))
    snprintf(out, n, "%s%s", coll_red_op_name((pto_red_op)base), rep);
  else
    snprintf(out, n, "op %" PRId64 "%s", base, rep);
}

/* What each rank publishes: plain integers, DESC_BYTES, no padding (it
 * is compared byte for byte: desc_same). */
typedef struct coll_desc {
  int32_t kind;
  int32_t algo; /* as requested */
  int32_t seq;  /* the call number */
  int32_t dtype;
  int32_t root;
  int32_t status; /* 0, or this rank's own argument error */
  int64_t count;  /* elements per block */
  int64_t op;
  int64_t slot; /* the scratch's mesh slot bytes: the layout follows from them */
} coll_desc;
_Static_assert(sizeof(coll_desc) == DESC_BYTES && DESC_BYTES <= DESC_STRIDE, "descriptor size");

/* One slot of a rank's call table: the generation, written last
 * (release), then what it publishes, from the slot's first line on: a
 * call of up to 8 bytes is one line for its peers to read and for the
 * caller to take back when it writes the slot again, not three (the
 * generation, the descriptor and the data on lines of their own). */
typedef struct coll_slot {
  _Alignas(64) _Atomic uint64_t gen; /* coll_table_gen(epoch, call) */
  coll_desc d;
  unsigned char data[COLL_TABLE_DATA]; /* my whole src, when it fits */
} coll_slot;
_Static_assert(offsetof(coll_slot, data) == 56, "8 bytes of data on the generation's line");

/* A rank's call table: its call count on this scratch and what only it
 * reads (the one-way broadcasts, table_exchange), then the slots. */
typedef struct coll_table {
  uint64_t calls;      /* coll_table_gen(epoch, last call): read and written by me only */
  uint64_t oneway;     /* bit coll_table_slot(c): my call c, a one-way broadcast's root, is
                          not yet checked against the peers' calls (table_settle) */
  uint32_t pend_epoch; /* the task in which this view went on the comm's pending list */
  unsigned char pad[44];
  /* rank p has published its call known[p] (or a later one) on this view
   * in this task: read and written by me only (table_reuse_wait) */
  int32_t known[PTO_COMM_MAX_RANKS];
  coll_slot slot[COLL_TABLE_SLOTS];
} coll_table;
_Static_assert(COLL_TABLE_SLOTS <= 64, "a one-way bit per slot");
#define TABLE_BYTES sizeof(coll_table)
#define NO_TABLE    UINT64_MAX

typedef struct coll {
  const pto_kctx *ctx;
  pto_domain dom;
  pto_comm *c;
  int me, n;
  unsigned char *base; /* scratch, 64-aligned */
  size_t bytes;
  unsigned char *data;
  size_t slot; /* mesh slot bytes */
  size_t ring_slot;
  int32_t seq;
  coll_desc d;
  size_t es;
  comm_dom *cd;     /* the domain, for the backend's own collectives */
  int buf;          /* the scratch's window buffer */
  bool pulled;      /* coll_exchange pulled the whole blocks (own_block) */
  uint64_t table;   /* window offset of the call table, or NO_TABLE */
  uint64_t view_at; /* window offset of base (the backend's records name it) */
  bool locked;      /* holds the domain's coll_lock of buf (backends with collectives) */
  /* this rank's own argument error; coll_open empties it with one store
   * (zeroing all of it was a tenth of pto's own work in an 8-byte
   * allreduce on the MPI backend) */
  char why[200];
} coll;
/* coll_open sets every field above why, one by one (a memset of them
 * compiled to `rep stos`, whose start-up was 7% of pto's own work in that
 * allreduce): a field added to coll must be set there too. */
_Static_assert(offsetof(coll, why) == 169, "a new field of coll: set it in coll_open");

size_t pto_coll_scratch_bytes(int nranks, size_t block_bytes) {
  if (nranks < 1 || nranks > PTO_COMM_MAX_RANKS || block_bytes > ((size_t)1 << 48)) return 0;
  size_t n = (size_t)nranks;
  return 64 + HDR_CELLS + TABLE_BYTES + n * DESC_STRIDE + (n + 2) * (ALIGN64(block_bytes) + 256);
}

/* Records this rank's own argument error in k->why, unless one is there
 * already (the first one found is named: coll_open's scratch problem
 * before the calls' own). Returns nonzero, so `ok = !set_why(...)` is
 * false. */
static int set_why(coll *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_why(coll *k, const char *fmt, ...) {
  if (!k->why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->why, sizeof k->why, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* A call's argument checks (ok) with what coll_open found: false, with
 * the descriptor's status set, when either found a problem; the call then
 * publishes only its descriptor, so every rank fails naming it. */
static bool args_ok(coll *k, bool ok) {
  if (ok && !k->d.status) return true;
  if (!k->d.status) k->d.status = PTO_EINVAL;
  return false;
}

static pto_tensor bytes_view(void *p, size_t bytes, pto_dtype dt) {
  pto_tensor t;
  int64_t n = (int64_t)(bytes / pto_dtype_size(dt));
  pto_tensor_init(&t, p, bytes, dt, 1, &n);
  return t;
}

static pto_tensor cell(const coll *k, int i) {
  return bytes_view(k->base + 8 * (size_t)i, 8, PTO_I64);
}

static void *elem0(const pto_tensor *t) {
  return (unsigned char *)t->buf + t->offset * (int64_t)tensor_es(t->dtype);
}

/* A local tensor argument: valid, contiguous, `want` elements of dtype dt
 * (want < 0: any count); n is tensor_dense_numel(t), which says all but
 * the dtype in one pass (the separate checks, each a pass over the dims,
 * were a fifth of pto's own work in an 8-byte allreduce on the MPI
 * backend). Records the problem in k->why. */
static bool local_ok_n(coll *k, const char *what, const pto_tensor *t, int64_t n, int64_t want) {
  if (n < 0) {
    char why[160];
    /* the rule it breaks, as the one-sided ops name it */
    const char *bad = tensor_problem(t, false, why, sizeof why);
    if (bad)
      set_why(k, "%s is not a valid tensor: %s", what, bad);
    else
      set_why(k, "%s is not contiguous", what);
    return false;
  }
  if (t->dtype != k->d.dtype) {
    set_why(k, "%s has dtype %s, not %s", what, pto_dtype_name((pto_dtype)t->dtype),
            pto_dtype_name((pto_dtype)k->d.dtype));
    return false;
  }
  if (want >= 0 && n != want) {
    set_why(k, "%s has %" PRId64 " elements, expected %" PRId64, what, n, want);
    return false;
  }
  /* the call's slots, and the peers' reads of them, lie in the scratch */
  const unsigned char *lo = elem0(t), *hi = lo + (size_t)n * tensor_es(t->dtype);
  if (lo < k->base + k->bytes && hi > k->base) {
    set_why(k, "%s overlaps the scratch view (its bytes %td..%td): src and dst must lie outside it",
            what, (lo > k->base ? lo : k->base) - k->base,
            (hi < k->base + k->bytes ? hi : k->base + k->bytes) - k->base);
    return false;
  }
  /* read or written here: a peer's copy of a window is the peer's memory
   * (shared windows) or an inaccessible reservation (RMA windows) */
  comm_copy_at at;
  if (comm_peer_copy(k->c, (uintptr_t)lo, (uintptr_t)hi, &at)) {
    char where[160];
    set_why(k, "%s lies in %s: a collective's src and dst must be this rank's own memory", what,
            comm_copy_name(&at, where, sizeof where));
    return false;
  }
  return true;
}

static bool local_ok(coll *k, const char *what, const pto_tensor *t, int64_t want) {
  return local_ok_n(k, what, t, tensor_dense_numel(t), want);
}

/* The mesh and ring slot sizes of a scratch whose data part has
 * data_bytes, on k->n ranks. */
static void scratch_slots(coll *k, size_t data_bytes) {
  size_t slot = (data_bytes / (size_t)(k->n + 2)) & ~(size_t)63;
  k->slot = slot;
  k->ring_slot =
      k->n > 1 ? ((size_t)(k->n + 2) * slot / (size_t)(2 * (k->n - 1))) & ~(size_t)63 : 0;
}

/* What coll_open found for the last scratch view this thread opened a
 * call on without a problem, of the domain attached as `uid`: a call site
 * calls on one scratch again and again, and finding it again (its checks,
 * the window buffer it lies in, two 64-bit divisions) was a quarter of
 * the instructions of an 8-byte broadcast. A pure function of the view
 * and the domain's layout, which is fixed from its attach to its close;
 * a domain attached again has another uid. */
static _Thread_local struct scratch_memo {
  uint64_t uid; /* comm_dom.uid; 0: none */
  pto_tensor view;
  unsigned char *base, *data;
  size_t bytes, slot, ring_slot;
  int buf;
  uint64_t view_at, table;
} memo;

/* Whether a and b are the same view (the fields a view's bytes follow
 * from; alloc_tag is no part of that). a is valid. */
static bool same_view(const pto_tensor *a, const pto_tensor *b) {
  if (a->buf != b->buf || a->buf_bytes != b->buf_bytes || a->offset != b->offset ||
      a->dtype != b->dtype || a->ndims != b->ndims)
    return false;
  for (int d = 0; d < a->ndims; d++)
    if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d]) return false;
  return true;
}

static bool scratch_recall(coll *k, const pto_tensor *scratch) {
  if (memo.uid != k->cd->uid || !same_view(&memo.view, scratch)) return false;
  k->base = memo.base;
  k->data = memo.data;
  k->bytes = memo.bytes;
  k->slot = memo.slot;
  k->ring_slot = memo.ring_slot;
  k->buf = memo.buf;
  k->view_at = memo.view_at;
  k->table = memo.table;
  k->d.slot = (int64_t)k->slot;
  return true;
}

static void scratch_remember(const coll *k, const pto_tensor *scratch) {
  memo.uid = k->cd->uid;
  memo.view = *scratch;
  memo.base = k->base;
  memo.data = k->data;
  memo.bytes = k->bytes;
  memo.slot = k->slot;
  memo.ring_slot = k->ring_slot;
  memo.buf = k->buf;
  memo.view_at = k->view_at;
  memo.table = k->table;
}

static _Atomic uint64_t *busy_word(const coll *k) {
  return (_Atomic uint64_t *)(k->base + 8 * CELL_BUSY);
}
_Static_assert(8 * (CELL_BUSY + 1) <= HDR_CELLS, "the busy word lies among the cells");

/* coll_open's look at the scratch view: its layout in k (base, bytes,
 * data, slots, window buffer, table), remembered when it has no problem;
 * a view of a peer's copy sets the call's status (set_why) and goes on
 * with my own copy; a problem that leaves nothing to publish fails. */
static int scratch_layout(coll *k, const pto_tensor *scratch, const char *name) {
  pto_domain dom = k->dom;
  int64_t numel = tensor_dense_numel(scratch);
  if (numel < 0) {
    char why[160];
    const char *bad = tensor_problem(scratch, false, why, sizeof why);
    return comm_fail(k->c, PTO_EINVAL,
                     "%s: scratch must be a valid contiguous view of a window buffer: %s "
                     "(domain %d rank %d)",
                     name, bad ? bad : "it is not contiguous", dom, k->me);
  }
  size_t es = tensor_es(scratch->dtype);
  /* The scratch is local memory (its cells, table and slots are read and
   * written here): a view of a peer's copy of the buffer is refused. The
   * call goes on with the same bytes of my own copy, only to publish its
   * descriptor with the error, so that every rank fails naming it (as an
   * argument error of the call) instead of waiting for me. */
  const comm_domain_desc *dd = &k->cd->desc;
  unsigned char *sbuf = scratch->buf;
  uint64_t at = (uint64_t)(uintptr_t)elem0(scratch) - dd->base;
  if ((uintptr_t)elem0(scratch) >= dd->base && dd->win_bytes &&
      at / dd->win_bytes < (uint64_t)k->n && at / dd->win_bytes != (uint64_t)k->me) {
    int owner = (int)(at / dd->win_bytes);
    const char *bname = NULL;
    for (int i = 0; i < dd->nbuffers; i++)
      if (at % dd->win_bytes - dd->buffers[i].offset < dd->buffers[i].bytes)
        bname = dd->buffers[i].name;
    set_why(k,
            "scratch is rank %d's copy of %s%s%s; a collective's scratch must be this rank's own "
            "copy (pto_node_window_tensor with rank %d)",
            owner, bname ? "buffer '" : "its window", bname ? bname : "", bname ? "'" : "", k->me);
    k->d.status = PTO_EINVAL;
    sbuf += ((int64_t)k->me - owner) * (int64_t)dd->win_bytes;
  }
  uintptr_t a = (uintptr_t)(sbuf + scratch->offset * (int64_t)es), al = (a + 63) & ~(uintptr_t)63;
  size_t total = (size_t)numel * es;
  size_t hdr = HDR_CELLS + TABLE_BYTES + (size_t)k->n * DESC_STRIDE;
  if (total < al - a + hdr + (size_t)(k->n + 2) * 64)
    return comm_fail(k->c, PTO_EINVAL,
                     "%s: scratch of %zu bytes is too small for %d ranks (see "
                     "pto_coll_scratch_bytes) (domain %d rank %d)",
                     name, total, k->n, dom, k->me);
  k->base = (unsigned char *)al;
  k->bytes = total - (al - a);
  k->data = k->base + hdr;
  scratch_slots(k, k->bytes - hdr);
  k->d.slot = (int64_t)k->slot;
  /* the call table needs every rank's window in this process: the same
   * answer on every rank, from the domain's backend and settings */
  bool table = k->cd->direct_all;
  if (k->cd->be->coll || table) {
    /* the backend keeps the collectives of each window buffer apart; the
     * call table lies at a window offset */
    uint64_t woff, lo = (uint64_t)scratch->offset * es;
    char why[160];
    if (comm_span_locate(&k->cd->desc, sbuf, lo, lo + total, &woff, &k->buf, why, sizeof why))
      return comm_fail(k->c, PTO_EINVAL, "%s: scratch %s (domain %d rank %d)", name, why, dom,
                       k->me);
    /* woff: where the scratch's buffer pointer lies; the view begins later */
    k->view_at = woff + (uint64_t)(k->base - sbuf);
    if (table) k->table = k->view_at + HDR_CELLS;
  }
  if (k->d.status == 0) scratch_remember(k, scratch);
  return 0;
}

/* Domain, rank and scratch: without them nothing can be published, so
 * these fail on this rank only. */
static int coll_open(coll *k, const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                     coll_kind kind) {
  k->why[0] = 0;
  k->ctx = ctx;
  k->dom = dom;
  k->seq = 0;
  k->d = (coll_desc){.kind = kind};
  k->es = 0;
  k->buf = -1;
  k->pulled = false;
  k->table = NO_TABLE;
  k->view_at = 0;
  k->locked = false;
  k->me = k->n = -1;
  k->base = k->data = NULL;
  k->bytes = k->slot = k->ring_slot = 0;
  k->c = pto_kctx_comm(ctx);
  k->cd = NULL;
  if (!k->c) return PTO_EINVAL;
  const char *name = kind_name(kind);
  k->cd = comm_find(k->c, dom);
  if (!k->cd) return comm_fail(k->c, PTO_EINVAL, "%s: unknown domain %d", name, dom);
  k->me = k->cd->my_rank;
  k->n = k->cd->desc.nranks;
  if (k->me < 0)
    return comm_fail(k->c, PTO_EPEER, "%s: chip %d is not a member of domain %d", name, k->c->chip,
                     dom);
  /* the busy mark, the table's generations and the cells carry the epoch */
  int rc = comm_epoch_check(k->c, name, dom, k->me);
  if (rc) return rc;
  if (!scratch_recall(k, scratch) && (rc = scratch_layout(k, scratch, name))) return rc;
  /* One collective at a time per scratch view (pto/coll.h): a call of
   * another block of this chip on it while one runs would take that
   * call's slots, counts and table, and the ranks' calls would pair
   * across the blocks (wrong sums returned as PTO_OK). CELL_BUSY of my
   * own copy says which block is in a call on the view (tagged with the
   * task: a mark an abandoned call left in an earlier task is none). */
  _Atomic uint64_t *busy = busy_word(k);
  uint64_t mine = (uint64_t)k->c->epoch << 32 | (uint32_t)(ctx->block_idx + 1);
  uint64_t cur = atomic_load_explicit(busy, memory_order_relaxed);
  do {
    if (cur && cur >> 32 == k->c->epoch)
      return comm_fail(k->c, PTO_EINVAL,
                       "%s: block %d of this chip's task called on a scratch view on which its "
                       "block %d is in a collective (one collective at a time per scratch "
                       "view: give each block a view of its own) (domain %d rank %d)",
                       name, ctx->block_idx, (int)(uint32_t)cur - 1, dom, k->me);
  } while (!atomic_compare_exchange_weak_explicit(busy, &cur, mine, memory_order_acquire,
                                                  memory_order_relaxed));
  return 0;
}

/* From a call's first use of the backend's own collectives to its end,
 * one call at a time per window buffer (comm.h, coll_lock): they share the
 * buffer's communicator. On direct windows a call that goes on to them
 * takes it before its table round (native_exchange); the rounds of calls
 * that end in the table or the mesh take no part (each scratch view has
 * its own table). */
static void native_hold(coll *k) {
  if (k->locked) return;
  pthread_mutex_lock(&k->cd->coll_lock[k->buf]);
  k->locked = true;
}

/* The end of a call that coll_open opened: its result, rc. */
static int coll_close(coll *k, int rc) {
  if (k->locked) pthread_mutex_unlock(&k->cd->coll_lock[k->buf]);
  /* release: the next call on the view, of another block, sees this
   * call's writes of the scratch */
  atomic_store_explicit(busy_word(k), 0, memory_order_release);
  return rc;
}

/* Rank p's window, on direct windows (comm_dom.direct_base). */
static unsigned char *window_of(const coll *k, int p) {
  const comm_dom *d = k->cd;
  return d->direct_base ? d->direct_base + (uint64_t)p * d->desc.win_bytes
                        : d->be->direct(d->win, p);
}

static unsigned char *mesh_slot(const coll *k, int p) { return k->data + (size_t)p * k->slot; }
/* Rank p's own mesh slot (slot p) in rank p's scratch, on direct windows:
 * the scratch lies at the same window offset on every rank. */
static const unsigned char *peer_slot(const coll *k, int p) {
  return (const unsigned char *)window_of(k, p) + k->view_at + (size_t)(mesh_slot(k, p) - k->base);
}
static unsigned char *ring_slot(const coll *k, int s) { return k->data + (size_t)s * k->ring_slot; }
static unsigned char *desc_at(const coll *k, int p) {
  return k->base + HDR_CELLS + (size_t)p * DESC_STRIDE;
}

/* The call fails on this rank naming how rank p's call (o) differs from
 * mine in `field`. */
static int mismatch(coll *k, int p, const coll_desc *o, const char *field) {
  const char *name = kind_name(k->d.kind);
  char mop[40], oop[40], malgo[32], oalgo[32];
  op_name(k->d.op, mop, sizeof mop);
  op_name(o->op, oop, sizeof oop);
  return comm_fail(k->c, PTO_EINVAL,
                   "%s: mismatched %s on domain %d: rank %d called %s #%" PRId32 " (count %" PRId64
                   ", %s, %s, root %" PRId32 ", %s), rank %d called %s #%" PRId32 " (count %" PRId64
                   ", %s, %s, root %" PRId32 ", %s)",
                   name, field, k->dom, k->me, name, k->d.seq, k->d.count,
                   pto_dtype_name((pto_dtype)k->d.dtype), mop, k->d.root,
                   algo_name(k->d.algo, malgo, sizeof malgo), p, kind_name(o->kind), o->seq,
                   o->count, pto_dtype_name((pto_dtype)o->dtype), oop, o->root,
                   algo_name(o->algo, oalgo, sizeof oalgo));
}

/* Whether the descriptor at a (8-aligned) is b, every byte. */
static inline bool desc_same(const unsigned char *a, const coll_desc *b) {
  return memcmp(a, b, DESC_BYTES) == 0; /* gcc inlines it: a few vector compares */
}

/* Every rank's descriptor (rank p's at descs[p], 8-aligned; mine is k->d) against
 * mine, before any data is used: 0 when every rank made my call with valid
 * arguments; else the call fails on this rank naming, in this order, a
 * rank that made another call (collective, call number), my own argument
 * error, that a peer made one, or how the arguments differ (every rank
 * finds one). */
static int check_descs(coll *k, const unsigned char *const *descs) {
  /* the common case first: mine has no error and every peer's descriptor
   * is mine byte for byte (every field is compared below, and coll_desc
   * has no padding) */
  if (k->d.status == 0) {
    int p = 0;
    while (p < k->n && (p == k->me || desc_same(descs[p], &k->d)))
      p++;
    if (p == k->n) return 0;
  }
  const char *name = kind_name(k->d.kind);
  for (int p = 0; p < k->n; p++) {
    const coll_desc *o = (const coll_desc *)descs[p];
    if (p != k->me && (o->kind != k->d.kind || o->seq != k->d.seq))
      return mismatch(k, p, o, o->kind != k->d.kind ? "collective" : "call number");
  }
  /* the same call everywhere: a rank's own argument error before the
   * arguments' differences, which its fields may only reflect (an unknown
   * algorithm, a count of -1): comparing them would name a difference
   * instead of the error */
  if (k->d.status)
    return comm_fail(k->c, (int)k->d.status, "%s #%" PRId32 " on domain %d rank %d: %s", name,
                     k->d.seq, k->dom, k->me, k->why);
  for (int p = 0; p < k->n; p++)
    if (p != k->me && ((const coll_desc *)descs[p])->status)
      return comm_fail_secondary(k->c, (int)((const coll_desc *)descs[p])->status,
                                 "%s #%" PRId32
                                 " on domain %d: rank %d called with invalid arguments (rank "
                                 "%d stops too)",
                                 name, k->d.seq, k->dom, p, k->me);
  for (int p = 0; p < k->n; p++) {
    const coll_desc *o = p == k->me ? &k->d : (const coll_desc *)descs[p];
    const char *field = o->count != k->d.count   ? "count"
                        : o->dtype != k->d.dtype ? "dtype"
                        : o->op != k->d.op       ? "op"
                        : o->root != k->d.root   ? "root"
                        : o->algo != k->d.algo   ? "algorithm"
                                                 : NULL;
    if (field) return mismatch(k, p, o, field);
    if (o->slot != k->d.slot) /* the same call on views of other lengths */
      return comm_fail(k->c, PTO_EINVAL,
                       "%s #%" PRId32 ": mismatched scratch size on domain %d: rank %d's scratch "
                       "view has %" PRId64 "-byte slots, rank %d's %" PRId64
                       " (pass views of one size on every rank)",
                       name, k->d.seq, k->dom, k->me, k->d.slot, p, o->slot);
  }
  return 0;
}

/* ---- the call table (backends with direct windows) ---- */

static coll_table *table_of(const coll *k, int p) {
  return (coll_table *)(window_of(k, p) + k->table);
}

static coll_slot *table_slot(const coll *k, int p, int32_t call) {
  return &table_of(k, p)->slot[coll_table_slot(call)];
}

/* My next call number on the scratch in this task, counted in my table
 * (so per scratch, as the SEQ cell: scratch views of one window buffer
 * used by different threads keep their own counts), epoch-tagged: a new
 * task starts at 1. */
static int32_t table_call(coll *k) {
  coll_table *t = table_of(k, k->me);
  int32_t c = t->calls >> 32 == k->c->epoch ? (int32_t)(uint32_t)t->calls + 1 : 1;
  if (c == 1) { /* what an earlier task (a failed one too) left is no call of this one */
    t->oneway = 0;
    memset(t->known, 0, sizeof(int32_t) * (size_t)k->n);
  }
  t->calls = coll_table_gen(k->c->epoch, c);
  return c;
}

/* The next call number on the scratch buffer in this task (the backend's
 * own collectives keep theirs apart per buffer). */
static int32_t next_call(coll *k) {
  if (k->cd->coll_calls[k->buf].epoch != k->c->epoch) {
    k->cd->coll_calls[k->buf].epoch = k->c->epoch;
    k->cd->coll_calls[k->buf].calls = 0;
  }
  return ++k->cd->coll_calls[k->buf].calls;
}

/* A wait on the peers' call tables: until every peer (or only `only`)
 * has published call `call` in its slot for it (`exact`), or that call or
 * a later one of this task (not exact: the slot then holds call + i *
 * COLL_TABLE_SLOTS). */
typedef struct table_wait {
  const coll *k;
  int32_t call;
  int only; /* -1: every peer */
  bool exact;
  int next; /* the peers before it have published */
  bool cancelled;
} table_wait;

/* The call of this task that p's slot for `call` holds, or 0. */
static int32_t slot_call(const coll *k, int p, int32_t call) {
  /* acquire pairs with the peer's release store of the generation: its
   * descriptor and data are then visible */
  uint64_t g = atomic_load_explicit(&table_slot(k, p, call)->gen, memory_order_acquire);
  return g >> 32 == k->c->epoch ? (int32_t)(uint32_t)g : 0;
}

static bool table_ready(void *arg) {
  table_wait *w = arg;
  const coll *k = w->k;
  coll_table *t = table_of(k, k->me);
  for (; w->next < k->n; w->next++) {
    int p = w->next;
    if (p == k->me || (w->only >= 0 && p != w->only)) continue;
    int32_t seen = slot_call(k, p, w->call);
    if (w->exact ? seen != w->call : seen < w->call) {
      w->cancelled = pto_kctx_cancelled(k->ctx) || comm_stopping(k->c);
      return w->cancelled;
    }
    if (seen > t->known[p]) t->known[p] = seen;
  }
  return true;
}

/* Waits (spins, yields, then parks: the backend's signal_park, with the
 * domain's deadline) until table_ready(w); 0, or the call's failure
 * named: `why` says why the call waits for that one ("" in the call's own
 * round). */
static int table_wait_for(coll *k, table_wait *w, const char *why) {
  const comm_dom *d = k->cd;
  int64_t ms = d->desc.wait_timeout_ms;
  bool ok = table_ready(w);
  if (!ok && !w->cancelled) {
    /* a controlled schedule may run the chip's other blocks meanwhile */
    bool yielded = k->ctx && schedule_block_wait(k->ctx, table_ready, w);
    ok = d->be->signal_park(d->win, table_ready, w, pto_deadline_ms(ms));
    if (yielded) schedule_block_resume(k->ctx);
  }
  /* a stop or cancel seen at the first look too: the peers' slots may still
   * hold an older call, and comparing them would name a mismatch that was
   * never made instead of why the call ended */
  if (ok && !w->cancelled) return 0;
  const char *name = kind_name(k->d.kind);
  char stop[160];
  if (comm_stopping(k->c))
    return comm_fail_secondary(k->c, PTO_ESHUTDOWN,
                               "%s #%" PRId32 " ended: %s while domain %d rank %d waited for rank "
                               "%d's call%s",
                               name, k->d.seq, comm_stop_why(k->c, stop, sizeof stop), k->dom,
                               k->me, w->next, why);
  if (w->cancelled) return PTO_ESHUTDOWN; /* the run already failed elsewhere */
  /* what its table's slot holds says nothing more: an older call, or
   * another view's bytes when it called elsewhere */
  return comm_fail(
      k->c, PTO_EWAIT_TIMEOUT,
      "%s #%" PRId32 " timed out: domain %d rank %d waited %" PRId64
      " ms for rank %d's call #%" PRId32 "%s on the scratch view at window offset %" PRIu64
      ", which rank %d has not made there (it did not call, or called on "
      "another scratch view or buffer) (task epoch %u)",
      name, k->d.seq, k->dom, k->me, ms, w->next, w->call, why, k->view_at, w->next, k->c->epoch);
}

/* The common case of a wait for call c and its check, in one look, no
 * wait: every peer (or only `only`) has published call c with descriptor
 * d byte for byte (check_descs's first test, for a call without an error
 * of its own). Then it records what table_ready would have learnt
 * (known[]) and returns true; else (a peer not there yet, or a difference
 * to name) false, and the caller takes the full wait and check, which
 * name it. The generic wait and check were about 300 instructions of an
 * 8-byte broadcast's root (its later check, with the descriptor saved
 * and restored around them) and 200 of each other rank's. */
static bool peers_made(coll *k, int32_t c, const coll_desc *d, int only) {
  const uint64_t gen = coll_table_gen(k->c->epoch, c);
  for (int p = 0; p < k->n; p++) {
    if (p == k->me || (only >= 0 && p != only)) continue;
    const coll_slot *o = table_slot(k, p, c);
    /* acquire, as slot_call's: the descriptor is then the peer's call c's */
    if (atomic_load_explicit(&o->gen, memory_order_acquire) != gen ||
        !desc_same((const unsigned char *)&o->d, d))
      return false;
  }
  coll_table *t = table_of(k, k->me);
  for (int p = 0; p < k->n; p++)
    if (p != k->me && (only < 0 || p == only) && t->known[p] < c) t->known[p] = c;
  return true;
}

/* Checks my one-way broadcasts (calls at which I was the root and waited
 * for no peer) up to call `upto` against the peers' calls: waits until
 * each peer has published the call, then compares its descriptor with
 * mine, as the call's own round would have. My slot of such a call still
 * holds it: I write it again at call c + COLL_TABLE_SLOTS, after this
 * check (at call c + COLL_ONEWAY_LAG, or the task's end). So does each
 * peer's: it writes its slot of call c again only once I have published
 * call c + COLL_ONEWAY_LAG (coll_table_reuse), which I do after this
 * check. A difference fails this call, naming the broadcast's. */
static int table_settle(coll *k, int32_t upto) {
  coll_table *t = table_of(k, k->me);
  /* the calls of [upto - (SLOTS - LAG) + 1, upto] whose slots have bits,
   * oldest first: bit i of `due` is call c0 + i's slot (the bits rotated;
   * a shift by all 64 would be undefined). The calls after upto that may
   * still be unchecked (up to LAG - 1 of them) hold the slots before c0,
   * so their bits are left out without a look; the slot_call test below
   * stays for the rest. Every call is checked here LAG calls later, so a
   * bit is seldom older than upto. */
  enum { WINDOW = COLL_TABLE_SLOTS - COLL_ONEWAY_LAG };
  const int32_t c0 = upto - WINDOW + 1;
  const int first = coll_table_slot(c0);
  uint64_t due = t->oneway;
  if (first) due = due >> first | due << (COLL_TABLE_SLOTS - first);
  due &= ((uint64_t)1 << WINDOW) - 1;
  for (; due; due &= due - 1) {
    int32_t c = c0 + __builtin_ctzll(due);
    /* the bit is of the call my slot holds: a later one, not due yet, when
     * that is not c */
    if (c < 1 || slot_call(k, k->me, c) != c) continue;
    t->oneway &= ~((uint64_t)1 << coll_table_slot(c));
    /* my one-way call c, as the broadcast's root: no error of its own */
    if (peers_made(k, c, &table_slot(k, k->me, c)->d, -1)) continue;
    coll_desc now = k->d;
    k->d = table_slot(k, k->me, c)->d; /* the broadcast's (still in my slot): its errors name it */
    table_wait w = {k, c, -1, true, 0, false};
    int rc = table_wait_for(k, &w, " (to check it against this rank's, the broadcast's root)");
    const unsigned char *descs[PTO_COMM_MAX_RANKS];
    for (int p = 0; !rc && p < k->n; p++)
      descs[p] = (const unsigned char *)&table_slot(k, p, c)->d;
    if (!rc) rc = check_descs(k, descs);
    k->d = now;
    if (rc) return rc;
  }
  return 0;
}

/* Before I write my slot of call s: every peer has published call
 * coll_table_reuse(s) or a later one, so none still reads the call my
 * slot holds (known[p] remembers what was seen, so that this reads a
 * peer's table only when it learnt nothing newer meanwhile). */
static int table_reuse_wait(coll *k, int32_t s) {
  int32_t r = coll_table_reuse(s);
  if (r < 1) return 0;
  coll_table *t = table_of(k, k->me);
  for (int p = 0; p < k->n; p++) {
    if (p == k->me || t->known[p] >= r) continue;
    table_wait w = {k, r, p, false, 0, false};
    int rc = table_wait_for(k, &w, " (its end frees this rank's call table slot)");
    if (rc) return rc;
  }
  return 0;
}

/* Puts the scratch view on the list the task's end checks (coll_settle);
 * false when the list is full. */
static int coll_settle_all(pto_comm *c);
static int records_settle(coll *k, int32_t call, bool last);
static bool settle_later(coll *k) {
  coll_table *t = table_of(k, k->me);
  if (t->pend_epoch == k->c->epoch) return true;
  pto_comm *c = k->c;
  pthread_mutex_lock(&c->pend_lock);
  bool ok = c->npend < COMM_COLL_PEND_MAX;
  if (ok) {
    c->pend[c->npend++] = (comm_coll_pend){k->dom, k->table};
    c->coll_settle = coll_settle_all;
    t->pend_epoch = k->c->epoch;
  }
  pthread_mutex_unlock(&c->pend_lock);
  return ok;
}

/* Through a backend's records every window buffer used in the task is
 * acknowledged at its end (coll_settle_all): no list to fill, so that
 * every rank takes the same calls for one-way (the pattern of records
 * their pairs exchange depends on it). */
static void records_later(coll *k) {
  pto_comm *c = k->c;
  if (atomic_load_explicit(&c->coll_records, memory_order_relaxed)) return;
  pthread_mutex_lock(&c->pend_lock);
  c->coll_settle = coll_settle_all;
  atomic_store_explicit(&c->coll_records, true, memory_order_relaxed);
  pthread_mutex_unlock(&c->pend_lock);
}

/* A call's state for the checks at a task's end, on domain d (no kernel
 * context: the kernels have returned). */
static void end_coll(coll *k, pto_comm *c, comm_dom *d) {
  memset(k, 0, sizeof *k);
  k->c = c;
  k->dom = d->desc.id;
  k->cd = d;
  k->me = d->my_rank;
  k->n = d->desc.nranks;
}

/* The end of a task: checks every one-way broadcast still unchecked, on
 * every scratch view of the list (settle_later), then empties it. The
 * kernels have returned, so nothing else uses the views. */
static int coll_settle_all(pto_comm *c) {
  int rc = 0;
  /* a task whose op already failed reports that: its peers may never
   * publish the calls (they wait for this rank, or were cancelled) */
  if (comm_task_error(c, NULL, 0)) comm_coll_unchecked_drop(c);
  for (int i = 0; i < c->npend && !rc; i++) {
    coll k;
    comm_dom *d = comm_find(c, c->pend[i].dom);
    if (!d) continue; /* cannot happen: domains outlive the task */
    end_coll(&k, c, d);
    k.table = c->pend[i].table;
    k.view_at = k.table - HDR_CELLS;
    k.buf = -1;
    coll_table *t = table_of(&k, k.me);
    if (t->calls >> 32 != c->epoch) continue; /* no call in this task */
    rc = table_settle(&k, (int32_t)(uint32_t)t->calls);
    t->oneway = 0;
  }
  c->npend = 0;
  /* every window buffer of a backend's records with calls in this task */
  for (int i = 0;
       i < COMM_MAX_DOMAINS && !rc && atomic_load_explicit(&c->coll_records, memory_order_relaxed);
       i++) {
    comm_dom *d = c->doms[i];
    if (!d || d->my_rank < 0 || !d->settle_run || d->direct_all) continue; /* direct: tables */
    for (int b = 0; b < d->desc.nbuffers && !rc; b++) {
      if (d->coll_calls[b].epoch != c->epoch) continue;
      coll k;
      end_coll(&k, c, d);
      k.table = NO_TABLE;
      k.buf = b;
      rc = records_settle(&k, d->coll_calls[b].calls, true);
    }
  }
  atomic_store_explicit(&c->coll_records, false, memory_order_relaxed);
  return rc;
}

/* Steps 2-3 on the call table: publishes my descriptor, and pub (my whole
 * src, pub_bytes) when given and it fits, waits until every peer has
 * published the same call, and compares the descriptors. bb is the
 * call's block, held to the scratch's slots as on the other paths (the
 * same scratch must serve algorithm=). On 0, pubs[p] (when given) is what
 * rank p published, in its table (mine too: a copy of src, so it never
 * overlaps dst), until it writes that slot again (coll_table_reuse).
 *
 * A one-way call (a small broadcast: oneway_root >= 0, the same on every
 * rank whose arguments agree) waits for the root only: the root publishes
 * and returns, each other rank waits for the root's slot, compares the
 * root's descriptor with its own and takes the data. The root checks the
 * peers' calls later, before it writes that slot again (table_settle at
 * its call COLL_ONEWAY_LAG later, or the task's end): so a root may run up
 * to COLL_ONEWAY_LAG calls ahead of the others, as an MPI root does with
 * eager sends, and a mismatch only the root can see (another rank that
 * also took itself for the root) fails the root's later call or its task
 * (docs/comm.md, "One-way broadcasts"). */
static int table_exchange(coll *k, size_t bb, const void *pub, size_t pub_bytes,
                          const unsigned char **pubs, int oneway_root) {
  if (k->d.status == 0 && bb > k->slot) {
    set_why(k, "blocks of %zu bytes do not fit the scratch's %zu-byte slots", bb, k->slot);
    k->d.status = PTO_EINVAL;
  }
  /* a window operation, as the ops' own: checking mode must not run the
   * unit a second time (its call would be a second call) */
  contract_note_comm(k->ctx);
  int32_t s = table_call(k);
  k->d.seq = s;
  int rc = table_settle(k, coll_oneway_settled(s));
  if (!rc) rc = table_reuse_wait(k, s);
  if (rc) return rc;
  /* a root whose view cannot go on the task's list waits for every rank */
  bool root_alone = oneway_root == k->me && k->n > 1 && k->d.status == 0 && settle_later(k);
  coll_slot *mine = table_slot(k, k->me, s);
  mine->d = k->d;
  if (pub && k->d.status == 0 && pub_bytes <= COLL_TABLE_DATA) memcpy(mine->data, pub, pub_bytes);
  /* release: the descriptor and data above are visible to a peer that
   * sees the generation */
  atomic_store_explicit(&mine->gen, coll_table_gen(k->c->epoch, s), memory_order_release);
  const comm_dom *d = k->cd;
  for (int p = 0; p < k->n; p++)
    if (p != k->me) d->be->wake(d->win, p);
  coll_table *t = table_of(k, k->me);
  if (root_alone) {
    t->oneway |= (uint64_t)1 << coll_table_slot(s);
    if (pubs) pubs[k->me] = mine->data;
    return 0;
  }
  int only = oneway_root >= 0 && oneway_root != k->me ? oneway_root : -1;
  if (k->d.status != 0 || !peers_made(k, s, &k->d, only)) {
    table_wait w = {k, s, only, true, 0, false};
    if ((rc = table_wait_for(k, &w, ""))) return rc;
    /* a one-way call's other ranks compare with the root's call only */
    const unsigned char *descs[PTO_COMM_MAX_RANKS];
    for (int p = 0; p < k->n; p++)
      descs[p] = only < 0 || p == only ? (const unsigned char *)&table_slot(k, p, s)->d
                                       : (const unsigned char *)&k->d;
    if ((rc = check_descs(k, descs))) return rc;
  }
  for (int p = 0; pubs && p < k->n; p++)
    pubs[p] = only < 0 || p == only || p == k->me ? table_slot(k, p, s)->data : NULL;
  return 0;
}

/* Does the call's data go with the table? pub_bytes: what each rank
 * publishes (its whole src; on the broadcast's root only). The same answer
 * on every rank once the descriptors agree. */
static bool table_data(const coll *k, size_t pub_bytes) {
  return k->table != NO_TABLE && k->d.status == 0 && pub_bytes <= COLL_TABLE_DATA;
}

/* pubs[p] = rank p's whole src, published in its table: its block for me */
static void mine_of_each(const coll *k, const unsigned char **pubs, size_t bb) {
  for (int p = 0; p < k->n; p++)
    pubs[p] += (size_t)k->me * bb;
}

/* ---- through the backend's own collectives (the MPI backend's) ---- */

static bool cancel_cb(void *arg) {
  const coll *k = arg;
  return pto_kctx_cancelled(k->ctx) || comm_stopping(k->c);
}

/* The call failed in the backend (rc, with its why) while `what`. */
static int native_fail(coll *k, int rc, int64_t ms, const char *what, const char *why) {
  const char *name = kind_name(k->d.kind);
  char stop[160];
  if (comm_stopping(k->c))
    return comm_fail_secondary(
        k->c, PTO_ESHUTDOWN, "%s #%" PRId32 " ended: %s while domain %d rank %d waited for %s: %s",
        name, k->d.seq, comm_stop_why(k->c, stop, sizeof stop), k->dom, k->me, what, why);
  if (rc == PTO_ESHUTDOWN) return rc; /* the run already failed elsewhere */
  if (rc == PTO_EWAIT_TIMEOUT)
    return comm_fail(k->c, rc,
                     "%s #%" PRId32 " timed out: domain %d rank %d waited %" PRId64
                     " ms for %s: %s (task epoch %u)",
                     name, k->d.seq, k->dom, k->me, ms, what, why, k->c->epoch);
  return comm_fail(k->c, rc, "%s #%" PRId32 " on domain %d rank %d, %s: %s", name, k->d.seq, k->dom,
                   k->me, what, why);
}

static int64_t native_ms(const coll *k) {
  const comm_domain_desc *d = &k->cd->desc;
  return d->wait_timeout_ms > 0 ? d->wait_timeout_ms : pto_option(PTO_OPT_NODE_WAIT_MS);
}

/* One collective (call) or record exchange (x) of the backend, with the
 * domain's deadline; a failure is the call's, named (`what`: which stage
 * of the call). */
static int native(coll *k, comm_coll_call *call, comm_exchange *x, const char *what) {
  int64_t ms = native_ms(k);
  char why[300];
  why[0] = 0;
  int rc;
  native_hold(k);
  if (call) {
    call->buf = k->buf;
    rc = k->cd->be->coll(k->cd->win, call, ms, cancel_cb, k, why, sizeof why);
  } else {
    x->buf = k->buf;
    rc = k->cd->be->exchange(k->cd->win, x, ms, cancel_cb, k, why, sizeof why);
  }
  return rc ? native_fail(k, rc, ms, what, why) : 0;
}

/* The most data one rank sends a peer in its record (below) in a call of
 * this kind: the backend's record_max for it, the same on every rank of
 * the domain (mpi_coll.c says what it is and why). Every record is
 * received into room for the most of any kind's (record_max[0]), so that
 * ranks whose calls differ still meet and name the difference. */
static size_t fuse_bytes(const coll *k) { return k->cd->record_max[k->d.kind]; }

/* My data for peer p (NULL: none), `bb` bytes, as coll_exchange's. */
typedef const void *(*block_fn)(const coll *k, int p, const void *arg);

/* The same block, arg, for every peer (NULL on a rank that sends none: a
 * broadcast's other ranks). */
static const void *whole_block(const coll *k, int p, const void *arg) {
  (void)k;
  (void)p;
  return arg;
}

/* A record of the backend's exchange: the call's descriptor, then its
 * node task. The call number counts the calls of one task on the scratch
 * buffer, so a record left in flight by a call of an earlier task that
 * did not complete (MPI cannot withdraw a send) would pass for the same
 * call of a later task, and its data for that call's: the epoch, which
 * never repeats, tells them apart (the generation of a reusable word,
 * docs/architecture.md). */
typedef struct coll_rec {
  coll_desc d;
  int64_t epoch;
  /* The scratch view, by its window offset: the calls of every scratch
   * view of one window buffer meet in the order made there (comm.h,
   * coll_lock), so a call on another view of it is named, never its data
   * used for this one's (a view of another length: the descriptor's slot
   * size, on every path). */
  int64_t view_at;
} coll_rec;

/* The records of a call (recs[p], rank p's; NULL: compare mine instead),
 * mine: of the same task and scratch view, then their descriptors
 * (check_descs) against mine (k->d). */
static int check_recs(coll *k, const unsigned char *const *recs, const coll_rec *mine) {
  /* a record begins with its descriptor: recs serve as the descriptors
   * (check_descs skips mine) unless one is missing */
  const unsigned char *descs[PTO_COMM_MAX_RANKS];
  const unsigned char *const *use = recs;
  for (int p = 0; p < k->n; p++) {
    const coll_rec *o = (const coll_rec *)recs[p];
    if (p == k->me) continue;
    if (!o) {
      if (use == recs) {
        memcpy(descs, recs, sizeof *descs * (size_t)k->n);
        use = descs;
      }
      descs[p] = (const unsigned char *)&k->d;
      continue;
    }
    if (o->epoch != mine->epoch)
      return comm_fail(
          k->c, PTO_EMPI,
          "%s #%" PRId32 " on domain %d rank %d: rank %d's record is of its call #%" PRId32
          " of node task epoch %" PRId64 ", this call is of epoch %" PRId64
          ": that call did not complete and its record was still in flight (the "
          "scratch buffer's collectives are out of step: use another scratch "
          "buffer, or a new run)",
          kind_name(k->d.kind), k->d.seq, k->dom, k->me, p, o->d.seq, o->epoch, mine->epoch);
    if (o->view_at != mine->view_at)
      return comm_fail(k->c, PTO_EINVAL,
                       "%s #%" PRId32 ": mismatched scratch view on domain %d: rank %d called on "
                       "the view at byte %" PRId64 " of buffer '%s', rank %d on the one at byte "
                       "%" PRId64,
                       kind_name(k->d.kind), k->d.seq, k->dom, k->me, mine->view_at,
                       k->cd->desc.buffers[k->buf].name, p, o->view_at);
  }
  return check_descs(k, use);
}

/* A call's headers from every rank, acknowledged after a one-way
 * broadcast (records_settle): checked as a whole exchange would have,
 * naming the call (its own argument error was named at the call). */
static int settle_check(void *arg, uint64_t tag, const unsigned char **recs) {
  (void)tag;
  coll *k = arg;
  const coll_rec *mine = (const coll_rec *)recs[k->me];
  if (mine->d.status) return 0;
  coll_desc now = k->d;
  k->d = mine->d;
  int rc = check_recs(k, recs, mine);
  k->d = now;
  return rc;
}

/* At call `call` on the scratch buffer, a multiple of the backend's run
 * (before its exchange), or `last`, at the task's end (call: the last
 * one): checks the calls since the last check but one, whose headers the
 * ranks acknowledged after one-way broadcasts (the backend's settle); a
 * difference fails this call (or the task's end), naming the call. */
static int records_settle(coll *k, int32_t call, bool last) {
  char why[300];
  why[0] = 0;
  int64_t ms = native_ms(k);
  uint64_t at = 0;
  int rc = k->cd->be->settle(k->cd->win, k->buf, coll_table_gen(k->c->epoch, call), last,
                             settle_check, k, &at, ms, cancel_cb, k, why, sizeof why);
  if (!rc || why[0] == 0) return rc; /* a check's failure is named already */
  coll_desc now = k->d;
  k->d.kind = K_BROADCAST; /* the one-way calls' */
  k->d.seq = (int32_t)(uint32_t)at;
  rc = native_fail(k, rc, ms, "the other ranks' acknowledgements of their calls", why);
  k->d = now;
  return rc;
}

/* Steps 1-3 through the backend: every rank sends each peer one
 * record, its descriptor followed by its block for that peer when block is given
 * and the block fits fuse_bytes, and receives one from every peer (the
 * backend's record exchange: one message each way on the MPI backend,
 * pieces of it to a peer on the same host, mpi_coll.c).
 * The call number is this rank's count of calls on the scratch buffer in
 * this task. The records always go, with or without data, so that ranks
 * whose arguments differ still meet and every rank names the difference.
 * On 0 with a block, blk[p] is rank p's block for me (p != me), in the
 * backend's staging until its next call on the scratch buffer.
 *
 * A small broadcast (oneway_root >= 0) without a call table is one-way,
 * as in the table: only the root sends its record, and returns once it is
 * sent, each other rank once it came (blk[root] alone); every rank checks
 * the others' headers of the call one to two runs of calls later on the
 * buffer (the backend's settle_run), or at the task's end, acknowledged in batches
 * (records_settle; the backend may run it whole, when a record would not
 * go as one message). */
static int native_exchange(coll *k, size_t bb, block_fn block, const void *arg,
                           const unsigned char **blk, int oneway_root) {
  if (k->table != NO_TABLE) {
    /* direct windows: the descriptors meet in the call table, as every
     * call's there (so calls whose data goes with the table meet these and
     * name a difference); records follow only to carry data. The round is
     * made holding the buffer's lock: each scratch view has a table of its
     * own, while what follows meets the buffer's calls in the order they
     * take the lock (coll_lock), so a call that took it passes its round
     * only with its own peers', never beside another view's whose call the
     * peers made first (which MPI would match crosswise with this one);
     * ranks taking the lock for two views in opposite orders wait for each
     * other until the deadline, which names the call */
    native_hold(k);
    int rc = table_exchange(k, bb, NULL, 0, NULL, -1);
    if (rc || !blk || bb > fuse_bytes(k)) return rc;
    oneway_root = -1; /* the table's own one-way calls end there */
  } else {
    native_hold(k);
  }
  if (k->d.status == 0 && bb > k->slot) {
    /* the same limit as the algorithms on the scratch, which any rank may
     * pick with algorithm= */
    set_why(k, "blocks of %zu bytes do not fit the scratch's %zu-byte slots", bb, k->slot);
    k->d.status = PTO_EINVAL;
  }
  k->d.seq = next_call(k);
  /* every run of calls (the backend's settle_run), whatever this one is:
   * the acknowledgements */
  int run = k->cd->settle_run;
  bool settles = k->table == NO_TABLE && k->n > 1 && run > 0;
  int32_t s = (int32_t)k->d.seq;
  int rc = settles && s % run == 0 ? records_settle(k, s, false) : 0;
  if (rc) return rc;
  const void *blocks[PTO_COMM_MAX_RANKS];
  bool data = block && k->d.status == 0 && bb <= fuse_bytes(k);
  for (int p = 0; data && p < k->n; p++)
    blocks[p] = block(k, p, arg);
  const unsigned char *recs[PTO_COMM_MAX_RANKS];
  coll_rec mine = {k->d, k->c->epoch, (int64_t)k->view_at};
  comm_exchange x;
  x.hdr = &mine;
  x.hdr_bytes = sizeof mine;
  x.blocks = data ? blocks : NULL;
  x.block_bytes = data ? bb : 0;
  x.max_bytes = sizeof mine + k->cd->record_max[0];
  x.recv = recs;
  x.tag = coll_table_gen(k->c->epoch, (int32_t)k->d.seq);
  if (settles) records_later(k);
  x.root = settles ? oneway_root : -1;
  x.root_bytes = bb;
  if ((rc = native(k, NULL, &x, "the descriptors of the other ranks"))) return rc;
  /* a one-way call's ranks compare with the root's record only (the root
   * with none) */
  if ((rc = check_recs(k, recs, &mine))) return rc;
  for (int p = 0; blk && p < k->n; p++)
    blk[p] = p == k->me || !recs[p] ? NULL : recs[p] + sizeof mine;
  return 0;
}

/* Does the call take the backend's collective (or its records) for its
 * data? The same answer on every rank: it depends only on the checked
 * descriptor. MPI counts are ints. On direct windows (the MPI backend's
 * shared ones, one host) pto's own algorithms on the windows run instead,
 * as on shm, where they beat MPI's collectives, unless the call asked for
 * PTO_COLL_MPI: a reduction at every size (an allreduce the mesh up to
 * PTO_COLL_MESH_MAX_BYTES of every rank's block together and the ring
 * beyond, a reduce-scatter the mesh), an allgather's or a broadcast's
 * block below direct_mesh_max, an all-to-all's below 1 MiB (2 ranks:
 * direct_mesh_max too). Measured on 2
 * and 4 ranks of one host, against MPI_Allreduce etc. (docs/comm.md,
 * "Which algorithm"): the ring 0.52-1.26x where MPI's nonblocking
 * allreduce took 0.73-1.58x, the reduce-scatter's mesh 0.19-0.52x against
 * 0.88-1.65x, the all-to-all's mesh lost from 1 MiB blocks on 4 ranks.
 * The allgather's and broadcast's mesh copy a block twice (into the
 * sender's mesh slot, out of it in each peer), where Open MPI's
 * shared-memory transport copies it once, from the sender's buffer into
 * the receiver's: the mesh lost from 4-8 MiB blocks in one phase of the
 * host and from 256 KiB (2-rank broadcast: 1.4-3.7x against 1.07x) in
 * another, where a block written by one process and read by another costs
 * several times its copy in one process. The limits were where it lost in
 * the second; in the first MPI's collective there costs about its own
 * blocking call's time. Since, between 2 ranks an allgather, all-to-all
 * or broadcast on MPI's path is one exchange of the caller's buffers (a
 * broadcast the root's one send: mpi_coll.c, pair_exchange), not libnbc's
 * schedule, and a broadcast's MPI_Ibcast on more ranks held up better
 * than the mesh. In a phase where the mesh lost (medians of 3-6 runs,
 * bench/results/coll_mpi_shared_switch/): 2 ranks' allgather of 64-256
 * KiB blocks took 1.34-1.56x Open MPI's time on the mesh and 1.04-1.10x
 * through the exchange, the all-to-all of 64-512 KiB blocks 1.19-1.51x
 * against 1.02-1.08x, the broadcast of 64 and 128 KiB 1.47 and 4.51x
 * against 1.05 and 1.02x; 4 ranks' broadcast of 64-512 KiB 1.32-2.85x
 * against 1.16-1.53x. Below 64 KiB it was mixed (2 ranks' allgather of
 * 32 KiB 1.18x against 1.07x, all-to-all of 16 KiB blocks 0.89x against
 * 1.07x, 4 ranks' broadcast of 32 KiB 0.94x against 1.13x). In the phase
 * before, the mesh took 0.87-1.09x there, where the exchange is about
 * Open MPI's own 2-rank call. So DIRECT_MESH_PAIR for those 2-rank calls
 * and every broadcast; 4 ranks' allgather and all-to-all kept the mesh
 * (0.50-1.09x against 1.03-1.57x at 64 KiB-1 MiB blocks). */
#define DIRECT_MESH_CAP          ((uint64_t)4 << 20)
#define DIRECT_MESH_MAX_ALLTOALL ((uint64_t)1 << 20)
#define DIRECT_MESH_PAIR         ((uint64_t)64 << 10)
static uint64_t direct_mesh_max(const coll *k) {
  uint64_t n = (uint64_t)k->n;
  if (k->d.kind == K_BROADCAST || n == 2) return DIRECT_MESH_PAIR;
  if (k->d.kind == K_ALLTOALL) return DIRECT_MESH_MAX_ALLTOALL;
  uint64_t max = n * ((uint64_t)512 << 10); /* allgather; 4 ranks: 2 MiB */
  return max < DIRECT_MESH_CAP ? max : DIRECT_MESH_CAP;
}
static bool native_data(const coll *k, bool reduction) {
  if (!k->cd || !k->cd->be->coll) return false;
  if (reduction && k->d.algo != PTO_COLL_AUTO && k->d.algo != PTO_COLL_MPI) return false;
  if (k->table != NO_TABLE && k->d.algo != PTO_COLL_MPI) {
    if (reduction) return false;
    if ((uint64_t)k->d.count * k->es < direct_mesh_max(k)) return false;
  }
  return (uint64_t)k->d.count * (uint64_t)k->n * k->es <= INT_MAX;
}

/* Steps 1-3. block(p) = my data for peer p (NULL: none), bytes `bb`.
 * On return 0 every rank called with my arguments and they are valid, and
 * blk[p] (when given) is rank p's block for me, in its mesh slot (p !=
 * me). On a backend with collectives of its own the descriptors are
 * compared there first, so that ranks that would take different paths
 * (algorithm=) still meet and name the difference. */
static int coll_exchange(coll *k, block_fn block, const void *arg, size_t bb,
                         const unsigned char **blk) {
  const pto_kctx *ctx = k->ctx;
  int n = k->n, rc;
  /* the call table takes the descriptors and, in place of ARRIVE, says
   * that the peers' data puts landed */
  bool table = k->table != NO_TABLE;
  if (!table && k->cd && k->cd->be->coll && (rc = native_exchange(k, bb, NULL, NULL, NULL, -1)))
    return rc;
  pto_tensor seq = cell(k, CELL_SEQ), arrive = cell(k, CELL_ARRIVE), done = cell(k, CELL_DONE);
  int32_t prev;
  if ((rc = pto_signal_read(ctx, k->dom, &seq, &prev))) return rc;
  k->seq = prev + 1;
  if ((rc = pto_notify(ctx, k->dom, k->me, &seq, PTO_SIGNAL_ADD, 1))) return rc;
  if (!table) k->d.seq = k->seq;
  if (k->d.status == 0 && bb > k->slot) {
    set_why(k, "blocks of %zu bytes do not fit the scratch's %zu-byte slots", bb, k->slot);
    k->d.status = PTO_EINVAL;
  }
  if (n > 1 && k->seq > 1 &&
      (rc = pto_signal_wait(ctx, k->dom, &done, PTO_CMP_GE, coll_done_target(k->seq, n), -1)))
    return rc;
  coll_desc mine = k->d;
  pto_tensor dsrc = bytes_view(&mine, sizeof mine, PTO_I64);
  pto_tensor ddst = bytes_view(desc_at(k, k->me), DESC_BYTES, PTO_I64);
  /* On direct windows a block that is the same for every peer is pulled
   * (k->pulled, for own_block): I copy it once, into my own mesh slot, and
   * each peer reads it there after the table's round. Pushed into every
   * peer's scratch, it was n - 1 copies here, and each line crossed
   * between CPUs twice (taken for the write from the peer that last read
   * it, then read back). My slot is mine to write now: every peer read my
   * previous call's block before its DONE notify (the wait above), and
   * wrote nothing there since (what a call of mine writes into my own
   * slot, in place, comes after its table round, which a peer passes only
   * once it finished with the call before). Alone (n == 1) nothing is
   * pulled. */
  bool pull = table && n > 1 && block == whole_block;
  k->pulled = pull;
  const void *whole = pull && k->d.status == 0 && bb ? block(k, k->me, arg) : NULL;
  if (whole) memmove(mesh_slot(k, k->me), whole, bb);
  for (int i = 1; i < n; i++) {
    int p = (k->me + i) % n;
    if (!table && (rc = pto_put(ctx, k->dom, p, &ddst, &dsrc, NULL))) return rc;
    const void *b = !pull && k->d.status == 0 && block && bb ? block(k, p, arg) : NULL;
    if (b) {
      pto_tensor src = bytes_view((void *)b, bb, (pto_dtype)k->d.dtype);
      pto_tensor dst = bytes_view(mesh_slot(k, k->me), bb, (pto_dtype)k->d.dtype);
      if ((rc = pto_put(ctx, k->dom, p, &dst, &src, NULL))) return rc;
    }
    if (!table && (rc = pto_notify(ctx, k->dom, p, &arrive, PTO_SIGNAL_ADD, 1))) return rc;
  }
  if (table) {
    /* the generation's release store publishes the puts above too: a
     * direct backend's puts land at once */
    if ((rc = table_exchange(k, bb, NULL, 0, NULL, -1))) return rc;
  } else {
    if (n > 1 &&
        (rc = pto_signal_wait(ctx, k->dom, &arrive, PTO_CMP_GE, coll_arrive_target(k->seq, n), -1)))
      return rc;
    const unsigned char *all[PTO_COMM_MAX_RANKS] = {NULL};
    for (int p = 0; p < n; p++)
      all[p] = desc_at(k, p);
    if ((rc = check_descs(k, all))) return rc;
  }
  for (int p = 0; blk && p < n; p++)
    blk[p] = p == k->me ? NULL : pull ? peer_slot(k, p) : mesh_slot(k, p);
  return 0;
}

/* Step 5. */
static int coll_done(coll *k) {
  pto_tensor done = cell(k, CELL_DONE);
  for (int i = 1; i < k->n; i++) {
    int rc = pto_notify(k->ctx, k->dom, (k->me + i) % k->n, &done, PTO_SIGNAL_ADD, 1);
    if (rc) return rc;
  }
  return 0;
}

/* Element size of a dtype that may be invalid (checked by local_ok). */
static size_t dtype_size(int32_t dt) {
  size_t es = tensor_es(dt);
  return es ? es : 1;
}

/* ---- allreduce ---- */

static void chunk_of(int64_t count, int n, int j, int64_t *start, int64_t *len) {
  int64_t b = count / n, r = count % n;
  *start = j * b + (j < r ? j : r);
  *len = b + (j < r ? 1 : 0);
}

static int ring_allreduce(coll *k, unsigned char *out) {
  int n = k->n, me = k->me, next = (me + 1) % n, rc;
  pto_dtype dt = (pto_dtype)k->d.dtype;
  pto_tensor ring = cell(k, CELL_RING);
  for (int step = 0; step < 2 * (n - 1); step++) {
    bool gather = step >= n - 1;
    int kk = gather ? step - (n - 1) : step;
    int sj = gather ? (me + 1 - kk + n) % n : (me - kk + n) % n;
    int rj = gather ? (me - kk + n) % n : (me - kk - 1 + n) % n;
    int64_t s0, sl, r0, rl;
    chunk_of(k->d.count, n, sj, &s0, &sl);
    chunk_of(k->d.count, n, rj, &r0, &rl);
    if (sl > 0) {
      pto_tensor src = bytes_view(out + (size_t)s0 * k->es, (size_t)sl * k->es, dt);
      pto_tensor dst = bytes_view(ring_slot(k, step), (size_t)sl * k->es, dt);
      if ((rc = pto_put(k->ctx, k->dom, next, &dst, &src, NULL))) return rc;
    }
    if ((rc = pto_notify(k->ctx, k->dom, next, &ring, PTO_SIGNAL_SET,
                         coll_ring_value(k->seq, n, step))))
      return rc;
    if ((rc = pto_signal_wait(k->ctx, k->dom, &ring, PTO_CMP_GE, coll_ring_value(k->seq, n, step),
                              -1)))
      return rc;
    if (rl == 0) continue;
    if (gather)
      memcpy(out + (size_t)r0 * k->es, ring_slot(k, step), (size_t)rl * k->es);
    else
      coll_reduce(out + (size_t)r0 * k->es, ring_slot(k, step), rl, dt, (pto_red_op)k->d.op);
  }
  return 0;
}

/* The op of a reduction: validated, with PTO_RED_REPRODUCIBLE set when
 * the call or PTO_COLL_REPRODUCIBLE asks for it (so that ranks that differ
 * in it fail, naming the op). False with k->why set when invalid. */
static bool red_setup(coll *k, int op) {
  bool repro = (op & PTO_RED_REPRODUCIBLE) || pto_option_cached(PTO_OPT_COLL_REPRODUCIBLE);
  int base = op & ~PTO_RED_REPRODUCIBLE;
  k->d.op = base | (repro ? PTO_RED_REPRODUCIBLE : 0);
  if (!coll_reduce_dtype_ok((pto_dtype)k->d.dtype))
    return !set_why(k, "dtype %s cannot be reduced (f32, f64, f16, bf16, i32)",
                    pto_dtype_name((pto_dtype)k->d.dtype));
  if (!coll_reduce_op_ok((pto_red_op)base)) return !set_why(k, "unknown reduction op %d", op);
  return true;
}

static bool reproducible(const coll *k) { return (k->d.op & PTO_RED_REPRODUCIBLE) != 0; }

/* out = block 0 op block 1 op ... op block n-1, in rank order: the one
 * order every path that promises the same bits uses (mesh, reproducible).
 * No block overlaps out. */
static void fold(const coll *k, void *out, const unsigned char *const *blk) {
  size_t bytes = (size_t)k->d.count * k->es;
  pto_red_op op = (pto_red_op)(k->d.op & ~PTO_RED_REPRODUCIBLE);
  memcpy(out, blk[0], bytes);
  for (int p = 1; p < k->n; p++)
    coll_reduce(out, blk[p], k->d.count, (pto_dtype)k->d.dtype, op);
}

/* blk[p] = first + p * stride for every rank p */
static void strided(const coll *k, const unsigned char **blk, const unsigned char *first,
                    size_t stride) {
  for (int p = 0; p < k->n; p++)
    blk[p] = first + (size_t)p * stride;
}

/* Memory a backend collective needs besides src and dst (a gather buffer,
 * a copy of a src that overlaps dst: MPI's buffers must not alias),
 * allocated before the exchange so that a failure is this rank's published
 * status, not a peer's timeout. NULL when not needed or failed. */
static void *stage(coll *k, bool need, size_t bytes) {
  if (!need || !bytes || k->d.status) return NULL;
  void *p = malloc(bytes);
  if (!p) {
    set_why(k, "no memory for %zu bytes of staging", bytes);
    k->d.status = PTO_ENOMEM;
  }
  return p;
}

/* A backend collective that did not complete may still use its buffers:
 * they are left behind then (the buffer's later calls fail at once). */
static void unstage(int rc, void *p) {
  if (rc != PTO_EWAIT_TIMEOUT && rc != PTO_ESHUTDOWN) free(p);
}

static bool overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

/* My own block among the mesh's (the last step reads every rank's block
 * while it writes dst): src itself, or a copy in my own mesh slot (which
 * only I write) when src overlaps dst; pulled, the slot holds that copy
 * already (and the peers may be reading it). */
static const unsigned char *own_block(const coll *k, const unsigned char *src, size_t bb,
                                      const void *dst, size_t dst_bytes, bool pulled) {
  if (!overlap(src, bb, dst, dst_bytes)) return src;
  if (!pulled) memmove(mesh_slot(k, k->me), src, bb);
  return mesh_slot(k, k->me);
}

/* The data step of a moving collective or reduce-scatter through the
 * backend, after native_exchange; src copied first when it overlaps dst. */
static int native_move(coll *k, comm_coll_call *call, void *copy, size_t src_bytes) {
  if (copy) {
    memcpy(copy, call->src, src_bytes);
    call->src = copy;
  }
  int rc = native(k, call, NULL, "the data");
  unstage(rc, copy);
  return rc;
}

/* The mesh's last step (rank p's block for me in blk[p], on the windows'
 * slots or in the backend's records) ends with step 5 on the windows. */
static int mesh_done(coll *k, bool native_path) { return native_path ? 0 : coll_done(k); }

/* Allreduce through the backend when the data does not come with the
 * records: reproducible, every rank's block gathered and folded here in
 * rank order; else the backend's allreduce. */
static int native_allreduce(coll *k, unsigned char *out, const unsigned char *in, size_t bytes,
                            void *all) {
  if (all) {
    comm_coll_call call = {.kind = COMM_ALLGATHER,
                           .dtype = (pto_dtype)k->d.dtype,
                           .count = k->d.count,
                           .src = in,
                           .dst = all};
    int rc = native(k, &call, NULL, "the data");
    if (!rc) {
      const unsigned char *blk[PTO_COMM_MAX_RANKS];
      strided(k, blk, all, bytes);
      fold(k, out, blk);
    }
    unstage(rc, all);
    return rc;
  }
  if (in != out && overlap(in, bytes, out, bytes)) memmove(out, in, bytes);
  comm_coll_call call = {.kind = COMM_ALLREDUCE,
                         .dtype = (pto_dtype)k->d.dtype,
                         .op = (int)(k->d.op & ~PTO_RED_REPRODUCIBLE),
                         .count = k->d.count,
                         .src = overlap(in, bytes, out, bytes) ? out : in,
                         .dst = out};
  return native(k, &call, NULL, "the data");
}

static int allreduce_call(coll *k, const pto_tensor *dst, const pto_tensor *src, pto_red_op op,
                          pto_coll_algo algo) {
  int rc = 0;
  int64_t sn = tensor_dense_numel(src);
  k->d.dtype = src ? src->dtype : -1;
  k->d.count = sn >= 0 ? sn : src ? pto_tensor_numel(src) : -1;
  k->d.algo = algo;
  k->es = dtype_size(k->d.dtype);
  bool ok = local_ok_n(k, "src", src, sn, -1) && local_ok(k, "dst", dst, k->d.count);
  if (ok)
    ok = red_setup(k, (int)op);
  else
    k->d.op = op;
  if (ok && (algo < PTO_COLL_AUTO || algo > PTO_COLL_MPI))
    ok = !set_why(k,
                  "unknown algorithm %d (PTO_COLL_AUTO 0, PTO_COLL_MESH 1, PTO_COLL_RING 2, "
                  "PTO_COLL_MPI 3)",
                  (int)algo);
  ok = args_ok(k, ok);
  size_t bytes = ok ? (size_t)k->d.count * k->es : 0;
  unsigned char *out = ok ? elem0(dst) : NULL;
  const unsigned char *in = ok ? elem0(src) : NULL;
  bool repro = reproducible(k);
  const unsigned char *blk[PTO_COMM_MAX_RANKS];
  bool nat = native_data(k, true);
  /* reproducible: the mesh, which reduces in rank order */
  bool mesh_fits = (uint64_t)bytes * (uint64_t)k->n <= PTO_COLL_MESH_MAX_BYTES;
  bool ring = !nat && !repro && k->n > 1 &&
              (algo == PTO_COLL_RING || (algo != PTO_COLL_MESH && !mesh_fits));
  if (ok && ring) {
    int64_t s, l;
    chunk_of(k->d.count, k->n, 0, &s, &l);
    if ((size_t)l * k->es > k->ring_slot) {
      set_why(k, "ring chunks of %zu bytes do not fit the scratch's %zu-byte ring slots",
              (size_t)l * k->es, k->ring_slot);
      k->d.status = PTO_EINVAL;
    }
  }
  if (!ring && table_data(k, bytes)) {
    if ((rc = table_exchange(k, bytes, in, bytes, blk, -1))) return rc;
    fold(k, out, blk);
    return 0;
  }
  if (nat) {
    /* small: every rank's data comes with the records, folded here in
     * rank order (so reproducible too) */
    bool fused = bytes <= fuse_bytes(k);
    void *all = stage(k, repro && !fused, (size_t)k->n * bytes);
    if ((rc = native_exchange(k, bytes, fused ? whole_block : NULL, in, blk, -1))) {
      free(all);
      return rc;
    }
    if (!fused) return native_allreduce(k, out, in, bytes, all);
  } else {
    /* ring moves its data after the exchange of descriptors */
    rc = coll_exchange(k, ring ? NULL : whole_block, in, ring ? 0 : bytes, blk);
    if (rc) return rc;
    if (ring) {
      memmove(out, in, bytes);
      rc = ring_allreduce(k, out);
      return rc ? rc : coll_done(k);
    }
  }
  blk[k->me] = own_block(k, in, bytes, out, bytes, k->pulled);
  fold(k, out, blk);
  return mesh_done(k, nat);
}

int pto_allreduce(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, pto_red_op op, pto_coll_algo algo) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLREDUCE);
  return rc ? rc : coll_close(&k, allreduce_call(&k, dst, src, op, algo));
}

/* ---- allgather, broadcast, reduce-scatter, all-to-all ---- */

static void move_setup(coll *k, const pto_tensor *dst, const pto_tensor *src, int64_t count) {
  k->d.dtype = dst ? dst->dtype : src ? src->dtype : -1;
  k->d.count = count;
  k->es = dtype_size(k->d.dtype);
}

/* out block p = blk[p], for every rank p */
static void gather_blocks(const coll *k, unsigned char *out, const unsigned char *const *blk,
                          size_t bb) {
  for (int p = 0; p < k->n; p++)
    pto_copy(out + (size_t)p * bb, blk[p], bb);
}

static int allgather_call(coll *k, const pto_tensor *dst, const pto_tensor *src) {
  int rc = 0;
  move_setup(k, dst, src, src ? pto_tensor_numel(src) : -1);
  bool ok = local_ok(k, "src", src, -1) && local_ok(k, "dst", dst, k->d.count * k->n);
  ok = args_ok(k, ok);
  size_t bb = ok ? (size_t)k->d.count * k->es : 0;
  const void *in = ok ? elem0(src) : NULL;
  unsigned char *out = ok ? elem0(dst) : NULL;
  const unsigned char *blk[PTO_COMM_MAX_RANKS];
  bool nat = native_data(k, false);
  if (table_data(k, bb)) {
    if ((rc = table_exchange(k, bb, in, bb, blk, -1))) return rc;
    gather_blocks(k, out, blk, bb);
    return 0;
  } else if (nat) {
    bool fused = bb <= fuse_bytes(k);
    void *copy = stage(k, !fused && overlap(in, bb, out, (size_t)k->n * bb), bb);
    if ((rc = native_exchange(k, bb, fused ? whole_block : NULL, in, blk, -1))) {
      free(copy);
      return rc;
    }
    if (!fused) {
      comm_coll_call call = {.kind = COMM_ALLGATHER,
                             .dtype = (pto_dtype)k->d.dtype,
                             .count = k->d.count,
                             .src = in,
                             .dst = out};
      return native_move(k, &call, copy, bb);
    }
  } else if ((rc = coll_exchange(k, whole_block, in, bb, blk))) {
    return rc;
  }
  blk[k->me] = own_block(k, in, bb, out, (size_t)k->n * bb, k->pulled);
  gather_blocks(k, out, blk, bb);
  return mesh_done(k, nat);
}

int pto_allgather(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLGATHER);
  return rc ? rc : coll_close(&k, allgather_call(&k, dst, src));
}

static int broadcast_call(coll *k, const pto_tensor *dst, const pto_tensor *src, int root) {
  int rc = 0;
  move_setup(k, dst, NULL, dst ? pto_tensor_numel(dst) : -1);
  k->d.root = root;
  bool ok = local_ok(k, "dst", dst, -1);
  if (ok && (root < 0 || root >= k->n))
    ok = !set_why(k, "root %d outside the domain (ranks 0..%d)", root, k->n - 1);
  if (ok && root == k->me) ok = local_ok(k, "src (on the root)", src, k->d.count);
  ok = args_ok(k, ok);
  size_t bb = ok ? (size_t)k->d.count * k->es : 0;
  const void *in = ok && root == k->me ? elem0(src) : NULL;
  const unsigned char *blk[PTO_COMM_MAX_RANKS];
  bool nat = native_data(k, false);
  if (table_data(k, bb)) {
    if ((rc = table_exchange(k, bb, in, bb, blk, root))) return rc;
    if (root == k->me)
      memmove(elem0(dst), in, bb);
    else
      pto_copy(elem0(dst), blk[root], bb);
    return 0;
  } else if (nat) {
    bool fused = bb <= fuse_bytes(k);
    if ((rc = native_exchange(k, bb, fused && in ? whole_block : NULL, in, blk, fused ? root : -1)))
      return rc;
    if (!fused) {
      /* the root moves src into dst, which MPI_Ibcast then sends */
      comm_coll_call call = {.kind = COMM_BROADCAST,
                             .dtype = (pto_dtype)k->d.dtype,
                             .root = root,
                             .count = k->d.count,
                             .src = in,
                             .dst = elem0(dst)};
      return native(k, &call, NULL, "the data");
    }
  } else if ((rc = coll_exchange(k, whole_block, in, bb, blk))) { /* NULL in: none sent */
    return rc;
  }
  if (root == k->me)
    memmove(elem0(dst), in, bb);
  else
    pto_copy(elem0(dst), blk[root], bb);
  return mesh_done(k, nat);
}

int pto_broadcast(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, int root) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_BROADCAST);
  return rc ? rc : coll_close(&k, broadcast_call(&k, dst, src, root));
}

typedef struct blocks {
  const unsigned char *in;
  size_t bb;
} blocks;

static const void *block_p(const coll *k, int p, const void *arg) {
  (void)k;
  const blocks *b = arg;
  return b->in + (size_t)p * b->bb;
}

static int reduce_scatter_call(coll *k, const pto_tensor *dst, const pto_tensor *src,
                               pto_red_op op) {
  int rc = 0;
  move_setup(k, dst, src, dst ? pto_tensor_numel(dst) : -1);
  bool ok = local_ok(k, "dst", dst, -1) && local_ok(k, "src", src, k->d.count * k->n);
  if (ok)
    ok = red_setup(k, (int)op);
  else
    k->d.op = op;
  ok = args_ok(k, ok);
  blocks b = {ok ? elem0(src) : NULL, ok ? (size_t)k->d.count * k->es : 0};
  unsigned char *out = ok ? elem0(dst) : NULL;
  const unsigned char *blk[PTO_COMM_MAX_RANKS];
  bool nat = native_data(k, true);
  if (table_data(k, (size_t)k->n * b.bb)) {
    if ((rc = table_exchange(k, b.bb, b.in, (size_t)k->n * b.bb, blk, -1))) return rc;
    mine_of_each(k, blk, b.bb);
    fold(k, out, blk);
    return 0;
  } else if (nat) {
    /* small: every rank's block for me comes with its record; else
     * reproducible: every rank's block for me (an all-to-all), folded here
     * in rank order */
    bool repro = reproducible(k), fused = b.bb <= fuse_bytes(k);
    size_t all_bytes = (size_t)k->n * b.bb;
    void *all = stage(k, repro && !fused, all_bytes);
    void *copy = stage(k, !repro && !fused && overlap(b.in, all_bytes, out, b.bb), all_bytes);
    if ((rc = native_exchange(k, b.bb, fused ? block_p : NULL, &b, blk, -1))) {
      free(all);
      free(copy);
      return rc;
    }
    if (!fused) {
      comm_coll_call call = {.kind = repro ? COMM_ALLTOALL : COMM_REDUCE_SCATTER,
                             .dtype = (pto_dtype)k->d.dtype,
                             .op = (int)(k->d.op & ~PTO_RED_REPRODUCIBLE),
                             .count = k->d.count,
                             .src = b.in,
                             .dst = repro ? all : out};
      rc = native_move(k, &call, copy, all_bytes);
      if (!rc && repro) {
        strided(k, blk, all, b.bb);
        fold(k, out, blk);
      }
      if (repro) unstage(rc, all);
      return rc;
    }
  } else if ((rc = coll_exchange(k, block_p, &b, b.bb, blk))) {
    return rc;
  }
  blk[k->me] = own_block(k, b.in + (size_t)k->me * b.bb, b.bb, out, b.bb, k->pulled);
  fold(k, out, blk);
  return mesh_done(k, nat);
}

int pto_reduce_scatter(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                       const pto_tensor *dst, const pto_tensor *src, pto_red_op op) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_REDUCE_SCATTER);
  return rc ? rc : coll_close(&k, reduce_scatter_call(&k, dst, src, op));
}

static int alltoall_call(coll *k, const pto_tensor *dst, const pto_tensor *src) {
  int rc = 0;
  int64_t total = src ? pto_tensor_numel(src) : -1;
  move_setup(k, dst, src, total >= 0 && total % k->n == 0 ? total / k->n : -1);
  bool ok = local_ok(k, "src", src, -1) && local_ok(k, "dst", dst, total);
  if (ok && total % k->n)
    ok = !set_why(k, "src has %" PRId64 " elements, not a multiple of %d ranks", total, k->n);
  ok = args_ok(k, ok);
  blocks b = {ok ? elem0(src) : NULL, ok ? (size_t)k->d.count * k->es : 0};
  unsigned char *out = ok ? elem0(dst) : NULL;
  size_t all_bytes = (size_t)k->n * b.bb;
  const unsigned char *blk[PTO_COMM_MAX_RANKS];
  bool nat = native_data(k, false);
  if (table_data(k, all_bytes)) {
    if ((rc = table_exchange(k, b.bb, b.in, all_bytes, blk, -1))) return rc;
    mine_of_each(k, blk, b.bb);
    gather_blocks(k, out, blk, b.bb);
    return 0;
  } else if (nat) {
    bool fused = b.bb <= fuse_bytes(k);
    void *copy = stage(k, !fused && overlap(b.in, all_bytes, out, all_bytes), all_bytes);
    if ((rc = native_exchange(k, b.bb, fused ? block_p : NULL, &b, blk, -1))) {
      free(copy);
      return rc;
    }
    if (!fused) {
      comm_coll_call call = {.kind = COMM_ALLTOALL,
                             .dtype = (pto_dtype)k->d.dtype,
                             .count = k->d.count,
                             .src = b.in,
                             .dst = out};
      return native_move(k, &call, copy, all_bytes);
    }
  } else if ((rc = coll_exchange(k, block_p, &b, b.bb, blk))) {
    return rc;
  }
  blk[k->me] = own_block(k, b.in + (size_t)k->me * b.bb, b.bb, out, all_bytes, k->pulled);
  gather_blocks(k, out, blk, b.bb);
  return mesh_done(k, nat);
}

int pto_alltoall(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                 const pto_tensor *dst, const pto_tensor *src) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLTOALL);
  return rc ? rc : coll_close(&k, alltoall_call(&k, dst, src));
}
