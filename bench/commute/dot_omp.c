/* dot_omp.c — the dot-product reduction benchmark on OpenMP tasks
 * (dot_common.h): a taskgroup with task_reduction(+ : acc) whose tasks
 * add their partials with in_reduction(+ : acc). `-w W`: W threads, the
 * single thread submitting among them. */
#include "dot_common.h"

#include <omp.h>

static double dot(int w) {
  double acc = 0;
#pragma omp parallel num_threads(w)
#pragma omp single
#pragma omp taskgroup task_reduction(+ : acc)
  for (int i = 0; i < DOT_TASKS; i++) {
    int c = i % DOT_CHUNKS;
#pragma omp task in_reduction(+ : acc) firstprivate(c)
    acc += dot_chunk(&dot_x[c * DOT_LEN], &dot_y[c * DOT_LEN]);
  }
  return acc;
}

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  dot_fill();
  omp_set_dynamic(0);
#pragma omp parallel num_threads(w)
  { (void)0; } /* the pool starts before any measurement */
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now_s();
    double got = dot(w);
    t[r] = now_s() - t0;
    if (dot_check(got, "omp")) return 1;
  }
  printf("dot system=omp-%s workers=%d tasks=%d len=%d seconds=%.4f ns_per_task=%.0f\n", BENCH_CC,
         w, DOT_TASKS, DOT_LEN, median(t), median(t) * 1e9 / DOT_TASKS);
  return 0;
}
