/* err_kernel.c — PTO_EKERNEL: block 1 of the third task of a chain
 * returns an error that is not a pto status (-1000). The report names the
 * task, its kernel and the core; the consumer of its output never runs. */
#include <stdatomic.h>

#include "chip_scenes.h"

typedef struct ek_state {
  int k_fill, k_bad, k_copy;
  float x[64], y[64];
  _Atomic int core; /* where the failing block ran */
} ek_state;

static int ek_bad(const pto_kctx *ctx) {
  ek_state *st = ctx->env;
  if (ctx->block_idx != 1) return PTO_OK;
  atomic_store_explicit(&st->core, ctx->core_id, memory_order_relaxed); /* read after the join */
  return -1000;
}

static void ek_orch(pto_orch *o, void *arg) {
  ek_state *st = arg;
  pto_tensor x, y;
  if (cs_view2(&x, st->x, PTO_F32, 4, 16) || cs_view2(&y, st->y, PTO_F32, 4, 16)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &x);
  pto_args_scalar_f32(&a, 1.0f);
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return;
  if (pto_submit(o, st->k_fill, &a, NULL, NULL)) return;
  pto_args_init(&a);
  pto_args_inout(&a, &x);
  if (cs_submit(o, st->k_bad, &a, 3, NULL)) return;
  pto_args_init(&a);
  pto_args_input(&a, &x);
  pto_args_output_existing(&a, &y);
  pto_submit(o, st->k_copy, &a, NULL, NULL);
}

static int err_kernel_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ek_state st = {0};
  atomic_init(&st.core, -1);
  for (int i = 0; i < 64; i++)
    st.y[i] = -7.0f;
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.env = &st;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &st.k_fill);
  if (!rc) rc = pto_kernel_register_aiv(chip, "bad_kernel", ek_bad, &st.k_bad);
  if (!rc) rc = pto_kernel_register_aiv(chip, "copy", pto_kern_copy, &st.k_copy);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_kernel");
  scene_expect_error(chip, ek_orch, &st, PTO_EKERNEL, rep);
  const int core = atomic_load_explicit(&st.core, memory_order_relaxed);
  cs_expect(rep, rep->err.task_id == 2, "err.task_id is %lld, expected 2",
            (long long)rep->err.task_id);
  cs_expect(rep, rep->err.core_id >= 0 && rep->err.core_id == core,
            "err.core_id is %d, the failing block ran on core %d", rep->err.core_id, core);
  cs_expect(rep, strcmp(rep->err.kernel, "bad_kernel") == 0,
            "err.kernel is \"%s\", expected \"bad_kernel\"", rep->err.kernel);
  cs_expect_details(rep, "bad_kernel");
  cs_expect_details(rep, "-1000");
  cs_expect(rep, st.y[0] == -7.0f, "the consumer of the failed task ran (y[0] = %g)",
            (double)st.y[0]);
  return cs_trigger_done(chip, rep,
                         "the report names task 2, kernel \"bad_kernel\", block 1's core and the "
                         "returned -1000; the consumer never ran");
}

PTO_SCENE(err_kernel, "PTO_EKERNEL: a kernel block returns an error", err_kernel_run);
