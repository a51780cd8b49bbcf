/* kernel_why.h — the reason a failing kernel gives (pto_kctx_fail), kept
 * for the core thread that runs it until the core reports the failure. */
#ifndef PTO_CHIP_KERNEL_WHY_H
#define PTO_CHIP_KERNEL_WHY_H

#include "pto/kernel.h"

/* The task whose block gave the reason kept on this thread, PTO_TASK_NONE
 * when none is (kernel_why.c): read inline, as no reason is the common
 * case after every block. */
extern _Thread_local pto_task_id kernel_why_task;
/* kernel_why_take with a reason kept. */
const char *kernel_why_take_given(const pto_kctx *ctx);

/* The reason the kernel of `ctx`'s block gave on this thread, or "" (none,
 * or one left by another block); clears it. Taken after every block, also
 * one that returned 0: the tag (task, block, core) repeats in every run
 * and launch, so a reason kept past its block would name another run's
 * failure. */
static inline const char *kernel_why_take(const pto_kctx *ctx) {
  return kernel_why_task == PTO_TASK_NONE ? "" : kernel_why_take_given(ctx);
}

/* The run's code for a block whose kernel returned rc (not 0): rc when it
 * is a pto status, else PTO_EKERNEL (kernel.h). */
int kernel_fail_code(int rc);
/* What the failure's details say after "returned RC" when the kernel gave
 * no reason (why is ""): for a pto status other than PTO_EKERNEL, that the
 * run reports it as that status (a C `return -1` is PTO_EINVAL, whose
 * hint is about pto's arguments, not the kernel's); else "". */
const char *kernel_rc_note(int rc, const char *why);

#endif
