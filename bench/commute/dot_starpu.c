/* dot_starpu.c — the dot-product reduction benchmark on StarPU 1.3
 * (dot_common.h): STARPU_REDUX on a variable handle with an init codelet
 * (0) and a redux codelet (+), the chunks as vector handles
 * read with STARPU_R. `-w W`: W CPU workers plus the submitting main
 * thread. Scheduler: STARPU_SCHED, else "prio" (as commute_starpu). */
#define _GNU_SOURCE
#include "dot_common.h"

#include <starpu.h>

static double g_acc;

static void dot_cpu(void *buffers[], void *arg) {
  (void)arg;
  const double *x = (const double *)STARPU_VECTOR_GET_PTR(buffers[0]);
  const double *y = (const double *)STARPU_VECTOR_GET_PTR(buffers[1]);
  *(double *)STARPU_VARIABLE_GET_PTR(buffers[2]) += dot_chunk(x, y);
}

static void init_cpu(void *buffers[], void *arg) {
  (void)arg;
  *(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) = 0;
}

static void redux_cpu(void *buffers[], void *arg) {
  (void)arg;
  *(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) += *(double *)STARPU_VARIABLE_GET_PTR(buffers[1]);
}

static struct starpu_codelet cl_dot = {.cpu_funcs = {dot_cpu},
                                       .nbuffers = 3,
                                       .modes = {STARPU_R, STARPU_R, STARPU_REDUX},
                                       .name = "dot"};
static struct starpu_codelet cl_init = {
    .cpu_funcs = {init_cpu}, .nbuffers = 1, .modes = {STARPU_W}, .name = "init"};
static struct starpu_codelet cl_redux = {
    .cpu_funcs = {redux_cpu}, .nbuffers = 2, .modes = {STARPU_RW, STARPU_R}, .name = "redux"};

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  dot_fill();
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = w;
  conf.ncuda = 0;
  conf.nopencl = 0;
  const char *sched = getenv("STARPU_SCHED");
  if (!sched) conf.sched_policy_name = sched = "prio";
  if (starpu_init(&conf) != 0) return 1;
  static starpu_data_handle_t xh[DOT_CHUNKS], yh[DOT_CHUNKS];
  starpu_data_handle_t acc;
  for (int c = 0; c < DOT_CHUNKS; c++) {
    starpu_vector_data_register(&xh[c], STARPU_MAIN_RAM, (uintptr_t)&dot_x[c * DOT_LEN], DOT_LEN,
                                sizeof(double));
    starpu_vector_data_register(&yh[c], STARPU_MAIN_RAM, (uintptr_t)&dot_y[c * DOT_LEN], DOT_LEN,
                                sizeof(double));
  }
  starpu_variable_data_register(&acc, STARPU_MAIN_RAM, (uintptr_t)&g_acc, sizeof g_acc);
  starpu_data_set_reduction_methods(acc, &cl_redux, &cl_init);
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    starpu_data_acquire(acc, STARPU_W); /* zeroed through StarPU's own copy */
    g_acc = 0;
    starpu_data_release(acc);
    double t0 = now_s();
    for (int i = 0; i < DOT_TASKS; i++)
      if (starpu_task_insert(&cl_dot, STARPU_R, xh[i % DOT_CHUNKS], STARPU_R, yh[i % DOT_CHUNKS],
                             STARPU_REDUX, acc, 0))
        return 1;
    starpu_data_acquire(acc, STARPU_R); /* the reduction is folded for this read */
    t[r] = now_s() - t0;
    double got = g_acc;
    starpu_data_release(acc);
    if (dot_check(got, "starpu")) return 1;
  }
  printf("dot system=starpu-%s workers=%d tasks=%d len=%d seconds=%.4f ns_per_task=%.0f\n", sched,
         w, DOT_TASKS, DOT_LEN, median(t), median(t) * 1e9 / DOT_TASKS);
  for (int c = 0; c < DOT_CHUNKS; c++) {
    starpu_data_unregister(xh[c]);
    starpu_data_unregister(yh[c]);
  }
  starpu_data_unregister(acc);
  starpu_shutdown();
  return 0;
}
