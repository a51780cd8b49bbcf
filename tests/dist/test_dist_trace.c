/* test_dist_trace.c — traces of multi-chip runs: ring_shuffle with a trace
 * path writes one merged file that passes the schema check, with one
 * process per rank, block slices on both and the remote store, notify and
 * wait as "comm" slices of each rank; a rank that runs several chip tasks in
 * one node run (dist_epochs) shows all of them, with distinct task ids; the
 * ranks' temporary files are gone afterwards, also when a chip dies during
 * the run; the merged file of a 2-chip run draws one arrow per dependency
 * edge its ranks recorded and one from each notify to the wait it
 * released on the peer. */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/kernels.h"
#include "scenes/dist_scene.h"
#include "trace_json.h"
#include "trace_read.h"

/* A fresh directory, so that any leftover file is visible. */
static void make_dir(char *dir, size_t len) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, len, "%s/pto_dist_trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(dir));
}

/* Files in dir besides `keep` (which is removed); then removes dir. */
static int strays(const char *dir, const char *keep) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, keep)) continue;
    fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
    n++;
  }
  closedir(d);
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, keep);
  unlink(p);
  rmdir(dir);
  return n;
}

typedef struct rank_seen {
  int blocks, store, notify, wait;
} rank_seen;

static void test_ring_shuffle_trace(void **state) {
  (void)state;
  char dir[4096], path[4200];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/rs.json", dir);
  const pto_scene *s = pto_scene_find("ring_shuffle");
  assert_non_null(s);
  pto_scene_opts o = {0};
  o.rounds = 2; /* each node run rewrites the file */
  o.trace = path;
  pto_scene_report rep = {0};
  assert_int_equal(s->run(&o, &rep), 0);
  assert_true(rep.verified);

  trace_json_doc *doc = NULL;
  char err[256] = "";
  assert_int_equal(trace_json_load(path, &doc, err, sizeof err), 0);
  const trace_json *root = trace_json_root(doc);
  if (trace_validate(root, err, sizeof err)) fail_msg("schema: %s", err);
  trace_summary sum;
  assert_int_equal(trace_summarize(root, &sum, err, sizeof err), 0);
  assert_int_equal(sum.dup_blocks, 0);
  assert_int_equal(sum.blocks, 2); /* one block per rank, of the last round */
  trace_summary_free(&sum);

  /* pids in the file are rank + 1 */
  rank_seen seen[3] = {{0}};
  int processes = 0;
  const trace_json *evs = trace_json_get(root, "traceEvents");
  assert_non_null(evs);
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *name = trace_json_str(e, "name"), *cat = trace_json_str(e, "cat");
    double pid = -1;
    assert_true(trace_json_num(e, "pid", &pid));
    assert_true(pid >= 1 && pid <= 2);
    rank_seen *r = &seen[(int)pid];
    if (name && !strcmp(name, "process_name")) processes++;
    if (!cat) continue;
    if (!strcmp(cat, "block")) r->blocks++;
    if (strcmp(cat, "comm")) continue;
    double peer = -1;
    if (!strcmp(name, "remote_store") && trace_json_num(trace_json_get(e, "args"), "peer", &peer))
      r->store += (int)peer == 2 - (int)pid; /* rank r stores into rank 1 - r */
    r->notify += !strcmp(name, "notify");
    r->wait += !strcmp(name, "wait");
  }
  assert_int_equal(processes, 2);
  for (int p = 1; p <= 2; p++) {
    assert_int_equal(seen[p].blocks, 1);
    assert_int_equal(seen[p].store, 1);
    assert_int_equal(seen[p].notify, 1);
    assert_int_equal(seen[p].wait, 1);
  }
  trace_json_free(doc);
  assert_int_equal(strays(dir, "rs.json"), 0);
}

/* dist_epochs: 3 chip tasks per rank in one node run, each one task of 3
 * blocks. All 3 appear in the rank's process, as tasks 0, 1, 2. */
#define EPOCHS       3
#define EPOCH_BLOCKS 3

typedef struct block_seen {
  int64_t pid, task, block;
} block_seen;

