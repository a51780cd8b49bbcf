/* err_orch_starved.c — PTO_ESCHED_TIMEOUT, class ORCH_STARVED: every task
 * has finished, and the orchestration neither submits nor returns (it
 * sleeps, here until it sees the run fail). The 300 ms watchdog reports
 * that the orchestrator starves the schedulers. */
#include "chip_scenes.h"

typedef struct os_state {
  int k_fill;
  float buf[64];
  int status_seen;
  uint64_t slept_ns;
} os_state;

static bool os_failed(void *o) { return pto_orch_status(o) != PTO_OK; }

static void os_orch(pto_orch *o, void *arg) {
  os_state *st = arg;
  pto_tensor t;
  if (cs_view2(&t, st->buf, PTO_F32, 4, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar_f32(&a, 1.0f);
  pto_task_id id;
  if (pto_submit(o, st->k_fill, &a, NULL, &id) || pto_orch_wait_task(o, id, -1)) return;
  uint64_t t0 = pto_now_ns();
  pto_wait(NULL, os_failed, o, pto_deadline_ms(3000)); /* "busy with something else" */
  st->slept_ns = pto_now_ns() - t0;
  st->status_seen = pto_orch_status(o);
}

static int err_orch_starved_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  os_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.watchdog_ms = 300;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_orch_starved");
  scene_expect_error(chip, os_orch, &st, PTO_ESCHED_TIMEOUT, rep);
  cs_expect(rep, rep->err.stall == PTO_STALL_ORCH_STARVED, "the stall class is \"%s\"",
            pto_stall_class_name(rep->err.stall));
  cs_expect(rep, st.status_seen == PTO_ESCHED_TIMEOUT,
            "the orchestration saw status %s while it slept", pto_status_name(st.status_seen));
  cs_expect(rep, st.slept_ns >= 250000000ull && st.slept_ns < 2500000000ull,
            "the watchdog fired after %.0f ms of silence (watchdog_ms 300)",
            (double)st.slept_ns / 1e6);
  cs_expect(rep, rep->err.core_id == -1, "err.core_id is %d: no core is involved",
            rep->err.core_id);
  cs_expect_details(rep, "orchestrator");
  return cs_trigger_done(chip, rep,
                         "class ORCH_STARVED after ~300 ms of an idle, unfinished orchestration, "
                         "which saw the latched status");
}

PTO_SCENE(err_orch_starved, "PTO_ESCHED_TIMEOUT (orchestrator starves): it sleeps, not done",
          err_orch_starved_run);
