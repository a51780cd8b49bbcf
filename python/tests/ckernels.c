/* ckernels.c — C kernels the Python tests load by path (built by conftest.py). */
#include <time.h>

#include "pto/kernel.h"
#include "pto/kernels.h"

/* does nothing: the submit-cost benchmark's kernel */
int k_empty(const pto_kctx *ctx) {
  (void)ctx;
  return 0;
}

/* t1[i] = t0[i] * s0 (f32 scalar) + block_idx, over the whole 1-D view */
int k_axpb(const pto_kctx *ctx) {
  const pto_tensor *x = &ctx->tensors[0], *y = &ctx->tensors[1];
  float s = pto_kctx_scalar_f32(ctx, 0);
  for (int64_t i = ctx->block_idx; i < x->shape[0]; i += ctx->block_num) {
    float *xi = (float *)x->buf + x->offset + i * x->stride[0];
    float *yi = (float *)y->buf + y->offset + i * y->stride[0];
    *yi = *xi * s;
  }
  return 0;
}

/* sleeps scalar 0 microseconds (shows that C kernels run without the GIL) */
int k_sleep(const pto_kctx *ctx) {
  struct timespec ts = {0, (long)ctx->scalars[0] * 1000};
  nanosleep(&ts, 0);
  return 0;
}

/* fails the run with PTO_EKERNEL */
int k_fail(const pto_kctx *ctx) {
  (void)ctx;
  return -15;
}

/* t2 = t0 + t1 through libpto's pto_tile_add: a kernel library that links
 * libpto (the one the pto package already loaded) */
int k_tile_add(const pto_kctx *ctx) {
  return pto_tile_add(&ctx->tensors[0], &ctx->tensors[1], &ctx->tensors[2]);
}
