/* test_coll_reduce.c — the collectives' element-wise reduction
 * (src/comm/coll_reduce.c): coll_reduce(acc, x) is acc op x element by
 * element, coll_reduce_after(x, acc) is x op acc; the order shows in the
 * bits (a NaN against max or min), which is why a 2-rank exchange reduces
 * in rank order on both ranks (mpi_coll.c). Every dtype and op, lengths on
 * both sides of the vectorized blocks (16 elements), against the scalar
 * definition of each op. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "comm/coll_reduce.h"

enum { MAXN = 41 };

static const pto_red_op ops[] = {PTO_RED_SUM, PTO_RED_MAX, PTO_RED_MIN, PTO_RED_PROD};

/* pto's definition of op on two f64 values, u first: max and min take the
 * second operand only when it compares greater (smaller) */
static double def(double u, double v, pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return u + v;
  case PTO_RED_MAX: return v > u ? v : u;
  case PTO_RED_MIN: return v < u ? v : u;
  default: return u * v;
  }
}

/* the values of element i of operand k: small, some negative, a NaN at
 * every 7th of operand 0 and every 5th of operand 1 (floats) */
static double value(int k, int i, bool nan_ok) {
  if (nan_ok && ((k == 0 && i % 7 == 3) || (k == 1 && i % 5 == 2))) return NAN;
  return (double)((i * (k + 3)) % 11) - 4.0 + (k ? 0.5 : 0.25);
}

static bool same_bits_f64(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* f32 and f64: coll_reduce and coll_reduce_after against def, in f32 (or
 * f64) arithmetic, bit for bit */
static void test_floats(void **state) {
  (void)state;
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
    for (int n = 0; n <= MAXN; n++) {
      float a[MAXN], b[MAXN], acc[MAXN];
      double da[MAXN], db[MAXN], dacc[MAXN];
      for (int i = 0; i < n; i++) {
        a[i] = (float)value(0, i, true), b[i] = (float)value(1, i, true);
        da[i] = value(0, i, true), db[i] = value(1, i, true);
      }
      for (int after = 0; after < 2; after++) {
        memcpy(acc, a, sizeof a), memcpy(dacc, da, sizeof da);
        if (after) { /* b op a, written into the a's */
          coll_reduce_after(b, acc, n, PTO_F32, ops[o]);
          coll_reduce_after(db, dacc, n, PTO_F64, ops[o]);
        } else {
          coll_reduce(acc, b, n, PTO_F32, ops[o]);
          coll_reduce(dacc, db, n, PTO_F64, ops[o]);
        }
        for (int i = 0; i < n; i++) {
          float u = after ? b[i] : a[i], v = after ? a[i] : b[i];
          float want = (float)def(u, v, ops[o]);
          if (ops[o] == PTO_RED_SUM) want = u + v; /* in f32, not rounded from f64 */
          if (ops[o] == PTO_RED_PROD) want = u * v;
          double dwant = def(after ? db[i] : da[i], after ? da[i] : db[i], ops[o]);
          bool ok = isnan(want) ? isnan(acc[i]) : acc[i] == want;
          bool dok = isnan(dwant) ? isnan(dacc[i]) : same_bits_f64(dacc[i], dwant);
          if (!ok || !dok)
            fail_msg("op %s, n %d, %s: [%d] f32 %g (expected %g), f64 %g (expected %g)",
                     coll_red_op_name(ops[o]), n, after ? "x op acc" : "acc op x", i,
                     (double)acc[i], (double)want, dacc[i], dwant);
        }
      }
    }
}

/* The order is in the bits: a NaN against max. */
static void test_order_shows(void **state) {
  (void)state;
  float nan_first[1] = {NAN}, one[1] = {1.0f};
  float acc[1];
  memcpy(acc, nan_first, sizeof acc);
  coll_reduce(acc, one, 1, PTO_F32, PTO_RED_MAX); /* NaN max 1 */
  assert_true(isnan(acc[0]));
  memcpy(acc, one, sizeof acc);
  coll_reduce(acc, nan_first, 1, PTO_F32, PTO_RED_MAX); /* 1 max NaN */
  assert_true(acc[0] == 1.0f);
  memcpy(acc, one, sizeof acc);
  coll_reduce_after(nan_first, acc, 1, PTO_F32, PTO_RED_MAX); /* NaN max 1, into acc */
  assert_true(isnan(acc[0]));
}

/* i32 wraps; f16 and bf16 are computed in f32 and rounded: each order
 * equals coll_reduce with the operands swapped */
static void test_swapped_equals_after(void **state) {
  (void)state;
  static const pto_dtype dts[] = {PTO_I32, PTO_F16, PTO_BF16};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
      for (int n = 0; n <= MAXN; n++) {
        uint32_t a[MAXN], b[MAXN], x[MAXN], y[MAXN];
        size_t es = dts[d] == PTO_I32 ? 4 : 2;
        for (int i = 0; i < n; i++) {
          a[i] = (uint32_t)(i * 2654435761u), b[i] = (uint32_t)(i * 40503u + 7u);
          if (es == 2) a[i] &= 0x7bff, b[i] = (b[i] & 0x7bff) | (i % 3 ? 0 : 0x7e00u); /* NaNs */
        }
        unsigned char ua[MAXN * 4], ub[MAXN * 4];
        for (int i = 0; i < n; i++) {
          memcpy(ua + (size_t)i * es, &a[i], es);
          memcpy(ub + (size_t)i * es, &b[i], es);
        }
        /* x = b op a by coll_reduce on a copy of b; y = b op a by coll_reduce_after into a */
        memcpy(x, ub, (size_t)n * es);
        coll_reduce(x, ua, n, dts[d], ops[o]);
        memcpy(y, ua, (size_t)n * es);
        coll_reduce_after(ub, y, n, dts[d], ops[o]);
        if (memcmp(x, y, (size_t)n * es) != 0)
          fail_msg("dtype %d op %s n %d: x op acc differs from acc op x with the operands "
                   "swapped",
                   (int)dts[d], coll_red_op_name(ops[o]), n);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_floats),
      cmocka_unit_test(test_order_shows),
      cmocka_unit_test(test_swapped_equals_after),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