static void test_several_chip_tasks_per_rank(void **state) {
  (void)state;
  char dir[4096], path[4200];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/ep.json", dir);
  const pto_scene *s = pto_scene_find("dist_epochs");
  assert_non_null(s);
  pto_scene_opts o = {0};
  o.trace = path;
  pto_scene_report rep = {0};
  assert_int_equal(s->run(&o, &rep), 0);
  assert_true(rep.verified);

  trace_json_doc *doc = NULL;
  char err[256] = "";
  assert_int_equal(trace_json_load(path, &doc, err, sizeof err), 0);
  const trace_json *root = trace_json_root(doc);
  if (trace_validate(root, err, sizeof err)) fail_msg("schema: %s", err);
  trace_summary sum;
  assert_int_equal(trace_summarize(root, &sum, err, sizeof err), 0);
  assert_int_equal(sum.dup_blocks, 0);
  assert_int_equal(sum.blocks, 2 * EPOCHS * EPOCH_BLOCKS);
  assert_int_equal(sum.tasks, 2 * EPOCHS); /* distinct (pid, task) with blocks */
  assert_int_equal(sum.missing_deps, 0);
  /* Each epoch each rank sets the peer's cell (notify SET e) and waits for
   * its own (>= e): one arrow from every notify to the peer's wait. */
  trace_flow_counts fc;
  if (trace_check_flows(root, &fc, err, sizeof err)) fail_msg("flows: %s", err);
  if (fc.signals != 2 * EPOCHS || fc.unmatched != 0 || fc.deps != sum.edges)
    fail_msg("signal flows %" PRIu64 " (unmatched ends %" PRIu64 "), dep flows %" PRIu64
             " for %" PRIu64 " edges; expected %d, 0, and as many dep flows as edges",
             fc.signals, fc.unmatched, fc.deps, sum.edges, 2 * EPOCHS);
  trace_summary_free(&sum);

  block_seen seen[2 * EPOCHS * EPOCH_BLOCKS];
  int nseen = 0, processes = 0, per_pid[3] = {0};
  const trace_json *evs = trace_json_get(root, "traceEvents");
  assert_non_null(evs);
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *name = trace_json_str(e, "name"), *cat = trace_json_str(e, "cat");
    double pid = -1, task = -1, block = -1;
    assert_true(trace_json_num(e, "pid", &pid));
    assert_true(pid >= 1 && pid <= 2);
    if (name && !strcmp(name, "process_name")) processes++;
    if (!cat || strcmp(cat, "block")) continue;
    const trace_json *args = trace_json_get(e, "args");
    assert_true(trace_json_num(args, "task", &task));
    assert_true(trace_json_num(args, "block", &block));
    assert_true(task >= 0 && task < EPOCHS); /* one task per chip task, renumbered */
    assert_true(block >= 0 && block < EPOCH_BLOCKS);
    assert_true(nseen < 2 * EPOCHS * EPOCH_BLOCKS);
    block_seen b = {(int64_t)pid, (int64_t)task, (int64_t)block};
    for (int k = 0; k < nseen; k++)
      assert_false(seen[k].pid == b.pid && seen[k].task == b.task && seen[k].block == b.block);
    seen[nseen++] = b;
    per_pid[(int)pid]++;
  }
  assert_int_equal(processes, 2); /* each rank named once, not once per chip task */
  for (int p = 1; p <= 2; p++)
    assert_int_equal(per_pid[p], EPOCHS * EPOCH_BLOCKS);
  trace_json_free(doc);
  assert_int_equal(strays(dir, "ep.json"), 0);
}

/* A chip that dies mid-run: the run fails, and no rank file remains. */
static int k_die;

static int die_kernel(const pto_kctx *ctx) {
  if (pto_comm_chip(pto_kctx_comm(ctx)) == 1) abort();
  return 0;
}

static int die_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "die", die_kernel, &k_die);
}

