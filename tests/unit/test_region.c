/* test_region.c — region_overlap/region_covers: exact answers for the
 * block/tile cases the TensorMap relies on, views compared by the bytes of
 * memory they touch however they were built (interior base pointers, other
 * dtypes, overlapping buffers), and a randomized brute-force check that the
 * answers are never unsafe (overlap == false only for truly disjoint byte
 * sets, covers == true only for true subsets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/region.h"
#include "common/tensor_check.h"
#include "pto/status.h"
#include "pto/tensor.h"

#define BUF_BYTES 96
static uint64_t buf[BUF_BYTES / 8]; /* aligned for every dtype */
static float mat[64];               /* 8x8 f32 matrix */

static pto_tensor matrix8(void) {
  pto_tensor t;
  int64_t shape[2] = {8, 8};
  assert_int_equal(pto_tensor_init(&t, mat, sizeof mat, PTO_F32, 2, shape), PTO_OK);
  return t;
}

/* a and b normalise the same bytes the same way (for a known view: its
 * base, levels and density too) */
static void assert_same_view(const region_view *a, const region_view *b) {
  assert_int_equal(a->known, b->known);
  assert_int_equal(a->lo, b->lo);
  assert_int_equal(a->hi, b->hi);
  if (!a->known) return;
  assert_int_equal(a->base, b->base);
  assert_int_equal(a->n, b->n);
  assert_int_equal(a->dense, b->dense);
  assert_memory_equal(a->lv, b->lv, sizeof a->lv[0] * (size_t)a->n);
}

static pto_tensor slice2(const pto_tensor *t, int64_t r0, int64_t c0, int64_t nr, int64_t nc) {
  pto_tensor s;
  int64_t st[2] = {r0, c0}, sh[2] = {nr, nc};
  assert_int_equal(pto_tensor_slice(t, st, sh, &s), PTO_OK);
  return s;
}

static void test_bytes(void **state) {
  (void)state;
  pto_tensor m = matrix8(), s = slice2(&m, 2, 3, 2, 4);
  uint64_t lo, hi, at = (uint64_t)(uintptr_t)mat;
  region_span(&m, &lo, &hi);
  assert_int_equal(lo, at);
  assert_int_equal(hi, at + 256);
  region_span(&s, &lo, &hi);
  assert_int_equal(lo, at + (2 * 8 + 3) * 4);
  assert_int_equal(hi, at + (3 * 8 + 6) * 4 + 4);
  /* the same bytes from an interior pointer */
  pto_tensor in;
  int64_t sh[2] = {2, 4}, st[2] = {8, 1};
  assert_int_equal(pto_tensor_init_strided(&in, mat + 16, sizeof mat - 64, PTO_F32, 2, sh, st, 3),
                   PTO_OK);
  region_span(&in, &lo, &hi);
  assert_int_equal(lo, at + (2 * 8 + 3) * 4);
  assert_int_equal(hi, at + (3 * 8 + 6) * 4 + 4);
  /* a malformed view claims all of memory */
  in.stride[0] = 0;
  region_span(&in, &lo, &hi);
  assert_int_equal(lo, 0);
  assert_int_equal(hi, UINT64_MAX);
}

/* region_view_bytes builds its view directly: the same as normalising a
 * 1-D PTO_U8 tensor over the bytes, as its contract says (the TensorMap's
 * trims rely on it), field by field, for spans of 1 byte up. */
static void test_view_bytes_as_u8(void **state) {
  (void)state;
  static const uint64_t los[] = {8, 64, 4096, (uint64_t)INT64_MAX, UINT64_MAX / 2 + 77};
  static const int64_t lens[] = {1, 2, 3, 64, 1000, INT64_MAX / 2};
  for (size_t i = 0; i < sizeof los / sizeof los[0]; i++)
    for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) {
      uint64_t lo = los[i], hi = lo + (uint64_t)lens[j];
      if (hi < lo) continue; /* past the address space: no such bytes */
      pto_tensor t;
      int64_t n = lens[j];
      assert_int_equal(pto_tensor_init(&t, (void *)(uintptr_t)lo, (size_t)n, PTO_U8, 1, &n),
                       PTO_OK);
      region_view want, got;
      region_view_init(&t, &want);
      region_view_bytes(&got, lo, hi);
      assert_true(want.known);
      assert_same_view(&got, &want);
    }
}

