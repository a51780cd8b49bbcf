/* all_shapes.c — all five resource shapes in one graph: AIC, AIV, MIX
 * AIV x2, MIX AIC+AIV and MIX AIC+AIV x2, registered through
 * pto_kernel_register(). Two chains run side by side, one visiting the
 * shapes in order and one in reverse; every task adds its constant to a
 * [24, 16] tile, its rows split over 3 blocks and then over the block's
 * cores. Each core of a block also writes a marker (visits, cluster_id,
 * sub_block_id, core type), so the scene checks that the parts of a MIX
 * block ran once each, on one cluster, with sub_block_id 0 and 1 for the
 * two AIV. */
#include <stdlib.h>

#include "chip_scenes.h"

#define AS_ROWS   24
#define AS_COLS   16
#define AS_N      (AS_ROWS * AS_COLS)
#define AS_SHAPES 5
#define AS_TASKS  (2 * AS_SHAPES)
#define AS_BLOCKS 3
#define AS_MK     4 /* marker fields: visits, cluster, sub_block, core type */
#define AS_MARKS  (AS_BLOCKS * 3 * AS_MK)

static const struct {
  const char *name;
  bool aic;
  int aiv;
} as_shapes[AS_SHAPES] = {
    {"shape_aic", true, 0},     {"shape_aiv", false, 1},     {"shape_aiv2", false, 2},
    {"shape_aic_aiv", true, 1}, {"shape_aic_aiv2", true, 2},
};

typedef struct as_state {
  int kid[AS_SHAPES];
  float in[2][AS_N], out[2][AS_N];
  int32_t marks[AS_TASKS][AS_MARKS];
  pto_tensor tin[2], tout[2], tmarks[AS_TASKS];
} as_state;

/* t0 in, t1 out, t2 markers; s0 addend (f32), s1 has_aic, s2 parts. */
static int as_kernel(const pto_kctx *ctx) {
  if (ctx->ntensors != 3 || ctx->nscalars != 3) return PTO_EINVAL;
  const float add = pto_kctx_scalar_f32(ctx, 0);
  const int has_aic = (int)ctx->scalars[1], parts = (int)ctx->scalars[2];
  const int part = cs_part(ctx, has_aic);
  int64_t lo, hi, plo, phi;
  pto_split_range(AS_ROWS, ctx->block_idx, ctx->block_num, &lo, &hi);
  pto_split_range(hi - lo, part, parts, &plo, &phi);
  const pto_tensor *in = &ctx->tensors[0], *out = &ctx->tensors[1];
  for (int64_t r = lo + plo; r < lo + phi; r++)
    for (int64_t c = 0; c < AS_COLS; c++) {
      int64_t idx[2] = {r, c};
      *(float *)pto_tensor_at(out, idx) = *(const float *)pto_tensor_at(in, idx) + add;
    }
  int32_t *m = (int32_t *)ctx->tensors[2].buf + ctx->tensors[2].offset +
               ((int64_t)ctx->block_idx * 3 + part) * AS_MK;
  m[1] = ctx->cluster_id;
  m[2] = ctx->sub_block_id;
  m[3] = (int32_t)ctx->core_type;
  cs_mark(&m[0]);
  cs_sleep_us(200); /* hold the cores so the two chains overlap */
  return PTO_OK;
}

static int as_task(pto_orch *o, const as_state *st, int shape, const pto_tensor *in,
                   pto_tensor *out, bool existing, const pto_tensor *marks) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  if (existing)
    pto_args_output_existing(&a, out);
  else
    pto_args_output(&a, out);
  pto_args_output_existing(&a, marks);
  pto_args_scalar_f32(&a, (float)(shape + 1));
  pto_args_scalar(&a, as_shapes[shape].aic);
  pto_args_scalar(&a, (uint64_t)(as_shapes[shape].aic + as_shapes[shape].aiv));
  return cs_submit(o, st->kid[shape], &a, AS_BLOCKS, NULL);
}

static void as_orch(pto_orch *o, void *arg) {
  as_state *st = arg;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  pto_tensor cur[2] = {st->tin[0], st->tin[1]};
  /* interleave the chains so both are in flight at once */
  for (int step = 0; step < AS_SHAPES; step++) {
    for (int ch = 0; ch < 2; ch++) {
      const int shape = ch == 0 ? step : AS_SHAPES - 1 - step;
      const bool last = step == AS_SHAPES - 1;
      pto_tensor next;
      if (last)
        next = st->tout[ch];
      else if (cs_desc2(&next, AS_ROWS, AS_COLS)) {
        pto_orch_fatal(o, "all_shapes: bad descriptor");
        return;
      }
      if (as_task(o, st, shape, &cur[ch], &next, last, &st->tmarks[ch * AS_SHAPES + step])) return;
      cur[ch] = next;
    }
  }
  pto_scope_end(o);
}

