/* ops.c — the in-kernel operations over views: argument and bounds checks
 * (all before anything is written), translation of a view into window
 * offsets, strided views cut into contiguous runs for the backend, chunked
 * put/get with staging, and signals with deadlines. Shared by every
 * backend. When the chip run records a trace, each op is a "comm" slice on
 * the calling core's track. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/contract.h"
#include "chip/schedule.h"
#include "chip/trace_hooks.h"
#include "comm/comm.h"
#include "comm/signal.h"
#include "comm/window_check.h"
#include "common/clock.h"
#include "common/region.h"
#include "common/tensor_check.h"
#include "common/tensor_walk.h"
#include "common/wait.h"

/* Every call within this file inlined into the function: bulk, remote_op
 * and pto_quiet (why: above bulk). */
#define PTO_FLATTEN __attribute__((flatten))

/* ---- views ----
 * Checked by the one view module (common/tensor_check.h): every offset and
 * extent with overflow checks, each view held to its own buffer, and a view
 * with a zero in its shape empty (a no-op). Walked by common/tensor_walk.h. */

static int64_t numel(const pto_tensor *t) { return tensor_walk_numel(t); }

/* ---- tracing ---- */

/* One op in the trace: begun by op_begin (NULL trace = not recording, the
 * only cost when tracing is off), recorded by op_end whatever it returned. */
typedef struct op_span {
  pto_trace *t;
  int track;
  uint64_t t0;
} op_span;

/* Filled in place: returned by value (even inlined), the span was copied
 * with a 16-byte load of its two just-stored first fields, which stalled
 * store forwarding (7% of a small put's and of a quiet's profile on shared
 * windows, perf annotate). */
static inline __attribute__((always_inline)) void op_begin(op_span *s, const pto_kctx *ctx) {
  s->t = NULL;
  s->track = -1;
  s->t0 = 0;
  if (!ctx || !ctx->run) return; /* no chip run (a program's own calls): no trace, no call */
  s->t = core_trace(ctx, &s->track);
  if (s->t) s->t0 = pto_now_ns();
}

static int op_end(const op_span *s, const pto_kctx *ctx, const char *name, const char *key,
                  int64_t val, int rc) {
  if (s->t)
    trace_slice_arg(s->t, s->track, name, "comm", s->t0, pto_now_ns(), ctx->task_id, ctx->block_idx,
                    key, val);
  return rc;
}

/* ---- argument checks ---- */

typedef struct op_env {
  const pto_kctx *ctx;
  pto_comm *c;
  comm_dom *d;
  const char *op;
  int peer;
} op_env;

static int get_env(const pto_kctx *ctx, pto_domain dom, int peer, bool need_peer, const char *op,
                   op_env *e) {
  e->ctx = ctx;
  e->c = ctx ? (pto_comm *)ctx->env : NULL;
  e->op = op;
  e->peer = peer;
  if (!e->c) return PTO_EINVAL; /* not a chip of a node: nowhere to report details */
  e->d = comm_find(e->c, dom);
  if (!e->d)
    return comm_fail(e->c, PTO_EINVAL, "%s: unknown domain %d on chip %d", op, dom, e->c->chip);
  if (e->d->my_rank < 0)
    return comm_fail(e->c, PTO_EPEER, "%s: chip %d is not a member of domain %d", op, e->c->chip,
                     dom);
  if (need_peer && (peer < 0 || peer >= e->d->desc.nranks))
    return comm_fail(e->c, PTO_EPEER, "%s: peer %d outside domain %d (ranks 0..%d), from rank %d",
                     op, peer, dom, e->d->desc.nranks - 1, e->d->my_rank);
  if (ctx->run) contract_note_comm(ctx); /* only a chip run has a contract to tell */
  return 0;
}

/* get_env for an op that tags or reads words with the task's epoch (a
 * notify, wait, read or barrier): it fails for a task without one
 * (comm_epoch_check). */
static int get_epoch_env(const pto_kctx *ctx, pto_domain dom, int peer, bool need_peer,
                         const char *op, op_env *e) {
  int rc = get_env(ctx, dom, peer, need_peer, op, e);
  return rc ? rc : comm_epoch_check(e->c, op, dom, e->d->my_rank);
}

int comm_span_locate(const comm_domain_desc *d, const void *buf_ptr, uint64_t lo, uint64_t hi,
                     uint64_t *woff, int *buf, char *why, size_t n) {
  uint64_t a = (uint64_t)(uintptr_t)buf_ptr, all;
  if (d->win_bytes == 0 || __builtin_mul_overflow((uint64_t)d->nranks, d->win_bytes, &all) ||
      a < d->base || a - d->base >= all) {
    snprintf(why, n, "is not a view of a window buffer");
    return PTO_EBOUNDS;
  }
  uint64_t w = (a - d->base) % d->win_bytes;
  /* a valid view's extent fits int64; w < win_bytes, so the sums cannot wrap */
  if (__builtin_add_overflow(lo, w, &lo) || __builtin_add_overflow(hi, w, &hi)) {
    snprintf(why, n, "is not a valid view: its extent overflows 64 bits");
    return PTO_EINVAL;
  }
  for (int i = 0; i < d->nbuffers; i++) {
    const comm_buffer_desc *b = &d->buffers[i];
    if (lo < b->offset || lo - b->offset >= b->bytes) continue;
    if (hi - b->offset > b->bytes) break;
    *woff = w;
    *buf = i;
    return PTO_OK;
  }
  snprintf(why, n, "region [%" PRIu64 ", %" PRIu64 ") is not inside one window buffer", lo, hi);
  return PTO_EBOUNDS;
}

