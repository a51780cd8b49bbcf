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
 *                         set by the previous rank)
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
 * Every wait has the domain's deadline (PTO_EWAIT_TIMEOUT names the cell). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm/coll_proto.h"
#include "comm/coll_reduce.h"
#include "comm/comm.h"
#include "pto/coll.h"

enum { CELL_SEQ = 0, CELL_ARRIVE = 1, CELL_DONE = 2, CELL_RING = 3 };
#define HDR_CELLS  64
#define DESC_BYTES 64
#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

typedef enum coll_kind {
  K_ALLREDUCE = 1,
  K_ALLGATHER = 2,
  K_REDUCE_SCATTER = 3,
  K_BROADCAST = 4,
  K_ALLTOALL = 5,
} coll_kind;

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

static const char *algo_name(int64_t a) {
  return a == PTO_COLL_MESH ? "mesh" : a == PTO_COLL_RING ? "ring" : "auto";
}

/* What each rank publishes: plain int64s (8 x 8 = DESC_BYTES). */
typedef struct coll_desc {
  int64_t kind;
  int64_t seq;
  int64_t count; /* elements per block */
  int64_t dtype;
  int64_t op;
  int64_t root;
  int64_t algo;   /* as requested */
  int64_t status; /* 0, or this rank's own argument error */
} coll_desc;
_Static_assert(sizeof(coll_desc) == DESC_BYTES, "descriptor size");

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
  char why[200]; /* this rank's own argument error */
} coll;

size_t pto_coll_scratch_bytes(int nranks, size_t block_bytes) {
  if (nranks < 1 || nranks > PTO_COMM_MAX_RANKS || block_bytes > ((size_t)1 << 48)) return 0;
  size_t n = (size_t)nranks;
  return 64 + HDR_CELLS + n * DESC_BYTES + (n + 2) * (ALIGN64(block_bytes) + 256);
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
  return (unsigned char *)t->buf + t->offset * (int64_t)pto_dtype_size((pto_dtype)t->dtype);
}

/* A local tensor argument: valid, contiguous, `want` elements of dtype dt
 * (want < 0: any count). Records the problem in k->why. */
static bool local_ok(coll *k, const char *what, const pto_tensor *t, int64_t want) {
  if (!t || pto_tensor_validate(t) != PTO_OK || !t->buf) {
    snprintf(k->why, sizeof k->why, "%s is not a valid tensor", what);
    return false;
  }
  if (!pto_tensor_is_contiguous(t)) {
    snprintf(k->why, sizeof k->why, "%s is not contiguous", what);
    return false;
  }
  if (t->dtype != k->d.dtype) {
    snprintf(k->why, sizeof k->why, "%s has dtype %s, not %s", what,
             pto_dtype_name((pto_dtype)t->dtype), pto_dtype_name((pto_dtype)k->d.dtype));
    return false;
  }
  if (want >= 0 && pto_tensor_numel(t) != want) {
    snprintf(k->why, sizeof k->why, "%s has %" PRId64 " elements, expected %" PRId64, what,
             pto_tensor_numel(t), want);
    return false;
  }
  return true;
}

/* Domain, rank and scratch: without them nothing can be published, so
 * these fail on this rank only. */
static int coll_open(coll *k, const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                     coll_kind kind) {
  memset(k, 0, sizeof *k);
  k->ctx = ctx;
  k->dom = dom;
  k->c = pto_kctx_comm(ctx);
  if (!k->c) return PTO_EINVAL;
  const char *name = kind_name(kind);
  k->me = pto_comm_rank(k->c, dom);
  k->n = pto_comm_size(k->c, dom);
  if (k->n < 0) return comm_fail(k->c, k->n, "%s: unknown domain %d", name, dom);
  if (k->me < 0)
    return comm_fail(k->c, k->me, "%s: chip %d is not a member of domain %d", name, k->c->chip,
                     dom);
  if (!scratch || pto_tensor_validate(scratch) != PTO_OK || !scratch->buf ||
      !pto_tensor_is_contiguous(scratch))
    return comm_fail(k->c, PTO_EINVAL,
                     "%s: scratch must be a valid contiguous view of a window buffer "
                     "(domain %d rank %d)",
                     name, dom, k->me);
  uintptr_t a = (uintptr_t)elem0(scratch), al = (a + 63) & ~(uintptr_t)63;
  size_t total = (size_t)pto_tensor_numel(scratch) * pto_dtype_size((pto_dtype)scratch->dtype);
  size_t hdr = HDR_CELLS + (size_t)k->n * DESC_BYTES;
  if (total < al - a + hdr + (size_t)(k->n + 2) * 64)
    return comm_fail(k->c, PTO_EINVAL,
                     "%s: scratch of %zu bytes is too small for %d ranks (see "
                     "pto_coll_scratch_bytes) (domain %d rank %d)",
                     name, total, k->n, dom, k->me);
  k->base = (unsigned char *)al;
  k->bytes = total - (al - a);
  k->data = k->base + hdr;
  size_t data_bytes = k->bytes - hdr;
  k->slot = (data_bytes / (size_t)(k->n + 2)) & ~(size_t)63;
  k->ring_slot =
      k->n > 1 ? ((size_t)(k->n + 2) * k->slot / (size_t)(2 * (k->n - 1))) & ~(size_t)63 : 0;
  k->d.kind = kind;
  return 0;
}

