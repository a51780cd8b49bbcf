/* dot_pto.c — the dot-product reduction benchmark on pto (dot_common.h):
 * each task reads its chunks (INPUT) and adds its partial into the result
 * through PTO_REDUX sum (private copies folded in submission order by
 * redux_combine tasks); the same with the chunks passed NO_DEP (untracked,
 * as the OpenMP program, whose tasks declare no dependence on them, while
 * StarPU's read them STARPU_R); for reference, COMMUTE (the adds excluded,
 * any order) and INOUT (the adds chained). The *-replay modes are the
 * prebuilt class (docs/benchmarks.md): the orchestration captured once
 * (pto_graph_capture, on a chip whose rings hold the whole graph), each
 * timed run a pto_graph_launch of it, the result checked after every
 * launch; OpenMP has no reusable graph, its figure re-runs the region.
 * `-w W`: W AIV cores (as commute_pto); `-m MODE`: that mode alone (redux,
 * redux-untracked, commute, inout, redux-replay, redux-untracked-replay);
 * `-e N`: N - 1 untimed runs after each timed one (for a profile).
 * Prints one line per figure: median of REPS runs. */
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
  bool replay;            /* captured once, each run a launch */
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

/* A chip of w AIV cores (commute_pto's shape rule); whole_graph: rings
 * that hold the whole orchestration at once, as a capture needs (10^5
 * contributions, their combine tasks and edges). */
static pto_chip *make_chip(int w, bool whole_graph) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = w % 2 == 0 ? w / 2 : w;
  cfg.aiv_per_cluster = w % 2 == 0 ? 2 : 1;
  cfg.aic_per_cluster = 0;
  if (cfg.schedulers > cfg.clusters) cfg.schedulers = cfg.clusters;
  if (whole_graph) {
    cfg.task_slots = 1u << 17;
    cfg.dep_entries = 1u << 19;
    cfg.tensormap_entries = 1u << 18;
  }
  pto_chip *chip;
  if (pto_chip_create(&cfg, &chip)) {
    fprintf(stderr, "pto: %s\n", pto_last_error());
    return NULL;
  }
  if (pto_kernel_register_aiv(chip, "dot", dot_kernel, &k_dot)) {
    fprintf(stderr, "pto: %s\n", pto_last_error());
    pto_chip_destroy(chip);
    return NULL;
  }
  return chip;
}

int main(int argc, char **argv) {
  int w = workers_arg(argc, argv);
  const char *only = mode_arg(argc, argv);
  /* -e N: each timed run followed by N - 1 untimed ones (to profile) */
  int launches = 1;
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "-e") == 0) launches = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
  dot_fill();
  static const dot_mode modes[] = {{"redux", PTO_REDUX, PTO_INPUT, false},
                                   {"redux-untracked", PTO_REDUX, PTO_NO_DEP, false},
                                   {"commute", PTO_COMMUTE, PTO_INPUT, false},
                                   {"inout", PTO_INOUT, PTO_INPUT, false},
                                   {"redux-replay", PTO_REDUX, PTO_INPUT, true},
                                   {"redux-untracked-replay", PTO_REDUX, PTO_NO_DEP, true}};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    if (only && strcmp(only, modes[m].name)) continue;
    g_chip = make_chip(w, modes[m].replay);
    if (!g_chip) {
      fprintf(stderr, "pto: %s\n", pto_last_error());
      return 1;
    }
    pto_graph *graph = NULL;
    pto_error_info err;
    if (modes[m].replay) { /* the capture: a real run, untimed */
      g_acc = 0;
      int rc = pto_graph_capture(g_chip, dot_orch, (void *)&modes[m], &graph, NULL, &err);
      if (rc) pto_error_print(&err, stderr);
      if (rc || dot_check(g_acc, "pto capture")) return 1;
    }
    double t[REPS];
    for (int r = 0; r < REPS * launches; r++) {
      g_acc = 0;
      double t0 = now_s();
      int rc = graph ? pto_graph_launch(g_chip, graph, NULL, NULL, &err)
                     : pto_chip_run(g_chip, dot_orch, (void *)&modes[m], NULL, &err);
      if (r % launches == 0) t[r / launches] = now_s() - t0;
      if (rc) pto_error_print(&err, stderr);
      if (rc || dot_check(g_acc, "pto")) return 1;
    }
    printf("dot system=pto-%s workers=%d tasks=%d len=%d seconds=%.4f ns_per_task=%.0f",
           modes[m].name, w, DOT_TASKS, DOT_LEN, median(t), median(t) * 1e9 / DOT_TASKS);
    pto_graph_info gi;
    if (graph && pto_graph_get_info(graph, &gi) == 0)
      printf(" launches=%lld warm=%lld", (long long)gi.launches, (long long)gi.warm_launches);
    printf("\n");
    pto_graph_destroy(graph);
    pto_chip_destroy(g_chip);
  }
  return 0;
}
