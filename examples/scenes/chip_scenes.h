/* chip_scenes.h — helpers shared by the chip scenes and error triggers in
 * this folder. Header-only because every .c file here is a scene of its
 * own: simulated work and cancellation-aware blocking for kernels,
 * deterministic inputs, block markers, and the report helpers that turn a
 * failed check into a verdict with a readable message. */
#ifndef PTO_CHIP_SCENES_H
#define PTO_CHIP_SCENES_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/wait.h"
#include "pto/kernels.h"
#include "scene.h"

/* ---- kernels ---- */

/* Simulated work: a kernel that takes a while makes ordering bugs show. */
static inline void cs_sleep_us(int64_t us) {
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
  nanosleep(&ts, NULL);
}

static inline bool cs_cancelled_cond(void *p) { return pto_kctx_cancelled((const pto_kctx *)p); }

/* Blocks a kernel until its run is cancelled (returns true) or `ms` pass
 * (false): how a scene simulates a kernel that hangs, without ever
 * outliving the run's shutdown. */
static inline bool cs_block_until_cancelled(const pto_kctx *ctx, int64_t ms) {
  return pto_wait(NULL, cs_cancelled_cond, (void *)ctx, pto_deadline_ms(ms));
}

/* Counts one visit to an i32 marker; blocks of one task write disjoint
 * markers, the count only exposes a block that ran twice. */
static inline void cs_mark(int32_t *p) {
  __atomic_fetch_add(p, 1, __ATOMIC_RELAXED); /* read after the run, which joins every core */
}

/* The index of this core's part of a block: 0 for the AIC, then the AIV by
 * sub_block_id (after the AIC when the block has one). */
static inline int cs_part(const pto_kctx *ctx, int has_aic) {
  return ctx->core_type == PTO_CORE_AIC ? 0 : has_aic + ctx->sub_block_id;
}

/* ---- inputs ---- */

static inline float cs_frand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffff) / 65536.0f * 2.0f - 1.0f; /* [-1, 1) */
}

static inline void cs_fill_rand(float *v, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++)
    v[i] = cs_frand(&seed);
}

/* Whole-buffer row-major view; aborts the scene through the return code. */
static inline int cs_view2(pto_tensor *t, void *buf, pto_dtype dt, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return pto_tensor_init(t, buf, (size_t)(rows * cols) * pto_dtype_size(dt), dt, 2, shape);
}

static inline int cs_desc2(pto_tensor *t, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return pto_tensor_desc(t, PTO_F32, 2, shape);
}

/* ---- report ---- */

static inline void cs_fail(pto_scene_report *rep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void cs_fail(pto_scene_report *rep, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rep->message, sizeof rep->message, fmt, ap);
  va_end(ap);
  rep->verified = false;
}

/* A success scene whose run (or setup) failed: record why. */
static inline int cs_run_failed(pto_scene_report *rep, int rc, const char *scene) {
  rep->status = rc;
  rep->verified = false;
  if (!rep->message[0])
    snprintf(rep->message, sizeof rep->message, "%s: run failed with %s", scene,
             pto_status_name(rc));
  return rc;
}

/* Error triggers: after scene_expect_error() matched the code, the details
 * must name what went wrong. */
static inline bool cs_expect_details(pto_scene_report *rep, const char *needle) {
  if (!rep->verified) return false;
  if (strstr(rep->err.details, needle)) return true;
  cs_fail(rep, "%s as expected, but the details do not mention \"%s\": %s",
          pto_status_name(rep->status), needle, rep->err.details);
  return false;
}

static inline bool cs_expect(pto_scene_report *rep, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline bool cs_expect(pto_scene_report *rep, bool ok, const char *fmt, ...) {
  if (!rep->verified || ok) return rep->verified;
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  cs_fail(rep, "%s as expected, but %s", pto_status_name(rep->status), what);
  return false;
}

/* Submit with a block count (and optional explicit dependencies). */
static inline int cs_submit(pto_orch *o, int kernel, pto_args *a, int blocks, pto_task_id *id) {
  pto_submit_opts so = {.block_num = blocks};
  return pto_submit(o, kernel, a, &so, id);
}

/* ---- error triggers ---- */

static inline void cs_empty_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

/* Chip setup for a trigger failed: report it as a plain failure. */
static inline int cs_setup_failed(pto_chip *chip, pto_scene_report *rep, int rc,
                                  const char *scene) {
  pto_chip_destroy(chip);
  return cs_run_failed(rep, rc, scene);
}

/* After a failed run the chip must be usable again: every thread was
 * joined and nothing of the failed run is left behind. */
static inline void cs_expect_reusable(pto_chip *chip, pto_scene_report *rep) {
  if (!rep->verified) return;
  pto_error_info e;
  int rc = pto_chip_run(chip, cs_empty_orch, NULL, NULL, &e);
  cs_expect(rep, rc == PTO_OK, "the next run on the same chip returned %s (%s)",
            pto_status_name(rc), e.details);
}

/* Ends a trigger scene: on success the message names what was checked. */
static inline int cs_trigger_done(pto_chip *chip, pto_scene_report *rep, const char *checked) {
  cs_expect_reusable(chip, rep);
  if (rep->verified)
    snprintf(rep->message, sizeof rep->message, "%s as expected; %.440s",
             pto_status_name(rep->status), checked);
  pto_chip_destroy(chip);
  return rep->status;
}

/* A kernel that hangs until its run is cancelled (at most 5 s, so a
 * runtime that never cancels still ends the scene). */
static inline int cs_hang_kernel(const pto_kctx *ctx) {
  cs_block_until_cancelled(ctx, 5000);
  return PTO_OK;
}

#endif
