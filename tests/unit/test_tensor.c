/* test_tensor.c — tensor views: validation rules, derived views, element
 * addressing and packed copies through strided views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/tensor_check.h"
#include "pto/orch.h"
#include "pto/status.h"
#include "pto/tensor.h"

static float fbuf[256];

static void fill_iota(void) {
  for (int i = 0; i < 256; i++)
    fbuf[i] = (float)i;
}

/* A 1-D or 2-D view built field by field, for corrupting one field at a time. */
static pto_tensor good2d(void) {
  pto_tensor t;
  int64_t shape[2] = {4, 6};
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape), PTO_OK);
  return t;
}

static void test_dtype(void **state) {
  (void)state;
  assert_int_equal(pto_dtype_size(PTO_F32), 4);
  assert_int_equal(pto_dtype_size(PTO_F16), 2);
  assert_int_equal(pto_dtype_size(PTO_BF16), 2);
  assert_int_equal(pto_dtype_size(PTO_I32), 4);
  assert_int_equal(pto_dtype_size(PTO_I16), 2);
  assert_int_equal(pto_dtype_size(PTO_I8), 1);
  assert_int_equal(pto_dtype_size(PTO_U8), 1);
  assert_int_equal(pto_dtype_size(PTO_I64), 8);
  assert_int_equal(pto_dtype_size(PTO_F64), 8);
  assert_int_equal(pto_dtype_size(PTO_DTYPE_COUNT), 0);
  assert_int_equal(pto_dtype_size((pto_dtype)-1), 0);
  assert_string_equal(pto_dtype_name(PTO_F32), "f32");
  assert_string_equal(pto_dtype_name(PTO_BF16), "bf16");
  assert_string_equal(pto_dtype_name(PTO_DTYPE_COUNT), "?");
}

static void test_init_contiguous(void **state) {
  (void)state;
  pto_tensor t = good2d();
  assert_ptr_equal(t.buf, fbuf);
  assert_int_equal(t.offset, 0);
  assert_int_equal(t.ndims, 2);
  assert_int_equal(t.stride[0], 6);
  assert_int_equal(t.stride[1], 1);
  assert_int_equal(pto_tensor_numel(&t), 24);
  assert_true(pto_tensor_is_contiguous(&t));
  assert_int_equal(pto_tensor_validate(&t), PTO_OK);
  /* exact fit is fine, one byte short is not */
  int64_t shape[1] = {64};
  assert_int_equal(pto_tensor_init(&t, fbuf, 64 * 4, PTO_F32, 1, shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&t, fbuf, 64 * 4 - 1, PTO_F32, 1, shape), PTO_EINVAL);
  /* 5 dims allowed */
  int64_t s5[5] = {2, 2, 2, 2, 2};
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 5, s5), PTO_OK);
  assert_int_equal(t.stride[0], 16);
}

static void test_init_errors(void **state) {
  (void)state;
  pto_tensor t;
  int64_t shape[2] = {4, 6};
  int64_t stride[2] = {6, 1};
  assert_int_equal(pto_tensor_init(NULL, fbuf, sizeof fbuf, PTO_F32, 2, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, NULL, sizeof fbuf, PTO_F32, 2, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, (pto_dtype)-1, 2, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_DTYPE_COUNT, 2, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 0, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 6, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 2, NULL), PTO_EINVAL);
  int64_t zero[2] = {4, 0}, neg[2] = {-1, 6};
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 2, zero), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 2, neg), PTO_EINVAL);

  int64_t s0[2] = {6, 0}, sneg[2] = {-6, 1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, s0, 0),
                   PTO_EINVAL);
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, sneg, 18),
                   PTO_EINVAL);
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, stride, -1),
                   PTO_EINVAL);
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, NULL, 0),
                   PTO_EINVAL);
  /* last element exactly at the end of buf, then one past it */
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, stride, 232),
                   PTO_OK);
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, stride, 233),
                   PTO_EINVAL);
  int64_t big_stride[2] = {100, 1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, shape, big_stride, 0),
                   PTO_EINVAL);

  /* overflow: shape * stride, offset + span, bytes, numel */
  int64_t huge[2] = {INT64_MAX / 2, 4};
  int64_t hstride[2] = {4, 1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, SIZE_MAX, PTO_F32, 2, huge, hstride, 0),
                   PTO_EINVAL);
  int64_t one[1] = {1}, s1[1] = {1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, SIZE_MAX, PTO_F64, 1, one, s1, INT64_MAX / 4),
                   PTO_EINVAL);
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, SIZE_MAX, PTO_U8, 1, one, s1, INT64_MAX),
                   PTO_EINVAL);
  int64_t sq[2] = {INT64_C(1) << 32, INT64_C(1) << 32}, ones[2] = {1, 1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, SIZE_MAX, PTO_U8, 2, sq, ones, 0), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, fbuf, SIZE_MAX, PTO_U8, 2, sq), PTO_EINVAL);
}

