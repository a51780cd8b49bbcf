/* redux_dot.c — reductions (PTO_REDUX, docs/chip.md Reductions): a dot
 * product of RD_TASKS chunks, each task adding its partial into one f32
 * through PTO_REDUX sum, and the same chunks' largest element into an i32
 * through PTO_REDUX max. The terms differ in size by 10^9, so the f32 sum
 * depends on the order its terms are added in: it must equal the
 * sequential loop bit for bit (the contributions' private copies are
 * folded in submission order), whatever the schedule. An INOUT task before
 * the group scales the accumulator, and a reader after it copies the
 * result: both ordered against the whole group. */
#include <stdlib.h>

#include "chip_scenes.h"

#define RD_TASKS 512
#define RD_LEN   16

typedef struct rd_state {
  int k_dot, k_max, k_scale, k_copy;
  float x[RD_TASKS * RD_LEN], y[RD_TASKS * RD_LEN];
  float acc, copy;
  int32_t top;
  pto_tensor tacc, tcopy, ttop;
} rd_state;

/* t2 (REDUX sum, f32[1]) += t0 . t1 */
static int rd_dot(const pto_kctx *ctx) {
  const float *x = ctx->tensors[0].buf, *y = ctx->tensors[1].buf;
  x += ctx->tensors[0].offset;
  y += ctx->tensors[1].offset;
  float s = 0;
  for (int j = 0; j < RD_LEN; j++)
    s += x[j] * y[j];
  *((float *)ctx->tensors[2].buf + ctx->tensors[2].offset) += s;
  return PTO_OK;
}

/* t1 (REDUX max, i32[1]) = max(t1, largest of t0 as integers) */
static int rd_max(const pto_kctx *ctx) {
  const float *x = (const float *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  int32_t *m = (int32_t *)ctx->tensors[1].buf + ctx->tensors[1].offset;
  for (int j = 0; j < RD_LEN; j++)
    if ((int32_t)x[j] > *m) *m = (int32_t)x[j];
  return PTO_OK;
}

/* t0 (INOUT) *= s0 */
static int rd_scale(const pto_kctx *ctx) {
  *((float *)ctx->tensors[0].buf + ctx->tensors[0].offset) *= pto_kctx_scalar_f32(ctx, 0);
  return PTO_OK;
}

/* t1 = t0 */
static int rd_copy(const pto_kctx *ctx) {
  *((float *)ctx->tensors[1].buf + ctx->tensors[1].offset) =
      *((const float *)ctx->tensors[0].buf + ctx->tensors[0].offset);
  return PTO_OK;
}

static void rd_orch(pto_orch *o, void *arg) {
  rd_state *st = arg;
  if (pto_submit_v(o, st->k_scale, PTO_INOUT(&st->tacc), PTO_SCALAR(3.0f))) return;
  for (int i = 0; i < RD_TASKS; i++) {
    pto_tensor x, y;
    int64_t len = RD_LEN;
    if (pto_tensor_init(&x, &st->x[i * RD_LEN], sizeof(float) * RD_LEN, PTO_F32, 1, &len) ||
        pto_tensor_init(&y, &st->y[i * RD_LEN], sizeof(float) * RD_LEN, PTO_F32, 1, &len)) {
      pto_orch_fatal(o, "redux_dot: bad chunk view");
      return;
    }
    if (pto_submit_v(o, st->k_dot, PTO_IN(&x), PTO_IN(&y), PTO_REDUX(&st->tacc, PTO_REDUX_SUM),
                     PTO_PRIORITY(i % 4)) ||
        pto_submit_v(o, st->k_max, PTO_IN(&x), PTO_REDUX(&st->ttop, PTO_REDUX_MAX)))
      return;
  }
  pto_submit_v(o, st->k_copy, PTO_IN(&st->tacc), PTO_OUT_EXISTING(&st->tcopy));
}

static int redux_dot_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  rd_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "redux_dot");
  float want = 0;
  int32_t top = INT32_MIN;
  for (int i = 0; i < RD_TASKS * RD_LEN; i++) {
    st->x[i] = (float)((i * 7919) % 2001 - 1000) * (i % 3 == 0 ? 1e6f : 1e-3f);
    st->y[i] = (float)((i * 104729) % 17 - 8);
  }
  int rc = cs_view2(&st->tacc, &st->acc, PTO_F32, 1, 1);
  rc |= cs_view2(&st->tcopy, &st->copy, PTO_F32, 1, 1);
  rc |= cs_view2(&st->ttop, &st->top, PTO_I32, 1, 1);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 2, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "dot", rd_dot, &st->k_dot);
  if (!rc) rc = pto_kernel_register_aiv(chip, "max", rd_max, &st->k_max);
  if (!rc) rc = pto_kernel_register_aiv(chip, "scale", rd_scale, &st->k_scale);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy", rd_copy, &st->k_copy);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    st->acc = 0.25f;
    st->copy = 0;
    st->top = -5000;
    rc = scene_run_rounds(chip, &one, rd_orch, st, rep);
    if (rc) break;
    /* the sequential loop: the scale, then each partial in task order */
    want = 0.25f * 3.0f;
    top = -5000;
    for (int i = 0; i < RD_TASKS; i++) {
      float s = 0;
      for (int j = 0; j < RD_LEN; j++) {
        s += st->x[i * RD_LEN + j] * st->y[i * RD_LEN + j];
        if ((int32_t)st->x[i * RD_LEN + j] > top) top = (int32_t)st->x[i * RD_LEN + j];
      }
      want += s;
    }
    rep->verified =
        scene_check_f32(rep, "dot (sum, bit for bit)", &st->acc, &want, 1, 0) &&
        scene_check_f32(rep, "copy of the dot after the group", &st->copy, &want, 1, 0) &&
        scene_check_i32(rep, "max", &st->top, &top, 1);
    if (!rep->verified) break;
  }
  if (rc) {
    cs_run_failed(rep, rc, "redux_dot");
  } else if (rep->verified) {
    snprintf(rep->message, sizeof rep->message,
             "%d contributions to an f32 sum equal the sequential loop bit for bit (%.9g), and "
             "to an i32 max (%d)",
             RD_TASKS, (double)want, top);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(redux_dot, "reductions: a dot product by PTO_REDUX sum, bit for bit, and a max",
          redux_dot_run);
