/* test_kernels.c — the reference tile kernels against straightforward
 * double-precision references on random data, through contiguous,
 * transposed and padded (sliced) views; the pto_kern_* wrappers driven
 * block by block through a hand-built pto_kctx (SPMD splits); and the
 * online softmax over k chunks against the full softmax; and a few wrappers
 * as SPMD tasks on a real chip. Writes outside an output view are checked
 * to leave the buffer untouched. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/chip.h"
#include "pto/kernels.h"
#include "pto/orch.h"
#include "pto/status.h"
#include "pto/tensor.h"

/* ---- views over owned memory ---- */

typedef enum layout { L_ROW = 0, L_TRANS, L_PAD, L_COUNT } layout;

typedef struct tview {
  float *mem;
  int64_t mem_n;
  float *before; /* snapshot for the untouched-outside check */
  pto_tensor t;
} tview;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000 * 4.0f - 2.0f;
}

/* rows x cols of f32: row-major, transposed (stored cols x rows), or a
 * slice of a larger padded buffer at an offset. Every element of the
 * buffer, in the view or not, gets a random value. */
static tview mkview(int64_t rows, int64_t cols, layout l) {
  tview v;
  memset(&v, 0, sizeof v);
  int64_t full[2];
  if (l == L_PAD) {
    full[0] = rows + 3;
    full[1] = cols + 5;
  } else if (l == L_TRANS) {
    full[0] = cols;
    full[1] = rows;
  } else {
    full[0] = rows;
    full[1] = cols;
  }
  v.mem_n = full[0] * full[1];
  v.mem = malloc((size_t)v.mem_n * sizeof(float));
  v.before = malloc((size_t)v.mem_n * sizeof(float));
  assert_non_null(v.mem);
  assert_non_null(v.before);
  for (int64_t i = 0; i < v.mem_n; i++)
    v.mem[i] = frand();
  pto_tensor base;
  assert_int_equal(pto_tensor_init(&base, v.mem, (size_t)v.mem_n * sizeof(float), PTO_F32, 2, full),
                   PTO_OK);
  if (l == L_PAD) {
    int64_t start[2] = {2, 3}, shape[2] = {rows, cols};
    assert_int_equal(pto_tensor_slice(&base, start, shape, &v.t), PTO_OK);
  } else if (l == L_TRANS) {
    assert_int_equal(pto_tensor_transpose(&base, 0, 1, &v.t), PTO_OK);
  } else {
    v.t = base;
  }
  return v;
}

static void vfree(tview *v) {
  free(v->mem);
  free(v->before);
}

static float *el(const pto_tensor *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  return (float *)pto_tensor_at(t, idx);
}

static void snapshot(tview *v) { memcpy(v->before, v->mem, (size_t)v->mem_n * sizeof(float)); }

/* Every buffer element outside the 2-D view is as snapshot() saw it. */
static void assert_outside_untouched(const tview *v) {
  char *in = calloc((size_t)v->mem_n, 1);
  assert_non_null(in);
  for (int64_t i = 0; i < v->t.shape[0]; i++) {
    for (int64_t j = 0; j < v->t.shape[1]; j++)
      in[el(&v->t, i, j) - v->mem] = 1;
  }
  for (int64_t k = 0; k < v->mem_n; k++) {
    if (!in[k]) assert_true(memcmp(&v->mem[k], &v->before[k], sizeof(float)) == 0);
  }
  free(in);
}

static void assert_close(double actual, double expected, double rtol) {
  double err = fabs(actual - expected), lim = rtol * (1.0 + fabs(expected));
  if (!(err <= lim))
    fail_msg("got %.9g, expected %.9g (err %.3g > %.3g)", actual, expected, err, lim);
}

/* Runs a wrapper as a task of `nblocks` blocks would: once per block_idx. */
static int run_blocks(pto_kernel_fn fn, const pto_tensor *tensors, int nt, const uint64_t *scalars,
                      int ns, int nblocks) {
  for (int b = 0; b < nblocks; b++) {
    pto_kctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.block_idx = b;
    ctx.block_num = nblocks;
    ctx.core_type = PTO_CORE_AIV;
    ctx.ntensors = nt;
    ctx.nscalars = ns;
    ctx.tensors = tensors;
    ctx.scalars = scalars;
    ctx.task_id = PTO_TASK_NONE;
    int rc = fn(&ctx);
    if (rc != PTO_OK) return rc;
  }
  return PTO_OK;
}

