/* coll_reduce.c — element-wise reductions of the collectives. */
#include "comm/coll_reduce.h"

#include <string.h>

#include "common/half.h"

bool coll_reduce_dtype_ok(pto_dtype dt) {
  return dt == PTO_F32 || dt == PTO_F64 || dt == PTO_F16 || dt == PTO_BF16 || dt == PTO_I32;
}

bool coll_reduce_op_ok(pto_red_op op) { return op >= PTO_RED_SUM && op <= PTO_RED_PROD; }

const char *coll_red_op_name(pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return "sum";
  case PTO_RED_MAX: return "max";
  case PTO_RED_MIN: return "min";
  case PTO_RED_PROD: return "prod";
  default: return "?";
  }
}

static inline float red_f32(float a, float b, pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return a + b;
  case PTO_RED_MAX: return b > a ? b : a;
  case PTO_RED_MIN: return b < a ? b : a;
  default: return a * b;
  }
}

static inline double red_f64(double a, double b, pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return a + b;
  case PTO_RED_MAX: return b > a ? b : a;
  case PTO_RED_MIN: return b < a ? b : a;
  default: return a * b;
  }
}

static inline int32_t red_i32(int32_t a, int32_t b, pto_red_op op) {
  switch (op) {
  case PTO_RED_SUM: return (int32_t)((uint32_t)a + (uint32_t)b);
  case PTO_RED_MAX: return b > a ? b : a;
  case PTO_RED_MIN: return b < a ? b : a;
  default: return (int32_t)((uint32_t)a * (uint32_t)b);
  }
}

void coll_reduce(void *acc, const void *x, int64_t n, pto_dtype dt, pto_red_op op) {
  switch (dt) {
  case PTO_F32: {
    float *a = acc;
    const float *b = x;
    for (int64_t i = 0; i < n; i++)
      a[i] = red_f32(a[i], b[i], op);
    break;
  }
  case PTO_F64: {
    double *a = acc;
    const double *b = x;
    for (int64_t i = 0; i < n; i++)
      a[i] = red_f64(a[i], b[i], op);
    break;
  }
  case PTO_I32: {
    int32_t *a = acc;
    const int32_t *b = x;
    for (int64_t i = 0; i < n; i++)
      a[i] = red_i32(a[i], b[i], op);
    break;
  }
  case PTO_F16: {
    uint16_t *a = acc;
    const uint16_t *b = x;
    for (int64_t i = 0; i < n; i++)
      a[i] = f32_to_half(red_f32(half_to_f32(a[i]), half_to_f32(b[i]), op));
    break;
  }
  case PTO_BF16: {
    uint16_t *a = acc;
    const uint16_t *b = x;
    for (int64_t i = 0; i < n; i++)
      a[i] = f32_to_bf16(red_f32(bf16_to_f32(a[i]), bf16_to_f32(b[i]), op));
    break;
  }
  default: break; /* callers check coll_reduce_dtype_ok */
  }
}