static void test_validate_each_rule(void **state) {
  (void)state;
  pto_tensor t;
  assert_int_equal(pto_tensor_validate(NULL), PTO_EINVAL);
  t = good2d();
  t.dtype = -1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.dtype = PTO_DTYPE_COUNT;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.ndims = 0;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.ndims = PTO_MAX_DIMS + 1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.shape[1] = 0;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.shape[0] = -3;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.stride[0] = 0;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.stride[1] = -1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.offset = -1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.buf = NULL;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.buf_bytes = 24 * 4 - 1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  t = good2d();
  t.buf_bytes = 24 * 4;
  assert_int_equal(pto_tensor_validate(&t), PTO_OK);
  t = good2d();
  t.dtype = PTO_F64; /* same elements, twice the bytes */
  assert_int_equal(pto_tensor_validate(&t), PTO_OK);
  t.buf_bytes = 24 * 8 - 1;
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
}

static void test_desc(void **state) {
  (void)state;
  pto_tensor t;
  int64_t shape[3] = {2, 3, 5};
  assert_int_equal(pto_tensor_desc(&t, PTO_F16, 3, shape), PTO_OK);
  assert_null(t.buf);
  assert_int_equal(t.buf_bytes, 2 * 3 * 5 * 2);
  assert_int_equal(t.offset, 0);
  assert_int_equal(t.stride[0], 15);
  assert_int_equal(t.stride[2], 1);
  assert_true(pto_tensor_is_contiguous(&t));
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL); /* no buffer yet */
  assert_int_equal(tensor_check(&t, true), PTO_OK);
  t.shape[1] = 0;
  assert_int_equal(tensor_check(&t, true), PTO_EINVAL);
  int64_t bad[3] = {2, 0, 5};
  assert_int_equal(pto_tensor_desc(&t, PTO_F16, 3, bad), PTO_EINVAL);
  assert_int_equal(pto_tensor_desc(&t, PTO_DTYPE_COUNT, 3, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_desc(&t, PTO_F16, 0, shape), PTO_EINVAL);
  assert_int_equal(pto_tensor_desc(NULL, PTO_F16, 3, shape), PTO_EINVAL);
  /* the backed descriptor validates */
  assert_int_equal(pto_tensor_desc(&t, PTO_F32, 3, shape), PTO_OK);
  t.buf = fbuf;
  assert_int_equal(pto_tensor_validate(&t), PTO_OK);
  /* views of an unbacked descriptor are allowed and stay unbacked */
  pto_tensor s;
  int64_t st[3] = {1, 0, 0}, sh[3] = {1, 3, 5};
  assert_int_equal(pto_tensor_desc(&t, PTO_F32, 3, shape), PTO_OK);
  assert_int_equal(pto_tensor_slice(&t, st, sh, &s), PTO_OK);
  assert_null(s.buf);
  assert_int_equal(s.offset, 15);
}

