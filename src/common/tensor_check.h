/* tensor_check.h — private layout checks shared by tensor.c and the runtime.
 * Validating a runtime-allocated OUTPUT descriptor (buf still NULL) needs
 * the same shape/stride/bounds rules as pto_tensor_validate() minus the
 * buffer pointer, so both go through tensor_check(). */
#ifndef PTO_TENSOR_CHECK_H
#define PTO_TENSOR_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pto/tensor.h"

/* pto_dtype_size inline, for the runtime's per-call paths (a submit, a
 * collective, an op): the bytes of dtype dt, 0 for an unknown one. */
extern const size_t tensor_dtype_sizes[PTO_DTYPE_COUNT];
static inline size_t tensor_es(int32_t dt) {
  return (uint32_t)dt < PTO_DTYPE_COUNT ? tensor_dtype_sizes[dt] : 0;
}

/* PTO_OK or PTO_EINVAL. Checks dtype, ndims in 1..PTO_MAX_DIMS, shape >= 1,
 * stride > 0, offset >= 0, that element count and byte size do not overflow,
 * and that every element lies inside buf_bytes. buf must be non-NULL unless
 * allow_null_buf (an OUTPUT descriptor not yet backed by memory). */
int tensor_check(const pto_tensor *t, bool allow_null_buf);

/* The first rule tensor_check() finds broken, as a sentence written to
 * why[n] (e.g. "stride[1] is 0 (must be > 0)"), or NULL when valid. */
const char *tensor_problem(const pto_tensor *t, bool allow_null_buf, char *why, size_t n);

/* PTO_OK or PTO_EINVAL: dtype in range, ndims in 1..PTO_MAX_DIMS, every
 * shape >= 1 and the packed byte size fits in int64 (written to *bytes when
 * bytes != NULL). The check for a descriptor before any layout exists. */
int tensor_check_shape(int32_t dtype, int ndims, const int64_t *shape, int64_t *bytes);

/* t's strides [0, ndims), those of a packed row-major layout of its
 * shape (the last dimension contiguous). */
void tensor_set_packed_strides(pto_tensor *t);

/* One pass over t's dims (the caller checked ndims and offset >= 0):
 * false when a shape or stride is below 1 or the index of the view's last
 * element (offset + the sum of (shape - 1) x stride) overflows or is
 * INT64_MAX; else that index in *last, and in *packed_fits whether es
 * times the product of the shape fits int64 (tensor_check_shape's rule).
 * tensor_span, tensor_check and region.c's normalisation share it. */
static inline bool tensor_dims_reach(const pto_tensor *t, int64_t es, int64_t *last,
                                     bool *packed_fits) {
  int64_t at = t->offset, packed = es, step;
  bool fits = true;
  for (int d = 0; d < t->ndims; d++) {
    int64_t shape = t->shape[d], stride = t->stride[d];
    if (shape < 1 || stride < 1 || __builtin_mul_overflow(shape - 1, stride, &step) ||
        __builtin_add_overflow(at, step, &at))
      return false;
    fits &= !__builtin_mul_overflow(packed, shape, &packed);
  }
  if (at == INT64_MAX) return false;
  *last = at;
  *packed_fits = fits;
  return true;
}

/* Element index range [first, end) of buf that the view touches (its
 * bounding box); false if the computation overflows or the view is malformed
 * (then *first and *end are untouched). */
bool tensor_span(const pto_tensor *t, int64_t *first, int64_t *end);

/* Like tensor_problem() with buf required, except that a view with a zero
 * in its shape (the rows [lo, lo) pto_split_range gives a surplus block) is
 * valid and empty: it touches no byte, so its buffer bounds are not
 * checked. *empty says which. Every other rule still applies: a negative
 * extent, a bad dtype, stride or offset is a problem. */
const char *tensor_problem_or_empty(const pto_tensor *t, bool *empty, char *why, size_t n);

/* Byte range [lo, hi) of buf that a valid, non-empty view touches (its
 * bounding box), computed with overflow checks; false when it does not fit
 * 64 bits or the view is malformed (then *lo and *hi are untouched). */
bool tensor_byte_span(const pto_tensor *t, uint64_t *lo, uint64_t *hi);

/* The element count of a view that is valid with a buffer (tensor_problem()
 * finds nothing) and row-major packed (pto_tensor_is_contiguous()); -1
 * for any other view (ask those two which rule it breaks). One pass over
 * the dims, for the hot paths that need all three answers (a collective's
 * src, dst and scratch). */
int64_t tensor_dense_numel(const pto_tensor *t);

/* The name of an access mode of pto/orch.h ("INPUT", ..., "REDUX"), as
 * every message that names an argument's mode prints it; "?" for a value
 * that is none. */
const char *tensor_access_name(int access);

#endif
