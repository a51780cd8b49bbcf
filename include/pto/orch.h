/* pto/orch.h — what an orchestration function calls: argument builder,
 * submit, scopes, and tensor data access from the host side.
 *
 * Tensor arguments are tagged by access mode; the runtime infers the
 * dependency graph from the regions they cover so that the tasks execute as
 * if submitted sequentially (read-after-write, write-after-write and
 * write-after-read are all ordered).
 *
 * Threads: a pto_orch belongs to the thread running the orchestration
 * function. Submits, scopes and host reads, writes and waits are made on
 * that thread only; from another thread they do nothing, return
 * PTO_EINVAL and fail the run naming the rule. pto_orch_fatal,
 * pto_orch_status and pto_orch_chip may be called from any thread while
 * the run is in progress. A pto_orch is valid only during its run: kept
 * past pto_chip_run's return, every call on it does nothing and returns
 * PTO_EINVAL (pto_orch_chip: NULL), also while a later run of the chip is
 * in progress: each run hands out a handle of its own, and the kept one
 * neither submits into nor fails the current run. (A handle is handed out
 * again after 4096 runs of its chip: kept that long, it is taken for the
 * current run's.) */
#ifndef PTO_ORCH_H
#define PTO_ORCH_H

#include "pto/export.h"
#include <stdbool.h>
#include <stdint.h>

#include "pto/chip.h"
#include "pto/kernel.h"
#include "pto/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pto_access {
  PTO_INPUT = 0,       /* read: waits for earlier overlapping writers */
  PTO_OUTPUT,          /* new buffer from the heap ring; this task produces it */
  PTO_OUTPUT_EXISTING, /* write into an existing buffer */
  PTO_INOUT,           /* read and write */
  PTO_NO_DEP,          /* passed through, never tracked */
  /* read and write, in any order with the other COMMUTE accesses to the
   * same bytes but never at the same time (an accumulation: StarPU's
   * STARPU_RW | STARPU_COMMUTE, OpenMP's mutexinoutset); ordered as INOUT
   * against every other access. At most 4 per task (docs/chip.md) */
  PTO_COMMUTE,
  /* a contribution to a reduction (StarPU's STARPU_REDUX, OpenMP's
   * in_reduction): the kernel sees a private copy of the view, set to the
   * op's identity, and the copies are combined into the tensor, in
   * submission order, before the next other access to those bytes. Added
   * with pto_args_redux or PTO_REDUX(&t, op); ops in pto/redux.h
   * (docs/chip.md, Reductions) */
  PTO_REDUX,
} pto_access;

typedef struct pto_args {
  int32_t ntensors;
  int32_t nscalars;
  int32_t error;     /* first builder error, reported at submit */
  int32_t error_arg; /* which argument caused it */
  uint8_t access[PTO_MAX_TENSOR_ARGS];
  pto_tensor tensors[PTO_MAX_TENSOR_ARGS];
  pto_tensor *outputs[PTO_MAX_TENSOR_ARGS]; /* caller's tensor for OUTPUT args */
  uint64_t scalars[PTO_MAX_SCALAR_ARGS];
  int32_t redux_op[PTO_MAX_TENSOR_ARGS]; /* REDUX arguments: their op (pto/redux.h) */
  int32_t error_rule; /* the builder's: which of its rules error_arg broke, named at submit */
} pto_args;

PTO_API void pto_args_init(pto_args *a);
PTO_API void pto_args_add(pto_args *a, pto_access mode, const pto_tensor *t);
PTO_API void pto_args_input(pto_args *a, const pto_tensor *t);
/* `t` is a descriptor (pto_tensor_desc); submit allocates its buffer and
 * writes it back into *t, so the caller can pass *t to later tasks (and
 * as OUTPUT again). A tensor over memory of the caller's is refused: its
 * result would be in the new buffer alone; write into it with
 * pto_args_output_existing. */
PTO_API void pto_args_output(pto_args *a, pto_tensor *t);
PTO_API void pto_args_output_existing(pto_args *a, const pto_tensor *t);
PTO_API void pto_args_inout(pto_args *a, const pto_tensor *t);
PTO_API void pto_args_nodep(pto_args *a, const pto_tensor *t);
PTO_API void pto_args_commute(pto_args *a, const pto_tensor *t);
/* A REDUX argument with reduction `op` (PTO_REDUX_SUM, ... or an id from
 * pto_redux_register; pto/redux.h). */
PTO_API void pto_args_redux(pto_args *a, const pto_tensor *t, int op);
PTO_API void pto_args_scalar(pto_args *a, uint64_t v);
PTO_API void pto_args_scalar_f32(pto_args *a, float v);

typedef struct pto_submit_opts {
  int block_num;           /* >= 1; 0 means 1; times the kernel's cores per block <= INT32_MAX */
  bool sync_start;         /* all blocks resident and started as one cohort */
  const pto_task_id *deps; /* explicit extra dependencies (earlier tasks) */
  int ndeps;
  /* 0 (the default) .. PTO_PRIORITY_MAX: ready blocks of a higher priority
   * are dispatched first (docs/chip.md, Priorities) */
  int priority;
} pto_submit_opts;
#define PTO_PRIORITY_MAX 3

