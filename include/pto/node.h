/* pto/node.h — one node (L3): N chips, each in its own process with its own
 * chip runtime, plus M host sub-worker processes, driven by a node-level
 * orchestration function in the calling process.
 *
 * pto_node_create() leases the device ids, forks every child before any
 * thread starts (call it before your process starts threads) and waits for
 * each child to report ready. pto_node_run() calls a node orchestration
 * function that submits node tasks: to one chip (a chip orchestration
 * function that runs there with pto_chip_run), to a group of chips that
 * are dispatched together, or to a host sub-worker (a callback). Node tasks
 * get the same INPUT/OUTPUT_EXISTING/INOUT dependency inference as chip
 * tasks; a task that remote-stores into a peer's window buffer declares
 * that peer's buffer (a view from pto_node_window_tensor) as
 * OUTPUT_EXISTING or INOUT, so later readers on the peer wait for it.
 *
 * Failure: a failed task poisons its dependents (PTO_EPOISONED) and the run
 * returns the first root error. A chip that dies or does not answer within
 * the deadlines ends the run (PTO_ECHIP_DIED, PTO_ECONTROL_TIMEOUT,
 * PTO_ESTARTUP_TIMEOUT, naming the rank); every child is then killed and
 * every shared-memory object of the run unlinked; the node stays failed.
 *
 * Under `mpirun -np N` (docs/node.md, "Under mpirun") node chip c is MPI
 * rank c: every rank calls pto_node_create; rank 0 returns and orchestrates
 * (chip 0 and the host sub-workers run as its threads), ranks > 0 serve rank
 * 0's nodes inside pto_node_create and never return (they exit with status 0
 * when rank 0's program ends). A node that fails fatally there ends the MPI
 * job at pto_node_destroy. */
#ifndef PTO_NODE_H
#define PTO_NODE_H

#include "pto/export.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pto/chip.h"
#include "pto/comm.h"
#include "pto/orch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PTO_NODE_MAX_CHIPS   64
#define PTO_NODE_MAX_WORKERS 16

typedef struct pto_node pto_node;
typedef struct pto_node_orch pto_node_orch;

/* Called in each chip process after its chip was created: register the
 * kernels there (in the same order on every chip, so ids agree). */
typedef int (*pto_chip_init_fn)(pto_chip *chip, int chip_rank, void *arg);

typedef struct pto_node_config {
  int nchips;                 /* 1..PTO_NODE_MAX_CHIPS */
  const int *device_ids;      /* nchips device ids to lease; NULL = 0..nchips-1 */
  int nworkers;               /* host sub-workers, 0..PTO_NODE_MAX_WORKERS */
  pto_chip_config chip;       /* every chip's config (env is set by the node) */
  pto_chip_init_fn chip_init; /* may be NULL */
  void *chip_init_arg;
  size_t host_bytes;          /* shared host memory, default 64 MiB */
  size_t window_space;        /* address space for windows, default 1 GiB */
  int64_t startup_timeout_ms; /* every child ready, default 300000 */
  int64_t control_timeout_ms; /* a child accepts a message, default 30000 */
  int64_t task_timeout_ms;    /* a node task completes; < 0: none (default; the
                                 chip watchdog still ends a stuck kernel) */
  int64_t lease_wait_ms;      /* wait for a leased device, default 0 (fail fast) */
  int64_t wait_timeout_ms;    /* deadline of the kernels' window waits, >= 1; default 10000 */
  bool fault_inject;          /* debug: remote stores land late and out of order */
  uint64_t fault_seed;
  bool quiet;             /* no log lines on stderr (lease waits, failures) */
  const char *trace_path; /* each pto_node_run writes one Chrome/Perfetto trace here, one
                             process per chip rank (NULL = off, "" refused; copied at create) */
  /* a host sub-worker task completes, default 60000; < 0: none (a callback
   * that never returns then hangs the run); the node fails as on a missed
   * task_timeout_ms */
  int64_t host_task_timeout_ms;
  /* node TensorMap: tensor accesses of live node tasks, default 8192,
   * PTO_MAX_TENSOR_ARGS..2147483647; a submit that finds it full waits for
   * earlier tasks to finish */
  uint32_t tensormap_entries;
} pto_node_config;

/* Fills defaults (chip: pto_chip_config_init). */
PTO_API void pto_node_config_init(pto_node_config *cfg);