bool comm_peer_copy(const pto_comm *c, uintptr_t lo, uintptr_t hi, comm_copy_at *at) {
  if (!c || hi <= c->win_lo || lo >= c->win_hi) return false; /* in no window */
  for (int i = 0; lo < hi && i < COMM_MAX_DOMAINS; i++) {
    const comm_dom *d = c->doms[i];
    uintptr_t base, end;
    if (!d || !comm_dom_windows(d, &base, &end) || hi <= base || lo >= end) continue;
    uint64_t wb = d->desc.win_bytes, p = lo > base ? lo : base;
    if (d->my_rank >= 0) {
      uint64_t mine = base + (uint64_t)d->my_rank * wb;
      if (p >= mine && p < mine + wb) p = mine + wb; /* my own copy: the first byte past it */
      if (p >= hi || p >= end) continue;
    }
    uint64_t off = (p - base) % wb;
    at->dom = d;
    at->rank = (int)((p - base) / wb);
    at->buf = NULL;
    for (int b = 0; b < d->desc.nbuffers; b++)
      if (off - d->desc.buffers[b].offset < d->desc.buffers[b].bytes) at->buf = &d->desc.buffers[b];
    return true;
  }
  return false;
}

const char *comm_copy_name(const comm_copy_at *at, char *buf, size_t n) {
  if (at->buf)
    snprintf(buf, n, "rank %d's copy of window buffer '%s' of domain %d", at->rank, at->buf->name,
             at->dom->desc.id);
  else
    snprintf(buf, n, "rank %d's window of domain %d (outside its buffers)", at->rank,
             at->dom->desc.id);
  return buf;
}

/* A local tile of an op (what: "src (local)"), not empty: refused naming
 * the copy when it lies in a peer's window (comm_peer_copy). dense: its
 * element count when packed, else 0 (its span is then walked). */
static int local_tile_check(const op_env *e, const pto_tensor *t, int64_t dense, const char *what) {
  uint64_t lo, hi;
  if (dense > 0) {
    uint64_t es = tensor_es(t->dtype);
    lo = (uint64_t)t->offset * es;
    hi = lo + (uint64_t)dense * es; /* bounded by buf_bytes: tensor_dense_numel */
  } else if (!tensor_byte_span(t, &lo, &hi)) {
    return 0; /* checked valid before: cannot happen */
  }
  comm_copy_at at;
  uintptr_t b = (uintptr_t)t->buf;
  if (!comm_peer_copy(e->c, b + lo, b + hi, &at)) return 0;
  char where[160];
  return comm_fail(e->c, PTO_EINVAL,
                   "%s: %s lies in %s: a local tile must be this rank's own memory (a view of a "
                   "peer's copy names offsets only for the remote side) (domain %d rank %d)",
                   e->op, what, comm_copy_name(&at, where, sizeof where), e->d->desc.id,
                   e->d->my_rank);
}

/* comm_view_locate() for a view already checked valid (tensor_problem). */
static int view_locate(const comm_domain_desc *d, const pto_tensor *t, uint64_t *woff, int *buf,
                       char *why, size_t n) {
  uint64_t lo, hi;
  if (!tensor_byte_span(t, &lo, &hi)) {
    snprintf(why, n, "is not a valid view: its extent overflows 64 bits");
    return PTO_EINVAL;
  }
  return comm_span_locate(d, t->buf, lo, hi, woff, buf, why, n);
}

int comm_view_locate(const comm_domain_desc *d, const pto_tensor *t, uint64_t *woff, int *buf,
                     char *why, size_t n) {
  char problem[160];
  const char *bad = tensor_problem(t, false, problem, sizeof problem);
  if (bad) {
    snprintf(why, n, "is not a valid view: %s", bad);
    return PTO_EINVAL;
  }
  return view_locate(d, t, woff, buf, why, n);
}

/* comm_view_locate() for an op's view, which same_shape_check found valid,
 * failing the task with the details. dense: its element count when
 * same_shape_check found it packed (its span is then [offset, offset +
 * dense) elements, and tensor_dense_numel bounded the bytes of that end by
 * buf_bytes: no overflow), else 0 (a walk of its dims finds the span). */
