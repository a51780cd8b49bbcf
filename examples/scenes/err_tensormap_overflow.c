/* err_tensormap_overflow.c — PTO_ETENSORMAP_OVERFLOW: an 8-entry TensorMap
 * and many live readers. A hung task writes X; 16 readers of rows of X
 * each record two regions (their row of X, their output) and cannot
 * complete, so no entry can be purged: after alloc_timeout_ms (150) the
 * submit fails. */
#include "chip_scenes.h"

typedef struct to_state {
  int k_hang, k_copy;
  float x[16 * 16], y[16 * 16];
  int failed_at;
} to_state;

static void to_orch(pto_orch *o, void *arg) {
  to_state *st = arg;
  pto_tensor x, y;
  st->failed_at = -1;
  if (cs_view2(&x, st->x, PTO_F32, 16, 16) || cs_view2(&y, st->y, PTO_F32, 16, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &x);
  if (pto_submit(o, st->k_hang, &a, NULL, NULL)) return;
  for (int i = 0; i < 16; i++) {
    pto_tensor xr, yr;
    int64_t start[2] = {i, 0}, shape[2] = {1, 16};
    if (pto_tensor_slice(&x, start, shape, &xr) || pto_tensor_slice(&y, start, shape, &yr)) return;
    pto_args_init(&a);
    pto_args_input(&a, &xr);
    pto_args_output_existing(&a, &yr);
    if (pto_submit(o, st->k_copy, &a, NULL, NULL)) {
      st->failed_at = i + 1;
      return;
    }
  }
}

static int err_tensormap_overflow_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  to_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.tensormap_entries = 8;
  cfg.alloc_timeout_ms = 150;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "hang", cs_hang_kernel, &st.k_hang);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy", pto_kern_copy, &st.k_copy);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_tensormap_overflow");
  scene_expect_error(chip, to_orch, &st, PTO_ETENSORMAP_OVERFLOW, rep);
  /* 1 entry for the writer, 2 per reader: the 4th reader finds the map full */
  cs_expect(rep, st.failed_at == 4, "the failing submit was #%d, expected #4", st.failed_at);
  cs_expect(rep, rep->err.task_id == 0, "err.task_id is %lld, expected the hung writer 0",
            (long long)rep->err.task_id);
  cs_expect_details(rep, "TensorMap");
  cs_expect_details(rep, "150 ms");
  return cs_trigger_done(chip, rep,
                         "the 4th live reader found the 8-entry TensorMap full and failed after "
                         "the 150 ms deadline, naming the hung task 0");
}

PTO_SCENE(err_tensormap_overflow, "PTO_ETENSORMAP_OVERFLOW: 8 entries, a hung writer, live readers",
          err_tensormap_overflow_run);
