/* graph_bench.c — what a captured graph saves (pto/graph.h), dynamic runs
 * against replays of the same graph, in one process:
 *
 *   - the flagship paged attention decode step (examples/paged_attention.c,
 *     8 requests x 16 heads x 128, 309 tasks) on a default chip: STEPS
 *     dynamic runs, then one capture and STEPS launches, REPS times; it
 *     prints the mean Effective µs (pto_run_stats.effective_us), wall µs
 *     and orchestration µs (orch_us: the submits, or the replay's slot
 *     fill) per step of each, and checks the output of each block of steps;
 *   - empty-kernel graphs as bench/pto builds them, on bench/pto's chip for
 *     `workers` kernel cores (docs/benchmarks.md): W1 (a chain of N tasks
 *     INOUT on one slot), W2 (N tasks on distinct slots), W4 (1 producer ->
 *     64 consumers -> 1 reducer, repeated); wall ns per task of a run
 *     against a launch, median of REPS, each checked.
 *
 * A launch binds the captured buffers again (NULL bindings): a decode step
 * or a solver iteration that reuses its buffers. Built with the
 * library (bench/pto_programs.cmake): build/bench/graph_bench.
 * Arguments: [steps (100)] [reps (3)] [N (10000)] [workers (2)]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paged_attention.h"
#include "pto/pto.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, int rc, const pto_error_info *err) {
  fprintf(stderr, "%s failed: %s\n", what, pto_status_name(rc));
  if (err) pto_error_print(err, stderr);
  exit(1);
}

/* ---- paged attention ---- */

static void bench_pa(int steps, int reps) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_chip *chip;
  pto_error_info err;
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc) die("pto_chip_create", rc, &err);
  pa_state *st = pa_flagship_new(chip, 1);
  if (!st) die("paged attention setup", PTO_ENOMEM, NULL);
  pto_run_stats s;
  for (int i = 0; i < 3; i++) /* warm-up: rings, heap pages, threads */
    if ((rc = pto_chip_run(chip, pa_step, st, &s, &err))) die("warm-up", rc, &err);
  printf("paged attention decode step (%llu tasks, %llu blocks), %d clusters: %d steps, %d "
         "times\n",
         (unsigned long long)s.tasks, (unsigned long long)s.blocks, cfg.clusters, steps, reps);
  printf("  %-8s %12s %12s %12s %s\n", "mode", "effective_us", "wall_us", "orch_us",
         "per step, mean of the steps");
  for (int r = 0; r < reps; r++) {
    double eff = 0, wall = 0, orch = 0;
    pa_clear_output(st);
    for (int i = 0; i < steps; i++) {
      double t0 = now_us();
      if ((rc = pto_chip_run(chip, pa_step, st, &s, &err))) die("dynamic step", rc, &err);
      wall += now_us() - t0;
      eff += s.effective_us;
      orch += s.orch_us;
    }
    if (!pa_verify(st)) die("dynamic output check", PTO_EINTERNAL, NULL);
    printf("  %-8s %12.1f %12.1f %12.1f\n", "dynamic", eff / steps, wall / steps, orch / steps);
    pto_graph *g;
    pa_clear_output(st);
    if ((rc = pto_graph_capture(chip, pa_step, st, &g, NULL, &err))) die("capture", rc, &err);
    if (!pa_verify(st)) die("capture output check", PTO_EINTERNAL, NULL);
    eff = wall = orch = 0;
    pa_clear_output(st);
    for (int i = 0; i < steps; i++) {
      double t0 = now_us();
      if ((rc = pto_graph_launch(chip, g, NULL, &s, &err))) die("launch", rc, &err);
      wall += now_us() - t0;
      eff += s.effective_us;
      orch += s.orch_us;
    }
    if (!pa_verify(st)) die("replay output check", PTO_EINTERNAL, NULL);
    pto_graph_info gi;
    pto_graph_get_info(g, &gi);
    printf("  %-8s %12.1f %12.1f %12.1f   (%lld of %lld launches warm)\n", "replay", eff / steps,
           wall / steps, orch / steps, (long long)gi.warm_launches, (long long)gi.launches);
    pto_graph_destroy(g);
  }
  pa_flagship_delete(st);
  pto_chip_destroy(chip);
}

