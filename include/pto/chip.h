/* pto/chip.h — one simulated chip (L2): configuration, kernels, runs.
 *
 * A chip is `clusters` clusters of (aic_per_cluster AIC + aiv_per_cluster
 * AIV) cores, each simulated by a thread, plus `schedulers` scheduler
 * threads; cluster c belongs to scheduler c % schedulers. pto_chip_run()
 * calls an orchestration function on the calling thread (the orchestrator)
 * while the schedulers dispatch its tasks, and returns when every task has
 * completed or the first error has latched and all threads are joined. */
#ifndef PTO_CHIP_H
#define PTO_CHIP_H

#include "pto/export.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pto/kernel.h"
#include "pto/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pto_chip pto_chip;
typedef struct pto_orch pto_orch;

typedef struct pto_chip_config {
  int clusters;               /* default 8 */
  int aic_per_cluster;        /* 0 or 1, default 1 */
  int aiv_per_cluster;        /* 0..2, default 2 */
  int schedulers;             /* default min(3, clusters) */
  uint32_t task_slots;        /* task ring, default 16384, 2..16777216 */
  size_t heap_bytes;          /* heap ring for OUTPUT buffers, default 256 MiB */
  uint32_t dep_entries;       /* dependency entry pool, default 16384 */
  uint32_t tensormap_entries; /* default 65536, 1..2147483647 */
  int64_t alloc_timeout_ms;   /* no-reclamation-progress deadline, default 500 */
  int64_t watchdog_ms;        /* no-progress deadline, default 10000, at most a day (86400000) */
  int64_t shutdown_ms;        /* join deadline at the end of a run, default 5000 */
  uint32_t async_slots;       /* outstanding async completions, default 64, 0..65535 */
  /* 0 (default): scheduling is a role run by whichever pto thread is free
   * (a core that finished a block, the orchestrator); 1: each scheduler
   * has its own thread, as the device's AICPU threads (PTO_SCHED_THREADS) */
  int sched_threads;
  /* Which CPUs the run's threads may use (src/chip/spread.c). 1
   * (default): while the orchestrator runs far ahead of cores that have a
   * backlog of short blocks (under a quarter of PTO_PULL_HOLD_NS, timed
   * by the cores), it is bound to its CPU and the cores to the others,
   * until its first wait (or the watchdog's second tick without a submit);
   * once the orchestration function has returned, until the run ends, each
   * core that took part is bound to a CPU of its own (core i to the i-th CPU,
   * modulo their number, of those the orchestrator's thread may use; a
   * node chip counts on from the lower ranks' cores). Otherwise the OS
   * places them; the orchestrator's CPUs are restored before the function
   * returns to pto. Each placement is made only while the threads
   * runnable on the machine that are not pto's fit on the CPUs outside
   * those pto may use (so another program's busy thread is never stuck
   * behind a bound one: docs/chip.md, "Where the threads run"); 2: even
   * then. A thread the orchestration function creates while it
   * is bound inherits that one CPU and keeps it: pto restores the
   * orchestrator's own CPUs only. Create such threads before the first
   * submit, set their CPUs yourself, or use 0. 0: the OS always does
   * (PTO_SPREAD_CORES) */
  int spread_cores;
  void *env; /* passed to kernels as pto_kctx.env */
  /* Checking mode (docs/contracts.md). 0 (default): off; 1: every block
   * is checked against its task's declared arguments: blocks run one at a
   * time, in a random order the graph allows, and a write outside the
   * OUTPUT/INOUT views, a write into an INPUT or a read outside the
   * INPUT/INOUT views fails the run with PTO_ECONTRACT
   * (PTO_CHECK=contracts) */
  int check;
  /* the seed of that order; 0 (default): one from the clock. A failed
   * run's details give the seed that repeats it (PTO_CHECK_SEED) */
  uint64_t check_seed;
  /* Controlled schedules (docs/schedules.md). With any of these set, the
   * run's blocks execute one at a time (a gang's or a MIX block's cores
   * together), every scheduling choice made by one controller:
   * schedule_seed != 0 draws each choice from the seed
   * (PTO_SCHEDULE_SEED): same seed, same program, same schedule;
   * record_path (PTO_RECORD) writes the choices to that file at the end
   * of each run; replay_path (PTO_REPLAY) makes them from a record, and a
   * run that departs from it fails with PTO_EREPLAY naming where (with
   * the record's seed: a nonzero schedule_seed beside it is refused,
   * PTO_EINVAL). The paths are copied by pto_chip_create. */
  uint64_t schedule_seed;
  const char *record_path;
  const char *replay_path;
} pto_chip_config;

