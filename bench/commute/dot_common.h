/* dot_common.h — the dot-product reduction benchmark (bench/commute/:
 * dot_pto.c, dot_starpu.c, dot_omp.c; same work, same check):
 *
 *   DOT_TASKS tasks, task i computing the dot product of chunk i %
 *   DOT_CHUNKS of two f64 vectors (DOT_LEN elements per chunk, about 60 ns
 *   of work) and adding it into one f64 result through the system's
 *   reduction (pto PTO_REDUX sum, StarPU STARPU_REDUX with init and redux
 *   codelets, OpenMP task_reduction / in_reduction). The vectors hold
 *   small integers, so every partial sum is exact and every combine order
 *   gives the serial result: each system's result must equal it exactly.
 * Header-only, bench tree only. */
#ifndef PTO_BENCH_DOT_COMMON_H
#define PTO_BENCH_DOT_COMMON_H

#include "commute_common.h"

#define DOT_TASKS  100000
#define DOT_CHUNKS 1024
#define DOT_LEN    64

static double dot_x[DOT_CHUNKS * DOT_LEN], dot_y[DOT_CHUNKS * DOT_LEN];

static inline void dot_fill(void) {
  for (int j = 0; j < DOT_CHUNKS * DOT_LEN; j++) {
    dot_x[j] = (double)(j % 7 - 3);
    dot_y[j] = (double)(j % 5 - 2);
  }
}

/* Task i's partial dot product. */
static inline double dot_chunk(const double *x, const double *y) {
  double s = 0;
  for (int j = 0; j < DOT_LEN; j++)
    s += x[j] * y[j];
  return s;
}

static inline int dot_check(double got, const char *who) {
  double want = 0;
  for (int i = 0; i < DOT_TASKS; i++) {
    int c = i % DOT_CHUNKS;
    want += dot_chunk(&dot_x[c * DOT_LEN], &dot_y[c * DOT_LEN]);
  }
  if (got != want) {
    fprintf(stderr, "%s: dot = %.17g, serial %.17g\n", who, got, want);
    return 1;
  }
  return 0;
}

#endif
