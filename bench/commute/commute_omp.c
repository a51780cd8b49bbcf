/* commute_omp.c — the commute and priority benchmarks on OpenMP tasks
 * (commute_common.h): depend(mutexinoutset) adds into bins, and the chain
 * with independent work with and without the priority clause. `-w W`: W
 * threads, the single thread submitting among them. The priority clause
 * is a hint that counts only up to OMP_MAX_TASK_PRIORITY, read when the
 * runtime starts: run with OMP_MAX_TASK_PRIORITY=3 (the program refuses
 * to report a "with priorities" figure otherwise). */
#include "commute_common.h"

#include <omp.h>

static uint64_t g_bins[HIST_BINS];

static void hist(int w) {
#pragma omp parallel num_threads(w)
#pragma omp single
  for (uint64_t i = 0; i < HIST_TASKS; i++) {
    uint64_t *bin = &g_bins[i % HIST_BINS];
#pragma omp task depend(mutexinoutset : bin[0]) firstprivate(i, bin)
    *bin += hist_value(i);
  }
}

static void chain_and_indep(int w, int prio) {
  uint64_t token = 0; /* the chain's dependency */
  (void)token;        /* gcc sees no use in a depend clause */
#pragma omp parallel num_threads(w)
#pragma omp single
  {
    for (int i = 0; i < prio_indep(w); i++) {
#pragma omp task
      prio_task_sleep();
    }
    for (int i = 0; i < PRIO_CHAIN; i++) {
#pragma omp task depend(inout : token) priority(prio)
      prio_task_sleep();
    }
  }
}

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  omp_set_dynamic(0);
#pragma omp parallel num_threads(w)
  { (void)0; } /* the pool starts before any measurement */
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    memset(g_bins, 0, sizeof g_bins);
    double t0 = now_s();
    hist(w);
    t[r] = now_s() - t0;
    if (hist_check(g_bins, "omp")) return 1;
  }
  printf("histogram system=omp-%s workers=%d tasks=%d bins=%d seconds=%.4f ns_per_task=%.0f\n",
         BENCH_CC, w, HIST_TASKS, HIST_BINS, median(t), median(t) * 1e9 / HIST_TASKS);
  for (int with = 0; with < 2; with++) {
    if (with && omp_get_max_task_priority() < 3) {
      fprintf(stderr, "omp: OMP_MAX_TASK_PRIORITY is %d: set it to 3 for the priority figure\n",
              omp_get_max_task_priority());
      return 1;
    }
    for (int r = 0; r < REPS; r++) {
      double t0 = now_s();
      chain_and_indep(w, with ? 3 : 0);
      t[r] = now_s() - t0;
    }
    printf("priority system=omp-%s workers=%d chain=%d independent=%d task_us=%d priorities=%s "
           "makespan_ms=%.1f\n",
           BENCH_CC, w, PRIO_CHAIN, prio_indep(w), PRIO_TASK_US, with ? "yes" : "no",
           median(t) * 1e3);
  }
  return 0;
}
