/* tensor.c — tensor views: construction, validation, derived views
 * (slice/view/reshape/transpose), element addressing and packed copies.
 * Every constructor builds the result in a local and writes *out only on
 * success, so a failed call leaves the caller's view untouched (and
 * out == src is allowed). Unused dims are zeroed so views compare with
 * memcmp. */
#include "common/tensor_check.h"
#include "common/tensor_walk.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pto/orch.h"
#include "pto/status.h"

const size_t tensor_dtype_sizes[PTO_DTYPE_COUNT] = {
    [PTO_F32] = 4, [PTO_F16] = 2, [PTO_BF16] = 2, [PTO_I32] = 4, [PTO_I16] = 2,
    [PTO_I8] = 1,  [PTO_U8] = 1,  [PTO_I64] = 8,  [PTO_F64] = 8,
};

static const char *const dtype_names[PTO_DTYPE_COUNT] = {
    [PTO_F32] = "f32", [PTO_F16] = "f16", [PTO_BF16] = "bf16", [PTO_I32] = "i32", [PTO_I16] = "i16",
    [PTO_I8] = "i8",   [PTO_U8] = "u8",   [PTO_I64] = "i64",   [PTO_F64] = "f64",
};

static bool dtype_ok(int32_t dt) { return dt >= 0 && dt < PTO_DTYPE_COUNT; }

size_t pto_dtype_size(pto_dtype dt) { return tensor_es((int32_t)dt); }

const char *pto_dtype_name(pto_dtype dt) { return dtype_ok((int32_t)dt) ? dtype_names[dt] : "?"; }

static const char *const access_names[] = {
    [PTO_INPUT] = "INPUT", [PTO_OUTPUT] = "OUTPUT", [PTO_OUTPUT_EXISTING] = "OUTPUT_EXISTING",
    [PTO_INOUT] = "INOUT", [PTO_NO_DEP] = "NO_DEP", [PTO_COMMUTE] = "COMMUTE",
    [PTO_REDUX] = "REDUX",
};
_Static_assert(sizeof access_names / sizeof *access_names == PTO_REDUX + 1,
               "a name for every access mode of pto/orch.h");

const char *tensor_access_name(int access) {
  return access >= 0 && access <= PTO_REDUX ? access_names[access] : "?";
}

/* ---- checks ---- */

int tensor_check_shape(int32_t dtype, int ndims, const int64_t *shape, int64_t *bytes) {
  if (!dtype_ok(dtype) || ndims < 1 || ndims > PTO_MAX_DIMS || !shape) return PTO_EINVAL;
  int64_t n = (int64_t)tensor_dtype_sizes[dtype];
  for (int d = 0; d < ndims; d++) {
    if (shape[d] < 1 || __builtin_mul_overflow(n, shape[d], &n)) return PTO_EINVAL;
  }
  if (bytes) *bytes = n;
  return PTO_OK;
}

bool tensor_span(const pto_tensor *t, int64_t *first, int64_t *end) {
  int64_t last;
  bool packed_fits;
  if (!t || t->ndims < 1 || t->ndims > PTO_MAX_DIMS || t->offset < 0 ||
      !tensor_dims_reach(t, 1, &last, &packed_fits))
    return false;
  *first = t->offset;
  *end = last + 1;
  return true;
}

/* The first broken rule, as a sentence in why[n] (when why is not NULL);
 * NULL when the view is valid. One implementation for tensor_check() and
 * for the runtime's error details. */
