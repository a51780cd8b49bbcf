/* err_fatal.c — PTO_EFATAL: the orchestration calls pto_orch_fatal();
 * the formatted message becomes the details, the status latches and later
 * submits return it without submitting anything. */
#include "chip_scenes.h"

typedef struct fa_state {
  int k_fill;
  float buf[16];
  int rc_fatal, rc_status, rc_after, rc_scope;
} fa_state;

static void fa_orch(pto_orch *o, void *arg) {
  fa_state *st = arg;
  pto_tensor t;
  if (cs_view2(&t, st->buf, PTO_F32, 1, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return;
  st->rc_fatal = pto_orch_fatal(o, "input check failed at step %d of %s", 3, "prefill");
  st->rc_status = pto_orch_status(o);
  st->rc_after = pto_submit(o, st->k_fill, &a, NULL, NULL);
  st->rc_scope = pto_scope_begin(o, PTO_SCOPE_AUTO);
}

static int err_fatal_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  fa_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_fatal");
  scene_expect_error(chip, fa_orch, &st, PTO_EFATAL, rep);
  cs_expect(rep, st.rc_fatal == PTO_EFATAL, "pto_orch_fatal returned %s",
            pto_status_name(st.rc_fatal));
  cs_expect(rep, st.rc_status == PTO_EFATAL, "pto_orch_status returned %s",
            pto_status_name(st.rc_status));
  cs_expect(rep, st.rc_after == PTO_EFATAL && st.rc_scope == PTO_EFATAL,
            "after the fatal, submit returned %s and scope_begin %s", pto_status_name(st.rc_after),
            pto_status_name(st.rc_scope));
  cs_expect(rep, rep->stats.tasks == 1, "%llu tasks were accepted, expected 1",
            (unsigned long long)rep->stats.tasks);
  cs_expect_details(rep, "input check failed at step 3 of prefill");
  return cs_trigger_done(chip, rep,
                         "the details carry the formatted message; later calls return the latched "
                         "code");
}

PTO_SCENE(err_fatal, "PTO_EFATAL: the orchestration calls pto_orch_fatal()", err_fatal_run);
