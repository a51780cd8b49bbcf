/* node_hooks.h — private: what the node runtime tells a chip about its
 * place among the node's ranks (its trace's part is trace_hooks.h). */
#ifndef PTO_CHIP_NODE_HOOKS_H
#define PTO_CHIP_NODE_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "pto/chip.h"

/* Its core threads are spread from the first-th CPU on (spread_cores), so
 * that the ranks of a node spread their cores over the CPUs instead of
 * stacking each rank's first core on the same one [chip.c]. */
void chip_set_cpu_first(pto_chip *chip, int first);
/* The chip's kernels may wait for other ranks' kernels (collectives,
 * signals): a hand-off keeps only the successor its ready queue would have
 * given next (handoff.h), so the chip starts its blocks in the order a
 * pass would, which the ranks' kernels may depend on. A chip no node made,
 * with no window or signal for a kernel to wait on, may run a successor
 * ahead of older queued work of its level. Set before the first run
 * [chip.c]. */
void chip_keep_queue_order(pto_chip *chip);
/* Calls wake(arg) at a run's first failure, from the thread that fails it,
 * once the run's own threads are woken: a node chip's kernels may wait on
 * its windows, whose waits see pto_kctx_cancelled only when woken (wake:
 * comm_wake_mine). Set between runs [chip.c]. */
void chip_set_fail_wake(pto_chip *chip, void (*wake)(void *arg), void *arg);
/* The node's cancel of the node task the chip's next runs belong to (or
 * its stop of the chip, which it writes there as a cancel of that task:
 * comm.h, COMM_CANCEL_STOP): while *word names it ((*word >> 32) == gen:
 * the node's cancel word, comm.h comm_cancel_word; gen is never 0),
 * pto_kctx_cancelled is true in the run's kernels, and the first call
 * that sees it fails the run with PTO_ESHUTDOWN, its details what why(arg,
 * buf, n) writes (the run then ends as a failed run does: no other block
 * of it starts). A word that names another task (an earlier frame's late
 * cancel) cancels nothing. word NULL: none. Set between runs [chip.c]. */
void chip_set_node_cancel(pto_chip *chip, const _Atomic uint64_t *word, uint32_t gen,
                          const char *(*why)(void *arg, char *buf, size_t n), void *arg);

/* Checking mode: the chip runs a node task (in_task; false between tasks),
 * which lets any of its ranks write views[0..n) (at most
 * PTO_MAX_TENSOR_ARGS). Bytes there may change under a unit of this chip
 * (another rank's writes, a peer's remote store, checked at the peer): the
 * unit's check leaves them to those checks. And the blocks of a task run
 * together, as a gang's do: they may wait for signals that a peer's blocks
 * send only after waiting for this chip's [contract.c]. */
void chip_set_node_task(pto_chip *chip, bool in_task, const pto_tensor *views, int n);
/* Between runs: the controlled schedule of the chip's next runs (seed 0
 * and no files: none). A node under a controlled schedule gives each of
 * its chip tasks its own seed and files (node_schedule.h) [chip.c]. */
int chip_set_schedule(pto_chip *chip, uint64_t seed, const char *record, const char *replay);

#endif
