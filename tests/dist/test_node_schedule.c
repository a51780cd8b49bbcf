/* test_node_schedule.c — controlled schedules on a node (docs/schedules.md,
 * "Several chips"):
 *   - the order of host tasks and chip tasks is the seed's: three tasks
 *     that update one host value without declaring it (x = x * m + a each)
 *     give the same value for the same seed, and more than one value over
 *     seeds; a record of a seed replays to that value and re-records the
 *     same files;
 *   - the landing order of held-back remote stores (dist_race_publisher,
 *     fault injection on): a failing seed's record replays to the same
 *     wrong values 5 of 5;
 *   - a traced replay starts each rank's blocks in the recorded order, on
 *     the recorded cores (dist_epochs; the race's wrong replays too);
 *   - departures stop the run with PTO_EREPLAY naming where (a task more,
 *     a node record cut short, a delivery order changed, a chip file
 *     missing); under mpirun: tests/mpi/test_node_mpi_schedule.c.
 * Nothing here depends on timing: every choice is the seed's or the
 * record's. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "scenes/dist_scene.h"
#include "trace_read.h"

#define TEST_DEV0 70

static char dir[64];

static void update(float *x, const pto_args *a) {
  *x = *x * (float)a->scalars[0] + (float)a->scalars[1];
}

static int k_update(const pto_kctx *ctx) {
  float *x = pto_tensor_f32(&ctx->tensors[0]);
  *x = *x * (float)ctx->scalars[0] + (float)ctx->scalars[1];
  return 0;
}

static int host_update(const pto_args *a, void *arg) {
  (void)arg;
  update(pto_tensor_f32(&a->tensors[0]), a);
  return 0;
}

static int init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  int k;
  return pto_kernel_register_aiv(chip, "update", k_update, &k);
}

static void chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_nodep(&a, &t->args->tensors[0]);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_args_scalar(&a, t->args->scalars[1]);
  pto_submit(o, 0, &a, NULL, NULL);
}

typedef struct prog {
  pto_tensor x;
  int extra; /* tasks more than the three (a departure) */
} prog;

static void updates(pto_args *a, const pto_tensor *x, int m, int add) {
  pto_args_init(a);
  pto_args_nodep(a, x); /* undeclared: the order is the schedule's */
  pto_args_scalar(a, (uint64_t)m);
  pto_args_scalar(a, (uint64_t)add);
}

static void node_fn(pto_node_orch *no, void *arg) {
  prog *p = arg;
  pto_args a;
  updates(&a, &p->x, 2, 1);
  pto_node_submit_host(no, -1, host_update, NULL, &a, NULL);
  updates(&a, &p->x, 3, 0);
  pto_node_submit(no, 0, chip_orch, &a, NULL);
  updates(&a, &p->x, 1, 5);
  pto_node_submit(no, 1, chip_orch, &a, NULL);
  for (int i = 0; i < p->extra; i++) {
    updates(&a, &p->x, 1, 1);
    pto_node_submit(no, 1, chip_orch, &a, NULL);
  }
}

/* One node run of the three updates from x = 1 under seed / record /
 * replay; returns its status, *x the value, err the details. */
static int run_updates(uint64_t seed, const char *record, const char *replay, int extra, float *x,
                       pto_error_info *err) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  dist_config(&o, 2, init, &cfg);
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  cfg.device_ids = devs;
  cfg.nworkers = 1;
  cfg.chip.schedule_seed = seed;
  cfg.chip.record_path = record;
  cfg.chip.replay_path = replay;
  pto_node *n;
  int rc = pto_node_create(&cfg, &n, err);
  if (rc) return rc;
  prog p = {.extra = extra};
  int64_t one = 1;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &one, &p.x), 0);
  *pto_tensor_f32(&p.x) = 1.0f;
  rc = pto_node_run(n, node_fn, &p, err);
  *x = *pto_tensor_f32(&p.x);
  pto_node_destroy(n);
  return rc;
}

static char *path(const char *name) {
  static char buf[4][128];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, 128, "%s/%s", dir, name);
  return b;
}