static uint64_t f32_bits(float f) {
  union {
    float f;
    uint32_t u;
  } v = {.f = f};
  return v.u;
}

/* ---- pto_split_range ---- */

static void test_split_range(void **state) {
  (void)state;
  for (int64_t n = 0; n < 20; n++) {
    for (int num = 1; num < 9; num++) {
      int64_t next = 0;
      for (int b = 0; b < num; b++) {
        int64_t lo, hi;
        pto_split_range(n, b, num, &lo, &hi);
        assert_int_equal(lo, next);
        assert_true(hi >= lo);
        assert_true(hi - lo <= n / num + 1);
        next = hi;
      }
      assert_int_equal(next, n);
    }
  }
}

/* ---- elementwise ---- */

typedef enum ew { EW_ADD, EW_MUL, EW_SCALE, EW_EXP, EW_COPY, EW_FILL, EW_COUNT } ew;

static double ew_ref(ew op, double a, double b, double x) {
  switch (op) {
  case EW_ADD: return a + b;
  case EW_MUL: return a * b;
  case EW_SCALE: return x * a;
  case EW_EXP: return exp(a);
  case EW_COPY: return a;
  default: return x;
  }
}

static int ew_tile(ew op, const pto_tensor *a, const pto_tensor *b, float x, const pto_tensor *o) {
  switch (op) {
  case EW_ADD: return pto_tile_add(a, b, o);
  case EW_MUL: return pto_tile_mul(a, b, o);
  case EW_SCALE: return pto_tile_scale(a, x, o);
  case EW_EXP: return pto_tile_exp(a, o);
  case EW_COPY: return pto_tile_copy(a, o);
  default: return pto_tile_fill(o, x);
  }
}

static int ew_kern(ew op, const pto_tensor *a, const pto_tensor *b, float x, const pto_tensor *o,
                   int nblocks) {
  pto_tensor t[3];
  uint64_t s[1] = {f32_bits(x)};
  switch (op) {
  case EW_ADD:
  case EW_MUL:
    t[0] = *a, t[1] = *b, t[2] = *o;
    return run_blocks(op == EW_ADD ? pto_kern_add : pto_kern_mul, t, 3, s, 0, nblocks);
  case EW_SCALE: t[0] = *a, t[1] = *o; return run_blocks(pto_kern_scale, t, 2, s, 1, nblocks);
  case EW_EXP:
  case EW_COPY:
    t[0] = *a, t[1] = *o;
    return run_blocks(op == EW_EXP ? pto_kern_exp : pto_kern_copy, t, 2, s, 0, nblocks);
  default: t[0] = *o; return run_blocks(pto_kern_fill, t, 1, s, 1, nblocks);
  }
}

static void test_elementwise_2d(void **state) {
  (void)state;
  const int64_t r = 7, c = 13;
  for (int op = 0; op < EW_COUNT; op++) {
    for (int la = 0; la < L_COUNT; la++) {
      for (int lo = 0; lo < L_COUNT; lo++) {
        for (int nblocks = 0; nblocks <= 4; nblocks += 2) { /* 0 = tile function */
          tview a = mkview(r, c, (layout)la), b = mkview(r, c, (layout)((la + 1) % L_COUNT));
          tview o = mkview(r, c, (layout)lo);
          snapshot(&o);
          const float x = 0.75f;
          int rc = nblocks ? ew_kern((ew)op, &a.t, &b.t, x, &o.t, nblocks)
                           : ew_tile((ew)op, &a.t, &b.t, x, &o.t);
          assert_int_equal(rc, PTO_OK);
          for (int64_t i = 0; i < r; i++) {
            for (int64_t j = 0; j < c; j++) {
              assert_close(*el(&o.t, i, j), ew_ref((ew)op, *el(&a.t, i, j), *el(&b.t, i, j), x),
                           1e-6);
            }
          }
          assert_outside_untouched(&o);
          vfree(&a), vfree(&b), vfree(&o);
        }
      }
    }
  }
}

/* A 3-D view with a permuted layout: rows are numbered over two leading
 * dims, neither of them unit-stride. */