static int win_view(const op_env *e, const pto_tensor *t, int64_t dense, const char *what,
                    uint64_t *buf_woff, const comm_buffer_desc **buf) {
  const comm_domain_desc *d = &e->d->desc;
  char why[240];
  int i, rc;
  if (dense > 0) {
    uint64_t es = tensor_es(t->dtype);
    rc = comm_span_locate(d, t->buf, (uint64_t)t->offset * es, (uint64_t)(t->offset + dense) * es,
                          buf_woff, &i, why, sizeof why);
  } else {
    rc = view_locate(d, t, buf_woff, &i, why, sizeof why);
  }
  if (rc)
    return comm_fail(e->c, rc, "%s: %s %s (domain %d rank %d -> peer %d)", e->op, what, why, d->id,
                     e->d->my_rank, e->peer);
  *buf = &d->buffers[i];
  return 0;
}

/* Both views valid (or empty) with the same dtype and element count;
 * *empty when there is nothing to move; *dense their element count when
 * both are packed (then each is one run), else 0. */
static int same_shape_check(const op_env *e, const pto_tensor *dst, const pto_tensor *src,
                            bool remote_src, bool *empty, int64_t *dense) {
  /* the common case, two packed views of one dtype and count, in one
   * pass each; any other pair gets the checks below, which name the fault */
  const pto_tensor *local = remote_src ? dst : src;
  const char *dn = remote_src ? "dst (local)" : "dst", *sn = remote_src ? "src" : "src (local)";
  int64_t n = tensor_dense_numel(dst);
  if (n > 0 && src && dst->dtype == src->dtype && tensor_dense_numel(src) == n) {
    *empty = false;
    *dense = n;
    return local_tile_check(e, local, n, remote_src ? dn : sn);
  }
  *dense = 0;
  char why[160];
  bool de, se;
  const char *bad = tensor_problem_or_empty(dst, &de, why, sizeof why);
  if (bad)
    return comm_fail(e->c, PTO_EINVAL, "%s: %s is not a valid view: %s (domain %d rank %d)", e->op,
                     dn, bad, e->d->desc.id, e->d->my_rank);
  bad = tensor_problem_or_empty(src, &se, why, sizeof why);
  if (bad)
    return comm_fail(e->c, PTO_EINVAL, "%s: %s is not a valid view: %s (domain %d rank %d)", e->op,
                     sn, bad, e->d->desc.id, e->d->my_rank);
  if (dst->dtype != src->dtype)
    return comm_fail(e->c, PTO_EINVAL, "%s: dtype %s vs %s (domain %d rank %d)", e->op,
                     pto_dtype_name((pto_dtype)dst->dtype), pto_dtype_name((pto_dtype)src->dtype),
                     e->d->desc.id, e->d->my_rank);
  int64_t nd = de ? 0 : numel(dst), ns = se ? 0 : numel(src);
  if (nd != ns)
    return comm_fail(e->c, PTO_EINVAL, "%s: %" PRId64 " vs %" PRId64 " elements", e->op, nd, ns);
  *empty = de;
  return de ? 0 : local_tile_check(e, local, 0, remote_src ? dn : sn);
}

static bool atomic_dtype(int dt) {
  return dt == PTO_F32 || dt == PTO_F16 || dt == PTO_BF16 || dt == PTO_I32 || dt == PTO_I16 ||
         dt == PTO_I8;
}

/* ---- remote store / add / load ---- */

typedef struct xfer {
  op_env *e;
  uint64_t woff;        /* window offset of the remote view's buf */
  unsigned char *local; /* local view's buf */
  size_t es;
  pto_dtype dt;
  int kind; /* 0 store, 1 add, 2 load */
} xfer;

static int xfer_run(void *arg, int64_t remote, int64_t local, int64_t n) {
  xfer *x = arg;
  comm_dom *d = x->e->d;
  uint64_t off = x->woff + (uint64_t)remote * x->es;
  unsigned char *p = x->local + (size_t)local * x->es;
  switch (x->kind) {
  case 0: return d->be->put(d->win, x->e->peer, off, p, (size_t)n * x->es);
  case 1: return d->be->accumulate(d->win, x->e->peer, off, x->dt, p, (size_t)n);
  default: return d->be->get(d->win, x->e->peer, off, p, (size_t)n * x->es);
  }
}

static int local_run(void *arg, int64_t a, int64_t b, int64_t n) {
  const pto_tensor *const *t = arg; /* t[0] dst, t[1] src */
  size_t es = tensor_es(t[0]->dtype);
  memmove((unsigned char *)t[0]->buf + (size_t)a * es,
          (const unsigned char *)t[1]->buf + (size_t)b * es, (size_t)n * es);
  return 0;
}
static void local_copy(const pto_tensor *dst, const pto_tensor *src) {
  const pto_tensor *t[2] = {dst, src};
  tensor_lockstep(dst, src, local_run, t);
}

/* ---- a rank's transfer to itself ----
 * A local tile may lie in this rank's own window (docs/comm.md), so a
 * transfer to my own rank can name a local tile that shares bytes with the
 * window region. It moves as if the whole source were read before any
 * byte of dst is written. The backends copy each run with memcpy (undefined
 * for overlapping buffers; on RMA windows MPI_Put/MPI_Get between them are
 * erroneous) and cut a strided view into runs that would read what earlier
 * runs wrote, so such a transfer goes through a packed copy of its source. */

