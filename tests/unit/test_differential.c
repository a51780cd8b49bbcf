/* test_differential.c — the oracle for dependency inference.
 *
 * Thousands of random task graphs (diff_graph.h) over overlapping views (slices,
 * transposes, strided and reshaped views) of a few small buffers, seen as
 * i32, i16 or i64 over the same bytes, some built from a raw interior
 * pointer (base = buffer + the view's offset) instead of the buffer, with
 * multi-block tasks, dummy tasks, explicit dependencies, scopes with
 * runtime-allocated intermediates, and tiny rings. Each graph runs on pto
 * (1-4 schedulers, 1-8 clusters) and, separately, sequentially in
 * submission order; the buffers must match element for element. The kernel
 * is order-sensitive (out = out * 3 + inputs + k, in each view's own
 * element size), so a missed
 * read-after-write, write-after-write or write-after-read edge changes the
 * result (TSan also reports the race itself).
 *
 * Each graph is also captured (pto/graph.h) on a chip of the same shape
 * whose rings hold a whole graph, and replayed 3 times with new data, new
 * scalars and its buffers moved, each replay equal to sequential
 * execution of the graph with that data (REDUX arguments included: each
 * launch starts their private copies from the identity again).
 *
 * PTO_DIFF_GRAPHS and PTO_DIFF_SEED override the count and the seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"

#include "diff_graph.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEFAULT_GRAPHS 200
#else
#define DEFAULT_GRAPHS 2000
#endif

/* Captures g on chip and replays it 3 times: new initial data and new k
 * scalars each time, the buffers bound to other memory (buffer b's views,
 * shifted or not, move with it); each replay must equal the sequential
 * execution of the graph so changed. Returns the tasks run; counts the
 * warm launches (docs/graphs.md) in *warm. */
static int capture_and_replay(pto_chip *chip, int kid, const graph *g, int gi, int *warm) {
  static uint32_t mem[3][NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  static graph g2;
  pto_graph_run pr = {.g = g, .bufs = mem[0], .kid = kid, .fail_at = -1};
  memcpy(mem[0], g->init, sizeof g->init);
  pto_graph *cg = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orchestrate, &pr, &cg, NULL, &err);
  run_reference(g, want);
  if (rc != PTO_OK || memcmp(mem[0], want, sizeof want) != 0) {
    pto_error_print(&err, stderr);
    fail_msg("graph %d: the capture run differs from sequential execution (%s)", gi,
             pto_status_name(rc));
  }
  pto_graph_info info;
  pto_graph_get_info(cg, &info);
  pto_tensor binds[NBUF * 64];
  assert_true(info.buffers <= NBUF * 64);
  int tasks = 0;
  for (int rep = 1; rep <= 3; rep++) {
    g2 = *g;
    uint64_t scalars[2 * MAX_TASKS];
    int ns = 0;
    for (int i = 0; i < g2.n; i++)
      if (g2.t[i].kind == 0) {
        g2.t[i].k = rnd();
        scalars[ns++] = g2.t[i].k;
        scalars[ns++] = g2.t[i].rw;
      }
    assert_int_equal(ns, info.scalars);
    for (int b = 0; b < NBUF; b++)
      for (int i = 0; i < BUFELEMS; i++)
        g2.init[b][i] = rnd();
    uint32_t(*to)[BUFELEMS] = mem[rep % 3]; /* replays 1, 2 move; 3 is the capture's memory */
    memcpy(to, g2.init, sizeof g2.init);
    for (int i = 0; i < info.buffers; i++) {
      pto_graph_buffer(cg, i, &binds[i]);
      for (int b = 0; b < NBUF; b++) {
        char *from = (char *)mem[0][b];
        if ((char *)binds[i].buf >= from && (char *)binds[i].buf < from + sizeof mem[0][b])
          binds[i].buf = (char *)to[b] + ((char *)binds[i].buf - from);
      }
    }
    pto_graph_bindings gb = {binds, info.buffers, ns, scalars};
    pto_run_stats st;
    rc = pto_graph_launch(chip, cg, &gb, &st, &err);
    run_reference(&g2, want);
    if (rc != PTO_OK || memcmp(to, want, sizeof want) != 0) {
      fprintf(stderr, "graph %d, replay %d: status %s\n", gi, rep, pto_status_name(rc));
      pto_error_print(&err, stderr);
      print_buffers("actual", to, g->row_stride);
      print_buffers("expected", want, g->row_stride);
      fail_msg("a replay and the sequential execution differ (graph %d, replay %d)", gi, rep);
    }
    tasks += (int)st.tasks;
  }
  pto_graph_get_info(cg, &info);
  *warm += (int)info.warm_launches;
  pto_graph_destroy(cg);
  return tasks;
}

