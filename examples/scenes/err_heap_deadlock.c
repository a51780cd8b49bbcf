/* err_heap_deadlock.c — PTO_EHEAP_DEADLOCK: one task's OUTPUT needs
 * 32 KiB and the heap ring holds 1 KiB; it can never fit, so the submit
 * fails at once. */
#include "chip_scenes.h"

typedef struct hd_state {
  int k_fill;
  int rc;
} hd_state;

static void hd_orch(pto_orch *o, void *arg) {
  hd_state *st = arg;
  pto_tensor t;
  if (cs_desc2(&t, 64, 128)) return; /* 8192 floats = 32 KiB */
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  pto_args_scalar_f32(&a, 1.0f);
  st->rc = pto_submit(o, st->k_fill, &a, NULL, NULL);
}

static int err_heap_deadlock_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  hd_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.heap_bytes = 1024;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_heap_deadlock");
  scene_expect_error(chip, hd_orch, &st, PTO_EHEAP_DEADLOCK, rep);
  cs_expect(rep, st.rc == PTO_EHEAP_DEADLOCK, "the submit returned %s", pto_status_name(st.rc));
  cs_expect_details(rep, "32768");
  cs_expect_details(rep, "1024");
  cs_expect(rep, rep->stats.tasks == 0, "%llu tasks were accepted",
            (unsigned long long)rep->stats.tasks);
  return cs_trigger_done(chip, rep, "the details name the 32768 bytes needed and the 1024 held");
}

PTO_SCENE(err_heap_deadlock, "PTO_EHEAP_DEADLOCK: a 32 KiB OUTPUT with a 1 KiB heap",
          err_heap_deadlock_run);
