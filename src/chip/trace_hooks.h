/* trace_hooks.h — private: how the layers above a chip (the node runtime,
 * the comm ops) take part in its trace. A node chip process names its trace
 * after its rank and shares the node run's time origin; comm ops record
 * their slices on the track of the core whose kernel issued them. */
#ifndef PTO_CHIP_TRACE_HOOKS_H
#define PTO_CHIP_TRACE_HOOKS_H

#include <stdint.h>

#include "common/trace.h"
#include "pto/chip.h"
#include "pto/kernel.h"

/* For the following runs' traces (pto_chip_set_trace): process `pid` named
 * `name` (copied, truncated to 31 bytes), time zero at origin_ns (0: the
 * first event) [chip.c]. */
void chip_set_trace_process(pto_chip *chip, int pid, const char *name, uint64_t origin_ns);

/* The trace of the run ctx's block belongs to, and the track of the core
 * running it; NULL when that run records no trace [core.c]. Only the core's
 * own thread (the kernel) may record on that track. */
pto_trace *core_trace(const pto_kctx *ctx, int *track);

#endif
