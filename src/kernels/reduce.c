/* reduce.c — row and column reductions (sum, max) of an f32 matrix (AIV),
 * with SPMD wrappers: row reductions split rows across blocks, column
 * reductions split columns. */
#include <math.h>

#include "kernels/tile.h"
#include "pto/kernels.h"

typedef enum rd_op { RD_SUM, RD_MAX } rd_op;

/* out must hold one element per row (by_row) or per column. */
static int rd_check(const pto_tensor *in, const pto_tensor *out, bool by_row, kern_mat *mi,
                    kern_vec *vo) {
  if (kern_as_mat(in, mi) || kern_as_vec(out, vo)) return PTO_EINVAL;
  return vo->n == (by_row ? mi->rows : mi->cols) ? PTO_OK : PTO_EINVAL;
}

/* Reduces the lines [lo, hi): rows when by_row, else columns. The column
 * case walks row-major and keeps one running value per column so that a
 * row-major input is read sequentially. */
static void rd_lines(rd_op op, const kern_mat *in, const kern_vec *out, bool by_row, int64_t lo,
                     int64_t hi) {
  const float init = op == RD_SUM ? 0.0f : -INFINITY;
  if (by_row) {
    for (int64_t r = lo; r < hi; r++) {
      float acc = init;
      for (int64_t c = 0; c < in->cols; c++) {
        const float x = *kern_at(in, r, c);
        acc = op == RD_SUM ? acc + x : fmaxf(acc, x);
      }
      out->p[r * out->s] = acc;
    }
    return;
  }
  for (int64_t c = lo; c < hi; c++)
    out->p[c * out->s] = init;
  for (int64_t r = 0; r < in->rows; r++) {
    for (int64_t c = lo; c < hi; c++) {
      float *o = &out->p[c * out->s];
      const float x = *kern_at(in, r, c);
      *o = op == RD_SUM ? *o + x : fmaxf(*o, x);
    }
  }
}

static int rd_tile(rd_op op, bool by_row, const pto_tensor *in, const pto_tensor *out) {
  kern_mat mi;
  kern_vec vo;
  if (rd_check(in, out, by_row, &mi, &vo) != PTO_OK) return PTO_EINVAL;
  rd_lines(op, &mi, &vo, by_row, 0, vo.n);
  return PTO_OK;
}

int pto_tile_row_sum(const pto_tensor *in, const pto_tensor *out) {
  return rd_tile(RD_SUM, true, in, out);
}
int pto_tile_row_max(const pto_tensor *in, const pto_tensor *out) {
  return rd_tile(RD_MAX, true, in, out);
}
int pto_tile_col_sum(const pto_tensor *in, const pto_tensor *out) {
  return rd_tile(RD_SUM, false, in, out);
}
int pto_tile_col_max(const pto_tensor *in, const pto_tensor *out) {
  return rd_tile(RD_MAX, false, in, out);
}

static int rd_kern(rd_op op, bool by_row, const pto_kctx *ctx) {
  const char *kernel =
      by_row ? (op == RD_SUM ? "row_sum" : "row_max") : (op == RD_SUM ? "col_sum" : "col_max");
  if (kern_args(ctx, kernel, "in, out", 2, 0) != PTO_OK) return PTO_EINVAL;
  kern_mat mi;
  kern_vec vo;
  if (rd_check(&ctx->tensors[0], &ctx->tensors[1], by_row, &mi, &vo) != PTO_OK)
    return kern_bad_shapes(ctx, kernel, "in, out",
                           by_row ? "in [R, C] (leading dims 1) and out [R]"
                                  : "in [R, C] (leading dims 1) and out [C]");
  int64_t lo, hi;
  pto_split_range(vo.n, ctx->block_idx, ctx->block_num, &lo, &hi);
  rd_lines(op, &mi, &vo, by_row, lo, hi);
  return PTO_OK;
}

int pto_kern_row_sum(const pto_kctx *ctx) { return rd_kern(RD_SUM, true, ctx); }
int pto_kern_row_max(const pto_kctx *ctx) { return rd_kern(RD_MAX, true, ctx); }
int pto_kern_col_sum(const pto_kctx *ctx) { return rd_kern(RD_SUM, false, ctx); }
int pto_kern_col_max(const pto_kctx *ctx) { return rd_kern(RD_MAX, false, ctx); }
