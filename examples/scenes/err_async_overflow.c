/* err_async_overflow.c — PTO_EASYNC_OVERFLOW: async_slots = 2 and a task
 * of 4 blocks that each go async (nobody completes them). Two begins get
 * a slot; the others get PTO_EASYNC_OVERFLOW, which their kernel returns,
 * failing the run. */
#include <stdatomic.h>

#include "chip_scenes.h"

typedef struct ao_state {
  int k_async;
  _Atomic int began, overflowed;
} ao_state;

static int ao_async(const pto_kctx *ctx) {
  ao_state *st = ctx->env;
  uint64_t token;
  int rc = pto_kctx_async_begin(ctx, &token);
  /* relaxed: counters read after the run joined every core */
  atomic_fetch_add_explicit(rc == PTO_OK ? &st->began : &st->overflowed, 1, memory_order_relaxed);
  return rc;
}

static void ao_orch(pto_orch *o, void *arg) {
  ao_state *st = arg;
  cs_submit(o, st->k_async, NULL, 4, NULL);
}

static int err_async_overflow_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ao_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.async_slots = 2;
  cfg.env = &st;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "async", ao_async, &st.k_async);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_async_overflow");
  scene_expect_error(chip, ao_orch, &st, PTO_EASYNC_OVERFLOW, rep);
  const int began = atomic_load_explicit(&st.began, memory_order_relaxed);
  const int over = atomic_load_explicit(&st.overflowed, memory_order_relaxed);
  cs_expect(rep, began <= 2 && over >= 1, "%d begins got a slot and %d overflowed (2 slots)", began,
            over);
  cs_expect(rep, rep->err.task_id == 0, "err.task_id is %lld, expected 0",
            (long long)rep->err.task_id);
  cs_expect(rep, rep->err.core_id >= 0, "err.core_id is %d: the failing block's core is unnamed",
            rep->err.core_id);
  return cs_trigger_done(chip, rep,
                         "at most 2 blocks went async; the next begin overflowed and failed the "
                         "run naming task 0 and its core");
}

PTO_SCENE(err_async_overflow, "PTO_EASYNC_OVERFLOW: 2 async slots, 4 blocks going async",
          err_async_overflow_run);