static void test_elementwise_3d(void **state) {
  (void)state;
  float src[2 * 3 * 4], dst[2 * 3 * 4], ref[2 * 3 * 4];
  for (int i = 0; i < 24; i++)
    src[i] = frand(), dst[i] = 0.0f;
  int64_t shape[3] = {4, 3, 2};
  pto_tensor base, a, o;
  assert_int_equal(pto_tensor_init(&base, src, sizeof src, PTO_F32, 3, shape), PTO_OK);
  assert_int_equal(pto_tensor_transpose(&base, 0, 2, &a), PTO_OK); /* [2,3,4] */
  int64_t oshape[3] = {2, 3, 4};
  assert_int_equal(pto_tensor_init(&o, dst, sizeof dst, PTO_F32, 3, oshape), PTO_OK);
  pto_tensor t[2] = {a, o};
  uint64_t s[1] = {f32_bits(-2.0f)};
  assert_int_equal(run_blocks(pto_kern_scale, t, 2, s, 1, 4), PTO_OK);
  for (int64_t i = 0; i < 2; i++) {
    for (int64_t j = 0; j < 3; j++) {
      for (int64_t k = 0; k < 4; k++)
        ref[(i * 3 + j) * 4 + k] = -2.0f * src[(k * 3 + j) * 2 + i];
    }
  }
  assert_memory_equal(dst, ref, sizeof dst);
}

static void test_elementwise_inplace(void **state) {
  (void)state;
  tview a = mkview(5, 9, L_PAD);
  float copy[45];
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 9; j++)
      copy[i * 9 + j] = *el(&a.t, i, j);
  assert_int_equal(pto_tile_add(&a.t, &a.t, &a.t), PTO_OK);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 9; j++)
      assert_close(*el(&a.t, i, j), 2.0 * copy[i * 9 + j], 1e-7);
  vfree(&a);
}

static void test_elementwise_invalid(void **state) {
  (void)state;
  tview a = mkview(4, 5, L_ROW), b = mkview(5, 4, L_ROW), o = mkview(4, 5, L_ROW);
  snapshot(&o);
  assert_int_equal(pto_tile_add(&a.t, &b.t, &o.t), PTO_EINVAL); /* shape */
  pto_tensor i32 = a.t;
  i32.dtype = PTO_I32;
  assert_int_equal(pto_tile_copy(&i32, &o.t), PTO_EINVAL); /* dtype */
  pto_tensor unbacked = o.t;
  unbacked.buf = NULL;
  assert_int_equal(pto_tile_fill(&unbacked, 1.0f), PTO_EINVAL);
  /* wrong argument counts */
  pto_tensor t[3] = {a.t, a.t, o.t};
  assert_int_equal(run_blocks(pto_kern_add, t, 2, NULL, 0, 1), PTO_EINVAL);
  assert_int_equal(run_blocks(pto_kern_scale, t, 2, NULL, 0, 1), PTO_EINVAL);
  assert_memory_equal(o.mem, o.before, (size_t)o.mem_n * sizeof(float));
  vfree(&a), vfree(&b), vfree(&o);
}

/* ---- matmul ---- */

static void check_matmul(int64_t m, int64_t k, int64_t n, layout la, layout lb, layout lc, bool acc,
                         int nblocks) {
  tview a = mkview(m, k, la), b = mkview(k, n, lb), c = mkview(m, n, lc);
  double *ref = malloc((size_t)(m * n) * sizeof(double));
  assert_non_null(ref);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = acc ? *el(&c.t, i, j) : 0.0;
      for (int64_t q = 0; q < k; q++)
        s += (double)*el(&a.t, i, q) * *el(&b.t, q, j);
      ref[i * n + j] = s;
    }
  }
  snapshot(&c);
  int rc;
  if (nblocks) {
    pto_tensor t[3] = {a.t, b.t, c.t};
    rc = run_blocks(acc ? pto_kern_matmul_acc : pto_kern_matmul, t, 3, NULL, 0, nblocks);
  } else {
    rc = acc ? pto_tile_matmul_acc(&a.t, &b.t, &c.t) : pto_tile_matmul(&a.t, &b.t, &c.t);
  }
  assert_int_equal(rc, PTO_OK);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++)
      assert_close(*el(&c.t, i, j), ref[i * n + j], 1e-5);
  }
  assert_outside_untouched(&c);
  free(ref);
  vfree(&a), vfree(&b), vfree(&c);
}

static void test_matmul_layouts(void **state) {
  (void)state;
  for (int la = 0; la < L_COUNT; la++) {
    for (int lb = 0; lb < L_COUNT; lb++) {
      for (int lc = 0; lc < L_COUNT; lc++) {
        check_matmul(9, 21, 11, (layout)la, (layout)lb, (layout)lc, false, 0);
        check_matmul(9, 21, 11, (layout)la, (layout)lb, (layout)lc, true, 0);
      }
    }
  }
}

