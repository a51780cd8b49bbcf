/* schedule.h — controlled schedules (docs/schedules.md): with a seed, a
 * record or a replay configured, a run's scheduling choices are made by
 * one controller instead of the schedulers' passes, so that they can be
 * drawn from a seed, written down and made again.
 *
 * The controller is the orchestrator's thread. Tasks made ready go to its
 * set of enabled actions instead of the ready queues; it executes actions
 * one at a time at points that depend only on the program (after each
 * submit, and wherever the orchestrator would wait for completions):
 *   start  — a block (a gang: all its blocks) is dispatched to cores it
 *            picks and runs to its end (its cores together, nothing else);
 *   done   — a block's completion is processed (its consumers released);
 *   async  — an asynchronous completion, waited for if it has not come.
 * Which action goes next, and on which cores, is the only choice; so the
 * same choices on the same program give the same execution, bit for bit.
 * The hooks below are all the rest of the chip sees of it. */
#ifndef PTO_CHIP_SCHEDULE_H
#define PTO_CHIP_SCHEDULE_H

#include <stdbool.h>

#include "common/wait.h"
#include "pto/kernel.h"

struct pto_run;
struct task;

/* Before the orchestration of a run: sets r->ctl when the chip's config
 * asks for a controlled schedule (reads a replay record: a bad one fails
 * the run with PTO_EREPLAY). Returns the run's status. */
int schedule_begin(struct pto_run *r);
/* After the run's threads left it and async completers returned: checks
 * that a replay used its whole record, writes the record, frees the
 * controller (kept while `stuck`: a thread may still use it). */
void schedule_end(struct pto_run *r, bool stuck);

/* Hooks, taken only when r->ctl is set. A task that becomes ready goes
 * to the controller through r->ctl_ready instead of a ready queue, and a
 * core's request for a pass wakes the orchestrator (sched.c). */
/* The orchestrator submitted a task: actions may run now. */
void schedule_after_submit(struct pto_run *r);
/* Instead of parking until cond: executes actions until cond holds (or
 * the run stops, or the deadline passes). Returns cond's result. */
bool schedule_wait(struct pto_run *r, pto_cond_fn cond, void *arg, uint64_t deadline);
/* pto_chip_async_complete presented task t's token (any thread). */
void schedule_async_arrived(struct pto_run *r, struct task *t);

/* A block's wait for another chip (a signal wait, comm/ops.c), on its
 * core's thread: under a controlled schedule a block alone on its core
 * asks the controller before it waits for cond, and true means it yielded
 * (the controller runs other actions meanwhile): it then waits for cond as
 * usual and calls schedule_block_resume, which returns once the controller
 * lets it go on. False (any other block or run): wait as usual. */
bool schedule_block_wait(const pto_kctx *ctx, pto_cond_fn cond, void *arg);
void schedule_block_resume(const pto_kctx *ctx);

#endif