/* ---- empty-kernel graphs (bench/pto's W1, W2, W4) ---- */

#define SLOT_WORDS 8 /* a 64-byte slot, as bench/common's */
#define FAN        64

static int k_empty_id, k_count_id;
static int k_empty(const pto_kctx *c) {
  (void)c;
  return 0;
}
/* counts its runs in the first word of its last tensor (the checks) */
static int k_count(const pto_kctx *c) {
  (*(uint64_t *)pto_tensor_at_linear(&c->tensors[c->ntensors - 1], 0))++;
  return 0;
}

typedef struct job {
  int n;
  uint64_t *slots;
} job;

static void slot(pto_tensor *t, uint64_t *p) {
  int64_t shape[1] = {SLOT_WORDS};
  pto_tensor_init(t, p, SLOT_WORDS * sizeof(uint64_t), PTO_I64, 1, shape);
}

static void w1_chain(pto_orch *o, void *arg) {
  job *j = arg;
  pto_tensor t;
  slot(&t, j->slots);
  for (int i = 0; i < j->n; i++)
    if (pto_submit_v(o, k_count_id, PTO_INOUT(&t))) return;
}

static void w2_indep(pto_orch *o, void *arg) {
  job *j = arg;
  for (int i = 0; i < j->n; i++) {
    pto_tensor t;
    slot(&t, j->slots + (size_t)i * SLOT_WORDS);
    if (pto_submit_v(o, k_count_id, PTO_OUT_EXISTING(&t))) return;
  }
}

/* n / 66 rounds of producer -> FAN consumers (rows of one buffer) ->
 * reducer reading the whole buffer, as bench/pto's orch_fanout */
static void w4_fanout(pto_orch *o, void *arg) {
  job *j = arg;
  pto_tensor r, a, b, bj[FAN];
  slot(&r, j->slots);
  slot(&a, j->slots + SLOT_WORDS);
  int64_t shape[2] = {FAN, SLOT_WORDS};
  pto_tensor_init(&b, j->slots + 2 * SLOT_WORDS, FAN * SLOT_WORDS * sizeof(uint64_t), PTO_I64, 2,
                  shape);
  for (int q = 0; q < FAN; q++) {
    int64_t start[2] = {q, 0}, sh[2] = {1, SLOT_WORDS};
    pto_tensor_slice(&b, start, sh, &bj[q]);
  }
  for (int k = 0; k < j->n / (FAN + 2); k++) {
    if (pto_submit_v(o, k_empty_id, PTO_IN(&r), PTO_OUT_EXISTING(&a))) return;
    for (int q = 0; q < FAN; q++)
      if (pto_submit_v(o, k_count_id, PTO_IN(&a), PTO_INOUT(&bj[q]))) return;
    if (pto_submit_v(o, k_empty_id, PTO_IN(&b), PTO_OUT_EXISTING(&r))) return;
  }
}

/* What a run of w leaves counted: W1 n in slot 0, W2 1 in each slot, W4
 * n/66 in each consumer row. */
static int check(int w, const job *j) {
  if (w == 0) return j->slots[0] == (uint64_t)j->n;
  for (int i = 0; w == 1 && i < j->n; i++)
    if (j->slots[(size_t)i * SLOT_WORDS] != 1) return 0;
  for (int q = 0; w == 2 && q < FAN; q++)
    if (j->slots[(size_t)(2 + q) * SLOT_WORDS] != (uint64_t)(j->n / (FAN + 2))) return 0;
  return 1;
}

