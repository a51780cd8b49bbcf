/* manual_scope.c — PTO_SCOPE_MANUAL: inside, only explicit dependencies
 * order tasks; the tensors are still recorded, so automatic tasks after
 * the scope order after the manual tasks that touched their data.
 *
 *   auto:    t0  a = 1                      (slow)
 *   manual:  m0  B = a + 1      deps {t0}   (across the scope boundary)
 *            m1  C = B + 1      deps {m0}
 *            m2  a = 10         deps {m0}   (write-after-read by hand; slow)
 *            m3  f = C + 0      deps {m1}
 *     manual (nested):
 *            m4  e = C + a      deps {m1, m2}  (slow)
 *   auto:    t1  out1 = a + 0   inferred: after m2
 *            t2  out2 = e + 0   inferred: after m4
 *
 * Expected: f = 3, e = 13, out1 = 10, out2 = 13. Every reader reads at
 * once and every writer sleeps first, so a missing dependency shows. */
#include <stdlib.h>

#include "chip_scenes.h"

#define MS_N 64

typedef struct ms_state {
  int k_op, k_add;
  float a[MS_N], e[MS_N], f[MS_N], out1[MS_N], out2[MS_N];
  pto_tensor ta, te, tf, tout1, tout2;
} ms_state;

/* After sleeping s1 us: t1 = t0 + s0 (two tensors) or t0 = s0 (one). */
static int ms_op(const pto_kctx *ctx) {
  cs_sleep_us((int64_t)ctx->scalars[1]);
  const float v = pto_kctx_scalar_f32(ctx, 0);
  if (ctx->ntensors == 1) return pto_tile_fill(&ctx->tensors[0], v);
  const pto_tensor *in = &ctx->tensors[0], *out = &ctx->tensors[1];
  for (int64_t i = 0; i < pto_tensor_numel(out); i++)
    *(float *)pto_tensor_at_linear(out, i) = *(const float *)pto_tensor_at_linear(in, i) + v;
  return PTO_OK;
}

static int ms_task(pto_orch *o, const ms_state *st, const pto_tensor *in, pto_tensor *out,
                   bool heap_out, float v, int64_t us, const pto_task_id *deps, int ndeps,
                   pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  if (in) pto_args_input(&a, in);
  if (heap_out)
    pto_args_output(&a, out);
  else
    pto_args_output_existing(&a, out);
  pto_args_scalar_f32(&a, v);
  pto_args_scalar(&a, (uint64_t)us);
  pto_submit_opts so = {.deps = deps, .ndeps = ndeps};
  return pto_submit(o, st->k_op, &a, &so, id);
}

static void ms_orch(pto_orch *o, void *arg) {
  ms_state *st = arg;
  pto_tensor B, C;
  int64_t shape[1] = {MS_N};
  if (pto_tensor_desc(&B, PTO_F32, 1, shape) || pto_tensor_desc(&C, PTO_F32, 1, shape)) {
    pto_orch_fatal(o, "manual_scope: bad descriptor");
    return;
  }
  pto_task_id t0, m0, m1, m2;
  if (ms_task(o, st, NULL, &st->ta, false, 1.0f, 5000, NULL, 0, &t0)) return;
  if (pto_scope_begin(o, PTO_SCOPE_MANUAL)) return;
  if (ms_task(o, st, &st->ta, &B, true, 1.0f, 0, &t0, 1, &m0)) return;
  if (ms_task(o, st, &B, &C, true, 1.0f, 0, &m0, 1, &m1)) return;
  if (ms_task(o, st, NULL, &st->ta, false, 10.0f, 5000, &m0, 1, &m2)) return;
  if (ms_task(o, st, &C, &st->tf, false, 0.0f, 0, &m1, 1, NULL)) return;
  if (pto_scope_begin(o, PTO_SCOPE_MANUAL)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &C);
  pto_args_input(&a, &st->ta);
  pto_args_output_existing(&a, &st->te);
  pto_task_id both[2] = {m1, m2};
  pto_submit_opts so = {.deps = both, .ndeps = 2};
  if (pto_submit(o, st->k_add, &a, &so, NULL)) return;
  if (pto_scope_end(o) || pto_scope_end(o)) return;
  if (ms_task(o, st, &st->ta, &st->tout1, false, 0.0f, 0, NULL, 0, NULL)) return;
  ms_task(o, st, &st->te, &st->tout2, false, 0.0f, 0, NULL, 0, NULL);
}

/* t2 = t0 + t1 after sleeping 3 ms (the slow m4). */
static int ms_slow_add(const pto_kctx *ctx) {
  cs_sleep_us(3000);
  return pto_tile_add(&ctx->tensors[0], &ctx->tensors[1], &ctx->tensors[2]);
}

static int manual_scope_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ms_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "manual_scope");
  int64_t shape[1] = {MS_N};
  int rc = pto_tensor_init(&st->ta, st->a, sizeof st->a, PTO_F32, 1, shape);
  rc |= pto_tensor_init(&st->te, st->e, sizeof st->e, PTO_F32, 1, shape);
  rc |= pto_tensor_init(&st->tf, st->f, sizeof st->f, PTO_F32, 1, shape);
  rc |= pto_tensor_init(&st->tout1, st->out1, sizeof st->out1, PTO_F32, 1, shape);
  rc |= pto_tensor_init(&st->tout2, st->out2, sizeof st->out2, PTO_F32, 1, shape);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "op", ms_op, &st->k_op);
  if (!rc) rc = pto_kernel_register_aiv(chip, "slow_add", ms_slow_add, &st->k_add);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->a, 0, sizeof st->a);
    memset(st->e, 0, sizeof st->e);
    rc = scene_run_rounds(chip, &one, ms_orch, st, rep);
    if (rc) break;
    float e3[MS_N], e13[MS_N], e10[MS_N];
    for (int i = 0; i < MS_N; i++) {
      e3[i] = 3.0f;
      e10[i] = 10.0f;
      e13[i] = 13.0f;
    }
    rep->verified = scene_check_f32(rep, "f = C (m3)", st->f, e3, MS_N, 0) &&
                    scene_check_f32(rep, "e = C + a (m4)", st->e, e13, MS_N, 0) &&
                    scene_check_f32(rep, "out1 = a (t1)", st->out1, e10, MS_N, 0) &&
                    scene_check_f32(rep, "out2 = e (t2)", st->out2, e13, MS_N, 0);
    if (!rep->verified) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "manual_scope");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "manual scope (and a nested one): explicit deps order reads and a hand-ordered "
             "write-after-read; automatic tasks after the scope wait for its writers");
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(manual_scope, "manual scopes: only explicit dependencies inside, inference after",
          manual_scope_run);
