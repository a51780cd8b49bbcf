/* contract_scenes.h — the checking-mode scenes (err_contract_*): one task
 * whose kernel breaks its contract in one way, run with checking mode on
 * and a fixed seed; each scene names the error it expects, down to the
 * argument and the byte (docs/contracts.md). */
#ifndef PTO_CONTRACT_SCENES_H
#define PTO_CONTRACT_SCENES_H

#include "chip_scenes.h"

#define CT_N 16 /* elements of a row */

typedef struct ct_state {
  int32_t m[4][CT_N]; /* the kernels' input */
  int32_t out[2 * CT_N];
  int k;
} ct_state;

typedef struct ct_expect {
  const char *scene;
  int arg;             /* err.arg expected */
  const char *details; /* a piece of the details expected, with the byte and values */
  const char *checked; /* what the scene verified, for its report */
} ct_expect;

/* Runs the orchestration `fn` on a one-cluster chip in checking mode with
 * kernel `kernel`, expecting PTO_ECONTRACT for task 0 as `e` says. */
static inline int ct_run(const pto_scene_opts *opts, pto_scene_report *rep, pto_kernel_fn kernel,
                         pto_orch_fn fn, const ct_expect *e) {
  ct_state st;
  memset(&st, 0, sizeof st);
  for (int r = 0; r < 4; r++)
    for (int j = 0; j < CT_N; j++)
      st.m[r][j] = r * 100 + j;
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.check = 1;
  cfg.check_seed = 1;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "contract_breaker", kernel, &st.k);
  if (rc) return cs_setup_failed(chip, rep, rc, e->scene);
  scene_expect_error(chip, fn, &st, PTO_ECONTRACT, rep);
  cs_expect(rep, rep->err.task_id == 0, "err.task_id is %lld, expected 0",
            (long long)rep->err.task_id);
  cs_expect(rep, rep->err.arg == e->arg, "err.arg is %d, expected %d", rep->err.arg, e->arg);
  cs_expect(rep, strcmp(rep->err.kernel, "contract_breaker") == 0,
            "err.kernel is \"%s\", expected \"contract_breaker\"", rep->err.kernel);
  cs_expect_details(rep, e->details);
  cs_expect_details(rep, "PTO_CHECK_SEED=1 ");
  return cs_trigger_done(chip, rep, e->checked);
}

#endif