static char *slurp(const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) return NULL;
  char *s = calloc(1, 65536);
  size_t k = fread(s, 1, 65535, f);
  s[k] = 0;
  fclose(f);
  return s;
}

static bool same_file(const char *a, const char *b) {
  char *x = slurp(a), *y = slurp(b);
  bool same = x && y && strcmp(x, y) == 0;
  free(x);
  free(y);
  return same;
}

static void test_order_of_host_and_chip_tasks(void **state) {
  (void)state;
  pto_error_info err;
  float seen[8] = {0};
  int distinct = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    float a, b;
    assert_int_equal(run_updates(seed, NULL, NULL, 0, &a, &err), 0);
    assert_int_equal(run_updates(seed, NULL, NULL, 0, &b, &err), 0);
    assert_true(a == b); /* the same seed, the same order */
    bool known = false;
    for (int i = 0; i < distinct; i++)
      known |= seen[i] == a;
    if (!known) seen[distinct++] = a;
  }
  /* 6 orders give 6 values; 8 seeds that all drew one order would mean
   * the seed does not choose */
  assert_true(distinct >= 2);
  float r, p;
  assert_int_equal(run_updates(5, path("u"), NULL, 0, &r, &err), 0);
  assert_int_equal(run_updates(0, path("v"), path("u"), 0, &p, &err), 0);
  assert_true(r == p);
  /* node task 0 is the host task (no chip files), 1 ran on chip 0, 2 on chip 1 */
  const char *files[] = {"", ".t1.c0", ".t2.c1", ".t1.c0.land", ".t2.c1.land"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char a[160], b[160];
    snprintf(a, sizeof a, "%s%s", path("u"), files[i]);
    snprintf(b, sizeof b, "%s%s", path("v"), files[i]);
    if (!same_file(a, b)) fail_msg("%s and %s differ", a, b);
  }
  char host[160];
  snprintf(host, sizeof host, "%s.t0.c2", path("u"));
  assert_null(fopen(host, "r")); /* a host task writes no chip record */
}

static void expect_ereplay(int rc, const pto_error_info *err, const char *want) {
  if (rc != PTO_EREPLAY || !strstr(err->details, want))
    fail_msg("expected PTO_EREPLAY with '%s', got %s: %s", want, pto_status_name(rc), err->details);
}

static void write_text(const char *file, const char *text) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_departures_named(void **state) {
  (void)state;
  pto_error_info err;
  float x;
  assert_int_equal(run_updates(3, path("d"), NULL, 0, &x, &err), 0);
  /* a task more than recorded */
  expect_ereplay(run_updates(0, NULL, path("d"), 1, &x, &err), &err,
                 "diverged at line 4: the record starts node task 0 with 3 submitted, the run "
                 "waits with 4");
  /* the node record cut short */
  char *text = slurp(path("d"));
  assert_non_null(text);
  text[strlen(text) - 4] = 0; /* drops "end\n" */
  write_text(path("cut"), text);
  free(text);
  expect_ereplay(run_updates(0, NULL, path("cut"), 0, &x, &err), &err, "truncated");
  /* a chip's file missing */
  char chip[160];
  snprintf(chip, sizeof chip, "%s.t1.c0", path("d"));
  text = slurp(chip);
  assert_non_null(text);
  remove(chip);
  expect_ereplay(run_updates(0, NULL, path("d"), 0, &x, &err), &err, ".t1.c0");
  write_text(chip, text);
  free(text);
  /* the same program replays */
  assert_int_equal(run_updates(0, NULL, path("d"), 0, &x, &err), 0);
}

/* Runs on one node replaying one record: run 1 departs from it (a task
 * more: PTO_EREPLAY), run 2 is the recorded program and replays it to the
 * recorded value: nothing of run 1's replay (the node record's position,
 * a chip task's schedule or delivery record) is left for run 2. */