static void test_slice(void **state) {
  (void)state;
  pto_tensor t = good2d(), s;
  int64_t start[2] = {1, 2}, shape[2] = {2, 3};
  assert_int_equal(pto_tensor_slice(&t, start, shape, &s), PTO_OK);
  assert_int_equal(s.offset, 1 * 6 + 2);
  assert_int_equal(s.shape[0], 2);
  assert_int_equal(s.shape[1], 3);
  assert_int_equal(s.stride[0], 6);
  assert_int_equal(s.stride[1], 1);
  assert_false(pto_tensor_is_contiguous(&s));
  /* slice of a slice accumulates offsets; out may alias src */
  int64_t st2[2] = {1, 1}, sh2[2] = {1, 2};
  pto_tensor s2 = s;
  assert_int_equal(pto_tensor_slice(&s2, st2, sh2, &s2), PTO_OK);
  assert_int_equal(s2.offset, 8 + 6 + 1);
  assert_true(pto_tensor_is_contiguous(&s2)); /* a single row piece */

  pto_tensor keep = s;
  int64_t oob[2] = {3, 2}, neg[2] = {-1, 0}, zero[2] = {0, 3};
  assert_int_equal(pto_tensor_slice(&t, oob, shape, &s), PTO_EINVAL); /* 3 + 2 > 4 */
  assert_int_equal(pto_tensor_slice(&t, neg, shape, &s), PTO_EINVAL);
  assert_int_equal(pto_tensor_slice(&t, start, zero, &s), PTO_EINVAL);
  assert_int_equal(pto_tensor_slice(NULL, start, shape, &s), PTO_EINVAL);
  assert_int_equal(pto_tensor_slice(&t, NULL, shape, &s), PTO_EINVAL);
  assert_int_equal(pto_tensor_slice(&t, start, shape, NULL), PTO_EINVAL);
  assert_memory_equal(&s, &keep, sizeof s); /* failures leave out untouched */
  pto_tensor bad = t;
  bad.stride[1] = 0;
  assert_int_equal(pto_tensor_slice(&bad, start, shape, &s), PTO_EINVAL);
}

static void test_view(void **state) {
  (void)state;
  pto_tensor t = good2d(), v;
  int64_t shape[2] = {3, 2}, stride[2] = {2, 12};
  assert_int_equal(pto_tensor_view(&t, 2, shape, stride, 5, &v), PTO_OK);
  assert_int_equal(v.offset, 5);
  assert_int_equal(v.dtype, PTO_F32);
  assert_int_equal(v.stride[1], 12);
  /* relative to src's [0..0] */
  pto_tensor s;
  int64_t st[2] = {2, 0}, sh[2] = {2, 6};
  assert_int_equal(pto_tensor_slice(&t, st, sh, &s), PTO_OK);
  int64_t vs[1] = {4}, vst[1] = {3};
  assert_int_equal(pto_tensor_view(&s, 1, vs, vst, 1, &v), PTO_OK);
  assert_int_equal(v.offset, 13);
  assert_int_equal(v.ndims, 1);
  assert_int_equal(v.shape[1], 0); /* unused dims are zeroed */
  /* must stay inside the buffer (256 floats) */
  int64_t big[1] = {100};
  assert_int_equal(pto_tensor_view(&s, 1, big, vst, 0, &v), PTO_EINVAL);
  assert_int_equal(pto_tensor_view(&s, 1, vs, vst, -1, &v), PTO_EINVAL);
  assert_int_equal(pto_tensor_view(&s, 0, vs, vst, 0, &v), PTO_EINVAL);
  assert_int_equal(pto_tensor_view(&s, 6, vs, vst, 0, &v), PTO_EINVAL);
  int64_t zs[1] = {0};
  assert_int_equal(pto_tensor_view(&s, 1, vs, zs, 0, &v), PTO_EINVAL);
  assert_int_equal(pto_tensor_view(&s, 1, zs, vst, 0, &v), PTO_EINVAL);
  int64_t whole[1] = {256 - 12}, unit[1] = {1};
  assert_int_equal(pto_tensor_view(&s, 1, whole, unit, 0, &v), PTO_OK);
  assert_int_equal(pto_tensor_view(&s, 1, whole, unit, 1, &v), PTO_EINVAL);
}

static void test_reshape(void **state) {
  (void)state;
  pto_tensor t = good2d(), r;
  int64_t shape[3] = {2, 3, 4};
  assert_int_equal(pto_tensor_reshape(&t, 3, shape, &r), PTO_OK);
  assert_int_equal(r.stride[0], 12);
  assert_int_equal(r.stride[1], 4);
  assert_int_equal(r.stride[2], 1);
  int64_t wrong[2] = {5, 5};
  assert_int_equal(pto_tensor_reshape(&t, 2, wrong, &r), PTO_EINVAL);
  int64_t zero[2] = {0, 24};
  assert_int_equal(pto_tensor_reshape(&t, 2, zero, &r), PTO_EINVAL);
  /* a row block is contiguous: reshape keeps its offset */
  pto_tensor s;
  int64_t st[2] = {2, 0}, sh[2] = {2, 6}, flat[1] = {12};
  assert_int_equal(pto_tensor_slice(&t, st, sh, &s), PTO_OK);
  assert_int_equal(pto_tensor_reshape(&s, 1, flat, &r), PTO_OK);
  assert_int_equal(r.offset, 12);
  /* a column block is not */
  int64_t cst[2] = {0, 1}, csh[2] = {4, 2}, f8[1] = {8};
  assert_int_equal(pto_tensor_slice(&t, cst, csh, &s), PTO_OK);
  assert_int_equal(pto_tensor_reshape(&s, 1, f8, &r), PTO_EINVAL);
  /* nor is a transpose */
  pto_tensor tr;
  int64_t f24[1] = {24};
  assert_int_equal(pto_tensor_transpose(&t, 0, 1, &tr), PTO_OK);
  assert_int_equal(pto_tensor_reshape(&tr, 1, f24, &r), PTO_EINVAL);
}

