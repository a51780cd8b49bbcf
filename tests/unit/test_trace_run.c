/* test_trace_run.c — traces of real runs: a small task graph on a chip and
 * the paged_attention scene. Each trace must pass the schema check and
 * hold every submitted block exactly once, on a core's track. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"
#include "scene.h"
#include "trace_json.h"
#include "trace_read.h"

static void tmp_path(char *buf, size_t n, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/pto_test_trace_run_%s_%d.json", dir && *dir ? dir : "/tmp", tag,
           (int)getpid());
}

static trace_json_doc *load_valid(const char *path) {
  char err[256] = "";
  trace_json_doc *d = NULL;
  int rc = trace_json_load(path, &d, err, sizeof err);
  if (rc) fprintf(stderr, "load %s: %s\n", path, err);
  assert_int_equal(rc, 0);
  rc = trace_validate(trace_json_root(d), err, sizeof err);
  if (rc) fprintf(stderr, "schema of %s: %s\n", path, err);
  assert_int_equal(rc, 0);
  return d;
}

static int64_t arg(const trace_json *ev, const char *key) {
  double x = -1;
  if (!trace_json_num(trace_json_get(ev, "args"), key, &x)) return -1;
  return (int64_t)x;
}

static bool is_cat(const trace_json *ev, const char *cat) {
  const char *c = trace_json_str(ev, "cat");
  const char *ph = trace_json_str(ev, "ph");
  return c && ph && ph[0] == 'X' && strcmp(c, cat) == 0;
}

/* The name of the track (pid, tid) from its thread_name metadata. */
static const char *track_name(const trace_json *evs, double pid, double tid) {
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *name = trace_json_str(e, "name");
    double p = -1, t = -1;
    trace_json_num(e, "pid", &p);
    trace_json_num(e, "tid", &t);
    if (name && strcmp(name, "thread_name") == 0 && p == pid && t == tid)
      return trace_json_str(trace_json_get(e, "args"), "name");
  }
  return NULL;
}

/* Block slices (part 0: a MIX block's other cores add args.part) with
 * their counts per (task, block), and the summary's view of the same. */
/* The trace's arrows: checked (trace_check_flows) and counted; one dep
 * flow per distinct edge of args.deps, each drawn between its two tasks. */
static trace_flow_counts flows_of(const trace_json_doc *d) {
  trace_flow_counts c;
  char err[256] = "";
  if (trace_check_flows(trace_json_root(d), &c, err, sizeof err)) fail_msg("flows: %s", err);
  return c;
}

static uint64_t count_blocks(const trace_json_doc *d) {
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  uint64_t n = 0;
  for (uint32_t i = 0; i < evs->n; i++)
    if (is_cat(&evs->u.items[i], "block") && arg(&evs->u.items[i], "part") <= 0) n++;
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.blocks, n);
  assert_int_equal(s.dup_blocks, 0);
  trace_summary_free(&s);
  return n;
}

/* ---- a small graph on a chip ---- */

/* No block finishes before the orchestration has submitted every task:
 * the trace records a task's edges to producers still live at its submit
 * (an edge to a task that already retired constrained nothing), so a slow
 * orchestrator (sanitizers) must not let producers retire early. */
static _Atomic int all_submitted;

