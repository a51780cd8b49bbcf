/* chain_bench.c — the C side of python/bench/submit_bench.py's "chain" form:
 * orchestrator CPU time per pto_submit of a chain of empty AIV tasks, each
 * INOUT on the same 256-float row (every task depends on the one before),
 * on 1 cluster x 2 AIV + 1 scheduler; median of the runs, ns per submit.
 * Built and run by submit_bench.py against the package's libpto.so.0.
 * Arguments: [tasks (default 4096)] [runs (default 15)]. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pto/pto.h"

static float row[256];
static int g_kernel, g_tasks = 4096, g_failed;
static double g_ns;

static int k_empty(const pto_kctx *c) {
  (void)c;
  return 0;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void orch_chain(pto_orch *o, void *arg) {
  (void)arg;
  int64_t n = 256;
  pto_tensor t;
  pto_tensor_init(&t, row, sizeof row, PTO_F32, 1, &n);
  double t0 = now_ns();
  for (int k = 0; k < g_tasks; k++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    if (pto_submit(o, g_kernel, &a, NULL, NULL)) {
      g_failed = 1;
      return;
    }
  }
  g_ns = (now_ns() - t0) / g_tasks;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc > 1) g_tasks = atoi(argv[1]);
  int runs = argc > 2 ? atoi(argv[2]) : 15;
  if (g_tasks < 1 || runs < 1 || runs > 256) return 2;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.schedulers = 1;
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip) || pto_kernel_register_aiv(chip, "empty", k_empty, &g_kernel))
    return 1;
  double v[256];
  for (int r = 0; r < runs; r++) {
    pto_error_info err;
    if (pto_chip_run(chip, orch_chain, NULL, NULL, &err) || g_failed) {
      fprintf(stderr, "run failed: %s\n", err.details);
      return 1;
    }
    v[r] = g_ns;
  }
  qsort(v, (size_t)runs, sizeof v[0], cmp);
  printf("%.0f\n", v[runs / 2]);
  pto_chip_destroy(chip);
  return 0;
}