static void test_random_graphs(void **state) {
  (void)state;
  int graphs = env_count("PTO_DIFF_GRAPHS", DEFAULT_GRAPHS);
  uint64_t seed = env_seed("PTO_DIFF_SEED", 20261130);
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  int tasks = 0, replayed = 0, with_redux = 0, warm = 0, batched = 0;
  for (int gi = 0; gi < graphs; gi++) {
    rng_state = seed * 1000003u + (uint64_t)gi;
    random_graph(&g);
    fix_blocks(&g);
    pto_chip_config cfg;
    random_chip_config(&cfg);
    /* every odd graph runs on the chip of the graph before it, so a chip's
     * second run sees the state its first run left (slots, rings, marks,
     * TensorMap, threads) and must still equal sequential execution */
    static pto_chip *chip, *gchip; /* gchip: the captures', rings for a whole graph */
    static int kid, gkid;
    if (gi % 2 == 0) {
      assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
      assert_int_equal(pto_kernel_register_aiv(chip, "mix", mix_kernel, &kid), PTO_OK);
      pto_chip_config gcfg = cfg;
      whole_graph_chip_config(&gcfg);
      assert_int_equal(pto_chip_create(&gcfg, &gchip), PTO_OK);
      assert_int_equal(pto_kernel_register_aiv(gchip, "mix", mix_kernel, &gkid), PTO_OK);
    } else {
      cfg = *pto_chip_get_config(chip);
    }
    /* half the graphs submit in batches of 1-4 tasks at a time */
    pto_graph_run pr = {
        .g = &g, .bufs = got, .kid = kid, .fail_at = -1, .batch = gi % 4 >= 2 ? 2 + gi % 7 : 0};
    batched += pr.batch > 0;
    memcpy(got, g.init, sizeof got);
    pto_error_info err;
    pto_run_stats st;
    int rc = pto_chip_run(chip, orchestrate, &pr, &st, &err);
    run_reference(&g, want);
    if (rc != PTO_OK || memcmp(got, want, sizeof got) != 0) {
      fprintf(stderr,
              "graph %d (seed %llu%s): %d tasks, submit batches of %d, clusters %d, schedulers %d, "
              "task_slots %u, dep_entries %u, heap %zu, row stride %d: status %s\n",
              gi, (unsigned long long)seed, gi % 2 ? ", second run of its chip" : "", g.n,
              pr.batch / 2, cfg.clusters, cfg.schedulers, cfg.task_slots, cfg.dep_entries,
              cfg.heap_bytes, g.row_stride, pto_status_name(rc));
      pto_error_print(&err, stderr);
      print_buffers("actual", got, g.row_stride);
      print_buffers("expected", want, g.row_stride);
      fail_msg("pto and the sequential execution differ (graph %d)", gi);
    }
    tasks += (int)st.tasks;
    replayed += capture_and_replay(gchip, gkid, &g, gi, &warm);
    with_redux += graph_has_redux(&g);
    if (gi % 2 == 1 || gi + 1 == graphs) {
      pto_chip_destroy(chip);
      pto_chip_destroy(gchip);
      chip = gchip = NULL;
    }
  }
  printf("differential: %d graphs (%d submitted in batches), %d tasks, all equal to sequential "
         "execution; each captured and replayed 3 times with new data, %d tasks, all equal (%d "
         "graphs with REDUX arguments; %d of the %d launches warm)\n",
         graphs, batched, tasks, replayed, with_redux, warm, 3 * graphs);
  /* replays 2 and 3 follow a clean launch with no run between: warm,
   * but for graphs with COMMUTE arguments, gangs or more than 64 roots,
   * and not at all in checking mode (PTO_CHECK), which fills every slot */
  if (graphs >= 20 && !getenv("PTO_CHECK") && warm == 0)
    fail_msg("no launch of %d graphs was warm", graphs);
}

