/* bench/starpu/bench_starpu.c — the workloads as StarPU 1.3 tasks
 * submitted with starpu_task_insert() on data handles with R / W / RW
 * modes; StarPU infers the dependencies (sequential consistency).
 *
 * StarPU runs `workers` CPU worker threads; the main thread only submits.
 * Registering the data handles is one-time setup in StarPU's model (a user
 * registers data once and submits many tasks on it), so it is done before
 * the clock starts and unregistered after it stops.
 *
 * StarPU has no prebuilt class: StarPU 1.3 has no graph object to execute
 * again. A task kept with `destroy = 0` can be submitted again, but each
 * submission goes through dependency inference on its handles (or needs
 * its dependencies declared again) and scheduling, which is the dynamic
 * path. */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static int g_workers;
static char g_desc[160];
static const bench_graph *g_graph;

static void empty_cpu(void *buffers[], void *cl_arg) {
  (void)cl_arg;
  bench_kernel_empty((uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]));
}

static void produce_cpu(void *buffers[], void *cl_arg) {
  (void)cl_arg;
  bench_kernel_produce((const uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]),
                       (uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[1]));
}

static void consume_cpu(void *buffers[], void *cl_arg) {
  (void)cl_arg;
  bench_kernel_consume((const uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]),
                       (uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[1]));
}

/* buffers[0] = R (W), buffers[1 + j] = B[j] (R). The B slots are
 * contiguous in memory, so the shared kernel reads them from B[0]. */
static void reduce_cpu(void *buffers[], void *cl_arg) {
  (void)cl_arg;
  bench_kernel_reduce((const uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[1]),
                      (uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]));
}

/* buffers[0] = output (W), buffers[1 ..] = inputs (R); cl_arg = task index. */
static void task_cpu(void *buffers[], void *cl_arg) {
  int i = *(const int *)cl_arg;
  struct starpu_task *task = starpu_task_get_current();
  int n = (int)STARPU_TASK_GET_NBUFFERS(task) - 1;
  const uint64_t *in[256];
  const uint64_t **inp = n > 256 ? malloc(sizeof(*inp) * (size_t)n) : in;
  for (int j = 0; j < n; j++)
    inp[j] = (const uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[1 + j]);
  bench_kernel_task(g_graph, i, inp, n, (uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]));
  if (inp != in) free(inp);
}

