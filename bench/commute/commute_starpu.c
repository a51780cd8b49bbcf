/* commute_starpu.c — the commute and priority benchmarks on StarPU 1.3
 * (commute_common.h): STARPU_RW | STARPU_COMMUTE adds into bins (a
 * variable handle per bin), and the chain (STARPU_RW on one token handle)
 * with independent work with and without STARPU_PRIORITY. `-w W`: W CPU
 * workers plus the submitting main thread. Scheduler: STARPU_SCHED, else
 * "prio" (lws, the default, ignores priorities). */
#define _GNU_SOURCE
#include "commute_common.h"

#include <starpu.h>

static uint64_t g_bins[HIST_BINS];

static void add_cpu(void *buffers[], void *arg) {
  uint64_t i;
  starpu_codelet_unpack_args(arg, &i);
  *(uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]) += hist_value(i);
}

static void sleep_cpu(void *buffers[], void *arg) {
  (void)buffers;
  (void)arg;
  prio_task_sleep();
}

static struct starpu_codelet cl_add = {
    .cpu_funcs = {add_cpu}, .nbuffers = 1, .modes = {STARPU_RW | STARPU_COMMUTE}, .name = "add"};
static struct starpu_codelet cl_link = {
    .cpu_funcs = {sleep_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "chain"};
static struct starpu_codelet cl_indep = {.cpu_funcs = {sleep_cpu}, .nbuffers = 0, .name = "indep"};

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = w;
  conf.ncuda = 0;
  conf.nopencl = 0;
  const char *sched = getenv("STARPU_SCHED");
  if (!sched) conf.sched_policy_name = sched = "prio";
  if (starpu_init(&conf) != 0) return 1;
  starpu_data_handle_t h[HIST_BINS], token;
  static uint64_t tok;
  for (int b = 0; b < HIST_BINS; b++)
    starpu_variable_data_register(&h[b], STARPU_MAIN_RAM, (uintptr_t)&g_bins[b], sizeof g_bins[b]);
  starpu_variable_data_register(&token, STARPU_MAIN_RAM, (uintptr_t)&tok, sizeof tok);
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    for (int b = 0; b < HIST_BINS; b++) { /* zeroed through StarPU's own copy */
      starpu_data_acquire(h[b], STARPU_W);
      g_bins[b] = 0;
      starpu_data_release(h[b]);
    }
    double t0 = now_s();
    for (uint64_t i = 0; i < HIST_TASKS; i++)
      if (starpu_task_insert(&cl_add, STARPU_RW | STARPU_COMMUTE, h[i % HIST_BINS], STARPU_VALUE,
                             &i, sizeof i, 0))
        return 1;
    starpu_task_wait_for_all();
    t[r] = now_s() - t0;
    for (int b = 0; b < HIST_BINS; b++) {
      starpu_data_acquire(h[b], STARPU_R);
      starpu_data_release(h[b]);
    }
    if (hist_check(g_bins, "starpu")) return 1;
  }
  printf("histogram system=starpu-%s workers=%d tasks=%d bins=%d seconds=%.4f ns_per_task=%.0f\n",
         sched, w, HIST_TASKS, HIST_BINS, median(t), median(t) * 1e9 / HIST_TASKS);
  for (int with = 0; with < 2; with++) {
    for (int r = 0; r < REPS; r++) {
      double t0 = now_s();
      for (int i = 0; i < prio_indep(w); i++)
        if (starpu_task_insert(&cl_indep, 0)) return 1;
      for (int i = 0; i < PRIO_CHAIN; i++)
        if (starpu_task_insert(&cl_link, STARPU_RW, token, STARPU_PRIORITY,
                               with ? STARPU_MAX_PRIO : 0, 0))
          return 1;
      starpu_task_wait_for_all();
      t[r] = now_s() - t0;
    }
    printf("priority system=starpu-%s workers=%d chain=%d independent=%d task_us=%d "
           "priorities=%s makespan_ms=%.1f\n",
           sched, w, PRIO_CHAIN, prio_indep(w), PRIO_TASK_US, with ? "yes" : "no", median(t) * 1e3);
  }
  for (int b = 0; b < HIST_BINS; b++)
    starpu_data_unregister(h[b]);
  starpu_data_unregister(token);
  starpu_shutdown();
  return 0;
}