static void test_row_col_tile_blocks_disjoint(void **state) {
  (void)state;
  pto_tensor m = matrix8();
  pto_tensor r0 = slice2(&m, 0, 0, 4, 8), r1 = slice2(&m, 4, 0, 4, 8);
  pto_tensor c0 = slice2(&m, 0, 0, 8, 4), c1 = slice2(&m, 0, 4, 8, 4);
  assert_false(region_overlap(&r0, &r1));
  assert_false(region_overlap(&c0, &c1));
  assert_false(region_overlap(&c1, &c0));
  assert_true(region_overlap(&r0, &c0));
  assert_true(region_overlap(&r1, &c1));
  /* single rows and single columns */
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) {
      pto_tensor ri = slice2(&m, i, 0, 1, 8), rj = slice2(&m, j, 0, 1, 8);
      pto_tensor ci = slice2(&m, 0, i, 8, 1), cj = slice2(&m, 0, j, 8, 1);
      assert_true(region_overlap(&ri, &rj) == (i == j));
      assert_true(region_overlap(&ci, &cj) == (i == j));
      assert_true(region_overlap(&ri, &cj)); /* share element [i][j] */
    }
  /* 4x4 grid of 2x2 tiles: pairwise disjoint, each inside its row/col block */
  pto_tensor tile[16];
  for (int k = 0; k < 16; k++)
    tile[k] = slice2(&m, (k / 4) * 2, (k % 4) * 2, 2, 2);
  for (int a = 0; a < 16; a++) {
    for (int b = 0; b < 16; b++) {
      assert_true(region_overlap(&tile[a], &tile[b]) == (a == b));
      assert_true(region_covers(&tile[a], &tile[b]) == (a == b));
    }
    assert_true(region_covers(&m, &tile[a]));
    assert_false(region_covers(&tile[a], &m));
    pto_tensor rows = (a / 4) < 2 ? r0 : r1, cols = (a % 4) < 2 ? c0 : c1;
    assert_true(region_covers(&rows, &tile[a]));
    assert_true(region_covers(&cols, &tile[a]));
  }
  /* transposed column blocks are still disjoint */
  pto_tensor t0, t1;
  assert_int_equal(pto_tensor_transpose(&c0, 0, 1, &t0), PTO_OK);
  assert_int_equal(pto_tensor_transpose(&c1, 0, 1, &t1), PTO_OK);
  assert_false(region_overlap(&t0, &t1));
  assert_false(region_overlap(&t0, &c1));
  assert_true(region_covers(&c0, &t0));
  assert_true(region_covers(&t0, &c0));
}

static void test_covers(void **state) {
  (void)state;
  pto_tensor m = matrix8();
  pto_tensor r0 = slice2(&m, 0, 0, 4, 8), c0 = slice2(&m, 0, 0, 8, 4);
  assert_true(region_covers(&m, &m));
  assert_true(region_covers(&m, &r0));
  assert_false(region_covers(&r0, &m));
  assert_false(region_covers(&c0, &r0));
  assert_false(region_covers(&r0, &c0));
  pto_tensor inner = slice2(&r0, 1, 1, 2, 3);
  assert_true(region_covers(&r0, &inner));
  assert_true(region_covers(&c0, &inner));
  pto_tensor edge = slice2(&m, 1, 3, 2, 2); /* crosses the column-block border */
  assert_false(region_covers(&c0, &edge));
  assert_true(region_overlap(&c0, &edge));
  /* contiguous outer over a strided inner of another dtype */
  pto_tensor bytes;
  int64_t bs[2] = {4, 3}, bst[2] = {16, 5};
  assert_int_equal(pto_tensor_init_strided(&bytes, mat, sizeof mat, PTO_U8, 2, bs, bst, 10),
                   PTO_OK);
  assert_true(region_covers(&r0, &bytes));
  assert_true(region_overlap(&r0, &bytes));
  assert_false(region_covers(&bytes, &r0));
}

