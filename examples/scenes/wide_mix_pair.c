/* wide_mix_pair.c — two wide MIX tasks (AIC + 2 AIV, 12 blocks each on 8
 * clusters) become ready together, so one scheduler claim takes blocks of
 * both; a third task (AIV add) consumes both outputs, so both must be
 * counted complete exactly when all their blocks are. Each MIX core counts
 * its visit and records its cluster and sub_block_id: the scene checks
 * that every block ran once on each of its three cores, all on one
 * cluster, with sub_block_id 0 and 1 on the AIV. */
#include <stdatomic.h>
#include <stdlib.h>

#include "chip_scenes.h"

#define WM_BLOCKS 12
#define WM_R      48
#define WM_C      16
#define WM_N      (WM_R * WM_C)
#define WM_MK     3 /* visits, cluster, sub_block */
#define WM_MARKS  (WM_BLOCKS * 3 * WM_MK)

typedef struct wm_state {
  pto_kernel_ids k;
  int k_mix;
  float in[WM_N], out[WM_N];
  int32_t marks[2][WM_MARKS];
  pto_tensor tin, tout, tmarks[2];
  _Atomic uint64_t first_start[2], last_end[2];
} wm_state;

/* t0 in, t1 out, t2 markers; s0 alpha, s1 which task (0/1). Rows split by
 * block, then over the block's 3 cores. */
static int wm_kernel(const pto_kctx *ctx) {
  wm_state *st = ctx->env;
  const int which = (int)ctx->scalars[1], part = cs_part(ctx, 1);
  uint64_t t0 = pto_now_ns();
  uint64_t cur = atomic_load_explicit(&st->first_start[which], memory_order_relaxed);
  while (t0 < cur &&
         !atomic_compare_exchange_weak_explicit(&st->first_start[which], &cur, t0,
                                                memory_order_relaxed, memory_order_relaxed)) {
  } /* relaxed: a statistic read after the run joined every core */
  int64_t lo, hi, plo, phi;
  pto_split_range(WM_R, ctx->block_idx, ctx->block_num, &lo, &hi);
  pto_split_range(hi - lo, part, 3, &plo, &phi);
  const float alpha = pto_kctx_scalar_f32(ctx, 0);
  const float *in = (const float *)ctx->tensors[0].buf;
  float *out = (float *)ctx->tensors[1].buf;
  for (int64_t i = (lo + plo) * WM_C; i < (lo + phi) * WM_C; i++)
    out[i] = alpha * in[i];
  int32_t *m = (int32_t *)ctx->tensors[2].buf + ((int64_t)ctx->block_idx * 3 + part) * WM_MK;
  m[1] = ctx->cluster_id;
  m[2] = ctx->sub_block_id;
  cs_mark(&m[0]);
  cs_sleep_us(2000);
  uint64_t t1 = pto_now_ns();
  cur = atomic_load_explicit(&st->last_end[which], memory_order_relaxed);
  while (t1 > cur &&
         !atomic_compare_exchange_weak_explicit(&st->last_end[which], &cur, t1,
                                                memory_order_relaxed, memory_order_relaxed)) {
  } /* relaxed: as above */
  return PTO_OK;
}

static void wm_orch(pto_orch *o, void *arg) {
  wm_state *st = arg;
  pto_tensor y[2];
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  for (int w = 0; w < 2; w++) {
    if (cs_desc2(&y[w], WM_R, WM_C)) {
      pto_orch_fatal(o, "wide_mix_pair: bad descriptor");
      return;
    }
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &st->tin);
    pto_args_output(&a, &y[w]);
    pto_args_output_existing(&a, &st->tmarks[w]);
    pto_args_scalar_f32(&a, w ? 3.0f : 2.0f);
    pto_args_scalar(&a, (uint64_t)w);
    if (cs_submit(o, st->k_mix, &a, WM_BLOCKS, NULL)) return;
  }
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &y[0]);
  pto_args_input(&a, &y[1]);
  pto_args_output_existing(&a, &st->tout);
  if (cs_submit(o, st->k.add, &a, 2, NULL)) return;
  pto_scope_end(o);
}

static int wide_mix_pair_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  wm_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "wide_mix_pair");
  cs_fill_rand(st->in, WM_N, 9 + opts->seed);
  int rc = cs_view2(&st->tin, st->in, PTO_F32, WM_R, WM_C);
  rc |= cs_view2(&st->tout, st->out, PTO_F32, WM_R, WM_C);
  for (int w = 0; w < 2; w++)
    rc |= cs_view2(&st->tmarks[w], st->marks[w], PTO_I32, WM_BLOCKS * 3, WM_MK);
  pto_chip_config cfg;
  scene_chip_config(opts, 0, 0, &cfg);
  cfg.env = st;
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) {
    pto_kernel_desc d = {.name = "wide_mix", .aic = wm_kernel, .aiv = wm_kernel, .aiv_count = 2};
    rc = pto_kernel_register(chip, &d, &st->k_mix);
  }
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  int overlapped = 0;
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->marks, 0, sizeof st->marks);
    memset(st->out, 0, sizeof st->out);
    for (int w = 0; w < 2; w++) {
      atomic_store_explicit(&st->first_start[w], UINT64_MAX, memory_order_relaxed);
      atomic_store_explicit(&st->last_end[w], 0, memory_order_relaxed);
    } /* relaxed: the run's thread creation orders these before any kernel */
    rc = scene_run_rounds(chip, &one, wm_orch, st, rep);
    if (rc) break;
    float ref[WM_N];
    for (int i = 0; i < WM_N; i++)
      ref[i] = 5.0f * st->in[i];
    rep->verified = scene_check_f32(rep, "out = 2 in + 3 in", st->out, ref, WM_N, 1e-6f);
    for (int w = 0; w < 2 && rep->verified; w++) {
      int32_t exp[WM_MARKS];
      for (int b = 0; b < WM_BLOCKS; b++)
        for (int p = 0; p < 3; p++) {
          int32_t *e = &exp[(b * 3 + p) * WM_MK];
          e[0] = 1;
          e[1] = st->marks[w][(b * 3) * WM_MK + 1]; /* the AIC's cluster */
          e[2] = p == 0 ? 0 : p - 1;
        }
      rep->verified = scene_check_i32(rep,
                                      w ? "second MIX task: {visits, cluster, sub_block}"
                                        : "first MIX task: {visits, cluster, sub_block}",
                                      st->marks[w], exp, WM_MARKS);
    }
    if (!rep->verified) break;
    /* relaxed: the run has joined every core */
    if (atomic_load_explicit(&st->first_start[1], memory_order_relaxed) <
        atomic_load_explicit(&st->last_end[0], memory_order_relaxed))
      overlapped++;
  }
  if (rc)
    cs_run_failed(rep, rc, "wide_mix_pair");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "two MIX tasks of %d blocks each on %d clusters: every block ran once per core on "
             "one cluster, sub_block_id 0/1, the consumer saw both; the tasks overlapped in %d "
             "of %d rounds",
             WM_BLOCKS, cfg.clusters, overlapped, rounds);
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(wide_mix_pair, "two wide MIX tasks ready together, claimed in one pop",
               wide_mix_pair_run, PTO_SCENE_RANDOM);
