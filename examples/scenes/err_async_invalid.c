/* err_async_invalid.c — PTO_EASYNC_INVALID, in two runs:
 *  1. the orchestrator presents a made-up token;
 *  2. a block goes async and publishes its token; the orchestrator
 *     completes it (fine: the task finishes), then completes it again.
 * Each bad completion returns PTO_EASYNC_INVALID and fails the run. */
#include <stdatomic.h>

#include "chip_scenes.h"

typedef struct ai_state {
  int k_async;
  _Atomic uint64_t token; /* 0 until the block has gone async */
  int rc_first, rc_second, rc_wait;
  bool bogus;
} ai_state;

static int ai_async(const pto_kctx *ctx) {
  ai_state *st = ctx->env;
  uint64_t token;
  int rc = pto_kctx_async_begin(ctx, &token);
  if (rc) return rc;
  atomic_store_explicit(&st->token, token | (1ull << 63),
                        memory_order_release); /* pairs with ai_have_token */
  return PTO_OK;
}

static bool ai_have_token(void *p) {
  ai_state *st = p;
  return atomic_load_explicit(&st->token, memory_order_acquire) != 0; /* pairs with ai_async */
}

static void ai_orch(pto_orch *o, void *arg) {
  ai_state *st = arg;
  pto_chip *chip = pto_orch_chip(o);
  if (st->bogus) {
    st->rc_second = pto_chip_async_complete(chip, 0x0123456789abcdefull);
    return;
  }
  pto_task_id id;
  if (pto_submit(o, st->k_async, NULL, NULL, &id)) return;
  if (!pto_wait(NULL, ai_have_token, st, pto_deadline_ms(2000))) {
    pto_orch_fatal(o, "the async block never published its token");
    return;
  }
  /* the flag bit only marks "published": a token may be 0 */
  const uint64_t token = atomic_load_explicit(&st->token, memory_order_acquire) & ~(1ull << 63);
  st->rc_first = pto_chip_async_complete(chip, token);
  st->rc_wait = pto_orch_wait_task(o, id, -1);
  st->rc_second = pto_chip_async_complete(chip, token);
}

static int err_async_invalid_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ai_state st = {0};
  pto_chip_config cfg;
  scene_chip_config(opts, 1, 0, &cfg);
  cfg.env = &st;
  pto_chip *chip = NULL;
  int rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "async", ai_async, &st.k_async);
  if (rc) return cs_setup_failed(chip, rep, rc, "err_async_invalid");
  st.bogus = true;
  scene_expect_error(chip, ai_orch, &st, PTO_EASYNC_INVALID, rep);
  cs_expect(rep, st.rc_second == PTO_EASYNC_INVALID, "the made-up token returned %s",
            pto_status_name(st.rc_second));
  cs_expect_details(rep, "token");
  if (rep->verified) {
    st.bogus = false;
    st.rc_second = 0;
    scene_expect_error(chip, ai_orch, &st, PTO_EASYNC_INVALID, rep);
    cs_expect(rep, st.rc_first == PTO_OK, "the first completion returned %s",
              pto_status_name(st.rc_first));
    cs_expect(rep, st.rc_wait == PTO_OK, "the task did not finish after its completion (%s)",
              pto_status_name(st.rc_wait));
    cs_expect(rep, st.rc_second == PTO_EASYNC_INVALID, "the second completion returned %s",
              pto_status_name(st.rc_second));
    cs_expect_details(rep, "token");
  }
  return cs_trigger_done(chip, rep,
                         "a made-up token and a token completed twice were both rejected; the "
                         "first completion finished the task");
}

PTO_SCENE(err_async_invalid, "PTO_EASYNC_INVALID: a made-up token, then a token completed twice",
          err_async_invalid_run);