/* The bytes of my own copy of the window that `remote` names (woff: the
 * window offset of its buf): the view rebased onto my copy. */
static pto_tensor own_copy_view(const op_env *e, const pto_tensor *remote, uint64_t woff) {
  pto_tensor t = *remote;
  const comm_domain_desc *d = &e->d->desc;
  t.buf = (void *)(uintptr_t)(d->base + (uint64_t)e->d->my_rank * d->win_bytes + woff);
  return t;
}

/* `t` shares a byte with the region `remote` names on the peer, which is
 * my own rank (else never) */
static bool own_overlap(const op_env *e, const pto_tensor *remote, uint64_t woff,
                        const pto_tensor *t) {
  if (e->peer != e->d->my_rank) return false;
  pto_tensor mine = own_copy_view(e, remote, woff);
  return region_overlap(&mine, t);
}

/* The move of an own-rank transfer whose views overlap, through `tmp`, a
 * packed copy of its source (count elements): local src copied out, then
 * put or added from the copy; or remote src got into the copy, then copied
 * into local dst. */
static int own_overlap_move(xfer *x, const pto_tensor *remote, const pto_tensor *local, void *tmp,
                            int64_t count) {
  pto_tensor tv = {.buf = tmp, .buf_bytes = (size_t)count * x->es, .dtype = x->dt, .ndims = 1};
  tv.shape[0] = count;
  tv.stride[0] = 1;
  xfer y = *x;
  y.local = tmp;
  if (x->kind == 2) {
    int rc = tensor_lockstep(remote, &tv, xfer_run, &y);
    if (!rc) local_copy(local, &tv);
    return rc;
  }
  local_copy(&tv, local);
  return tensor_lockstep(remote, &tv, xfer_run, &y);
}

/* The move of a transfer checked whole (woff: the window offset of
 * remote's buf; dense as checked_xfer's): the backend's runs, or, to my
 * own rank over overlapping views, own_overlap_move. */
static int move(op_env *e, const pto_tensor *remote, const pto_tensor *local, int kind,
                int64_t dense, uint64_t woff) {
  size_t es = tensor_es(remote->dtype);
  xfer x = {e, woff, (unsigned char *)local->buf, es, (pto_dtype)remote->dtype, kind};
  int rc;
  if (own_overlap(e, remote, woff, local)) {
    int64_t count = numel(remote);
    size_t bytes = (size_t)count * es; /* the view fits its buffer: no overflow */
    void *tmp = malloc(bytes);
    if (!tmp)
      return comm_fail(e->c, PTO_ENOMEM,
                       "%s: no memory for a copy of the source (%zu bytes), which dst overlaps "
                       "in rank %d's own window (domain %d)",
                       e->op, bytes, e->d->my_rank, e->d->desc.id);
    rc = own_overlap_move(&x, remote, local, tmp, count);
    free(tmp);
  } else if (dense > 0) {
    /* two packed views are one run each: no walk (a small put's time on
     * RMA windows is mostly per-call work: docs/comm.md) */
    rc = xfer_run(&x, remote->offset, local->offset, dense);
  } else {
    rc = tensor_lockstep(remote, local, xfer_run, &x);
  }
  return rc ? comm_fail(e->c, rc, "%s: backend failed (domain %d rank %d -> peer %d)", e->op,
                        e->d->desc.id, e->d->my_rank, e->peer)
            : 0;
}

/* A transfer between views same_shape_check passed, not empty; dense: the
 * count it found when both are packed, else 0. */
static int checked_xfer(op_env *e, const pto_tensor *remote, const pto_tensor *local, int kind,
                        int64_t dense) {
  int rc;
  if (kind == 1 && !atomic_dtype(remote->dtype))
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: atomic add of dtype %s is not supported (domain %d "
                     "rank %d -> peer %d)",
                     e->op, pto_dtype_name((pto_dtype)remote->dtype), e->d->desc.id, e->d->my_rank,
                     e->peer);
  uint64_t woff = 0;
  const comm_buffer_desc *b = NULL; /* set by win_view when it returns 0 */
  rc = win_view(e, remote, dense, kind == 2 ? "src" : "dst", &woff, &b);
  if (rc) return rc;
  size_t es = tensor_es(remote->dtype);
  if (kind == 1 && woff % es != 0)
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: destination in buffer '%s' is not aligned to %zu "
                     "bytes (domain %d rank %d -> peer %d)",
                     e->op, b->name, es, e->d->desc.id, e->d->my_rank, e->peer);
  if (window_checking(e->c))
    rc = kind == 2 ? window_check_load(e->c, e->ctx, e->d, e->peer, e->op, remote, local, woff, b)
                   : window_check_store(e->c, e->ctx, e->d, e->peer, e->op, remote, local, woff, b,
                                        kind == 1);
  if (rc) return rc;
  return move(e, remote, local, kind, dense, woff);
}

