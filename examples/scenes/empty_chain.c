/* empty_chain.c — per-task dispatch cost: a chain of dependent tasks whose
 * kernel only increments one counter (INOUT on one small buffer), so each
 * task waits for the previous one. Verifies the count; reports ns per task
 * (Effective time / tasks). Default 20000 tasks; the chip shape comes from
 * the command line (e.g. --clusters 1 --schedulers 1). */
#include "chip_scenes.h"

#define EC_TASKS 20000

static int ec_inc(const pto_kctx *ctx) {
  (*(int64_t *)pto_tensor_at_linear(&ctx->tensors[0], 0))++;
  return 0;
}

typedef struct ec_state {
  int kernel;
  int64_t counter;
  pto_tensor t;
} ec_state;

static void ec_orch(pto_orch *o, void *arg) {
  ec_state *st = arg;
  for (int i = 0; i < EC_TASKS; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &st->t);
    if (pto_submit(o, st->kernel, &a, NULL, NULL)) return;
  }
}

static int empty_chain_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ec_state st = {0};
  int64_t one = 1;
  pto_tensor_init(&st.t, &st.counter, sizeof st.counter, PTO_I64, 1, &one);
  pto_chip_config cfg;
  scene_chip_config(opts, 0, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "inc", ec_inc, &st.kernel);
  if (!rc) rc = scene_run_rounds(chip, opts, ec_orch, &st, rep);
  pto_chip_destroy(chip);
  if (rc) return cs_run_failed(rep, rc, "empty_chain");
  int rounds = opts->rounds > 0 ? opts->rounds : 1;
  rep->verified = st.counter == (int64_t)EC_TASKS * rounds;
  snprintf(rep->message, sizeof rep->message,
           "%d dependent tasks per round on %d clusters, %d schedulers: counter %lld (expected "
           "%lld); last round %.0f ns per task (Effective / tasks)",
           EC_TASKS, cfg.clusters,
           cfg.schedulers ? cfg.schedulers : (cfg.clusters < 3 ? cfg.clusters : 3),
           (long long)st.counter, (long long)EC_TASKS * rounds,
           rep->stats.effective_us * 1000.0 / EC_TASKS);
  return 0;
}

PTO_SCENE(empty_chain, "per-task dispatch cost: a chain of dependent near-empty tasks",
          empty_chain_run);
