/* bench/common/bench.c — the harness every benchmark program shares: the
 * command line, the Task Bench graphs, the calibrated kernel, the result
 * checks and the RAW output lines. One object file, compiled once, linked
 * into every program (including the clang-built OpenMP one), so every
 * system runs exactly the same kernel machine code. */
#define _GNU_SOURCE
#include "bench.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MIX_K 0x9E3779B97F4A7C15ull

int64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t *bench_slots_alloc(int n) {
  size_t bytes = (size_t)(n > 0 ? n : 1) * BENCH_SLOT_BYTES;
  void *p = NULL;
  if (posix_memalign(&p, BENCH_SLOT_BYTES, bytes) != 0) return NULL;
  memset(p, 0, bytes);
  return (uint64_t *)p;
}

/* ---- kernels ---- */

__attribute__((noinline)) void bench_kernel_empty(uint64_t *slot) { slot[0]++; }

__attribute__((noinline)) void bench_kernel_produce(const uint64_t *r, uint64_t *a) {
  a[0] = r[0] + 1;
}

__attribute__((noinline)) void bench_kernel_consume(const uint64_t *a, uint64_t *b) {
  b[0] += a[0];
}

__attribute__((noinline)) void bench_kernel_reduce(const uint64_t *b, uint64_t *r) {
  uint64_t s = 0;
  for (int j = 0; j < BENCH_FAN; j++)
    s += b[j * BENCH_SLOT_WORDS];
  r[0] = s;
}

/* A dependent multiply-add chain: each iteration needs the previous one,
 * so it runs at the multiplier's latency whatever the compiler does, and
 * iterations per microsecond are a property of the core alone. */