static void test_replay_after_a_departure_on_one_node(void **state) {
  (void)state;
  pto_error_info err;
  float want;
  assert_int_equal(run_updates(6, path("r"), NULL, 0, &want, &err), 0);
  pto_scene_opts o = {0};
  pto_node_config cfg;
  dist_config(&o, 2, init, &cfg);
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  cfg.device_ids = devs;
  cfg.nworkers = 1;
  cfg.chip.replay_path = path("r");
  pto_node *n;
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  prog p = {.extra = 1};
  int64_t one = 1;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &one, &p.x), 0);
  for (int run = 0; run < 3; run++) {
    p.extra = run == 0; /* run 1 departs; runs 2 and 3 replay */
    *pto_tensor_f32(&p.x) = 1.0f;
    int rc = pto_node_run(n, node_fn, &p, &err);
    if (run == 0) {
      expect_ereplay(rc, &err, "with 3 submitted, the run waits with 4");
      continue;
    }
    if (rc) fail_msg("run %d after a departure: %s: %s", run + 1, pto_status_name(rc), err.details);
    if (*pto_tensor_f32(&p.x) != want)
      fail_msg("run %d after a departure: x = %g, the record's run gave %g", run + 1,
               (double)*pto_tensor_f32(&p.x), (double)want);
  }
  pto_node_destroy(n);
}

/* A scene under seed / record / replay (its config reads the
 * environment, as under pto run), traced to `trace` if set; *msg: what
 * differed. */
static int scene_traced(const char *name, const char *seed, const char *record, const char *replay,
                        const char *trace, char *msg, size_t n) {
  const pto_scene *sc = pto_scene_find(name);
  assert_non_null(sc);
  seed ? setenv("PTO_SCHEDULE_SEED", seed, 1) : unsetenv("PTO_SCHEDULE_SEED");
  record ? setenv("PTO_RECORD", record, 1) : unsetenv("PTO_RECORD");
  replay ? setenv("PTO_REPLAY", replay, 1) : unsetenv("PTO_REPLAY");
  pto_scene_opts o = {.trace = trace};
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  sc->run(&o, &rep);
  unsetenv("PTO_SCHEDULE_SEED");
  unsetenv("PTO_RECORD");
  unsetenv("PTO_REPLAY");
  snprintf(msg, n, "%s", rep.message);
  return rep.status ? rep.status : rep.verified ? 0 : PTO_EFATAL;
}

static int scene(const char *name, const char *seed, const char *record, const char *replay,
                 char *msg, size_t n) {
  return scene_traced(name, seed, record, replay, NULL, msg, n);
}

static int race(const char *seed, const char *record, const char *replay, char *msg, size_t n) {
  return scene("dist_race_publisher", seed, record, replay, msg, n);
}

static void test_race_replayed(void **state) {
  (void)state;
  char msg[512], again[512], seed[16] = "";
  int failing = 0;
  for (int s = 1; s <= 20 && !failing; s++) {
    snprintf(seed, sizeof seed, "%d", s);
    if (race(seed, path("race"), NULL, msg, sizeof msg) == PTO_EFATAL) failing = s;
  }
  assert_true(failing > 0); /* the race shows under some seed */
  assert_non_null(strstr(msg, "elements differ"));
  for (int i = 0; i < 5; i++) {
    assert_int_equal(race(NULL, NULL, path("race"), again, sizeof again), PTO_EFATAL);
    assert_string_equal(again, msg); /* the same wrong values */
  }
  /* a delivery order changed: the replay stops naming the line */
  char land[160];
  snprintf(land, sizeof land, "%s.t0.c0.land", path("race"));
  char *text = slurp(land);
  assert_non_null(text);
  assert_non_null(strstr(text, "\nL 0 -1 5 ")); /* one batch: 4 quarters and the signal */
  free(text);
  write_text(land, "pto-delivery 1\nL 0 -1 5 0 0 1 2 3\nend\n");
  const pto_scene *sc = pto_scene_find("dist_race_publisher");
  setenv("PTO_REPLAY", path("race"), 1);
  pto_scene_opts o = {0};
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  sc->run(&o, &rep);
  unsetenv("PTO_REPLAY");
  expect_ereplay(rep.status, &rep.err, "line 2: the order is not a permutation of the batch");
}

/* The node record at path's chip task files (node tasks 0..2 of
 * dist_epochs, chips 0 and 1) are those at other's; *yields counts their
 * Y lines. */
