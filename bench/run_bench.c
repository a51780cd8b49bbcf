/* run_bench.c — fixed cost of one pto_chip_run (public API only): the
 * wall time of pto_chip_run, in µs per run, for an empty orchestration and
 * for one that submits a single empty AIV task, on 1 cluster (1 AIC + 2
 * AIV) and 5 clusters, dependency tracking on (the task has one
 * OUTPUT_EXISTING argument). Each case runs WARMUP runs first, then RUNS
 * timed runs, each checked (status and task count); it prints the median,
 * the 10th and 90th percentiles and the maximum. Last, the CPU time the
 * process spends per second while a chip of 8 clusters (24 cores) sits idle
 * between two runs (its threads parked).
 * Built with the library (bench/pto_programs.cmake): build/bench/run_bench.
 * Arguments: [runs per case (default 1000)]. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "pto/pto.h"

#define WARMUP 20

static float buf[256];
static int g_kernel;

static int k_empty(const pto_kctx *c) {
  (void)c;
  return 0;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void orch_empty(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

static void orch_one(pto_orch *o, void *arg) {
  (void)arg;
  int64_t n = 256;
  pto_tensor t;
  pto_tensor_init(&t, buf, sizeof buf, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_submit(o, g_kernel, &a, NULL, NULL);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int bench(int clusters, const char *name, pto_orch_fn fn, uint64_t tasks, int runs) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip) || pto_kernel_register_aiv(chip, "empty", k_empty, &g_kernel)) {
    fprintf(stderr, "chip setup failed\n");
    return 1;
  }
  double *us = malloc(sizeof *us * (size_t)runs);
  if (!us) return 1;
  for (int i = -WARMUP; i < runs; i++) {
    pto_run_stats st;
    pto_error_info e;
    double t0 = now_us();
    int rc = pto_chip_run(chip, fn, NULL, &st, &e);
    double t1 = now_us();
    if (rc || st.tasks != tasks) {
      fprintf(stderr, "run %d of %s: rc %d, %llu tasks (expected 0, %llu)\n", i, name, rc,
              (unsigned long long)st.tasks, (unsigned long long)tasks);
      pto_error_print(&e, stderr);
      return 1;
    }
    if (i >= 0) us[i] = t1 - t0;
  }
  qsort(us, (size_t)runs, sizeof *us, cmp);
  printf("%-6s %2d clusters (%3d cores)  median %8.1f us  p10 %8.1f  p90 %8.1f  max %9.1f\n", name,
         clusters, clusters * 3, us[runs / 2], us[runs / 10], us[runs * 9 / 10], us[runs - 1]);
  free(us);
  pto_chip_destroy(chip);
  return 0;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int idle_cpu(void) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 8;
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip) || pto_kernel_register_aiv(chip, "empty", k_empty, &g_kernel))
    return 1;
  for (int i = 0; i < 3; i++)
    if (pto_chip_run(chip, orch_one, NULL, NULL, NULL)) return 1;
  struct timespec idle = {2, 0};
  double c0 = cpu_s(), w0 = now_us();
  nanosleep(&idle, NULL);
  double c1 = cpu_s(), w1 = now_us();
  printf("idle chip (8 clusters, 24 cores) between runs: %.2f ms CPU per second\n",
         (c1 - c0) * 1e3 / ((w1 - w0) / 1e6));
  pto_chip_destroy(chip);
  return 0;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 1000;
  if (runs < 10) runs = 10;
  printf("pto_chip_run wall time, %d runs per case after %d warm-up runs\n", runs, WARMUP);
  int clusters[] = {1, 5};
  for (int c = 0; c < 2; c++) {
    if (bench(clusters[c], "empty", orch_empty, 0, runs)) return 1;
    if (bench(clusters[c], "1-task", orch_one, 1, runs)) return 1;
  }
  return idle_cpu();
}