static int remote_xfer(op_env *e, const pto_tensor *remote, const pto_tensor *local, int kind) {
  bool empty = false; /* set by the check when it returns 0 */
  int64_t dense = 0;
  int rc = kind == 2 ? same_shape_check(e, local, remote, true, &empty, &dense)
                     : same_shape_check(e, remote, local, false, &empty, &dense);
  if (rc || empty) return rc; /* an empty view moves nothing */
  return checked_xfer(e, remote, local, kind, dense);
}

/* The three one-sided element moves share their entry and exit: find the
 * domain and the peer, check the views, move, end the traced span. */
static PTO_FLATTEN int remote_op(const pto_kctx *ctx, pto_domain dom, int peer, const char *name,
                                 const pto_tensor *remote, const pto_tensor *local, int kind) {
  op_span sp;
  op_begin(&sp, ctx);
  op_env e;
  int rc = get_env(ctx, dom, peer, true, name, &e);
  return op_end(&sp, ctx, name, "peer", peer, rc ? rc : remote_xfer(&e, remote, local, kind));
}

int pto_remote_store(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                     const pto_tensor *src) {
  return remote_op(ctx, dom, peer, "remote_store", dst, src, 0);
}

int pto_remote_store_add(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                         const pto_tensor *src) {
  return remote_op(ctx, dom, peer, "remote_store_add", dst, src, 1);
}

int pto_remote_load(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                    const pto_tensor *src) {
  return remote_op(ctx, dom, peer, "remote_load", src, dst, 2);
}

/* ---- put / get ---- */

/* A contiguous view of `like`'s shape at element `at` of the staging tile. */
static pto_tensor staging_view(const pto_tensor *st, const pto_tensor *like, int64_t at) {
  pto_tensor v = *like;
  v.buf = st->buf;
  v.buf_bytes = st->buf_bytes;
  v.offset = st->offset + at;
  int64_t s = 1;
  for (int i = v.ndims - 1; i >= 0; i--) {
    v.stride[i] = s;
    s *= v.shape[i];
  }
  return v;
}

/* Flattened, as remote_op and pto_quiet: the checks and the move of a small
 * put or get were a dozen calls of 1-3 ns each within this file (get_env,
 * same_shape_check, checked_xfer, win_view, local_tile_check, move,
 * xfer_run); inlined into one body, an 8-byte put took 16.5 ns instead of
 * 24 and a get 17.3 instead of 23.5 (2 ranks on shared windows, best of
 * 11 trials of 2*10^6 calls). */
static PTO_FLATTEN int bulk(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                            const pto_tensor *src, const pto_xfer_opts *o, bool is_put) {
  op_env e;
  int rc = get_env(ctx, dom, peer, true, is_put ? "put" : "get", &e);
  if (rc) return rc;
  const pto_tensor *remote = is_put ? dst : src;
  const pto_tensor *local = is_put ? src : dst;
  bool empty = false;
  int64_t dense = 0;
  rc = same_shape_check(&e, dst, src, !is_put, &empty, &dense);
  if (rc || empty) return rc; /* an empty view moves nothing */
  int kind = is_put ? (o && o->atomic_add ? 1 : 0) : 2;
  if (o && (o->chunk_rows < 0 || o->chunk_cols < 0))
    return comm_fail(e.c, PTO_EINVAL,
                     "%s: chunk_rows %" PRId64 " / chunk_cols %" PRId64
                     " must be >= 0 (0 = whole dim)",
                     e.op, o->chunk_rows, o->chunk_cols);
  if (!o || (o->chunk_rows <= 0 && o->chunk_cols <= 0 && !o->staging))
    return checked_xfer(&e, remote, local, kind, dense); /* checked above, once */
  /* chunking cuts both views the same way: they must have the same shape */
  if (dst->ndims != src->ndims || memcmp(dst->shape, src->shape, sizeof(int64_t) * dst->ndims))
    return comm_fail(e.c, PTO_EINVAL, "%s: chunked transfer needs equal shapes", e.op);
  uint64_t woff = 0;
  const comm_buffer_desc *b = NULL; /* set by win_view when it returns 0 */
  rc = win_view(&e, remote, dense, is_put ? "dst" : "src", &woff, &b); /* whole region first */
  if (!rc && window_checking(e.c)) /* the whole region, before the first chunk moves */
    rc = is_put ? window_check_store(e.c, ctx, e.d, peer, e.op, remote, local, woff, b, kind == 1)
                : window_check_load(e.c, ctx, e.d, peer, e.op, remote, local, woff, b);
  if (rc) return rc;
  tensor_tiles g;
  tensor_tiles_init(&g, remote, o->chunk_rows, o->chunk_cols);
  int64_t chunk_elems = tensor_tiles_max_elems(&g);
  const pto_tensor *st = o->staging;
  int halves = 1;
  if (st) {
    char why[160];
    const char *bad = tensor_problem(st, false, why, sizeof why);
    if (bad || st->dtype != remote->dtype || !pto_tensor_is_contiguous(st) ||
        numel(st) < chunk_elems)
      return comm_fail(e.c, PTO_EINVAL,
                       "%s: staging tile must be a contiguous %s tile of at "
                       "least %" PRId64 " elements%s%s",
                       e.op, pto_dtype_name((pto_dtype)remote->dtype), chunk_elems, bad ? ": " : "",
                       bad ? bad : "");
    if ((rc = local_tile_check(&e, st, 0, "staging tile"))) return rc;
    halves = numel(st) / 2 >= chunk_elems ? 2 : 1; /* no 2 * n: it could wrap */
    /* each chunk's copy into the tile would overwrite data still to move */
    const char *what = region_overlap(st, local) ? (is_put ? "src (local)" : "dst (local)")
                       : own_overlap(&e, remote, woff, st) ? (is_put ? "dst" : "src")
                                                           : NULL;
    if (what)
      return comm_fail(e.c, PTO_EINVAL,
                       "%s: staging tile overlaps %s: it must share no byte with the "
                       "transfer's views (domain %d rank %d -> peer %d)",
                       e.op, what, e.d->desc.id, e.d->my_rank, peer);
  }
  /* a rank's chunks to itself would read bytes its earlier chunks wrote:
   * the whole transfer goes through one copy instead (checked_xfer's
   * checks of the whole, an add's included, then move) */
  if (own_overlap(&e, remote, woff, local)) return checked_xfer(&e, remote, local, kind, dense);
  int64_t r0, nr, c0, nc;
  for (int64_t k = 0; tensor_tiles_next(&g, &r0, &nr, &c0, &nc); k++) {
    pto_tensor rv = tensor_tile_of(remote, r0, nr, c0, nc);
    pto_tensor lv = tensor_tile_of(local, r0, nr, c0, nc);
    if (st) {
      /* alternate halves: the copy into one overlaps the transfer of the other */
      pto_tensor sv = staging_view(st, &rv, (k % halves) * chunk_elems);
      if (is_put) {
        local_copy(&sv, &lv);
        rc = remote_xfer(&e, &rv, &sv, kind);
      } else {
        rc = remote_xfer(&e, &rv, &sv, kind);
        if (!rc) local_copy(&lv, &sv);
      }
    } else {
      rc = remote_xfer(&e, &rv, &lv, kind);
    }
    if (rc) return rc;
  }
  return 0;
}

