/* coll_values.h — the element values of the collective tests: input
 * element i of rank r in every dtype, reads and writes of one element, the
 * reference reduction. Shared by tests/mpi/test_mpi_comm.c and
 * tests/dist/test_dist_coll.c. */
#ifndef PTO_TEST_COLL_VALUES_H
#define PTO_TEST_COLL_VALUES_H

#include <stdint.h>

#include "common/half.h"
#include "pto/coll.h"

/* Input element i of rank r (exact in every dtype, so any reduction order
 * gives the reference's bits). */
static inline double gen(int r, int64_t i, pto_dtype dt, pto_red_op op) {
  if (op == PTO_RED_PROD) return (double)((r + i) % 3 + 1);
  if (dt == PTO_F16 || dt == PTO_BF16) return (double)((100 * r + i) % 64 - 32);
  return (double)(100 * r + i);
}

static inline void put_val(void *p, int64_t i, pto_dtype dt, double v) {
  switch (dt) {
  case PTO_F32: ((float *)p)[i] = (float)v; break;
  case PTO_F64: ((double *)p)[i] = v; break;
  case PTO_F16: ((uint16_t *)p)[i] = f32_to_half((float)v); break;
  case PTO_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
  default: ((int32_t *)p)[i] = (int32_t)v; break;
  }
}

static inline double get_val(const void *p, int64_t i, pto_dtype dt) {
  switch (dt) {
  case PTO_F32: return ((const float *)p)[i];
  case PTO_F64: return ((const double *)p)[i];
  case PTO_F16: return half_to_f32(((const uint16_t *)p)[i]);
  case PTO_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
  default: return ((const int32_t *)p)[i];
  }
}

static inline double red(double a, double b, pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return a + b;
  case PTO_RED_MAX: return a > b ? a : b;
  case PTO_RED_MIN: return a < b ? a : b;
  default: return a * b;
  }
}

/* v as the dtype holds it. */
static inline double as_dtype(double v, pto_dtype dt) {
  unsigned char tmp[8];
  put_val(tmp, 0, dt, v);
  return get_val(tmp, 0, dt);
}

#endif
