/* tile.h — private view helpers shared by the reference kernels: f32
 * views seen as matrices (rows x cols with two strides), vectors (n with one
 * stride) or rows of an N-d view, and access to a kernel's arguments. */
#ifndef PTO_KERNELS_TILE_H
#define PTO_KERNELS_TILE_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/kernel.h"
#include "pto/status.h"
#include "pto/tensor.h"

/* A 2-D f32 view: element (r, c) is p[r * rs + c * cs]. */
typedef struct kern_mat {
  float *p;
  int64_t rows, cols;
  int64_t rs, cs;
} kern_mat;

/* A 1-D f32 view: element i is p[i * s]. */
typedef struct kern_vec {
  float *p;
  int64_t n;
  int64_t s;
} kern_vec;

/* f32, backed, and within its buffer. */
bool kern_f32_ok(const pto_tensor *t);
/* PTO_EINVAL unless t is an f32 view whose dims before the last two are 1. */
int kern_as_mat(const pto_tensor *t, kern_mat *m);
/* PTO_EINVAL unless t is an f32 view with at most one dim of size > 1. */
int kern_as_vec(const pto_tensor *t, kern_vec *v);
/* Rows of an N-d view: the last dim is the row; rows are numbered in
 * row-major order over the leading dims. */
int64_t kern_nrows(const pto_tensor *t);
/* Address of row r's first element (the row steps by stride[ndims-1]). */
float *kern_row(const pto_tensor *t, int64_t r);
bool kern_same_shape(const pto_tensor *a, const pto_tensor *b);

static inline float *kern_at(const kern_mat *m, int64_t r, int64_t c) {
  return m->p + r * m->rs + c * m->cs;
}

/* The rows [lo, hi) of m as a matrix of their own. */
static inline kern_mat kern_rows(const kern_mat *m, int64_t lo, int64_t hi) {
  kern_mat s = *m;
  s.p = m->p + lo * m->rs;
  s.rows = hi - lo;
  return s;
}

/* A reference kernel's arguments, checked before it runs; a failed check
 * returns PTO_EINVAL with the reason given by pto_kctx_fail, naming the
 * kernel, the argument, what it got and what it needs. `names` lists the
 * tensors as the kernel documents them ("a, b, out").
 *  - kern_args: exactly nt tensors, at least ns scalars, every tensor a
 *    valid float32 view (the reference kernels take float32 only);
 *  - kern_bad_shapes: for a failed shape check, every tensor's shape and
 *    `need`, the rule they break ("a, b and out of one shape"). */
int kern_args(const pto_kctx *ctx, const char *kernel, const char *names, int nt, int ns);
int kern_bad_shapes(const pto_kctx *ctx, const char *kernel, const char *names, const char *need);

#endif