static void test_interleaved_and_dtypes(void **state) {
  (void)state;
  /* even and odd columns */
  pto_tensor ev, od, m = matrix8();
  int64_t sh[2] = {8, 4}, st[2] = {8, 2};
  assert_int_equal(pto_tensor_view(&m, 2, sh, st, 0, &ev), PTO_OK);
  assert_int_equal(pto_tensor_view(&m, 2, sh, st, 1, &od), PTO_OK);
  assert_false(region_overlap(&ev, &od));
  assert_true(region_covers(&m, &ev));
  assert_false(region_covers(&ev, &m));
  /* the same bytes seen as u8: row 0 as 32 bytes vs row 1 as f32 */
  pto_tensor u8row, f32row = slice2(&m, 1, 0, 1, 8);
  int64_t n32[1] = {32};
  assert_int_equal(pto_tensor_init(&u8row, mat, 32, PTO_U8, 1, n32), PTO_OK);
  assert_false(region_overlap(&u8row, &f32row));
  pto_tensor r0 = slice2(&m, 0, 0, 1, 8);
  assert_true(region_overlap(&u8row, &r0));
  assert_true(region_covers(&u8row, &r0));
  assert_true(region_covers(&r0, &u8row));
  /* f64 column vs f32 column of other bytes: [:,0] as f64 covers f32 cols 0..1 */
  pto_tensor d0, fc0 = slice2(&m, 0, 0, 8, 1), fc2 = slice2(&m, 0, 2, 8, 1);
  int64_t dsh[1] = {8}, dst[1] = {4};
  assert_int_equal(pto_tensor_init_strided(&d0, mat, sizeof mat, PTO_F64, 1, dsh, dst, 0), PTO_OK);
  assert_true(region_covers(&d0, &fc0));
  assert_false(region_overlap(&d0, &fc2));
}

static void test_different_buffers(void **state) {
  (void)state;
  float other[64];
  pto_tensor m = matrix8(), o;
  int64_t shape[2] = {8, 8};
  assert_int_equal(pto_tensor_init(&o, other, sizeof other, PTO_F32, 2, shape), PTO_OK);
  assert_false(region_overlap(&m, &o));
  assert_false(region_covers(&m, &o));
}

/* The views of issue 8: a writer built on a + 8 and a reader of all of a
 * share bytes although their base pointers differ. */
static pto_tensor at_ptr(void *p, size_t bytes, pto_dtype dt, int nd, const int64_t *sh) {
  pto_tensor t;
  assert_int_equal(pto_tensor_init(&t, p, bytes, dt, nd, sh), PTO_OK);
  return t;
}

