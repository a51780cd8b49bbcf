/* err_task_ring_deadlock.c — PTO_ETASK_RING_DEADLOCK: a 4-slot ring whose
 * first task hangs (until the run is cancelled) while the orchestrator
 * keeps submitting. Tasks retire in order, so nothing retires behind the
 * hung task: after alloc_timeout_ms (200) the submit fails, naming it. */
#include "chip_scenes.h"

typedef struct rd_state {
  int k_hang, k_fill;
  float buf[16][16];
  int failed_at;
} rd_state;

static void rd_orch(pto_orch *o, void *arg) {
  rd_state *st = arg;
  st->failed_at = -1;
  if (pto_submit(o, st->k_hang, NULL, NULL, NULL)) return;
  for (int i = 0; i < 16; i++) {
    pto_tensor t;
    if (cs_view2(&t, st->buf[i], PTO_F32, 1, 16)) return;
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t);
    pto_args_scalar_f32(&a, 1.0f);
    if (pto_submit(o, st->k_fill, &a, NULL, NULL)) {
      st->failed_at = i + 1;
      return;
    }
  }
}

static int err_task_ring_deadlock_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  rd_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.task_slots = 4;
  cfg.alloc_timeout_ms = 200;
  cfg.watchdog_ms = 5000; /* the allocation deadline must come first */
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "hang", cs_hang_kernel, &st.k_hang);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_task_ring_deadlock");
  scene_expect_error(chip, rd_orch, &st, PTO_ETASK_RING_DEADLOCK, rep);
  cs_expect(rep, st.failed_at == 4, "the failing submit was #%d, expected #4 (4 slots)",
            st.failed_at);
  cs_expect(rep, rep->err.task_id == 0, "err.task_id is %lld, expected the hung task 0",
            (long long)rep->err.task_id);
  cs_expect(rep, strcmp(rep->err.kernel, "hang") == 0, "err.kernel is \"%s\", expected \"hang\"",
            rep->err.kernel);
  cs_expect_details(rep, "task ring");
  cs_expect_details(rep, "200 ms");
  return cs_trigger_done(chip, rep,
                         "submit #4 failed after the 200 ms allocation deadline, naming the hung "
                         "task 0 (\"hang\"); the hung kernel was cancelled");
}

PTO_SCENE(err_task_ring_deadlock, "PTO_ETASK_RING_DEADLOCK: a hung first task, a 4-slot ring",
          err_task_ring_deadlock_run);
