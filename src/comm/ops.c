/* ops.c — the in-kernel operations over views: argument and bounds checks
 * (all before anything is written), translation of a view into window
 * offsets, strided views cut into contiguous runs for the backend, chunked
 * put/get with staging, and signals with deadlines. Shared by every
 * backend. When the chip run records a trace, each op is a "comm" slice on
 * the calling core's track. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "chip/trace_hooks.h"
#include "comm/comm.h"
#include "comm/signal.h"
#include "common/clock.h"

/* ---- views ---- */

static bool view_ok(const pto_tensor *t) {
  if (!t || !t->buf || t->ndims < 1 || t->ndims > PTO_MAX_DIMS || t->dtype < 0 ||
      t->dtype >= PTO_DTYPE_COUNT || t->offset < 0)
    return false;
  for (int i = 0; i < t->ndims; i++)
    if (t->shape[i] < 0 || t->stride[i] < 1) return false;
  return true;
}

static int64_t numel(const pto_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndims; i++)
    n *= t->shape[i];
  return n;
}

/* Largest element offset the view touches, relative to its [0..0]. */
static int64_t span(const pto_tensor *t) {
  int64_t s = 0;
  for (int i = 0; i < t->ndims; i++)
    s += (t->shape[i] - 1) * t->stride[i];
  return s;
}

/* Walks a view in row-major order as contiguous runs of elements. */
typedef struct view_it {
  const pto_tensor *t;
  int64_t idx[PTO_MAX_DIMS];
} view_it;

static int64_t it_off(const view_it *it) { /* element offset from buf */
  int64_t o = it->t->offset;
  for (int i = 0; i < it->t->ndims; i++)
    o += it->idx[i] * it->t->stride[i];
  return o;
}
static int64_t it_run(const view_it *it) {
  int l = it->t->ndims - 1;
  return it->t->stride[l] == 1 ? it->t->shape[l] - it->idx[l] : 1;
}
static void it_adv(view_it *it, int64_t k) {
  int l = it->t->ndims - 1;
  it->idx[l] += k;
  for (int i = l; i > 0 && it->idx[i] >= it->t->shape[i]; i--) {
    it->idx[i] = 0;
    it->idx[i - 1]++;
  }
}

/* Calls fn(a_off, b_off, n) for matching runs of two views of equal numel. */
typedef int (*run_fn)(void *arg, int64_t a_off, int64_t b_off, int64_t n);
static int lockstep(const pto_tensor *a, const pto_tensor *b, run_fn fn, void *arg) {
  view_it ia = {a, {0}}, ib = {b, {0}};
  for (int64_t left = numel(a); left > 0;) {
    int64_t k = it_run(&ia), kb = it_run(&ib);
    if (kb < k) k = kb;
    int rc = fn(arg, it_off(&ia), it_off(&ib), k);
    if (rc) return rc;
    it_adv(&ia, k);
    it_adv(&ib, k);
    left -= k;
  }
  return 0;
}

/* ---- tracing ---- */

/* One op in the trace: begun by op_begin (NULL trace = not recording, the
 * only cost when tracing is off), recorded by op_end whatever it returned. */
typedef struct op_span {
  pto_trace *t;
  int track;
  uint64_t t0;
} op_span;

static op_span op_begin(const pto_kctx *ctx) {
  op_span s = {NULL, -1, 0};
  s.t = core_trace(ctx, &s.track);
  if (s.t) s.t0 = pto_now_ns();
  return s;
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
  pto_comm *c;
  comm_dom *d;
  const char *op;
  int peer;
} op_env;

static int get_env(const pto_kctx *ctx, pto_domain dom, int peer, bool need_peer, const char *op,
                   op_env *e) {
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
  return 0;
}

/* Offset of the view's buf inside a window of the domain (any rank's copy:
 * windows are symmetric), after checking that every element lies inside
 * one named buffer. */
