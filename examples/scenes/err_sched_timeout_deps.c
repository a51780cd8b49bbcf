/* err_sched_timeout_deps.c — PTO_ESCHED_TIMEOUT, class DEP_DEADLOCK: a
 * block hands its completion to someone who never delivers it
 * (pto_kctx_async_begin, no pto_chip_async_complete). No core runs
 * anything, nothing is ready, and the consumer of its output waits on a
 * dependency that never completes; the 300 ms watchdog reports it. */
#include "chip_scenes.h"

typedef struct tdp_state {
  int k_async, k_copy;
  float x[64], y[64];
} tdp_state;

static int tdp_async(const pto_kctx *ctx) {
  uint64_t token;
  return pto_kctx_async_begin(ctx, &token); /* and nobody completes it */
}

static void tdp_orch(pto_orch *o, void *arg) {
  tdp_state *st = arg;
  pto_tensor x, y;
  if (cs_view2(&x, st->x, PTO_F32, 4, 16) || cs_view2(&y, st->y, PTO_F32, 4, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &x);
  if (pto_submit(o, st->k_async, &a, NULL, NULL)) return;
  pto_args_init(&a);
  pto_args_input(&a, &x);
  pto_args_output_existing(&a, &y);
  pto_submit(o, st->k_copy, &a, NULL, NULL);
}

static int err_sched_timeout_deps_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  tdp_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.watchdog_ms = 300;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "lost_async", tdp_async, &st.k_async);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy", pto_kern_copy, &st.k_copy);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_sched_timeout_deps");
  scene_expect_error(chip, tdp_orch, &st, PTO_ESCHED_TIMEOUT, rep);
  cs_expect(rep, rep->err.stall == PTO_STALL_DEP_DEADLOCK, "the stall class is \"%s\"",
            pto_stall_class_name(rep->err.stall));
  cs_expect(rep, rep->err.task_id == 0 || rep->err.task_id == 1,
            "err.task_id is %lld, expected the async task 0 or its consumer 1",
            (long long)rep->err.task_id);
  cs_expect_details(rep, "depend");
  return cs_trigger_done(chip, rep,
                         "class DEP_DEADLOCK: the consumer of a never-completed async block");
}

PTO_SCENE(err_sched_timeout_deps,
          "PTO_ESCHED_TIMEOUT (dependency deadlock): an async completion that never comes",
          err_sched_timeout_deps_run);
