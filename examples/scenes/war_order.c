/* war_order.c — write-after-read: a writer waits for the earlier readers
 * of an overlapping region, so what executes is the sequential order.
 * (The reference runtime does not track this; pto does.) Readers sleep
 * before they read, writers write at once, so a writer that does not wait
 * changes what a reader sees.
 *
 *   r0: O0 = X[0:4, :]        (slow)
 *   r1: O1 = X                (slow, 4 blocks)
 *   r2: O2 = X[6:8, :]^T      (slow, transposed view)
 *   w0: X[2:6, :] = 99        must wait for r0 and r1
 *   r3: O3 = X                (slow)
 *   w1: X = 2 X               (in place) must wait for r3 (and w0)
 *   r4: O4 = X
 */
#include <stdlib.h>

#include "chip_scenes.h"

#define WO_R 8
#define WO_C 64
#define WO_N (WO_R * WO_C)

typedef struct wo_state {
  pto_kernel_ids k;
  int k_slow_copy;
  float x0[WO_N], x[WO_N], o0[WO_N / 2], o1[WO_N], o2[WO_N / 4], o3[WO_N], o4[WO_N];
  pto_tensor tx, to0, to1, to2, to3, to4;
} wo_state;

/* pto_kern_copy after sleeping s0 us (before reading). */
static int wo_slow_copy(const pto_kctx *ctx) {
  cs_sleep_us((int64_t)ctx->scalars[0]);
  return pto_kern_copy(ctx);
}

static int wo_read(pto_orch *o, const wo_state *st, const pto_tensor *in, const pto_tensor *out,
                   int64_t us, int blocks) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output_existing(&a, out);
  pto_args_scalar(&a, (uint64_t)us);
  return cs_submit(o, st->k_slow_copy, &a, blocks, NULL);
}

static void wo_orch(pto_orch *o, void *arg) {
  wo_state *st = arg;
  pto_tensor top, mid, bottom, bottom_t;
  int64_t s0[2] = {0, 0}, n0[2] = {4, WO_C}, s1[2] = {2, 0}, n1[2] = {4, WO_C};
  int64_t s2[2] = {6, 0}, n2[2] = {2, WO_C};
  if (pto_tensor_slice(&st->tx, s0, n0, &top) || pto_tensor_slice(&st->tx, s1, n1, &mid) ||
      pto_tensor_slice(&st->tx, s2, n2, &bottom) ||
      pto_tensor_transpose(&bottom, 0, 1, &bottom_t)) {
    pto_orch_fatal(o, "war_order: bad view");
    return;
  }
  if (wo_read(o, st, &top, &st->to0, 5000, 1) || wo_read(o, st, &st->tx, &st->to1, 3000, 4) ||
      wo_read(o, st, &bottom_t, &st->to2, 4000, 1))
    return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &mid);
  pto_args_scalar_f32(&a, 99.0f);
  if (pto_submit(o, st->k.fill, &a, NULL, NULL)) return;
  if (wo_read(o, st, &st->tx, &st->to3, 3000, 2)) return;
  pto_args_init(&a);
  pto_args_input(&a, &st->tx);
  pto_args_output_existing(&a, &st->tx);
  pto_args_scalar_f32(&a, 2.0f);
  if (cs_submit(o, st->k.scale, &a, 2, NULL)) return;
  wo_read(o, st, &st->tx, &st->to4, 0, 1);
}

static bool wo_check(const wo_state *st, pto_scene_report *rep) {
  float e0[WO_N / 2], e2[WO_N / 4], e3[WO_N], e4[WO_N];
  memcpy(e0, st->x0, sizeof e0);
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < WO_C; c++)
      e2[c * 2 + r] = st->x0[(6 + r) * WO_C + c];
  for (int i = 0; i < WO_N; i++) {
    e3[i] = i / WO_C >= 2 && i / WO_C < 6 ? 99.0f : st->x0[i];
    e4[i] = 2.0f * e3[i];
  }
  return scene_check_f32(rep, "O0 = X[0:4] before w0", st->o0, e0, WO_N / 2, 0) &&
         scene_check_f32(rep, "O1 = X before w0", st->o1, st->x0, WO_N, 0) &&
         scene_check_f32(rep, "O2 = X[6:8]^T", st->o2, e2, WO_N / 4, 0) &&
         scene_check_f32(rep, "O3 = X after w0, before w1", st->o3, e3, WO_N, 0) &&
         scene_check_f32(rep, "O4 = X after w1", st->o4, e4, WO_N, 0) &&
         scene_check_f32(rep, "X at the end", st->x, e4, WO_N, 0);
}

static int war_order_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  wo_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "war_order");
  cs_fill_rand(st->x0, WO_N, 31 + opts->seed);
  int rc = cs_view2(&st->tx, st->x, PTO_F32, WO_R, WO_C);
  rc |= cs_view2(&st->to0, st->o0, PTO_F32, WO_R / 2, WO_C);
  rc |= cs_view2(&st->to1, st->o1, PTO_F32, WO_R, WO_C);
  rc |= cs_view2(&st->to2, st->o2, PTO_F32, WO_C, 2);
  rc |= cs_view2(&st->to3, st->o3, PTO_F32, WO_R, WO_C);
  rc |= cs_view2(&st->to4, st->o4, PTO_F32, WO_R, WO_C);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = pto_kernel_register_aiv(chip, "slow_copy", wo_slow_copy, &st->k_slow_copy);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memcpy(st->x, st->x0, sizeof st->x);
    rc = scene_run_rounds(chip, &one, wo_orch, st, rep);
    if (!rc && !(rep->verified = wo_check(st, rep))) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "war_order");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "writers on overlapping views waited for the slow earlier readers (slices, a "
             "transposed view, a 4-block reader): every reader saw the sequential data");
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(war_order,
               "write-after-read: a writer waits for earlier readers of overlapping views",
               war_order_run, PTO_SCENE_RANDOM);
