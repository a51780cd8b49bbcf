/* redux.h — PTO_REDUX: private copies of the contributions to a reduction
 * and the tasks that combine them (pto/redux.h, docs/chip.md Reductions).
 *
 * Everything here runs on the orchestrator's thread, at submit, except
 * what a core does for the tasks it runs: a contribution's core sets its
 * own copy to the identity just before its kernel (redux_unit_identity;
 * a user op's init thus runs on several threads at once), and the
 * combine kernel runs as a task on a core.
 *
 * A group is the run of consecutive contributions to one view with one op.
 * Its private copies are slots of one slab taken from the heap ring (with
 * its back-pressure), one slot per core of each contributing task (its
 * blocks times cores per block), cache-line apart, in submission order,
 * then block, then core in the block. Each slot is set to the op's
 * identity by the core that owns it, just before its kernel
 * (redux_unit_identity), so the orchestrator never writes the slot's line
 * and the core does not take it back from the orchestrator's cache; by
 * the orchestrator at submit only for a dummy task, which runs on no core,
 * and in checking mode, whose blocks run on the orchestrator's thread
 * from a snapshot taken before them. When the slab is full, or
 * before anything else touches the view's bytes, the group is flushed: a
 * combine task (kernel "redux_combine") folds the slots into the tensor in
 * slot order, tensor = ((tensor op s0) op s1) ..., and the slab is freed
 * once that task has retired. The combine task accesses the tensor as
 * INOUT, so consecutive groups fold in submission order too: the result
 * is the sequential fold of the contributions, bit for bit, whatever the
 * schedule. Contributions are not ordered against each other or against
 * the tensor: each writes only its own slot.
 *
 * The orchestrator's services (submit, the heap ring) come through
 * redux_orch, which orch.c fills: orch.c calls redux.c, and redux.c
 * calls no function of orch.c (no file cycle). */
#ifndef PTO_CHIP_REDUX_H
#define PTO_CHIP_REDUX_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cacheline.h"
#include "common/region.h"
#include "pto/kernel.h"
#include "pto/orch.h"
#include "pto/redux.h"

struct pto_run;
struct pto_chip;
struct kernel_rec;

/* A REDUX argument's slots: a task's view of its argument i is its first
 * unit's copy (contiguous, at offset 0), and unit u (block b, core j of
 * the block: u = b x cores per block + j, the AIC first) has the copy
 * redux_slot_elems further on, in the same buffer. */
static inline int64_t redux_slot_elems(const pto_tensor *v) {
  int64_t es = (int64_t)pto_dtype_size((pto_dtype)v->dtype);
  int64_t bytes = pto_tensor_numel(v) * es;
  return (bytes + PTO_CACHELINE - 1) / PTO_CACHELINE * PTO_CACHELINE / es; /* a line apart */
}

/* The views unit `unit` of a task sees: its REDUX arguments (bits of
 * `mask`) moved to its own copy, a buffer of that copy alone. */
static inline void redux_unit_tensors(const pto_tensor *ts, int nt, uint32_t mask, int unit,
                                      pto_tensor *out) {
  for (int i = 0; i < nt; i++) {
    out[i] = ts[i];
    if (!(mask >> i & 1)) continue;
    size_t es = pto_dtype_size((pto_dtype)ts[i].dtype);
    out[i].buf = (char *)ts[i].buf + (size_t)(unit * redux_slot_elems(&ts[i])) * es;
    out[i].buf_bytes = (size_t)pto_tensor_numel(&ts[i]) * es;
  }
}

/* Open groups at once: a contribution to a new view when all are open
 * flushes the oldest. */
#define REDUX_GROUPS 8
/* Contributions per combine task at most (also bounded by the heap ring's
 * size and the dependency pool: redux_begin). */
#define REDUX_SLOTS_MAX 256

/* A registered user op (pto_redux_register). */
typedef struct redux_user_op {
  char name[PTO_REDUX_MAX_NAME];
  int32_t dtype;
  void (*init)(void *dst, int64_t n);
  void (*combine)(void *acc, const void *src, int64_t n);
} redux_user_op;