static void test_matmul_shapes_and_blocks(void **state) {
  (void)state;
  check_matmul(1, 1, 1, L_ROW, L_ROW, L_ROW, false, 0);
  check_matmul(1, 128, 64, L_ROW, L_TRANS, L_ROW, false, 0); /* q·K^T for one row */
  check_matmul(16, 128, 128, L_ROW, L_TRANS, L_ROW, false, 3);
  check_matmul(16, 37, 128, L_PAD, L_ROW, L_ROW, true, 5);
  check_matmul(3, 8, 5, L_ROW, L_ROW, L_TRANS, true, 7); /* more blocks than rows */
}

static void test_matmul_invalid(void **state) {
  (void)state;
  tview a = mkview(4, 5, L_ROW), b = mkview(6, 3, L_ROW), c = mkview(4, 3, L_ROW);
  assert_int_equal(pto_tile_matmul(&a.t, &b.t, &c.t), PTO_EINVAL); /* K mismatch */
  tview b2 = mkview(5, 3, L_ROW), c2 = mkview(4, 4, L_ROW);
  assert_int_equal(pto_tile_matmul(&a.t, &b2.t, &c2.t), PTO_EINVAL); /* N mismatch */
  /* 3-D with a non-unit leading dim is not a matrix */
  float buf[2 * 4 * 5];
  int64_t shape[3] = {2, 4, 5};
  pto_tensor t3;
  assert_int_equal(pto_tensor_init(&t3, buf, sizeof buf, PTO_F32, 3, shape), PTO_OK);
  assert_int_equal(pto_tile_matmul(&t3, &b2.t, &c.t), PTO_EINVAL);
  /* ... but a leading dim of 1 is */
  int64_t shape1[3] = {1, 4, 5};
  assert_int_equal(pto_tensor_init(&t3, buf, sizeof buf, PTO_F32, 3, shape1), PTO_OK);
  for (int i = 0; i < 20; i++)
    buf[i] = 1.0f;
  assert_int_equal(pto_tile_matmul(&t3, &b2.t, &c.t), PTO_OK);
  /* C overlapping an input is refused; disjoint parts of one buffer are fine */
  tview sq = mkview(4, 8, L_ROW);
  pto_tensor left, right;
  int64_t start_l[2] = {0, 0}, start_r[2] = {0, 4}, half[2] = {4, 4};
  assert_int_equal(pto_tensor_slice(&sq.t, start_l, half, &left), PTO_OK);
  assert_int_equal(pto_tensor_slice(&sq.t, start_r, half, &right), PTO_OK);
  assert_int_equal(pto_tile_matmul(&left, &left, &left), PTO_EINVAL);
  assert_int_equal(pto_tile_matmul_acc(&left, &right, &right), PTO_EINVAL);
  assert_int_equal(pto_tile_matmul(&left, &left, &right), PTO_OK);
  vfree(&sq);
  vfree(&a), vfree(&b), vfree(&c), vfree(&b2), vfree(&c2);
}

/* ---- softmax ---- */

static void ref_softmax_row(const pto_tensor *s, int64_t r, double scale, double *out) {
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < s->shape[1]; j++)
    mx = fmax(mx, scale * *el(s, r, j));
  for (int64_t j = 0; j < s->shape[1]; j++)
    sum += out[j] = exp(scale * *el(s, r, j) - mx);
  for (int64_t j = 0; j < s->shape[1]; j++)
    out[j] /= sum;
}

static void test_softmax_rows(void **state) {
  (void)state;
  const int64_t r = 6, c = 33;
  double ref[33];
  for (int li = 0; li < L_COUNT; li++) {
    for (int nblocks = 0; nblocks <= 4; nblocks += 4) {
      tview in = mkview(r, c, (layout)li), out = mkview(r, c, (layout)((li + 2) % L_COUNT));
      for (int64_t j = 0; j < c; j++)
        *el(&in.t, 0, j) *= 40.0f; /* large values: needs the max */
      snapshot(&out);
      const float scale = 0.5f;
      if (nblocks) {
        pto_tensor t[2] = {in.t, out.t};
        uint64_t s[1] = {f32_bits(scale)};
        assert_int_equal(run_blocks(pto_kern_softmax_rows, t, 2, s, 1, nblocks), PTO_OK);
      } else {
        assert_int_equal(pto_tile_softmax_rows(&in.t, scale, &out.t), PTO_OK);
      }
      for (int64_t i = 0; i < r; i++) {
        ref_softmax_row(&in.t, i, scale, ref);
        for (int64_t j = 0; j < c; j++)
          assert_close(*el(&out.t, i, j), ref[j], 1e-5);
      }
      assert_outside_untouched(&out);
      vfree(&in), vfree(&out);
    }
  }
  /* the wrapper's scale defaults to 1 */
  tview in = mkview(2, 5, L_ROW), out = mkview(2, 5, L_ROW);
  pto_tensor t[2] = {in.t, out.t};
  assert_int_equal(run_blocks(pto_kern_softmax_rows, t, 2, NULL, 0, 1), PTO_OK);
  ref_softmax_row(&in.t, 1, 1.0, ref);
  for (int64_t j = 0; j < 5; j++)
    assert_close(*el(&out.t, 1, j), ref[j], 1e-6);
  vfree(&in), vfree(&out);
}