static void test_interior_pointers(void **state) {
  (void)state;
  pto_tensor m = matrix8();
  int64_t n8 = 8, n2 = 2, n4 = 4, sh24[2] = {2, 4};
  /* a + 8 (row 1) as a vector */
  pto_tensor row1 = at_ptr(mat + 8, 32, PTO_F32, 1, &n8);
  assert_true(region_overlap(&row1, &m));
  assert_true(region_overlap(&m, &row1));
  assert_true(region_covers(&m, &row1));
  assert_false(region_covers(&row1, &m));
  pto_tensor s1 = slice2(&m, 1, 0, 1, 8), s0 = slice2(&m, 0, 0, 1, 8);
  assert_true(region_covers(&row1, &s1) && region_covers(&s1, &row1));
  assert_false(region_overlap(&row1, &s0));
  /* exact tiles and columns from a row-start pointer: rows 2..3 */
  int64_t sh28[2] = {2, 8};
  pto_tensor rows23 = at_ptr(mat + 16, 64, PTO_F32, 2, sh28), r;
  int64_t st[2] = {8, 1};
  assert_int_equal(pto_tensor_init_strided(&r, mat + 16, sizeof mat - 64, PTO_F32, 2, sh24, st, 4),
                   PTO_OK); /* rows 2..3, columns 4..7 */
  pto_tensor left = slice2(&m, 2, 0, 2, 4), right = slice2(&m, 2, 4, 2, 4);
  pto_tensor c4 = slice2(&m, 0, 4, 8, 4);
  assert_false(region_overlap(&r, &left));
  assert_true(region_overlap(&r, &right));
  assert_true(region_covers(&right, &r) && region_covers(&r, &right));
  assert_true(region_covers(&c4, &r));
  assert_false(region_covers(&r, &c4));
  assert_true(region_covers(&rows23, &left)); /* dense: rows 2..3 whole */
  assert_true(region_covers(&rows23, &r));
  assert_false(region_overlap(&rows23, &s1));
  /* another dtype over an interior pointer: bytes 36..43 as two f32 */
  pto_tensor pair = at_ptr((char *)mat + 36, 8, PTO_F32, 1, &n2);
  pto_tensor as64 = at_ptr((char *)mat + 32, 32, PTO_F64, 1, &n4); /* row 1 as 4 f64 */
  assert_true(region_overlap(&pair, &row1));
  assert_true(region_covers(&as64, &pair));
  assert_true(region_covers(&row1, &as64) && region_covers(&as64, &row1));
  assert_false(region_overlap(&pair, &s0));
  /* two buffers declared over overlapping memory: [a+4, a+12) and [a+8, a+24) */
  pto_tensor b1 = at_ptr(mat + 4, 32, PTO_F32, 1, &n8), b2;
  int64_t n16 = 16;
  b2 = at_ptr(mat + 8, 64, PTO_F32, 1, &n16);
  assert_true(region_overlap(&b1, &b2));
  assert_false(region_covers(&b1, &b2));
  assert_false(region_covers(&b2, &b1));
  /* an odd column of b2 (as 2x8) vs an even column of the matrix */
  pto_tensor b2m, odd, even = slice2(&m, 0, 2, 8, 1);
  assert_int_equal(pto_tensor_reshape(&b2, 2, sh28, &b2m), PTO_OK);
  int64_t osh[2] = {2, 1}, o0[2] = {0, 3}; /* matrix column 3 (rows 1, 2) */
  assert_int_equal(pto_tensor_slice(&b2m, o0, osh, &odd), PTO_OK);
  assert_false(region_overlap(&odd, &even));
  pto_tensor col3 = slice2(&m, 0, 3, 8, 1);
  assert_true(region_covers(&col3, &odd));
}

/* ---- randomized brute force ---- */

#ifndef REGION_TEST_ITERS /* raise both at compile time for a long soak */
#define REGION_TEST_ITERS 20000
#endif
#ifndef REGION_TEST_SEED
#define REGION_TEST_SEED 0x9e3779b97f4a7c15ull
#endif
static uint64_t rng_state = REGION_TEST_SEED;
static uint32_t rnd(uint32_t n) { /* xorshift64*, uniform enough for tests */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32) % n;
}

/* Bases: row-major tensors over the whole buffer in several dtypes. */
static pto_tensor random_base(void) {
  static const struct {
    pto_dtype dt;
    int nd;
    int64_t shape[PTO_MAX_DIMS];
  } bases[] = {
      {PTO_F32, 2, {4, 6}},      {PTO_U8, 2, {8, 12}},
      {PTO_F16, 2, {6, 8}},      {PTO_I64, 2, {3, 4}},
      {PTO_F32, 3, {2, 3, 4}},   {PTO_I16, 3, {4, 3, 4}},
      {PTO_I8, 1, {96}},         {PTO_F64, 1, {12}},
      {PTO_U8, 4, {2, 3, 4, 4}}, {PTO_BF16, 5, {2, 2, 3, 2, 2}},
  };
  int k = (int)rnd(sizeof bases / sizeof bases[0]);
  pto_tensor t;
  assert_int_equal(pto_tensor_init(&t, buf, BUF_BYTES, bases[k].dt, bases[k].nd, bases[k].shape),
                   PTO_OK);
  return t;
}

