/* test_reuse_differential.c — a failed run leaves nothing behind (docs/chip.md,
 * "Run lifecycle"), checked against the sequential oracle.
 *
 * Persistent chips of varied shapes (1-8 clusters, 1-4 schedulers, the
 * scheduling role or scheduler threads, tiny rings) run random graphs
 * (diff_graph.h) in pairs. The first run of a pair fails at a random point
 * while work is in flight or queued:
 *  - a kernel error in a random task, after a random delay (so the run is
 *    cancelled at a random time);
 *  - pto_orch_fatal before a random task;
 *  - a watchdog timeout (a random task's asynchronous completion never
 *    comes; only on chips made with a short watchdog_ms);
 *  - a bad async token completed from a random task.
 * The second run of the pair, on the same chip, must equal sequential
 * execution, and no run may hang (an alarm names the one that does). The
 * failed runs that left ready tasks queued are counted (white box), to show
 * that the case is exercised.
 *
 * Captured graphs the same way (test_launches_after_failed_launches): a
 * random graph is captured on a chip whose rings hold it whole, and then
 * launched so that it fails at a random kernel task (a kernel error, a
 * watchdog timeout, a bad async token: the task's kernel fails when its
 * scalar says so), while the launch may still be filling the slots; the
 * next launch of the same graph, with new data and scalars, and a dynamic
 * run of another random graph after it, must each equal sequential
 * execution. Or the failing run is a dynamic one, and a launch follows.
 *
 * PTO_REUSE_PAIRS and PTO_REUSE_SEED override the count and the seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/priority.h" /* white box: what a failed run left queued */
#include "chip/run.h"
#include "pto/pto.h"

#include "diff_graph.h"
#include "hang_alarm.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEFAULT_PAIRS 200
#else
#define DEFAULT_PAIRS 2000
#endif
#define PAIRS_PER_CHIP 8

enum { F_KERNEL, F_FATAL, F_WATCHDOG, F_TOKEN, F_COUNT };
static const char *const f_name[F_COUNT] = {"kernel error", "pto_orch_fatal", "watchdog",
                                            "bad async token"};
static const int f_code[F_COUNT] = {PTO_EKERNEL, PTO_EFATAL, PTO_ESCHED_TIMEOUT,
                                    PTO_EASYNC_INVALID};

/* fails after 0-500 us (from its k), unless the run is cancelled first */
static int k_fail(const pto_kctx *c) {
  for (uint64_t us = c->scalars[0] % 500; us > 0 && !pto_kctx_cancelled(c); us -= 50) {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
    if (us < 50) break;
  }
  return 7;
}
/* its completion never comes: the watchdog ends the run */
static int k_lost(const pto_kctx *c) {
  uint64_t token;
  return pto_kctx_async_begin(c, &token);
}
/* completes a token nobody issued: the run fails with PTO_EASYNC_INVALID */
static pto_chip *cur_chip;
static int k_bad_token(const pto_kctx *c) {
  (void)c;
  (void)pto_chip_async_complete(cur_chip, UINT64_C(0xbad0001));
  return 0;
}

/* the kernel of a captured graph's failing task: fails as its scalar 1
 * says (COND_FAIL + a failure), else mix_kernel; the captured graph takes
 * its scalars anew at every launch */
#define COND_FAIL 100
static int k_cond(const pto_kctx *c) {
  switch ((int)c->scalars[1] - COND_FAIL) {
  case F_KERNEL: return k_fail(c);
  case F_WATCHDOG: return k_lost(c);
  case F_TOKEN: return k_bad_token(c);
  default: return mix_kernel(c);
  }
}

typedef struct kids {
  int mix, fail, lost, bad_token, cond;
} kids;

/* whole: rings that hold a whole graph, for captures (whole_graph_chip_config) */
static pto_chip *random_chip(kids *k, bool *short_watchdog, bool whole) {
  pto_chip_config cfg;
  random_chip_config(&cfg);
  if (whole) whole_graph_chip_config(&cfg);
  cfg.sched_threads = rnd_in(0, 1);
  /* a safety net, except on the chips whose runs may fail by the watchdog */
  *short_watchdog = rnd_in(0, 4) == 0;
  if (*short_watchdog) cfg.watchdog_ms = 200;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "mix", mix_kernel, &k->mix), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fail", k_fail, &k->fail), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "lost", k_lost, &k->lost), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "bad_token", k_bad_token, &k->bad_token), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "cond", k_cond, &k->cond), PTO_OK);
  return chip;
}

/* Ready positions a failed run left in the shape queues, at every
 * priority level (reset by the chip's next run). */
