/* tensor_data.c — the orchestrator gets and sets tensor data in the middle
 * of a graph (pto_orch_read / pto_orch_write), on runtime-allocated and on
 * caller buffers:
 *
 *   t0: Y = 2 X                (slow)       read Y            -> must be 2X
 *   t1: Z = 3 Y                (slow: sleeps before reading Y)
 *       write Y[0:8, :] = 100 + i           -> must wait for t1 (it reads Y)
 *   t2: out = Y + X                          read Z, out, Y^T (a transposed view)
 *       write X = -1                         -> must wait for t2 (it reads X)
 *   t3: out2 = copy(X)                       read out2 -> all -1
 *
 * Every value read or computed is compared with the sequential semantics. */
#include <stdlib.h>

#include "chip_scenes.h"

#define TD_R 16
#define TD_C 32
#define TD_N (TD_R * TD_C)

typedef struct td_state {
  pto_kernel_ids k;
  int k_slow_scale;
  float x0[TD_N], x[TD_N], out[TD_N], out2[TD_N];
  float y_read[TD_N], z_read[TD_N], out_read[TD_N], yt_read[TD_N], patch[TD_N / 2];
  pto_tensor tx, tout, tout2;
} td_state;

/* t1 = s0 * t0 after sleeping s1 us (before it reads anything). */
static int td_slow_scale(const pto_kctx *ctx) {
  cs_sleep_us((int64_t)ctx->scalars[1]);
  return pto_tile_scale(&ctx->tensors[0], pto_kctx_scalar_f32(ctx, 0), &ctx->tensors[1]);
}

static int td_scale(pto_orch *o, const td_state *st, const pto_tensor *in, pto_tensor *out,
                    float alpha, int64_t us) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output(&a, out);
  pto_args_scalar_f32(&a, alpha);
  pto_args_scalar(&a, (uint64_t)us);
  return pto_submit(o, st->k_slow_scale, &a, NULL, NULL);
}

static void td_orch(pto_orch *o, void *arg) {
  td_state *st = arg;
  pto_tensor Y, Z, top, yt;
  if (cs_desc2(&Y, TD_R, TD_C) || cs_desc2(&Z, TD_R, TD_C)) goto bad;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  if (td_scale(o, st, &st->tx, &Y, 2.0f, 5000)) return;
  if (pto_orch_read(o, &Y, st->y_read, -1)) return;
  if (td_scale(o, st, &Y, &Z, 3.0f, 5000)) return;
  int64_t start[2] = {0, 0}, shape[2] = {TD_R / 2, TD_C};
  if (pto_tensor_slice(&Y, start, shape, &top)) goto bad;
  if (pto_orch_write(o, &top, st->patch, -1)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &Y);
  pto_args_input(&a, &st->tx);
  pto_args_output_existing(&a, &st->tout);
  if (cs_submit(o, st->k.add, &a, 2, NULL)) return;
  if (pto_tensor_transpose(&Y, 0, 1, &yt)) goto bad;
  if (pto_orch_read(o, &Z, st->z_read, -1) || pto_orch_read(o, &st->tout, st->out_read, -1) ||
      pto_orch_read(o, &yt, st->yt_read, -1))
    return;
  float minus[TD_N];
  for (int i = 0; i < TD_N; i++)
    minus[i] = -1.0f;
  if (pto_orch_write(o, &st->tx, minus, -1)) return;
  pto_args_init(&a);
  pto_args_input(&a, &st->tx);
  pto_args_output_existing(&a, &st->tout2);
  if (pto_submit(o, st->k.copy, &a, NULL, NULL)) return;
  pto_scope_end(o);
  return;
bad:
  pto_orch_fatal(o, "tensor_data: bad view");
}

static bool td_check(const td_state *st, pto_scene_report *rep) {
  static float y[TD_N], z[TD_N], out[TD_N], yt[TD_N], m1[TD_N];
  for (int i = 0; i < TD_N; i++) {
    y[i] = 2.0f * st->x0[i];
    z[i] = 3.0f * y[i];
    m1[i] = -1.0f;
  }
  if (!scene_check_f32(rep, "Y read after t0", st->y_read, y, TD_N, 0) ||
      !scene_check_f32(rep, "Z = 3Y (t1 read Y before the write)", st->z_read, z, TD_N, 0))
    return false;
  for (int i = 0; i < TD_N / 2; i++)
    y[i] = st->patch[i]; /* the write */
  for (int i = 0; i < TD_N; i++)
    out[i] = y[i] + st->x0[i];
  for (int r = 0; r < TD_R; r++)
    for (int c = 0; c < TD_C; c++)
      yt[c * TD_R + r] = y[r * TD_C + c];
  return scene_check_f32(rep, "out = Y + X (read mid-graph)", st->out_read, out, TD_N, 0) &&
         scene_check_f32(rep, "out after the run", st->out, out, TD_N, 0) &&
         scene_check_f32(rep, "Y^T read through a transposed view", st->yt_read, yt, TD_N, 0) &&
         scene_check_f32(rep, "out2 = X after the write", st->out2, m1, TD_N, 0);
}

static int tensor_data_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  td_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "tensor_data");
  cs_fill_rand(st->x0, TD_N, 5 + opts->seed);
  for (int i = 0; i < TD_N / 2; i++)
    st->patch[i] = 100.0f + (float)i;
  int rc = cs_view2(&st->tx, st->x, PTO_F32, TD_R, TD_C);
  rc |= cs_view2(&st->tout, st->out, PTO_F32, TD_R, TD_C);
  rc |= cs_view2(&st->tout2, st->out2, PTO_F32, TD_R, TD_C);
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = pto_kernel_register_aiv(chip, "slow_scale", td_slow_scale, &st->k_slow_scale);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memcpy(st->x, st->x0, sizeof st->x);
    rc = scene_run_rounds(chip, &one, td_orch, st, rep);
    if (!rc && !(rep->verified = td_check(st, rep))) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "tensor_data");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "reads wait for producers, writes wait for earlier readers (heap and caller "
             "buffers), a transposed view reads packed: all %d values match",
             TD_N);
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(tensor_data, "get/set tensor data from the orchestrator in the middle of a graph",
               tensor_data_run, PTO_SCENE_RANDOM);
