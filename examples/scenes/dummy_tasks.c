/* dummy_tasks.c — dummy tasks (no kernel) only order their dependencies.
 * Every consumer below reads its data with NO_DEP, or through a dummy, so
 * the only thing that orders it after the (slow) producers is a dummy:
 *
 *  1. a join: 4 producers write the rows of x; dummy d0 lists them as
 *     explicit deps; a copy of x (NO_DEP) lists d0 -> must see all rows;
 *  2. a barrier: q writes z slowly; dummy d1 takes z INOUT (inferred dep
 *     on q, and it becomes z's last writer); a reader of z (INPUT) orders
 *     after d1 only -> must see q's value;
 *  3. a chain: d2 (nothing to wait for), d3 -> slow writer of w, d4 -> d3,
 *     d5 -> {d4, d2}; a reader of w (NO_DEP) lists d5;
 *  4. a wide fan: 100 dummies each depend on one slow writer of v, a
 *     dummy joins all 100, a reader of v (NO_DEP) lists the join. */
#include <stdlib.h>

#include "chip_scenes.h"

#define DT_COLS 64
#define DT_ROWS 4
#define DT_FAN  100

typedef struct dt_state {
  int k_write, k_copy_add;
  float x[DT_ROWS * DT_COLS], xc[DT_ROWS * DT_COLS];
  float z[DT_COLS], zc[DT_COLS], w[DT_COLS], wc[DT_COLS], v[DT_COLS], vc[DT_COLS];
  pto_tensor tx, txc, tz, tzc, tw, twc, tv, tvc;
} dt_state;

/* t0 out = s0 after sleeping s1 us. */
static int dt_write(const pto_kctx *ctx) {
  cs_sleep_us((int64_t)ctx->scalars[1]);
  return pto_tile_fill(&ctx->tensors[0], pto_kctx_scalar_f32(ctx, 0));
}

/* t1 out = t0 in + s0. */
static int dt_copy_add(const pto_kctx *ctx) {
  const pto_tensor *in = &ctx->tensors[0], *out = &ctx->tensors[1];
  int64_t n = pto_tensor_numel(in);
  for (int64_t i = 0; i < n; i++)
    *(float *)pto_tensor_at_linear(out, i) =
        *(const float *)pto_tensor_at_linear(in, i) + pto_kctx_scalar_f32(ctx, 0);
  return PTO_OK;
}

static int dt_writer(pto_orch *o, const dt_state *st, const pto_tensor *t, float v, int64_t us,
                     pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, t);
  pto_args_scalar_f32(&a, v);
  pto_args_scalar(&a, (uint64_t)us);
  return pto_submit(o, st->k_write, &a, NULL, id);
}

/* out = in + add, with `in` untracked: only `deps` order it. */
static int dt_reader(pto_orch *o, const dt_state *st, const pto_tensor *in, const pto_tensor *out,
                     float add, const pto_task_id *deps, int ndeps) {
  pto_args a;
  pto_args_init(&a);
  pto_args_nodep(&a, in);
  pto_args_output_existing(&a, out);
  pto_args_scalar_f32(&a, add);
  pto_submit_opts so = {.deps = deps, .ndeps = ndeps};
  return pto_submit(o, st->k_copy_add, &a, &so, NULL);
}

