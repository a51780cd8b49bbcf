/* pto/tensor.h — tensor views: a base buffer plus offset, dtype, shape and
 * strides (in elements, up to PTO_MAX_DIMS dims). Views are plain values;
 * view/slice/reshape/transpose make new views of the same buffer without
 * copying. Dependency inference follows the bytes of memory a view touches,
 * however it was built (from `buf` or a pointer into it, in any dtype). */
#ifndef PTO_TENSOR_H
#define PTO_TENSOR_H

#include "pto/export.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PTO_MAX_DIMS 5

typedef enum pto_dtype {
  PTO_F32 = 0,
  PTO_F16,
  PTO_BF16,
  PTO_I32,
  PTO_I16,
  PTO_I8,
  PTO_U8,
  PTO_I64,
  PTO_F64,
  PTO_DTYPE_COUNT
} pto_dtype;

typedef struct pto_tensor {
  void *buf;        /* base buffer (NULL for an OUTPUT not yet allocated) */
  size_t buf_bytes; /* size of the base buffer */
  int64_t offset;   /* element offset of element [0,...,0] */
  int32_t dtype;    /* pto_dtype */
  int32_t ndims;    /* 1..PTO_MAX_DIMS */
  int64_t shape[PTO_MAX_DIMS];
  int64_t stride[PTO_MAX_DIMS]; /* elements, > 0 */
  uint64_t alloc_tag;           /* set by the runtime on the OUTPUT views it allocates (which
                                 * allocation, to catch use after its scope); 0 otherwise */
} pto_tensor;

PTO_API size_t pto_dtype_size(pto_dtype dt);
PTO_API const char *pto_dtype_name(pto_dtype dt);

/* Contiguous row-major view over the whole of `buf` (buf_bytes must hold it).
 * PTO_EINVAL when the view is invalid; *t then still describes the view
 * asked for, and pto_tensor_problem(t, ...) says what is wrong with it
 * (as does every call it is passed to). */
PTO_API int pto_tensor_init(pto_tensor *t, void *buf, size_t buf_bytes, pto_dtype dt, int ndims,
                            const int64_t *shape);
/* General strided view: offset and strides in elements (a failure as
 * pto_tensor_init's). */
PTO_API int pto_tensor_init_strided(pto_tensor *t, void *buf, size_t buf_bytes, pto_dtype dt,
                                    int ndims, const int64_t *shape, const int64_t *stride,
                                    int64_t offset);
/* Descriptor of a tensor the runtime allocates (an OUTPUT argument). */
PTO_API int pto_tensor_desc(pto_tensor *t, pto_dtype dt, int ndims, const int64_t *shape);

/* Checks ndims, strides, dtype and that every element lies inside buf. */
PTO_API int pto_tensor_validate(const pto_tensor *t);
/* NULL when t is valid (as pto_tensor_validate); else the first rule it
 * breaks, as a sentence written into why[why_len] and returned, e.g. "it
 * reaches byte 128 but the buffer has 64 bytes". */
PTO_API const char *pto_tensor_problem(const pto_tensor *t, char *why, size_t why_len);

/* out = src[start[d] : start[d] + shape[d]] in every dim. */
PTO_API int pto_tensor_slice(const pto_tensor *src, const int64_t *start, const int64_t *shape,
                             pto_tensor *out);
/* A new strided view relative to src's element [0..0]: any ndims, offset and
 * strides in elements of src's dtype; must stay inside src's buffer. */
PTO_API int pto_tensor_view(const pto_tensor *src, int ndims, const int64_t *shape,
                            const int64_t *stride, int64_t offset, pto_tensor *out);
/* Same elements, new shape; src must be contiguous row-major. */
PTO_API int pto_tensor_reshape(const pto_tensor *src, int ndims, const int64_t *shape,
                               pto_tensor *out);
/* Swap dims d0 and d1 (no copy; strides swap). */
PTO_API int pto_tensor_transpose(const pto_tensor *src, int d0, int d1, pto_tensor *out);

PTO_API int64_t pto_tensor_numel(const pto_tensor *t);
PTO_API int pto_tensor_is_contiguous(const pto_tensor *t);
/* Address of the element at index idx[0..ndims-1]. No bounds check. */
PTO_API void *pto_tensor_at(const pto_tensor *t, const int64_t *idx);
/* Address of the n-th element in row-major order of the view. */
PTO_API void *pto_tensor_at_linear(const pto_tensor *t, int64_t n);
/* Copy the view's elements to/from a packed row-major host array. */
PTO_API void pto_tensor_copy_out(const pto_tensor *t, void *dst);
PTO_API void pto_tensor_copy_in(const pto_tensor *t, const void *src);

/* Convenience for float views. */
static inline float *pto_tensor_f32(const pto_tensor *t) { return (float *)t->buf + t->offset; }

#ifdef __cplusplus
}
#endif
#endif