/* Random slice of base, optionally transposed. */
static pto_tensor random_slice(const pto_tensor *base, bool transpose) {
  int64_t st[PTO_MAX_DIMS], sh[PTO_MAX_DIMS];
  for (int d = 0; d < base->ndims; d++) {
    st[d] = rnd((uint32_t)base->shape[d]);
    sh[d] = 1 + rnd((uint32_t)(base->shape[d] - st[d]));
  }
  pto_tensor s;
  assert_int_equal(pto_tensor_slice(base, st, sh, &s), PTO_OK);
  if (transpose && s.ndims > 1)
    assert_int_equal(
        pto_tensor_transpose(&s, (int)rnd((uint32_t)s.ndims), (int)rnd((uint32_t)s.ndims), &s),
        PTO_OK);
  return s;
}

/* Any valid strided view (possibly self-aliasing) of a random dtype. */
static pto_tensor random_strided(void) {
  for (;;) {
    pto_dtype dt = (pto_dtype)rnd(PTO_DTYPE_COUNT);
    int64_t es = (int64_t)pto_dtype_size(dt);
    int nd = 1 + (int)rnd(PTO_MAX_DIMS);
    int64_t sh[PTO_MAX_DIMS], st[PTO_MAX_DIMS], span = 0;
    for (int d = 0; d < nd; d++) {
      sh[d] = 1 + rnd(nd > 3 ? 2 : 4);
      st[d] = 1 + rnd(8);
      span += (sh[d] - 1) * st[d];
    }
    int64_t room = BUF_BYTES / es - span; /* possible offsets */
    if (room < 1) continue;
    pto_tensor t;
    assert_int_equal(
        pto_tensor_init_strided(&t, buf, BUF_BYTES, dt, nd, sh, st, rnd((uint32_t)room)), PTO_OK);
    return t;
  }
}

static pto_tensor random_reshape(const pto_tensor *base) {
  /* a row block of base reshaped to 1-D: contiguous, new strides */
  pto_tensor s = *base;
  int64_t st[PTO_MAX_DIMS] = {0}, sh[PTO_MAX_DIMS];
  for (int d = 0; d < base->ndims; d++)
    sh[d] = base->shape[d];
  st[0] = rnd((uint32_t)base->shape[0]);
  sh[0] = 1 + rnd((uint32_t)(base->shape[0] - st[0]));
  assert_int_equal(pto_tensor_slice(base, st, sh, &s), PTO_OK);
  int64_t n[1] = {pto_tensor_numel(&s)};
  assert_int_equal(pto_tensor_reshape(&s, 1, n, &s), PTO_OK);
  return s;
}

/* The same view rebuilt from a raw interior pointer: part of its offset
 * moves into the base pointer (as pointer arithmetic would). */
static pto_tensor rebase(pto_tensor v) {
  int64_t k = (int64_t)rnd((uint32_t)v.offset + 1), es = (int64_t)pto_dtype_size(v.dtype);
  v.buf = (char *)v.buf + k * es;
  v.buf_bytes -= (size_t)(k * es);
  v.offset -= k;
  assert_int_equal(pto_tensor_validate(&v), PTO_OK);
  return v;
}

static void byte_set(const pto_tensor *t, bool *set) {
  memset(set, 0, BUF_BYTES);
  size_t es = pto_dtype_size((pto_dtype)t->dtype);
  int64_t n = pto_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    char *p = pto_tensor_at_linear(t, i);
    ptrdiff_t o = p - (char *)buf;
    assert_true(o >= 0 && o + (ptrdiff_t)es <= BUF_BYTES);
    for (size_t b = 0; b < es; b++)
      set[o + (ptrdiff_t)b] = true;
  }
}