/* Attention over one [R, T] score tile and values V [T, D], split into
 * chunks of the given widths: online softmax + p·V accumulation + final
 * normalisation must equal softmax(scale*S)·V, and m, l must be the full
 * row max and the full sum of exp(scale*s - m). */
static void check_online(const int64_t *chunks, int nchunks, layout ls, layout lv, int nblocks) {
  const int64_t r = 5, d = 24;
  int64_t t_all = 0;
  for (int i = 0; i < nchunks; i++)
    t_all += chunks[i];
  const float scale = 0.3f;
  tview s = mkview(r, t_all, ls), v = mkview(t_all, d, lv);
  for (int64_t j = 0; j < t_all; j++)
    *el(&s.t, 1, j) *= 30.0f; /* a peaked row */
  tview m = mkview(r, 1, L_PAD), l = mkview(1, r, L_TRANS), o = mkview(r, d, L_PAD);
  tview out = mkview(r, d, L_ROW);
  assert_int_equal(pto_tile_fill(&m.t, -INFINITY), PTO_OK);
  assert_int_equal(pto_tile_fill(&l.t, 0.0f), PTO_OK);
  assert_int_equal(pto_tile_fill(&o.t, 0.0f), PTO_OK);
  int64_t col = 0;
  for (int i = 0; i < nchunks; i++) {
    pto_tensor sc, vc;
    int64_t s_start[2] = {0, col}, s_shape[2] = {r, chunks[i]};
    int64_t v_start[2] = {col, 0}, v_shape[2] = {chunks[i], d};
    assert_int_equal(pto_tensor_slice(&s.t, s_start, s_shape, &sc), PTO_OK);
    assert_int_equal(pto_tensor_slice(&v.t, v_start, v_shape, &vc), PTO_OK);
    tview p = mkview(r, chunks[i], L_ROW);
    if (nblocks) {
      pto_tensor t[5] = {sc, m.t, l.t, o.t, p.t};
      uint64_t sv[1] = {f32_bits(scale)};
      assert_int_equal(run_blocks(pto_kern_online_softmax, t, 5, sv, 1, nblocks), PTO_OK);
      pto_tensor t2[3] = {p.t, vc, o.t};
      assert_int_equal(run_blocks(pto_kern_matmul_acc, t2, 3, NULL, 0, nblocks), PTO_OK);
    } else {
      assert_int_equal(pto_tile_online_softmax(&sc, scale, &m.t, &l.t, &o.t, &p.t), PTO_OK);
      assert_int_equal(pto_tile_matmul_acc(&p.t, &vc, &o.t), PTO_OK);
    }
    vfree(&p);
    col += chunks[i];
  }
  snapshot(&out);
  if (nblocks) {
    pto_tensor t[3] = {o.t, l.t, out.t};
    assert_int_equal(run_blocks(pto_kern_normalize_rows, t, 3, NULL, 0, nblocks), PTO_OK);
  } else {
    assert_int_equal(pto_tile_normalize_rows(&o.t, &l.t, &out.t), PTO_OK);
  }
  double *pr = malloc((size_t)t_all * sizeof(double));
  assert_non_null(pr);
  for (int64_t i = 0; i < r; i++) {
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < t_all; j++)
      mx = fmax(mx, (double)scale * *el(&s.t, i, j));
    for (int64_t j = 0; j < t_all; j++)
      sum += exp((double)scale * *el(&s.t, i, j) - mx);
    assert_close(*el(&m.t, i, 0), mx, 1e-6);
    assert_close(*el(&l.t, 0, i), sum, 1e-5);
    ref_softmax_row(&s.t, i, scale, pr);
    for (int64_t c = 0; c < d; c++) {
      double acc = 0.0;
      for (int64_t j = 0; j < t_all; j++)
        acc += pr[j] * *el(&v.t, j, c);
      assert_close(*el(&out.t, i, c), acc, 1e-5);
    }
  }
  assert_outside_untouched(&out);
  free(pr);
  vfree(&s), vfree(&v), vfree(&m), vfree(&l), vfree(&o), vfree(&out);
}