__attribute__((noinline)) static uint64_t spin(uint64_t iters, uint64_t x) {
  for (uint64_t k = 0; k < iters; k++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

static uint64_t task_value(int i, uint64_t input_sum) {
  return input_sum * MIX_K + (uint64_t)i + 1;
}

void bench_kernel_task_raw(uint64_t iters, int i, const uint64_t *const *inputs, int ninputs,
                           uint64_t *output) {
  uint64_t s = 0;
  for (int j = 0; j < ninputs; j++)
    s += inputs[j][0];
  uint64_t v = task_value(i, s);
  /* The chain's result feeds the output (it is 0 with probability 2^-64),
   * so the loop cannot be dropped. */
  uint64_t r = spin(iters, v | 1);
  output[0] = v + (r == 0);
}

void bench_kernel_task(const bench_graph *g, int i, const uint64_t *const *inputs, int ninputs,
                       uint64_t *output) {
  bench_kernel_task_raw(g->iters, i, inputs, ninputs, output);
}

void bench_graph_task(const bench_graph *g, int i, uint64_t *slots) {
  const uint64_t *in[256];
  const uint64_t **inp = in;
  int n = g->dep_start[i + 1] - g->dep_start[i];
  if (n > 256) inp = malloc(sizeof(*inp) * (size_t)n);
  for (int j = 0; j < n; j++)
    inp[j] = slots + (size_t)g->dep[g->dep_start[i] + j] * BENCH_SLOT_WORDS;
  bench_kernel_task(g, i, inp, n, slots + (size_t)i * BENCH_SLOT_WORDS);
  if (inp != in) free(inp);
}

/* Iterations per microsecond of spin() on one otherwise idle core: the
 * fastest of several timed runs (the least disturbed one). */
static double calibrate(void) {
  const uint64_t iters = 1u << 22;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int k = 0; k < 9; k++) {
    int64_t t0 = bench_now_ns();
    sink += spin(iters, (uint64_t)k + 1);
    int64_t t1 = bench_now_ns();
    double ipus = (double)iters * 1000.0 / (double)(t1 - t0);
    if (ipus > best) best = ipus;
  }
  (void)sink;
  return best;
}

/* ---- checks ---- */

int bench_check_chain(int n, const uint64_t *slots) { return slots[0] == (uint64_t)n ? 0 : -1; }

int bench_check_indep(int n, const uint64_t *slots) {
  for (int i = 0; i < n; i++)
    if (slots[(size_t)i * BENCH_SLOT_WORDS] != 1) return -1;
  return 0;
}

int bench_check_fanout(int rounds, const uint64_t *slots) {
  uint64_t r = 0, b = 0;
  for (int k = 0; k < rounds; k++) {
    uint64_t a = r + 1;
    b += a;
    r = b * BENCH_FAN;
  }
  if (slots[0] != r) return -1;
  for (int j = 0; j < BENCH_FAN; j++)
    if (slots[(size_t)(2 + j) * BENCH_SLOT_WORDS] != b) return -1;
  return 0;
}

int bench_check_graph(const bench_graph *g, const uint64_t *slots) {
  uint64_t *v = malloc(sizeof(*v) * (size_t)g->ntasks);
  if (!v) return -1;
  int bad = 0;
  for (int i = 0; i < g->ntasks && !bad; i++) {
    uint64_t s = 0;
    for (int j = g->dep_start[i]; j < g->dep_start[i + 1]; j++)
      s += v[g->dep[j]];
    v[i] = task_value(i, s);
    if (slots[(size_t)i * BENCH_SLOT_WORDS] != v[i]) bad = 1;
  }
  free(v);
  return bad ? -1 : 0;
}

/* ---- Task Bench graphs (docs/benchmarks.md gives the definitions) ---- */

static const char *const pattern_names[BENCH_PATTERN_COUNT] = {"stencil_1d", "tree", "fft",
                                                               "nearest", "all_to_all"};

const char *bench_pattern_name(bench_pattern p) {
  return (unsigned)p < BENCH_PATTERN_COUNT ? pattern_names[p] : "?";
}

static int width_at(const bench_graph *g, int t) {
  if (g->pattern == BENCH_TREE && t < 30 && (1 << t) < g->width) return 1 << t;
  return g->width;
}

static int ceil_log2(int w) {
  int s = 0;
  while ((1 << s) < w)
    s++;
  return s;
}

/* Intervals of points of step t-1 that task (t, p) reads; returns count. */
static int intervals(const bench_graph *g, int t, int p, int *lo, int *hi) {
  int w = g->width;
  if (t == 0) return 0;
  switch (g->pattern) {
  case BENCH_STENCIL_1D:
    lo[0] = p > 0 ? p - 1 : 0;
    hi[0] = p + 1 < w ? p + 1 : w - 1;
    return 1;
  case BENCH_TREE: lo[0] = hi[0] = p / 2; return 1;
  case BENCH_FFT: {
    int sets = ceil_log2(w);
    if (sets == 0) {
      lo[0] = hi[0] = p;
      return 1;
    }
    int d = 1 << ((t + sets - 1) % sets);
    int n = 0;
    if (p - d >= 0) lo[n] = hi[n] = p - d, n++;
    lo[n] = hi[n] = p, n++;
    if (p + d < w) lo[n] = hi[n] = p + d, n++;
    return n;
  }
  case BENCH_NEAREST:
    lo[0] = p - g->radix / 2 > 0 ? p - g->radix / 2 : 0;
    hi[0] = p + (g->radix - 1) / 2 < w - 1 ? p + (g->radix - 1) / 2 : w - 1;
    return 1;
  case BENCH_ALL_TO_ALL:
    lo[0] = 0;
    hi[0] = w - 1;
    return 1;
  default: return 0;
  }
}

static void graph_free(bench_graph *g) {
  free(g->step);
  free(g->point);
  free(g->row_start);
  free(g->dep_start);
  free(g->dep);
  free(g->ivl_start);
  free(g->ivl_lo);
  free(g->ivl_hi);
  memset(g, 0, sizeof(*g));
}

static int graph_build(bench_graph *g, bench_pattern pat, int width, int steps, int radix,
                       double grain_us, double ipus) {
  memset(g, 0, sizeof(*g));
  g->pattern = pat;
  g->width = width;
  g->steps = steps;
  g->radix = radix;
  g->grain_us = grain_us;
  g->iters = (uint64_t)llround(grain_us * ipus);
  int n = 0;
  for (int t = 0; t < steps; t++)
    n += width_at(g, t);
  g->ntasks = n;
  /* Every task reads at most `width` points (all_to_all), in at most 3
   * intervals (fft). */
  size_t maxdeps = (size_t)n * (size_t)width;
  g->step = malloc(sizeof(int) * (size_t)n);
  g->point = malloc(sizeof(int) * (size_t)n);
  g->row_start = malloc(sizeof(int) * (size_t)(steps + 1));
  g->dep_start = malloc(sizeof(int) * (size_t)(n + 1));
  g->dep = malloc(sizeof(int) * (maxdeps ? maxdeps : 1));
  g->ivl_start = malloc(sizeof(int) * (size_t)(n + 1));
  g->ivl_lo = malloc(sizeof(int) * (size_t)n * 3);
  g->ivl_hi = malloc(sizeof(int) * (size_t)n * 3);
  if (!g->step || !g->point || !g->row_start || !g->dep_start || !g->dep || !g->ivl_start ||
      !g->ivl_lo || !g->ivl_hi) {
    graph_free(g);
    return -1;
  }
  int i = 0, nd = 0, ni = 0;
  for (int t = 0; t < steps; t++) {
    g->row_start[t] = i;
    for (int p = 0; p < width_at(g, t); p++, i++) {
      g->step[i] = t;
      g->point[i] = p;
      g->dep_start[i] = nd;
      g->ivl_start[i] = ni;
      int lo[3], hi[3];
      int k = intervals(g, t, p, lo, hi);
      int prev_w = t > 0 ? width_at(g, t - 1) : 0;
      for (int j = 0; j < k; j++) {
        if (hi[j] >= prev_w) hi[j] = prev_w - 1; /* Task Bench clips to step t-1's width */
        if (lo[j] > hi[j]) continue;
        g->ivl_lo[ni] = lo[j];
        g->ivl_hi[ni] = hi[j];
        ni++;
        for (int q = lo[j]; q <= hi[j]; q++)
          g->dep[nd++] = g->row_start[t - 1] + q;
      }
      if (nd - g->dep_start[i] > g->max_deps) g->max_deps = nd - g->dep_start[i];
    }
  }
  g->row_start[steps] = i;
  g->dep_start[n] = nd;
  g->ivl_start[n] = ni;
  return 0;
}

/* ---- command line and measurement ---- */

typedef struct opts {
  const char *workload;
  int workers;
  int n;            /* W1/W2 tasks, W4 rounds */
  int reps;         /* measurements per point in this process */
  double ipus;      /* kernel iterations per microsecond (0: calibrate here) */
  double target_us; /* ideal parallel time of one W3/W5 measurement */
  int max_tasks;    /* cap on tasks of one W3/W5 measurement */
  int min_steps;
  int width; /* 0: 2 x workers */
  int radix;
  double stop_eff; /* stop a sweep once efficiency falls below this */
  double grains[64];
  int ngrains;
  bench_class cls;
  int execs; /* prebuilt: timed executions of one build per measurement */
} opts;

static const char *const class_names[BENCH_CLASS_COUNT] = {"dynamic", "prebuilt"};

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s WORKLOAD [options]\n"
          "  WORKLOAD: chain | indep | fanout | stencil_1d | tree | fft | nearest | all_to_all\n"
          "            | calibrate | classes (the classes this system runs)\n"
          "  -w N    worker CPUs (default: CPUs this process may use)\n"
          "  -n N    tasks (chain, indep) or rounds (fanout)   [20000 / 300]\n"
          "  -r N    measurements per point                    [1]\n"
          "  -g LIST kernel grains in us, descending, comma separated\n"
          "  -k X    kernel iterations per us (default: calibrate now)\n"
          "  -t US   ideal parallel time of one sweep point    [30000]\n"
          "  -m N    most tasks in one sweep point             [4000]\n"
          "  -W N    graph width (default 2 x workers)\n"
          "  -R N    radix for nearest                         [3]\n"
          "  -s X    stop the sweep below this efficiency      [0.2]\n"
          "  -c C    class: dynamic | prebuilt                 [dynamic]\n"
          "  -e N    prebuilt: timed executions per build      [10]\n",
          prog);
}