static void test_random_brute_force(void **state) {
  (void)state;
  int same_base_disjoint = 0, same_base_subset = 0, any_disjoint = 0, any_disjoint_found = 0;
  for (int iter = 0; iter < REGION_TEST_ITERS; iter++) {
    pto_tensor a, b;
    bool same_base = false;
    switch (rnd(5)) {
    case 0: { /* slices (and transposes) of one base: answers must be exact,
               * also when one of them is rebuilt from an interior pointer */
      pto_tensor base = random_base();
      a = random_slice(&base, rnd(3) == 0);
      b = random_slice(&base, rnd(3) == 0);
      if (rnd(2))
        a = rebase(a);
      else if (rnd(2))
        b = rebase(b);
      same_base = true;
      break;
    }
    case 4: { /* anything, both from interior pointers */
      pto_tensor ba = random_base(), bb = random_base();
      a = rebase(rnd(2) ? random_strided() : random_slice(&ba, rnd(2)));
      b = rebase(rnd(2) ? random_strided() : random_slice(&bb, rnd(2)));
      break;
    }
    case 1: {
      pto_tensor ba = random_base(), bb = random_base();
      a = random_slice(&ba, rnd(2));
      b = random_slice(&bb, rnd(2));
      break;
    }
    case 2: {
      pto_tensor base = random_base();
      a = random_reshape(&base);
      b = rnd(2) ? random_slice(&base, rnd(2)) : random_reshape(&base);
      break;
    }
    default: {
      pto_tensor base = random_base();
      a = random_strided();
      b = rnd(2) ? random_strided() : random_slice(&base, rnd(2));
      break;
    }
    }
    bool sa[BUF_BYTES], sb[BUF_BYTES];
    byte_set(&a, sa);
    byte_set(&b, sb);
    bool share = false, a_in_b = true, b_in_a = true;
    for (int i = 0; i < BUF_BYTES; i++) {
      share |= sa[i] && sb[i];
      if (sa[i] && !sb[i]) a_in_b = false;
      if (sb[i] && !sa[i]) b_in_a = false;
    }
    bool ov = region_overlap(&a, &b);
    bool ab = region_covers(&a, &b), ba = region_covers(&b, &a);
    /* safety: never claim disjoint or covered when it is not */
    if (share) assert_true(ov);
    if (ab) assert_true(b_in_a);
    if (ba) assert_true(a_in_b);
    /* consistency */
    assert_true(ov == region_overlap(&b, &a));
    assert_true(region_covers(&a, &a));
    if (ab || ba) assert_true(ov);
    uint64_t alo, ahi, at = (uint64_t)(uintptr_t)buf;
    region_span(&a, &alo, &ahi);
    assert_true(alo >= at && ahi <= at + BUF_BYTES);
    int64_t lo = (int64_t)(alo - at), hi = (int64_t)(ahi - at);
    for (int i = 0; i < BUF_BYTES; i++)
      if (sa[i]) assert_true(i >= lo && i < hi);
    assert_true(sa[lo] && sa[hi - 1]); /* the bounding box is tight */
    /* precision: slices of one base are decided exactly */
    if (same_base) {
      assert_true(ov == share);
      assert_true(ab == b_in_a);
      assert_true(ba == a_in_b);
      same_base_disjoint += !share;
      same_base_subset += b_in_a;
    }
    any_disjoint += !share;
    any_disjoint_found += !ov;
  }
  /* the generator must actually exercise the interesting cases */
  assert_true(same_base_disjoint > 500);
  assert_true(same_base_subset > 200);
  print_message("disjoint pairs %d, reported disjoint %d; same-base disjoint %d, subsets %d\n",
                any_disjoint, any_disjoint_found, same_base_disjoint, same_base_subset);
}

/* region_view_checked, which a submit uses instead of tensor_problem then
 * region_view_init: it passes exactly the views tensor_problem finds no
 * problem in (apart from those whose addresses overflow, which it leaves
 * to tensor_problem), and its view is region_view_init's. Valid views
 * with one field broken at random, near the limits too. */