/* The oracle must be able to fail: with dependency inference bypassed
 * (NO_DEP everywhere) some graph must differ. */
static void orchestrate_nodep(pto_orch *o, void *arg) {
  pto_graph_run *pr = arg;
  const graph *g = pr->g;
  for (int i = 0; i < g->n; i++) {
    const gtask *t = &g->t[i];
    if (t->kind != 0 || t->tmp_out >= 0 || t->tmp_in >= 0) continue;
    pto_args a;
    pto_args_init(&a);
    pto_tensor views[1 + MAX_IN];
    for (int k = 0; k < t->nt; k++) {
      views[k] = bind(&t->view[k], pr->bufs);
      pto_args_nodep(&a, &views[k]);
    }
    pto_args_scalar(&a, t->k);
    pto_args_scalar(&a, t->rw);
    pto_submit_opts opts = {.block_num = 1};
    pto_submit(o, pr->kid, &a, &opts, NULL);
  }
}

#if !defined(__SANITIZE_THREAD__)
static int slow_mix(const pto_kctx *c) {
  /* uneven durations make reordering visible without dependencies */
  volatile uint32_t spin = 0;
  for (uint32_t i = 0; i < (uint32_t)(c->scalars[0] % 20000u); i++)
    spin += i;
  return mix_kernel(c);
}

static void test_oracle_detects_missing_edges(void **state) {
  (void)state;
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  int differing = 0;
  for (int gi = 0; gi < 40 && !differing; gi++) {
    rng_state = 777 + (uint64_t)gi;
    random_graph(&g);
    for (int i = 0; i < g.n; i++)
      g.t[i].blocks = 1;
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 4;
    cfg.schedulers = 2;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    pto_graph_run pr = {.g = &g, .bufs = got, .kid = -1, .fail_at = -1};
    pto_kernel_register_aiv(chip, "slow_mix", slow_mix, &pr.kid);
    memcpy(got, g.init, sizeof got);
    assert_int_equal(pto_chip_run(chip, orchestrate_nodep, &pr, NULL, NULL), PTO_OK);
    pto_chip_destroy(chip);
    graph plain = g; /* reference of the same submissions: skip scoped pairs */
    for (int i = 0; i < plain.n; i++)
      if (plain.t[i].tmp_out >= 0 || plain.t[i].tmp_in >= 0) plain.t[i].kind = 1;
    run_reference(&plain, want);
    differing += memcmp(got, want, sizeof got) != 0;
  }
  assert_true(differing > 0);
}
#endif

/* ---- controlled schedules (docs/schedules.md) ---- */

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RECORDED_GRAPHS 24
#else
#define RECORDED_GRAPHS 120
#endif

/* A fresh file name for a record (removed by the caller). */
static void temp_path(char *path, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, n, "%s/pto_diff_%s_XXXXXX", dir && dir[0] ? dir : "/tmp", what);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
}

static char *slurp(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)*len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)*len, f), (size_t)*len);
  fclose(f);
  return b;
}

static bool same_file(const char *a, const char *b) {
  long na, nb;
  char *x = slurp(a, &na), *y = slurp(b, &nb);
  bool same = na == nb && memcmp(x, y, (size_t)na) == 0;
  free(x);
  free(y);
  return same;
}

/* One run of graph g under cfg (a seed, a record, a replay), into got.
 * Checking mode (PTO_CHECK, the contracts variant of this test) orders the
 * blocks itself and cannot be combined with a controlled schedule: off. */
static int run_graph(const pto_chip_config *cfg_in, pto_orch_fn orch, pto_kernel_fn kernel,
                     const graph *g, uint32_t got[NBUF][BUFELEMS], pto_error_info *err) {
  pto_chip_config c = *cfg_in;
  c.check = 0;
  const pto_chip_config *cfg = &c;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(cfg, &chip), PTO_OK);
  pto_graph_run pr = {.g = g, .bufs = got, .kid = -1, .fail_at = -1};
  assert_int_equal(pto_kernel_register_aiv(chip, "mix", kernel, &pr.kid), PTO_OK);
  memcpy(got, g->init, sizeof(uint32_t) * NBUF * BUFELEMS);
  int rc = pto_chip_run(chip, orch, &pr, NULL, err);
  pto_chip_destroy(chip);
  return rc;
}