static int k_noop(const pto_kctx *ctx) {
  while (!atomic_load(&all_submitted) && !pto_kctx_cancelled(ctx)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

#define NT 6
typedef struct graph {
  int kaiv, kaic, kmix;
  bool mix;
  int rc; /* first submit error: the orchestrator must not longjmp out of a run */
  pto_task_id id[NT];
  int blocks[NT];
  int kernel[NT];
} graph;

/* t0 (AIV x4) -> t1 (AIC x2) -> dummy t2 -> t3 (AIV x3, gang) ; t4 (AIC x1)
 * independent; t5 (MIX x2, or AIV x2) after t3 and t4. */
static void note(graph *g, int rc) {
  if (rc && !g->rc) g->rc = rc;
}

static void orch_graph(pto_orch *o, void *arg) {
  graph *g = arg;
  atomic_store(&all_submitted, 0);
  for (int i = 0; i < NT; i++)
    g->id[i] = PTO_TASK_NONE;
  pto_submit_opts op = {.block_num = 4};
  g->blocks[0] = 4, g->kernel[0] = g->kaiv;
  note(g, pto_submit(o, g->kaiv, NULL, &op, &g->id[0]));
  op = (pto_submit_opts){.block_num = 2, .deps = &g->id[0], .ndeps = 1};
  g->blocks[1] = 2, g->kernel[1] = g->kaic;
  note(g, pto_submit(o, g->kaic, NULL, &op, &g->id[1]));
  op = (pto_submit_opts){.deps = &g->id[1], .ndeps = 1};
  g->blocks[2] = 0, g->kernel[2] = -1;
  note(g, pto_submit_dummy(o, NULL, &op, &g->id[2]));
  op = (pto_submit_opts){.block_num = 3, .sync_start = true, .deps = &g->id[2], .ndeps = 1};
  g->blocks[3] = 3, g->kernel[3] = g->kaiv;
  note(g, pto_submit(o, g->kaiv, NULL, &op, &g->id[3]));
  g->blocks[4] = 1, g->kernel[4] = g->kaic;
  note(g, pto_submit(o, g->kaic, NULL, NULL, &g->id[4]));
  pto_task_id d5[2] = {g->id[3], g->id[4]};
  op = (pto_submit_opts){.block_num = 2, .deps = d5, .ndeps = 2};
  g->blocks[5] = 2, g->kernel[5] = g->mix ? g->kmix : g->kaiv;
  note(g, pto_submit(o, g->kernel[5], NULL, &op, &g->id[5]));
  atomic_store(&all_submitted, 1);
}

static pto_chip *make_chip(graph *g, bool check) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 2;
  cfg.check = check;
  cfg.check_seed = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "vec_noop", k_noop, &g->kaiv), 0);
  assert_int_equal(pto_kernel_register_aic(chip, "cube_noop", k_noop, &g->kaic), 0);
  pto_kernel_desc mix = {.name = "mix_noop", .aic = k_noop, .aiv = k_noop, .aiv_count = 2};
  assert_int_equal(pto_kernel_register(chip, &mix, &g->kmix), 0);
  return chip;
}

static void check_graph_trace(const char *path, const graph *g, const pto_run_stats *st) {
  trace_json_doc *d = load_valid(path);
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  static const char *names[] = {"vec_noop", "cube_noop", "mix_noop"};
  int seen[NT][4] = {{0}};
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    if (!is_cat(e, "block") || arg(e, "part") > 0) continue;
    int64_t task = arg(e, "task"), block = arg(e, "block");
    int t = -1;
    for (int k = 0; k < NT; k++)
      if (g->id[k] == task) t = k;
    assert_true(t >= 0 && t != 2); /* a submitted task with blocks */
    assert_in_range(block, 0, g->blocks[t] - 1);
    seen[t][block]++;
    int kk = g->kernel[t] == g->kaiv ? 0 : g->kernel[t] == g->kaic ? 1 : 2;
    assert_string_equal(trace_json_str(e, "name"), names[kk]);
    double pid = 0, tid = 0;
    trace_json_num(e, "pid", &pid);
    trace_json_num(e, "tid", &tid);
    const char *tn = track_name(evs, pid, tid);
    assert_non_null(tn);
    assert_true(strstr(tn, "orch") == NULL && strstr(tn, "sched") == NULL); /* a core */
  }
  for (int t = 0; t < NT; t++)
    for (int b = 0; b < g->blocks[t]; b++) {
      if (seen[t][b] != 1) fprintf(stderr, "task %d block %d appears %d times\n", t, b, seen[t][b]);
      assert_int_equal(seen[t][b], 1);
    }
  assert_int_equal(count_blocks(d), st->blocks);
  assert_int_equal(st->blocks, 4 + 2 + 3 + 1 + 2);
  /* The dependencies are in the trace (once per task), so the critical
   * path follows them: every task is an ancestor of t5. */
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.tasks, NT - 1);
  assert_int_equal(s.edges, 5);
  assert_int_equal(s.missing_deps, 0);
  trace_flow_counts fc = flows_of(d); /* t2 is a dummy: its arrows end on its submit */
  if (fc.deps != 5 || fc.edges != 5)
    fail_msg("dep flows %" PRIu64 ", edges %" PRIu64 "; expected 5 and 5", fc.deps, fc.edges);
  assert_true(s.critical_tasks >= 2);
  assert_true(s.critical_us > 0 && s.critical_us <= s.span_us + 1e-6);
  trace_summary_free(&s);
  trace_json_free(d);
}

static void run_graph(bool mix, bool check) {
  char path[256];
  tmp_path(path, sizeof path, check ? "check" : mix ? "mix" : "graph");
  graph g = {.mix = mix};
  pto_chip *chip = make_chip(&g, check);
  assert_int_equal(pto_chip_set_trace(chip, path), 0);
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_graph, &g, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  assert_int_equal(g.rc, 0);
  check_graph_trace(path, &g, &st);

  /* Each following run rewrites the file; NULL turns tracing off. */
  unlink(path);
  assert_int_equal(pto_chip_run(chip, orch_graph, &g, &st, &err), 0);
  check_graph_trace(path, &g, &st);
  unlink(path);
  assert_int_equal(pto_chip_set_trace(chip, NULL), 0);
  assert_int_equal(pto_chip_run(chip, orch_graph, &g, &st, &err), 0);
  assert_int_equal(access(path, F_OK), -1);
  pto_chip_destroy(chip);
}

