/* matmul_add.c — alternating AIC and AIV tasks: six layers of
 *
 *   Y_i = X_i · W_i      (AIC matmul, 2 blocks, OUTPUT Y_i)
 *   X_{i+1} = Y_i + B_i  (AIV add, 3 blocks; the last one into `out`)
 *
 * Each task waits for the previous one of the other core type; the result
 * must equal the same layers computed sequentially (in double). */
#include <stdlib.h>

#include "chip_scenes.h"

#define MA_DIM    32
#define MA_N      (MA_DIM * MA_DIM)
#define MA_LAYERS 6

typedef struct ma_state {
  pto_kernel_ids k;
  float x[MA_N], w[MA_LAYERS][MA_N], b[MA_LAYERS][MA_N], out[MA_N];
  pto_tensor tx, tw[MA_LAYERS], tb[MA_LAYERS], tout;
} ma_state;

static void ma_orch(pto_orch *o, void *arg) {
  ma_state *st = arg;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  pto_tensor x = st->tx;
  for (int i = 0; i < MA_LAYERS; i++) {
    pto_tensor y, next;
    if (cs_desc2(&y, MA_DIM, MA_DIM) || cs_desc2(&next, MA_DIM, MA_DIM)) {
      pto_orch_fatal(o, "matmul_add: bad descriptor");
      return;
    }
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &x);
    pto_args_input(&a, &st->tw[i]);
    pto_args_output(&a, &y);
    if (cs_submit(o, st->k.matmul, &a, 2, NULL)) return;
    const bool last = i == MA_LAYERS - 1;
    pto_args_init(&a);
    pto_args_input(&a, &y);
    pto_args_input(&a, &st->tb[i]);
    if (last)
      pto_args_output_existing(&a, &st->tout);
    else
      pto_args_output(&a, &next);
    if (cs_submit(o, st->k.add, &a, 3, NULL)) return;
    x = next;
  }
  pto_scope_end(o);
}

static void ma_reference(const ma_state *st, float *ref) {
  double x[MA_N], y[MA_N];
  for (int i = 0; i < MA_N; i++)
    x[i] = st->x[i];
  for (int l = 0; l < MA_LAYERS; l++) {
    for (int r = 0; r < MA_DIM; r++)
      for (int c = 0; c < MA_DIM; c++) {
        double s = 0;
        for (int k = 0; k < MA_DIM; k++)
          s += x[r * MA_DIM + k] * st->w[l][k * MA_DIM + c];
        y[r * MA_DIM + c] = s;
      }
    for (int i = 0; i < MA_N; i++)
      x[i] = y[i] + st->b[l][i];
  }
  for (int i = 0; i < MA_N; i++)
    ref[i] = (float)x[i];
}

static int matmul_add_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ma_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "matmul_add");
  int rc = PTO_OK;
  cs_fill_rand(st->x, MA_N, 101 + opts->seed);
  rc |= cs_view2(&st->tx, st->x, PTO_F32, MA_DIM, MA_DIM);
  for (int l = 0; l < MA_LAYERS; l++) {
    cs_fill_rand(st->w[l], MA_N, 200 + (uint64_t)l * 7 + opts->seed);
    cs_fill_rand(st->b[l], MA_N, 300 + (uint64_t)l * 7 + opts->seed);
    for (int i = 0; i < MA_N; i++)
      st->w[l][i] *= 0.25f; /* keep magnitudes near 1 */
    rc |= cs_view2(&st->tw[l], st->w[l], PTO_F32, MA_DIM, MA_DIM);
    rc |= cs_view2(&st->tb[l], st->b[l], PTO_F32, MA_DIM, MA_DIM);
  }
  rc |= cs_view2(&st->tout, st->out, PTO_F32, MA_DIM, MA_DIM);
  for (int i = 0; i < MA_N; i++)
    st->out[i] = -1e30f;
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = scene_run_rounds(chip, opts, ma_orch, st, rep);
  if (rc) {
    cs_run_failed(rep, rc, "matmul_add");
  } else {
    float ref[MA_N];
    ma_reference(st, ref);
    rep->verified = scene_check_f32(rep, "out", st->out, ref, MA_N, 1e-4f);
    if (rep->verified)
      snprintf(rep->message, sizeof rep->message,
               "%d layers of matmul (AIC) then add (AIV), %dx%d: out matches the sequential "
               "reference within 1e-4",
               MA_LAYERS, MA_DIM, MA_DIM);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(matmul_add, "alternating matmul (AIC) and add (AIV) tasks, 6 layers", matmul_add_run,
               PTO_SCENE_RANDOM);