/* Submits kernel `kernel_id` with `args` (may be NULL for no arguments).
 * opts may be NULL (one block). *id (may be NULL) receives the task id.
 * After the run has failed, submits do nothing and return the latched code. */
PTO_API int pto_submit(pto_orch *o, int kernel_id, pto_args *args, const pto_submit_opts *opts,
                       pto_task_id *id);
/* A task with no kernel: it only orders its dependencies. */
PTO_API int pto_submit_dummy(pto_orch *o, pto_args *args, const pto_submit_opts *opts,
                             pto_task_id *id);

/* ---- compact submit ----
 * One call for the common case, as StarPU's starpu_task_insert:
 *
 *   pto_submit_v(o, k_add, PTO_IN(&a), PTO_IN(&b), PTO_OUT(&c));
 *   pto_submit_v(o, k_scale, PTO_IN(&x), PTO_OUT_EXISTING(&y), PTO_SCALAR(2.5f),
 *                PTO_BLOCKS(4), PTO_TASK_ID(&id));
 *
 * Each argument is made by one of the macros below; the list is counted at
 * compile time (no terminator). Tensors are numbered in the order they
 * appear among tensors, scalars among scalars, as with the builder, so
 * their order relative to each other does not matter. A tensor macro takes
 * a pto_tensor pointer (const allowed, except for PTO_OUT which writes the
 * allocated buffer back), PTO_SCALAR an integer or a float (stored as
 * pto_args_scalar / pto_args_scalar_f32 would); anything else (a double, a
 * tensor by value, a raw pointer in the list) does not compile. What only
 * shows at run time (a NULL tensor, more than PTO_MAX_TENSOR_ARGS tensors,
 * an argument not made by these macros, PTO_BLOCKS(0)) fails the submit as
 * pto_submit does, with details naming the argument's position (from 1).
 * Returns pto_submit's result; a PTO_TASK_ID receives the task id, or
 * PTO_TASK_NONE when the submit fails (as pto_submit's *id). C only
 * (compound literals, _Generic): C++ builds a pto_args (pto_args_init,
 * pto_args_input, ...) and calls pto_submit. */
typedef enum pto_arg_kind {
  PTO_ARGK_TENSOR = 1,
  PTO_ARGK_SCALAR,
  PTO_ARGK_BLOCKS,
  PTO_ARGK_SYNC_START,
  PTO_ARGK_TASK_ID,
  PTO_ARGK_PRIORITY,
} pto_arg_kind;
#define PTO_ARG_MAGIC 0x7A5Cu /* set by every macro: tells their arguments from stray bytes */
typedef struct pto_arg {
  uint16_t magic;
  uint8_t kind; /* pto_arg_kind */
  uint8_t mode; /* pto_access, for tensors */
  union {
    pto_tensor *t;
    uint64_t u;
    pto_task_id *id;
    const struct pto_redux_ref *rx; /* PTO_REDUX: the tensor and its op */
  } v;
} pto_arg;
typedef struct pto_redux_ref {
  const pto_tensor *t;
  int op; /* pto/redux.h */
} pto_redux_ref;

PTO_API int pto_submit_argv(pto_orch *o, int kernel_id, const pto_arg *argv, int argc);

#ifndef __cplusplus
/* (clang-format cannot lay out _Generic) */
/* clang-format off */
#define pto_submit_v(o, kernel_id, ...)                                                            \
  pto_submit_argv((o), (kernel_id), (const pto_arg[]){__VA_ARGS__},                                \
                  (int)(sizeof((const pto_arg[]){__VA_ARGS__}) / sizeof(pto_arg)))

/* Tensors: pto_tensor * (or const pto_tensor *, except for PTO_OUT). */
#define PTO_ARG_TENSOR_(m, tp)                                                                     \
  ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_TENSOR, (m),                                                \
             {.t = (pto_tensor *)_Generic((tp), pto_tensor *: (tp), const pto_tensor *: (tp))}})
#define PTO_IN(tp)           PTO_ARG_TENSOR_(PTO_INPUT, tp)
#define PTO_OUT(tp)                                                                                \
  ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_TENSOR, PTO_OUTPUT, {.t = _Generic((tp), pto_tensor *: (tp))}})
#define PTO_OUT_EXISTING(tp) PTO_ARG_TENSOR_(PTO_OUTPUT_EXISTING, tp)
#define PTO_INOUT(tp)        PTO_ARG_TENSOR_(PTO_INOUT, tp)
#define PTO_NODEP(tp)        PTO_ARG_TENSOR_(PTO_NO_DEP, tp)
#define PTO_COMMUTE(tp)      PTO_ARG_TENSOR_(PTO_COMMUTE, tp)
/* (the tensor and op travel in a compound literal that lives as long as
 * the pto_submit_v statement) */
#define PTO_REDUX(tp, op)                                                                          \
  ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_TENSOR, PTO_REDUX,                                          \
             {.rx = &(const pto_redux_ref){                                                        \
                  _Generic((tp), pto_tensor *: (tp), const pto_tensor *: (tp)), (op)}}})