/* Fills defaults, then applies documented environment overrides
 * (PTO_CLUSTERS, PTO_SCHEDULERS, PTO_WATCHDOG_MS, PTO_SCHED_THREADS,
 * PTO_SPREAD_CORES, PTO_SCHEDULE_SEED, PTO_RECORD, PTO_REPLAY, and the
 * others `pto --help` lists). */
PTO_API void pto_chip_config_init(pto_chip_config *cfg);

/* Returns 0 or PTO_EINVAL (a field out of range), PTO_ENOMEM; a failure
 * says why in pto_last_error() (and in pto_chip_create_ex's err, declared
 * below with pto_error_info). */
PTO_API int pto_chip_create(const pto_chip_config *cfg, pto_chip **out);
/* Stops the chip's threads and frees it. Called during a run (from its
 * orchestration, a kernel or another thread) it does nothing and
 * pto_last_error() says why; called from the run's orchestration, the
 * run also fails with PTO_EBUSY naming it. */
PTO_API void pto_chip_destroy(pto_chip *chip);
PTO_API const pto_chip_config *pto_chip_get_config(const pto_chip *chip);
/* Between runs: true while a thread of an earlier run is still inside it (a
 * kernel that ignored pto_kctx_cancelled past shutdown_ms, docs/chip.md "A
 * thread that does not leave"), which may still use that run's tensors;
 * false once it has left (and while a run is in progress). */
PTO_API bool pto_chip_stuck(pto_chip *chip);

/* ---- kernels ----
 * A kernel is one function per core type. Exactly one of aic/aiv makes a
 * plain AIC or AIV kernel; both, or aiv_count 2, make a MIX kernel whose
 * block occupies one AIC and/or aiv_count AIV cores of one cluster at once
 * (the two AIV see sub_block_id 0 and 1). A chip holds at most 256
 * kernels, each of its own name (names tell kernels apart in traces and
 * schedule records) of at most 47 bytes, without control characters (a
 * record holds a name as one line); register them before pto_chip_run
 * (PTO_EBUSY during one). A refused registration says why in
 * pto_last_error(). */
typedef struct pto_kernel_desc {
  const char *name;
  pto_kernel_fn aic;
  pto_kernel_fn aiv;
  int aiv_count; /* 0, 1 or 2; default 1 when aiv is set */
} pto_kernel_desc;

PTO_API int pto_kernel_register(pto_chip *chip, const pto_kernel_desc *desc, int *kernel_id);
/* Shorthands for single-core kernels. */
PTO_API int pto_kernel_register_aic(pto_chip *chip, const char *name, pto_kernel_fn fn,
                                    int *kernel_id);
PTO_API int pto_kernel_register_aiv(pto_chip *chip, const char *name, pto_kernel_fn fn,
                                    int *kernel_id);

/* Checking mode runs each block a second time on copies of its buffers
 * with the bytes it did not declare as read flipped, and expects the same
 * writes: a kernel whose writes vary from run to run (timing, a random
 * source, a global counter) opts out of that read check here. Its writes
 * are still checked. */
PTO_API int pto_kernel_skip_read_check(pto_chip *chip, int kernel_id);

/* ---- runs ---- */
typedef enum pto_stall_class {
  PTO_STALL_NONE = 0,
  PTO_STALL_TASK_STUCK,   /* a running task does not finish */
  PTO_STALL_NO_DISPATCH,  /* ready work exists but nothing dispatches it */
  PTO_STALL_DEP_DEADLOCK, /* tasks wait on dependencies that never complete */
  PTO_STALL_ORCH_STARVED, /* the orchestrator submits nothing and is not done */
} pto_stall_class;
PTO_API const char *pto_stall_class_name(pto_stall_class c);