static void same_chip_files(const char *a, const char *b, int *yields) {
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) {
      char fa[160], fb[160];
      snprintf(fa, sizeof fa, "%s.t%d.c%d", a, k, c);
      snprintf(fb, sizeof fb, "%s.t%d.c%d", b, k, c);
      if (!same_file(fa, fb)) fail_msg("%s and %s differ", fa, fb);
      char *t = slurp(fa);
      for (char *y = t; y && (y = strstr(y, "\nY ")) != NULL; y++)
        ++*yields;
      free(t);
    }
}

/* Replaces line `from` (a prefix, at a line's start) of file by `to` plus
 * that line (before: insert) or that line plus `to` (after). */
static bool insert_line(const char *file, const char *at, const char *add, bool after) {
  char *t = slurp(file), *l = t ? strstr(t, at) : NULL;
  if (!l) {
    free(t);
    return false;
  }
  char *end = after ? strchr(l, '\n') + 1 : l;
  char *out = calloc(1, strlen(t) + strlen(add) + 1);
  memcpy(out, t, (size_t)(end - t));
  strcat(strcat(out, add), end);
  write_text(file, out);
  free(out);
  free(t);
  return true;
}

/* dist_epochs: each chip's two waiting blocks wait for the other chip's
 * publisher block. One block at a time per chip, with the waiters first on
 * both chips, waited until the timeout; now a waiting block yields to the
 * chip's other blocks and resumes once its signal came. Every seed passes,
 * a record replays to the same files, a yield and resume put into a record
 * are made as recorded, and a yield where the block does not wait is a
 * named departure. */
static void test_waiting_blocks_yield(void **state) {
  (void)state;
  char msg[512], seed[16], rec[32], c0[160] = "";
  int yields = 0, waiter = -1;
  for (int s = 1; s <= 10; s++) {
    snprintf(seed, sizeof seed, "%d", s);
    snprintf(rec, sizeof rec, "ep%d", s);
    int rc = scene("dist_epochs", seed, path(rec), NULL, msg, sizeof msg);
    if (rc) fail_msg("dist_epochs, seed %d: %s %s", s, pto_status_name(rc), msg);
    assert_int_equal(scene("dist_epochs", NULL, path("eq"), path(rec), msg, sizeof msg), 0);
    same_chip_files(path(rec), path("eq"), &yields);
    /* chip 0's first waiter (block 1 or 2) in node task 0 that did not
     * yield, if any, for the yield put into a record below */
    char file[160];
    snprintf(file, sizeof file, "%s.t0.c0", path(rec));
    char *t = slurp(file);
    for (char *l = t; waiter < 0 && l && (l = strstr(l, "\nS 0 0 ")) != NULL;) {
      l += 7;
      char *next = strchr(l, '\n');
      if (atoi(l) > 0 && next && strncmp(next, "\nY ", 3) != 0) {
        waiter = atoi(l);
        snprintf(c0, sizeof c0, "%s", file);
      }
    }
    free(t);
  }
  print_message("dist_epochs: 10 of 10 seeds passed and replayed alike, %d yields recorded\n",
                yields);
  if (waiter > 0) {
    /* a yield and its resume put into that record: made as recorded
     * (the block yields though its signal may be there) */
    char at[48], add[64];
    snprintf(at, sizeof at, "S 0 0 %d:", waiter);
    snprintf(add, sizeof add, "Y 0 %d 1\nR 0 %d\n", waiter, waiter);
    assert_true(insert_line(c0, at, add, true));
    c0[strlen(c0) - 6] = 0; /* the node record's path */
    assert_int_equal(scene("dist_epochs", NULL, path("eq"), c0, msg, sizeof msg), 0);
    same_chip_files(c0, path("eq"), &yields);
  }
  assert_true(yields >= 1); /* recorded, or put in and made */
  /* a yield of the publisher, which does not wait: named */
  snprintf(c0, sizeof c0, "%s.t0.c0", path("ep1"));
  assert_true(insert_line(c0, "S 0 0 0:", "Y 0 0 1\n", true));
  setenv("PTO_REPLAY", path("ep1"), 1);
  const pto_scene *sc = pto_scene_find("dist_epochs");
  pto_scene_opts o = {0};
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  sc->run(&o, &rep);
  unsetenv("PTO_REPLAY");
  expect_ereplay(rep.status, &rep.err,
                 "block 0 of task 0 does not wait here (the record has it yield at its wait 1)");
}

