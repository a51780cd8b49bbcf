/* sync_barrier.c — what sync_start is for: the blocks of a cohort
 * synchronise with each other inside the kernel. A full-width AIV task and
 * a full-width MIX task (every core of every block takes part) run 8
 * phases; in each phase every participant publishes a value, passes a
 * cohort-wide barrier, adds its right neighbour's value to its sum, and
 * passes the barrier again before the values are overwritten. The barrier
 * is a counter plus a generation word in a shared tensor (so a participant
 * of phase k can never mistake phase k-1's release for its own), and its
 * wait polls pto_kctx_cancelled() and has a deadline, so a cohort that is
 * not co-resident fails the run instead of hanging it. */
#include "sync_scenes.h"

#define SB_PHASES 8

typedef struct sb_wait {
  const pto_kctx *ctx;
  const int32_t *gen;
  int32_t seen;
} sb_wait;

static bool sb_moved(void *p) {
  sb_wait *w = p;
  /* acquire: pairs with the last arriver's release store of the generation */
  return __atomic_load_n(w->gen, __ATOMIC_ACQUIRE) != w->seen || pto_kctx_cancelled(w->ctx);
}

/* bar[0] counts arrivals of the current phase, bar[1] is its generation. */
static int sb_barrier(const pto_kctx *ctx, int32_t *bar, int32_t n) {
  /* acquire: pairs with the release of the previous phase's generation */
  int32_t gen = __atomic_load_n(&bar[1], __ATOMIC_ACQUIRE);
  /* acq_rel: the last arriver acquires every earlier arriver's writes */
  if (__atomic_add_fetch(&bar[0], 1, __ATOMIC_ACQ_REL) == n) {
    /* relaxed: nobody touches the count before seeing the new generation */
    __atomic_store_n(&bar[0], 0, __ATOMIC_RELAXED);
    /* release: publishes every arriver's writes (and the reset count) */
    __atomic_store_n(&bar[1], gen + 1, __ATOMIC_RELEASE);
    return PTO_OK;
  }
  sb_wait w = {ctx, &bar[1], gen};
  return pto_wait(NULL, sb_moved, &w, pto_deadline_ms(SS_WAIT_MS)) ? PTO_OK : PTO_EWAIT_TIMEOUT;
}

static int32_t sb_value(int p, int k) { return p * 1000 + k; }

/* t0 barrier [2], t1 published values [P], t2 sums [P]; s0 kind. */
static int sb_kernel(const pto_kctx *ctx) {
  if (ctx->ntensors != 3 || ctx->nscalars != 1) return PTO_EINVAL;
  const ss_kind kind = (ss_kind)ctx->scalars[0];
  const int parts = ss_parts(kind), n = ctx->block_num * parts;
  const int me = ctx->block_idx * parts + cs_part(ctx, ss_has_aic(kind));
  int32_t *bar = ss_i32(&ctx->tensors[0]), *val = ss_i32(&ctx->tensors[1]);
  int32_t *sum = ss_i32(&ctx->tensors[2]);
  for (int k = 0; k < SB_PHASES; k++) {
    val[me] = sb_value(me, k);
    int rc = sb_barrier(ctx, bar, n);
    if (!rc) sum[me] += val[(me + 1) % n];
    if (!rc) rc = sb_barrier(ctx, bar, n);
    if (rc || pto_kctx_cancelled(ctx)) return rc;
  }
  return PTO_OK;
}

typedef struct sb_task {
  ss_kind kind;
  int width, n;
  int32_t bar[2], *val, *sum;
  pto_tensor tbar, tval, tsum;
} sb_task;

typedef struct sb_state {
  int kid[SS_KINDS];
  sb_task t[2];
} sb_state;

static void sb_orch(pto_orch *o, void *arg) {
  sb_state *st = arg;
  for (int i = 0; i < 2; i++) {
    sb_task *t = &st->t[i];
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t->tbar);
    pto_args_output_existing(&a, &t->tval);
    pto_args_output_existing(&a, &t->tsum);
    pto_args_scalar(&a, (uint64_t)t->kind);
    pto_submit_opts so = {.block_num = t->width, .sync_start = true};
    if (pto_submit(o, st->kid[t->kind], &a, &so, NULL)) return;
  }
}

static int sb_task_init(sb_task *t, ss_kind kind, int width) {
  t->kind = kind;
  t->width = width;
  t->n = width * ss_parts(kind);
  t->val = calloc((size_t)t->n, sizeof *t->val);
  t->sum = calloc((size_t)t->n, sizeof *t->sum);
  if (!t->val || !t->sum) return PTO_ENOMEM;
  int rc = cs_view2(&t->tbar, t->bar, PTO_I32, 1, 2);
  if (!rc) rc = cs_view2(&t->tval, t->val, PTO_I32, 1, t->n);
  if (!rc) rc = cs_view2(&t->tsum, t->sum, PTO_I32, 1, t->n);
  return rc;
}

static bool sb_check(pto_scene_report *rep, const sb_task *t) {
  int32_t *exp = calloc((size_t)t->n, sizeof *exp);
  if (!exp) return false;
  for (int p = 0; p < t->n; p++)
    for (int k = 0; k < SB_PHASES; k++)
      exp[p] += sb_value((p + 1) % t->n, k);
  char label[96];
  snprintf(label, sizeof label, "sync_barrier: sums of the %s cohort (%d blocks, %d cores)",
           ss_kind_name(t->kind), t->width, t->n);
  bool ok = scene_check_i32(rep, label, t->sum, exp, (size_t)t->n);
  free(exp);
  return ok;
}

static int sync_barrier_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  sb_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "sync_barrier");
  pto_chip_config cfg;
  scene_chip_config(opts, 0, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  const pto_chip_config *c = rc ? &cfg : pto_chip_get_config(chip);
  pto_kernel_desc mix = {.name = "barrier_mix", .aic = sb_kernel, .aiv = sb_kernel, .aiv_count = 2};
  if (!rc) rc = pto_kernel_register_aiv(chip, "barrier_aiv", sb_kernel, &st->kid[SS_AIV]);
  if (!rc) rc = pto_kernel_register(chip, &mix, &st->kid[SS_MIX]);
  if (!rc) rc = sb_task_init(&st->t[0], SS_AIV, ss_max_width(c, SS_AIV));
  if (!rc) rc = sb_task_init(&st->t[1], SS_MIX, ss_max_width(c, SS_MIX));
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++) {
    for (int i = 0; i < 2; i++) {
      memset(st->t[i].bar, 0, sizeof st->t[i].bar);
      memset(st->t[i].sum, 0, sizeof *st->t[i].sum * (size_t)st->t[i].n);
    }
    rc = scene_run_rounds(chip, &one, sb_orch, st, rep);
    rep->verified = !rc;
    for (int i = 0; i < 2 && !rc && rep->verified; i++)
      rep->verified = sb_check(rep, &st->t[i]);
  }
  if (rc) {
    cs_run_failed(rep, rc, "sync_barrier");
  } else if (rep->verified) {
    snprintf(rep->message, sizeof rep->message,
             "AIV cohort of %d cores and MIX cohort of %d blocks (%d cores) passed %d phases of "
             "a cohort-wide in-kernel barrier; every sum matches",
             st->t[0].n, st->t[1].width, st->t[1].n, SB_PHASES);
  }
  for (int i = 0; i < 2; i++) {
    free(st->t[i].val);
    free(st->t[i].sum);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(sync_barrier, "blocks of a sync_start cohort synchronise through an in-kernel barrier",
          sync_barrier_run);
