/* err_invalid_args.c — PTO_EINVAL from a bad submit: a tensor view that
 * reaches outside its buffer. The first (valid) task is accepted; the bad
 * submit returns PTO_EINVAL and latches it; the next submit is a no-op
 * returning the latched code. The full matrix of bad inputs is in
 * tests/unit/test_orch_errors.c. */
#include "chip_scenes.h"

typedef struct ia_state {
  int k_fill;
  float buf[64];
  int rc_bad, rc_after;
} ia_state;

static void ia_orch(pto_orch *o, void *arg) {
  ia_state *st = arg;
  pto_tensor t, bad;
  int64_t shape[1] = {64};
  if (pto_tensor_init(&t, st->buf, sizeof st->buf, PTO_F32, 1, shape)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return;
  bad = t;
  bad.offset = 8; /* 64 elements from 8: the last 8 lie past the buffer */
  pto_args_init(&a);
  pto_args_input(&a, &t);
  pto_args_output_existing(&a, &bad);
  pto_args_scalar_f32(&a, 2.0f);
  st->rc_bad = pto_submit(o, st->k_fill, &a, NULL, NULL);
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar_f32(&a, 3.0f);
  st->rc_after = pto_submit(o, st->k_fill, &a, NULL, NULL);
}

static int err_invalid_args_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ia_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_invalid_args");
  scene_expect_error(chip, ia_orch, &st, PTO_EINVAL, rep);
  cs_expect_details(rep, "tensor argument 1");
  cs_expect_details(rep, "but the buffer has");
  cs_expect(rep, st.rc_bad == PTO_EINVAL, "the bad submit returned %s", pto_status_name(st.rc_bad));
  cs_expect(rep, st.rc_after == PTO_EINVAL, "the submit after it returned %s, not the latched code",
            pto_status_name(st.rc_after));
  cs_expect(rep, rep->stats.tasks == 1, "%llu tasks were accepted, expected only the first",
            (unsigned long long)rep->stats.tasks);
  return cs_trigger_done(chip, rep,
                         "the details name argument 1 and its view; later submits return the "
                         "latched code");
}

PTO_SCENE(err_invalid_args, "PTO_EINVAL: a view reaching outside its buffer, then a latched submit",
          err_invalid_args_run);
