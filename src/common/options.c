/* options.c — the table of pto's tunables (see options.h). */
#include "common/options.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "pto/status.h"

/* The park maximum is also a build-time option: the park10s test build
 * (scripts/test.sh) sets -DPTO_PARK_MAX_MS=10000 to prove that no wait
 * depends on the re-check. */
#ifndef PTO_PARK_MAX_MS
#define PTO_PARK_MAX_MS 20
#endif

static const pto_option_desc table[PTO_OPT_COUNT] = {
    [PTO_OPT_CLUSTERS] = {"clusters", "PTO_CLUSTERS", 8, 1, PTO_CLUSTERS_MAX,
                          "clusters of a chip (1 AIC + 2 AIV cores each)"},
    [PTO_OPT_SCHEDULERS] = {"schedulers", "PTO_SCHEDULERS", 0, 0, PTO_SCHEDULERS_MAX,
                            "scheduler threads of a chip (0: min(3, clusters))"},
    [PTO_OPT_TASK_SLOTS] = {"task_slots", "PTO_TASK_SLOTS", 16384, 2, PTO_TASK_SLOTS_MAX,
                            "task ring slots of a chip"},
    [PTO_OPT_HEAP_MB] = {"heap_bytes", "PTO_HEAP_MB", 256, 1, 1 << 20,
                         "output heap of a chip, in MiB"},
    [PTO_OPT_DEP_ENTRIES] = {"dep_entries", "PTO_DEP_ENTRIES", 16384, 1, 1 << 24,
                             "dependency-list entries of a chip"},
    [PTO_OPT_TENSORMAP_ENTRIES] = {"tensormap_entries", "PTO_TENSORMAP_ENTRIES", 65536, 1, 1 << 24,
                                   "TensorMap entries of a chip"},
    [PTO_OPT_ALLOC_TIMEOUT_MS] = {"alloc_timeout_ms", "PTO_ALLOC_TIMEOUT_MS", 500, 1, PTO_DAY_MS,
                                  "longest a submit waits for ring space before a deadlock error"},
    [PTO_OPT_WATCHDOG_MS] = {"watchdog_ms", "PTO_WATCHDOG_MS", 10000, 1, PTO_DAY_MS,
                             "longest a run may make no progress before the watchdog stops it"},
    [PTO_OPT_SHUTDOWN_MS] = {"shutdown_ms", "PTO_SHUTDOWN_MS", 5000, 1, PTO_DAY_MS,
                             "deadline for a run's threads to stop and be joined"},
    [PTO_OPT_ASYNC_SLOTS] = {"async_slots", "PTO_ASYNC_SLOTS", 64, 0, PTO_ASYNC_SLOTS_MAX,
                             "in-flight asynchronous completions of a chip"},
    [PTO_OPT_SCHED_THREADS] = {"sched_threads", "PTO_SCHED_THREADS", 0, 0, 1,
                               "1: a thread per scheduler (the device's AICPU threads); 0: "
                               "scheduling runs on the cores that finish work"},
    [PTO_OPT_SPREAD_CORES] = {"spread_cores", "PTO_SPREAD_CORES", 1, 0, 2,
                              "1: a chip's orchestrator far ahead of busy cores whose blocks are "
                              "short gets a CPU of its own, and once it waits for the last tasks "
                              "each core gets one, while no other program's threads need those "
                              "CPUs; 2: even then; 0: the OS places them"},
    [PTO_OPT_PULL_HOLD_NS] = {"pull_hold_ns", "PTO_PULL_HOLD_NS", 2000, 0, 10000000,
                              "an idle core whose blocks run under a quarter of this looks for "
                              "work once per this many ns; 0: continuously"},
    [PTO_OPT_HEAD_YIELD_NS] = {"head_yield_ns", "PTO_HEAD_YIELD_NS", 100, 0, 10000000,
                               "a core taking its next blocks from its queue's head leaves the "
                               "queue to a lower-numbered core taking heads too while its "
                               "blocks run under this many ns; 0: never"},
    [PTO_OPT_ORCH_GATHER] = {"orch_gather", "PTO_ORCH_GATHER", 1, 0, 1,
                             "1: tasks ready at their submit are gathered while every core of "
                             "their type is busy or an idle core holds, and pushed together; 0: "
                             "each is pushed at its submit"},
    [PTO_OPT_SPIN_NS] = {"spin_ns", "PTO_SPIN_NS", 5000, 0, 1000000000,
                         "a waiter spins this long (ns) before it yields and parks"},
    [PTO_OPT_PARK_MAX_MS] = {"park_max_ms", "PTO_PARK_MAX_MS", PTO_PARK_MAX_MS, 1, PTO_DAY_MS,
                             "a parked waiter re-checks this often (ms; also -DPTO_PARK_MAX_MS)"},
    [PTO_OPT_WAIT_MEMBARRIER] = {"wait_membarrier", "PTO_WAIT_MEMBARRIER", 1, 0, 1,
                                 "1: on an event shared between processes, a waiter about to "
                                 "park makes the signallers' fence (membarrier(2)) and a signal "
                                 "makes none, where the kernel allows; 0: both fence"},
    [PTO_OPT_NODE_STARTUP_MS] = {"startup_timeout_ms", "PTO_NODE_STARTUP_MS", 300000, 1, PTO_DAY_MS,
                                 "node: deadline for the chip processes to start"},
    [PTO_OPT_NODE_CONTROL_MS] = {"control_timeout_ms", "PTO_NODE_CONTROL_MS", 30000, 1, PTO_DAY_MS,
                                 "node: deadline for a chip process to answer a control message"},
    [PTO_OPT_NODE_HOST_TASK_MS] = {"host_task_timeout_ms", "PTO_NODE_HOST_TASK_MS", 60000, 1,
                                   PTO_DAY_MS, "node: deadline of a host task"},
    [PTO_OPT_NODE_WAIT_MS] = {"wait_timeout_ms", "PTO_NODE_WAIT_MS", 10000, 1, PTO_DAY_MS,
                              "node: deadline of a notify wait between chips"},
    [PTO_OPT_HEARTBEAT_MS] = {"heartbeat_ms", "PTO_HEARTBEAT_MS", 100, 1, 60000,
                              "node: a chip process beats this often (ms)"},
    [PTO_OPT_NODE_TENSORMAP_ENTRIES] = {"tensormap_entries", "PTO_NODE_TENSORMAP_ENTRIES", 8192, 1,
                                        1 << 24,
                                        "node: TensorMap entries of the node orchestrator"},
    [PTO_OPT_FAULT_GAP_MS] = {"fault_gap_ms", "PTO_FAULT_GAP_MS", 500, 0, 60000,
                              "fault injection: most a task's remote stores are held back (ms)"},
    [PTO_OPT_MPI_SHARED_WINDOWS] = {"mpi_shared_windows", "PTO_MPI_SHARED_WINDOWS", 1, 0, 1,
                                    "MPI backend: 1: ranks on one host share window memory; "
                                    "0: MPI RMA windows always"},
    [PTO_OPT_MPI_COLL_GRACE_MS] = {"mpi_coll_grace_ms", "PTO_MPI_COLL_GRACE_MS", 30000, 0,
                                   PTO_DAY_MS,
                                   "MPI backend: a collective past its deadline (or cancelled) in "
                                   "MPI's collective waits this much longer for it (ms), since "
                                   "MPI owns its src and dst, then ends the MPI job (MPI_Abort)"},
    [PTO_OPT_MPI_RECORD_BYTES] = {"mpi_record_bytes", "PTO_MPI_RECORD_BYTES", -1, -1, 1 << 26,
                                  "MPI backend: the most data a collective's record carries to "
                                  "a peer; larger calls take MPI's collectives (-1: 32 KiB, 1 "
                                  "MiB between 2 ranks on two hosts)"},
    [PTO_OPT_COPY_MOVSB] = {"copy_movsb", "PTO_COPY_MOVSB", -1, -1, 1,
                            "copies of 1 MiB and more into and out of window memory: 1: rep "
                            "movsb (x86-64), 0: libc's memcpy, -1: whichever copied 2 MiB "
                            "faster in a first test"},
    [PTO_OPT_SCHEDULE_SEED] = {"schedule_seed", "PTO_SCHEDULE_SEED", 0, 0, INT64_MAX,
                               "nonzero: every scheduling choice of a chip (or node) is drawn "
                               "from this seed, blocks running one at a time (docs/schedules.md)"},
    [PTO_OPT_COLL_REPRODUCIBLE] = {"coll_reproducible", "PTO_COLL_REPRODUCIBLE", 0, 0, 1,
                                   "1: every collective reduction is computed in rank order "
                                   "(bit-identical on every path; PTO_RED_REPRODUCIBLE per call)"},
};