static void test_transpose(void **state) {
  (void)state;
  pto_tensor t, r;
  int64_t shape[3] = {2, 3, 4};
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 3, shape), PTO_OK);
  assert_int_equal(pto_tensor_transpose(&t, 0, 2, &r), PTO_OK);
  assert_int_equal(r.shape[0], 4);
  assert_int_equal(r.shape[2], 2);
  assert_int_equal(r.stride[0], 1);
  assert_int_equal(r.stride[2], 12);
  assert_int_equal(pto_tensor_validate(&r), PTO_OK);
  assert_false(pto_tensor_is_contiguous(&r));
  assert_int_equal(pto_tensor_transpose(&t, 1, 1, &r), PTO_OK); /* no-op swap */
  assert_memory_equal(&r, &t, sizeof r);
  assert_int_equal(pto_tensor_transpose(&t, 0, 3, &r), PTO_EINVAL);
  assert_int_equal(pto_tensor_transpose(&t, -1, 0, &r), PTO_EINVAL);
  assert_int_equal(pto_tensor_transpose(NULL, 0, 1, &r), PTO_EINVAL);
}

static void test_contiguous_unit_dims(void **state) {
  (void)state;
  pto_tensor t;
  /* [1, 6] with any outer stride is contiguous; [6, 1] too */
  int64_t sh[2] = {1, 6}, st[2] = {99, 1};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, sh, st, 0), PTO_OK);
  assert_true(pto_tensor_is_contiguous(&t));
  int64_t sh2[2] = {6, 1}, st2[2] = {1, 7};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, sh2, st2, 0), PTO_OK);
  assert_true(pto_tensor_is_contiguous(&t));
  int64_t st3[2] = {2, 7};
  assert_int_equal(pto_tensor_init_strided(&t, fbuf, sizeof fbuf, PTO_F32, 2, sh2, st3, 0), PTO_OK);
  assert_false(pto_tensor_is_contiguous(&t));
}

static void test_at(void **state) {
  (void)state;
  fill_iota();
  pto_tensor t, s, tr;
  int64_t shape[3] = {3, 4, 5};
  assert_int_equal(pto_tensor_init(&t, fbuf, sizeof fbuf, PTO_F32, 3, shape), PTO_OK);
  int64_t idx[3] = {2, 1, 3};
  assert_ptr_equal(pto_tensor_at(&t, idx), &fbuf[2 * 20 + 5 + 3]);
  int64_t st[3] = {1, 1, 2}, sh[3] = {2, 3, 3};
  assert_int_equal(pto_tensor_slice(&t, st, sh, &s), PTO_OK);
  assert_int_equal(pto_tensor_transpose(&s, 0, 2, &tr), PTO_OK); /* shape 3,3,2 */
  int64_t n = 0;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 3; j++)
      for (int64_t k = 0; k < 2; k++, n++) {
        int64_t ix[3] = {i, j, k};
        float *p = pto_tensor_at(&tr, ix);
        assert_ptr_equal(pto_tensor_at_linear(&tr, n), p);
        assert_true(*p == (float)(20 * (1 + k) + 5 * (1 + j) + 2 + i));
      }
  assert_ptr_equal(pto_tensor_f32(&s), &fbuf[20 + 5 + 2]);
}

/* copy_out of any view equals reading it through pto_tensor_at_linear, and
 * copy_in writes exactly the view's elements. */