const char *tensor_problem(const pto_tensor *t, bool allow_null_buf, char *why, size_t n) {
#define PROBLEM(...) return (why && n ? (snprintf(why, n, __VA_ARGS__), why) : "invalid view")
  if (!t) PROBLEM("the tensor is NULL");
  if (!t->buf && !allow_null_buf) PROBLEM("buf is NULL");
  if (!dtype_ok(t->dtype)) PROBLEM("dtype %d is not a pto_dtype", t->dtype);
  if (t->ndims < 1 || t->ndims > PTO_MAX_DIMS)
    PROBLEM("ndims %d is outside 1..%d", t->ndims, PTO_MAX_DIMS);
  for (int d = 0; d < t->ndims; d++) {
    if (t->shape[d] < 1) PROBLEM("shape[%d] is %lld (< 1)", d, (long long)t->shape[d]);
    if (t->stride[d] < 1) PROBLEM("stride[%d] is %lld (must be > 0)", d, (long long)t->stride[d]);
  }
  if (t->offset < 0) PROBLEM("offset %lld is negative", (long long)t->offset);
  /* the packed size must be representable too: copy_out writes numel elements */
  int64_t first, end, end_bytes;
  if (tensor_check_shape(t->dtype, t->ndims, t->shape, NULL) != PTO_OK ||
      !tensor_span(t, &first, &end) ||
      __builtin_mul_overflow(end, (int64_t)tensor_dtype_sizes[t->dtype], &end_bytes))
    PROBLEM("its size or extent overflows 64 bits");
  if ((uint64_t)end_bytes > (uint64_t)t->buf_bytes)
    PROBLEM("it reaches byte %lld but the buffer has %zu bytes", (long long)end_bytes,
            t->buf_bytes);
  return NULL;
#undef PROBLEM
}

const char *tensor_problem_or_empty(const pto_tensor *t, bool *empty, char *why, size_t n) {
  *empty = false;
  if (t && t->ndims >= 1 && t->ndims <= PTO_MAX_DIMS) {
    bool zero = false, negative = false;
    for (int d = 0; d < t->ndims; d++) {
      zero |= t->shape[d] == 0;
      negative |= t->shape[d] < 0;
    }
    if (zero && !negative) {
      /* it touches no byte, so no extent or bound applies: check the other
       * rules on one element at offset 0 (a negative offset stays wrong) */
      pto_tensor one = *t;
      for (int d = 0; d < t->ndims; d++)
        one.shape[d] = 1;
      if (one.offset > 0) one.offset = 0;
      one.buf_bytes = SIZE_MAX;
      const char *bad = tensor_problem(&one, false, why, n);
      *empty = !bad;
      return bad;
    }
  }
  return tensor_problem(t, false, why, n);
}

int64_t tensor_dense_numel(const pto_tensor *t) {
  if (!t || !t->buf || !dtype_ok(t->dtype) || t->ndims < 1 || t->ndims > PTO_MAX_DIMS ||
      t->offset < 0)
    return -1;
  /* packed: the strides are the products of the later extents (free where
   * the extent is 1), so the view's span is [offset, offset + numel) and
   * numel * size <= end * size bounds the packed size too */
  int64_t n = 1, end, end_bytes;
  for (int d = t->ndims - 1; d >= 0; d--) {
    if (t->shape[d] < 1 || t->stride[d] < 1 || (t->shape[d] != 1 && t->stride[d] != n) ||
        __builtin_mul_overflow(n, t->shape[d], &n))
      return -1;
  }
  if (__builtin_add_overflow(t->offset, n, &end) ||
      __builtin_mul_overflow(end, (int64_t)tensor_dtype_sizes[t->dtype], &end_bytes) ||
      (uint64_t)end_bytes > (uint64_t)t->buf_bytes)
    return -1;
  return n;
}

bool tensor_byte_span(const pto_tensor *t, uint64_t *lo, uint64_t *hi) {
  int64_t first, end, es;
  if (!t || !dtype_ok(t->dtype) || !tensor_span(t, &first, &end)) return false;
  es = (int64_t)tensor_dtype_sizes[t->dtype];
  if (__builtin_mul_overflow(first, es, &first) || __builtin_mul_overflow(end, es, &end))
    return false;
  *lo = (uint64_t)first;
  *hi = (uint64_t)end;
  return true;
}

/* tensor_problem(t, allow_null_buf) == NULL in one pass over the dims, no
 * message: the check every view constructor makes of its source and its
 * result, on the orchestration's hot path (a slice per task argument).
 * unit.test_tensor (test_check_matches_problem) holds it to
 * tensor_problem on random views. */
