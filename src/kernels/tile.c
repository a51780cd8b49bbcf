/* tile.c — how the reference kernels see pto_tensor views: f32 matrices,
 * vectors and rows of N-d views (see tile.h). */
#include "kernels/tile.h"

#include <stdio.h>
#include <string.h>

bool kern_f32_ok(const pto_tensor *t) {
  return t && t->dtype == PTO_F32 && pto_tensor_validate(t) == PTO_OK;
}

int kern_as_mat(const pto_tensor *t, kern_mat *m) {
  if (!kern_f32_ok(t)) return PTO_EINVAL;
  const int nd = t->ndims;
  for (int d = 0; d < nd - 2; d++) {
    if (t->shape[d] != 1) return PTO_EINVAL;
  }
  m->p = pto_tensor_f32(t);
  if (nd == 1) {
    m->rows = 1;
    m->cols = t->shape[0];
    m->rs = t->shape[0] * t->stride[0]; /* never stepped: one row */
    m->cs = t->stride[0];
  } else {
    m->rows = t->shape[nd - 2];
    m->cols = t->shape[nd - 1];
    m->rs = t->stride[nd - 2];
    m->cs = t->stride[nd - 1];
  }
  return PTO_OK;
}

int kern_as_vec(const pto_tensor *t, kern_vec *v) {
  if (!kern_f32_ok(t)) return PTO_EINVAL;
  v->p = pto_tensor_f32(t);
  v->n = 1;
  v->s = 1;
  int big = 0;
  for (int d = 0; d < t->ndims; d++) {
    if (t->shape[d] > 1) {
      if (big++) return PTO_EINVAL;
      v->n = t->shape[d];
      v->s = t->stride[d];
    }
  }
  return PTO_OK;
}

int64_t kern_nrows(const pto_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndims - 1; d++)
    n *= t->shape[d];
  return n;
}

float *kern_row(const pto_tensor *t, int64_t r) {
  int64_t e = t->offset;
  for (int d = t->ndims - 2; d >= 0; d--) {
    e += (r % t->shape[d]) * t->stride[d];
    r /= t->shape[d];
  }
  return (float *)t->buf + e;
}

bool kern_same_shape(const pto_tensor *a, const pto_tensor *b) {
  if (a->ndims != b->ndims) return false;
  for (int d = 0; d < a->ndims; d++) {
    if (a->shape[d] != b->shape[d]) return false;
  }
  return true;
}

/* Tensor i's name in the list "a, b, out" (into buf). */
static const char *arg_name(const char *names, int i, char *buf, size_t n) {
  const char *p = names;
  for (int k = 0; k < i && p; k++) {
    p = strchr(p, ',');
    if (p) p += 2;
  }
  if (!p) return "?";
  size_t len = strcspn(p, ",");
  snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
  return buf;
}

/* "[4, 8]" */
static const char *shape_str(const pto_tensor *t, char *buf, size_t n) {
  int at = snprintf(buf, n, "[");
  for (int d = 0; d < t->ndims && at < (int)n; d++)
    at += snprintf(buf + at, n - (size_t)at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  if (at < (int)n) snprintf(buf + at, n - (size_t)at, "]");
  return buf;
}

int kern_args(const pto_kctx *ctx, const char *kernel, const char *names, int nt, int ns) {
  if (ctx->ntensors != nt || ctx->nscalars < ns)
    return pto_kctx_fail(ctx, PTO_EINVAL,
                         "%s: got %d tensors and %d scalars, needs %d tensors (%s) and %s%d "
                         "scalar%s",
                         kernel, ctx->ntensors, ctx->nscalars, nt, names, ns ? "at least " : "", ns,
                         ns == 1 ? "" : "s");
  char name[32];
  for (int i = 0; i < nt; i++) {
    const pto_tensor *t = &ctx->tensors[i];
    if (t->dtype != PTO_F32)
      return pto_kctx_fail(ctx, PTO_EINVAL,
                           "%s: tensor %d (%s) is %s, needs f32 (the reference kernels take "
                           "float32 only)",
                           kernel, i, arg_name(names, i, name, sizeof name),
                           pto_dtype_name(t->dtype));
    if (pto_tensor_validate(t) != PTO_OK)
      return pto_kctx_fail(ctx, PTO_EINVAL, "%s: tensor %d (%s) is not a valid view of its buffer",
                           kernel, i, arg_name(names, i, name, sizeof name));
  }
  return PTO_OK;
}

int kern_bad_shapes(const pto_kctx *ctx, const char *kernel, const char *names, const char *need) {
  char got[256], name[32], shape[64];
  int at = 0;
  for (int i = 0; i < ctx->ntensors && at < (int)sizeof got; i++)
    at += snprintf(got + at, sizeof got - (size_t)at, "%s%s %s", i ? ", " : "",
                   arg_name(names, i, name, sizeof name),
                   shape_str(&ctx->tensors[i], shape, sizeof shape));
  return pto_kctx_fail(ctx, PTO_EINVAL, "%s: shapes %s; needs %s", kernel, got, need);
}