int pto_put(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts) {
  op_span sp;
  op_begin(&sp, ctx);
  return op_end(&sp, ctx, "put", "peer", peer, bulk(ctx, dom, peer, dst, src, opts, true));
}

int pto_get(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts) {
  op_span sp;
  op_begin(&sp, ctx);
  return op_end(&sp, ctx, "get", "peer", peer, bulk(ctx, dom, peer, dst, src, opts, false));
}

/* ---- signals ---- */

/* The cell is element [0..0] of the view: that one element must be a
 * valid int64 view (held to its own buffer, as a transfer's views are)
 * inside a window buffer, 8-byte aligned. */
static int cell_off(const op_env *e, const pto_tensor *cell, uint64_t *off,
                    const comm_buffer_desc **b) {
  pto_tensor one = cell ? *cell : (pto_tensor){0};
  for (int i = 0; i < one.ndims && i < PTO_MAX_DIMS; i++)
    one.shape[i] = 1;
  /* the view module's rules first: a cell past its view's buffer may
   * still lie in the window (the next buffer), where the window's bounds
   * alone would let a notify write it */
  char why[160];
  const char *bad = tensor_problem(cell ? &one : NULL, false, why, sizeof why);
  if (bad)
    return comm_fail(e->c, PTO_EINVAL,
                     "%s: signal cell is not a valid view: %s (domain %d rank %d)", e->op, bad,
                     e->d->desc.id, e->d->my_rank);
  if (one.dtype != PTO_I64)
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: signal cell must be an int64 element, not %s "
                     "(domain %d rank %d)",
                     e->op, pto_dtype_name((pto_dtype)one.dtype), e->d->desc.id, e->d->my_rank);
  uint64_t woff = 0, lo, hi;
  int rc = win_view(e, &one, 0, "signal cell", &woff, b);
  if (rc) return rc;
  tensor_byte_span(&one, &lo, &hi); /* checked by win_view */
  *off = woff + lo;
  if (*off % 8)
    return comm_fail(e->c, PTO_EALIGN, "%s: signal cell in '%s' is not 8-byte aligned", e->op,
                     (*b)->name);
  return 0;
}

