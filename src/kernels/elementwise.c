/* elementwise.c — elementwise tile kernels (AIV): add, mul, scale, exp,
 * copy, fill over views of any ndims, and their SPMD wrappers (rows of the
 * view split across blocks). */
#include <math.h>

#include "kernels/tile.h"
#include "pto/kernels.h"

typedef enum ew_op { EW_ADD, EW_MUL, EW_SCALE, EW_EXP, EW_COPY, EW_FILL } ew_op;

/* Operand count per op: binary ops read a and b, unary ops read a, fill
 * reads nothing. */
static int ew_inputs(ew_op op) {
  switch (op) {
  case EW_ADD:
  case EW_MUL: return 2;
  case EW_FILL: return 0;
  default: return 1;
  }
}

static int ew_check(ew_op op, const pto_tensor *a, const pto_tensor *b, const pto_tensor *out) {
  if (!kern_f32_ok(out)) return PTO_EINVAL;
  int n = ew_inputs(op);
  if (n >= 1 && (!kern_f32_ok(a) || !kern_same_shape(a, out))) return PTO_EINVAL;
  if (n >= 2 && (!kern_f32_ok(b) || !kern_same_shape(b, out))) return PTO_EINVAL;
  return PTO_OK;
}

/* Rows [lo, hi) of out = op(a, b); x is the scalar of scale/fill. The
 * unit-stride case gets its own loops so the compiler vectorises them. */
static void ew_rows(ew_op op, const pto_tensor *a, const pto_tensor *b, float x,
                    const pto_tensor *out, int64_t lo, int64_t hi) {
  const int last = out->ndims - 1;
  const int64_t n = out->shape[last];
  const int64_t so = out->stride[last];
  const int64_t sa = a ? a->stride[last] : 0, sb = b ? b->stride[last] : 0;
  for (int64_t r = lo; r < hi; r++) {
    float *o = kern_row(out, r);
    const float *pa = a ? kern_row(a, r) : NULL, *pb = b ? kern_row(b, r) : NULL;
    switch (op) {
    case EW_ADD:
      if (so == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; i++)
          o[i] = pa[i] + pb[i];
      } else {
        for (int64_t i = 0; i < n; i++)
          o[i * so] = pa[i * sa] + pb[i * sb];
      }
      break;
    case EW_MUL:
      if (so == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; i++)
          o[i] = pa[i] * pb[i];
      } else {
        for (int64_t i = 0; i < n; i++)
          o[i * so] = pa[i * sa] * pb[i * sb];
      }
      break;
    case EW_SCALE:
      for (int64_t i = 0; i < n; i++)
        o[i * so] = x * pa[i * sa];
      break;
    case EW_EXP:
      for (int64_t i = 0; i < n; i++)
        o[i * so] = expf(pa[i * sa]);
      break;
    case EW_COPY:
      for (int64_t i = 0; i < n; i++)
        o[i * so] = pa[i * sa];
      break;
    case EW_FILL:
      for (int64_t i = 0; i < n; i++)
        o[i * so] = x;
      break;
    }
  }
}

static int ew_tile(ew_op op, const pto_tensor *a, const pto_tensor *b, float x,
                   const pto_tensor *out) {
  int rc = ew_check(op, a, b, out);
  if (rc != PTO_OK) return rc;
  ew_rows(op, a, b, x, out, 0, kern_nrows(out));
  return PTO_OK;
}

int pto_tile_add(const pto_tensor *a, const pto_tensor *b, const pto_tensor *out) {
  return ew_tile(EW_ADD, a, b, 0.0f, out);
}
int pto_tile_mul(const pto_tensor *a, const pto_tensor *b, const pto_tensor *out) {
  return ew_tile(EW_MUL, a, b, 0.0f, out);
}
int pto_tile_scale(const pto_tensor *in, float alpha, const pto_tensor *out) {
  return ew_tile(EW_SCALE, in, NULL, alpha, out);
}
int pto_tile_exp(const pto_tensor *in, const pto_tensor *out) {
  return ew_tile(EW_EXP, in, NULL, 0.0f, out);
}
int pto_tile_copy(const pto_tensor *in, const pto_tensor *out) {
  return ew_tile(EW_COPY, in, NULL, 0.0f, out);
}
int pto_tile_fill(const pto_tensor *out, float value) {
  return ew_tile(EW_FILL, NULL, NULL, value, out);
}

/* Wrapper: inputs are t0 (and t1), the output is the next tensor, the
 * scalar (scale, fill) is s0. */
static int ew_kern(ew_op op, const char *kernel, const pto_kctx *ctx) {
  const int nin = ew_inputs(op);
  const int ns = (op == EW_SCALE || op == EW_FILL) ? 1 : 0;
  static const char *const names[] = {"out", "in, out", "a, b, out"};
  if (kern_args(ctx, kernel, names[nin], nin + 1, ns) != PTO_OK) return PTO_EINVAL;
  const pto_tensor *a = nin >= 1 ? &ctx->tensors[0] : NULL;
  const pto_tensor *b = nin >= 2 ? &ctx->tensors[1] : NULL;
  const pto_tensor *out = &ctx->tensors[nin];
  const float x = ns ? pto_kctx_scalar_f32(ctx, 0) : 0.0f;
  if (ew_check(op, a, b, out) != PTO_OK)
    return kern_bad_shapes(ctx, kernel, names[nin], "the inputs of out's shape");
  int64_t lo, hi;
  pto_split_range(kern_nrows(out), ctx->block_idx, ctx->block_num, &lo, &hi);
  ew_rows(op, a, b, x, out, lo, hi);
  return PTO_OK;
}

int pto_kern_add(const pto_kctx *ctx) { return ew_kern(EW_ADD, "add", ctx); }
int pto_kern_mul(const pto_kctx *ctx) { return ew_kern(EW_MUL, "mul", ctx); }
int pto_kern_scale(const pto_kctx *ctx) { return ew_kern(EW_SCALE, "scale", ctx); }
int pto_kern_exp(const pto_kctx *ctx) { return ew_kern(EW_EXP, "exp", ctx); }
int pto_kern_copy(const pto_kctx *ctx) { return ew_kern(EW_COPY, "copy", ctx); }
int pto_kern_fill(const pto_kctx *ctx) { return ew_kern(EW_FILL, "fill", ctx); }
