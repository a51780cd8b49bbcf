/* pto/kernels.h — reference tile kernels in plain C (f32).
 *
 * Two layers:
 *  - tile functions (pto_tile_*) compute on pto_tensor views directly, on
 *    any thread; they honour offsets and strides, so transposed or sliced
 *    views work without copies;
 *  - kernel wrappers (pto_kern_*) are pto_kernel_fn functions that take
 *    their tensors and scalars from pto_kctx in a fixed order (documented
 *    below) and split the work across the task's blocks (SPMD).
 *
 * Shapes: a "matrix" is a view whose dims before the last two all have
 * size 1 (a 1-D view of n elements is a 1 x n matrix). A "vector" of n
 * elements is a view of n elements with at most one dim of size > 1 (so
 * [n], [n,1] and [1,n] all qualify). Elementwise functions take views of
 * any ndims whose shapes are equal. Every function returns 0 or PTO_EINVAL
 * (wrong dtype, ndims, shape or argument count); nothing is partially
 * written on PTO_EINVAL. Scalars are passed as f32 bit patterns
 * (pto_args_scalar_f32 on the orchestration side).
 *
 * Output views may alias inputs only when they are the identical view
 * (in-place elementwise, softmax); a matmul output overlapping an input is
 * refused with PTO_EINVAL. */
#ifndef PTO_KERNELS_H
#define PTO_KERNELS_H

#include "pto/export.h"
#include <stdint.h>

#include "pto/chip.h"
#include "pto/kernel.h"
#include "pto/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Block `idx` of `num` gets the rows [*lo, *hi) of n (balanced: sizes
 * differ by at most one; blocks past n get an empty range). */
static inline void pto_split_range(int64_t n, int32_t idx, int32_t num, int64_t *lo, int64_t *hi) {
  if (num < 1) num = 1;
  int64_t q = n / num, r = n % num;
  *lo = idx * q + (idx < r ? idx : r);
  *hi = *lo + q + (idx < r ? 1 : 0);
}

/* ---- elementwise (AIV) ---- */
PTO_API int pto_tile_add(const pto_tensor *a, const pto_tensor *b, const pto_tensor *out);
PTO_API int pto_tile_mul(const pto_tensor *a, const pto_tensor *b, const pto_tensor *out);
PTO_API int pto_tile_scale(const pto_tensor *in, float alpha, const pto_tensor *out);
PTO_API int pto_tile_exp(const pto_tensor *in, const pto_tensor *out);
PTO_API int pto_tile_copy(const pto_tensor *in, const pto_tensor *out);
PTO_API int pto_tile_fill(const pto_tensor *out, float value);

/* ---- matmul (AIC): A [M,K], B [K,N], C [M,N] ---- */
/* C = A·B */
PTO_API int pto_tile_matmul(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c);
/* C += A·B */
PTO_API int pto_tile_matmul_acc(const pto_tensor *a, const pto_tensor *b, const pto_tensor *c);

/* ---- softmax (AIV) ---- */
/* out[r,:] = softmax(scale * in[r,:]) for every row r. */
PTO_API int pto_tile_softmax_rows(const pto_tensor *in, float scale, const pto_tensor *out);
/* One flash-attention step over a chunk of scores s [R,T], with running
 * row max m [R] (start at -inf), running row sum l [R] (start at 0) and
 * output accumulator o [R,D] (start at 0):
 *   m' = max(m, rowmax(scale*s));  alpha = exp(m - m')
 *   p  = exp(scale*s - m')          (written to p [R,T])
 *   l  = alpha*l + rowsum(p);  o = alpha*o;  m = m'
 * after which the caller adds p·V_chunk into o (pto_tile_matmul_acc).
 * Once every chunk is in, o / l (pto_tile_normalize_rows) is
 * softmax(scale * s_all)·V_all. */
PTO_API int pto_tile_online_softmax(const pto_tensor *s, float scale, const pto_tensor *m,
                                    const pto_tensor *l, const pto_tensor *o, const pto_tensor *p);
