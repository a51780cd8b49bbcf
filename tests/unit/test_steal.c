/* test_steal.c — an idle core takes a block pending on a busy one
 * (src/chip/steal.h; sched.c steal_pending, core.c's claim), and no block
 * waits behind a busy core that takes its next block from the queue
 * itself (sched.c takes_heads, head_take.h).
 *
 * On 1 cluster x 2 AIV + 1 scheduler, the two blocks of one task start
 * together and wait until LATE has been submitted and placed: no AIV core
 * is idle then, so the orchestrator leaves LATE queued (sched.c
 * cores_all_busy), and the pass of the cluster's AIC core, whose block
 * (TRIGGER) ends once LATE is submitted, puts it in the pending slot of
 * one of the busy cores (a block of a task of two blocks does not
 * complete its task on its core, so the core takes no head after it: a
 * pending block is what starts next there). The block on that core then
 * runs 300 ms (LONG), the other 5 ms (SHORT): each waits until LATE is
 * pending on one of them and reads its own core's dispatch register
 * (white box) to know which it is, so the test does not depend on which
 * busy core the scheduler chose, nor on any thread being scheduled within
 * SHORT's 5 ms (the orchestrator once was not, on a loaded machine: SHORT
 * had ended and LATE went to its idle core, no steal). The core of SHORT
 * falls idle and must take LATE, long before LONG ends. Each block runs
 * exactly once, on the core that took it, and the run reports one steal
 * (pto_run_stats.steals). Then the same on 2 clusters x 1 AIV + 2
 * schedulers: the idle core is the other scheduler's (before that was
 * possible, LATE started 300 ms after LONG's start); LATE is pending on
 * the AIV core of TRIGGER's cluster.
 *
 * With two tasks of one block each instead, each core completes its own
 * task and takes the queue's head after it: LATE stays queued, nothing
 * is placed behind either core (their dispatch registers stay at 1), and
 * it starts on SHORT's core once SHORT ends, with no steal (before, it
 * went behind a busy core and was stolen, and on W2's replay such
 * placements kept a third of the blocks off the cores' chains of head
 * takes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "chip/run.h" /* white box: a core's dispatch register */
#include "pto/pto.h"

#define LONG_MS  300
#define SHORT_MS 5

static int g_k, g_trigger;
static _Atomic int g_running, g_ran[3], g_core[3], g_late_submitted;
static _Atomic uint64_t g_start[3], g_end[3];

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether LATE waits in the pending slot of the core running this block
 * (its second dispatch). */
static bool late_behind_me(const pto_kctx *c) {
  const pto_run *r = c->run;
  return atomic_load(&r->cores[c->core_id].dispatched) == 2;
}

/* Whether LATE waits in the pending slot of an AIV core. */
static bool late_pending(const pto_kctx *c) {
  const pto_run *r = c->run;
  for (int i = 0; i < r->ncores; i++)
    if (r->cores[i].type == PTO_CORE_AIV && atomic_load(&r->cores[i].dispatched) == 2) return true;
  return false;
}