static unsigned char *mesh_slot(const coll *k, int p) { return k->data + (size_t)p * k->slot; }
static unsigned char *ring_slot(const coll *k, int s) { return k->data + (size_t)s * k->ring_slot; }
static unsigned char *desc_at(const coll *k, int p) {
  return k->base + HDR_CELLS + (size_t)p * DESC_BYTES;
}

/* Steps 1-3. block(p) = my data for peer p (NULL: none), bytes `bb`.
 * On return 0 every rank called with my arguments and they are valid. */
typedef const void *(*block_fn)(const coll *k, int p, const void *arg);

static int coll_exchange(coll *k, block_fn block, const void *arg, size_t bb) {
  const pto_kctx *ctx = k->ctx;
  const char *name = kind_name(k->d.kind);
  int n = k->n, rc;
  pto_tensor seq = cell(k, CELL_SEQ), arrive = cell(k, CELL_ARRIVE), done = cell(k, CELL_DONE);
  int32_t prev;
  if ((rc = pto_signal_read(ctx, k->dom, &seq, &prev))) return rc;
  k->seq = prev + 1;
  if ((rc = pto_notify(ctx, k->dom, k->me, &seq, PTO_SIGNAL_ADD, 1))) return rc;
  k->d.seq = k->seq;
  if (k->d.status == 0 && bb > k->slot) {
    snprintf(k->why, sizeof k->why, "blocks of %zu bytes do not fit the scratch's %zu-byte slots",
             bb, k->slot);
    k->d.status = PTO_EINVAL;
  }
  if (n > 1 && k->seq > 1 &&
      (rc = pto_signal_wait(ctx, k->dom, &done, PTO_CMP_GE, coll_done_target(k->seq, n), -1)))
    return rc;
  coll_desc mine = k->d;
  pto_tensor dsrc = bytes_view(&mine, sizeof mine, PTO_I64);
  pto_tensor ddst = bytes_view(desc_at(k, k->me), DESC_BYTES, PTO_I64);
  for (int i = 1; i < n; i++) {
    int p = (k->me + i) % n;
    if ((rc = pto_put(ctx, k->dom, p, &ddst, &dsrc, NULL))) return rc;
    const void *b = k->d.status == 0 && block && bb ? block(k, p, arg) : NULL;
    if (b) {
      pto_tensor src = bytes_view((void *)b, bb, (pto_dtype)k->d.dtype);
      pto_tensor dst = bytes_view(mesh_slot(k, k->me), bb, (pto_dtype)k->d.dtype);
      if ((rc = pto_put(ctx, k->dom, p, &dst, &src, NULL))) return rc;
    }
    if ((rc = pto_notify(ctx, k->dom, p, &arrive, PTO_SIGNAL_ADD, 1))) return rc;
  }
  if (n > 1 &&
      (rc = pto_signal_wait(ctx, k->dom, &arrive, PTO_CMP_GE, coll_arrive_target(k->seq, n), -1)))
    return rc;
  /* every descriptor against mine, before any data is used */
  for (int p = 0; p < n; p++) {
    coll_desc o;
    memcpy(&o, p == k->me ? (const void *)&k->d : desc_at(k, p), sizeof o);
    const char *field = o.kind != k->d.kind     ? "collective"
                        : o.seq != k->d.seq     ? "call number"
                        : o.count != k->d.count ? "count"
                        : o.dtype != k->d.dtype ? "dtype"
                        : o.op != k->d.op       ? "op"
                        : o.root != k->d.root   ? "root"
                        : o.algo != k->d.algo   ? "algorithm"
                                                : NULL;
    if (field)
      return comm_fail(k->c, PTO_EINVAL,
                       "%s: mismatched %s on domain %d: rank %d called %s #%" PRId64
                       " (count %" PRId64 ", %s, %s, root %" PRId64
                       ", %s), rank %d called %s #%" PRId64 " (count %" PRId64
                       ", %s, %s, root %" PRId64 ", %s)",
                       name, field, k->dom, k->me, name, k->d.seq, k->d.count,
                       pto_dtype_name((pto_dtype)k->d.dtype), coll_red_op_name((pto_red_op)k->d.op),
                       k->d.root, algo_name(k->d.algo), p, kind_name(o.kind), o.seq, o.count,
                       pto_dtype_name((pto_dtype)o.dtype), coll_red_op_name((pto_red_op)o.op),
                       o.root, algo_name(o.algo));
  }
  if (k->d.status)
    return comm_fail(k->c, (int)k->d.status, "%s #%d on domain %d rank %d: %s", name, k->seq,
                     k->dom, k->me, k->why);
  for (int p = 0; p < n; p++) {
    coll_desc o;
    memcpy(&o, desc_at(k, p), sizeof o);
    if (p != k->me && o.status)
      return comm_fail(k->c, (int)o.status,
                       "%s #%d on domain %d: rank %d called with invalid arguments (rank %d "
                       "stops too)",
                       name, k->seq, k->dom, p, k->me);
  }
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
static size_t dtype_size(int64_t dt) {
  size_t es = dt >= 0 && dt < PTO_DTYPE_COUNT ? pto_dtype_size((pto_dtype)dt) : 0;
  return es ? es : 1;
}

/* ---- allreduce ---- */

static const void *whole_block(const coll *k, int p, const void *arg) {
  (void)k;
  (void)p;
  return arg;
}

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

int pto_allreduce(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, pto_red_op op, pto_coll_algo algo) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLREDUCE);
  if (rc) return rc;
  k.d.dtype = src ? src->dtype : -1;
  k.d.count = src ? pto_tensor_numel(src) : -1;
  k.d.op = op;
  k.d.algo = algo;
  k.es = dtype_size(k.d.dtype);
  bool ok = local_ok(&k, "src", src, -1) && local_ok(&k, "dst", dst, k.d.count);
  if (ok && !coll_reduce_dtype_ok((pto_dtype)k.d.dtype))
    ok = !snprintf(k.why, sizeof k.why, "dtype %s cannot be reduced (f32, f16, bf16, i32)",
                   pto_dtype_name((pto_dtype)k.d.dtype));
  if (ok && !coll_reduce_op_ok(op))
    ok = !snprintf(k.why, sizeof k.why, "unknown reduction op %d", (int)op);
  if (ok && (algo < PTO_COLL_AUTO || algo > PTO_COLL_RING))
    ok = !snprintf(k.why, sizeof k.why, "unknown algorithm %d", (int)algo);
  if (!ok) k.d.status = PTO_EINVAL;
  size_t bytes = ok ? (size_t)k.d.count * k.es : 0;
  bool ring = algo == PTO_COLL_RING || (algo == PTO_COLL_AUTO && bytes >= PTO_COLL_RING_MIN_BYTES);
  if (k.n == 1) ring = false;
  if (ok && ring) {
    int64_t s, l;
    chunk_of(k.d.count, k.n, 0, &s, &l);
    if ((size_t)l * k.es > k.ring_slot) {
      snprintf(k.why, sizeof k.why,
               "ring chunks of %zu bytes do not fit the scratch's %zu-byte ring slots",
               (size_t)l * k.es, k.ring_slot);
      k.d.status = PTO_EINVAL;
    }
  }
  unsigned char *out = ok ? elem0(dst) : NULL;
  const unsigned char *in = ok ? elem0(src) : NULL;
  /* ring moves its data after the exchange of descriptors */
  rc = coll_exchange(&k, ring ? NULL : whole_block, in, ring ? 0 : bytes);
  if (rc) return rc;
  if (ring) {
    memmove(out, in, bytes);
    rc = ring_allreduce(&k, out);
  } else {
    memmove(mesh_slot(&k, k.me), in, bytes); /* my own slot: nobody else writes it */
    memcpy(out, mesh_slot(&k, 0), bytes);
    for (int p = 1; p < k.n; p++)
      coll_reduce(out, mesh_slot(&k, p), k.d.count, (pto_dtype)k.d.dtype, op);
  }
  return rc ? rc : coll_done(&k);
}

