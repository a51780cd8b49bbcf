/* kernel_why.h — the reason a failing kernel gives (pto_kctx_fail), kept
 * for the core thread that runs it until the core reports the failure. */
#ifndef PTO_CHIP_KERNEL_WHY_H
#define PTO_CHIP_KERNEL_WHY_H

#include "pto/kernel.h"

/* The reason the kernel of `ctx`'s block gave on this thread, or "" (none,
 * or one left by another block); clears it. Taken after every block, also
 * one that returned 0: the tag (task, block, core) repeats in every run
 * and launch, so a reason kept past its block would name another run's
 * failure. */
const char *kernel_why_take(const pto_kctx *ctx);

#endif
