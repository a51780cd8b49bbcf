/* softmax.c — softmax tile kernels (AIV): row softmax, the flash-attention
 * online softmax step over a chunk of scores, and the final row
 * normalisation, with their SPMD wrappers (rows split across blocks). */
#include <math.h>

#include "kernels/tile.h"
#include "pto/kernels.h"

/* ---- row softmax ---- */

static void sm_rows(const kern_mat *in, float scale, const kern_mat *out) {
  for (int64_t r = 0; r < in->rows; r++) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < in->cols; c++)
      mx = fmaxf(mx, scale * *kern_at(in, r, c));
    float sum = 0.0f;
    for (int64_t c = 0; c < in->cols; c++) {
      float e = expf(scale * *kern_at(in, r, c) - mx);
      *kern_at(out, r, c) = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < in->cols; c++)
      *kern_at(out, r, c) *= inv;
  }
}

static int sm_check(const pto_tensor *in, const pto_tensor *out, kern_mat *mi, kern_mat *mo) {
  if (kern_as_mat(in, mi) || kern_as_mat(out, mo)) return PTO_EINVAL;
  return mi->rows == mo->rows && mi->cols == mo->cols ? PTO_OK : PTO_EINVAL;
}

int pto_tile_softmax_rows(const pto_tensor *in, float scale, const pto_tensor *out) {
  kern_mat mi, mo;
  if (sm_check(in, out, &mi, &mo) != PTO_OK) return PTO_EINVAL;
  sm_rows(&mi, scale, &mo);
  return PTO_OK;
}

int pto_kern_softmax_rows(const pto_kctx *ctx) {
  if (kern_args(ctx, "softmax_rows", "in, out", 2, 0) != PTO_OK) return PTO_EINVAL;
  kern_mat mi, mo;
  if (sm_check(&ctx->tensors[0], &ctx->tensors[1], &mi, &mo) != PTO_OK)
    return kern_bad_shapes(ctx, "softmax_rows", "in, out",
                           "in and out of one shape [R, C] (leading dims 1)");
  const float scale = ctx->nscalars >= 1 ? pto_kctx_scalar_f32(ctx, 0) : 1.0f;
  int64_t lo, hi;
  pto_split_range(mi.rows, ctx->block_idx, ctx->block_num, &lo, &hi);
  kern_mat si = kern_rows(&mi, lo, hi), so = kern_rows(&mo, lo, hi);
  sm_rows(&si, scale, &so);
  return PTO_OK;
}

/* ---- online softmax step ---- */

typedef struct os_views {
  kern_mat s, o, p;
  kern_vec m, l;
} os_views;

static int os_check(const pto_tensor *s, const pto_tensor *m, const pto_tensor *l,
                    const pto_tensor *o, const pto_tensor *p, os_views *v) {
  if (kern_as_mat(s, &v->s) || kern_as_mat(o, &v->o) || kern_as_mat(p, &v->p)) return PTO_EINVAL;
  if (kern_as_vec(m, &v->m) || kern_as_vec(l, &v->l)) return PTO_EINVAL;
  const int64_t r = v->s.rows;
  if (v->m.n != r || v->l.n != r || v->o.rows != r || v->p.rows != r) return PTO_EINVAL;
  return v->p.cols == v->s.cols ? PTO_OK : PTO_EINVAL;
}

/* Rows [lo, hi). A row whose max is still -inf (no finite score yet) keeps
 * its state and gets p = 0, instead of exp(-inf - -inf) = NaN. */