static struct starpu_codelet cl_rw = {
    .cpu_funcs = {empty_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "chain"};
static struct starpu_codelet cl_w = {
    .cpu_funcs = {empty_cpu}, .nbuffers = 1, .modes = {STARPU_W}, .name = "indep"};
static struct starpu_codelet cl_produce = {
    .cpu_funcs = {produce_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}, .name = "produce"};
static struct starpu_codelet cl_consume = {
    .cpu_funcs = {consume_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "consume"};
static struct starpu_codelet cl_reduce = {
    .cpu_funcs = {reduce_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "reduce"};
static struct starpu_codelet cl_task = {
    .cpu_funcs = {task_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "task"};

static int sp_init(int workers) {
  g_workers = workers;
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = workers;
  conf.ncuda = 0;
  conf.nopencl = 0;
  int rc = starpu_init(&conf);
  if (rc != 0) return rc;
  return starpu_cpu_worker_get_count() == (unsigned)workers ? 0 : -1;
}

static void sp_fini(void) { starpu_shutdown(); }

static const char *sp_describe(void) {
  const char *sched = getenv("STARPU_SCHED");
  snprintf(g_desc, sizeof(g_desc), "%d CPU workers + submitting main thread, scheduler %s",
           g_workers, sched ? sched : "default (lws)");
  return g_desc;
}

static starpu_data_handle_t *reg(uint64_t *slots, int n) {
  starpu_data_handle_t *h = malloc(sizeof(*h) * (size_t)n);
  if (!h) return NULL;
  for (int i = 0; i < n; i++)
    starpu_variable_data_register(&h[i], STARPU_MAIN_RAM,
                                  (uintptr_t)(slots + (size_t)i * BENCH_SLOT_WORDS),
                                  BENCH_SLOT_BYTES);
  return h;
}

static void unreg(starpu_data_handle_t *h, int n) {
  for (int i = 0; i < n; i++)
    starpu_data_unregister(h[i]);
  free(h);
}

/* Every run ends with starpu_task_wait_for_all(): the clock stops when
 * the last task has completed. */
static int64_t finish(int64_t t0, int rc) {
  if (starpu_task_wait_for_all() != 0) rc = -1;
  int64_t ns = bench_now_ns() - t0;
  return rc ? -1 : ns;
}

static int64_t sp_chain(int n, uint64_t *slots) {
  starpu_data_handle_t *h = reg(slots, 1);
  if (!h) return -1;
  int rc = 0;
  int64_t t0 = bench_now_ns();
  for (int i = 0; i < n && !rc; i++)
    rc = starpu_task_insert(&cl_rw, STARPU_RW, h[0], 0);
  int64_t ns = finish(t0, rc);
  unreg(h, 1);
  return ns;
}

static int64_t sp_indep(int n, uint64_t *slots) {
  starpu_data_handle_t *h = reg(slots, n);
  if (!h) return -1;
  int rc = 0;
  int64_t t0 = bench_now_ns();
  for (int i = 0; i < n && !rc; i++)
    rc = starpu_task_insert(&cl_w, STARPU_W, h[i], 0);
  int64_t ns = finish(t0, rc);
  unreg(h, n);
  return ns;
}

static int64_t sp_fanout(int rounds, uint64_t *slots) {
  int nh = 2 + BENCH_FAN;
  starpu_data_handle_t *h = reg(slots, nh);
  if (!h) return -1;
  struct starpu_data_descr d[1 + BENCH_FAN];
  d[0].handle = h[0];
  d[0].mode = STARPU_W;
  for (int j = 0; j < BENCH_FAN; j++) {
    d[1 + j].handle = h[2 + j];
    d[1 + j].mode = STARPU_R;
  }
  int rc = 0;
  int64_t t0 = bench_now_ns();
  for (int k = 0; k < rounds && !rc; k++) {
    rc = starpu_task_insert(&cl_produce, STARPU_R, h[0], STARPU_W, h[1], 0);
    for (int j = 0; j < BENCH_FAN && !rc; j++)
      rc = starpu_task_insert(&cl_consume, STARPU_R, h[1], STARPU_RW, h[2 + j], 0);
    if (!rc) rc = starpu_task_insert(&cl_reduce, STARPU_DATA_MODE_ARRAY, d, 1 + BENCH_FAN, 0);
  }
  int64_t ns = finish(t0, rc);
  unreg(h, nh);
  return ns;
}

static int64_t sp_graph(const bench_graph *g, uint64_t *slots) {
  int n = g->ntasks;
  starpu_data_handle_t *h = reg(slots, n);
  int *ids = malloc(sizeof(int) * (size_t)n);
  struct starpu_data_descr *d = malloc(sizeof(*d) * (size_t)(g->max_deps + 1));
  if (!h || !ids || !d) {
    free(ids);
    free(d);
    if (h) unreg(h, n);
    return -1;
  }
  for (int i = 0; i < n; i++)
    ids[i] = i;
  g_graph = g;
  int rc = 0;
  int64_t t0 = bench_now_ns();
  for (int i = 0; i < n && !rc; i++) {
    int nd = 0;
    d[nd].handle = h[i];
    d[nd++].mode = STARPU_W;
    for (int j = g->dep_start[i]; j < g->dep_start[i + 1]; j++) {
      d[nd].handle = h[g->dep[j]];
      d[nd++].mode = STARPU_R;
    }
    rc = starpu_task_insert(&cl_task, STARPU_DATA_MODE_ARRAY, d, nd, STARPU_CL_ARGS_NFREE, &ids[i],
                            sizeof(int), 0);
  }
  int64_t ns = finish(t0, rc);
  unreg(h, n);
  free(ids);
  free(d);
  return ns;
}

int main(int argc, char **argv) {
  static const bench_system sys = {
      .name = "starpu",
      .init = sp_init,
      .fini = sp_fini,
      .run_chain = sp_chain,
      .run_indep = sp_indep,
      .run_fanout = sp_fanout,
      .run_graph = sp_graph,
      .describe = sp_describe,
  };
  return bench_main(argc, argv, &sys);
}
