/* race_undeclared.c — a deliberate ordering bug, the worked example of
 * docs/schedules.md. Task "bump" adds 1 to X in place but declares only
 * its own small output (a count), not X; task "use" computes
 * OUT = 2 X + Y and declares Y and OUT, not X (both find X through a
 * scalar holding its address). pto infers no dependency between them, so
 * nothing orders "use" after "bump", although the program means it to
 * (submission order): each of the 2 blocks of "use" reads its half of X
 * before or after the block of "bump" that writes that half, as the
 * schedule happens to go.
 *
 * A plain run most often passes (bump is submitted first); under
 * `pto run race_undeclared --fuzz-schedules 200` many seeds fail, and the
 * record of a failing seed replays the same wrong values every time. The
 * fix is to declare X: pto_args_inout on "bump", pto_args_input on "use".
 * The test suite runs it only that way (tests/cli/schedules.sh). */
#include <stdint.h>
#include <stdlib.h>

#include "chip_scenes.h"

#define RU_N 64 /* X, Y, OUT; two blocks of RU_N / 2 */

typedef struct ru_state {
  int k_bump, k_use;
  float x0[RU_N], x[RU_N], y[RU_N], out[RU_N];
  int32_t count[2];
  pto_tensor ty, tout, tcount;
} ru_state;

/* X's address, passed as scalar 0: the undeclared access. */
static float *ru_x(const pto_kctx *ctx) { return (float *)(uintptr_t)ctx->scalars[0]; }

static int ru_bump(const pto_kctx *ctx) {
  float *x = ru_x(ctx);
  int32_t *count = pto_tensor_at_linear(&ctx->tensors[0], 0);
  int half = RU_N / 2, b = ctx->block_idx;
  for (int i = b * half; i < (b + 1) * half; i++)
    x[i] += 1.0f;
  count[b] = half;
  return 0;
}

static int ru_use(const pto_kctx *ctx) {
  const float *x = ru_x(ctx);
  const float *y = pto_tensor_at_linear(&ctx->tensors[0], 0);
  float *out = pto_tensor_at_linear(&ctx->tensors[1], 0);
  int half = RU_N / 2, b = ctx->block_idx;
  for (int i = b * half; i < (b + 1) * half; i++)
    out[i] = 2.0f * x[i] + y[i];
  return 0;
}

static void ru_orch(pto_orch *o, void *arg) {
  ru_state *st = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &st->tcount); /* X is not declared: the bug */
  pto_args_scalar(&a, (uint64_t)(uintptr_t)st->x);
  if (cs_submit(o, st->k_bump, &a, 2, NULL)) return;
  pto_args_init(&a);
  pto_args_input(&a, &st->ty); /* nor here */
  pto_args_output_existing(&a, &st->tout);
  pto_args_scalar(&a, (uint64_t)(uintptr_t)st->x);
  cs_submit(o, st->k_use, &a, 2, NULL);
}

static int race_undeclared_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ru_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "race_undeclared");
  for (int i = 0; i < RU_N; i++) {
    st->x0[i] = (float)i;
    st->y[i] = 1000.0f + (float)i;
  }
  int rc = cs_view2(&st->ty, st->y, PTO_F32, 1, RU_N);
  rc |= cs_view2(&st->tout, st->out, PTO_F32, 1, RU_N);
  rc |= cs_view2(&st->tcount, st->count, PTO_I32, 1, 2);
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "bump", ru_bump, &st->k_bump);
  if (!rc) rc = pto_kernel_register_aiv(chip, "use", ru_use, &st->k_use);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    memcpy(st->x, st->x0, sizeof st->x);
    memset(st->out, 0, sizeof st->out);
    rc = scene_run_rounds(chip, &one, ru_orch, st, rep);
    if (rc) break;
    float e[RU_N];
    for (int i = 0; i < RU_N; i++)
      e[i] = 2.0f * (st->x0[i] + 1.0f) + st->y[i];
    if (!(rep->verified = scene_check_f32(rep, "OUT = 2 X + Y, X after bump", st->out, e, RU_N, 0)))
      break;
  }
  if (rc)
    cs_run_failed(rep, rc, "race_undeclared");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "this schedule ran each block of use after the block of bump that writes its "
             "half of X (nothing declared makes it so)");
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(race_undeclared,
          "a deliberate race: two tasks share a buffer neither declares (for --fuzz-schedules)",
          race_undeclared_run);