static int parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  cpu_set_t set;
  o->workers = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  o->reps = 1;
  o->target_us = 30000;
  o->max_tasks = 4000;
  o->min_steps = 16;
  o->radix = 3;
  o->stop_eff = 0.2;
  o->cls = BENCH_DYNAMIC;
  o->execs = 10;
  static const double dflt[] = {1000, 500, 200, 100, 50, 20, 10, 5, 2, 1};
  o->ngrains = (int)(sizeof(dflt) / sizeof(dflt[0]));
  memcpy(o->grains, dflt, sizeof(dflt));
  if (argc < 2) return -1;
  o->workload = argv[1];
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-' || a[1] == 0 || a[2] != 0 || !v) return -1;
    i++;
    switch (a[1]) {
    case 'w': o->workers = atoi(v); break;
    case 'n': o->n = atoi(v); break;
    case 'r': o->reps = atoi(v); break;
    case 'k': o->ipus = atof(v); break;
    case 't': o->target_us = atof(v); break;
    case 'm': o->max_tasks = atoi(v); break;
    case 'W': o->width = atoi(v); break;
    case 'R': o->radix = atoi(v); break;
    case 's': o->stop_eff = atof(v); break;
    case 'e': o->execs = atoi(v); break;
    case 'c': {
      int c = 0;
      while (c < BENCH_CLASS_COUNT && strcmp(v, class_names[c]) != 0)
        c++;
      if (c == BENCH_CLASS_COUNT) {
        fprintf(stderr, "-c %s: unknown class (dynamic or prebuilt)\n", v);
        return -1;
      }
      o->cls = (bench_class)c;
      break;
    }
    case 'g': {
      o->ngrains = 0;
      char *dup = strdup(v), *save = NULL;
      for (char *tok = strtok_r(dup, ",", &save); tok && o->ngrains < 64;
           tok = strtok_r(NULL, ",", &save))
        o->grains[o->ngrains++] = atof(tok);
      free(dup);
      break;
    }
    default: return -1;
    }
  }
  if (o->workers < 1 || o->reps < 1 || o->max_tasks < 1 || o->execs < 1) return -1;
  if (o->width <= 0) o->width = 2 * o->workers;
  if (o->radix < 1) o->radix = 1;
  return 0;
}