/* ---- traces of a replayed node run ---- */

typedef struct slice {
  double ts;
  int64_t pid, task, block, part, tid;
} slice;

static int64_t arg_of(const trace_json *ev, const char *key) {
  double x = 0; /* a block's first part has no args.part */
  trace_json_num(trace_json_get(ev, "args"), key, &x);
  return (int64_t)x;
}

/* by rank (pid), then start; the parts of one block (a MIX block's, whose
 * clocks may read either way) by part */
static int by_rank_time(const void *a, const void *b) {
  const slice *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->task == y->task && x->block == y->block) return (x->part > y->part) - (x->part < y->part);
  return (x->ts > y->ts) - (x->ts < y->ts);
}

/* The block slices of a node trace, each rank's in start order; returns
 * how many. */
static int rank_block_order(const char *file, slice *out, int max) {
  char err[256] = "";
  trace_json_doc *d = NULL;
  if (trace_json_load(file, &d, err, sizeof err)) fail_msg("%s: %s", file, err);
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  assert_non_null(evs);
  int n = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *cat = trace_json_str(e, "cat"), *ph = trace_json_str(e, "ph");
    if (!cat || !ph || ph[0] != 'X' || strcmp(cat, "block") != 0) continue;
    double ts = 0, pid = 0, tid = 0;
    trace_json_num(e, "ts", &ts);
    trace_json_num(e, "pid", &pid);
    trace_json_num(e, "tid", &tid);
    if (n == max) fail_msg("%s: more than %d block slices", file, max);
    out[n++] = (slice){
        ts, (int64_t)pid, arg_of(e, "task"), arg_of(e, "block"), arg_of(e, "part"), (int64_t)tid};
  }
  trace_json_free(d);
  qsort(out, (size_t)n, sizeof *out, by_rank_time);
  return n;
}

/* A recorded node run and its replays, traced: each rank's blocks start in
 * the recorded order, on the recorded cores (the same track), for a
 * correct scene and for a race whose replays give the record's wrong
 * values. */
static void test_replayed_trace_order(void **state) {
  (void)state;
  static const struct {
    const char *scene, *seed;
    int rc; /* the recorded run's status: the race fails its check */
  } runs[] = {{"dist_epochs", "3", 0}, {"dist_race_publisher", NULL, PTO_EFATAL}};
  char msg[512], again[512];
  static slice a[4096], b[4096];
  for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
    const char *seed = runs[r].seed;
    char s[16];
    if (!seed) { /* the race's first failing seed */
      for (int k = 1; k <= 20 && !seed; k++) {
        snprintf(s, sizeof s, "%d", k);
        if (race(s, NULL, NULL, msg, sizeof msg) == PTO_EFATAL) seed = s;
      }
      assert_non_null(seed);
    }
    int rc = scene_traced(runs[r].scene, seed, path("tr"), NULL, path("t1.json"), msg, sizeof msg);
    if (rc != runs[r].rc)
      fail_msg("%s, seed %s: %s %s", runs[r].scene, seed, pto_status_name(rc), msg);
    int na = rank_block_order(path("t1.json"), a, 4096);
    assert_true(na >= 2);
    for (int rep = 0; rep < 2; rep++) {
      rc =
          scene_traced(runs[r].scene, NULL, NULL, path("tr"), path("t2.json"), again, sizeof again);
      assert_int_equal(rc, runs[r].rc);
      assert_string_equal(again, msg);
      int nb = rank_block_order(path("t2.json"), b, 4096);
      if (nb != na) fail_msg("%s: %d block slices recorded, %d replayed", runs[r].scene, na, nb);
      for (int i = 0; i < na; i++)
        if (a[i].pid != b[i].pid || a[i].task != b[i].task || a[i].block != b[i].block ||
            a[i].part != b[i].part || a[i].tid != b[i].tid)
          fail_msg("%s, replay %d: slice %d is rank %" PRId64 " task %" PRId64 " block %" PRId64
                   " on track %" PRId64 ", recorded rank %" PRId64 " task %" PRId64
                   " block %" PRId64 " on track %" PRId64,
                   runs[r].scene, rep + 1, i, b[i].pid - 1, b[i].task, b[i].block, b[i].tid,
                   a[i].pid - 1, a[i].task, a[i].block, a[i].tid);
    }
    print_message("%s: %d block slices, in the recorded order in 2 of 2 replays\n", runs[r].scene,
                  na);
  }
}

