/* bench/common/bench.h — what every benchmark program shares: the workload
 * graphs (W1 chain, W2 independent, W4 fan-out/fan-in, W3/W5 Task Bench
 * patterns), the calibrated compute-bound kernel, the clock, the command
 * line and the output lines the driver (bench/run.sh) parses.
 *
 * Each system (pto, OpenMP, StarPU, TBB) implements the callbacks of
 * bench_system once (and, for the prebuilt class, a bench_prebuilt);
 * bench_main() runs the workloads, so every system gets the same graph,
 * the same kernel and the same measurement. */
#ifndef PTO_BENCH_H
#define PTO_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one task's data slot: one cache line, so that tasks on different
 * workers never share a line (no false sharing in any system). */
#define BENCH_SLOT_BYTES 64
#define BENCH_SLOT_WORDS (BENCH_SLOT_BYTES / 8)
/* Consumers per round of W4 (1 producer -> 64 consumers -> 1 reducer). */
#define BENCH_FAN 64

typedef enum bench_pattern {
  BENCH_STENCIL_1D = 0,
  BENCH_TREE,
  BENCH_FFT,
  BENCH_NEAREST,
  BENCH_ALL_TO_ALL,
  BENCH_PATTERN_COUNT
} bench_pattern;

/* A Task Bench graph, flattened into submission order (step by step, point
 * by point). Task i writes slot i; it reads the slots of the tasks listed in
 * dep[dep_start[i] .. dep_start[i+1]) (all of step t-1). The same
 * dependencies are also given as intervals of points of step t-1, for
 * systems that can name a range of data in one argument. */
typedef struct bench_graph {
  bench_pattern pattern;
  int width; /* points per step (tree: fewer in its first steps) */
  int steps;
  int radix; /* nearest only */
  int ntasks;
  uint64_t iters;  /* kernel iterations per task */
  double grain_us; /* the kernel grain G those iterations take */
  int *step;       /* [ntasks] step of task i */
  int *point;      /* [ntasks] point of task i */
  int *row_start;  /* [steps + 1] first task of each step */
  int *dep_start;  /* [ntasks + 1] */
  int *dep;        /* task indices */
  int *ivl_start;  /* [ntasks + 1] */
  int *ivl_lo;     /* intervals [lo, hi] of points of step t-1 */
  int *ivl_hi;
  int max_deps;
} bench_graph;

/* The two workload classes (docs/benchmarks.md, "Two classes"):
 *   dynamic:  the graph is built (submitted) as it runs; the clock covers
 *             build + execution;
 *   prebuilt: a graph built or captured once, outside the clock, then
 *             executed again; the clock covers one execution. */
typedef enum bench_class { BENCH_DYNAMIC = 0, BENCH_PREBUILT, BENCH_CLASS_COUNT } bench_class;

typedef enum bench_kind { BENCH_CHAIN = 0, BENCH_INDEP, BENCH_FANOUT, BENCH_GRAPH } bench_kind;

/* One workload instance, as the prebuilt class hands it to a system: the
 * same work as the matching run_* callback below. */
typedef struct bench_work {
  bench_kind kind;
  int n;                /* W1/W2: tasks; W4: rounds; W3/W5: unused */
  const bench_graph *g; /* W3/W5 only */
  uint64_t *slots;      /* the harness's data slots, the same on every execution */
} bench_work;

/* A system's prebuilt class: one adapter of three calls. The harness zeroes
 * the slots before each execution, times exec() alone with its own clock and
 * checks the slots after it; build() and destroy() are outside the clock. */
typedef struct bench_prebuilt {
  /* One line: what "built once, executed again" means for this system. */
  const char *how;
  /* Builds (or captures) the graph of w once; NULL on failure. */
  void *(*build)(const bench_work *w);
  /* Executes it once, to completion; 0 on success. */
  int (*exec)(void *graph);
  void (*destroy)(void *graph);
} bench_prebuilt;

/* One system under test. The harness owns the data slots (zeroed before
 * each run, checked after it); each run_* callback does the whole workload
 * once on them and returns its wall time in ns, measured by the system
 * itself around what a user waits for: submission + execution, and no
 * teardown. One-time setup outside that (e.g. registering data handles) is
 * excluded, as docs/benchmarks.md says. A negative return fails the
 * program. */
typedef struct bench_system {
  const char *name;
  int (*init)(int workers);
  void (*fini)(void);
  /* W1: n tasks, each INOUT on slots[0]. */
  int64_t (*run_chain)(int n, uint64_t *slots);
  /* W2: task i writes slot i. */
  int64_t (*run_indep)(int n, uint64_t *slots);
  /* W4: slot 0 = R, slot 1 = A, slots 2 .. 2+BENCH_FAN-1 = B; each round is
   * produce(R -> A), BENCH_FAN x consume(A -> B[j]), reduce(B -> R). */
  int64_t (*run_fanout)(int rounds, uint64_t *slots);
  /* W3/W5: task i of g writes slot i, reads the slots of its deps. */
  int64_t (*run_graph)(const bench_graph *g, uint64_t *slots);
  /* One line describing the configuration used (may be NULL). */
  const char *(*describe)(void);
  /* The prebuilt class, or NULL: the system is then not run in it. */
  const bench_prebuilt *prebuilt;
} bench_system;

/* Parses the command line, runs the workload, prints the RAW lines. */
int bench_main(int argc, char **argv, const bench_system *sys);

/* ---- shared pieces the systems call ----
 * Data lives in slots of BENCH_SLOT_WORDS uint64 words; slot s starts at
 * slots + s * BENCH_SLOT_WORDS. Kernels only touch word 0, and each writes
 * a value from which bench_check_* can tell whether every dependency was
 * honoured (a task that ran early or concurrently with a writer of its
 * data leaves a wrong value behind). */
int64_t bench_now_ns(void);
uint64_t *bench_slots_alloc(int n); /* cache-line aligned, zeroed */

/* W1/W2 "empty" kernel: one opaque call that increments the slot, so no
 * compiler drops a task body in one system and keeps it in another. */
void bench_kernel_empty(uint64_t *slot);
/* W4 kernels: producer A = R + 1; consumer B += A; reducer R = sum of the
 * BENCH_FAN contiguous slots starting at B. */
void bench_kernel_produce(const uint64_t *r, uint64_t *a);
void bench_kernel_consume(const uint64_t *a, uint64_t *b);
void bench_kernel_reduce(const uint64_t *b, uint64_t *r);

/* W3/W5 compute-bound kernel of task i of g: reads word 0 of its input
 * slots (given by the caller, in any order), runs g->iters iterations of a
 * dependent multiply-add chain (no memory traffic, no vectorisation, no
 * closed form) and writes its output slot. */
void bench_kernel_task(const bench_graph *g, int i, const uint64_t *const *inputs, int ninputs,
                       uint64_t *output);
/* The same from within a kernel that only has its scalars: iterations and
 * task index. */
void bench_kernel_task_raw(uint64_t iters, int i, const uint64_t *const *inputs, int ninputs,
                           uint64_t *output);
/* Same, with the inputs found from g's dependency lists in `slots`. */
void bench_graph_task(const bench_graph *g, int i, uint64_t *slots);

/* Result checks against a sequential recomputation: 0 when right. */
int bench_check_chain(int n, const uint64_t *slot);
int bench_check_indep(int n, const uint64_t *slots);
int bench_check_fanout(int rounds, const uint64_t *r);
int bench_check_graph(const bench_graph *g, const uint64_t *slots);

const char *bench_pattern_name(bench_pattern p);

#ifdef __cplusplus
}
#endif
#endif