int tensor_check(const pto_tensor *t, bool allow_null_buf) {
  if (!t || (!t->buf && !allow_null_buf) || !dtype_ok(t->dtype) || t->ndims < 1 ||
      t->ndims > PTO_MAX_DIMS || t->offset < 0)
    return PTO_EINVAL;
  int64_t es = (int64_t)tensor_dtype_sizes[t->dtype], last, end_bytes;
  bool packed_fits;
  if (!tensor_dims_reach(t, es, &last, &packed_fits) || !packed_fits ||
      __builtin_mul_overflow(last + 1, es, &end_bytes) ||
      (uint64_t)end_bytes > (uint64_t)t->buf_bytes)
    return PTO_EINVAL;
  return PTO_OK;
}

int pto_tensor_validate(const pto_tensor *t) { return tensor_check(t, false); }

/* Derived views accept an unbacked descriptor as source: its buf_bytes is
 * already the size the runtime will allocate, so bounds still hold. */
static int check_src(const pto_tensor *src) { return tensor_check(src, true); }

/* ---- construction ---- */

void tensor_set_packed_strides(pto_tensor *t) {
  int64_t s = 1;
  for (int d = t->ndims - 1; d >= 0; d--) {
    t->stride[d] = s;
    s *= t->shape[d]; /* no overflow: tensor_check_shape bounded the product */
  }
}

/* The view the caller asked for, as far as its arguments can be read (a
 * NULL shape or stride, or ndims out of range, leaves those fields 0),
 * valid or not: a failed init still describes it, so that
 * pto_tensor_problem and every call that checks it name what is wrong
 * instead of reading a descriptor the caller never filled. */
static pto_tensor asked(void *buf, size_t buf_bytes, pto_dtype dt, int ndims, const int64_t *shape,
                        const int64_t *stride, int64_t offset) {
  pto_tensor v;
  memset(&v, 0, sizeof v);
  v.buf = buf;
  v.buf_bytes = buf_bytes;
  v.offset = offset;
  v.dtype = (int32_t)dt;
  v.ndims = ndims;
  if (ndims >= 1 && ndims <= PTO_MAX_DIMS) {
    if (shape) memcpy(v.shape, shape, (size_t)ndims * sizeof shape[0]);
    if (stride) memcpy(v.stride, stride, (size_t)ndims * sizeof stride[0]);
  }
  return v;
}

int pto_tensor_init(pto_tensor *t, void *buf, size_t buf_bytes, pto_dtype dt, int ndims,
                    const int64_t *shape) {
  if (!t) return PTO_EINVAL;
  int64_t bytes;
  if (tensor_check_shape((int32_t)dt, ndims, shape, &bytes) != PTO_OK) {
    *t = asked(buf, buf_bytes, dt, ndims, shape, NULL, 0);
    return PTO_EINVAL;
  }
  /* asked()'s view with its packed strides, its fields written directly
   * (the common constructor: no clearing of the whole descriptor first) */
  t->buf = buf;
  t->buf_bytes = buf_bytes;
  t->offset = 0;
  t->dtype = (int32_t)dt;
  t->ndims = ndims;
  t->alloc_tag = 0;
  for (int d = 0; d < PTO_MAX_DIMS; d++) {
    t->shape[d] = d < ndims ? shape[d] : 0;
    t->stride[d] = 0;
  }
  tensor_set_packed_strides(t);
  /* what tensor_check would find left of a packed view at offset 0 whose
   * shape passed: its strides are >= 1 and its span is [0, numel), so its
   * byte extent is `bytes`, which did not overflow (unit.test_tensor,
   * test_init_matches_validate, holds the two to each other) */
  return buf && (uint64_t)bytes <= (uint64_t)buf_bytes ? PTO_OK : PTO_EINVAL;
}

int pto_tensor_init_strided(pto_tensor *t, void *buf, size_t buf_bytes, pto_dtype dt, int ndims,
                            const int64_t *shape, const int64_t *stride, int64_t offset) {
  if (!t) return PTO_EINVAL;
  *t = asked(buf, buf_bytes, dt, ndims, shape, stride, offset);
  if (!shape || !stride) return PTO_EINVAL;
  return tensor_check(t, false);
}

const char *pto_tensor_problem(const pto_tensor *t, char *why, size_t why_len) {
  return tensor_problem(t, false, why, why_len);
}

