/* err_dep_overflow.c — PTO_EDEP_OVERFLOW with a 4-entry dependency pool,
 * in two runs:
 *  1. one task depends on 8 live producers (8 hung writers of the rows of
 *     X, then a reader of all of X): it fits only once some of them have
 *     retired (a done producer takes no entry), which hung ones never do,
 *     so it fails after alloc_timeout_ms (150), naming the 8 entries;
 *  2. the pool runs dry over time: 8 readers of the output of a hung task
 *     take one entry each; the 5th waits for reclamation that cannot come
 *     and fails after alloc_timeout_ms (150). */
#include "chip_scenes.h"

typedef struct do_state {
  int k_hang_write, k_copy;
  float x[8 * 16], y[8][16];
  int mode;
  int failed_at;
} do_state;

/* Holds its output (t0) until the run is cancelled. */
static int do_hang_write(const pto_kctx *ctx) { return cs_hang_kernel(ctx); }

static void do_orch(pto_orch *o, void *arg) {
  do_state *st = arg;
  pto_tensor x;
  st->failed_at = -1;
  if (cs_view2(&x, st->x, PTO_F32, 8, 16)) return;
  pto_args a;
  if (st->mode == 1) {
    for (int i = 0; i < 8; i++) {
      pto_tensor row;
      int64_t start[2] = {i, 0}, shape[2] = {1, 16};
      if (pto_tensor_slice(&x, start, shape, &row)) return;
      pto_args_init(&a);
      pto_args_output_existing(&a, &row);
      if (pto_submit(o, st->k_hang_write, &a, NULL, NULL)) return;
    }
    pto_tensor out;
    if (cs_view2(&out, st->y, PTO_F32, 8, 16)) return;
    pto_args_init(&a);
    pto_args_input(&a, &x);
    pto_args_output_existing(&a, &out);
    if (pto_submit(o, st->k_copy, &a, NULL, NULL)) st->failed_at = 8;
    return;
  }
  pto_args_init(&a);
  pto_args_output_existing(&a, &x);
  if (pto_submit(o, st->k_hang_write, &a, NULL, NULL)) return;
  for (int i = 0; i < 8; i++) {
    pto_tensor row, out;
    int64_t start[2] = {i, 0}, shape[2] = {1, 16};
    if (pto_tensor_slice(&x, start, shape, &row) || cs_view2(&out, st->y[i], PTO_F32, 1, 16))
      return;
    pto_args_init(&a);
    pto_args_input(&a, &row);
    pto_args_output_existing(&a, &out);
    if (pto_submit(o, st->k_copy, &a, NULL, NULL)) {
      st->failed_at = i + 1;
      return;
    }
  }
}

static int err_dep_overflow_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  do_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.dep_entries = 4;
  cfg.alloc_timeout_ms = 150;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "hang_write", do_hang_write, &st.k_hang_write);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy", pto_kern_copy, &st.k_copy);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_dep_overflow");
  st.mode = 1;
  scene_expect_error(chip, do_orch, &st, PTO_EDEP_OVERFLOW, rep);
  cs_expect(rep, st.failed_at == 8, "run 1: the failing submit was #%d, expected the reader #8",
            st.failed_at);
  cs_expect_details(rep, "8 entries (dep_entries 4)");
  cs_expect_details(rep, "150 ms");
  char first[sizeof rep->err.details];
  snprintf(first, sizeof first, "%s", rep->err.details);
  if (rep->verified) {
    st.mode = 2;
    scene_expect_error(chip, do_orch, &st, PTO_EDEP_OVERFLOW, rep);
    cs_expect(rep, st.failed_at == 5,
              "run 2: the failing submit was #%d, expected #5 (4 readers fill the pool)",
              st.failed_at);
    cs_expect_details(rep, "dependency pool");
    cs_expect_details(rep, "150 ms");
  }
  char checked[400];
  snprintf(checked, sizeof checked,
           "a task with more live deps than the pool failed after the 150 ms deadline (%.120s); a "
           "pool exhausted by live readers failed after it too",
           first);
  return cs_trigger_done(chip, rep, checked);
}

PTO_SCENE(err_dep_overflow, "PTO_EDEP_OVERFLOW: 4 dependency entries, 8 live producers / readers",
          err_dep_overflow_run);
