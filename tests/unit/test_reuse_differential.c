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

typedef struct kids {
  int mix, fail, lost, bad_token;
} kids;

static pto_chip *random_chip(kids *k, bool *short_watchdog) {
  pto_chip_config cfg;
  random_chip_config(&cfg);
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

static void test_runs_after_failed_runs(void **state) {
  (void)state;
  const char *e = getenv("PTO_REUSE_PAIRS");
  int pairs = e && atoi(e) > 0 ? atoi(e) : DEFAULT_PAIRS;
  e = getenv("PTO_REUSE_SEED");
  uint64_t seed = e ? strtoull(e, NULL, 0) : 20261201;
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  int failures[F_COUNT] = {0}, queued = 0, chips = 0;
  pto_chip *chip = NULL;
  kids k;
  bool short_watchdog = false;
  for (int pair = 0; pair < pairs; pair++) {
    rng_state = seed * 1000003u + (uint64_t)pair;
    if (pair % PAIRS_PER_CHIP == 0) {
      if (chip) pto_chip_destroy(chip);
      chip = random_chip(&k, &short_watchdog);
      chips++;
    }
    cur_chip = chip;
    /* run 1: fails at a random task */
    random_graph(&g);
    fix_blocks(&g);
    int kernels[MAX_TASKS], nk = 0;
    for (int i = 0; i < g.n; i++)
      if (g.t[i].kind == 0) kernels[nk++] = i;
    int how = rnd_in(0, F_COUNT - 1);
    if (how == F_WATCHDOG && (!short_watchdog || rnd_in(0, 3))) how = F_KERNEL;
    pto_graph_run pr = {.g = &g, .bufs = got, .kid = k.mix, .fatal = how == F_FATAL};
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
    run_reference(&g, want);
    if (rc != PTO_OK || memcmp(got, want, sizeof got) != 0) {
      describe("the run after a failed one", pair, seed, chip, &g);
      fprintf(stderr, "  status %s; the run before it failed by %s at graph task %d\n",
              pto_status_name(rc), f_name[how], failed_at);
      pto_error_print(&err, stderr);
      print_buffers("actual", got, g.row_stride);
      print_buffers("expected", want, g.row_stride);
      fail_msg("pair %d: the run after a failed one differs from sequential execution", pair);
    }
  }
  pto_chip_destroy(chip);
  printf("reuse differential: %d pairs on %d chips; failed by kernel error %d, pto_orch_fatal %d, "
         "watchdog %d, bad async token %d; %d failed runs left ready tasks queued; every next "
         "run equal to sequential execution\n",
         pairs, chips, failures[F_KERNEL], failures[F_FATAL], failures[F_WATCHDOG],
         failures[F_TOKEN], queued);
  assert_true(queued > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_after_failed_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