static uint64_t left_queued(pto_chip *chip) {
  uint64_t n = 0;
  for (int q = 0; q < SHAPE_COUNT; q++)
    for (int l = 0; l < PRIO_LEVELS; l++)
      n += rq_size(prio_queue(&chip->run->queues[q], l));
  return n;
}

static int run_timed(pto_chip *chip, pto_graph_run *pr, const char *what, pto_run_stats *st,
                     pto_error_info *err) {
  hang_alarm_arm(what, 60);
  int rc = pto_chip_run(chip, orchestrate, pr, st, err);
  hang_alarm_disarm();
  return rc;
}

static void describe(const char *what, int pair, uint64_t seed, const pto_chip *chip,
                     const graph *g) {
  const pto_chip_config *c = pto_chip_get_config(chip);
  fprintf(stderr,
          "pair %d (seed %llu), %s: %d tasks, clusters %d, schedulers %d%s, task_slots %u, "
          "dep_entries %u, heap %zu, row stride %d\n",
          pair, (unsigned long long)seed, what, g->n, c->clusters, c->schedulers,
          c->sched_threads ? " (threads)" : "", c->task_slots, c->dep_entries, c->heap_bytes,
          g->row_stride);
}

/* The run `what` ended with rc, and its buffers got must equal g's
 * sequential execution. */
static void expect_sequential(int rc, const graph *g, uint32_t got[NBUF][BUFELEMS],
                              const char *what, const char *before, int pair, uint64_t seed,
                              const pto_chip *chip, const pto_error_info *err) {
  static uint32_t want[NBUF][BUFELEMS];
  run_reference(g, want);
  if (rc == PTO_OK && memcmp(got, want, sizeof want) == 0) return;
  describe(what, pair, seed, chip, g);
  fprintf(stderr, "  status %s; before it: %s\n", pto_status_name(rc), before);
  pto_error_print(err, stderr);
  print_buffers("actual", got, g->row_stride);
  print_buffers("expected", want, g->row_stride);
  fail_msg("pair %d: %s differs from sequential execution", pair, what);
}

/* The chip of pair `pair`: a new random one every PAIRS_PER_CHIP pairs
 * (the one before destroyed), else *chip; counted in *chips. */
static pto_chip *pair_chip(pto_chip *chip, int pair, kids *k, bool *short_watchdog, bool whole,
                           int *chips) {
  if (pair % PAIRS_PER_CHIP) return chip;
  if (chip) pto_chip_destroy(chip);
  ++*chips;
  return random_chip(k, short_watchdog, whole);
}

static void test_runs_after_failed_runs(void **state) {
  (void)state;
  int pairs = env_count("PTO_REUSE_PAIRS", DEFAULT_PAIRS);
  uint64_t seed = env_seed("PTO_REUSE_SEED", 20261201);
  static graph g;
  static uint32_t got[NBUF][BUFELEMS];
  int failures[F_COUNT] = {0}, queued = 0, chips = 0;
  pto_chip *chip = NULL;
  kids k;
  bool short_watchdog = false;
  for (int pair = 0; pair < pairs; pair++) {
    rng_state = seed * 1000003u + (uint64_t)pair;
    chip = pair_chip(chip, pair, &k, &short_watchdog, false, &chips);
    cur_chip = chip;
    /* run 1: fails at a random task */
    random_graph(&g);
    fix_blocks(&g);
    int kernels[MAX_TASKS], nk = kernel_tasks(&g, kernels);
    int how = rnd_in(0, F_COUNT - 1);
    if (how == F_WATCHDOG && (!short_watchdog || rnd_in(0, 3))) how = F_KERNEL;
    /* every other pair's failing run submits in batches (one may be open
     * when it fails) */
    pto_graph_run pr = {
        .g = &g, .bufs = got, .kid = k.mix, .fatal = how == F_FATAL, .batch = pair % 2 ? 6 : 0};
    pr.fail_at = how == F_FATAL ? rnd_in(0, g.n - 1)
                                : kernels[rnd_in(0, nk / 2)]; /* early: more left queued */
    pr.fail_kid = how == F_KERNEL ? k.fail : how == F_WATCHDOG ? k.lost : k.bad_token;
    memcpy(got, g.init, sizeof got);
    char what[160];
    snprintf(what, sizeof what, "pair %d (seed %llu): the run failing by %s", pair,
             (unsigned long long)seed, f_name[how]);
    pto_error_info err;
    pto_run_stats st;
    int rc = run_timed(chip, &pr, what, &st, &err);
    if (rc != f_code[how]) {
      describe("the failing run", pair, seed, chip, &g);
      pto_error_print(&err, stderr);
      fail_msg("pair %d: the run failing by %s at graph task %d returned %s, expected %s", pair,
               f_name[how], pr.fail_at, pto_status_name(rc), pto_status_name(f_code[how]));
    }
    failures[how]++;
    queued += left_queued(chip) > 0;
    int failed_at = pr.fail_at;
    /* run 2: must equal sequential execution. On a chip made with the
     * short watchdog it runs under the default one (white box, between
     * runs): the watchdog case is run 1's, and a correct run on a loaded
     * machine can go 200 ms without progress (a timeout is a safety net) */
    if (short_watchdog) chip->cfg.watchdog_ms = 10000;
    random_graph(&g);
    fix_blocks(&g);
    pr = (pto_graph_run){.g = &g, .bufs = got, .kid = k.mix, .fail_at = -1};
    memcpy(got, g.init, sizeof got);
    snprintf(what, sizeof what, "pair %d (seed %llu): the run after the one failing by %s", pair,
             (unsigned long long)seed, f_name[how]);
    rc = run_timed(chip, &pr, what, &st, &err);
    if (short_watchdog) chip->cfg.watchdog_ms = 200;
    char before[100];
    snprintf(before, sizeof before, "a run failed by %s at graph task %d", f_name[how], failed_at);
    expect_sequential(rc, &g, got, "the run after a failed one", before, pair, seed, chip, &err);
  }
  pto_chip_destroy(chip);
  printf("reuse differential: %d pairs on %d chips; failed by kernel error %d, pto_orch_fatal %d, "
         "watchdog %d, bad async token %d; %d failed runs left ready tasks queued; every next "
         "run equal to sequential execution\n",
         pairs, chips, failures[F_KERNEL], failures[F_FATAL], failures[F_WATCHDOG],
         failures[F_TOKEN], queued);
  assert_true(queued > 0);
}

