/* async.c — asynchronous block completion: a kernel hands its block's
 * completion to another party and frees its core; the block finishes when
 * pto_chip_async_complete() presents the token. Tokens carry the run and a
 * per-slot generation, so a stale or repeated token is rejected. */
#include "chip/run.h"

/* token = run_seq (16 bits) << 48 | generation (32 bits) << 16 | slot (16 bits) */
static uint64_t make_token(uint32_t run_seq, uint64_t gen, uint32_t slot) {
  return ((uint64_t)(run_seq & 0xffffu) << 48) | ((gen & 0xffffffffu) << 16) | slot;
}

int pto_kctx_async_begin(const pto_kctx *ctx, uint64_t *token) {
  if (!ctx || !ctx->run || !token) return PTO_EINVAL;
  pto_run *r = (pto_run *)ctx->run;
  core *c = &r->cores[ctx->core_id];
  if (c->defer_current) return PTO_EINVAL; /* one async completion per block */
  /* the block this core is running: the dispatch after the last finished one */
  uint64_t cur = atomic_load_explicit(&c->finished, memory_order_relaxed) + 1;
  task *t = c->slot[cur & 1].t;
  for (uint32_t i = 0; i < r->nasync; i++) {
    uint64_t s = atomic_load_explicit(&r->async[i].state, memory_order_relaxed);
    if (s & 1) continue;
    /* acquire pairs with the completer's release when it freed the slot */
    if (!atomic_compare_exchange_strong_explicit(&r->async[i].state, &s, (s + 2) | 1,
                                                 memory_order_acquire, memory_order_relaxed))
      continue;
    atomic_store_explicit(&r->async[i].t, t, memory_order_relaxed); /* token hand-off orders it */
    c->defer_current = true;
    *token = make_token(r->run_seq, (s + 2) >> 1, i);
    return PTO_OK;
  }
  return PTO_EASYNC_OVERFLOW;
}

int pto_chip_async_complete(pto_chip *chip, uint64_t token) {
  if (!chip) return PTO_EINVAL;
  /* acquire pairs with pto_chip_run's release of cur_run */
  pto_run *r = atomic_load_explicit(&chip->cur_run, memory_order_acquire);
  if (!r) return PTO_EASYNC_INVALID;
  uint32_t slot = (uint32_t)(token & 0xffffu);
  uint64_t gen = (token >> 16) & 0xffffffffu;
  if ((token >> 48) != (r->run_seq & 0xffffu) || slot >= r->nasync) {
    run_fail(r, PTO_EASYNC_INVALID, PTO_TASK_NONE, -1,
             "async completion token 0x%llx is not from this run or names no slot",
             (unsigned long long)token);
    return PTO_EASYNC_INVALID;
  }
  async_slot *a = &r->async[slot];
  uint64_t busy = (gen << 1) | 1;
  uint64_t s = atomic_load_explicit(&a->state, memory_order_acquire);
  task *t = atomic_load_explicit(&a->t, memory_order_relaxed); /* before freeing the slot */
  /* acq_rel: frees the slot for the next begin (release) after reading t */
  if (s != busy || !atomic_compare_exchange_strong_explicit(
                       &a->state, &s, busy & ~1ull, memory_order_acq_rel, memory_order_relaxed)) {
    run_fail(r, PTO_EASYNC_INVALID, PTO_TASK_NONE, -1,
             "async completion token 0x%llx is not outstanding (completed twice, or stale)",
             (unsigned long long)token);
    return PTO_EASYNC_INVALID;
  }
  atomic_fetch_add_explicit(&r->async_done, 1, memory_order_relaxed); /* watchdog progress */
  sched_task_done_unit(r, t, 1);
  return PTO_OK;
}