/* err (may be NULL) receives the details of a failure; an invalid config
 * (a count, a device id < 0, a size of 0) fails with PTO_EINVAL naming the
 * field. */
PTO_API int pto_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err);
/* Stops the children, releases leases and every shared object. Called
 * during the node's run (from its orchestration or a thread of it) it
 * does nothing and fails the run with PTO_EINVAL naming it: destroy the
 * node after pto_node_run returns. Any call while a run is in progress
 * does nothing and says why in pto_last_error(). */
PTO_API void pto_node_destroy(pto_node *node);

/* Shared host memory visible at the same address in every process of the
 * node (zeroed, 64-byte aligned); lives until pto_node_destroy. NULL when
 * node is NULL, bytes is 0 or more than is left of cfg.host_bytes. Any
 * thread of the process that created the node, or process it forked (a
 * host task, with the node pointer it was passed, as the orchestration),
 * may call it: all take their bytes from one count. */
PTO_API void *pto_node_host_alloc(pto_node *node, size_t bytes);
/* Host memory that outlives its node: pto_node_destroy then leaves the
 * node's host memory mapped in this process (no longer shared: the chips
 * and sub-workers are gone), holding what it held, for the caller to
 * munmap(base, *bytes) once nothing uses it (a binding whose arrays still
 * view it when the node must go). Returns the base and sets *bytes, or
 * returns NULL: node or bytes NULL, or a node under mpirun (whose host
 * memory is the MPI job's). */
PTO_API void *pto_node_host_keep(pto_node *node, size_t *bytes);
/* A contiguous host tensor in that memory. */
PTO_API int pto_node_host_tensor(pto_node *node, pto_dtype dt, int ndims, const int64_t *shape,
                                 pto_tensor *out);

typedef void (*pto_node_orch_fn)(pto_node_orch *no, void *arg);
/* Every function below returns PTO_EINVAL (NULL for pto_node_orch_node)
 * when given a NULL handle. A handle is valid only during its run: kept
 * past pto_node_run's return, every call on it does nothing and returns
 * PTO_EINVAL (the node's next run is not touched). */

/* Runs one node orchestration; returns when every task has finished. Domains
 * created during the run are released at its end. Returns 0 or the first
 * root error (err filled in both cases; err->details names the rank). */
PTO_API int pto_node_run(pto_node *node, pto_node_orch_fn fn, void *arg, pto_error_info *err);
/* Asks the node's run in progress to end early: from then on it starts no
 * node task (those not started fail with PTO_ECANCELLED, a submit is
 * refused with it), the chip tasks running are told to end their waits
 * (signal waits, barriers, collectives: they fail) and see
 * pto_kctx_cancelled true in their kernels (the chip's run then stops: its
 * blocks not started never start), and pto_node_run returns once the
 * tasks running have returned, with PTO_ECANCELLED unless the run failed
 * before. A kernel that does not poll pto_kctx_cancelled, or a host
 * function, is not interrupted. Without a run in progress it does nothing; the next
 * run is never touched. Any thread may call it, and a signal handler:
 * it is async-signal-safe (atomics and a futex wake). 0, or PTO_EINVAL
 * for a NULL node. */
PTO_API int pto_node_cancel(pto_node *node);

/* What a chip orchestration function receives as its `arg`. */
typedef struct pto_node_task {
  const pto_args *args; /* the submitted tensors and scalars */
  int chip;             /* node chip rank running it */
  int group_rank;       /* position in the group task (0 for a single task) */
  int group_size;       /* 1 for a single task */
  pto_comm *comm;       /* this chip's communication context */
  pto_task_id id;       /* node task id */
} pto_node_task;

/* A host sub-worker task: returns 0 or a negative pto status. Any other
 * code (a C `return 1`, a negative that is no pto status) fails the task
 * with PTO_EKERNEL, the details naming the code, as a kernel's own. */
typedef int (*pto_host_fn)(const pto_args *args, void *arg);

/* A host function that fails says why, as a kernel does with
 * pto_kctx_fail: `return pto_host_fail(args, PTO_EINVAL, "row %d is
 * empty", r);` (args: the ones the function was given) records the reason
 * (printf format, truncated to about 300 characters) and returns `code`,
 * or PTO_EKERNEL when `code` is not negative; the run's error details then
 * end with it ("host task returned -1: row 3 is empty"). Call it only on
 * the way out of a failing host function. */
