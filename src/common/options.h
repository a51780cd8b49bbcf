/* options.h — every tunable of pto in one table (src/common/options.c):
 * its name, default, environment variable and one-line doc. A default is
 * read here, never written as a literal where it is used; an environment
 * variable overrides it. An environment value that is not a decimal integer
 * in the option's range is an error naming the variable
 * (pto_options_check, called by pto_chip_create_ex and the CLI), never
 * silently ignored. See docs/architecture.md, "Options". */
#ifndef PTO_COMMON_OPTIONS_H
#define PTO_COMMON_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum pto_opt {
  /* chip: pto_chip_config_init's defaults */
  PTO_OPT_CLUSTERS,
  PTO_OPT_SCHEDULERS,
  PTO_OPT_TASK_SLOTS,
  PTO_OPT_HEAP_MB,
  PTO_OPT_DEP_ENTRIES,
  PTO_OPT_TENSORMAP_ENTRIES,
  PTO_OPT_ALLOC_TIMEOUT_MS,
  PTO_OPT_WATCHDOG_MS,
  PTO_OPT_SHUTDOWN_MS,
  PTO_OPT_ASYNC_SLOTS,
  PTO_OPT_SCHED_THREADS,
  PTO_OPT_SPREAD_CORES,
  PTO_OPT_PULL_HOLD_NS,
  PTO_OPT_HEAD_YIELD_NS,
  PTO_OPT_ORCH_GATHER,
  /* waits (src/common/wait.c) */
  PTO_OPT_SPIN_NS,
  PTO_OPT_PARK_MAX_MS,
  PTO_OPT_WAIT_MEMBARRIER,
  /* node: pto_node_config_init's defaults and the chip processes */
  PTO_OPT_NODE_STARTUP_MS,
  PTO_OPT_NODE_CONTROL_MS,
  PTO_OPT_NODE_HOST_TASK_MS,
  PTO_OPT_NODE_WAIT_MS,
  PTO_OPT_HEARTBEAT_MS,
  PTO_OPT_NODE_TENSORMAP_ENTRIES,
  /* comm: fault injection (pto_node_config.fault_inject) */
  PTO_OPT_FAULT_GAP_MS,
  /* comm: the MPI backend (src/comm/mpi.c) */
  PTO_OPT_MPI_SHARED_WINDOWS,
  PTO_OPT_MPI_COLL_GRACE_MS,
  PTO_OPT_MPI_RECORD_BYTES,
  /* comm: large copies into and out of window memory (src/common/copy.h) */
  PTO_OPT_COPY_MOVSB,
  /* chip: controlled schedules (docs/schedules.md) */
  PTO_OPT_SCHEDULE_SEED,
  PTO_OPT_COLL_REPRODUCIBLE,
  PTO_OPT_COUNT
} pto_opt;

/* The chip's shape limits, shared by the table's rows, pto_chip_create's
 * checks and the CLI: a chip has 1..PTO_CLUSTERS_MAX clusters and
 * 1..PTO_SCHEDULERS_MAX schedulers (the drain protocol's slots,
 * src/chip/drain.h), and no more schedulers than clusters; 2..
 * PTO_TASK_SLOTS_MAX task slots (the ready queues pack a slot index in
 * RQ_IDX_BITS bits, src/chip/ready_queue.h, which checks that the largest
 * one fits); 0..PTO_ASYNC_SLOTS_MAX async slots (a completion token holds
 * the slot in 16 bits, src/chip/async.c). */
#define PTO_CLUSTERS_MAX    4096
#define PTO_SCHEDULERS_MAX  64
#define PTO_TASK_SLOTS_MAX  (1 << 24)
#define PTO_ASYNC_SLOTS_MAX 65535

/* The longest timeout in ms an option takes, and watchdog_ms with it: a
 * day (the watchdog counts watchdog_ms in nanoseconds, in a uint64). */
#define PTO_DAY_MS (24ll * 3600 * 1000)

typedef struct pto_option_desc {
  const char *name; /* the config field or concept it sets */
  const char *env;  /* environment variable, "PTO_..." */
  long long def, min, max;
  const char *doc; /* one line */
} pto_option_desc;

/* The table's row for `o` (NULL for an out-of-range `o`). */
const pto_option_desc *pto_option_desc_of(pto_opt o);

/* The option's value: its environment variable when that holds a valid
 * value, else the default. Reads the environment on every call: callers on
 * a hot path cache it. */
long long pto_option(pto_opt o);

/* pto_option, read once per process (for paths that run often). */
long long pto_option_cached(pto_opt o);

/* 0 when every PTO_* variable of the table that is set holds a valid value;
 * else PTO_EINVAL with err naming the first bad one, its value and the
 * range, e.g. "environment: PTO_CLUSTERS='abc' is not an integer in 1..4096". */
int pto_options_check(char *err, size_t errlen);

/* Lists the environment variables, defaults and docs (for `pto --help`). */
void pto_options_print(FILE *f);

#endif
