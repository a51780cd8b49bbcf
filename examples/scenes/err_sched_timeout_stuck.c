/* err_sched_timeout_stuck.c — PTO_ESCHED_TIMEOUT, class TASK_STUCK: a
 * kernel that never returns until cancelled, and a 300 ms watchdog. The
 * report names the task, its kernel and the core it runs on; the kernel
 * is cancelled and the chip stays usable. */
#include <stdatomic.h>

#include "chip_scenes.h"

typedef struct ts_state {
  int k_hang, k_fill;
  float buf[64];
  _Atomic int core; /* where the hung block runs */
} ts_state;

static int ts_hang(const pto_kctx *ctx) {
  ts_state *st = ctx->env;
  atomic_store_explicit(&st->core, ctx->core_id, memory_order_relaxed); /* read after the join */
  return cs_hang_kernel(ctx);
}

static void ts_orch(pto_orch *o, void *arg) {
  ts_state *st = arg;
  pto_tensor t;
  if (cs_view2(&t, st->buf, PTO_F32, 4, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return;
  pto_args_init(&a);
  pto_args_inout(&a, &t);
  pto_submit(o, st->k_hang, &a, NULL, NULL);
}

static int err_sched_timeout_stuck_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ts_state st = {0};
  atomic_init(&st.core, -1);
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.watchdog_ms = 300;
  cfg.env = &st;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aic(chip, "hang", ts_hang, &st.k_hang);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_sched_timeout_stuck");
  scene_expect_error(chip, ts_orch, &st, PTO_ESCHED_TIMEOUT, rep);
  const int core = atomic_load_explicit(&st.core, memory_order_relaxed);
  cs_expect(rep, rep->err.stall == PTO_STALL_TASK_STUCK, "the stall class is \"%s\"",
            pto_stall_class_name(rep->err.stall));
  cs_expect(rep, rep->err.task_id == 1, "err.task_id is %lld, expected the hung task 1",
            (long long)rep->err.task_id);
  cs_expect(rep, rep->err.core_id >= 0 && rep->err.core_id == core,
            "err.core_id is %d, the hung block ran on core %d", rep->err.core_id, core);
  cs_expect(rep, strcmp(rep->err.kernel, "hang") == 0, "err.kernel is \"%s\", expected \"hang\"",
            rep->err.kernel);
  cs_expect_details(rep, "AIC");
  return cs_trigger_done(chip, rep,
                         "class TASK_STUCK naming task 1 (\"hang\") and the AIC core it ran on");
}

PTO_SCENE(err_sched_timeout_stuck, "PTO_ESCHED_TIMEOUT (task stuck): a kernel that never returns",
          err_sched_timeout_stuck_run);
