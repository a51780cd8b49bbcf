/* quickstart.c — the README's example: y = (a + b) * 2, then sum of rows,
 * as three tasks whose order pto infers from the tensors they touch. */
#include <stdio.h>

#include "pto/pto.h"

enum { R = 4, C = 8 };
static float a[R][C], b[R][C], y[R][C], rows[R];

static int add(const pto_kctx *k) { /* tensors: a, b, out */
  for (int i = 0; i < R * C; i++)
    pto_tensor_f32(&k->tensors[2])[i] =
        pto_tensor_f32(&k->tensors[0])[i] + pto_tensor_f32(&k->tensors[1])[i];
  return 0;
}
static int twice(const pto_kctx *k) { /* tensors: inout */
  for (int i = 0; i < R * C; i++)
    pto_tensor_f32(&k->tensors[0])[i] *= 2;
  return 0;
}
static int row_sum(const pto_kctx *k) { /* tensors: in, out; one block per row */
  const float *in = pto_tensor_f32(&k->tensors[0]) + k->block_idx * C;
  float s = 0;
  for (int j = 0; j < C; j++)
    s += in[j];
  pto_tensor_f32(&k->tensors[1])[k->block_idx] = s;
  return 0;
}

static int k_add, k_twice, k_sum;

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  int64_t shape[2] = {R, C}, n = R;
  pto_tensor ta, tb, ty, tr;
  pto_tensor_init(&ta, a, sizeof a, PTO_F32, 2, shape);
  pto_tensor_init(&tb, b, sizeof b, PTO_F32, 2, shape);
  pto_tensor_init(&ty, y, sizeof y, PTO_F32, 2, shape);
  pto_tensor_init(&tr, rows, sizeof rows, PTO_F32, 1, &n);

  pto_args args;
  pto_args_init(&args); /* y = a + b */
  pto_args_input(&args, &ta);
  pto_args_input(&args, &tb);
  pto_args_output_existing(&args, &ty);
  pto_submit(o, k_add, &args, NULL, NULL);

  pto_args_init(&args); /* y *= 2: waits for the add (it writes y) */
  pto_args_inout(&args, &ty);
  pto_submit(o, k_twice, &args, NULL, NULL);

  pto_args_init(&args); /* rows = sum(y, axis 1): R blocks, after the scale */
  pto_args_input(&args, &ty);
  pto_args_output_existing(&args, &tr);
  pto_submit_opts spmd = {.block_num = R};
  pto_submit(o, k_sum, &args, &spmd, NULL);
}

int main(void) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++)
      a[i][j] = (float)i, b[i][j] = (float)j;

  pto_chip_config cfg;
  pto_chip_config_init(&cfg); /* 8 clusters of 1 AIC + 2 AIV, 3 schedulers */
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip)) return 1;
  pto_kernel_register_aiv(chip, "add", add, &k_add);
  pto_kernel_register_aiv(chip, "twice", twice, &k_twice);
  pto_kernel_register_aiv(chip, "row_sum", row_sum, &k_sum);

  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(chip, orchestrate, NULL, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  for (int i = 0; i < R; i++)
    printf("row %d: %g (expected %g)\n", i, rows[i], 2.0 * (C * i + 28));
  printf("%llu tasks in %.0f us\n", (unsigned long long)st.tasks, st.effective_us);
  for (int i = 0; i < R; i++)
    if (rows[i] != 2.0f * (C * i + 28)) return 1;
  return rc ? 1 : 0;
}