static void nap_100us(void) {
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

/* Waits until LATE has been submitted: 2 s at most (then a failure that
 * names it), or until the run is cancelled. */
static int wait_late_submitted(const pto_kctx *c) {
  for (int i = 0; !atomic_load(&g_late_submitted) && !pto_kctx_cancelled(c); i++) {
    if (i == 20000)
      return pto_kctx_fail(c, PTO_EKERNEL, "LATE was not submitted within 2 s of this block");
    nap_100us();
  }
  return 0;
}

/* TRIGGER, on an AIC core: ends once LATE is submitted, and its core's
 * pass places LATE. */
static int k_trigger(const pto_kctx *c) { return wait_late_submitted(c); }

/* What the first two blocks are: the blocks of one task, LATE pending
 * behind one (STEAL), or two tasks, LATE queued (QUEUED). */
enum { STEAL, QUEUED };
static _Atomic uint64_t g_long_dispatched; /* LONG's core's register at LONG's end */

/* scalar 0: STEAL or QUEUED for the first two blocks (LONG: where LATE
 * waits behind it, or, QUEUED, on core 0; SHORT on the other core), 2 for
 * LATE (1 ms) */
static int k_timed(const pto_kctx *c) {
  int which = 2;
  if (c->scalars[0] != 2) {
    atomic_fetch_add(&g_running, 1);
    int rc = wait_late_submitted(c);
    if (rc) return rc;
    /* placed by TRIGGER's pass: at most 2 s (a failure then names it) */
    for (int i = 0; c->scalars[0] == STEAL && !late_pending(c) && i < 20000; i++)
      nap_100us();
    if (c->scalars[0] == STEAL)
      which = late_behind_me(c) ? 0 : 1;
    else
      which = c->core_id == 0 ? 0 : 1;
  }
  uint64_t ms = which == 0 ? LONG_MS : which == 1 ? SHORT_MS : 1;
  atomic_store(&g_start[which], now_ns());
  atomic_store(&g_core[which], c->core_id);
  atomic_fetch_add(&g_ran[which], 1);
  uint64_t until = now_ns() + ms * 1000000u;
  while (now_ns() < until && !pto_kctx_cancelled(c)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  if (which == 0)
    atomic_store(&g_long_dispatched,
                 atomic_load(&((const pto_run *)c->run)->cores[c->core_id].dispatched));
  atomic_store(&g_end[which], now_ns());
  return 0;
}

static void submit(pto_orch *o, int which, int blocks) {
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, (uint64_t)which);
  pto_submit_opts opts = {.block_num = blocks};
  assert_int_equal(pto_submit(o, g_k, &a, &opts, NULL), 0);
}

static void orch(pto_orch *o, void *arg) {
  const int mode = *(const int *)arg;
  if (mode == STEAL) {
    submit(o, STEAL, 2);
    pto_args a;
    pto_args_init(&a);
    assert_int_equal(pto_submit(o, g_trigger, &a, NULL, NULL), 0);
  } else {
    submit(o, QUEUED, 1);
    submit(o, QUEUED, 1);
  }
  /* both cores busy (they wait for LATE's submit), unless the run has
   * failed */
  while (atomic_load(&g_running) < 2 && pto_orch_status(o) == 0) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  submit(o, 2, 1);
  atomic_store(&g_late_submitted, 1);
}

/* clusters x aiv AIV cores (core 0 and core 1 first), `schedulers`, the
 * first two blocks as `mode` says */
static void run_case(int clusters, int aiv, int schedulers, int mode) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.aic_per_cluster = mode == STEAL ? 1 : 0; /* TRIGGER's */
  cfg.aiv_per_cluster = aiv;
  cfg.schedulers = schedulers;
  atomic_store(&g_running, 0);
  atomic_store(&g_late_submitted, 0);
  for (int i = 0; i < 3; i++)
    atomic_store(&g_ran[i], 0);
  atomic_store(&g_long_dispatched, 0);
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "timed", k_timed, &g_k), 0);
  assert_int_equal(pto_kernel_register_aic(chip, "trigger", k_trigger, &g_trigger), 0);
  pto_run_stats st;
  pto_error_info err;
  if (pto_chip_run(chip, orch, &mode, &st, &err) != 0) {
    print_error("run failed: %s\n", err.details);
    fail();
  }
  for (int i = 0; i < 3; i++)
    assert_int_equal(atomic_load(&g_ran[i]), 1);
  uint64_t late_start = atomic_load(&g_start[2]), long_end = atomic_load(&g_end[0]);
  if (mode == QUEUED) {
    /* queued, then taken by SHORT's core after SHORT: nothing behind LONG */
    if (late_start < atomic_load(&g_end[1]) || late_start >= long_end ||
        atomic_load(&g_core[2]) != atomic_load(&g_core[1]) ||
        atomic_load(&g_long_dispatched) != 1 || st.steals != 0) {
      print_error("LATE started %.1f ms after SHORT's end on core %d (SHORT on core %d, LONG on "
                  "core %d, %d ms); LONG's core's dispatch register at its end %llu; steals "
                  "%llu: expected LATE queued, then on SHORT's core after SHORT, before LONG's "
                  "end, register 1, no steal\n",
                  ((double)late_start - (double)atomic_load(&g_end[1])) / 1e6,
                  atomic_load(&g_core[2]), atomic_load(&g_core[1]), atomic_load(&g_core[0]),
                  LONG_MS, (unsigned long long)atomic_load(&g_long_dispatched),
                  (unsigned long long)st.steals);
      fail();
    }
    assert_int_equal(st.blocks, 3);
    printf("%d scheduler%s, two tasks: LATE ran %.1f ms after SHORT's end, on its core, steals "
           "%llu\n",
           schedulers, schedulers == 1 ? "" : "s",
           ((double)late_start - (double)atomic_load(&g_end[1])) / 1e6,
           (unsigned long long)st.steals);
    pto_chip_destroy(chip);
    return;
  }
  if (late_start >= long_end || atomic_load(&g_core[2]) == atomic_load(&g_core[0])) {
    print_error("LATE started %.1f ms after LONG's start, on core %d (LONG on core %d, %.1f ms): "
                "expected on the other core, before LONG ended; steals %llu\n",
                (double)(late_start - atomic_load(&g_start[0])) / 1e6, atomic_load(&g_core[2]),
                atomic_load(&g_core[0]), (double)(long_end - atomic_load(&g_start[0])) / 1e6,
                (unsigned long long)st.steals);
    fail();
  }
  assert_int_equal(st.blocks, 4); /* and TRIGGER */
  assert_int_equal(st.steals, 1);
  printf("%d scheduler%s: LATE ran %.1f ms after LONG started (LONG %d ms), steals %llu\n",
         schedulers, schedulers == 1 ? "" : "s",
         (double)(late_start - atomic_load(&g_start[0])) / 1e6, LONG_MS,
         (unsigned long long)st.steals);
  pto_chip_destroy(chip);
}

static void test_idle_core_takes_the_pending_block(void **state) {
  (void)state;
  run_case(1, 2, 1, STEAL);
}

/* The idle core is another scheduler's: its pass takes the block pending
 * on a core of the first. */
static void test_from_another_scheduler(void **state) {
  (void)state;
  run_case(2, 1, 2, STEAL);
}

/* Two tasks of one block: nothing behind a core that takes heads. */
static void test_queued_for_a_core_that_takes_heads(void **state) {
  (void)state;
  run_case(1, 2, 1, QUEUED);
  run_case(2, 1, 2, QUEUED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle_core_takes_the_pending_block),
      cmocka_unit_test(test_from_another_scheduler),
      cmocka_unit_test(test_queued_for_a_core_that_takes_heads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