static void check_copy(const pto_tensor *v) {
  int64_t n = pto_tensor_numel(v);
  float out[256], in[256];
  fill_iota();
  memset(out, 0xff, sizeof out);
  pto_tensor_copy_out(v, out);
  for (int64_t i = 0; i < n; i++)
    assert_true(out[i] == *(float *)pto_tensor_at_linear(v, i));
  assert_true(out[n] != out[n]); /* the 0xff fill (NaN) past the end is untouched */

  for (int64_t i = 0; i < n; i++)
    in[i] = -1.0f - (float)i;
  pto_tensor_copy_in(v, in);
  int64_t touched = 0;
  for (int i = 0; i < 256; i++) {
    if (fbuf[i] < 0)
      touched++;
    else
      assert_true(fbuf[i] == (float)i);
  }
  assert_int_equal(touched, n);
  for (int64_t i = 0; i < n; i++)
    assert_true(*(float *)pto_tensor_at_linear(v, i) == in[i]);
}

static void test_copy(void **state) {
  (void)state;
  pto_tensor t, v;
  int64_t shape[3] = {4, 6, 8};
  assert_int_equal(pto_tensor_init(&t, fbuf, 192 * 4, PTO_F32, 3, shape), PTO_OK);
  check_copy(&t); /* contiguous fast path */
  int64_t st[3] = {1, 2, 3}, sh[3] = {2, 3, 4};
  assert_int_equal(pto_tensor_slice(&t, st, sh, &v), PTO_OK);
  check_copy(&v); /* unit-stride rows */
  assert_int_equal(pto_tensor_transpose(&v, 1, 2, &v), PTO_OK);
  check_copy(&v); /* strided rows */
  int64_t rst[3] = {1, 0, 0}, rsh[3] = {2, 6, 8};
  assert_int_equal(pto_tensor_slice(&t, rst, rsh, &v), PTO_OK);
  check_copy(&v); /* contiguous with offset */
  int64_t vsh[2] = {5, 3}, vstr[2] = {7, 2};
  assert_int_equal(pto_tensor_view(&t, 2, vsh, vstr, 3, &v), PTO_OK);
  check_copy(&v);
  int64_t one[1] = {9}, ones[1] = {11};
  assert_int_equal(pto_tensor_view(&t, 1, one, ones, 1, &v), PTO_OK);
  check_copy(&v); /* 1-D strided */
  int64_t s5[5] = {2, 1, 3, 2, 2}, str5[5] = {60, 100, 17, 5, 2};
  assert_int_equal(pto_tensor_view(&t, 5, s5, str5, 0, &v), PTO_OK);
  check_copy(&v);
}

static void test_copy_bytes(void **state) {
  (void)state;
  /* non-f32 dtypes: u8 column block and an i64 transposed view */
  uint8_t b[64], out[64];
  for (int i = 0; i < 64; i++)
    b[i] = (uint8_t)i;
  pto_tensor t, v;
  int64_t shape[2] = {8, 8}, st[2] = {2, 3}, sh[2] = {4, 2};
  assert_int_equal(pto_tensor_init(&t, b, sizeof b, PTO_U8, 2, shape), PTO_OK);
  assert_int_equal(pto_tensor_slice(&t, st, sh, &v), PTO_OK);
  pto_tensor_copy_out(&v, out);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      assert_int_equal(out[i * 2 + j], (2 + i) * 8 + 3 + j);
  int64_t q[8], qo[8];
  for (int i = 0; i < 8; i++)
    q[i] = 1000 + i;
  int64_t qs[2] = {2, 4};
  assert_int_equal(pto_tensor_init(&t, q, sizeof q, PTO_I64, 2, qs), PTO_OK);
  assert_int_equal(pto_tensor_transpose(&t, 0, 1, &v), PTO_OK);
  pto_tensor_copy_out(&v, qo);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      assert_int_equal(qo[i * 2 + j], 1000 + j * 4 + i);
}

/* The next of a xorshift64 sequence (the randomized tests below). */
static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* A random view that breaks each rule of tensor_problem, near each bound
 * (mostly packed strides, so that valid packed views reach each bound
 * too), over the one-byte buffer b or NULL. */