/* Random graphs under a seeded schedule equal the sequential execution;
 * each run's record, replayed, gives the same buffers and, recorded
 * again, the same record: the same starts, ends, completions and cores
 * in the same order. */
static void test_recorded_graphs_replay(void **state) {
  (void)state;
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], again[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  char rec[256], rerec[256];
  temp_path(rec, sizeof rec, "rec");
  temp_path(rerec, sizeof rerec, "rerec");
  for (int gi = 0; gi < RECORDED_GRAPHS; gi++) {
    rng_state = 4242u * 1000003u + (uint64_t)gi;
    random_graph(&g);
    fix_blocks(&g);
    pto_chip_config cfg;
    random_chip_config(&cfg);
    cfg.schedule_seed = (uint64_t)gi + 1;
    cfg.record_path = rec;
    pto_error_info err;
    int rc = run_graph(&cfg, orchestrate, mix_kernel, &g, got, &err);
    run_reference(&g, want);
    if (rc != PTO_OK || memcmp(got, want, sizeof got) != 0) {
      pto_error_print(&err, stderr);
      fail_msg("graph %d under schedule seed %d: %s, buffers %s the sequential execution", gi,
               gi + 1, pto_status_name(rc),
               memcmp(got, want, sizeof got) ? "differ from" : "equal");
    }
    cfg.schedule_seed = 0;
    cfg.replay_path = rec;
    cfg.record_path = rerec;
    rc = run_graph(&cfg, orchestrate, mix_kernel, &g, again, &err);
    if (rc != PTO_OK) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    if (memcmp(got, again, sizeof got) != 0) fail_msg("graph %d: the replay's buffers differ", gi);
    if (!same_file(rec, rerec)) fail_msg("graph %d: the replay recorded another schedule", gi);
  }
  remove(rec);
  remove(rerec);
  printf("recorded: %d graphs under seeded schedules, each replayed to the same buffers and "
         "the same record\n",
         RECORDED_GRAPHS);
}

/* Graphs with every dependency dropped (orchestrate_nodep) are races:
 * some seed's schedule differs from the sequential execution, and its
 * record replays that wrong result bit for bit. Blocks run one at a time
 * under a controlled schedule, so this is no data race for TSan. */
static void test_race_found_and_replayed(void **state) {
  (void)state;
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], again[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  char rec[256];
  temp_path(rec, sizeof rec, "race");
  int found = 0;
  for (int gi = 0; gi < 10 && !found; gi++) {
    rng_state = 777 + (uint64_t)gi;
    random_graph(&g);
    for (int i = 0; i < g.n; i++)
      g.t[i].blocks = 1;
    graph plain = g; /* reference of the same submissions: skip scoped pairs */
    for (int i = 0; i < plain.n; i++)
      if (plain.t[i].tmp_out >= 0 || plain.t[i].tmp_in >= 0) plain.t[i].kind = 1;
    run_reference(&plain, want);
    for (int seed = 1; seed <= 20 && !found; seed++) {
      pto_chip_config cfg;
      pto_chip_config_init(&cfg);
      cfg.clusters = 4;
      cfg.schedule_seed = (uint64_t)seed;
      cfg.record_path = rec;
      assert_int_equal(run_graph(&cfg, orchestrate_nodep, mix_kernel, &g, got, NULL), PTO_OK);
      if (memcmp(got, want, sizeof got) == 0) continue;
      found = 1;
      cfg.schedule_seed = 0;
      cfg.record_path = NULL;
      cfg.replay_path = rec;
      for (int k = 0; k < 5; k++) {
        assert_int_equal(run_graph(&cfg, orchestrate_nodep, mix_kernel, &g, again, NULL), PTO_OK);
        if (memcmp(got, again, sizeof got) != 0)
          fail_msg("graph %d seed %d: replay %d gave other values than the recorded run", gi, seed,
                   k + 1);
      }
    }
  }
  remove(rec);
  assert_true(found);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_random_graphs),
    cmocka_unit_test(test_recorded_graphs_replay),
    cmocka_unit_test(test_race_found_and_replayed),
#if !defined(__SANITIZE_THREAD__)
    /* deliberately racy by construction: not run under TSan */
    cmocka_unit_test(test_oracle_detects_missing_edges),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
