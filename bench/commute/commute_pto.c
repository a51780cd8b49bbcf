/* commute_pto.c — the commute and priority benchmarks on pto
 * (commute_common.h): PTO_COMMUTE adds into bins, and a chain with
 * independent work with and without pto_submit_opts.priority.
 * `-w W`: W AIV cores (W / 2 clusters of 2, no AIC; as bench_pto). Also
 * the histogram with INOUT (each bin's adds in submission order) for
 * reference. `-m MODE`: that part alone (commute, inout, priority). Prints
 * one line per figure: median of REPS runs. */
#include "commute_common.h"

#include "pto/pto.h"

static pto_chip *g_chip;
static int k_add, k_sleep;
static uint64_t g_bins[HIST_BINS];

static int add_kernel(const pto_kctx *c) {
  uint64_t *bin = (uint64_t *)c->tensors[0].buf + c->tensors[0].offset;
  *bin += hist_value(c->scalars[0]);
  return 0;
}

static int sleep_kernel(const pto_kctx *c) {
  (void)c;
  prio_task_sleep();
  return 0;
}

typedef struct hist_arg {
  pto_access mode;
} hist_arg;

static void hist_orch(pto_orch *o, void *arg) {
  const hist_arg *h = arg;
  pto_tensor bins[HIST_BINS];
  int64_t one[1] = {1};
  for (int b = 0; b < HIST_BINS; b++)
    pto_tensor_init(&bins[b], &g_bins[b], sizeof g_bins[b], PTO_I64, 1, one);
  for (uint64_t i = 0; i < HIST_TASKS; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_add(&a, h->mode, &bins[i % HIST_BINS]);
    pto_args_scalar(&a, i);
    pto_submit(o, k_add, &a, NULL, NULL);
  }
}

typedef struct prio_arg {
  int workers, chain_priority;
} prio_arg;

static void prio_orch(pto_orch *o, void *arg) {
  const prio_arg *p = arg;
  for (int i = 0; i < prio_indep(p->workers); i++)
    pto_submit(o, k_sleep, NULL, NULL, NULL);
  pto_task_id prev = PTO_TASK_NONE, id;
  for (int i = 0; i < PRIO_CHAIN; i++, prev = id) {
    pto_submit_opts opts = {.deps = &prev, .ndeps = i > 0, .priority = p->chain_priority};
    pto_submit(o, k_sleep, NULL, &opts, &id);
  }
}

static int run(pto_orch_fn fn, void *arg, double *s) {
  pto_error_info err;
  double t0 = now_s();
  int rc = pto_chip_run(g_chip, fn, arg, NULL, &err);
  *s = now_s() - t0;
  if (rc) pto_error_print(&err, stderr);
  return rc;
}

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  const char *only = mode_arg(argc, argv);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = w % 2 == 0 ? w / 2 : w;
  cfg.aiv_per_cluster = w % 2 == 0 ? 2 : 1;
  cfg.aic_per_cluster = 0;
  if (cfg.schedulers > cfg.clusters) cfg.schedulers = cfg.clusters;
  if (pto_chip_create(&cfg, &g_chip) ||
      pto_kernel_register_aiv(g_chip, "add", add_kernel, &k_add) ||
      pto_kernel_register_aiv(g_chip, "sleep", sleep_kernel, &k_sleep)) {
    fprintf(stderr, "pto: %s\n", pto_last_error());
    return 1;
  }
  static const struct {
    const char *name;
    pto_access mode;
  } modes[] = {{"commute", PTO_COMMUTE}, {"inout", PTO_INOUT}};
  for (int m = 0; m < 2; m++) {
    if (only && strcmp(only, modes[m].name)) continue;
    double t[REPS];
    hist_arg h = {modes[m].mode};
    for (int r = 0; r < REPS; r++) {
      memset(g_bins, 0, sizeof g_bins);
      if (run(hist_orch, &h, &t[r]) || hist_check(g_bins, "pto")) return 1;
    }
    printf("histogram system=pto-%s workers=%d tasks=%d bins=%d seconds=%.4f ns_per_task=%.0f\n",
           modes[m].name, w, HIST_TASKS, HIST_BINS, median(t), median(t) * 1e9 / HIST_TASKS);
  }
  for (int with = 0; with < 2 && (!only || strcmp(only, "priority") == 0); with++) {
    double t[REPS];
    prio_arg p = {w, with ? PTO_PRIORITY_MAX : 0};
    for (int r = 0; r < REPS; r++)
      if (run(prio_orch, &p, &t[r])) return 1;
    printf("priority system=pto workers=%d chain=%d independent=%d task_us=%d priorities=%s "
           "makespan_ms=%.1f\n",
           w, PRIO_CHAIN, prio_indep(w), PRIO_TASK_US, with ? "yes" : "no", median(t) * 1e3);
  }
  pto_chip_destroy(g_chip);
  return 0;
}
