/* submit_bench.c — orchestrator cost of pto_submit (public API only), in
 * ns per submit, for two task forms on 1 cluster x 2 AIV + 1 scheduler:
 *   1arg: one OUTPUT_EXISTING row of a 64-row buffer (rows rotate), the
 *         cheapest dependency-tracked task;
 *   4arg: a Jacobi-like stencil: rows i-1, i, i+1 of grid A as INPUT and
 *         row i of grid B as OUTPUT_EXISTING, grids swapping every sweep;
 *   fresh: one OUTPUT_EXISTING 64-byte slot of its own per task, as
 *         bench_pto's W2 (indep): no edge, every task ready at submit.
 * Kernels do nothing. Each run times the orchestration function's submit
 * loop with the orchestrator thread's CPU clock (CLOCK_THREAD_CPUTIME_ID:
 * its own cost, not the time other threads of a shared machine took from
 * it; that includes waking the scheduler); the median of REPS runs is printed.
 * The gated forms time the same loops behind a gate task that holds every
 * task until the loop ends: nothing completes or becomes ready meanwhile,
 * so they show the orchestrator's own cost of dependency tracking without
 * the cache lines it shares with the cores (run under `taskset -c 0` to
 * see all of it on one CPU). They submit at most GATED_MAX tasks a run.
 * Built with the library (bench/pto_programs.cmake): build/bench/submit_bench.
 * Arguments: [tasks per run (default 4096)] [runs (default 15)]
 * [form: 1, 4 or 2 for fresh (default all); one form alone, for a profile]. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pto/pto.h"

#define ROWS 64
#define COLS 256

static float grid[2][ROWS][COLS];
static int g_kernel;
static int g_tasks = 4096;
static double g_ns;
static int g_failed;

static int k_empty(const pto_kctx *c) {
  (void)c;
  return 0;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static pto_tensor row(int g, int i) {
  int64_t n = COLS;
  pto_tensor t;
  pto_tensor_init(&t, grid[g][i], sizeof grid[g][i], PTO_F32, 1, &n);
  return t;
}

static void orch_1arg(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor rows[ROWS];
  for (int i = 0; i < ROWS; i++)
    rows[i] = row(0, i);
  double t0 = now_ns();
  for (int k = 0; k < g_tasks; k++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &rows[k % ROWS]);
    if (pto_submit(o, g_kernel, &a, NULL, NULL)) {
      g_failed = 1;
      return;
    }
  }
  g_ns = (now_ns() - t0) / g_tasks;
}

static void orch_4arg(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor rows[2][ROWS];
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < ROWS; i++)
      rows[g][i] = row(g, i);
  double t0 = now_ns();
  for (int k = 0; k < g_tasks; k++) {
    int sweep = k / ROWS, i = k % ROWS, src = sweep & 1;
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &rows[src][i > 0 ? i - 1 : i]);
    pto_args_input(&a, &rows[src][i]);
    pto_args_input(&a, &rows[src][i < ROWS - 1 ? i + 1 : i]);
    pto_args_output_existing(&a, &rows[!src][i]);
    if (pto_submit(o, g_kernel, &a, NULL, NULL)) {
      g_failed = 1;
      return;
    }
  }
  g_ns = (now_ns() - t0) / g_tasks;
}

/* a slot of its own per task, as W2's (bench_pto indep) */
#define FRESH_WORDS 8
static int64_t *g_fresh;

static void orch_fresh(pto_orch *o, void *arg) {
  (void)arg;
  double t0 = now_ns();
  for (int k = 0; k < g_tasks; k++) {
    int64_t n = FRESH_WORDS;
    pto_tensor t;
    pto_tensor_init(&t, g_fresh + (size_t)k * FRESH_WORDS, FRESH_WORDS * sizeof(int64_t), PTO_I64,
                    1, &n);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t);
    if (pto_submit(o, g_kernel, &a, NULL, NULL)) {
      g_failed = 1;
      return;
    }
  }
  g_ns = (now_ns() - t0) / g_tasks;
}