static void test_online_softmax(void **state) {
  (void)state;
  const int64_t one[1] = {40};
  const int64_t mixed[5] = {7, 16, 1, 30, 10};
  const int64_t even[4] = {8, 8, 8, 8};
  for (int ls = 0; ls < L_COUNT; ls++) {
    for (int lv = 0; lv < L_COUNT; lv++) {
      check_online(mixed, 5, (layout)ls, (layout)lv, 0);
      check_online(mixed, 5, (layout)ls, (layout)lv, 2);
    }
  }
  check_online(one, 1, L_ROW, L_ROW, 0);
  check_online(even, 4, L_TRANS, L_PAD, 3);
  check_online(even, 4, L_ROW, L_ROW, 8); /* more blocks than rows */
}

/* Rows with no finite score keep their state and produce zeros, and a
 * row with l = 0 normalises to 0 rather than NaN. */
static void test_online_softmax_masked(void **state) {
  (void)state;
  float s[2 * 3] = {-INFINITY, -INFINITY, -INFINITY, 1.0f, 2.0f, 3.0f};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, o[2 * 2] = {0}, p[2 * 3], out[2 * 2];
  pto_tensor ts, tm, tl, to, tp, tout;
  int64_t s_shape[2] = {2, 3}, v_shape[1] = {2}, o_shape[2] = {2, 2};
  assert_int_equal(pto_tensor_init(&ts, s, sizeof s, PTO_F32, 2, s_shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&tp, p, sizeof p, PTO_F32, 2, s_shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&tm, m, sizeof m, PTO_F32, 1, v_shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&tl, l, sizeof l, PTO_F32, 1, v_shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&to, o, sizeof o, PTO_F32, 2, o_shape), PTO_OK);
  assert_int_equal(pto_tensor_init(&tout, out, sizeof out, PTO_F32, 2, o_shape), PTO_OK);
  assert_int_equal(pto_tile_online_softmax(&ts, 1.0f, &tm, &tl, &to, &tp), PTO_OK);
  assert_true(isinf(m[0]) && m[0] < 0);
  assert_true(l[0] == 0.0f);
  for (int j = 0; j < 3; j++)
    assert_true(p[j] == 0.0f);
  assert_close(m[1], 3.0, 1e-7);
  assert_close(l[1], exp(-2.0) + exp(-1.0) + 1.0, 1e-6);
  assert_int_equal(pto_tile_normalize_rows(&to, &tl, &tout), PTO_OK);
  assert_true(out[0] == 0.0f && out[1] == 0.0f);
  /* mismatched shapes */
  int64_t bad_shape[1] = {1};
  pto_tensor bad;
  assert_int_equal(pto_tensor_init(&bad, m, sizeof m, PTO_F32, 1, bad_shape), PTO_OK);
  assert_int_equal(pto_tile_online_softmax(&ts, 1.0f, &bad, &tl, &to, &tp), PTO_EINVAL);
  assert_int_equal(pto_tile_normalize_rows(&to, &bad, &tout), PTO_EINVAL);
  pto_tensor t[4] = {ts, tm, tl, to};
  assert_int_equal(run_blocks(pto_kern_online_softmax, t, 4, NULL, 0, 1), PTO_EINVAL);
}

/* ---- reductions ---- */