/* ---- a wait for a signal that needs a task not yet submitted ---- */

enum { K_WAIT = 0, K_SIGNAL = 1 };

/* tensors: my "sig" cell, my output element; waits for the peer's signal */
static int k_wait(const pto_kctx *ctx) {
  int rc = pto_signal_wait(ctx, (pto_domain)ctx->scalars[0], &ctx->tensors[0], PTO_CMP_GE, 1, -1);
  if (!rc) *pto_tensor_f32(&ctx->tensors[1]) = 1.0f;
  return rc;
}

/* tensors: my "sig" cell; signals the peer's */
static int k_signal(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)ctx->scalars[0];
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2;
  return pto_notify(ctx, dom, peer, &ctx->tensors[0], PTO_SIGNAL_SET, 1);
}

static int wait_init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  int a = -1, b = -1, rc = pto_kernel_register_aiv(chip, "wait_peer", k_wait, &a);
  if (!rc) rc = pto_kernel_register_aiv(chip, "signal_peer", k_signal, &b);
  return rc ? rc : a == K_WAIT && b == K_SIGNAL ? 0 : PTO_EINVAL;
}

/* Each chip submits its waiter first, then (independent of it: the cell is
 * NO_DEP) the task that signals the peer's waiter. */
static void wait_chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_tensor *sig = &t->args->tensors[2 * t->group_rank];
  pto_args a;
  pto_args_init(&a);
  pto_args_nodep(&a, sig);
  pto_args_output_existing(&a, &t->args->tensors[2 * t->group_rank + 1]);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_submit(o, K_WAIT, &a, NULL, NULL);
  pto_args_init(&a);
  pto_args_nodep(&a, sig);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_submit(o, K_SIGNAL, &a, NULL, NULL);
}

static void wait_node_fn(pto_node_orch *no, void *arg) {
  pto_tensor *out = arg;
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, dist_pair_chips, 2, bufs, 1, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t one = 1, at = r;
    pto_tensor sig, o;
    if (pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig) ||
        pto_tensor_slice(out, &at, &one, &o))
      return;
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &o);
  }
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, dist_pair_chips, 2, wait_chip_orch, &a, NULL);
}

/* A block that waits for a signal which a task its chip has not submitted
 * yet must send first (through the peer) yields after the submit, so the
 * orchestration goes on: every seed passes. Waiting in place there, both
 * chips' waiters held their orchestrations up until the wait timeout under
 * the seeds that start them before the second submit. */
static void test_wait_before_the_signalling_submit(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 12; seed++) {
    pto_scene_opts o = {0};
    pto_node_config cfg;
    dist_config(&o, 2, wait_init, &cfg);
    static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
    cfg.device_ids = devs;
    cfg.wait_timeout_ms = 2000;
    cfg.chip.schedule_seed = seed;
    pto_node *n;
    pto_error_info err;
    assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
    pto_tensor out;
    int64_t two = 2;
    assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &two, &out), 0);
    int rc = pto_node_run(n, wait_node_fn, &out, &err);
    float got0 = pto_tensor_f32(&out)[0], got1 = pto_tensor_f32(&out)[1];
    pto_node_destroy(n);
    if (rc) fail_msg("seed %d: %s: %s", (int)seed, pto_status_name(rc), err.details);
    assert_true(got0 == 1.0f && got1 == 1.0f);
  }
}

static void expect_status(int rc, int code, const pto_error_info *err, const char *want) {
  if (rc != code || !strstr(err->details, want))
    fail_msg("expected %s with '%s', got %s: %s", pto_status_name(code), want, pto_status_name(rc),
             err->details);
}

