/* err_tensor_wait_timeout.c — PTO_ETENSOR_WAIT_TIMEOUT: the orchestrator
 * reads (pto_orch_read, 100 ms deadline) the output of a kernel that does
 * not finish; the read fails naming the producer, and the kernel is
 * cancelled. */
#include "chip_scenes.h"

typedef struct tw_state {
  int k_hang, k_fill;
  float y[64], dst[64];
  int rc;
  uint64_t waited_ns;
} tw_state;

static void tw_orch(pto_orch *o, void *arg) {
  tw_state *st = arg;
  pto_tensor y;
  if (cs_view2(&y, st->y, PTO_F32, 4, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &y);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return; /* a producer that finishes */
  pto_args_init(&a);
  pto_args_output_existing(&a, &y);
  if (pto_submit(o, st->k_hang, &a, NULL, NULL)) return;
  uint64_t t0 = pto_now_ns();
  st->rc = pto_orch_read(o, &y, st->dst, 100);
  st->waited_ns = pto_now_ns() - t0;
}

static int err_tensor_wait_timeout_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  tw_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.watchdog_ms = 5000; /* the read's deadline must come first */
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "hang", cs_hang_kernel, &st.k_hang);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_tensor_wait_timeout");
  scene_expect_error(chip, tw_orch, &st, PTO_ETENSOR_WAIT_TIMEOUT, rep);
  cs_expect(rep, st.rc == PTO_ETENSOR_WAIT_TIMEOUT, "pto_orch_read returned %s",
            pto_status_name(st.rc));
  cs_expect(rep, st.waited_ns >= 95000000ull, "pto_orch_read gave up after %.1f ms, before 100",
            (double)st.waited_ns / 1e6);
  cs_expect(rep, rep->err.task_id == 1, "err.task_id is %lld, expected the hung producer 1",
            (long long)rep->err.task_id);
  cs_expect_details(rep, "pto_orch_read");
  cs_expect_details(rep, "100 ms");
  return cs_trigger_done(chip, rep,
                         "pto_orch_read gave up after its 100 ms deadline, naming the unfinished "
                         "producer task 1");
}

PTO_SCENE(err_tensor_wait_timeout, "PTO_ETENSOR_WAIT_TIMEOUT: reading the output of a hung kernel",
          err_tensor_wait_timeout_run);
