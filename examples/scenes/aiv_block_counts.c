/* aiv_block_counts.c — SPMD tasks of many widths, all in flight at once:
 * AIV tasks of 4..96 blocks and MIX (AIC + 2 AIV) tasks of 2..48 blocks,
 * wider than the chip (default 8 clusters = 16 AIV cores), so blocks are
 * claimed in ranges by several schedulers and in several waves. Each task
 * scales the rows of a shared [96, 32] input into its own output, split by
 * block and then by the block's cores; each core counts its visit. Every
 * output row and every (block, core) visit count is checked. */
#include <stdlib.h>

#include "chip_scenes.h"

#define BC_R     96
#define BC_C     32
#define BC_N     (BC_R * BC_C)
#define BC_AIV   9
#define BC_MIX   8
#define BC_TASKS (BC_AIV + BC_MIX)
#define BC_MAXB  96

static const int bc_aiv_blocks[BC_AIV] = {4, 8, 12, 16, 24, 32, 48, 64, 96};
static const int bc_mix_blocks[BC_MIX] = {2, 4, 8, 12, 16, 24, 32, 48};

typedef struct bc_state {
  int k_aiv, k_mix;
  float in[BC_N], out[BC_TASKS][BC_N];
  int32_t visits[BC_TASKS][BC_MAXB * 3];
  pto_tensor tin, tout[BC_TASKS], tvisits[BC_TASKS];
} bc_state;

static int bc_blocks(int t) { return t < BC_AIV ? bc_aiv_blocks[t] : bc_mix_blocks[t - BC_AIV]; }

/* t0 in, t1 out, t2 visits [block, part]; s0 has_aic, s1 parts, s2 alpha. */
static int bc_kernel(const pto_kctx *ctx) {
  const int has_aic = (int)ctx->scalars[0], parts = (int)ctx->scalars[1];
  const float alpha = pto_kctx_scalar_f32(ctx, 2);
  const int part = cs_part(ctx, has_aic);
  int64_t lo, hi, plo, phi;
  pto_split_range(BC_R, ctx->block_idx, ctx->block_num, &lo, &hi);
  pto_split_range(hi - lo, part, parts, &plo, &phi);
  const float *in = (const float *)ctx->tensors[0].buf;
  float *out = (float *)ctx->tensors[1].buf;
  for (int64_t i = (lo + plo) * BC_C; i < (lo + phi) * BC_C; i++)
    out[i] = alpha * in[i];
  cs_mark((int32_t *)ctx->tensors[2].buf + ctx->block_idx * 3 + part);
  return PTO_OK;
}

static void bc_orch(pto_orch *o, void *arg) {
  bc_state *st = arg;
  for (int t = 0; t < BC_TASKS; t++) {
    const bool mix = t >= BC_AIV;
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &st->tin);
    pto_args_output_existing(&a, &st->tout[t]);
    pto_args_output_existing(&a, &st->tvisits[t]);
    pto_args_scalar(&a, mix);
    pto_args_scalar(&a, mix ? 3 : 1);
    pto_args_scalar_f32(&a, (float)(t + 1));
    if (cs_submit(o, mix ? st->k_mix : st->k_aiv, &a, bc_blocks(t), NULL)) return;
  }
}

static int aiv_block_counts_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  bc_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "aiv_block_counts");
  cs_fill_rand(st->in, BC_N, 3 + opts->seed);
  int rc = cs_view2(&st->tin, st->in, PTO_F32, BC_R, BC_C);
  for (int t = 0; t < BC_TASKS; t++) {
    rc |= cs_view2(&st->tout[t], st->out[t], PTO_F32, BC_R, BC_C);
    rc |= cs_view2(&st->tvisits[t], st->visits[t], PTO_I32, BC_MAXB, 3);
  }
  pto_chip_config cfg;
  scene_chip_config(opts, 0, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "spmd_aiv", bc_kernel, &st->k_aiv);
  if (!rc) {
    pto_kernel_desc d = {.name = "spmd_mix", .aic = bc_kernel, .aiv = bc_kernel, .aiv_count = 2};
    rc = pto_kernel_register(chip, &d, &st->k_mix);
  }
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  uint64_t blocks = 0;
  for (int t = 0; t < BC_TASKS; t++)
    blocks += (uint64_t)bc_blocks(t);
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->visits, 0, sizeof st->visits);
    memset(st->out, 0, sizeof st->out);
    rc = scene_run_rounds(chip, &one, bc_orch, st, rep);
    if (rc) break;
    rep->verified = true;
    for (int t = 0; t < BC_TASKS && rep->verified; t++) {
      float ref[BC_N];
      int32_t exp[BC_MAXB * 3] = {0};
      const int parts = t >= BC_AIV ? 3 : 1;
      for (int i = 0; i < BC_N; i++)
        ref[i] = (float)(t + 1) * st->in[i];
      for (int b = 0; b < bc_blocks(t); b++)
        for (int p = 0; p < parts; p++)
          exp[b * 3 + p] = 1;
      char label[64];
      snprintf(label, sizeof label, "%s task of %d blocks: out", t >= BC_AIV ? "MIX" : "AIV",
               bc_blocks(t));
      rep->verified = scene_check_f32(rep, label, st->out[t], ref, BC_N, 0);
      snprintf(label, sizeof label, "%s task of %d blocks: visits [block x core]",
               t >= BC_AIV ? "MIX" : "AIV", bc_blocks(t));
      if (rep->verified)
        rep->verified = scene_check_i32(rep, label, st->visits[t], exp, BC_MAXB * 3);
    }
    if (!rep->verified) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "aiv_block_counts");
  else if (rep->verified && rep->stats.blocks != blocks * (uint64_t)rounds)
    cs_fail(rep, "stats count %llu blocks, the tasks have %llu",
            (unsigned long long)rep->stats.blocks, (unsigned long long)(blocks * rounds));
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "AIV tasks of 4..96 blocks and MIX tasks of 2..48 blocks (%llu blocks): every "
             "block ran once on each of its cores, all outputs match",
             (unsigned long long)blocks);
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(aiv_block_counts, "AIV block counts 4..96 and MIX (AIC+2 AIV) 2..48, all in flight",
               aiv_block_counts_run, PTO_SCENE_RANDOM);
