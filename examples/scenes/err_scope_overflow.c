/* err_scope_overflow.c — PTO_ESCOPE_OVERFLOW: 5 nested scopes where at
 * most PTO_MAX_SCOPE_DEPTH (4) are allowed; the 5th scope_begin fails. */
#include "chip_scenes.h"

typedef struct so_state {
  int depth_failed;
  int rc;
} so_state;

static void so_orch(pto_orch *o, void *arg) {
  so_state *st = arg;
  st->depth_failed = -1;
  for (int d = 1; d <= 5; d++)
    if ((st->rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) {
      st->depth_failed = d;
      return;
    }
}

static int err_scope_overflow_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  so_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_scope_overflow");
  scene_expect_error(chip, so_orch, &st, PTO_ESCOPE_OVERFLOW, rep);
  cs_expect(rep, st.depth_failed == 5, "scope_begin failed at depth %d, expected 5",
            st.depth_failed);
  cs_expect(rep, st.rc == PTO_ESCOPE_OVERFLOW, "scope_begin returned %s", pto_status_name(st.rc));
  cs_expect_details(rep, "at most 4");
  return cs_trigger_done(chip, rep,
                         "the 5th nested scope_begin failed; the details name the limit");
}

PTO_SCENE(err_scope_overflow, "PTO_ESCOPE_OVERFLOW: 5 nested scopes (at most 4)",
          err_scope_overflow_run);