static inline pto_arg pto_arg_u64_(uint64_t v) {
  pto_arg a = {PTO_ARG_MAGIC, PTO_ARGK_SCALAR, 0, {.u = v}};
  return a;
}
static inline pto_arg pto_arg_f32_(float f) {
  union {
    float f;
    uint32_t u;
  } c = {.f = f};
  return pto_arg_u64_(c.u); /* as pto_args_scalar_f32 */
}
/* An integer (any width or sign) or a float; a double is an error: write
 * 2.5f, or (float)x, for an f32 scalar. */
#define PTO_SCALAR(x)                                                                              \
  _Generic((x),                                                                                    \
      float: pto_arg_f32_,                                                                         \
      _Bool: pto_arg_u64_,                                                                         \
      char: pto_arg_u64_,                                                                          \
      signed char: pto_arg_u64_,                                                                   \
      unsigned char: pto_arg_u64_,                                                                 \
      short: pto_arg_u64_,                                                                         \
      unsigned short: pto_arg_u64_,                                                                \
      int: pto_arg_u64_,                                                                           \
      unsigned: pto_arg_u64_,                                                                      \
      long: pto_arg_u64_,                                                                          \
      unsigned long: pto_arg_u64_,                                                                 \
      long long: pto_arg_u64_,                                                                     \
      unsigned long long: pto_arg_u64_)(x)

/* Options: the pto_submit_opts fields, and where the task id goes. */
#define PTO_BLOCKS(n) ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_BLOCKS, 0, {.u = (uint64_t)(int64_t)(n)}})
#define PTO_SYNC_START ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_SYNC_START, 0, {.u = 1}})
#define PTO_PRIORITY(n)                                                                            \
  ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_PRIORITY, 0, {.u = (uint64_t)(int64_t)(n)}})
#define PTO_TASK_ID(p)                                                                             \
  ((pto_arg){PTO_ARG_MAGIC, PTO_ARGK_TASK_ID, 0, {.id = _Generic((p), pto_task_id *: (p))}})
/* clang-format on */
#endif

#define PTO_MAX_SCOPE_DEPTH 4
typedef enum pto_scope_mode {
  PTO_SCOPE_AUTO = 0, /* dependencies inferred from tensor regions */
  PTO_SCOPE_MANUAL,   /* only explicit dependencies apply inside */
} pto_scope_mode;
/* Scopes bound intermediate OUTPUT buffers: they are reclaimed once the
 * scope has ended and all their consumers completed. An OUTPUT view (and
 * any view derived from it) may be used only until its scope ends: a later
 * submit or host read/write of it fails with PTO_EINVAL. */
PTO_API int pto_scope_begin(pto_orch *o, pto_scope_mode mode);
PTO_API int pto_scope_end(pto_orch *o);

/* Batched submission. Between pto_orch_batch_begin and the matching
 * pto_orch_batch_end (batches nest; the outermost end counts), the tasks
 * that are ready at their submit are not pushed to the ready queues one by
 * one but gathered and pushed together, with one position claim and one
 * scheduling request per group instead of one of each per task: for a
 * loop that submits many independent tasks (docs/chip.md, "Batched
 * submission"). A gathered task starts only once its group is pushed:
 *  - when PTO_ORCH_BATCH_MAX tasks are gathered;
 *  - at a submit of a task that is not ready at its submit (it may wait
 *    on a gathered one);
 *  - before the orchestrator waits for anything (pto_orch_read/write,
 *    pto_orch_wait_task, a full ring), at pto_orch_batch_end, and at the
 *    orchestration's end.
 * So a batch must not stay open across work of the orchestrator's own
 * thread that the gathered tasks should overlap, nor while a running
 * kernel waits in its body for a gathered task (end it first). Tasks made
 * ready by the cores' completions and sync_start tasks are never
 * gathered. Under
 * checking mode or a controlled schedule a batch changes nothing.
 * pto_orch_batch_end without a batch open fails the run (PTO_EINVAL). */
#define PTO_ORCH_BATCH_MAX 64
PTO_API int pto_orch_batch_begin(pto_orch *o);
PTO_API int pto_orch_batch_end(pto_orch *o);

/* Copy a tensor's data out to a packed row-major array once every earlier
 * writer of the region has completed (deadline in ms; <0 = the watchdog). */
PTO_API int pto_orch_read(pto_orch *o, const pto_tensor *t, void *dst, int64_t timeout_ms);
/* Copy data in once every earlier reader and writer of the region completed. */
PTO_API int pto_orch_write(pto_orch *o, const pto_tensor *t, const void *src, int64_t timeout_ms);
/* Wait until task `id` has completed. */
PTO_API int pto_orch_wait_task(pto_orch *o, pto_task_id id, int64_t timeout_ms);

/* Fails the run with PTO_EFATAL and the formatted details (from any
 * thread while the run is in progress). */
PTO_API int pto_orch_fatal(pto_orch *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The run's latched status (0 while healthy). */
PTO_API int pto_orch_status(const pto_orch *o);
PTO_API pto_chip *pto_orch_chip(pto_orch *o);

#ifdef __cplusplus
}
#endif
#endif
