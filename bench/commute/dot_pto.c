/* dot_pto.c — the dot-product reduction benchmark on pto (dot_common.h):
 * each task reads its chunks (INPUT) and adds its partial into the result
 * through PTO_REDUX sum (private copies folded in submission order by
 * redux_combine tasks); the same with the chunks passed NO_DEP (untracked,
 * as the OpenMP program, whose tasks declare no dependence on them, while
 * StarPU's read them STARPU_R); for reference, COMMUTE (the adds excluded,
 * any order) and INOUT (the adds chained). `-w W`: W AIV cores (as
 * commute_pto); `-m MODE`: that mode alone (redux, redux-untracked, commute,
 * inout). Prints one line per figure: median of REPS runs. */
#include "dot_common.h"

#include "pto/pto.h"

static pto_chip *g_chip;
static int k_dot;
static double g_acc;

static int dot_kernel(const pto_kctx *c) {
  double *acc = (double *)c->tensors[2].buf + c->tensors[2].offset;
  *acc += dot_chunk((const double *)c->tensors[0].buf + c->tensors[0].offset,
                    (const double *)c->tensors[1].buf + c->tensors[1].offset);
  return 0;
}

typedef struct dot_mode {
  const char *name;
  pto_access acc, chunks; /* the result's access, the chunks' */
} dot_mode;

static void dot_orch(pto_orch *o, void *arg) {
  const dot_mode *m = arg;
  static pto_tensor xs[DOT_CHUNKS], ys[DOT_CHUNKS];
  pto_tensor acc;
  int64_t len = DOT_LEN, one = 1;
  for (int c = 0; c < DOT_CHUNKS; c++) {
    pto_tensor_init(&xs[c], &dot_x[c * DOT_LEN], sizeof(double) * DOT_LEN, PTO_F64, 1, &len);
    pto_tensor_init(&ys[c], &dot_y[c * DOT_LEN], sizeof(double) * DOT_LEN, PTO_F64, 1, &len);
  }
  pto_tensor_init(&acc, &g_acc, sizeof g_acc, PTO_F64, 1, &one);
  for (int i = 0; i < DOT_TASKS; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_add(&a, m->chunks, &xs[i % DOT_CHUNKS]);
    pto_args_add(&a, m->chunks, &ys[i % DOT_CHUNKS]);
    if (m->acc == PTO_REDUX)
      pto_args_redux(&a, &acc, PTO_REDUX_SUM);
    else
      pto_args_add(&a, m->acc, &acc);
    pto_submit(o, k_dot, &a, NULL, NULL);
  }
}

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  const char *only = mode_arg(argc, argv);
  dot_fill();
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = w % 2 == 0 ? w / 2 : w;
  cfg.aiv_per_cluster = w % 2 == 0 ? 2 : 1;
  cfg.aic_per_cluster = 0;
  if (cfg.schedulers > cfg.clusters) cfg.schedulers = cfg.clusters;
  if (pto_chip_create(&cfg, &g_chip) || pto_kernel_register_aiv(g_chip, "dot", dot_kernel, &k_dot))
    return 1;
  static const dot_mode modes[] = {{"redux", PTO_REDUX, PTO_INPUT},
                                   {"redux-untracked", PTO_REDUX, PTO_NO_DEP},
                                   {"commute", PTO_COMMUTE, PTO_INPUT},
                                   {"inout", PTO_INOUT, PTO_INPUT}};
  for (int m = 0; m < 4; m++) {
    if (only && strcmp(only, modes[m].name)) continue;
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
      g_acc = 0;
      pto_error_info err;
      double t0 = now_s();
      int rc = pto_chip_run(g_chip, dot_orch, (void *)&modes[m], NULL, &err);
      t[r] = now_s() - t0;
      if (rc) pto_error_print(&err, stderr);
      if (rc || dot_check(g_acc, "pto")) return 1;
    }
    printf("dot system=pto-%s workers=%d tasks=%d len=%d seconds=%.4f ns_per_task=%.0f\n",
           modes[m].name, w, DOT_TASKS, DOT_LEN, median(t), median(t) * 1e9 / DOT_TASKS);
  }
  pto_chip_destroy(g_chip);
  return 0;
}
