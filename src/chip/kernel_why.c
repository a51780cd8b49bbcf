/* kernel_why.c — pto_kctx_fail: a failing kernel's reason, in a buffer of
 * the thread running it (a kernel runs on one core thread from start to
 * return), tagged with its block, and taken after every block (core.c,
 * contract.c), so that a reason given by a kernel that then returned 0 is
 * never attached to another block's failure, in this run or a later one. */
#include "chip/kernel_why.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "pto/status.h"

_Thread_local pto_task_id kernel_why_task = PTO_TASK_NONE;
static _Thread_local struct {
  int32_t block, core;
  char text[320];
} why;

int pto_kctx_fail(const pto_kctx *ctx, int code, const char *fmt, ...) {
  /* it fails the block whatever the code: 0 (or more) would be success,
   * the reason dropped */
  if (code >= 0) code = PTO_EKERNEL;
  if (!ctx || !fmt) return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why.text, sizeof why.text, fmt, ap);
  va_end(ap);
  kernel_why_task = ctx->task_id;
  why.block = ctx->block_idx;
  why.core = ctx->core_id;
  return code;
}

const char *kernel_why_take_given(const pto_kctx *ctx) {
  const bool mine =
      kernel_why_task == ctx->task_id && why.block == ctx->block_idx && why.core == ctx->core_id;
  kernel_why_task = PTO_TASK_NONE;
  return mine ? why.text : "";
}

int kernel_fail_code(int rc) { return rc < 0 && pto_status_name(rc)[5] != '?' ? rc : PTO_EKERNEL; }

const char *kernel_rc_note(int rc, const char *why) {
  if (why[0] || kernel_fail_code(rc) == PTO_EKERNEL) return "";
  static _Thread_local char note[200];
  snprintf(note, sizeof note,
           " (read as %s, a pto status; a failure of the kernel's own is PTO_EKERNEL, or "
           "pto_kctx_fail with its reason)",
           pto_status_name(rc));
  return note;
}
