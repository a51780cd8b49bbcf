/* idle_cores_bench.c — what a task costs as the chip grows around it
 * (public API only): ns per task of a chain of dependent empty tasks (one
 * core busy at a time) and of as many independent empty tasks (every core
 * may take one), on chips of 8 to 4096 clusters (1 AIC + 2 AIV each, pto's
 * default schedulers), all in one run; and the time and resident memory
 * that making a chip and its first run cost, per core.
 *
 * Each shape: chip create plus a first run of one task (timed, with the
 * process's RSS before and after), then ROUNDS rounds of each graph, the
 * first a warm-up; it prints the median, minimum and maximum of the timed
 * rounds, in wall ns per task (pto_chip_run's wall time / tasks), and the
 * median's ratio to the smallest chip's. Every round checks its result.
 * Built with the library (bench/pto_programs.cmake): build/bench/idle_cores_bench.
 * Arguments: [tasks per round (default 20000)] [rounds (default 6)]
 * [clusters ... (default 8 64 256 1024 4096)]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pto/pto.h"

#define MAX_ROUNDS  32
#define MAX_SHAPES  16
#define INDEP_SLOTS 4096 /* distinct outputs of the independent graph, reused */

static int64_t counter;
static int64_t slots[INDEP_SLOTS];
static int k_inc_id, k_put_id;

static int k_inc(const pto_kctx *c) {
  (*(int64_t *)c->tensors[0].buf)++;
  return 0;
}
static int k_put(const pto_kctx *c) {
  *(int64_t *)c->tensors[0].buf = (int64_t)c->scalars[0];
  return 0;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kib;
}

typedef struct job {
  int tasks;
  bool chain;
} job;

static void orchestrate(pto_orch *o, void *arg) {
  const job *j = arg;
  int64_t one = 1;
  for (int i = 0; i < j->tasks; i++) {
    pto_tensor t;
    pto_args a;
    pto_args_init(&a);
    if (j->chain) {
      pto_tensor_init(&t, &counter, sizeof counter, PTO_I64, 1, &one);
      pto_args_inout(&a, &t);
      pto_submit(o, k_inc_id, &a, NULL, NULL);
    } else {
      pto_tensor_init(&t, &slots[i % INDEP_SLOTS], sizeof slots[0], PTO_I64, 1, &one);
      pto_args_output_existing(&a, &t);
      pto_args_scalar(&a, (uint64_t)i);
      pto_submit(o, k_put_id, &a, NULL, NULL);
    }
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One round: ns per task; a failed run is printed and gives -1 (a wrong
 * result exits). */
static double round_ns(pto_chip *chip, const job *j) {
  counter = 0;
  double t0 = now_ns();
  pto_error_info err;
  int rc = pto_chip_run(chip, orchestrate, (void *)j, NULL, &err);
  double ns = (now_ns() - t0) / j->tasks;
  if (rc != PTO_OK) {
    printf(" failed: %s: %.160s |", pto_status_name(rc), err.details);
    return -1;
  }
  if (j->chain && counter != j->tasks) {
    fprintf(stderr, "chain: counter %lld, expected %d\n", (long long)counter, j->tasks);
    exit(1);
  }
  if (!j->chain && slots[(j->tasks - 1) % INDEP_SLOTS] != j->tasks - 1) {
    fprintf(stderr, "independent: last slot %lld, expected %d\n",
            (long long)slots[(j->tasks - 1) % INDEP_SLOTS], j->tasks - 1);
    exit(1);
  }
  return ns;
}

int main(int argc, char **argv) {
  int tasks = argc > 1 ? atoi(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 6;
  int clusters[MAX_SHAPES] = {8, 64, 256, 1024, 4096}, nshapes = 5;
  if (argc > 3) {
    nshapes = 0;
    for (int i = 3; i < argc && nshapes < MAX_SHAPES; i++)
      clusters[nshapes++] = atoi(argv[i]);
  }
  if (tasks < 1 || rounds < 2 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: %s [tasks >= 1] [rounds 2..%d] [clusters ...]\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  printf("%d tasks per round, %d rounds (the first a warm-up); wall ns per task: median "
         "[min, max], and the median's ratio to %d clusters\n",
         tasks, rounds, clusters[0]);
  printf("%8s %6s | %10s %10s %8s | %21s %6s | %21s %6s\n", "clusters", "cores", "create+1st",
         "RSS", "per core", "chain ns/task", "ratio", "independent ns/task", "ratio");
  double base[2] = {0, 0};
  for (int s = 0; s < nshapes; s++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = clusters[s];
    long rss0 = rss_kib();
    double t0 = now_ns();
    pto_chip *chip;
    pto_error_info err;
    if (pto_chip_create_ex(&cfg, &chip, &err) != PTO_OK) {
      fprintf(stderr, "%d clusters: %s\n", clusters[s], err.details);
      return 1;
    }
    pto_kernel_register_aiv(chip, "inc", k_inc, &k_inc_id);
    pto_kernel_register_aiv(chip, "put", k_put, &k_put_id);
    job first = {1, true};
    round_ns(chip, &first);
    double create_ms = (now_ns() - t0) / 1e6;
    long rss = rss_kib() - rss0;
    int cores = clusters[s] * 3;
    printf("%8d %6d | %7.1f ms %6ld KiB %4.1f KiB |", clusters[s], cores, create_ms, rss,
           (double)rss / cores);
    for (int g = 0; g < 2; g++) {
      job j = {tasks, g == 0};
      double ns[MAX_ROUNDS];
      int r = 0;
      while (r < rounds && (ns[r] = round_ns(chip, &j)) >= 0)
        r++;
      if (r < rounds) {
        printf("%s", g == 0 ? "" : "\n");
        continue;
      }
      qsort(ns + 1, (size_t)(rounds - 1), sizeof ns[0], cmp);
      double med = ns[1 + (rounds - 1) / 2];
      if (s == 0) base[g] = med;
      printf(" %6.0f [%5.0f, %6.0f] %5.2fx%s", med, ns[1], ns[rounds - 1], med / base[g],
             g == 0 ? " |" : "\n");
    }
    fflush(stdout);
    pto_chip_destroy(chip);
  }
  return 0;
}
