/* async.c — asynchronous block completion: a kernel hands its block's
 * completion to another party and frees its core; the block finishes when
 * pto_chip_async_complete() presents the token. The slots belong to the
 * chip and every begin takes a fresh chip-wide generation, so a repeated,
 * stale (from any earlier run) or made-up token never matches; one of an
 * earlier run is refused without failing the current run. A completer that
 * comes while the run ends is waited for before the run is reset. */
#include <stdarg.h>
#include <stdio.h>

#include "chip/contract.h"
#include "chip/run.h"
#include "chip/schedule.h"
#include "common/last_error.h"
#include "common/options.h"

/* token = generation (48 bits) << 16 | slot (16 bits). 2^48 begins on one
 * chip (one per nanosecond for three days) before a generation repeats. */
#define GEN_MASK ((1ull << 48) - 1)
_Static_assert(PTO_ASYNC_SLOTS_MAX - 1 <= 0xffff, "a slot index must fit a token's 16 bits");

/* A refused begin of a running block says why: in pto_last_error(), and
 * as the block's reason (pto_kctx_fail), so that a kernel returning the
 * code fails the run with it, after its kernel, block and core (a reason
 * the kernel does not return is dropped at the block's end). */
static int begin_refused(const pto_kctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int begin_refused(const pto_kctx *ctx, int code, const char *fmt, ...) {
  char why[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  last_error_set(code, "pto_kctx_async_begin: %s", why);
  return pto_kctx_fail(ctx, code, "pto_kctx_async_begin: %s", why);
}

int pto_kctx_async_begin(const pto_kctx *ctx, uint64_t *token) {
  if (!ctx || !ctx->run)
    return last_error_set(PTO_EINVAL, "pto_kctx_async_begin: %s",
                          !ctx ? "ctx is NULL" : "ctx is not the context of a running kernel");
  if (!token) return begin_refused(ctx, PTO_EINVAL, "the token is NULL (where to put it)");
  pto_run *r = (pto_run *)ctx->run;
  if (r->contract) return contract_async_refused(r, ctx);
  core *c = &r->cores[ctx->core_id];
  if (c->defer_current) /* one async completion per block */
    return begin_refused(ctx, PTO_EINVAL,
                         "this block already went asynchronous (one asynchronous completion per "
                         "block: the token of its first call completes it)");
  /* the block this core is running: not always its dispatch's, which a
   * hand-off runs others after (handoff.h) */
  task *t = c->running;
  for (uint32_t i = 0; i < r->nasync; i++) {
    uint64_t s = atomic_load_explicit(&r->async[i].state, memory_order_relaxed);
    if (s & 1) continue;
    uint64_t gen =
        (atomic_fetch_add_explicit(&r->chip->async_gen, 1, memory_order_relaxed) + 1) & GEN_MASK;
    /* acquire pairs with the completer's release when it freed the slot */
    if (!atomic_compare_exchange_strong_explicit(&r->async[i].state, &s, (gen << 1) | 1,
                                                 memory_order_acquire, memory_order_relaxed))
      continue;
    atomic_store_explicit(&r->async[i].t, t, memory_order_relaxed); /* token hand-off orders it */
    c->defer_current = true;
    *token = gen << 16 | i;
    return PTO_OK;
  }
  if (!r->nasync)
    return begin_refused(ctx, PTO_EASYNC_OVERFLOW,
                         "pto_chip_config.async_slots is 0: this chip has no slot for an "
                         "asynchronous completion");
  return begin_refused(ctx, PTO_EASYNC_OVERFLOW,
                       "all %u async slots hold outstanding completions "
                       "(pto_chip_config.async_slots)",
                       r->nasync);
}

static int complete(pto_run *r, uint64_t token) {
  uint32_t slot = (uint32_t)(token & 0xffffu);
  uint64_t gen = token >> 16;
  if (gen == 0) { /* generations start at 1: no run handed it out */
    run_fail(r, PTO_EASYNC_INVALID, PTO_TASK_NONE, -1,
             "async completion token 0x%llx was never handed out (generation 0: a token "
             "variable never set by pto_kctx_async_begin?)",
             (unsigned long long)token);
    return PTO_EASYNC_INVALID;
  }
  /* a straggler of an earlier run (its block ended with that run) is
   * refused without touching this run: every generation handed out before
   * this run began is at most async_gen0 */
  if (gen <= r->async_gen0) return PTO_EASYNC_INVALID;
  if (slot >= r->nasync) {
    run_fail(r, PTO_EASYNC_INVALID, PTO_TASK_NONE, -1,
             "async completion token 0x%llx names slot %u but async_slots is %u",
             (unsigned long long)token, slot, r->nasync);
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
             "async completion token 0x%llx is not outstanding (completed twice or made up)",
             (unsigned long long)token);
    return PTO_EASYNC_INVALID;
  }
  atomic_fetch_add_explicit(&r->async_done, 1, memory_order_relaxed); /* watchdog progress */
  if (r->ctl)
    schedule_async_arrived(r, t); /* its controller processes it where it chooses */
  else
    sched_task_done_unit(r, t, 1);
  return PTO_OK;
}

int pto_chip_async_complete(pto_chip *chip, uint64_t token) {
  if (!chip) return PTO_EINVAL;
  /* Count this call in the current phase, then read the run; all seq_cst,
   * against pto_chip_run's store of NULL, flip of the phase and wait for
   * the old phase's count: a call that saw the phase unchanged after
   * counting itself is waited for; one that saw it flip counts itself in
   * the new phase (whose run, if any, is ended by the next flip). */
  uint32_t p;
  for (;;) {
    p = atomic_load_explicit(&chip->async_phase, memory_order_seq_cst) & 1u;
    atomic_fetch_add_explicit(&chip->async_calls[p], 1, memory_order_seq_cst);
    if ((atomic_load_explicit(&chip->async_phase, memory_order_seq_cst) & 1u) == p) break;
    atomic_fetch_sub_explicit(&chip->async_calls[p], 1, memory_order_seq_cst);
  }
  pto_run *r = atomic_load_explicit(&chip->cur_run, memory_order_seq_cst);
  int rc = r ? complete(r, token) : PTO_EASYNC_INVALID; /* no run in progress */
  /* our use of the run happens-before its teardown */
  atomic_fetch_sub_explicit(&chip->async_calls[p], 1, memory_order_seq_cst);
  return rc;
}