static void test_graph_blocks_once(void **state) {
  (void)state;
  run_graph(false, false);
}

/* A MIX block runs on one AIC and two AIV at once and is still one block. */
static void test_mix_blocks_once(void **state) {
  (void)state;
  run_graph(true, false);
}

/* Checking mode (docs/contracts.md) runs the blocks on the orchestrator's
 * thread: each still appears once, on the core it stands for (the read
 * check's second run on scratch copies is not shown). */
static void test_checking_mode_blocks_once(void **state) {
  (void)state;
  run_graph(true, true);
}

/* pto_chip_set_trace during a run is refused with PTO_EBUSY: the run
 * writes its trace, at its end, to the path set when it began. Before, the
 * call returned 0, freed the path the run was to write to (another
 * thread's call raced with that read), and the run wrote its trace to the
 * new path. */
typedef struct set_in_run {
  graph *g;
  const char *path;
  int rc;
} set_in_run;
static void orch_set_trace(pto_orch *o, void *arg) {
  set_in_run *x = arg;
  x->rc = pto_chip_set_trace(pto_orch_chip(o), x->path);
  orch_graph(o, x->g);
}

static void test_set_trace_during_a_run(void **state) {
  (void)state;
  char path[256], other[256];
  tmp_path(path, sizeof path, "set_first");
  tmp_path(other, sizeof other, "set_during");
  unlink(path);
  unlink(other);
  graph g = {.mix = false};
  pto_chip *chip = make_chip(&g, false);
  assert_int_equal(pto_chip_set_trace(chip, path), 0);
  set_in_run x = {&g, other, 0};
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_set_trace, &x, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  if (x.rc != PTO_EBUSY)
    fail_msg("pto_chip_set_trace during a run returned %s, expected PTO_EBUSY",
             pto_status_name(x.rc));
  if (access(path, F_OK) != 0 || access(other, F_OK) == 0)
    fail_msg("the run's trace: %s %s, %s %s; expected the first path only", path,
             access(path, F_OK) ? "missing" : "written", other,
             access(other, F_OK) ? "missing" : "written");
  check_graph_trace(path, &g, &st);
  unlink(path);
  unlink(other);
  pto_chip_destroy(chip);
}

/* ---- the paged_attention scene ---- */

static void test_paged_attention_trace(void **state) {
  (void)state;
  const pto_scene *sc = pto_scene_find("paged_attention");
  if (!sc) skip();
  char path[256];
  tmp_path(path, sizeof path, "paged_attention");
  pto_scene_opts opts = {.rounds = 1, .trace = path};
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  int rc = sc->run(&opts, &rep);
  if (rc || !rep.verified) fprintf(stderr, "paged_attention: %s\n", rep.message);
  assert_int_equal(rc, 0);
  assert_true(rep.verified);
  trace_json_doc *d = load_valid(path);
  assert_true(rep.stats.blocks > 0);
  assert_int_equal(count_blocks(d), rep.stats.blocks);
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_true(s.span_us > 0);
  assert_true(s.gaps_on_cores);
  assert_true(s.critical_us > 0 && s.critical_us <= s.span_us + 1e-6);
  trace_flow_counts fc = flows_of(d);
  if (fc.deps == 0 || fc.deps != fc.edges || fc.deps != s.edges - s.missing_deps)
    fail_msg("paged_attention: %" PRIu64 " dep flows, %" PRIu64 " edges in the trace, "
             "%" PRIu64 " args.deps entries (%" PRIu64 " to tasks not in it)",
             fc.deps, fc.edges, s.edges, s.missing_deps);
  fprintf(stderr, "paged_attention: %" PRIu64 " dep flows for %" PRIu64 " edges\n", fc.deps,
          s.edges);
  for (size_t i = 0; i < s.ntracks; i++)
    assert_true(s.tracks[i].busy_us <= s.tracks[i].span_us + 1e-6);
  trace_summary_free(&s);
  trace_json_free(d);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_blocks_once),
      cmocka_unit_test(test_mix_blocks_once),
      cmocka_unit_test(test_checking_mode_blocks_once),
      cmocka_unit_test(test_set_trace_during_a_run),
      cmocka_unit_test(test_paged_attention_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