static void os_rows(const os_views *v, float scale, int64_t lo, int64_t hi) {
  const int64_t t = v->s.cols, d = v->o.cols;
  for (int64_t r = lo; r < hi; r++) {
    float *mr = v->m.p + r * v->m.s, *lr = v->l.p + r * v->l.s;
    float mx = *mr;
    for (int64_t c = 0; c < t; c++)
      mx = fmaxf(mx, scale * *kern_at(&v->s, r, c));
    if (mx == -INFINITY) {
      for (int64_t c = 0; c < t; c++)
        *kern_at(&v->p, r, c) = 0.0f;
      continue;
    }
    const float alpha = expf(*mr - mx);
    float sum = 0.0f;
    for (int64_t c = 0; c < t; c++) {
      float e = expf(scale * *kern_at(&v->s, r, c) - mx);
      *kern_at(&v->p, r, c) = e;
      sum += e;
    }
    *lr = alpha * *lr + sum;
    *mr = mx;
    if (alpha != 1.0f) {
      for (int64_t c = 0; c < d; c++)
        *kern_at(&v->o, r, c) *= alpha;
    }
  }
}

int pto_tile_online_softmax(const pto_tensor *s, float scale, const pto_tensor *m,
                            const pto_tensor *l, const pto_tensor *o, const pto_tensor *p) {
  os_views v;
  if (os_check(s, m, l, o, p, &v) != PTO_OK) return PTO_EINVAL;
  os_rows(&v, scale, 0, v.s.rows);
  return PTO_OK;
}

int pto_kern_online_softmax(const pto_kctx *ctx) {
  static const char names[] = "s, m, l, o, p";
  if (kern_args(ctx, "online_softmax", names, 5, 1) != PTO_OK) return PTO_EINVAL;
  const pto_tensor *t = ctx->tensors;
  os_views v;
  if (os_check(&t[0], &t[1], &t[2], &t[3], &t[4], &v) != PTO_OK)
    return kern_bad_shapes(ctx, "online_softmax", names,
                           "s [R, C], m [R], l [R], o [R, D], p [R, C] (leading dims 1)");
  int64_t lo, hi;
  pto_split_range(v.s.rows, ctx->block_idx, ctx->block_num, &lo, &hi);
  os_rows(&v, pto_kctx_scalar_f32(ctx, 0), lo, hi);
  return PTO_OK;
}

/* ---- final normalisation ---- */

static int nr_check(const pto_tensor *o, const pto_tensor *l, const pto_tensor *out, kern_mat *mo,
                    kern_vec *vl, kern_mat *mout) {
  if (kern_as_mat(o, mo) || kern_as_vec(l, vl) || kern_as_mat(out, mout)) return PTO_EINVAL;
  if (vl->n != mo->rows || mout->rows != mo->rows || mout->cols != mo->cols) return PTO_EINVAL;
  return PTO_OK;
}

/* A row with l = 0 (nothing attended) comes out as 0 rather than NaN. */
static void nr_rows(const kern_mat *o, const kern_vec *l, const kern_mat *out, int64_t lo,
                    int64_t hi) {
  for (int64_t r = lo; r < hi; r++) {
    const float lr = l->p[r * l->s];
    const float inv = lr != 0.0f ? 1.0f / lr : 0.0f;
    for (int64_t c = 0; c < o->cols; c++)
      *kern_at(out, r, c) = *kern_at(o, r, c) * inv;
  }
}

int pto_tile_normalize_rows(const pto_tensor *o, const pto_tensor *l, const pto_tensor *out) {
  kern_mat mo, mout;
  kern_vec vl;
  if (nr_check(o, l, out, &mo, &vl, &mout) != PTO_OK) return PTO_EINVAL;
  nr_rows(&mo, &vl, &mout, 0, mo.rows);
  return PTO_OK;
}

int pto_kern_normalize_rows(const pto_kctx *ctx) {
  if (kern_args(ctx, "normalize_rows", "o, l, out", 3, 0) != PTO_OK) return PTO_EINVAL;
  kern_mat mo, mout;
  kern_vec vl;
  if (nr_check(&ctx->tensors[0], &ctx->tensors[1], &ctx->tensors[2], &mo, &vl, &mout) != PTO_OK)
    return kern_bad_shapes(ctx, "normalize_rows", "o, l, out",
                           "o [R, D], l [R], out [R, D] (leading dims 1)");
  int64_t lo, hi;
  pto_split_range(mo.rows, ctx->block_idx, ctx->block_num, &lo, &hi);
  nr_rows(&mo, &vl, &mout, lo, hi);
  return PTO_OK;
}