static void bench_empty(int n, int reps, int workers) {
  /* bench/pto's chip for `workers` kernel cores (bench/pto/bench_pto.c) */
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = workers % 2 ? 1 : 2;
  cfg.clusters = workers % 2 ? workers : workers / 2;
  cfg.schedulers = 0;
  if ((uint32_t)n + 1 > cfg.task_slots) cfg.task_slots = (uint32_t)n + 1;
  if ((uint32_t)n * 16 > cfg.dep_entries) cfg.dep_entries = (uint32_t)n * 16; /* W4: ~13 a task */
  pto_chip *chip;
  pto_error_info err;
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc) die("pto_chip_create", rc, &err);
  pto_kernel_register_aiv(chip, "empty", k_empty, &k_empty_id);
  pto_kernel_register_aiv(chip, "count", k_count, &k_count_id);
  job j = {n, calloc((size_t)n * SLOT_WORDS, sizeof(uint64_t))};
  static const pto_orch_fn fns[3] = {w1_chain, w2_indep, w4_fanout};
  static const char *names[3] = {"W1 chain", "W2 independent", "W4 fan-out/in"};
  printf("empty kernels, %d tasks, %d clusters x %d AIV: wall ns per task, median of %d "
         "(min..max)\n",
         n, cfg.clusters, cfg.aiv_per_cluster, reps);
  printf("  %-16s %22s %22s %8s\n", "graph", "dynamic", "replay", "ratio");
  for (int w = 0; w < 3; w++) {
    double dyn[64], rep[64];
    int tasks = w == 2 ? n / (FAN + 2) * (FAN + 2) : n;
    pto_run_stats s;
    for (int i = 0; i < 2; i++) /* warm-up */
      if ((rc = pto_chip_run(chip, fns[w], &j, &s, &err))) die(names[w], rc, &err);
    for (int r = 0; r < reps; r++) {
      memset(j.slots, 0, (size_t)n * SLOT_WORDS * sizeof(uint64_t));
      double t0 = now_us();
      if ((rc = pto_chip_run(chip, fns[w], &j, &s, &err))) die(names[w], rc, &err);
      dyn[r] = (now_us() - t0) * 1e3 / tasks;
      if (!check(w, &j)) die("dynamic check", PTO_EINTERNAL, NULL);
    }
    pto_graph *g;
    if ((rc = pto_graph_capture(chip, fns[w], &j, &g, NULL, &err))) die("capture", rc, &err);
    for (int i = 0; i < 2; i++) /* warm-up */
      if ((rc = pto_graph_launch(chip, g, NULL, &s, &err))) die("launch", rc, &err);
    for (int r = 0; r < reps; r++) {
      memset(j.slots, 0, (size_t)n * SLOT_WORDS * sizeof(uint64_t));
      double t0 = now_us();
      if ((rc = pto_graph_launch(chip, g, NULL, &s, &err))) die("launch", rc, &err);
      rep[r] = (now_us() - t0) * 1e3 / tasks;
      if (!check(w, &j)) die("replay check", PTO_EINTERNAL, NULL);
    }
    pto_graph_destroy(g);
    char a[64], b[64];
    double md = median(dyn, reps), mr = median(rep, reps);
    snprintf(a, sizeof a, "%.0f (%.0f..%.0f)", md, dyn[0], dyn[reps - 1]);
    snprintf(b, sizeof b, "%.0f (%.0f..%.0f)", mr, rep[0], rep[reps - 1]);
    printf("  %-16s %22s %22s %8.2f\n", names[w], a, b, mr / md);
  }
  free(j.slots);
  pto_chip_destroy(chip);
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 100;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  int n = argc > 3 ? atoi(argv[3]) : 10000;
  int workers = argc > 4 ? atoi(argv[4]) : 2;
  if (steps < 1 || reps < 1 || reps > 64 || n < FAN + 2 || workers < 1) {
    fprintf(stderr, "usage: graph_bench [steps >= 1] [reps 1..64] [N >= 66] [workers >= 1]\n");
    return 2;
  }
  bench_pa(steps, reps);
  bench_empty(n, reps, workers);
  return 0;
}