static void die_node(pto_node_orch *no, void *arg) {
  const int chips[2] = {0, 1};
  pto_args a;
  pto_args_init(&a);
  dist_scalars(&a, k_die, 0, 1);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

static void test_dead_chip_leaves_no_file(void **state) {
  (void)state;
  char dir[4096], path[4200];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/dead.json", dir);
  pto_scene_opts o = {0};
  o.trace = path;
  pto_node_config cfg;
  dist_config(&o, 2, die_init, &cfg);
  cfg.quiet = true;
  pto_node *n;
  pto_error_info err;
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  assert_int_equal(pto_node_run(n, die_node, NULL, &err), PTO_ECHIP_DIED);
  pto_node_destroy(n);
  /* rank 0's part may have been merged into dead.json; nothing else stays */
  assert_int_equal(strays(dir, "dead.json"), 0);
}

/* Arrows of a 2-chip run: two chip tasks per rank (one node run), each a
 * chain fill -> step -> signal over a chip-local tensor (2 edges), the
 * signal kernel setting the peer's cell (notify SET 1) and waiting for its
 * own (>= 1). The merged file must show 2 ranks x 2 chip tasks x 2 edges
 * dep flows, each between the right tasks of the right rank (the ranks
 * wrote final task ids, 0..5), and 2 ranks x 2 chip tasks notify-to-wait
 * flows, every end matched. */
static int k_fill, k_step, k_signal;
/* 0: the signal kernel sets the peer's cell to 1 and waits for >= 1; n > 0:
 * it adds 1 to the peer's cell n times and waits for >= n, so the n-th add
 * releases the wait (its arrow) and the others release none (unmatched
 * starts). Set before the node forks its chips. */
static int arrow_adds;

static int step_kernel(const pto_kctx *ctx) {
  float *x = pto_tensor_f32(&ctx->tensors[0]);
  for (int64_t i = 0; i < pto_tensor_numel(&ctx->tensors[0]); i++)
    x[i] += 1.0f;
  return 0;
}

static int signal_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)ctx->scalars[0];
  int me = pto_comm_rank(pto_kctx_comm(ctx), dom);
  int rc = 0;
  if (arrow_adds == 0) rc = pto_notify(ctx, dom, 1 - me, &ctx->tensors[1], PTO_SIGNAL_SET, 1);
  for (int i = 0; i < arrow_adds && !rc; i++)
    rc = pto_notify(ctx, dom, 1 - me, &ctx->tensors[1], PTO_SIGNAL_ADD, 1);
  int want = arrow_adds ? arrow_adds : 1;
  return rc ? rc : pto_signal_wait(ctx, dom, &ctx->tensors[1], PTO_CMP_GE, want, -1);
}

static int arrows_init(pto_chip *chip, int rank, void *arg) {
  int rc = pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &k_fill);
  if (!rc) rc = pto_kernel_register_aiv(chip, "step", step_kernel, &k_step);
  return rc ? rc : pto_kernel_register_aiv(chip, "signal", signal_kernel, &k_signal);
}

static void arrows_chip(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_tensor x;
  int64_t n = 16;
  pto_tensor sig = t->args->tensors[t->group_rank];
  if (pto_tensor_desc(&x, PTO_F32, 1, &n) ||
      pto_submit_v(o, k_fill, PTO_OUT(&x), PTO_SCALAR(1.0f)) ||
      pto_submit_v(o, k_step, PTO_INOUT(&x)) ||
      pto_submit_v(o, k_signal, PTO_IN(&x), PTO_INOUT(&sig), PTO_SCALAR(t->args->scalars[0])))
    return;
}

static void arrows_node(pto_node_orch *no, void *arg) {
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 1, &dom)) return;
  for (int task = 0; task < 2; task++) {
    pto_args a;
    pto_args_init(&a);
    for (int r = 0; r < 2; r++) {
      int64_t one = 1;
      pto_tensor sig;
      if (pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig)) return;
      pto_args_inout(&a, &sig);
    }
    pto_args_scalar(&a, (uint64_t)dom);
    pto_node_submit_group(no, chips, 2, arrows_chip, &a, NULL);
  }
}