static int win_view(const op_env *e, const pto_tensor *t, const char *what, uint64_t *buf_woff,
                    const comm_buffer_desc **buf) {
  const comm_domain_desc *d = &e->d->desc;
  if (!view_ok(t))
    return comm_fail(e->c, PTO_EINVAL, "%s: %s is not a valid view (domain %d rank %d)", e->op,
                     what, d->id, e->d->my_rank);
  uint64_t a = (uint64_t)(uintptr_t)t->buf, all = (uint64_t)d->nranks * d->win_bytes;
  if (a < d->base || a - d->base >= all)
    return comm_fail(e->c, PTO_EBOUNDS, "%s: %s is not a view of a window buffer of domain %d",
                     e->op, what, d->id);
  uint64_t woff = (a - d->base) % d->win_bytes;
  uint64_t es = pto_dtype_size((pto_dtype)t->dtype);
  uint64_t lo = woff + (uint64_t)t->offset * es, hi = lo + (uint64_t)(span(t) + 1) * es;
  for (int i = 0; i < d->nbuffers; i++) {
    const comm_buffer_desc *b = &d->buffers[i];
    if (lo < b->offset || lo >= b->offset + b->bytes) continue;
    if (hi > b->offset + b->bytes) break;
    *buf_woff = woff;
    *buf = b;
    return 0;
  }
  return comm_fail(e->c, PTO_EBOUNDS,
                   "%s: %s region [%" PRIu64 ", %" PRIu64 ") of domain %d (rank %d -> peer %d) "
                   "is not inside one window buffer",
                   e->op, what, lo, hi, d->id, e->d->my_rank, e->peer);
}

static int same_shape_check(const op_env *e, const pto_tensor *dst, const pto_tensor *src) {
  if (!view_ok(dst) || !view_ok(src))
    return comm_fail(e->c, PTO_EINVAL, "%s: invalid tensor view", e->op);
  if (dst->dtype != src->dtype)
    return comm_fail(e->c, PTO_EINVAL, "%s: dtype %s vs %s (domain %d rank %d)", e->op,
                     pto_dtype_name((pto_dtype)dst->dtype), pto_dtype_name((pto_dtype)src->dtype),
                     e->d->desc.id, e->d->my_rank);
  if (numel(dst) != numel(src))
    return comm_fail(e->c, PTO_EINVAL, "%s: %" PRId64 " vs %" PRId64 " elements", e->op, numel(dst),
                     numel(src));
  return 0;
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

static int remote_xfer(op_env *e, const pto_tensor *remote, const pto_tensor *local, int kind) {
  int rc = same_shape_check(e, remote, local);
  if (rc) return rc;
  if (kind == 1 && !atomic_dtype(remote->dtype))
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: atomic add of dtype %s is not supported (domain %d "
                     "rank %d -> peer %d)",
                     e->op, pto_dtype_name((pto_dtype)remote->dtype), e->d->desc.id, e->d->my_rank,
                     e->peer);
  uint64_t woff;
  const comm_buffer_desc *b;
  rc = win_view(e, remote, kind == 2 ? "src" : "dst", &woff, &b);
  if (rc) return rc;
  size_t es = pto_dtype_size((pto_dtype)remote->dtype);
  if (kind == 1 && woff % es != 0)
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: destination in buffer '%s' is not aligned to %zu "
                     "bytes (domain %d rank %d -> peer %d)",
                     e->op, b->name, es, e->d->desc.id, e->d->my_rank, e->peer);
  xfer x = {e, woff, (unsigned char *)local->buf, es, (pto_dtype)remote->dtype, kind};
  rc = lockstep(remote, local, xfer_run, &x);
  return rc ? comm_fail(e->c, rc, "%s: backend failed (domain %d rank %d -> peer %d)", e->op,
                        e->d->desc.id, e->d->my_rank, e->peer)
            : 0;
}

int pto_remote_store(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                     const pto_tensor *src) {
  op_span sp = op_begin(ctx);
  op_env e;
  int rc = get_env(ctx, dom, peer, true, "remote_store", &e);
  return op_end(&sp, ctx, "remote_store", "peer", peer, rc ? rc : remote_xfer(&e, dst, src, 0));
}

int pto_remote_store_add(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                         const pto_tensor *src) {
  op_span sp = op_begin(ctx);
  op_env e;
  int rc = get_env(ctx, dom, peer, true, "remote_store_add", &e);
  return op_end(&sp, ctx, "remote_store_add", "peer", peer, rc ? rc : remote_xfer(&e, dst, src, 1));
}

int pto_remote_load(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                    const pto_tensor *src) {
  op_span sp = op_begin(ctx);
  op_env e;
  int rc = get_env(ctx, dom, peer, true, "remote_load", &e);
  return op_end(&sp, ctx, "remote_load", "peer", peer, rc ? rc : remote_xfer(&e, src, dst, 2));
}

/* ---- put / get ---- */