typedef struct pto_error_info {
  int code;              /* 0 when the run succeeded */
  pto_stall_class stall; /* for PTO_ESCHED_TIMEOUT */
  pto_task_id task_id;   /* the task involved, or PTO_TASK_NONE */
  int core_id;           /* the core involved, or -1 */
  char kernel[48];       /* kernel name of that task, if any */
  char details[512];     /* one human sentence with the specifics */
  int32_t arg;           /* PTO_ECONTRACT: the task's argument it names (from 0), or -1 */
} pto_error_info;

/* pto_chip_create that also says what was wrong: on failure `err` (may be
 * NULL) holds the code and details naming the field, its value and the
 * allowed range, e.g. "pto_chip_config: clusters = 0, must be 1..4096". */
PTO_API int pto_chip_create_ex(const pto_chip_config *cfg, pto_chip **out, pto_error_info *err);

/* A run that ends with a thread still inside a kernel (it ignored
 * pto_kctx_cancelled past shutdown_ms) reports tasks, host_us and orch_us
 * only: that thread may still change the rest. */
typedef struct pto_run_stats {
  /* tasks submitted: the orchestration's, dummy tasks included, and the
   * combine tasks the runtime submits to fold PTO_REDUX contributions
   * (pto/redux.h) */
  uint64_t tasks;
  uint64_t blocks;     /* kernel blocks executed, a combine task's included (where they ran: a
                          failed run's dropped ones are none) */
  double host_us;      /* whole pto_chip_run call */
  double device_us;    /* first to last core/scheduler activity (see sched_us) */
  double orch_us;      /* orchestration function span */
  double sched_us;     /* first to last scheduler activity: its last pass, or
                        * the orchestration's end if every block ended before */
  double effective_us; /* max end - min start of orch and schedulers */
  /* gang start (sync_start) */
  uint64_t sync_tasks;
  uint64_t sync_fast_launches;
  uint64_t drains;
  uint64_t drain_attempts; /* total attempts over all drains */
  uint64_t drain_max_attempts;
  double cohort_spread_max_us; /* last block start - first block start */
  double cohort_spread_sum_us;
  double drain_latency_max_us; /* drain entry to cohort start */
  double drain_latency_sum_us;
  /* times an idle core held off looking for work, its blocks being short
   * (PTO_PULL_HOLD_NS) */
  uint64_t pull_holds;
  /* blocks pending on a busy core that an idle core ran instead */
  uint64_t steals;
  /* blocks a core ran right after completing their producer, without the
   * ready queue or a scheduler pass (a hand-off), or took from its ready
   * queue's head itself after completing its own block, without a pass
   * (counted in `blocks`) */
  uint64_t handoffs;
  /* times a core that took its next blocks from its ready queue's head
   * left the queue to a lower-numbered core taking heads too, its blocks
   * being shorter than PTO_HEAD_YIELD_NS (two cores taking turns at the
   * head cost more than such blocks) */
  uint64_t head_yields;
  /* tasks ready at their submit that the orchestrator gathered and pushed
   * together instead of one by one (PTO_ORCH_GATHER) */
  uint64_t gathered;
} pto_run_stats;

typedef void (*pto_orch_fn)(pto_orch *orch, void *arg);

/* Runs one orchestration. Returns 0 or the first latched error; `stats` and
 * `err` (either may be NULL) are filled in both cases. */
PTO_API int pto_chip_run(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *stats,
                         pto_error_info *err);

/* Completes a block that called pto_kctx_async_begin(). Any thread may call
 * it, also while the run ends. A token of an earlier run (its block ended
 * with that run) returns PTO_EASYNC_INVALID and leaves the current run
 * alone; one of the current run that is not outstanding (completed twice)
 * or a made-up one fails the run with PTO_EASYNC_INVALID; with no run in
 * progress it returns PTO_EASYNC_INVALID. */
PTO_API int pto_chip_async_complete(pto_chip *chip, uint64_t token);

/* Record a Chrome/Perfetto trace of every following run into `path`
 * (NULL: tracing off, the default). Between runs: PTO_EBUSY during one.
 * An empty path is PTO_EINVAL; a refusal says why in pto_last_error() and
 * leaves the setting as it was. */
PTO_API int pto_chip_set_trace(pto_chip *chip, const char *path);

/* Prints "NAME: hint\n  details" for a failed run to the stream. */
PTO_API void pto_error_print(const pto_error_info *err, FILE *stream);

#ifdef __cplusplus
}
#endif
#endif