static void random_view(uint64_t *x, pto_tensor *t, char *b) {
  static const int64_t vals[] = {-1, 0, 1, 2, 3, 4, 6, 12, INT64_MAX / 4, INT64_MAX};
  const int nv = (int)(sizeof vals / sizeof vals[0]);
  static const size_t bytes[] = {0, 7, 48, 96, 1000, SIZE_MAX};
  uint64_t r = xorshift(x);
  memset(t, 0, sizeof *t);
  t->buf = (r & 15) ? b : NULL;
  r >>= 4;
  t->buf_bytes = bytes[r % 6];
  r /= 6;
  t->dtype = (int32_t)(r % (PTO_DTYPE_COUNT + 1)) - (r & 64 ? 1 : 0);
  r >>= 7;
  t->ndims = (int32_t)(r % (PTO_MAX_DIMS + 2));
  r >>= 4;
  t->offset = (r & 3) ? (int64_t)(r >> 2) % 5 : vals[(r >> 2) % nv];
  r = xorshift(x);
  int64_t expect = 1;
  for (int d = PTO_MAX_DIMS - 1; d >= 0; d--) {
    t->shape[d] = (r & 1) ? (int64_t)((r >> 1) % 4) : vals[(r >> 1) % nv];
    r >>= 5;
    t->stride[d] = (r & 3) ? expect : vals[(r >> 2) % nv];
    r >>= 6;
    if (d < t->ndims && t->shape[d] > 0 && expect <= INT64_MAX / t->shape[d]) expect *= t->shape[d];
  }
}

/* tensor_check, the one-pass check of every view constructor, against
 * tensor_problem, the rule-by-rule one that names what is wrong. */
static void test_check_matches_problem(void **state) {
  (void)state;
  uint64_t x = 0x2545F4914F6CDD1Dull;
  char b[1];
  int valid = 0;
  for (int i = 0; i < 400000; i++) {
    pto_tensor t;
    random_view(&x, &t, b);
    bool allow_null = i & 1;
    const char *why = tensor_problem(&t, allow_null, NULL, 0);
    int rc = tensor_check(&t, allow_null);
    valid += !why;
    if (rc != (why ? PTO_EINVAL : PTO_OK))
      fail_msg("view %d (dtype %d, ndims %d, offset %lld, buf_bytes %zu, buf %s, allow_null "
               "%d): check %d, problem %s",
               i, t.dtype, t.ndims, (long long)t.offset, t.buf_bytes, t.buf ? "set" : "NULL",
               allow_null, rc, why ? why : "none");
  }
  assert_true(valid > 1000); /* valid views were reached */
  assert_int_equal(tensor_check(NULL, true), PTO_EINVAL);
}

/* pto_tensor_slice checks its source only: every slice of a valid view
 * (a descriptor with no buffer too) within its shape is itself valid and
 * addresses elements of the source's, and one past the shape is refused. */
static void test_slice_random(void **state) {
  (void)state;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  char b[1];
  int sliced = 0;
  for (int i = 0; i < 400000; i++) {
    pto_tensor t, s;
    random_view(&x, &t, b);
    if (tensor_check(&t, true) != PTO_OK) continue;
    uint64_t r = xorshift(&x);
    int64_t start[PTO_MAX_DIMS], shape[PTO_MAX_DIMS], idx[PTO_MAX_DIMS];
    for (int d = 0; d < t.ndims; d++, r >>= 12) {
      int64_t n = t.shape[d];
      start[d] = n > 1 ? (int64_t)(r % (uint64_t)n) : 0;
      shape[d] = 1 + (int64_t)((r >> 6) % (uint64_t)(n - start[d]));
      idx[d] = shape[d] - 1; /* the slice's last element */
    }
    int bad = (int)(r % 8) < t.ndims ? (int)(r % 8) : -1; /* a dim taken one too far */
    if (bad >= 0) shape[bad] = t.shape[bad] - start[bad] + 1;
    memset(&s, 0xA5, sizeof s);
    pto_tensor before = s;
    int rc = pto_tensor_slice(&t, start, shape, &s);
    if (bad >= 0) {
      assert_int_equal(rc, PTO_EINVAL);
      assert_memory_equal(&s, &before, sizeof s); /* a refused slice writes nothing */
      continue;
    }
    assert_int_equal(rc, PTO_OK);
    pto_tensor in_place = t; /* the same slice into its own source */
    assert_int_equal(pto_tensor_slice(&in_place, start, shape, &in_place), PTO_OK);
    assert_memory_equal(&in_place, &s, sizeof s);
    pto_tensor shaped; /* the shape read from the tensor it goes into */
    memset(&shaped, 0, sizeof shaped);
    memcpy(shaped.shape, shape, sizeof shape[0] * (size_t)t.ndims);
    assert_int_equal(pto_tensor_slice(&t, start, shaped.shape, &shaped), PTO_OK);
    assert_memory_equal(&shaped, &s, sizeof s);
    sliced++;
    if (tensor_check(&s, true) != PTO_OK)
      fail_msg("slice %d of a valid view (dtype %d, ndims %d) is invalid", i, t.dtype, t.ndims);
    int64_t first = s.offset, last = s.offset, src_first, src_end;
    for (int d = 0; d < s.ndims; d++)
      last += idx[d] * s.stride[d];
    assert_true(tensor_span(&t, &src_first, &src_end));
    assert_true(first >= src_first && last < src_end);
  }
  assert_true(sliced > 1000);
}

