/* coll_reduce.h — element-wise reduction of the collectives: acc = acc op x
 * for f32, f64, f16, bf16 (computed in f32, rounded to nearest even) and
 * i32 (wrapping). */
#ifndef PTO_COMM_COLL_REDUCE_H
#define PTO_COMM_COLL_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/coll.h"

bool coll_reduce_dtype_ok(pto_dtype dt);
bool coll_reduce_op_ok(pto_red_op op);
const char *coll_red_op_name(pto_red_op op);
/* acc[i] = acc[i] op x[i] for n elements of dtype dt; acc and x do not
 * overlap. */
void coll_reduce(void *acc, const void *x, int64_t n, pto_dtype dt, pto_red_op op);
/* acc[i] = x[i] op acc[i]: x the first operand (the order matters to the
 * bits: a NaN against max or min, two NaNs' payloads against a sum) */
void coll_reduce_after(const void *x, void *acc, int64_t n, pto_dtype dt, pto_red_op op);

#endif
