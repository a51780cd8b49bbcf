/* contract.h — checking mode (pto_chip_config.check, PTO_CHECK=contracts):
 * every block is checked against what its task declared (docs/contracts.md).
 *
 * In checking mode no task reaches a ready queue: sched_make_ready hands it
 * to contract_ready, and the orchestrator's thread runs the ready tasks
 * itself whenever it would wait (contract_drain, from orch.c's one wait),
 * one block at a time (a MIX block's parts, and a sync_start gang, as one
 * unit), picked at random from a seed among the tasks whose producers have
 * completed. Around each unit it compares the bytes of every buffer that a
 * task not yet completed was passed (writes outside the task's OUTPUT /
 * INOUT views), then runs the unit again on copies of its arguments'
 * buffers with every byte outside its INPUT / INOUT / OUTPUT_EXISTING views
 * flipped (reads it did not declare). A breach fails the run with PTO_ECONTRACT. */
#ifndef PTO_CHIP_CONTRACT_H
#define PTO_CHIP_CONTRACT_H

#include <stdbool.h>

#include "chip/run.h"
#include "common/wait.h"

/* pto_chip_config_init: check and check_seed from PTO_CHECK and
 * PTO_CHECK_SEED. A value that is not understood sets check to -1, which
 * pto_chip_create refuses naming it (contract_config_problem). */
void contract_config_env(pto_chip_config *cfg);
/* NULL, or a sentence saying what is wrong with cfg's check fields. */
const char *contract_config_problem(const pto_chip_config *cfg);

/* A run in checking mode begins (r->contract set) and ends (freed; a failed
 * run's details get the seed that repeats its order). */
int contract_begin(pto_run *r);
void contract_end(pto_run *r);

/* The orchestrator published task t with arguments a (its buffers become
 * known until it completes). */
void contract_submit(pto_run *r, task *t, const pto_args *a);
/* t's producers have completed (instead of a ready queue). */
void contract_ready(pto_run *r, task *t);
/* Runs ready tasks, checked, until cond(arg) holds or none is ready or the
 * run stops; returns cond(arg). A task that passed is completed with
 * complete(r, t, t->units_total) (sched_task_done_unit: its consumers come
 * back through contract_ready). On the orchestrator's thread only. */
typedef void (*contract_complete_fn)(pto_run *r, task *t, int units);
bool contract_drain(pto_run *r, pto_cond_fn cond, void *arg, contract_complete_fn complete);
/* A kernel asked for asynchronous completion in checking mode: refused,
 * failing the run with PTO_ECONTRACT naming it. */
int contract_async_refused(pto_run *r, const pto_kctx *ctx);
/* A kernel called a window operation (comm/ops.c): its unit is not run a
 * second time for the read check, which would repeat its remote effects
 * (stores, signals) on the peers. No-op outside checking mode. */
void contract_note_comm(const pto_kctx *ctx);
/* The name of the kernel running ctx's block ("?" when unknown). */
const char *contract_kernel_name(const pto_kctx *ctx);

#endif