/* ---- allgather, broadcast, reduce-scatter, all-to-all ---- */

static void move_setup(coll *k, const pto_tensor *dst, const pto_tensor *src, int64_t count) {
  k->d.dtype = dst ? dst->dtype : src ? src->dtype : -1;
  k->d.count = count;
  k->es = dtype_size(k->d.dtype);
}

int pto_allgather(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLGATHER);
  if (rc) return rc;
  move_setup(&k, dst, src, src ? pto_tensor_numel(src) : -1);
  bool ok = local_ok(&k, "src", src, -1) && local_ok(&k, "dst", dst, k.d.count * k.n);
  if (!ok) k.d.status = PTO_EINVAL;
  size_t bb = ok ? (size_t)k.d.count * k.es : 0;
  const void *in = ok ? elem0(src) : NULL;
  if ((rc = coll_exchange(&k, whole_block, in, bb))) return rc;
  memmove(mesh_slot(&k, k.me), in, bb);
  unsigned char *out = elem0(dst);
  for (int p = 0; p < k.n; p++)
    memcpy(out + (size_t)p * bb, mesh_slot(&k, p), bb);
  return coll_done(&k);
}

int pto_broadcast(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, int root) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_BROADCAST);
  if (rc) return rc;
  move_setup(&k, dst, NULL, dst ? pto_tensor_numel(dst) : -1);
  k.d.root = root;
  bool ok = local_ok(&k, "dst", dst, -1);
  if (ok && (root < 0 || root >= k.n))
    ok = !snprintf(k.why, sizeof k.why, "root %d outside the domain (ranks 0..%d)", root, k.n - 1);
  if (ok && root == k.me) ok = local_ok(&k, "src (on the root)", src, k.d.count);
  if (!ok) k.d.status = PTO_EINVAL;
  size_t bb = ok ? (size_t)k.d.count * k.es : 0;
  const void *in = ok && root == k.me ? elem0(src) : NULL;
  if ((rc = coll_exchange(&k, in ? whole_block : NULL, in, bb))) return rc;
  if (root == k.me)
    memmove(elem0(dst), in, bb);
  else
    memcpy(elem0(dst), mesh_slot(&k, root), bb);
  return coll_done(&k);
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

