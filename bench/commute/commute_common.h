/* commute_common.h — what the commute and priority benchmarks share
 * (bench/commute/: one program per system, same work, same checks):
 *
 *   histogram: HIST_TASKS small tasks, task i adding hist_value(i) into
 *     bin i % HIST_BINS (one 8-byte word each) under commutative access
 *     (pto PTO_COMMUTE, StarPU STARPU_RW | STARPU_COMMUTE, OpenMP
 *     depend(mutexinoutset)); the bins must equal the serial sums.
 *   priority: a chain of PRIO_CHAIN tasks (each after the previous) and
 *     prio_indep(W) independent tasks, all PRIO_TASK_US of sleep (so the
 *     figures do not depend on free CPUs), the independent ones submitted
 *     first; the makespan with every priority equal and with the chain at
 *     the highest. On W workers the chain is C tasks long and the
 *     independent work C tasks per other worker: in submission order the
 *     chain starts only after the independent tasks, about (2 - 1/W) C
 *     tasks' time; first, it overlaps them, about C tasks' time.
 * Header-only, bench tree only. */
#ifndef PTO_BENCH_COMMUTE_COMMON_H
#define PTO_BENCH_COMMUTE_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under -std=c11 */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HIST_TASKS   100000
#define HIST_BINS    64
#define PRIO_CHAIN   100
#define PRIO_TASK_US 1000
#define REPS         3

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A small task's work: 64 steps of an LCG from its index (about 100 ns). */
static inline uint64_t hist_value(uint64_t i) {
  uint64_t x = i * 2654435761u + 1;
  for (int k = 0; k < 64; k++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x >> 48;
}

static inline int hist_check(const uint64_t *bins, const char *who) {
  uint64_t want[HIST_BINS] = {0};
  for (uint64_t i = 0; i < HIST_TASKS; i++)
    want[i % HIST_BINS] += hist_value(i);
  for (int b = 0; b < HIST_BINS; b++)
    if (bins[b] != want[b]) {
      fprintf(stderr, "%s: bin %d = %llu, serial sum %llu\n", who, b, (unsigned long long)bins[b],
              (unsigned long long)want[b]);
      return 1;
    }
  return 0;
}

static inline void prio_task_sleep(void) {
  struct timespec ts = {0, PRIO_TASK_US * 1000L};
  nanosleep(&ts, NULL);
}

/* Independent tasks: as much work as the chain on each of `workers`
 * workers but one, so with priorities the chain and they overlap. */
static inline int prio_indep(int workers) { return PRIO_CHAIN * (workers > 1 ? workers - 1 : 1); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of REPS figures. */
static inline double median(double *v) {
  qsort(v, REPS, sizeof *v, cmp_double);
  return v[REPS / 2];
}

static inline int workers_arg(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "-w") == 0) return atoi(argv[i + 1]);
  return 2;
}

/* `-m NAME`: run only the mode so named (for profiling one mode); NULL,
 * every mode. */
static inline const char *mode_arg(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "-m") == 0) return argv[i + 1];
  return NULL;
}

#endif