/* ---- captured graphs ---- */

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEFAULT_LAUNCH_PAIRS 60
#else
#define DEFAULT_LAUNCH_PAIRS 400
#endif

/* A launch's scalars (k and rw of each kernel task, in submission order),
 * task fail_at's rw set to COND_FAIL + how when how >= 0; their count. */
static int launch_scalars(const graph *g, int fail_at, int how, uint64_t *sc) {
  int n = 0;
  for (int i = 0; i < g->n; i++)
    if (g->t[i].kind == 0) {
      sc[n++] = g->t[i].k;
      sc[n++] = i == fail_at && how >= 0 ? (uint64_t)(COND_FAIL + how) : g->t[i].rw;
    }
  return n;
}

static int launch_timed(pto_chip *chip, pto_graph *cg, const graph *g, int fail_at, int how,
                        const char *what, pto_error_info *err) {
  uint64_t sc[2 * MAX_TASKS];
  pto_graph_bindings gb = {NULL, 0, launch_scalars(g, fail_at, how, sc), sc};
  hang_alarm_arm(what, 60);
  int rc = pto_graph_launch(chip, cg, &gb, NULL, err);
  hang_alarm_disarm();
  return rc;
}

static void test_launches_after_failed_launches(void **state) {
  (void)state;
  int pairs = env_count("PTO_REUSE_PAIRS", DEFAULT_LAUNCH_PAIRS);
  uint64_t seed = env_seed("PTO_REUSE_SEED", 20261202);
  static graph g, g2;
  static uint32_t got[NBUF][BUFELEMS];
  int failed_launches[F_COUNT] = {0}, failed_runs = 0, queued = 0, chips = 0;
  pto_chip *chip = NULL;
  kids k;
  bool short_watchdog = false;
  for (int pair = 0; pair < pairs; pair++) {
    rng_state = seed * 1000003u + (uint64_t)pair;
    chip = pair_chip(chip, pair, &k, &short_watchdog, true, &chips);
    cur_chip = chip;
    /* the watchdog is a safety net, except in the launch failing by it */
    chip->cfg.watchdog_ms = 10000; /* white box, between runs */
    random_graph(&g);
    fix_blocks(&g);
    int kernels[MAX_TASKS], nk = kernel_tasks(&g, kernels);
    if (nk == 0) continue;
    int at = kernels[rnd_in(0, nk / 2)]; /* early: more left queued */
    /* the capture: task `at` runs k_cond, as mix_kernel while its scalar
     * says nothing else */
    pto_graph_run pr = {.g = &g, .bufs = got, .kid = k.mix, .fail_at = at, .fail_kid = k.cond};
    memcpy(got, g.init, sizeof got);
    pto_graph *cg = NULL;
    pto_error_info err;
    char what[168], before[100];
    snprintf(what, sizeof what, "pair %d (seed %llu): the capture", pair, (unsigned long long)seed);
    hang_alarm_arm(what, 60);
    int rc = pto_graph_capture(chip, orchestrate, &pr, &cg, NULL, &err);
    hang_alarm_disarm();
    expect_sequential(rc, &g, got, "the capture", "a run of another graph", pair, seed, chip, &err);
    if (rnd_in(0, 3)) {
      /* a launch failing at task `at` */
      int how = (int[]){F_KERNEL, F_WATCHDOG, F_TOKEN}[rnd_in(0, 2)];
      if (how == F_WATCHDOG && (!short_watchdog || rnd_in(0, 3))) how = F_KERNEL;
      if (how == F_WATCHDOG) chip->cfg.watchdog_ms = 200;
      snprintf(before, sizeof before, "a launch of the graph failing by %s at graph task %d",
               f_name[how], at);
      snprintf(what, sizeof what, "pair %d (seed %llu): %s", pair, (unsigned long long)seed,
               before);
      rc = launch_timed(chip, cg, &g, at, how, what, &err);
      chip->cfg.watchdog_ms = 10000;
      if (rc != f_code[how]) {
        describe(before, pair, seed, chip, &g);
        pto_error_print(&err, stderr);
        fail_msg("pair %d: %s returned %s, expected %s", pair, before, pto_status_name(rc),
                 pto_status_name(f_code[how]));
      }
      failed_launches[how]++;
    } else {
      /* a dynamic run of another graph failing at a random task */
      g2 = g;
      random_graph(&g2);
      fix_blocks(&g2);
      int n2 = 0, at2 = -1;
      for (int i = 0; i < g2.n; i++)
        if (g2.t[i].kind == 0 && rnd_in(0, n2++) == 0) at2 = i;
      bool fatal = at2 < 0 || rnd_in(0, 1);
      if (at2 < 0) at2 = rnd_in(0, g2.n - 1);
      pto_graph_run p2 = {
          .g = &g2, .bufs = got, .kid = k.mix, .fail_at = at2, .fail_kid = k.fail, .fatal = fatal};
      snprintf(before, sizeof before, "a dynamic run failing by %s at graph task %d",
               fatal ? "pto_orch_fatal" : "kernel error", at2);
      snprintf(what, sizeof what, "pair %d (seed %llu): %s", pair, (unsigned long long)seed,
               before);
      pto_run_stats st;
      rc = run_timed(chip, &p2, what, &st, &err);
      if (rc != (fatal ? PTO_EFATAL : PTO_EKERNEL)) {
        describe(before, pair, seed, chip, &g2);
        pto_error_print(&err, stderr);
        fail_msg("pair %d: %s returned %s", pair, before, pto_status_name(rc));
      }
      failed_runs++;
    }
    queued += left_queued(chip) > 0;
    /* the graph launched again, with new data and scalars */
    g2 = g;
    for (int i = 0; i < g2.n; i++)
      g2.t[i].k = rnd();
    for (int b = 0; b < NBUF; b++)
      for (int i = 0; i < BUFELEMS; i++)
        g2.init[b][i] = rnd();
    memcpy(got, g2.init, sizeof got);
    snprintf(what, sizeof what, "pair %d (seed %llu): the launch after %s", pair,
             (unsigned long long)seed, before);
    rc = launch_timed(chip, cg, &g2, -1, -1, what, &err);
    expect_sequential(rc, &g2, got, "the launch after a failed run", before, pair, seed, chip,
                      &err);
    /* and a dynamic run of another graph */
    random_graph(&g2);
    fix_blocks(&g2);
    pr = (pto_graph_run){.g = &g2, .bufs = got, .kid = k.mix, .fail_at = -1};
    memcpy(got, g2.init, sizeof got);
    snprintf(what, sizeof what, "pair %d (seed %llu): the dynamic run after the launch", pair,
             (unsigned long long)seed);
    pto_run_stats st;
    rc = run_timed(chip, &pr, what, &st, &err);
    expect_sequential(rc, &g2, got, "the dynamic run after them", before, pair, seed, chip, &err);
    pto_graph_destroy(cg);
  }
  pto_chip_destroy(chip);
  printf("launch reuse differential: %d pairs on %d chips; launches failed by kernel error %d, "
         "watchdog %d, bad async token %d; dynamic runs failed %d; %d failed runs left ready "
         "tasks queued; every next launch and dynamic run equal to sequential execution\n",
         pairs, chips, failed_launches[F_KERNEL], failed_launches[F_WATCHDOG],
         failed_launches[F_TOKEN], failed_runs, queued);
  assert_true(queued > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_after_failed_runs),
      cmocka_unit_test(test_launches_after_failed_launches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