/* The gated forms: every task of the loop waits, directly or through
 * earlier ones, on a gate task whose kernel holds until the loop is timed,
 * so no task completes or becomes ready while submits are timed. The
 * figure is then the orchestrator's own cost of dependency tracking, free
 * of the cores' traffic on the lines it shares with them. */
static _Atomic int g_open;
/* every edge of a gated loop stays live: 4arg's (up to 4 a task) must fit
 * the default dep_entries (16384) */
#define GATED_MAX 2048
static int g_gate_kernel;

static int k_gate(const pto_kctx *c) {
  /* a failed run cancels it: it never outwaits the run */
  while (!atomic_load_explicit(&g_open, memory_order_acquire) && !pto_kctx_cancelled(c)) {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static void gate(pto_orch *o) {
  atomic_store_explicit(&g_open, 0, memory_order_relaxed);
  int64_t n[2] = {2 * ROWS, COLS};
  pto_tensor all;
  pto_tensor_init(&all, grid, sizeof grid, PTO_F32, 2, n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &all);
  if (pto_submit(o, g_gate_kernel, &a, NULL, NULL)) g_failed = 1;
}

static void orch_1arg_gated(pto_orch *o, void *arg) {
  gate(o);
  orch_1arg(o, arg);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static void orch_4arg_gated(pto_orch *o, void *arg) {
  gate(o);
  orch_4arg(o, arg);
  atomic_store_explicit(&g_open, 1, memory_order_release);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_run(pto_chip *chip, pto_orch_fn fn, int reps) {
  double v[256];
  for (int r = 0; r < reps; r++) {
    pto_error_info err;
    if (pto_chip_run(chip, fn, NULL, NULL, &err) || g_failed) {
      fprintf(stderr, "run failed: %s\n", err.details);
      exit(1);
    }
    v[r] = g_ns;
  }
  qsort(v, (size_t)reps, sizeof v[0], cmp);
  return v[reps / 2];
}

int main(int argc, char **argv) {
  if (argc > 1) g_tasks = atoi(argv[1]);
  int reps = argc > 2 ? atoi(argv[2]) : 15;
  if (g_tasks < 1 || reps < 1 || reps > 256) return 2;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.schedulers = 1;
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip) || pto_kernel_register_aiv(chip, "empty", k_empty, &g_kernel) ||
      pto_kernel_register_aiv(chip, "gate", k_gate, &g_gate_kernel))
    return 1;
  int form = argc > 3 ? atoi(argv[3]) : 0;
  double one = form == 4 || form == 2 ? 0 : median_run(chip, orch_1arg, reps);
  double four = form == 1 || form == 2 ? 0 : median_run(chip, orch_4arg, reps);
  g_fresh = calloc((size_t)g_tasks * FRESH_WORDS, sizeof(int64_t));
  if (!g_fresh) return 1;
  double fresh = form == 1 || form == 4 ? 0 : median_run(chip, orch_fresh, reps);
  int all = g_tasks, gated = all < GATED_MAX ? all : GATED_MAX;
  g_tasks = gated; /* the loops' count, for the gated forms */
  double one_g = form == 4 || form == 2 ? 0 : median_run(chip, orch_1arg_gated, reps);
  double four_g = form == 1 || form == 2 ? 0 : median_run(chip, orch_4arg_gated, reps);
  g_tasks = all;
  printf("submit_bench tasks=%d runs=%d: 1arg %.0f ns/submit, 4arg %.0f ns/submit, fresh %.0f "
         "ns/submit; gated (%d tasks): 1arg %.0f ns/submit, 4arg %.0f ns/submit\n",
         g_tasks, reps, one, four, fresh, gated, one_g, four_g);
  free(g_fresh);
  pto_chip_destroy(chip);
  return 0;
}
