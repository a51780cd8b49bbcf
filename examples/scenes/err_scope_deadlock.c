/* err_scope_deadlock.c — PTO_ESCOPE_DEADLOCK: 8 tasks with 256-byte OUTPUT
 * buffers in one scope and a 1 KiB heap. Their buffers are held until the
 * scope ends (their task slots are not: 4 slots suffice), so the 5th
 * submit can never get heap: it fails as soon as the first four have
 * retired (no waiting for the allocation deadline). */
#include "chip_scenes.h"

typedef struct sd_state {
  int k_fill;
  int failed_at;
  int rc;
} sd_state;

static void sd_orch(pto_orch *o, void *arg) {
  sd_state *st = arg;
  st->failed_at = -1;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  for (int i = 0; i < 8; i++) {
    pto_tensor t;
    if (cs_desc2(&t, 4, 16)) return;
    pto_args a;
    pto_args_init(&a);
    pto_args_output(&a, &t);
    pto_args_scalar_f32(&a, (float)i);
    if ((st->rc = pto_submit(o, st->k_fill, &a, NULL, NULL))) {
      st->failed_at = i;
      return;
    }
  }
  pto_scope_end(o);
}

static int err_scope_deadlock_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  sd_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.task_slots = 4;
  cfg.heap_bytes = 1024;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_scope_deadlock");
  scene_expect_error(chip, sd_orch, &st, PTO_ESCOPE_DEADLOCK, rep);
  cs_expect(rep, st.failed_at == 4, "the failing submit was #%d, expected #4 (1 KiB heap)",
            st.failed_at);
  cs_expect(rep, rep->err.task_id == 0, "err.task_id is %lld, expected the oldest holding task 0",
            (long long)rep->err.task_id);
  cs_expect_details(rep, "scope");
  cs_expect_details(rep, "heap_bytes 1024");
  cs_expect(rep, rep->stats.host_us < 400000.0,
            "the run took %.0f us: it waited instead of failing fast", rep->stats.host_us);
  return cs_trigger_done(chip, rep,
                         "the 5th submit of a scope on a 1 KiB heap failed at once, naming the "
                         "holding task 0 and the heap size");
}

PTO_SCENE(err_scope_deadlock, "PTO_ESCOPE_DEADLOCK: 8 OUTPUT tasks in one scope, 1 KiB heap",
          err_scope_deadlock_run);