/* out[r,:] = o[r,:] / l[r] (o and out [R,D], l a vector of R). */
PTO_API int pto_tile_normalize_rows(const pto_tensor *o, const pto_tensor *l,
                                    const pto_tensor *out);

/* ---- reductions (AIV): in [R,C] ---- */
PTO_API int pto_tile_row_sum(const pto_tensor *in, const pto_tensor *out); /* out vector of R */
PTO_API int pto_tile_row_max(const pto_tensor *in, const pto_tensor *out); /* out vector of R */
PTO_API int pto_tile_col_sum(const pto_tensor *in, const pto_tensor *out); /* out vector of C */
PTO_API int pto_tile_col_max(const pto_tensor *in, const pto_tensor *out); /* out vector of C */

/* ---- kernel wrappers ----
 * Argument convention: tN = tensor argument N, sN = scalar argument N (f32
 * bits). "rows" = the work is split by rows across block_idx/block_num
 * (for elementwise: rows of the view with its last dim as the row), so any
 * block_num is valid; extra blocks do nothing.
 *
 * wrapper                   tensors                                   scalars  split
 * pto_kern_add              t0 a, t1 b, t2 out (= a + b)              -        rows
 * pto_kern_mul              t0 a, t1 b, t2 out (= a * b)              -        rows
 * pto_kern_scale            t0 in, t1 out (= alpha * in)              s0 alpha rows
 * pto_kern_exp              t0 in, t1 out (= exp(in))                 -        rows
 * pto_kern_copy             t0 in, t1 out                             -        rows
 * pto_kern_fill             t0 out (= value)                          s0 value rows
 * pto_kern_matmul           t0 A, t1 B, t2 C (= A·B)                  -        rows of C
 * pto_kern_matmul_acc       t0 A, t1 B, t2 C (+= A·B; pass INOUT)     -        rows of C
 * pto_kern_softmax_rows     t0 in, t1 out                             [s0 scale, default 1] rows
 * pto_kern_online_softmax   t0 s, t1 m, t2 l, t3 o (m,l,o INOUT),     s0 scale rows
 *                           t4 p (OUTPUT)
 * pto_kern_normalize_rows   t0 o, t1 l, t2 out                        -        rows
 * pto_kern_row_sum/max      t0 in [R,C], t1 out [R]                   -        rows
 * pto_kern_col_sum/max      t0 in [R,C], t1 out [C]                   -        columns
 */
PTO_API int pto_kern_add(const pto_kctx *ctx);
PTO_API int pto_kern_mul(const pto_kctx *ctx);
PTO_API int pto_kern_scale(const pto_kctx *ctx);
PTO_API int pto_kern_exp(const pto_kctx *ctx);
PTO_API int pto_kern_copy(const pto_kctx *ctx);
PTO_API int pto_kern_fill(const pto_kctx *ctx);
PTO_API int pto_kern_matmul(const pto_kctx *ctx);
PTO_API int pto_kern_matmul_acc(const pto_kctx *ctx);
PTO_API int pto_kern_softmax_rows(const pto_kctx *ctx);
PTO_API int pto_kern_online_softmax(const pto_kctx *ctx);
PTO_API int pto_kern_normalize_rows(const pto_kctx *ctx);
PTO_API int pto_kern_row_sum(const pto_kctx *ctx);
PTO_API int pto_kern_row_max(const pto_kctx *ctx);
PTO_API int pto_kern_col_sum(const pto_kctx *ctx);
PTO_API int pto_kern_col_max(const pto_kctx *ctx);

/* Kernel ids of every wrapper above, registered on one chip under the
 * names "add", "mul", ..., "col_max" (matmuls as AIC kernels, the rest as
 * AIV kernels). */
typedef struct pto_kernel_ids {
  int add, mul, scale, exp, copy, fill;
  int matmul, matmul_acc;
  int softmax_rows, online_softmax, normalize_rows;
  int row_sum, row_max, col_sum, col_max;
} pto_kernel_ids;

PTO_API int pto_kernels_register(pto_chip *chip, pto_kernel_ids *ids);

#ifdef __cplusplus
}
#endif
#endif
