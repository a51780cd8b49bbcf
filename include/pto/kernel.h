/* pto/kernel.h — what a kernel sees while it runs on a simulated core. */
#ifndef PTO_KERNEL_H
#define PTO_KERNEL_H

#include "pto/export.h"
#include <stdbool.h>
#include <stdint.h>

#include "pto/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PTO_MAX_TENSOR_ARGS 32
#define PTO_MAX_SCALAR_ARGS 16

typedef enum pto_core_type { PTO_CORE_AIC = 0, PTO_CORE_AIV = 1 } pto_core_type;

typedef int64_t pto_task_id;
#define PTO_TASK_NONE ((pto_task_id)-1)

typedef struct pto_kctx {
  int32_t block_idx; /* 0..block_num-1 */
  int32_t block_num;
  int32_t sub_block_id; /* 0 or 1 for the two AIV of a MIX block, else 0 */
  int32_t core_id;      /* chip-wide core index */
  int32_t cluster_id;
  pto_core_type core_type;
  pto_task_id task_id;
  int32_t ntensors;
  int32_t nscalars;
  const pto_tensor *tensors; /* in argument order */
  const uint64_t *scalars;
  void *env;       /* the chip's environment pointer (pto_chip_config.env) */
  const void *run; /* private: the run this block belongs to */
} pto_kctx;

/* A kernel returns 0, or a negative code which fails the run (PTO_EKERNEL
 * unless the code is a pto status: a C `return -1` is PTO_EINVAL, and the
 * run's details say so). A failure of the kernel's own is best
 * `return pto_kctx_fail(ctx, PTO_EKERNEL, "why")`. */
typedef int (*pto_kernel_fn)(const pto_kctx *ctx);

/* True once the run has failed or is shutting down: a long-running kernel
 * should poll this and return (it is how a stuck kernel is "reset"). On a
 * node's chip also once the node cancelled the node task the run belongs
 * to (pto_node_cancel, or another chip of its group task failed), or
 * stopped the chip (the node failed; under mpirun chip 0, a thread of rank
 * 0): the first call that sees that fails the chip's run with
 * PTO_ESHUTDOWN ("the node cancelled chip 0's task: ...", "the node
 * stopped chip 0 (the node failed)"), so its blocks not started
 * never start and the run ends once the running ones have returned. Cheap
 * enough for a hot loop: a few loads and no write until it turns true. */
PTO_API bool pto_kctx_cancelled(const pto_kctx *ctx);

/* A kernel that fails says why: `return pto_kctx_fail(ctx, PTO_EINVAL,
 * "tensor 0 (a) is int32, needs float32");` records the reason (printf
 * format, truncated to about 300 characters) and returns `code`, or
 * PTO_EKERNEL when `code` is not negative (0 among them: returned, it fails
 * the block all the same); the run's error details then end with it, after
 * the kernel, block and core. Call it only on the way out of a failing
 * kernel. */
PTO_API int pto_kctx_fail(const pto_kctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Asynchronous completion: a kernel that hands its block's completion to
 * something else (a simulated DMA engine, a host thread) calls this before
 * returning. The core is free as soon as the kernel returns, but the block
 * counts as finished only when pto_chip_async_complete(chip, *token) is
 * called. Fails with PTO_EASYNC_OVERFLOW when more than
 * pto_chip_config.async_slots completions are outstanding, and with
 * PTO_EINVAL for a NULL token or a second call in one block; a refused
 * call says why in pto_last_error(), and a kernel that returns its code
 * fails the run with that reason in the details. */
PTO_API int pto_kctx_async_begin(const pto_kctx *ctx, uint64_t *token);

static inline float pto_kctx_scalar_f32(const pto_kctx *c, int i) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = (uint32_t)c->scalars[i];
  return v.f;
}

#ifdef __cplusplus
}
#endif
#endif