static void raw(const bench_system *s, const opts *o, const char *workload, const char *params,
                long tasks, int64_t wall_ns, const char *metric, double value) {
  printf("RAW,%s,%s,%s,%ld,%lld,%s,%.6g,%s\n", s->name, workload, params, tasks, (long long)wall_ns,
         metric, value, class_names[o->cls]);
  fflush(stdout);
}

/* What a measurement returns when it did not give a time. */
enum { FAILED = -1, WRONG = -2 };

static void fail(const bench_system *s, const char *what, const char *params, int64_t rc) {
  if (rc == WRONG)
    fprintf(stderr, "%s: %s %s: WRONG RESULT (a dependency was not honoured)\n", s->name, what,
            params);
  else
    fprintf(stderr, "%s: %s %s: run failed\n", s->name, what, params);
}

static int slot_count(const bench_work *w) {
  switch (w->kind) {
  case BENCH_INDEP: return w->n;
  case BENCH_GRAPH: return w->g->ntasks;
  default: return 2 + BENCH_FAN; /* W1 uses slot 0, W4 all of them */
  }
}

static int check(const bench_work *w) {
  switch (w->kind) {
  case BENCH_CHAIN: return bench_check_chain(w->n, w->slots);
  case BENCH_INDEP: return bench_check_indep(w->n, w->slots);
  case BENCH_FANOUT: return bench_check_fanout(w->n, w->slots);
  default: return bench_check_graph(w->g, w->slots);
  }
}

static int64_t run_dynamic(const bench_system *s, const bench_work *w) {
  switch (w->kind) {
  case BENCH_CHAIN: return s->run_chain(w->n, w->slots);
  case BENCH_INDEP: return s->run_indep(w->n, w->slots);
  case BENCH_FANOUT: return s->run_fanout(w->n, w->slots);
  default: return s->run_graph(w->g, w->slots);
  }
}

/* Zeroes the slots, runs `w` once and checks the result: the wall ns of
 * the run as the system measured it, FAILED or WRONG. */