static int notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
                  pto_signal_op op, int32_t v) {
  op_env e;
  int rc = get_epoch_env(ctx, dom, peer, true, "notify", &e);
  if (rc) return rc;
  if (op != PTO_SIGNAL_ADD && op != PTO_SIGNAL_SET)
    return comm_fail(e.c, PTO_EINVAL, "notify: unknown signal op %d", (int)op);
  uint64_t off;
  const comm_buffer_desc *b;
  rc = cell_off(&e, cell, &off, &b);
  if (!rc && window_checking(e.c))
    rc = window_check_signal(e.c, ctx, e.d, peer, "notify", off, b, op, v);
  uint64_t written = 0;
  rc = rc ? rc : e.d->be->signal(e.d->win, peer, off, op, v, e.c->epoch, &written);
  if (!rc && written == SIG_OVERFLOW)
    return comm_fail(e.c, PTO_EINVAL,
                     "notify: adding %d to cell %s[%" PRIu64
                     "] of domain %d rank %d (from rank %d) "
                     "overflows its 32-bit value; the cell was left as it was",
                     v, b->name, (off - b->offset) / 8, e.d->desc.id, peer, e.d->my_rank);
  /* the arrow joins this notify to the wait that observes the word it
   * wrote (for an add: the sum after it; a later add's wait is another's) */
  if (!rc && written)
    core_trace_flow(
        ctx, 's',
        PTO_SIGNAL_FLOW_ID(e.d->desc.id, peer, off, e.c->epoch, sig_value(written, e.c->epoch)));
  return rc;
}

int pto_notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
               pto_signal_op op, int32_t v) {
  op_span sp;
  op_begin(&sp, ctx);
  return op_end(&sp, ctx, "notify", "peer", peer, notify(ctx, dom, peer, cell, op, v));
}

typedef struct sig_wait {
  const pto_kctx *ctx;
  const pto_comm *c;
  comm_dom *d;
  uint64_t off;
  uint32_t epoch;
  pto_cmp cmp;
  int32_t v, seen;
  uint64_t word; /* the cell word that satisfied the wait */
  bool cancelled;
} sig_wait;

static bool sig_ready(void *arg) {
  sig_wait *w = arg;
  w->word = w->d->be->signal_load(w->d->win, w->off);
  w->seen = sig_value(w->word, w->epoch);
  if (sig_cmp(w->seen, w->cmp, w->v)) return true;
  w->cancelled = pto_kctx_cancelled(w->ctx) || comm_stopping(w->c);
  return w->cancelled;
}

/* A signal wait first spins for about the round trip it expects — twice
 * the running average of this process's recent waits on the domain, when
 * that is under WAIT_SPIN_MAX_NS — before the backend's wait (which spins
 * PTO_SPIN_NS, yields, then parks): a notify that comes a little later
 * than the backend's spin then costs no futex wake-up and sleep on either
 * side. Only while pto's runnable threads, in this process and in the
 * ranks that share its CPUs (wait.c), leave a CPU free: with more ranks
 * than CPUs it is left out (4 ranks on 2 CPUs: yielding through it was
 * slower than the backend's few yields and park). Waits longer than the
 * limit (a peer computing) push the average up and turn the spin off. */
#define WAIT_SPIN_MAX_NS 50000ull

static uint64_t wait_spin(const comm_dom *d) {
  uint64_t avg = atomic_load_explicit(&d->wait_ns, memory_order_relaxed);
  /* no CPU free (ranks sharing CPUs, wait.c): the spin would only yield
   * round to the peer that notifies; parking at once is faster */
  return avg < WAIT_SPIN_MAX_NS / 2 && pto_wait_cpu_free() ? 2 * avg : 0;
}

static void wait_learn(comm_dom *d, uint64_t ns) {
  if (ns > 4 * WAIT_SPIN_MAX_NS) ns = 4 * WAIT_SPIN_MAX_NS;
  uint64_t avg = atomic_load_explicit(&d->wait_ns, memory_order_relaxed);
  atomic_store_explicit(&d->wait_ns, (3 * avg + ns) / 4, memory_order_relaxed);
}