int pto_reduce_scatter(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                       const pto_tensor *dst, const pto_tensor *src, pto_red_op op) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_REDUCE_SCATTER);
  if (rc) return rc;
  move_setup(&k, dst, src, dst ? pto_tensor_numel(dst) : -1);
  k.d.op = op;
  bool ok = local_ok(&k, "dst", dst, -1) && local_ok(&k, "src", src, k.d.count * k.n);
  if (ok && !coll_reduce_dtype_ok((pto_dtype)k.d.dtype))
    ok = !snprintf(k.why, sizeof k.why, "dtype %s cannot be reduced (f32, f16, bf16, i32)",
                   pto_dtype_name((pto_dtype)k.d.dtype));
  if (ok && !coll_reduce_op_ok(op))
    ok = !snprintf(k.why, sizeof k.why, "unknown reduction op %d", (int)op);
  if (!ok) k.d.status = PTO_EINVAL;
  blocks b = {ok ? elem0(src) : NULL, ok ? (size_t)k.d.count * k.es : 0};
  if ((rc = coll_exchange(&k, block_p, &b, b.bb))) return rc;
  memmove(mesh_slot(&k, k.me), b.in + (size_t)k.me * b.bb, b.bb);
  unsigned char *out = elem0(dst);
  memcpy(out, mesh_slot(&k, 0), b.bb);
  for (int p = 1; p < k.n; p++)
    coll_reduce(out, mesh_slot(&k, p), k.d.count, (pto_dtype)k.d.dtype, op);
  return coll_done(&k);
}

int pto_alltoall(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                 const pto_tensor *dst, const pto_tensor *src) {
  coll k;
  int rc = coll_open(&k, ctx, dom, scratch, K_ALLTOALL);
  if (rc) return rc;
  int64_t total = src ? pto_tensor_numel(src) : -1;
  move_setup(&k, dst, src, total >= 0 && total % k.n == 0 ? total / k.n : -1);
  bool ok = local_ok(&k, "src", src, -1) && local_ok(&k, "dst", dst, total);
  if (ok && total % k.n)
    ok = !snprintf(k.why, sizeof k.why, "src has %" PRId64 " elements, not a multiple of %d ranks",
                   total, k.n);
  if (!ok) k.d.status = PTO_EINVAL;
  blocks b = {ok ? elem0(src) : NULL, ok ? (size_t)k.d.count * k.es : 0};
  if ((rc = coll_exchange(&k, block_p, &b, b.bb))) return rc;
  memmove(mesh_slot(&k, k.me), b.in + (size_t)k.me * b.bb, b.bb);
  unsigned char *out = elem0(dst);
  for (int p = 0; p < k.n; p++)
    memcpy(out + (size_t)p * b.bb, mesh_slot(&k, p), b.bb);
  return coll_done(&k);
}
