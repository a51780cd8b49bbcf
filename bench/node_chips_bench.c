/* node_chips_bench.c — what one more chip in a node costs a task that does
 * not involve it (public API only): a chain of node tasks, each a one-task
 * orchestration on chip 0 (one empty kernel block incrementing a host
 * counter), on nodes of 1 to 16 chips (each 1 cluster, one process per
 * chip), the other chips idle; and the time node create takes per chip.
 *
 * Each node: create (timed), then ROUNDS runs of TASKS node tasks, the
 * first a warm-up; it prints the median, minimum and maximum of the timed
 * runs in wall µs per node task, and the median's ratio to the 1-chip
 * node. Every run checks the counter. Built with the library
 * (bench/pto_programs.cmake): build/bench/node_chips_bench. Arguments: [node tasks per run
 * (default 2000)] [runs (default 5)] [chips ... (default 1 2 4 8 16)]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pto/node.h"
#include "pto/pto.h"

#define MAX_ROUNDS 32
#define MAX_NODES  16

static int k_inc(const pto_kctx *c) {
  (*(int64_t *)c->tensors[0].buf)++;
  return 0;
}

static int chip_init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  int id = -1;
  return pto_kernel_register_aiv(chip, "inc", k_inc, &id) || id != 0 ? PTO_EFATAL : 0;
}

/* In chip 0's process: one block of the counter's kernel. */
static void chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &t->args->tensors[0]);
  pto_submit(o, 0, &a, NULL, NULL);
}

typedef struct job {
  pto_tensor counter;
  int tasks;
} job;

/* A chain: every node task reads and writes the counter. */
static void node_orch(pto_node_orch *no, void *arg) {
  job *j = arg;
  for (int i = 0; i < j->tasks; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &j->counter);
    if (pto_node_submit(no, 0, chip_orch, &a, NULL)) return;
  }
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int tasks = argc > 1 ? atoi(argv[1]) : 2000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  int chips[MAX_NODES] = {1, 2, 4, 8, 16}, nnodes = 5;
  if (argc > 3) {
    nnodes = 0;
    for (int i = 3; i < argc && nnodes < MAX_NODES; i++)
      chips[nnodes++] = atoi(argv[i]);
  }
  if (tasks < 1 || rounds < 2 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: %s [tasks >= 1] [runs 2..%d] [chips ...]\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  printf("%d node tasks per run (a chain on chip 0), %d runs (the first a warm-up); wall us per "
         "node task: median [min, max], and the median's ratio to the first node\n",
         tasks, rounds);
  printf("chips | create (per chip) | us/node task  ratio\n");
  double base = 0;
  for (int n = 0; n < nnodes; n++) {
    pto_node_config cfg;
    pto_node_config_init(&cfg);
    cfg.nchips = chips[n];
    cfg.chip.clusters = 1;
    cfg.chip_init = chip_init;
    cfg.host_bytes = 1u << 20;
    cfg.window_space = 16u << 20;
    cfg.quiet = true;
    pto_node *node = NULL;
    pto_error_info err;
    double t0 = now_ns();
    int rc = pto_node_create(&cfg, &node, &err);
    double create_ms = (now_ns() - t0) / 1e6;
    if (rc) {
      printf("%5d | create failed: %s: %s\n", chips[n], pto_status_name(rc), err.details);
      return 1;
    }
    job j = {.tasks = tasks};
    int64_t one = 1;
    if (pto_node_host_tensor(node, PTO_I64, 1, &one, &j.counter)) {
      printf("%5d | host tensor failed\n", chips[n]);
      return 1;
    }
    double us[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
      *(int64_t *)j.counter.buf = 0;
      t0 = now_ns();
      rc = pto_node_run(node, node_orch, &j, &err);
      us[r] = (now_ns() - t0) / 1e3 / tasks;
      int64_t got = *(int64_t *)j.counter.buf;
      if (rc || got != tasks) {
        printf("%5d | run %d: %s, counter %lld (expected %d): %s\n", chips[n], r,
               pto_status_name(rc), (long long)got, tasks, rc ? err.details : "");
        return 1;
      }
    }
    qsort(us + 1, (size_t)rounds - 1, sizeof us[0], cmp_double);
    double med = us[1 + (rounds - 1) / 2];
    if (n == 0) base = med;
    printf("%5d | %8.1f ms (%6.1f) | %7.1f [%7.1f, %7.1f]  %.2fx\n", chips[n], create_ms,
           create_ms / chips[n], med, us[1], us[rounds - 1], med / base);
    pto_node_destroy(node);
  }
  return 0;
}