/* tensor_dense_numel, the one-pass answer of the collectives' hot path,
 * against the three answers it stands for (validate with a buffer,
 * contiguous, numel) on views that break each rule, near each bound. */
static void test_dense_numel_differential(void **state) {
  (void)state;
  uint64_t x = 88172645463325252ull;
  char b[1];
  int dense = 0;
  for (int i = 0; i < 200000; i++) {
    pto_tensor t;
    random_view(&x, &t, b);
    bool ok = pto_tensor_validate(&t) == PTO_OK && pto_tensor_is_contiguous(&t);
    int64_t want = ok ? pto_tensor_numel(&t) : -1;
    dense += ok;
    if (tensor_dense_numel(&t) != want)
      fail_msg("view %d (dtype %d, ndims %d, offset %lld, buf_bytes %zu): dense %lld, want %lld", i,
               t.dtype, t.ndims, (long long)t.offset, t.buf_bytes,
               (long long)tensor_dense_numel(&t), (long long)want);
  }
  assert_true(dense > 1000); /* the valid packed views were reached */
  assert_int_equal(tensor_dense_numel(NULL), -1);
}

/* pto_tensor_init decides from the shape's packed size alone (its
 * fast path, tensor.c); the full validation of the view it fills is the
 * oracle: both agree on every input, overflowing shapes and buffers one
 * byte short included. */
static void test_init_matches_validate(void **state) {
  (void)state;
  static const int64_t vals[] = {-1, 0, 1, 2, 3, 7, 1 << 20, INT64_MAX / 8, INT64_MAX};
  const int nv = (int)(sizeof vals / sizeof vals[0]);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  char b[1];
  int ok = 0;
  for (int i = 0; i < 200000; i++) {
    uint64_t r = xorshift(&x);
    int ndims = (int)(r % (PTO_MAX_DIMS + 2));
    r >>= 3;
    pto_dtype dt = (pto_dtype)((int)(r % (PTO_DTYPE_COUNT + 1)) - (r & 32 ? 1 : 0));
    r >>= 6;
    int64_t shape[PTO_MAX_DIMS + 1], packed = 1;
    for (int d = 0; d < PTO_MAX_DIMS + 1; d++, r >>= 5) {
      shape[d] = (r & 3) ? (int64_t)((r >> 2) % 5) + 1 : vals[(r >> 2) % nv];
      if (d < ndims && shape[d] > 0 && packed <= INT64_MAX / shape[d]) packed *= shape[d];
    }
    xorshift(&x);
    size_t es = dt >= 0 && dt < PTO_DTYPE_COUNT ? pto_dtype_size(dt) : 1;
    size_t want = packed <= (int64_t)(SIZE_MAX / es) ? (size_t)packed * es : SIZE_MAX;
    size_t bytes = (x & 3) == 0 ? want - (want > 0) : (x & 3) == 1 ? want : (size_t)(x >> 8);
    pto_tensor t;
    int rc = pto_tensor_init(&t, (x & 64) ? b : NULL, bytes, dt, ndims, shape);
    int full = ndims >= 1 && ndims <= PTO_MAX_DIMS ? pto_tensor_validate(&t) : PTO_EINVAL;
    ok += rc == PTO_OK;
    if (rc == PTO_OK) { /* the descriptor, whole: packed strides, unused dims 0 */
      int64_t st[PTO_MAX_DIMS], sz = 1;
      for (int d = ndims - 1; d >= 0; d--) {
        st[d] = sz;
        sz *= shape[d];
      }
      pto_tensor ref;
      assert_int_equal(pto_tensor_init_strided(&ref, t.buf, bytes, dt, ndims, shape, st, 0),
                       PTO_OK);
      if (memcmp(&ref, &t, sizeof t) != 0)
        fail_msg("input %d: init's descriptor differs from init_strided's", i);
    }
    if (rc != full)
      fail_msg("input %d (dtype %d, ndims %d, %zu bytes, buf %s): init %d, validation %d", i,
               (int)dt, ndims, bytes, t.buf ? "set" : "NULL", rc, full);
  }
  assert_true(ok > 1000); /* valid views were reached */
}

