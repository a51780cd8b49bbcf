/* pto/redux.h — reductions: the ops of PTO_REDUX arguments.
 *
 * A task with a PTO_REDUX argument contributes to a reduction of that view
 * (pto_args_redux(&a, &t, op), or PTO_REDUX(&t, op) in pto_submit_v): its
 * kernel sees a private copy of the view (contiguous, same dtype and
 * shape; one per core of the task: each block, each core of a MIX block),
 * set to the op's identity, and accumulates into it. The copies of
 * consecutive contributions to the same view are combined into the tensor
 * by a "redux_combine" task, in submission order (then block, then core),
 * before the next access to those bytes that is not a contribution with
 * the same op and view, a host read or write of them, the end of the scope
 * or the end of the orchestration. docs/chip.md (Reductions) has the
 * rules. */
#ifndef PTO_REDUX_H
#define PTO_REDUX_H

#include "pto/export.h"
#include <stdint.h>

#include "pto/chip.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Built-in ops, over every pto_dtype (integers wrap modulo 2^bits; f16 and
 * bf16 are combined in f32 and rounded at each step). Identities: 0, 1,
 * the lowest value (-inf for floats), the highest (+inf). */
typedef enum pto_redux_builtin {
  PTO_REDUX_SUM = 0,
  PTO_REDUX_PROD,
  PTO_REDUX_MAX,
  PTO_REDUX_MIN,
  PTO_REDUX_BUILTINS
} pto_redux_builtin;

/* Ops registered on a chip get ids PTO_REDUX_USER, PTO_REDUX_USER + 1, ... */
#define PTO_REDUX_USER     16
#define PTO_MAX_REDUX_OPS  16
#define PTO_REDUX_MAX_NAME 32

/* A user-defined op over one dtype. Both functions work on n contiguous
 * elements and must not fail; `combine` must be associative for the
 * result not to depend on how contributions were grouped into tasks. */
typedef struct pto_redux_op_desc {
  const char *name; /* shown in error details: < PTO_REDUX_MAX_NAME bytes, no control characters */
  int32_t dtype;    /* pto_dtype of the views it reduces */
  /* dst[0..n) = the identity (runs on the core of each contribution, on
   * its own copy, before its kernel: on several threads at once; on the
   * orchestrator's thread for a dummy task and in checking mode) */
  void (*init)(void *dst, int64_t n);
  /* acc[i] = acc[i] op src[i] for i in [0, n) (runs in the combine task) */
  void (*combine)(void *acc, const void *src, int64_t n);
} pto_redux_op_desc;

/* Registers an op on `chip` (between runs) and sets *op to its id.
 * PTO_EINVAL for a NULL or incomplete desc, a name too long or with a
 * control character, an unknown dtype, or more than
 * PTO_MAX_REDUX_OPS ops; PTO_EBUSY during a run. A refused registration
 * says why in pto_last_error(). */
PTO_API int pto_redux_register(pto_chip *chip, const pto_redux_op_desc *d, int *op);

/* The op's name ("sum", "prod", "max", "min" or the registered name), or
 * NULL when `op` is none of them. */
PTO_API const char *pto_redux_op_name(const pto_chip *chip, int op);

#ifdef __cplusplus
}
#endif
#endif