static void dt_orch(pto_orch *o, void *arg) {
  dt_state *st = arg;
  /* 1. join */
  pto_task_id prod[DT_ROWS], d0, d1, d2, d3, d4, d5, s;
  for (int i = 0; i < DT_ROWS; i++) {
    pto_tensor row;
    int64_t start[2] = {i, 0}, shape[2] = {1, DT_COLS};
    if (pto_tensor_slice(&st->tx, start, shape, &row)) {
      pto_orch_fatal(o, "dummy_tasks: bad slice");
      return;
    }
    if (dt_writer(o, st, &row, (float)(i + 1), 3000 + 1000 * i, &prod[i])) return;
  }
  pto_submit_opts so = {.deps = prod, .ndeps = DT_ROWS};
  if (pto_submit_dummy(o, NULL, &so, &d0)) return;
  if (dt_reader(o, st, &st->tx, &st->txc, 0.0f, &d0, 1)) return;

  /* 2. barrier */
  if (dt_writer(o, st, &st->tz, 5.0f, 4000, NULL)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &st->tz);
  if (pto_submit_dummy(o, &a, NULL, &d1)) return;
  pto_args_init(&a);
  pto_args_input(&a, &st->tz);
  pto_args_output_existing(&a, &st->tzc);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_copy_add, &a, NULL, NULL)) return;

  /* 3. chain */
  if (pto_submit_dummy(o, NULL, NULL, &d2)) return;
  if (dt_writer(o, st, &st->tw, 7.0f, 5000, &s)) return;
  so = (pto_submit_opts){.deps = &s, .ndeps = 1};
  if (pto_submit_dummy(o, NULL, &so, &d3)) return;
  so.deps = &d3;
  if (pto_submit_dummy(o, NULL, &so, &d4)) return;
  pto_task_id both[2] = {d4, d2};
  so = (pto_submit_opts){.deps = both, .ndeps = 2};
  if (pto_submit_dummy(o, NULL, &so, &d5)) return;
  if (dt_reader(o, st, &st->tw, &st->twc, 1.0f, &d5, 1)) return;

  /* 4. wide fan */
  pto_task_id fan[DT_FAN], join;
  if (dt_writer(o, st, &st->tv, 3.0f, 5000, &s)) return;
  so = (pto_submit_opts){.deps = &s, .ndeps = 1};
  for (int i = 0; i < DT_FAN; i++)
    if (pto_submit_dummy(o, NULL, &so, &fan[i])) return;
  so = (pto_submit_opts){.deps = fan, .ndeps = DT_FAN};
  if (pto_submit_dummy(o, NULL, &so, &join)) return;
  dt_reader(o, st, &st->tv, &st->tvc, 2.0f, &join, 1);
}

static int dummy_tasks_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  dt_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "dummy_tasks");
  int rc = cs_view2(&st->tx, st->x, PTO_F32, DT_ROWS, DT_COLS);
  rc |= cs_view2(&st->txc, st->xc, PTO_F32, DT_ROWS, DT_COLS);
  rc |= cs_view2(&st->tz, st->z, PTO_F32, 1, DT_COLS);
  rc |= cs_view2(&st->tzc, st->zc, PTO_F32, 1, DT_COLS);
  rc |= cs_view2(&st->tw, st->w, PTO_F32, 1, DT_COLS);
  rc |= cs_view2(&st->twc, st->wc, PTO_F32, 1, DT_COLS);
  rc |= cs_view2(&st->tv, st->v, PTO_F32, 1, DT_COLS);
  rc |= cs_view2(&st->tvc, st->vc, PTO_F32, 1, DT_COLS);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "write", dt_write, &st->k_write);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy_add", dt_copy_add, &st->k_copy_add);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    /* reset so that every round must order its reads again */
    memset(st->x, 0, sizeof st->x);
    memset(st->z, 0, sizeof st->z);
    memset(st->w, 0, sizeof st->w);
    memset(st->v, 0, sizeof st->v);
    rc = scene_run_rounds(chip, &one, dt_orch, st, rep);
    if (rc) break;
    float ex[DT_ROWS * DT_COLS], ez[DT_COLS], ew[DT_COLS], ev[DT_COLS];
    for (int i = 0; i < DT_ROWS * DT_COLS; i++)
      ex[i] = (float)(i / DT_COLS + 1);
    for (int i = 0; i < DT_COLS; i++) {
      ez[i] = 6.0f;
      ew[i] = 8.0f;
      ev[i] = 5.0f;
    }
    rep->verified = scene_check_f32(rep, "join: copy of x", st->xc, ex, DT_ROWS * DT_COLS, 0) &&
                    scene_check_f32(rep, "barrier: z + 1", st->zc, ez, DT_COLS, 0) &&
                    scene_check_f32(rep, "chain: w + 1", st->wc, ew, DT_COLS, 0) &&
                    scene_check_f32(rep, "fan: v + 2", st->vc, ev, DT_COLS, 0);
    if (!rep->verified) break;
  }
  const uint64_t per_round = DT_ROWS + 2 + 3 + 1 + 4 + 1 + 1 + DT_FAN + 2;
  if (rc) {
    cs_run_failed(rep, rc, "dummy_tasks");
  } else if (rep->verified && rep->stats.tasks != per_round * (uint64_t)rounds) {
    cs_fail(rep, "stats count %llu tasks, submitted %llu", (unsigned long long)rep->stats.tasks,
            (unsigned long long)(per_round * (uint64_t)rounds));
  } else if (rep->verified) {
    snprintf(rep->message, sizeof rep->message,
             "join, barrier (INOUT dummy), chain of 4 dummies and a fan of %d dummies order "
             "their NO_DEP readers after the slow writers",
             DT_FAN);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(dummy_tasks, "dummy tasks ordering dependencies: join, barrier, chain, wide fan",
          dummy_tasks_run);