int pto_tensor_desc(pto_tensor *t, pto_dtype dt, int ndims, const int64_t *shape) {
  int64_t bytes;
  if (!t || tensor_check_shape((int32_t)dt, ndims, shape, &bytes) != PTO_OK) return PTO_EINVAL;
  if ((uint64_t)bytes > (uint64_t)SIZE_MAX) return PTO_EINVAL;
  pto_tensor v;
  memset(&v, 0, sizeof v);
  v.buf_bytes = (size_t)bytes; /* what the runtime must allocate */
  v.dtype = (int32_t)dt;
  v.ndims = ndims;
  memcpy(v.shape, shape, (size_t)ndims * sizeof shape[0]);
  tensor_set_packed_strides(&v);
  *t = v;
  return PTO_OK;
}

/* ---- derived views ---- */

int pto_tensor_slice(const pto_tensor *src, const int64_t *start, const int64_t *shape,
                     pto_tensor *out) {
  if (!out || !start || !shape || check_src(src) != PTO_OK) return PTO_EINVAL;
  int64_t offset = src->offset, sh[PTO_MAX_DIMS]; /* shape may lie in *out */
  for (int d = 0; d < src->ndims; d++) {
    int64_t end, step;
    sh[d] = shape[d];
    if (start[d] < 0 || shape[d] < 1) return PTO_EINVAL;
    if (__builtin_add_overflow(start[d], shape[d], &end) || end > src->shape[d]) return PTO_EINVAL;
    if (__builtin_mul_overflow(start[d], src->stride[d], &step) ||
        __builtin_add_overflow(offset, step, &offset))
      return PTO_EINVAL;
  }
  /* valid by construction, no second check: src is, and each dim's
   * [start, start + shape) lies in src's, so the slice's offset and last
   * element lie in [src's offset, src's last] (inside its buffer, no
   * overflow) and its packed size is at most src's (unit.test_tensor,
   * test_slice_random, checks every slice it makes). Written only now,
   * src copied once (out may be src): a refused slice leaves out as it
   * was. */
  if (out != src) *out = *src;
  out->offset = offset;
  for (int d = 0; d < out->ndims; d++)
    out->shape[d] = sh[d];
  return PTO_OK;
}

int pto_tensor_view(const pto_tensor *src, int ndims, const int64_t *shape, const int64_t *stride,
                    int64_t offset, pto_tensor *out) {
  if (!out || !shape || !stride || check_src(src) != PTO_OK) return PTO_EINVAL;
  if (ndims < 1 || ndims > PTO_MAX_DIMS || offset < 0) return PTO_EINVAL;
  pto_tensor v;
  memset(&v, 0, sizeof v);
  v.buf = src->buf;
  v.buf_bytes = src->buf_bytes;
  v.alloc_tag = src->alloc_tag;
  v.dtype = src->dtype;
  v.ndims = ndims;
  if (__builtin_add_overflow(src->offset, offset, &v.offset)) return PTO_EINVAL;
  memcpy(v.shape, shape, (size_t)ndims * sizeof shape[0]);
  memcpy(v.stride, stride, (size_t)ndims * sizeof stride[0]);
  if (check_src(&v) != PTO_OK) return PTO_EINVAL;
  *out = v;
  return PTO_OK;
}

int pto_tensor_reshape(const pto_tensor *src, int ndims, const int64_t *shape, pto_tensor *out) {
  if (!out || check_src(src) != PTO_OK || !pto_tensor_is_contiguous(src)) return PTO_EINVAL;
  if (tensor_check_shape(src->dtype, ndims, shape, NULL) != PTO_OK) return PTO_EINVAL;
  int64_t n = 1;
  for (int d = 0; d < ndims; d++)
    n *= shape[d]; /* bounded by tensor_check_shape */
  if (n != pto_tensor_numel(src)) return PTO_EINVAL;
  pto_tensor v;
  memset(&v, 0, sizeof v);
  v.buf = src->buf;
  v.buf_bytes = src->buf_bytes;
  v.alloc_tag = src->alloc_tag;
  v.offset = src->offset;
  v.dtype = src->dtype;
  v.ndims = ndims;
  memcpy(v.shape, shape, (size_t)ndims * sizeof shape[0]);
  tensor_set_packed_strides(&v);
  if (check_src(&v) != PTO_OK) return PTO_EINVAL;
  *out = v;
  return PTO_OK;
}