static void test_view_checked_agrees(void **state) {
  (void)state;
  static const int64_t odd[] = {-1, 0, 1, 2, 3, 7, INT64_MAX / 2, INT64_MAX};
  int passed = 0, refused = 0;
  for (int iter = 0; iter < 20000; iter++) {
    static const pto_dtype dts[] = {PTO_U8, PTO_F32, PTO_I64};
    pto_tensor t;
    memset(&t, 0, sizeof t); /* the dims past ndims too, for an ndims raised below */
    int64_t shape[3] = {1 + (int64_t)rnd(3), 1 + (int64_t)rnd(2),
                        1 + (int64_t)rnd(2)}; /* <= 96 B */
    int nd = 1 + (int)rnd(3);
    assert_int_equal(pto_tensor_init(&t, buf, sizeof buf, dts[rnd(3)], nd, shape), PTO_OK);
    int64_t pick = odd[rnd(sizeof odd / sizeof odd[0])];
    switch (rnd(9)) {
    case 0: t.shape[rnd((uint32_t)nd)] = pick; break;
    case 1: t.stride[rnd((uint32_t)nd)] = pick; break;
    case 2: t.offset = pick; break;
    case 3: t.buf_bytes = (size_t)rnd(BUF_BYTES + 1); break;
    case 4: t.buf = NULL; break;
    case 5: t.ndims = (int32_t)pick; break;
    case 6: t.dtype = (int32_t)pick; break;
    case 7: t.offset = (int64_t)rnd(BUF_BYTES); break;
    default: break; /* valid as built */
    }
    region_view a, b;
    bool ok = region_view_checked(&t, &a);
    char why[200];
    const char *bad = tensor_problem(&t, false, why, sizeof why);
    if (ok) {
      assert_null(bad);
      passed++;
    } else {
      refused++;
    }
    /* the views it accepts are exactly tensor_problem's here: none of
     * these views' addresses overflow */
    if (!bad) assert_true(ok);
    region_view_init(&t, &b);
    assert_same_view(&a, &b);
  }
  assert_true(passed > 1000 && refused > 1000);
}

/* A view whose elements lie along its last dim, every other extent 1 (a
 * 1-D tensor, a row), takes region.c's short path (view_of_line); the same
 * bytes as an n x 1 column of stride 1 (extent 1 last) take the general
 * one. Both must give the same normalised view and the same verdict, for
 * valid views and for shapes, offsets and dtypes that overflow or are
 * refused. */
static void test_line_views_as_general(void **state) {
  (void)state;
  static const int64_t odd[] = {-1, 0, 1, 2, 3, 12, INT64_MAX / 8, INT64_MAX / 2, INT64_MAX};
  int lines = 0;
  for (int iter = 0; iter < 20000; iter++) {
    static const pto_dtype dts[] = {PTO_U8, PTO_F16, PTO_F32, PTO_I64};
    pto_dtype dt = dts[rnd(4)];
    int64_t n = 1 + (int64_t)rnd(12), off = (int64_t)rnd(8);
    if (rnd(4) == 0) n = odd[rnd(sizeof odd / sizeof odd[0])];
    if (rnd(4) == 0) off = odd[rnd(sizeof odd / sizeof odd[0])];
    pto_tensor line, col;
    memset(&line, 0, sizeof line);
    line.buf = buf;
    line.buf_bytes = rnd(8) ? BUF_BYTES : (size_t)rnd(BUF_BYTES);
    line.dtype = dt;
    line.offset = off;
    /* a row of a matrix ([1, n] or [1, 1, n]) or a 1-D tensor */
    line.ndims = 1 + (int32_t)rnd(3);
    for (int d = 0; d < line.ndims; d++) {
      line.shape[d] = 1;
      line.stride[d] = 1 + (int64_t)rnd(40);
    }
    line.shape[line.ndims - 1] = n;
    line.stride[line.ndims - 1] = 1;
    col = line;
    col.ndims = 2;
    col.shape[0] = n;
    col.stride[0] = 1;
    col.shape[1] = 1;
    col.stride[1] = 1;
    region_view a, b;
    bool ok_a = region_view_checked(&line, &a), ok_b = region_view_checked(&col, &b);
    assert_int_equal(ok_a, ok_b);
    assert_same_view(&a, &b);
    lines += ok_a;
  }
  assert_true(lines > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytes),
      cmocka_unit_test(test_view_bytes_as_u8),
      cmocka_unit_test(test_row_col_tile_blocks_disjoint),
      cmocka_unit_test(test_covers),
      cmocka_unit_test(test_interleaved_and_dtypes),
      cmocka_unit_test(test_different_buffers),
      cmocka_unit_test(test_interior_pointers),
      cmocka_unit_test(test_random_brute_force),
      cmocka_unit_test(test_view_checked_agrees),
      cmocka_unit_test(test_line_views_as_general),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
