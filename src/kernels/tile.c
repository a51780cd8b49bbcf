/* tile.c — how the reference kernels see pto_tensor views: f32 matrices,
 * vectors and rows of N-d views (see tile.h). */
#include "kernels/tile.h"

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
