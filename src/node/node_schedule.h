/* node_schedule.h — a node run under a controlled schedule
 * (docs/schedules.md, "Several chips"): with a schedule seed, a record or
 * a replay in the node's chip config, the node orchestrator's thread
 * starts node tasks one at a time, only where the orchestration waits,
 * choosing among the ready ones from the seed or the record; each chip
 * task runs under its own controlled chip schedule (seeded from the node's
 * seed, or recorded and replayed in a file of its own), and the held-back
 * remote stores of fault injection land in a recorded order
 * (comm/delivery.h).
 *
 * A node record is a set of files: PATH (the order of the node tasks),
 * PATH.t<k>.c<c> (chip c's schedule in the run's node task k, the chip's
 * format) and PATH.t<k>.c<c>.land (the landing order of the stores chip c
 * held back in that task). The node record's text:
 *   pto-node-schedule 1
 *   seed 7
 *   chips 2 workers 1
 *   T 0 1 0 1       node task 0 of the run, 1 submitted, on chips 0 and 1
 *   T 1 2 2         node task 1, 2 submitted, on slot 2 (host worker 0)
 *   tasks 2
 *   end
 */
#ifndef PTO_NODE_SCHEDULE_H
#define PTO_NODE_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pto/node.h"

struct node_task;
struct node_frame;
typedef struct node_sched node_sched;

/* pto_node_create: keeps the config's record and replay paths (the chips'
 * own config loses them). */
int node_sched_config(pto_node *n, const pto_node_config *cfg, pto_error_info *err);
/* Frees what node_sched_config kept. */
void node_sched_free_config(pto_node *n);
/* Run start: a controller when the config asks for one (a bad replay
 * record fails the run with PTO_EREPLAY). */
int node_sched_begin(pto_node *n);
/* Run end: a replay checks that it used its whole record; a record is
 * written. */
void node_sched_end(pto_node *n);
/* Whether node tasks are started by the controller (not diverged). */
bool node_sched_on(const pto_node *n);
/* At a wait, with no child busy: which of the ready tasks cand[0..k) goes
 * now (-1: none; a departure from the record latches PTO_EREPLAY and
 * hands dispatch back to the free scheduler). */
int node_sched_pick(pto_node *n, struct node_task *const *cand, int k);
/* Task t goes to slots[0..k): noted in the record, and in the frame (its
 * index in the run, for the chip's files). */
void node_sched_launch(pto_node *n, const struct node_task *t, const int *slots, int k,
                       struct node_frame *f);
/* The domain's seed for the order of held-back stores (the schedule
 * seed's when there is one). */
uint64_t node_sched_fault_seed(const pto_node *n, uint64_t fault_seed);
/* Domain `id`'s creation index in the current run (0 without a controller). */
int32_t node_sched_dom_index(const pto_node *n, int32_t id);
/* sched_files.c: splitmix64's finaliser, every seed's mixer. */
uint64_t node_sched_mix(uint64_t z);
/* Chip side, before a chip task of frame f on chip `slot`: the chip's
 * seed and files (rec, rep: "" when none; the .land files are these with
 * ".land"). false: the task runs without control. */
bool node_sched_chip_task(const pto_node *n, const struct node_frame *f, int slot, uint64_t *seed,
                          char *rec, char *rep, size_t len);

#endif
