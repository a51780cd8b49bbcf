/* bench/omp/bench_omp.c — the workloads as OpenMP tasks with `depend`
 * clauses. Compiled twice: with gcc (libgomp, system "omp-gcc") and with
 * clang (LLVM libomp, system "omp-clang"); BENCH_SYSTEM names the build.
 *
 * One thread creates the tasks inside `parallel` + `single` (the usual
 * shape); the team has `workers` threads, the creating one included.
 *
 * OpenMP has no reusable task graph here: the `taskgraph` construct of
 * OpenMP 6.0 is in neither gcc 12's libgomp nor clang 14's libomp. Its
 * prebuilt class therefore re-runs the same task-generating region, which
 * creates the tasks and resolves their `depend` clauses again each time. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#ifndef BENCH_SYSTEM
#define BENCH_SYSTEM "omp"
#endif

static int g_workers;
static char g_desc[128];

static int omp_init(int workers) {
  g_workers = workers;
  omp_set_dynamic(0);
  /* Start the thread pool now, so no measurement pays for it. */
#pragma omp parallel num_threads(g_workers)
  { (void)0; }
  return 0;
}

static void omp_fini(void) {}

static const char *omp_describe(void) {
  snprintf(g_desc, sizeof(g_desc), "%d threads (team incl. the task-creating thread), %s",
           g_workers,
#if defined(__clang__)
           "clang/libomp"
#else
           "gcc/libgomp"
#endif
  );
  return g_desc;
}

static int64_t omp_chain(int n, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(g_workers)
#pragma omp single
  {
    for (int i = 0; i < n; i++) {
#pragma omp task depend(inout : slots[0])
      bench_kernel_empty(slots);
    }
  }
  return bench_now_ns() - t0;
}

static int64_t omp_indep(int n, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(g_workers)
#pragma omp single
  {
    for (int i = 0; i < n; i++) {
      uint64_t *s = slots + (size_t)i * BENCH_SLOT_WORDS;
#pragma omp task depend(out : s[0])
      bench_kernel_empty(s);
    }
  }
  return bench_now_ns() - t0;
}

static int64_t omp_fanout(int rounds, uint64_t *slots) {
  uint64_t *r = slots, *a = slots + BENCH_SLOT_WORDS, *b = slots + 2 * BENCH_SLOT_WORDS;
  int64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(g_workers)
#pragma omp single
  {
    for (int k = 0; k < rounds; k++) {
#pragma omp task depend(in : r[0]) depend(out : a[0])
      bench_kernel_produce(r, a);
      for (int j = 0; j < BENCH_FAN; j++) {
        uint64_t *bj = b + (size_t)j * BENCH_SLOT_WORDS;
#pragma omp task depend(in : a[0]) depend(inout : bj[0])
        bench_kernel_consume(a, bj);
      }
#pragma omp task depend(iterator(j = 0                                                             \
                                 : BENCH_FAN),                                                     \
                        in                                                                         \
                        : b[j * BENCH_SLOT_WORDS]) depend(out                                      \
                                                          : r[0])
      bench_kernel_reduce(b, r);
    }
  }
  return bench_now_ns() - t0;
}

static int64_t omp_graph(const bench_graph *g, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(g_workers)
#pragma omp single
  {
    for (int i = 0; i < g->ntasks; i++) {
      uint64_t *out = slots + (size_t)i * BENCH_SLOT_WORDS;
      const int *dep = g->dep + g->dep_start[i];
      int nd = g->dep_start[i + 1] - g->dep_start[i];
      (void)out; /* gcc does not see uses in depend clauses */
      (void)nd;
#pragma omp task depend(iterator(j = 0                                                             \
                                 : nd),                                                            \
                        in                                                                         \
                        : slots[(size_t)dep[j] * BENCH_SLOT_WORDS]) depend(out                     \
                                                                           : out[0])
      bench_graph_task(g, i, slots);
    }
  }
  return bench_now_ns() - t0;
}

/* ---- prebuilt class: the same region again ---- */

static void *pre_build(const bench_work *w) {
  bench_work *copy = malloc(sizeof(*copy));
  if (copy) *copy = *w;
  return copy;
}

static int pre_exec(void *graph) {
  const bench_work *w = graph;
  int64_t ns;
  switch (w->kind) {
  case BENCH_CHAIN: ns = omp_chain(w->n, w->slots); break;
  case BENCH_INDEP: ns = omp_indep(w->n, w->slots); break;
  case BENCH_FANOUT: ns = omp_fanout(w->n, w->slots); break;
  default: ns = omp_graph(w->g, w->slots); break;
  }
  return ns < 0;
}

static const bench_prebuilt omp_prebuilt = {
    .how = "no reusable graph in OpenMP: each execution re-runs the same task-generating region",
    .build = pre_build,
    .exec = pre_exec,
    .destroy = free,
};

int main(int argc, char **argv) {
  static const bench_system sys = {
      .name = BENCH_SYSTEM,
      .init = omp_init,
      .fini = omp_fini,
      .run_chain = omp_chain,
      .run_indep = omp_indep,
      .run_fanout = omp_fanout,
      .run_graph = omp_graph,
      .describe = omp_describe,
      .prebuilt = &omp_prebuilt,
  };
  return bench_main(argc, argv, &sys);
}