static void test_reductions(void **state) {
  (void)state;
  const int64_t r = 9, c = 14;
  pto_kernel_fn kerns[4] = {pto_kern_row_sum, pto_kern_row_max, pto_kern_col_sum, pto_kern_col_max};
  for (int li = 0; li < L_COUNT; li++) {
    for (int which = 0; which < 4; which++) {
      for (int nblocks = 0; nblocks <= 3; nblocks += 3) {
        const bool by_row = which < 2, is_max = which & 1;
        const int64_t n = by_row ? r : c;
        tview in = mkview(r, c, (layout)li);
        tview out = mkview(n, 1, (layout)((li + 1) % L_COUNT)); /* [n,1] column vector */
        snapshot(&out);
        int rc;
        if (nblocks) {
          pto_tensor t[2] = {in.t, out.t};
          rc = run_blocks(kerns[which], t, 2, NULL, 0, nblocks);
        } else if (by_row) {
          rc = is_max ? pto_tile_row_max(&in.t, &out.t) : pto_tile_row_sum(&in.t, &out.t);
        } else {
          rc = is_max ? pto_tile_col_max(&in.t, &out.t) : pto_tile_col_sum(&in.t, &out.t);
        }
        assert_int_equal(rc, PTO_OK);
        for (int64_t i = 0; i < n; i++) {
          double acc = is_max ? -INFINITY : 0.0;
          for (int64_t j = 0; j < (by_row ? c : r); j++) {
            double x = by_row ? *el(&in.t, i, j) : *el(&in.t, j, i);
            acc = is_max ? fmax(acc, x) : acc + x;
          }
          assert_close(*el(&out.t, i, 0), acc, 1e-5);
        }
        assert_outside_untouched(&out);
        vfree(&in), vfree(&out);
      }
    }
  }
  /* output length must match */
  tview in = mkview(3, 4, L_ROW), out = mkview(4, 1, L_ROW), wide = mkview(2, 2, L_ROW);
  assert_int_equal(pto_tile_row_sum(&in.t, &out.t), PTO_EINVAL);
  assert_int_equal(pto_tile_col_sum(&in.t, &out.t), PTO_OK);
  assert_int_equal(pto_tile_col_sum(&in.t, &wide.t), PTO_EINVAL); /* not a vector */
  vfree(&in), vfree(&out), vfree(&wide);
}

/* ---- through the runtime ---- */

typedef struct rt_case {
  pto_kernel_ids ids;
  pto_tensor x, xt, sum_rows, max_cols, gram, half;
} rt_case;

static int rt_submit(pto_orch *o, int kernel, pto_args *a, int blocks) {
  pto_submit_opts so = {.block_num = blocks};
  return pto_submit(o, kernel, a, &so, NULL);
}

/* half = (x + x) * 0.25 through a runtime-allocated intermediate, then row
 * sums of half, column maxima of x and x·x^T, each SPMD over several blocks
 * that run concurrently on the chip's cores. */
static void rt_orch(pto_orch *o, void *arg) {
  /* No cmocka asserts here: this runs inside pto_chip_run. A failed submit
   * latches the run's error, which the test checks after the run. */
  rt_case *c = arg;
  pto_tensor twice;
  if (pto_tensor_desc(&twice, PTO_F32, 2, c->x.shape) != PTO_OK) {
    pto_orch_fatal(o, "descriptor");
    return;
  }
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &c->x);
  pto_args_input(&a, &c->x);
  pto_args_output(&a, &twice);
  if (rt_submit(o, c->ids.add, &a, 4)) return;
  pto_args_init(&a);
  pto_args_input(&a, &twice);
  pto_args_output_existing(&a, &c->half);
  pto_args_scalar_f32(&a, 0.25f);
  if (rt_submit(o, c->ids.scale, &a, 3)) return;
  pto_args_init(&a);
  pto_args_input(&a, &c->half);
  pto_args_output_existing(&a, &c->sum_rows);
  if (rt_submit(o, c->ids.row_sum, &a, 5)) return;
  pto_args_init(&a);
  pto_args_input(&a, &c->x);
  pto_args_output_existing(&a, &c->max_cols);
  if (rt_submit(o, c->ids.col_max, &a, 2)) return;
  pto_args_init(&a);
  pto_args_input(&a, &c->x);
  pto_args_input(&a, &c->xt);
  pto_args_output_existing(&a, &c->gram);
  rt_submit(o, c->ids.matmul, &a, 3);
}

static void test_runtime_spmd(void **state) {
  (void)state;
  const int64_t r = 24, c = 10;
  rt_case rc;
  tview x = mkview(r, c, L_PAD), half = mkview(r, c, L_ROW), sums = mkview(r, 1, L_ROW);
  tview maxes = mkview(1, c, L_ROW), gram = mkview(r, r, L_TRANS);
  rc.x = x.t, rc.half = half.t, rc.sum_rows = sums.t, rc.max_cols = maxes.t, rc.gram = gram.t;
  assert_int_equal(pto_tensor_transpose(&x.t, 0, 1, &rc.xt), PTO_OK);

  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernels_register(chip, &rc.ids), PTO_OK);
  pto_error_info err;
  int st = pto_chip_run(chip, rt_orch, &rc, NULL, &err);
  if (st != PTO_OK) pto_error_print(&err, stderr);
  assert_int_equal(st, PTO_OK);
  pto_chip_destroy(chip);

  for (int64_t i = 0; i < r; i++) {
    double rs = 0.0;
    for (int64_t j = 0; j < c; j++) {
      assert_close(*el(&half.t, i, j), 0.5 * *el(&x.t, i, j), 1e-7);
      rs += 0.5 * *el(&x.t, i, j);
    }
    assert_close(*el(&sums.t, i, 0), rs, 1e-5);
    for (int64_t k = 0; k < r; k++) {
      double g = 0.0;
      for (int64_t j = 0; j < c; j++)
        g += (double)*el(&x.t, i, j) * *el(&x.t, k, j);
      assert_close(*el(&gram.t, i, k), g, 1e-5);
    }
  }
  for (int64_t j = 0; j < c; j++) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < r; i++)
      mx = fmax(mx, *el(&x.t, i, j));
    assert_close(*el(&maxes.t, 0, j), mx, 0.0);
  }
  vfree(&x), vfree(&half), vfree(&sums), vfree(&maxes), vfree(&gram);
}