static void two_chip_arrows(int adds) {
  arrow_adds = adds;
  const uint64_t unmatched = adds > 1 ? 4 * (uint64_t)(adds - 1) : 0;
  char dir[4096], path[4200];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/arrows.json", dir);
  pto_scene_opts o = {0};
  o.trace = path;
  pto_node_config cfg;
  dist_config(&o, 2, arrows_init, &cfg);
  pto_node *n;
  pto_error_info err;
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  int rc = pto_node_run(n, arrows_node, NULL, &err);
  if (rc) fail_msg("node run: %s: %s", pto_status_name(rc), err.details);
  pto_node_destroy(n);

  trace_json_doc *doc = NULL;
  char msg[256] = "";
  assert_int_equal(trace_json_load(path, &doc, msg, sizeof msg), 0);
  const trace_json *root = trace_json_root(doc);
  if (trace_validate(root, msg, sizeof msg)) fail_msg("schema: %s", msg);
  trace_summary sum;
  assert_int_equal(trace_summarize(root, &sum, msg, sizeof msg), 0);
  trace_flow_counts fc;
  if (trace_check_flows(root, &fc, msg, sizeof msg)) fail_msg("flows: %s", msg);
  fprintf(stderr,
          "2-chip run: %" PRIu64 " tasks, %" PRIu64 " args.deps edges, %" PRIu64
          " dep flows, %" PRIu64 " notify-to-wait flows, %" PRIu64 " unmatched ends\n",
          sum.tasks, sum.edges, fc.deps, fc.signals, fc.unmatched);
  /* An edge is recorded when the producer is still in flight at submit: 8
   * at most (2 per chip task), fewer when a kernel finished first (a
   * loaded machine); every recorded edge has its arrow, and only those. */
  if (sum.edges > 8 || sum.edges < 1 || sum.missing_deps != 0 || fc.deps != sum.edges ||
      fc.edges != sum.edges || fc.signals != 4 || fc.unmatched != unmatched || sum.dup_blocks != 0)
    fail_msg("%d adds: edges %" PRIu64 " (missing %" PRIu64 "), dep flows %" PRIu64 " over %" PRIu64
             " edges, signal flows %" PRIu64 " (unmatched %" PRIu64 "), duplicate blocks %" PRIu64
             "; expected 1..8 (0), as many over as many, 4 (%" PRIu64 "), 0",
             adds, sum.edges, sum.missing_deps, fc.deps, fc.edges, fc.signals, fc.unmatched,
             sum.dup_blocks, unmatched);
  /* final ids: each rank's tasks are 0..5, its dep flows join t -> t + 1
   * within one chip task (0->1, 1->2, 3->4, 4->5) */
  const trace_json *evs = trace_json_get(root, "traceEvents");
  int per_rank[3] = {0}, processes = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *name = trace_json_str(e, "name"), *ph = trace_json_str(e, "ph");
    double pid = 0, from = -1, to = -1;
    trace_json_num(e, "pid", &pid);
    if (name && !strcmp(name, "process_name")) processes++;
    if (!ph || strcmp(ph, "s") || !name || strcmp(name, "dep")) continue;
    trace_json_num(trace_json_get(e, "args"), "from", &from);
    trace_json_num(trace_json_get(e, "args"), "to", &to);
    if (to != from + 1 || from < 0 || to > 5 || (int)from == 2)
      fail_msg("rank %.0f: dep flow %.0f -> %.0f", pid - 1, from, to);
    per_rank[(int)pid]++;
  }
  assert_int_equal(processes, 2);
  assert_int_equal(per_rank[1] + per_rank[2], (int)sum.edges);
  trace_summary_free(&sum);
  trace_json_free(doc);
  assert_int_equal(strays(dir, "arrows.json"), 0);
}

static void test_two_chip_arrows(void **state) {
  (void)state;
  two_chip_arrows(0);
}

/* Notifies that add: the arrow starts at the add whose sum the wait saw. */
static void test_two_chip_arrows_add(void **state) {
  (void)state;
  two_chip_arrows(3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_shuffle_trace),
      cmocka_unit_test(test_several_chip_tasks_per_rank),
      cmocka_unit_test(test_dead_chip_leaves_no_file),
      cmocka_unit_test(test_two_chip_arrows),
      cmocka_unit_test(test_two_chip_arrows_add),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