/* Expected markers of one task: every part of the shape visited once, on
 * the cluster its first part reports, with the right sub_block_id and
 * core type; parts the shape lacks untouched. */
static void as_expected_marks(const as_state *st, int task, int shape, int32_t *exp) {
  const int has_aic = as_shapes[shape].aic, parts = has_aic + as_shapes[shape].aiv;
  memset(exp, 0, sizeof(int32_t) * AS_MARKS);
  for (int b = 0; b < AS_BLOCKS; b++) {
    const int32_t cluster = st->marks[task][(b * 3) * AS_MK + 1];
    for (int p = 0; p < parts; p++) {
      int32_t *e = &exp[(b * 3 + p) * AS_MK];
      const bool aic = has_aic && p == 0;
      e[0] = 1;
      e[1] = cluster;
      e[2] = aic ? 0 : p - has_aic;
      e[3] = aic ? PTO_CORE_AIC : PTO_CORE_AIV;
    }
  }
}

static int all_shapes_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  as_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "all_shapes");
  int rc = PTO_OK;
  for (int ch = 0; ch < 2; ch++) {
    cs_fill_rand(st->in[ch], AS_N, 41 + (uint64_t)ch + opts->seed);
    rc |= cs_view2(&st->tin[ch], st->in[ch], PTO_F32, AS_ROWS, AS_COLS);
    rc |= cs_view2(&st->tout[ch], st->out[ch], PTO_F32, AS_ROWS, AS_COLS);
  }
  for (int t = 0; t < AS_TASKS; t++)
    rc |= cs_view2(&st->tmarks[t], st->marks[t], PTO_I32, AS_BLOCKS * 3, AS_MK);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  for (int s = 0; s < AS_SHAPES && !rc; s++) {
    pto_kernel_desc d = {.name = as_shapes[s].name,
                         .aic = as_shapes[s].aic ? as_kernel : NULL,
                         .aiv = as_shapes[s].aiv ? as_kernel : NULL,
                         .aiv_count = as_shapes[s].aiv};
    rc = pto_kernel_register(chip, &d, &st->kid[s]);
  }
  /* one round at a time: markers count visits of a single run */
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->marks, 0, sizeof st->marks);
    rc = scene_run_rounds(chip, &one, as_orch, st, rep);
    if (rc) break;
    rep->verified = true;
    for (int ch = 0; ch < 2 && rep->verified; ch++) {
      float ref[AS_N];
      for (int i = 0; i < AS_N; i++)
        ref[i] = st->in[ch][i] + 15.0f; /* 1+2+3+4+5 */
      rep->verified =
          scene_check_f32(rep, ch ? "out (reverse chain)" : "out", st->out[ch], ref, AS_N, 1e-6f);
    }
    for (int t = 0; t < AS_TASKS && rep->verified; t++) {
      const int ch = t / AS_SHAPES, step = t % AS_SHAPES;
      const int shape = ch == 0 ? step : AS_SHAPES - 1 - step;
      int32_t exp[AS_MARKS];
      char label[96];
      as_expected_marks(st, t, shape, exp);
      snprintf(label, sizeof label,
               "markers of %s (block x part x {visits, cluster, sub_block, core type})",
               as_shapes[shape].name);
      rep->verified = scene_check_i32(rep, label, st->marks[t], exp, AS_MARKS);
    }
    if (!rep->verified) break;
  }
  if (rc) {
    cs_run_failed(rep, rc, "all_shapes");
  } else if (rep->verified) {
    snprintf(rep->message, sizeof rep->message,
             "AIC, AIV, MIX AIV x2, MIX AIC+AIV, MIX AIC+AIV x2 in two interleaved chains of %d "
             "blocks each: results match, every MIX block ran once per core on one cluster with "
             "sub_block_id 0/1",
             AS_BLOCKS);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(all_shapes,
               "all 5 resource shapes (AIC, AIV, MIX AIV2, AIC+AIV, AIC+AIV2) in one graph",
               all_shapes_run, PTO_SCENE_RANDOM);