/* A failed init still describes the view asked for, and
 * pto_tensor_problem names what is wrong with it. Before, *t was left as
 * it was (often never filled), and a submit of it named junk ("dtype
 * 1408934241 is not a pto_dtype"). */
static void test_failed_init_names_its_problem(void **state) {
  (void)state;
  float a[16];
  char why[160];
  pto_tensor t;
  int64_t n = 32, zero = 0, one = 1, sh[6] = {1, 1, 1, 1, 1, 1};
  assert_int_equal(pto_tensor_init(&t, a, sizeof a, PTO_F32, 1, &n), PTO_EINVAL);
  assert_ptr_equal(pto_tensor_problem(&t, why, sizeof why), why);
  assert_string_equal(why, "it reaches byte 128 but the buffer has 64 bytes");
  assert_int_equal(pto_tensor_validate(&t), PTO_EINVAL);
  assert_int_equal(pto_tensor_init(&t, a, sizeof a, PTO_F32, 1, &zero), PTO_EINVAL);
  pto_tensor_problem(&t, why, sizeof why);
  assert_string_equal(why, "shape[0] is 0 (< 1)");
  assert_int_equal(pto_tensor_init(&t, a, sizeof a, PTO_F32, 6, sh), PTO_EINVAL);
  pto_tensor_problem(&t, why, sizeof why);
  assert_string_equal(why, "ndims 6 is outside 1..5");
  assert_int_equal(pto_tensor_init(&t, NULL, 64, PTO_F32, 1, &one), PTO_EINVAL);
  pto_tensor_problem(&t, why, sizeof why);
  assert_string_equal(why, "buf is NULL");
  assert_int_equal(pto_tensor_init_strided(&t, a, sizeof a, PTO_F32, 1, &n, NULL, 0), PTO_EINVAL);
  pto_tensor_problem(&t, why, sizeof why);
  assert_string_equal(why, "stride[0] is 0 (must be > 0)");
  assert_int_equal(pto_tensor_init(NULL, a, sizeof a, PTO_F32, 1, &one), PTO_EINVAL);
  /* valid: no problem */
  n = 16;
  assert_int_equal(pto_tensor_init(&t, a, sizeof a, PTO_F32, 1, &n), PTO_OK);
  assert_null(pto_tensor_problem(&t, why, sizeof why));
}

/* One table names every access mode for every message (checking mode
 * printed "?" for COMMUTE and REDUX). */
static void test_access_names(void **state) {
  (void)state;
  static const char *const want[] = {"INPUT",   "OUTPUT", "OUTPUT_EXISTING", "INOUT", "NO_DEP",
                                     "COMMUTE", "REDUX"};
  for (int a = PTO_INPUT; a <= PTO_REDUX; a++)
    assert_string_equal(tensor_access_name(a), want[a]);
  assert_string_equal(tensor_access_name(-1), "?");
  assert_string_equal(tensor_access_name(PTO_REDUX + 1), "?");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_init_names_its_problem),
      cmocka_unit_test(test_dtype),
      cmocka_unit_test(test_access_names),
      cmocka_unit_test(test_init_contiguous),
      cmocka_unit_test(test_init_errors),
      cmocka_unit_test(test_init_matches_validate),
      cmocka_unit_test(test_check_matches_problem),
      cmocka_unit_test(test_validate_each_rule),
      cmocka_unit_test(test_desc),
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_slice_random),
      cmocka_unit_test(test_view),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_contiguous_unit_dims),
      cmocka_unit_test(test_at),
      cmocka_unit_test(test_copy),
      cmocka_unit_test(test_copy_bytes),
      cmocka_unit_test(test_dense_numel_differential),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