const pto_option_desc *pto_option_desc_of(pto_opt o) {
  return (unsigned)o < PTO_OPT_COUNT ? &table[o] : NULL;
}

/* 1 with *out set when s is all decimal digits (an optional leading '-')
 * and in [min, max]; 0 otherwise. */
static int parse(const char *s, long long min, long long max, long long *out) {
  const char *p = s[0] == '-' ? s + 1 : s;
  if (*p < '0' || *p > '9') return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno || v < min || v > max) return 0;
  *out = v;
  return 1;
}

long long pto_option(pto_opt o) {
  const pto_option_desc *d = pto_option_desc_of(o);
  if (!d) return 0;
  const char *s = getenv(d->env);
  long long v;
  return s && parse(s, d->min, d->max, &v) ? v : d->def;
}

long long pto_option_cached(pto_opt o) {
  static _Atomic long long value[PTO_OPT_COUNT];
  static _Atomic unsigned char read[PTO_OPT_COUNT];
  if ((unsigned)o >= PTO_OPT_COUNT) return 0;
  /* acquire pairs with the release below; racing first callers store the
   * same value */
  if (atomic_load_explicit(&read[o], memory_order_acquire))
    return atomic_load_explicit(&value[o], memory_order_relaxed);
  long long v = pto_option(o);
  atomic_store_explicit(&value[o], v, memory_order_relaxed);
  atomic_store_explicit(&read[o], 1, memory_order_release);
  return v;
}

int pto_options_check(char *err, size_t errlen) {
  for (int i = 0; i < PTO_OPT_COUNT; i++) {
    const char *s = getenv(table[i].env);
    long long v;
    if (!s || parse(s, table[i].min, table[i].max, &v)) continue;
    if (err && errlen)
      snprintf(err, errlen, "environment: %s='%s' is not an integer in %lld..%lld (%s)",
               table[i].env, s, table[i].min, table[i].max, table[i].doc);
    return PTO_EINVAL;
  }
  if (err && errlen) err[0] = '\0';
  return 0;
}

void pto_options_print(FILE *f) {
  for (int i = 0; i < PTO_OPT_COUNT; i++)
    fprintf(f, "  %-24s %s (default %lld)\n", table[i].env, table[i].doc, table[i].def);
}