static int64_t once_dynamic(const bench_system *s, const bench_work *w) {
  memset(w->slots, 0, (size_t)slot_count(w) * BENCH_SLOT_BYTES);
  int64_t ns = run_dynamic(s, w);
  if (ns < 0) return FAILED;
  return check(w) == 0 ? ns : WRONG;
}

/* Builds `w` once, executes it once unmeasured (a first execution's
 * costs are in neither class's figure), then `execs` times, each timed
 * here around exec() alone and checked: the mean wall ns of one execution,
 * FAILED or WRONG. */
static int64_t once_prebuilt(const bench_system *s, const opts *o, const bench_work *w) {
  const bench_prebuilt *p = s->prebuilt;
  void *graph = p->build(w);
  if (!graph) return FAILED;
  int64_t sum = 0;
  for (int e = -1; e < o->execs && sum >= 0; e++) {
    memset(w->slots, 0, (size_t)slot_count(w) * BENCH_SLOT_BYTES);
    int64_t t0 = bench_now_ns();
    int rc = p->exec(graph);
    int64_t t1 = bench_now_ns();
    if (rc != 0)
      sum = FAILED;
    else if (check(w) != 0)
      sum = WRONG;
    else if (e >= 0)
      sum += t1 - t0;
  }
  p->destroy(graph);
  return sum < 0 ? sum : sum / o->execs;
}

/* One measurement of `w` in the class `o` asks for; negative after saying
 * what failed. */
static int64_t measure(const bench_system *s, const opts *o, const bench_work *w, const char *what,
                       const char *params) {
  int64_t ns = o->cls == BENCH_PREBUILT ? once_prebuilt(s, o, w) : once_dynamic(s, w);
  if (ns < 0) fail(s, what, params, ns);
  return ns;
}

/* W1, W2, W4: one warm-up run of the measured size, then `reps` measured
 * runs. After a smaller warm-up (it was a tenth), the peers that allocate
 * per task paid in their first measured run what pto, whose rings are
 * allocated once, does not: oneTBB's W1 took 150-178 ns per task in it
 * against 106-118 in the runs after it, libgomp's 311-316 against 221-286,
 * while pto's first run was no slower than its later ones. */
static int run_simple(const bench_system *s, const opts *o) {
  bench_kind kind = !strcmp(o->workload, "chain")   ? BENCH_CHAIN
                    : !strcmp(o->workload, "indep") ? BENCH_INDEP
                                                    : BENCH_FANOUT;
  int n = o->n > 0 ? o->n : (kind == BENCH_FANOUT ? 300 : 20000);
  long tasks = kind == BENCH_FANOUT ? (long)n * (2 + BENCH_FAN) : n;
  bench_work w = {.kind = kind, .n = n};
  w.slots = bench_slots_alloc(slot_count(&w));
  if (!w.slots) return 1;
  char params[64];
  snprintf(params, sizeof(params), "n=%d", n);
  int rc = 0;
  for (int r = -1; r < o->reps && !rc; r++) {
    int64_t ns = measure(s, o, &w, o->workload, params);
    if (ns < 0)
      rc = 1;
    else if (r >= 0)
      raw(s, o, o->workload, params, tasks, ns, "ns_per_task", (double)ns / tasks);
  }
  free(w.slots);
  return rc;
}