typedef struct redux_orch {
  /* pto_submit of an internal task (the combine kernel's id allowed) */
  int (*submit)(struct pto_run *r, int kernel, pto_args *a, const pto_submit_opts *o,
                pto_task_id *id);
  /* bytes of the heap ring, held until heap_free_after. If !wait: taken
   * only when they fit now and, when the OUTPUT buffers of task `a` fit
   * now, those would still fit after them; else returns 1 with nothing
   * taken. If wait (a unused): waits for the bytes alone as OUTPUT buffers
   * do (a status, the deadlock naming `bytes`) */
  int (*heap_take)(struct pto_run *r, uint64_t bytes, const pto_args *a, bool wait, void **ptr);
  /* the range taken at ptr is free once task `id` has retired */
  void (*heap_free_after)(struct pto_run *r, void *ptr, pto_task_id id);
} redux_orch;

typedef struct redux_group {
  bool open;
  int op;
  int priority;      /* the highest of its contributions: its combine's */
  uint64_t seq;      /* when it opened: the oldest is flushed first */
  pto_tensor target; /* the contributions' view */
  region_view rv;    /* its bytes */
  uint8_t *slab;
  int64_t slot_elems;           /* slot stride, in elements */
  int64_t es, numel;            /* element size, elements of a copy */
  int64_t stride[PTO_MAX_DIMS]; /* a copy's strides (contiguous) */
  int nslots, used;             /* slots in the slab, slots taken */
  int ntasks, maxtasks;         /* contributing tasks, and at most (its combine's edges) */
  pto_task_id *contrib;         /* REDUX_SLOTS_MAX ids: the contributing tasks in order */
} redux_group;

typedef struct redux_table {
  redux_orch orch;
  redux_group g[REDUX_GROUPS];
  uint32_t openm; /* the open groups, a bit each: a submit's loops visit only them (a group
                   * is several lines: walking all REDUX_GROUPS cost each contribution) */
  uint64_t seq;
  int last; /* the group of the last contribution: looked at first (a reduction loop's) */
} redux_table;

/* One submit's REDUX arguments: their groups (on the submit's stack, as a
 * flush submits a combine task in the middle of it). */
typedef struct redux_plan {
  uint32_t mask;  /* the REDUX arguments */
  int units;      /* copies per argument: the task's cores (1 for a dummy) */
  bool orch_init; /* the copies are set at submit (a dummy; checking mode) */
  int8_t group[PTO_MAX_TENSOR_ARGS];
  uint8_t op[REDUX_GROUPS]; /* each REDUX argument's op, in argument order (task.redux_op) */
} redux_plan;

int redux_init(redux_table *x, const redux_orch *orch);
void redux_reset(redux_table *x);
void redux_destroy(redux_table *x);

/* Before a submit's slot is taken: checks its REDUX arguments (op, dtype,
 * overlap with the task's other arguments), flushes
 * the groups that its other tracked arguments touch, and gives each REDUX
 * argument a slot (flushing what is in the way). `redux` has bit i set
 * for each REDUX argument i; `units` is the task's blocks times cores per
 * block (0 for a dummy). Returns a latched status on failure, after
 * run_fail. */
int redux_prepare(struct pto_run *r, const pto_args *a, const region_view *rv, uint32_t redux,
                  int units, redux_plan *p);
/* The task's copy of its arguments: each REDUX argument becomes its slot
 * (set to the op's identity here only if p->orch_init). */
void redux_args(struct pto_run *r, const redux_plan *p, pto_tensor *tensors);
/* Sets the `units` private copies of a REDUX argument's view v (unit 0's
 * copy, as redux_args makes it; the others redux_slot_elems apart) to the
 * op's identity, on the orchestrator's thread before the task is
 * published: at submit, and at every launch of a captured graph
 * (graph.c), for a dummy task and in checking mode. */
void redux_identity_copies(const struct pto_chip *chip, int op, const pto_tensor *v, int units);
/* A core's copies, just before its kernel: each REDUX argument of ts
 * (bits of `mask`; the views the kernel sees, moved to this core's copy)
 * set to its op's identity, ops[k] being the k-th REDUX argument's. */
void redux_unit_identity(const struct pto_chip *chip, const pto_tensor *ts, uint32_t mask,
                         const uint8_t *ops);
/* After the task was published as `id`: records it in its groups and
 * flushes the groups it filled. */
int redux_submitted(struct pto_run *r, const redux_plan *p, pto_task_id id, int priority);

/* Flushes the groups whose bytes overlap t's (a host access). */
int redux_flush_overlapping(struct pto_run *r, const pto_tensor *t);
/* Flushes every open group (scope end, end of the orchestration). */
int redux_flush_all(struct pto_run *r);

/* The combine kernel's record, set at chip creation (run.h,
 * KERNEL_REDUX_COMBINE). */
void redux_kernel_init(struct kernel_rec *k, int aiv_per_cluster);

#endif
