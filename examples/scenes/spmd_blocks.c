/* spmd_blocks.c — SPMD block accessors. Every core of every block writes
 * what its pto_kctx says (block_idx, block_num, sub_block_id) into its own
 * marker, and counts its visit; the scene checks the full set: each block
 * index 0..block_num-1 exactly once per core of the shape, with the
 * block_num of the task and sub_block_id 0/1 on the two AIV of a MIX
 * block (0 elsewhere). Tasks: AIV x7, AIC x5, MIX AIV2 x4, MIX AIC+AIV x3,
 * MIX AIC+AIV2 x6, and an AIV task submitted with block_num 0 (means 1). */
#include <stdlib.h>

#include "chip_scenes.h"

#define SB_TASKS 6
#define SB_MAXB  8
#define SB_MK    4 /* visits, block_idx, block_num, sub_block_id */
#define SB_MARKS (SB_MAXB * 3 * SB_MK)

static const struct {
  const char *name;
  bool aic;
  int aiv, blocks;
} sb_tasks[SB_TASKS] = {
    {"aiv", false, 1, 7},        {"aic", true, 0, 5},          {"mix_aiv2", false, 2, 4},
    {"mix_aic_aiv", true, 1, 3}, {"mix_aic_aiv2", true, 2, 6}, {"aiv_default", false, 1, 0},
};

typedef struct sb_state {
  int kid[SB_TASKS];
  int32_t marks[SB_TASKS][SB_MARKS];
  pto_tensor tmarks[SB_TASKS];
} sb_state;

/* t0 markers; s0 has_aic. */
static int sb_kernel(const pto_kctx *ctx) {
  if (ctx->block_idx < 0 || ctx->block_idx >= SB_MAXB) return PTO_EINVAL;
  const int part = cs_part(ctx, (int)ctx->scalars[0]);
  int32_t *m = (int32_t *)ctx->tensors[0].buf + ((int64_t)ctx->block_idx * 3 + part) * SB_MK;
  m[1] = ctx->block_idx;
  m[2] = ctx->block_num;
  m[3] = ctx->sub_block_id;
  cs_mark(&m[0]);
  return PTO_OK;
}

static void sb_orch(pto_orch *o, void *arg) {
  sb_state *st = arg;
  for (int t = 0; t < SB_TASKS; t++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &st->tmarks[t]);
    pto_args_scalar(&a, sb_tasks[t].aic);
    if (cs_submit(o, st->kid[t], &a, sb_tasks[t].blocks, NULL)) return;
  }
}

static int spmd_blocks_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  sb_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "spmd_blocks");
  int rc = PTO_OK;
  for (int t = 0; t < SB_TASKS; t++)
    rc |= cs_view2(&st->tmarks[t], st->marks[t], PTO_I32, SB_MAXB * 3, SB_MK);
  pto_chip_config cfg;
  scene_chip_config(opts, 3, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  for (int t = 0; t < SB_TASKS && !rc; t++) {
    pto_kernel_desc d = {.name = sb_tasks[t].name,
                         .aic = sb_tasks[t].aic ? sb_kernel : NULL,
                         .aiv = sb_tasks[t].aiv ? sb_kernel : NULL,
                         .aiv_count = sb_tasks[t].aiv};
    rc = pto_kernel_register(chip, &d, &st->kid[t]);
  }
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->marks, 0, sizeof st->marks);
    rc = scene_run_rounds(chip, &one, sb_orch, st, rep);
    if (rc) break;
    rep->verified = true;
    for (int t = 0; t < SB_TASKS && rep->verified; t++) {
      int32_t exp[SB_MARKS] = {0};
      const int has_aic = sb_tasks[t].aic, parts = has_aic + sb_tasks[t].aiv;
      const int bn = sb_tasks[t].blocks ? sb_tasks[t].blocks : 1;
      for (int b = 0; b < bn; b++)
        for (int p = 0; p < parts; p++) {
          int32_t *e = &exp[(b * 3 + p) * SB_MK];
          e[0] = 1;
          e[1] = b;
          e[2] = bn;
          e[3] = p < has_aic ? 0 : p - has_aic;
        }
      char label[96];
      snprintf(label, sizeof label,
               "markers of %s (block x part x {visits, block_idx, block_num, sub_block_id})",
               sb_tasks[t].name);
      rep->verified = scene_check_i32(rep, label, st->marks[t], exp, SB_MARKS);
    }
    if (!rep->verified) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "spmd_blocks");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "6 tasks over all shapes with 1..7 blocks: every core of every block saw its "
             "block_idx, block_num and sub_block_id exactly once");
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(spmd_blocks, "SPMD block accessors: block_idx, block_num, sub_block_id per core",
          spmd_blocks_run);
