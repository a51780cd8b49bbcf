/* matmul.c — f32 tile matmul (AIC): C = A·B and C += A·B over strided
 * views, and their SPMD wrappers (rows of C split across blocks). */
#include <string.h>

#include "common/region.h"
#include "kernels/tile.h"
#include "pto/kernels.h"

/* C is written while A and B are still being read, so an output that
 * overlaps an input would silently give a wrong product: refuse it (the
 * check is the TensorMap's, conservative for interleaved views). */
static bool mm_aliases(const pto_tensor *c, const pto_tensor *in) { return region_overlap(c, in); }

static int mm_check(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c, kern_mat *ma,
                    kern_mat *mb, kern_mat *mc) {
  if (kern_as_mat(a, ma) || kern_as_mat(b, mb) || kern_as_mat(c, mc)) return PTO_EINVAL;
  if (ma->cols != mb->rows || ma->rows != mc->rows || mb->cols != mc->cols) return PTO_EINVAL;
  if (mm_aliases(c, a) || mm_aliases(c, b)) return PTO_EINVAL;
  return PTO_OK;
}

/* Dot product of n elements with strides; eight partial sums so the loop
 * is not one serial dependency chain. */
static float mm_dot(const float *x, int64_t sx, const float *y, int64_t sy, int64_t n) {
  float acc[8] = {0};
  int64_t k = 0;
  if (sx == 1 && sy == 1) {
    for (; k + 8 <= n; k += 8) {
      for (int u = 0; u < 8; u++)
        acc[u] += x[k + u] * y[k + u];
    }
  }
  float s = 0.0f;
  for (; k < n; k++)
    s += x[k * sx] * y[k * sy];
  for (int u = 0; u < 8; u++)
    s += acc[u];
  return s;
}

/* c[0..n) += a * b[0..n), in fixed groups of 8 that the compiler turns
 * into vector operations (restrict: C never aliases B). */
static void mm_axpy(float *restrict c, const float *restrict b, float a, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int u = 0; u < 8; u++)
      c[j + u] += a * b[j + u];
  }
  for (; j < n; j++)
    c[j] += a * b[j];
}

/* C (rows of a) op= A·B. The loop order follows the layout: with B and C
 * rows contiguous, stream rows of B into rows of C (i-k-j); otherwise take
 * dot products along K, which is contiguous for a transposed B (K^T). */
static void mm_rows(const kern_mat *a, const kern_mat *b, const kern_mat *c, bool acc) {
  const int64_t m = c->rows, n = c->cols, kk = a->cols;
  if (b->cs == 1 && c->cs == 1) {
    for (int64_t i = 0; i < m; i++) {
      float *ci = kern_at(c, i, 0);
      if (!acc) memset(ci, 0, (size_t)n * sizeof *ci);
      for (int64_t k = 0; k < kk; k++)
        mm_axpy(ci, kern_at(b, k, 0), *kern_at(a, i, k), n);
    }
    return;
  }
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      float d = mm_dot(kern_at(a, i, 0), a->cs, kern_at(b, 0, j), b->rs, kk);
      float *cij = kern_at(c, i, j);
      *cij = acc ? *cij + d : d;
    }
  }
}

static int mm_tile(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c, bool acc) {
  kern_mat ma, mb, mc;
  if (mm_check(a, b, c, &ma, &mb, &mc) != PTO_OK) return PTO_EINVAL;
  mm_rows(&ma, &mb, &mc, acc);
  return PTO_OK;
}

int pto_tile_matmul(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c) {
  return mm_tile(a, b, c, false);
}
int pto_tile_matmul_acc(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c) {
  return mm_tile(a, b, c, true);
}

static int mm_kern(const pto_kctx *ctx, bool acc) {
  const char *kernel = acc ? "matmul_acc" : "matmul";
  if (kern_args(ctx, kernel, "A, B, C", 3, 0) != PTO_OK) return PTO_EINVAL;
  kern_mat ma, mb, mc;
  if (mm_check(&ctx->tensors[0], &ctx->tensors[1], &ctx->tensors[2], &ma, &mb, &mc) != PTO_OK)
    return kern_bad_shapes(ctx, kernel, "A, B, C",
                           "A [M, K], B [K, N], C [M, N] (leading dims 1), C overlapping "
                           "neither A nor B");
  int64_t lo, hi;
  pto_split_range(mc.rows, ctx->block_idx, ctx->block_num, &lo, &hi);
  if (lo >= hi) return PTO_OK;
  kern_mat sa = kern_rows(&ma, lo, hi), sc = kern_rows(&mc, lo, hi);
  mm_rows(&sa, &mb, &sc, acc);
  return PTO_OK;
}

int pto_kern_matmul(const pto_kctx *ctx) { return mm_kern(ctx, false); }
int pto_kern_matmul_acc(const pto_kctx *ctx) { return mm_kern(ctx, true); }