static int signal_wait(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, pto_cmp cmp,
                       int32_t v, int64_t timeout_ms) {
  op_env e;
  int rc = get_epoch_env(ctx, dom, 0, false, "signal_wait", &e);
  if (rc) return rc;
  /* sig_cmp reads anything but EQ as GE: an unknown op must not pass */
  if (cmp != PTO_CMP_EQ && cmp != PTO_CMP_GE)
    return comm_fail(e.c, PTO_EINVAL,
                     "signal_wait: unknown compare op %d (PTO_CMP_EQ or PTO_CMP_GE) (domain %d "
                     "rank %d)",
                     (int)cmp, e.d->desc.id, e.d->my_rank);
  uint64_t off;
  const comm_buffer_desc *b;
  rc = cell_off(&e, cell, &off, &b);
  if (rc) return rc;
  if (timeout_ms < 0) timeout_ms = e.d->desc.wait_timeout_ms;
  sig_wait w = {ctx, e.c, e.d, off, e.c->epoch, cmp, v, 0, 0, false};
  /* a controlled schedule may run the chip's other blocks meanwhile */
  bool yielded = schedule_block_wait(ctx, sig_ready, &w);
  /* a wait that is over at its first look reads no clock (three reads
   * before: a 4 KiB ring allreduce on 2 ranks of shared windows, whose
   * steps' waits are mostly over at once, took 1.49 us instead of 1.65):
   * it counts as a wait of no time */
  bool ok = !yielded && sig_ready(&w) && !w.cancelled;
  if (ok) {
    wait_learn(e.d, 0);
  } else {
    uint64_t t0 = pto_now_ns(), deadline = pto_deadline_ms(timeout_ms), spin = wait_spin(e.d);
    ok = (spin && pto_wait_unparked(sig_ready, &w, t0 + spin < deadline ? t0 + spin : deadline)) ||
         e.d->be->signal_park(e.d->win, sig_ready, &w, deadline);
    wait_learn(e.d, pto_now_ns() - t0);
  }
  if (yielded) schedule_block_resume(ctx);
  /* a word of this task's epoch was written by a notify: its arrow ends here */
  if (ok && !w.cancelled && sig_epoch(w.word) == e.c->epoch)
    core_trace_flow(ctx, 'f',
                    PTO_SIGNAL_FLOW_ID(e.d->desc.id, e.d->my_rank, off, e.c->epoch, w.seen));
  if (ok && !w.cancelled) return 0;
  char stop[160];
  if (comm_stopping(e.c))
    return comm_fail_secondary(
        e.c, PTO_ESHUTDOWN,
        "wait ended: %s while domain %d rank %d waited on cell %s[%" PRIu64 "] for %s %d, saw %d",
        comm_stop_why(e.c, stop, sizeof stop), e.d->desc.id, e.d->my_rank, b->name,
        (off - b->offset) / 8, cmp == PTO_CMP_EQ ? "==" : ">=", v, w.seen);
  if (w.cancelled) return PTO_ESHUTDOWN; /* the run already failed elsewhere */
  return comm_fail(e.c, PTO_EWAIT_TIMEOUT,
                   "wait timed out: domain %d rank %d cell %s[%" PRIu64 "] waited %" PRId64
                   " ms for %s %d, saw %d (task epoch %u)",
                   e.d->desc.id, e.d->my_rank, b->name, (off - b->offset) / 8, timeout_ms,
                   cmp == PTO_CMP_EQ ? "==" : ">=", v, w.seen, e.c->epoch);
}

/* In the trace: "wait", args.value = the awaited value. */
int pto_signal_wait(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, pto_cmp cmp,
                    int32_t v, int64_t timeout_ms) {
  op_span sp;
  op_begin(&sp, ctx);
  return op_end(&sp, ctx, "wait", "value", v, signal_wait(ctx, dom, cell, cmp, v, timeout_ms));
}

int pto_signal_read(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, int32_t *v) {
  op_env e;
  int rc = get_epoch_env(ctx, dom, 0, false, "signal_read", &e);
  if (rc) return rc;
  if (!v) return comm_fail(e.c, PTO_EINVAL, "signal_read: the result pointer is NULL");
  uint64_t off;
  const comm_buffer_desc *b;
  rc = cell_off(&e, cell, &off, &b);
  if (rc) return rc;
  *v = sig_value(e.d->be->signal_load(e.d->win, off), e.c->epoch);
  return 0;
}

/* In the trace: "quiet", args.domain. */
PTO_FLATTEN int pto_quiet(const pto_kctx *ctx, pto_domain dom) {
  op_span sp;
  op_begin(&sp, ctx);
  op_env e;
  int rc = get_env(ctx, dom, 0, false, "quiet", &e);
  if (!rc) rc = e.d->be->quiet(e.d->win, -1, false);
  return op_end(&sp, ctx, "quiet", "domain", dom, rc);
}

static bool cancel_cb(void *arg) {
  const pto_kctx *ctx = arg;
  return pto_kctx_cancelled(ctx) || comm_stopping((const pto_comm *)ctx->env);
}

static int barrier(const pto_kctx *ctx, pto_domain dom) {
  op_env e;
  int rc = get_epoch_env(ctx, dom, 0, false, "barrier", &e);
  if (rc) return rc;
  comm_dom *d = e.d;
  pthread_mutex_lock(&d->barrier_lock);
  /* relaxed: the barrier lock orders the counter between this chip's blocks */
  uint32_t seq = atomic_fetch_add_explicit(&d->barrier_seq, 1, memory_order_relaxed) + 1;
  char why[256] = "";
  rc = d->be->barrier(d->win, e.c->epoch, seq, pto_deadline_ms(d->desc.wait_timeout_ms), cancel_cb,
                      (void *)ctx, why, sizeof why);
  pthread_mutex_unlock(&d->barrier_lock);
  if (rc == 0) return 0;
  char stop[160];
  if (comm_stopping(e.c))
    return comm_fail_secondary(e.c, PTO_ESHUTDOWN, "barrier ended: %s: domain %d: %s",
                               comm_stop_why(e.c, stop, sizeof stop), d->desc.id, why);
  if (pto_kctx_cancelled(ctx)) return PTO_ESHUTDOWN;
  return comm_fail(e.c, rc, "barrier timed out: domain %d: %s", d->desc.id, why);
}

/* In the trace: "barrier", args.domain. */
int pto_barrier(const pto_kctx *ctx, pto_domain dom) {
  op_span sp;
  op_begin(&sp, ctx);
  return op_end(&sp, ctx, "barrier", "domain", dom, barrier(ctx, dom));
}