int pto_tensor_transpose(const pto_tensor *src, int d0, int d1, pto_tensor *out) {
  if (!out || check_src(src) != PTO_OK) return PTO_EINVAL;
  if (d0 < 0 || d0 >= src->ndims || d1 < 0 || d1 >= src->ndims) return PTO_EINVAL;
  pto_tensor v = *src;
  v.shape[d0] = src->shape[d1];
  v.shape[d1] = src->shape[d0];
  v.stride[d0] = src->stride[d1];
  v.stride[d1] = src->stride[d0];
  *out = v; /* same element set as src, so still valid */
  return PTO_OK;
}

/* ---- queries and addressing ---- */

int64_t pto_tensor_numel(const pto_tensor *t) {
  if (!t || t->ndims < 1 || t->ndims > PTO_MAX_DIMS) return 0;
  int64_t n = 1;
  for (int d = 0; d < t->ndims; d++) {
    if (t->shape[d] < 1 || __builtin_mul_overflow(n, t->shape[d], &n)) return 0;
  }
  return n;
}

/* Row-major packed; a dim of extent 1 never moves, so its stride is free. */
int pto_tensor_is_contiguous(const pto_tensor *t) {
  if (!t || t->ndims < 1 || t->ndims > PTO_MAX_DIMS) return 0;
  int64_t expect = 1;
  for (int d = t->ndims - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->stride[d] != expect) return 0;
    if (__builtin_mul_overflow(expect, t->shape[d], &expect)) return 0;
  }
  return 1;
}

static char *elem_addr(const pto_tensor *t, int64_t elem) {
  return (char *)t->buf + elem * (int64_t)pto_dtype_size((pto_dtype)t->dtype);
}

void *pto_tensor_at(const pto_tensor *t, const int64_t *idx) {
  int64_t e = t->offset;
  for (int d = 0; d < t->ndims; d++)
    e += idx[d] * t->stride[d];
  return elem_addr(t, e);
}

void *pto_tensor_at_linear(const pto_tensor *t, int64_t n) {
  int64_t e = t->offset;
  for (int d = t->ndims - 1; d >= 0; d--) {
    e += (n % t->shape[d]) * t->stride[d];
    n /= t->shape[d];
  }
  return elem_addr(t, e);
}

/* Copies between the view and `packed` (a host array in row-major order)
 * run by run, with the one view walker (common/tensor_walk.c): the view
 * against a packed view of the same shape. */
typedef struct copy_walk {
  char *view, *packed;
  size_t es;
  bool to_packed;
} copy_walk;

static int copy_run(void *arg, int64_t v, int64_t p, int64_t n) {
  const copy_walk *c = arg;
  char *a = c->view + (size_t)v * c->es, *b = c->packed + (size_t)p * c->es;
  if (c->to_packed)
    memcpy(b, a, (size_t)n * c->es);
  else
    memcpy(a, b, (size_t)n * c->es);
  return 0;
}

static void tensor_walk(const pto_tensor *t, char *packed, bool to_packed) {
  pto_tensor pk = *t;
  pk.offset = 0;
  tensor_set_packed_strides(&pk);
  copy_walk c = {t->buf, packed, pto_dtype_size((pto_dtype)t->dtype), to_packed};
  tensor_lockstep(t, &pk, copy_run, &c);
}

void pto_tensor_copy_out(const pto_tensor *t, void *dst) {
  if (pto_tensor_is_contiguous(t)) {
    memcpy(dst, elem_addr(t, t->offset),
           (size_t)pto_tensor_numel(t) * pto_dtype_size((pto_dtype)t->dtype));
    return;
  }
  tensor_walk(t, dst, true);
}

void pto_tensor_copy_in(const pto_tensor *t, const void *src) {
  if (pto_tensor_is_contiguous(t)) {
    memcpy(elem_addr(t, t->offset), src,
           (size_t)pto_tensor_numel(t) * pto_dtype_size((pto_dtype)t->dtype));
    return;
  }
  tensor_walk(t, (char *)src, false);
}