/* A reference kernel given a wrong argument fails the run with details
 * that name the kernel, the argument, what it got and what it needs. */
typedef struct bad_case {
  int kernel;
  pto_tensor t[3];
  int nt;
} bad_case;

static void bad_orch(pto_orch *o, void *arg) {
  bad_case *b = arg;
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < b->nt; i++)
    pto_args_nodep(&a, &b->t[i]);
  pto_submit(o, b->kernel, &a, NULL, NULL);
}

static void expect_details(pto_chip *chip, bad_case *b, const char *want) {
  pto_error_info err;
  int st = pto_chip_run(chip, bad_orch, b, NULL, &err);
  assert_int_equal(st, PTO_EINVAL);
  if (!strstr(err.details, want))
    fail_msg("details: \"%s\"\n  expected them to contain \"%s\"", err.details, want);
}

static void test_wrong_arguments_are_named(void **state) {
  (void)state;
  static float f[32], g[32];
  static int32_t i32[32];
  int64_t s48[2] = {4, 8}, s44[2] = {4, 4}, s8 = 8;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  pto_kernel_ids ids;
  assert_int_equal(pto_kernels_register(chip, &ids), PTO_OK);
  bad_case b = {.kernel = ids.add, .nt = 3};
  assert_int_equal(pto_tensor_init(&b.t[0], f, sizeof f, PTO_F32, 2, s48), PTO_OK);
  assert_int_equal(pto_tensor_init(&b.t[1], i32, sizeof i32, PTO_I32, 2, s48), PTO_OK);
  assert_int_equal(pto_tensor_init(&b.t[2], g, sizeof g, PTO_F32, 2, s48), PTO_OK);
  expect_details(chip, &b, "returned -1: add: tensor 1 (b) is i32, needs f32");
  assert_int_equal(pto_tensor_init(&b.t[1], f, sizeof f, PTO_F32, 2, s44), PTO_OK);
  expect_details(chip, &b,
                 "add: shapes a [4, 8], b [4, 4], out [4, 8]; needs the inputs of out's shape");
  b.nt = 2;
  expect_details(chip, &b, "add: got 2 tensors and 0 scalars, needs 3 tensors (a, b, out)");
  b.kernel = ids.matmul;
  b.nt = 3;
  assert_int_equal(pto_tensor_init(&b.t[1], f, sizeof f, PTO_F32, 2, s48), PTO_OK);
  expect_details(chip, &b, "matmul: shapes A [4, 8], B [4, 8], C [4, 8]; needs A [M, K], B [K, N]");
  b.kernel = ids.row_sum;
  b.nt = 2;
  assert_int_equal(pto_tensor_init(&b.t[1], g, sizeof g, PTO_F32, 1, &s8), PTO_OK);
  expect_details(
      chip, &b, "row_sum: shapes in [4, 8], out [8]; needs in [R, C] (leading dims 1) and out [R]");
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_range),
      cmocka_unit_test(test_elementwise_2d),
      cmocka_unit_test(test_elementwise_3d),
      cmocka_unit_test(test_elementwise_inplace),
      cmocka_unit_test(test_elementwise_invalid),
      cmocka_unit_test(test_matmul_layouts),
      cmocka_unit_test(test_matmul_shapes_and_blocks),
      cmocka_unit_test(test_matmul_invalid),
      cmocka_unit_test(test_softmax_rows),
      cmocka_unit_test(test_online_softmax),
      cmocka_unit_test(test_online_softmax_masked),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_runtime_spmd),
      cmocka_unit_test(test_wrong_arguments_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
