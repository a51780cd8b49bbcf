/* trace_hooks.h — private: how the layers above a chip (the node runtime,
 * the comm ops) take part in its trace. A node chip process names its trace
 * after its rank and shares the node run's time origin; comm ops record
 * their slices on the track of the core whose kernel issued them. */
#ifndef PTO_CHIP_TRACE_HOOKS_H
#define PTO_CHIP_TRACE_HOOKS_H

#include <stdint.h>

#include "common/clock.h"
#include "common/trace.h"
#include "pto/chip.h"
#include "pto/kernel.h"

/* For the following runs' traces (pto_chip_set_trace): process `pid` named
 * `name` (copied, truncated to 31 bytes), time zero at origin_ns (0: the
 * first event) [chip.c]. */
void chip_set_trace_process(pto_chip *chip, int pid, const char *name, uint64_t origin_ns);

/* Final task ids for the following runs' traces: the first task is `base`
 * (a node rank's later chip tasks continue where its earlier ones ended,
 * so that their files concatenate) [chip.c]. */
void chip_set_trace_task_base(pto_chip *chip, int64_t base);
/* The next free id after the last traced run (its base + its tasks) [chip.c]. */
int64_t chip_trace_task_end(const pto_chip *chip);

/* The trace of the run ctx's block belongs to, and the track of the core
 * running it; NULL when that run records no trace [core.c]. Only the core's
 * own thread (the kernel) may record on that track. */
pto_trace *core_trace(const pto_kctx *ctx, int *track);

/* One end of a flow arrow between ranks, now, on the track of ctx's core
 * (inside the op's slice): a notify records the start, the wait it
 * releases the finish, both with the id of PTO_SIGNAL_FLOW_ID. Nothing
 * when the run records no trace. */
static inline void core_trace_flow(const pto_kctx *ctx, char ph, uint64_t id) {
  int track;
  pto_trace *t = core_trace(ctx, &track);
  if (t) trace_flow(t, track, ph, pto_now_ns(), id);
}
/* What both ends know: the domain, the rank whose cell it is, the cell's
 * window offset, the node task's epoch and the value the notify set and
 * the wait saw. */
#define PTO_SIGNAL_FLOW_ID(dom, dst, off, epoch, value)                                            \
  trace_flow_id(2, (uint64_t)(dom), (uint64_t)(dst), (uint64_t)(off), (uint64_t)(epoch),           \
                (uint64_t)(uint32_t)(value))

#endif