/* A copy of node record `from` with `old` (its first occurrence) made
 * `new`, `nlen` bytes (a NUL among them), at `to`. */
static void edit_copy(const char *from, const char *to, const char *old, const char *new,
                      size_t nlen) {
  char *text = slurp(from);
  assert_non_null(text);
  char *at = strstr(text, old);
  assert_non_null(at);
  FILE *f = fopen(to, "wb");
  assert_non_null(f);
  fwrite(text, 1, (size_t)(at - text), f);
  fwrite(new, 1, nlen, f);
  fputs(at + strlen(old), f);
  fclose(f);
  free(text);
}

/* Files a record cannot be: each named with its cause (a read or write's
 * errno, the line), before the run could do harm. */
static void test_bad_files_named(void **state) {
  (void)state;
  pto_error_info err;
  float x;
  assert_int_equal(run_updates(3, path("b"), NULL, 0, &x, &err), 0);
  /* a seed past INT64_MAX (sscanf's %lld took it, as LLONG_MAX) */
  char *text = slurp(path("b"));
  char seed_line[64];
  snprintf(seed_line, sizeof seed_line, "seed %.*s", (int)strcspn(strstr(text, "seed ") + 5, "\n"),
           strstr(text, "seed ") + 5);
  free(text);
  edit_copy(path("b"), path("big"), seed_line, "seed 99999999999999999999", 25);
  expect_status(run_updates(0, NULL, path("big"), 0, &x, &err), PTO_EREPLAY, &err,
                "line 2: malformed seed (0..9223372036854775807)");
  /* a NUL byte inside a line (reported as a line too long) */
  edit_copy(path("b"), path("nul"), "tasks 3\n", "tasks 3\0\n", 9);
  expect_status(run_updates(0, NULL, path("nul"), 0, &x, &err), PTO_EREPLAY, &err,
                "a NUL byte (a record is text)");
  /* its last line without its newline (reported as a line too long) */
  edit_copy(path("b"), path("nonl"), "end\n", "end", 3);
  expect_status(run_updates(0, NULL, path("nonl"), 0, &x, &err), PTO_EREPLAY, &err,
                "nonl: truncated");
  /* a directory to replay (reported as truncated) or to record to */
  mkdir(path("rdir"), 0700);
  expect_status(run_updates(0, NULL, path("rdir"), 0, &x, &err), PTO_EREPLAY, &err,
                "rdir: cannot read: Is a directory");
  mkdir(path("wdir"), 0700);
  expect_status(run_updates(3, path("wdir"), NULL, 0, &x, &err), PTO_ESYSTEM, &err,
                "wdir: cannot be written: Is a directory");
  /* recording over the record being replayed: refused at create */
  expect_status(run_updates(0, path("b"), path("b"), 0, &x, &err), PTO_EINVAL, &err,
                "are the same file");
  /* a chip task's delivery record with a NUL byte (its chip process
   * crashed reading it) */
  char land[160], kept[176];
  snprintf(land, sizeof land, "%s.t1.c0.land", path("b"));
  snprintf(kept, sizeof kept, "%s.kept", land);
  assert_int_equal(rename(land, kept), 0);
  edit_copy(kept, land, "end\n", "\0\nend\n", 6);
  expect_status(run_updates(0, NULL, path("b"), 0, &x, &err), PTO_EREPLAY, &err,
                ".t1.c0.land line 2: a NUL byte (a record is text)");
  assert_int_equal(rename(kept, land), 0);
  assert_int_equal(run_updates(0, NULL, path("b"), 0, &x, &err), 0); /* the record is whole */
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/pto_node_schedule.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_of_host_and_chip_tasks),
      cmocka_unit_test(test_departures_named),
      cmocka_unit_test(test_replay_after_a_departure_on_one_node),
      cmocka_unit_test(test_race_replayed),
      cmocka_unit_test(test_replayed_trace_order),
      cmocka_unit_test(test_waiting_blocks_yield),
      cmocka_unit_test(test_wait_before_the_signalling_submit),
      cmocka_unit_test(test_bad_files_named),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