PTO_API int pto_host_fail(const pto_args *args, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Node-task submission. Tensor arguments must be valid views that lie in
 * node host memory or in the windows of a live domain (PTO_EINVAL
 * otherwise: the children could not see any other memory). PTO_OUTPUT is
 * not supported at node level: allocate with pto_node_host_tensor and use
 * OUTPUT_EXISTING. When the node TensorMap is full (cfg.tensormap_entries),
 * a submit waits for earlier tasks to finish, dispatching meanwhile. */
PTO_API int pto_node_submit(pto_node_orch *no, int chip, pto_orch_fn fn, pto_args *args,
                            pto_task_id *id);
PTO_API int pto_node_submit_group(pto_node_orch *no, const int *chips, int nchips, pto_orch_fn fn,
                                  pto_args *args, pto_task_id *id);
/* worker < 0: any sub-worker. `arg` must be valid in the sub-worker (a
 * pointer into host memory, or a global). On one host the sub-workers are
 * processes that map no window: a window view among args is PTO_EINVAL. */
PTO_API int pto_node_submit_host(pto_node_orch *no, int worker, pto_host_fn fn, void *arg,
                                 pto_args *args, pto_task_id *id);
/* Checking mode (docs/contracts.md) runs each host task a second time with
 * the node host memory outside its views flipped, to find reads it did
 * not declare; that needs a deterministic host function. One that is not
 * (timing, a random source, state outside its arguments) opts out here:
 * its writes are still checked. PTO_EINVAL: node or fn NULL. During the
 * node's run it takes calls from the orchestration's thread only (as a
 * pto_node_orch call: from another thread it does nothing, returns
 * PTO_EINVAL and fails the run naming the rule); between runs, from any
 * thread. */
PTO_API int pto_node_skip_read_check(pto_node *node, pto_host_fn fn);
/* Waits for every submitted task. Returns the run status so far. */
PTO_API int pto_node_wait_all(pto_node_orch *no);
/* Copies a tensor out once every earlier writer task of its region finished. */
PTO_API int pto_node_read(pto_node_orch *no, const pto_tensor *t, void *dst);
PTO_API pto_node *pto_node_orch_node(pto_node_orch *no);

/* Allocates a domain over `nranks` chips (domain rank r is node chip
 * chips[r]) with the named buffers in each window; each rank zeroes its own
 * window before the allocation barrier. Waits for those chips to be idle.
 * The domain is released at the end of the run. */
PTO_API int pto_node_domain_create(pto_node_orch *no, const int *chips, int nranks,
                                   const pto_window_buffer *buffers, int nbuffers, pto_domain *out);
/* A view of rank `rank`'s copy of window buffer `name`, usable as a task
 * argument (for dependency inference) and readable by the orchestrator. */
PTO_API int pto_node_window_tensor(pto_node_orch *no, pto_domain dom, int rank, const char *name,
                                   pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out);

/* What the last pto_node_run did, per chip (chip task statistics summed
 * over the node tasks each chip ran: pto_run_stats of pto_chip_run). */
typedef struct pto_node_chip_stats {
  uint64_t node_tasks; /* node tasks (parts of group tasks included) it ran */
  uint64_t tasks;      /* chip tasks their orchestrations submitted */
  uint64_t blocks;     /* kernel blocks executed */
  double host_us;      /* sum of its pto_chip_run calls */
  double device_us;    /* sum of their device times */
} pto_node_chip_stats;

typedef struct pto_node_stats {
  int nchips;
  uint64_t node_tasks; /* node tasks of the run (chip, group and host) */
  uint64_t host_tasks; /* of which host sub-worker tasks */
  double run_us;       /* the whole pto_node_run */
  pto_node_chip_stats chip[PTO_NODE_MAX_CHIPS];
} pto_node_stats;

/* The statistics of the last pto_node_run (zeros before the first); 0, or
 * PTO_EINVAL for a NULL argument. */
PTO_API int pto_node_stats_get(const pto_node *node, pto_node_stats *out);

/* The shared-memory name prefix of this node's run (for leak checks);
 * NULL for a NULL node. */
PTO_API const char *pto_node_shm_prefix(const pto_node *node);
/* Child process ids (chips first, then workers); returns how many, or
 * PTO_EINVAL (NULL node or pids, max < 0). */
PTO_API int pto_node_child_pids(const pto_node *node, int *pids, int max);

#ifdef __cplusplus
}
#endif
#endif