static int local_run(void *arg, int64_t a, int64_t b, int64_t n) {
  const pto_tensor *const *t = arg; /* t[0] dst, t[1] src */
  size_t es = pto_dtype_size((pto_dtype)t[0]->dtype);
  memmove((unsigned char *)t[0]->buf + (size_t)a * es,
          (const unsigned char *)t[1]->buf + (size_t)b * es, (size_t)n * es);
  return 0;
}
static void local_copy(const pto_tensor *dst, const pto_tensor *src) {
  const pto_tensor *t[2] = {dst, src};
  lockstep(dst, src, local_run, t);
}

/* The chunk [r0, r0+nr) x [c0, c0+nc) of the last two dims. */
static pto_tensor chunk_of(const pto_tensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  pto_tensor v = *t;
  int l = t->ndims - 1;
  v.offset += c0 * t->stride[l];
  v.shape[l] = nc;
  if (l > 0) {
    v.offset += r0 * t->stride[l - 1];
    v.shape[l - 1] = nr;
  }
  return v;
}

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

static int bulk(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                const pto_tensor *src, const pto_xfer_opts *o, bool is_put) {
  op_env e;
  int rc = get_env(ctx, dom, peer, true, is_put ? "put" : "get", &e);
  if (rc) return rc;
  const pto_tensor *remote = is_put ? dst : src;
  const pto_tensor *local = is_put ? src : dst;
  rc = same_shape_check(&e, dst, src);
  if (rc) return rc;
  int kind = is_put ? (o && o->atomic_add ? 1 : 0) : 2;
  if (o && (o->chunk_rows < 0 || o->chunk_cols < 0))
    return comm_fail(e.c, PTO_EINVAL,
                     "%s: chunk_rows %" PRId64 " / chunk_cols %" PRId64
                     " must be >= 0 (0 = whole dim)",
                     e.op, o->chunk_rows, o->chunk_cols);
  if (!o || (o->chunk_rows <= 0 && o->chunk_cols <= 0 && !o->staging))
    return remote_xfer(&e, remote, local, kind);
  /* chunking cuts both views the same way: they must have the same shape */
  if (dst->ndims != src->ndims || memcmp(dst->shape, src->shape, sizeof(int64_t) * dst->ndims))
    return comm_fail(e.c, PTO_EINVAL, "%s: chunked transfer needs equal shapes", e.op);
  uint64_t woff;
  const comm_buffer_desc *b;
  rc = win_view(&e, remote, is_put ? "dst" : "src", &woff, &b); /* whole region first */
  if (rc) return rc;
  int l = remote->ndims - 1;
  int64_t rows = l > 0 ? remote->shape[l - 1] : 1, cols = remote->shape[l];
  int64_t cr = o->chunk_rows > 0 && o->chunk_rows < rows ? o->chunk_rows : rows;
  int64_t cc = o->chunk_cols > 0 && o->chunk_cols < cols ? o->chunk_cols : cols;
  int64_t lead = numel(remote) / (rows * cols), chunk_elems = lead * cr * cc;
  const pto_tensor *st = o->staging;
  int halves = 1;
  if (st) {
    if (!view_ok(st) || st->dtype != remote->dtype || !pto_tensor_is_contiguous(st) ||
        numel(st) < chunk_elems)
      return comm_fail(e.c, PTO_EINVAL,
                       "%s: staging tile must be a contiguous %s tile of at "
                       "least %" PRId64 " elements",
                       e.op, pto_dtype_name((pto_dtype)remote->dtype), chunk_elems);
    halves = numel(st) >= 2 * chunk_elems ? 2 : 1;
  }
  int64_t k = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += cr) {
    for (int64_t c0 = 0; c0 < cols; c0 += cc, k++) {
      int64_t nr = rows - r0 < cr ? rows - r0 : cr, nc = cols - c0 < cc ? cols - c0 : cc;
      pto_tensor rv = chunk_of(remote, r0, nr, c0, nc), lv = chunk_of(local, r0, nr, c0, nc);
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
  }
  return 0;
}

int pto_put(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts) {
  op_span sp = op_begin(ctx);
  return op_end(&sp, ctx, "put", "peer", peer, bulk(ctx, dom, peer, dst, src, opts, true));
}

int pto_get(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts) {
  op_span sp = op_begin(ctx);
  return op_end(&sp, ctx, "get", "peer", peer, bulk(ctx, dom, peer, dst, src, opts, false));
}

/* ---- signals ---- */