static int run_sweep(const bench_system *s, const opts *o, bench_pattern pat) {
  char wname[32];
  if (pat == BENCH_NEAREST)
    snprintf(wname, sizeof(wname), "nearest_r%d", o->radix);
  else
    snprintf(wname, sizeof(wname), "%s", bench_pattern_name(pat));
  int rc = 0;
  int below = 0, crossed = 0;
  /* Two unmeasured warm-ups: the coarsest grain (wakes every worker CPU
   * up to speed) and the finest (allocator, queues, first-touch paths). */
  for (int gi = -2; gi < o->ngrains && !rc; gi++) {
    double grain = gi == -2 ? o->grains[0] : gi == -1 ? o->grains[o->ngrains - 1] : o->grains[gi];
    int steps;
    if (gi < 0) {
      steps = o->min_steps;
    } else {
      double st = ceil(o->target_us * o->workers / ((double)o->width * grain));
      int cap = o->max_tasks / o->width;
      steps = st > cap ? cap : (int)st;
      if (steps < o->min_steps) steps = o->min_steps;
    }
    bench_graph g;
    if (graph_build(&g, pat, o->width, steps, o->radix, grain, o->ipus) != 0) return 1;
    bench_work w = {.kind = BENCH_GRAPH, .g = &g, .slots = bench_slots_alloc(g.ntasks)};
    if (!w.slots) {
      graph_free(&g);
      return 1;
    }
    char params[64];
    snprintf(params, sizeof(params), "G=%g", grain);
    double eff_sum = 0;
    for (int r = 0; r < (gi < 0 ? 1 : o->reps) && !rc; r++) {
      int64_t ns = measure(s, o, &w, wname, params);
      if (ns < 0) {
        rc = 1;
        break;
      }
      if (gi < 0) break;
      double eff = (double)g.ntasks * grain * 1000.0 / ((double)ns * o->workers);
      eff_sum += eff;
      raw(s, o, wname, params, g.ntasks, ns, "efficiency", eff);
    }
    free(w.slots);
    graph_free(&g);
    if (gi < 0 || rc) continue;
    /* Stop once the curve has crossed the 50% line and stays well below
     * it: finer grains only cost time (each has as many tasks as the cap
     * allows). A dip at coarse grains (a noisy machine) stops nothing. */
    double eff = eff_sum / o->reps;
    below = eff < 0.5 ? below + 1 : 0;
    if (eff >= 0.5) crossed = 1;
    if (crossed && (eff < o->stop_eff || below >= 2)) break;
  }
  return rc;
}

/* Whether the allocator rule took: the process's anonymous memory on
 * transparent huge pages at the end, and its minor page faults (first
 * touches of a page), as one MEM line. */
static void memory_line(const bench_system *s, const opts *o) {
  long huge_kib = -1;
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "AnonHugePages: %ld kB", &huge_kib) == 1) break;
    fclose(f);
  }
  struct rusage ru;
  long minflt = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
  printf("MEM,%s,%s,%s,%ld,%ld\n", s->name, class_names[o->cls], o->workload, huge_kib, minflt);
}

int bench_main(int argc, char **argv, const bench_system *sys) {
  opts o;
  if (parse(argc, argv, &o) != 0) {
    usage(argv[0]);
    return 2;
  }
  if (!strcmp(o.workload, "calibrate")) {
    printf("CAL,%.3f\n", calibrate());
    return 0;
  }
  if (!strcmp(o.workload, "classes")) {
    printf("CLASSES,%s,%s%s\n", sys->name, class_names[BENCH_DYNAMIC],
           sys->prebuilt ? " prebuilt" : "");
    return 0;
  }
  if (o.cls == BENCH_PREBUILT && !sys->prebuilt) {
    fprintf(stderr, "%s: this system has no prebuilt class (see '%s classes')\n", sys->name,
            argv[0]);
    return 2;
  }
  bench_pattern pat = BENCH_PATTERN_COUNT;
  for (int p = 0; p < BENCH_PATTERN_COUNT; p++)
    if (!strcmp(o.workload, pattern_names[p])) pat = (bench_pattern)p;
  int simple =
      !strcmp(o.workload, "chain") || !strcmp(o.workload, "indep") || !strcmp(o.workload, "fanout");
  if (!simple && pat == BENCH_PATTERN_COUNT) {
    usage(argv[0]);
    return 2;
  }
  if (pat != BENCH_PATTERN_COUNT && o.ipus <= 0) o.ipus = calibrate();
  if (sys->init(o.workers) != 0) {
    fprintf(stderr, "%s: init with %d workers failed\n", sys->name, o.workers);
    return 1;
  }
  if (sys->describe) printf("CONF,%s,%s\n", sys->name, sys->describe());
  if (o.cls == BENCH_PREBUILT)
    printf("CONF,%s %s,%s\n", sys->name, class_names[o.cls], sys->prebuilt->how);
  int rc = simple ? run_simple(sys, &o) : run_sweep(sys, &o, pat);
  sys->fini();
  if (!rc) memory_line(sys, &o);
  return rc;
}
