/* The README's tour: y = (a + b) * 3, then the sum of each row of y, as
 * three tasks whose order pto infers from the tensors they touch. */
#include <stdio.h>

#include "pto/pto.h"

enum { R = 4, C = 8 };
static float a[R][C], b[R][C], y[R][C], rows[R];

static int add(const pto_kctx *k) { /* tensors: a, b, out */
  const float *x = pto_tensor_f32(&k->tensors[0]), *z = pto_tensor_f32(&k->tensors[1]);
  float *out = pto_tensor_f32(&k->tensors[2]);
  for (int i = 0; i < R * C; i++)
    out[i] = x[i] + z[i];
  return 0;
}
static int scale(const pto_kctx *k) { /* tensors: inout; scalar 0: the factor */
  float *v = pto_tensor_f32(&k->tensors[0]), f = pto_kctx_scalar_f32(k, 0);
  for (int i = 0; i < R * C; i++)
    v[i] *= f;
  return 0;
}
static int row_sum(const pto_kctx *k) { /* tensors: in, out; block i sums row i */
  const float *in = pto_tensor_f32(&k->tensors[0]) + k->block_idx * C;
  float s = 0;
  for (int j = 0; j < C; j++)
    s += in[j];
  pto_tensor_f32(&k->tensors[1])[k->block_idx] = s;
  return 0;
}

static int k_add = -1, k_scale = -1, k_sum = -1; /* until registered: refused */

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  int64_t shape[2] = {R, C}, n = R;
  pto_tensor ta, tb, ty, tr;
  if (pto_tensor_init(&ta, a, sizeof a, PTO_F32, 2, shape) ||
      pto_tensor_init(&tb, b, sizeof b, PTO_F32, 2, shape) ||
      pto_tensor_init(&ty, y, sizeof y, PTO_F32, 2, shape) ||
      pto_tensor_init(&tr, rows, sizeof rows, PTO_F32, 1, &n)) {
    pto_orch_fatal(o, "cannot describe the tensors");
    return;
  }
  /* Each submit returns 0 or the run's latched error (then stop). */
  if (pto_submit_v(o, k_add, PTO_IN(&ta), PTO_IN(&tb), PTO_OUT_EXISTING(&ty))) return;
  /* y *= 3: after the add, which writes y */
  if (pto_submit_v(o, k_scale, PTO_INOUT(&ty), PTO_SCALAR(3.0f))) return;
  /* rows = the sums of y's rows, one block per row: after the scale */
  pto_submit_v(o, k_sum, PTO_IN(&ty), PTO_OUT_EXISTING(&tr), PTO_BLOCKS(R));
}

int main(void) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      a[i][j] = (float)(i + 1);
      b[i][j] = (float)(j + 1);
    }
  pto_chip_config cfg;
  pto_chip_config_init(&cfg); /* 8 clusters of 1 AIC + 2 AIV */
  pto_chip *chip;
  pto_error_info err; /* what went wrong, when something does */
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc) {
    pto_error_print(&err, stderr);
    return 1;
  }
  if ((rc = pto_kernel_register_aiv(chip, "add", add, &k_add)) ||
      (rc = pto_kernel_register_aiv(chip, "scale", scale, &k_scale)) ||
      (rc = pto_kernel_register_aiv(chip, "row_sum", row_sum, &k_sum))) {
    fprintf(stderr, "pto_kernel_register_aiv: %s\n", pto_strerror(rc));
    pto_chip_destroy(chip);
    return 1;
  }
  pto_run_stats st;
  rc = pto_chip_run(chip, orchestrate, NULL, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  if (rc) return 1;
  int wrong = 0;
  for (int i = 0; i < R; i++) {
    float want = 3.0f * (float)(C * (i + 1) + C * (C + 1) / 2); /* 3 * sum of (i+1) + (j+1) */
    printf("row %d: sum %g (expected %g)\n", i, rows[i], want);
    wrong += rows[i] != want;
  }
  printf("%llu tasks, %llu blocks, %.0f us: %s\n", (unsigned long long)st.tasks,
         (unsigned long long)st.blocks, st.effective_us, wrong ? "WRONG" : "ok");
  return wrong ? 1 : 0;
}