static int cell_off(const op_env *e, const pto_tensor *cell, uint64_t *off,
                    const comm_buffer_desc **b) {
  if (view_ok(cell) && cell->dtype != PTO_I64)
    return comm_fail(e->c, PTO_EALIGN,
                     "%s: signal cell must be an int64 element, not %s "
                     "(domain %d rank %d)",
                     e->op, pto_dtype_name((pto_dtype)cell->dtype), e->d->desc.id, e->d->my_rank);
  pto_tensor one = view_ok(cell) ? *cell : (pto_tensor){0};
  for (int i = 0; i < one.ndims; i++)
    one.shape[i] = 1;
  uint64_t woff;
  int rc = win_view(e, view_ok(cell) ? &one : cell, "signal cell", &woff, b);
  if (rc) return rc;
  *off = woff + (uint64_t)cell->offset * 8;
  if (*off % 8)
    return comm_fail(e->c, PTO_EALIGN, "%s: signal cell in '%s' is not 8-byte aligned", e->op,
                     (*b)->name);
  return 0;
}

static int notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
                  pto_signal_op op, int32_t v) {
  op_env e;
  int rc = get_env(ctx, dom, peer, true, "notify", &e);
  if (rc) return rc;
  if (op != PTO_SIGNAL_ADD && op != PTO_SIGNAL_SET)
    return comm_fail(e.c, PTO_EINVAL, "notify: unknown signal op %d", (int)op);
  uint64_t off;
  const comm_buffer_desc *b;
  rc = cell_off(&e, cell, &off, &b);
  return rc ? rc : e.d->be->signal(e.d->win, peer, off, op, v, e.c->epoch);
}

int pto_notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
               pto_signal_op op, int32_t v) {
  op_span sp = op_begin(ctx);
  return op_end(&sp, ctx, "notify", "peer", peer, notify(ctx, dom, peer, cell, op, v));
}

typedef struct sig_wait {
  const pto_kctx *ctx;
  comm_dom *d;
  uint64_t off;
  uint32_t epoch;
  pto_cmp cmp;
  int32_t v, seen;
  bool cancelled;
} sig_wait;

static bool sig_ready(void *arg) {
  sig_wait *w = arg;
  w->seen = sig_value(w->d->be->signal_load(w->d->win, w->off), w->epoch);
  if (sig_cmp(w->seen, w->cmp, w->v)) return true;
  w->cancelled = pto_kctx_cancelled(w->ctx);
  return w->cancelled;
}

static int signal_wait(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, pto_cmp cmp,
                       int32_t v, int64_t timeout_ms) {
  op_env e;
  int rc = get_env(ctx, dom, 0, false, "signal_wait", &e);
  if (rc) return rc;
  uint64_t off;
  const comm_buffer_desc *b;
  rc = cell_off(&e, cell, &off, &b);
  if (rc) return rc;
  if (timeout_ms < 0) timeout_ms = e.d->desc.wait_timeout_ms;
  sig_wait w = {ctx, e.d, off, e.c->epoch, cmp, v, 0, false};
  bool ok = e.d->be->signal_park(e.d->win, sig_ready, &w, pto_deadline_ms(timeout_ms));
  if (ok && !w.cancelled) return 0;
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
  op_span sp = op_begin(ctx);
  return op_end(&sp, ctx, "wait", "value", v, signal_wait(ctx, dom, cell, cmp, v, timeout_ms));
}

int pto_signal_read(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, int32_t *v) {
  op_env e;
  int rc = get_env(ctx, dom, 0, false, "signal_read", &e);
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
int pto_quiet(const pto_kctx *ctx, pto_domain dom) {
  op_span sp = op_begin(ctx);
  op_env e;
  int rc = get_env(ctx, dom, 0, false, "quiet", &e);
  if (!rc) rc = e.d->be->quiet(e.d->win, -1, false);
  return op_end(&sp, ctx, "quiet", "domain", dom, rc);
}

static bool cancel_cb(void *arg) { return pto_kctx_cancelled((const pto_kctx *)arg); }

static int barrier(const pto_kctx *ctx, pto_domain dom) {
  op_env e;
  int rc = get_env(ctx, dom, 0, false, "barrier", &e);
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
  if (pto_kctx_cancelled(ctx)) return PTO_ESHUTDOWN;
  return comm_fail(e.c, rc, "barrier timed out: domain %d: %s", d->desc.id, why);
}

/* In the trace: "barrier", args.domain. */
int pto_barrier(const pto_kctx *ctx, pto_domain dom) {
  op_span sp = op_begin(ctx);
  return op_end(&sp, ctx, "barrier", "domain", dom, barrier(ctx, dom));
}
