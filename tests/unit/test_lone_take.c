/* test_lone_take.c — a core about to park takes a block placed on another
 * core that has not started it (sched.c sched_lone_ask and take_lone,
 * steal.h steal_target_lone), in role mode and with scheduler threads;
 * and the orchestrator has a run's first block so moved when every other
 * core is parked (orch.c orch_unstarted_look, sched.c sched_lone_ask).
 *
 * The state it answers: the OS may leave a core's thread queued behind
 * another thread on one CPU for a scheduler tick (4 ms) while the other
 * CPU idles, and a pass may have placed a block on that core meanwhile
 * (it was idle). Before, that block waited for the OS: on 2 CPUs a
 * stencil of 4000 dependent 0.5 us tasks ran 6 of them during its 0.9 ms
 * orchestration, the first task having been placed on a core queued
 * behind the orchestrator, and the other core parked with everything
 * else waiting on that task.
 *
 * Here the state is made certain: core B's thread is held in a signal
 * handler (SIGUSR1, installed by the test), where it runs no pto code,
 * as a thread the OS does not run. 1 cluster x 2 AIV, 1 scheduler. Each
 * trial:
 *  1. HOLD (one block) runs on a core, A, until the orchestrator lets it
 *     end; the other core, B, idles, and parks within 2 ms;
 *  2. B's thread is held in the handler (the orchestrator waits until it
 *     is in it);
 *  3. X (one block) is submitted: A is busy, so the pass places X on B,
 *     the idle core (checked: B's dispatch register moves);
 *  4. HOLD ends: A falls idle with nothing queued and, before it parks,
 *     takes X and runs it;
 *  5. while X runs, Y (one block) is submitted: no core is idle, and B's
 *     only block, X, was taken from it, so Y must not go behind it
 *     (sched.c has_room: the taken block's slot is no longer movable),
 *     where it would wait for B, whose marked claim word lets nobody take
 *     it; Y runs on A after X.
 * X and Y must run on A while B is still held: without the look, X
 * waited for B's release (the orchestrator's 2 s wait failed, every
 * trial); with the look but Y free to go behind X on B, Y did. Then B is
 * let go: it finds X taken from it (its claim fails) and goes back to
 * waiting; the run ends with every block run once and a steal per trial
 * counted (pto_run_stats.steals). Then the orchestrator's look for a
 * run's first block (orch.c, orch_unstarted_look), below. The
 * orchestrator's gather is off
 * (PTO_ORCH_GATHER=0, set before any option is read): with it, Y,
 * submitted while every core has a block in flight, would be gathered
 * rather than placed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/run.h" /* white box: the cores' threads and dispatch registers */
#include "common/clock.h"
#include "pto/pto.h"

#define TRIALS  20
#define WAIT_MS 2000 /* a failing trial's wait; never reached when it passes */

/* Where a block ran, and whether core B was held then. */
typedef struct ran_rec {
  _Atomic int core, held, ran;
} ran_rec;

/* The same, read by the orchestrator before it lets B go (which may then
 * run a block that had waited for it). */
typedef struct ran_seen {
  int core, held, ran;
} ran_seen;

static int g_hold_k, g_x_k, g_y_k;
static _Atomic int g_hold_core, g_hold_go, g_x_started, g_y_submitted;
static ran_rec g_x, g_y, g_first;
static _Atomic int g_in_handler, g_release_b;
static const pto_run *_Atomic g_run;

static void nap_100us(void) {
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

/* B's thread, held: async-signal-safe atomics and nanosleep only; let go
 * by the test, or after 10 s (a test that failed to let it go) */
static void hold_here(int sig) {
  (void)sig;
  atomic_store(&g_in_handler, 1);
  for (int i = 0; !atomic_load(&g_release_b) && i < 100000; i++)
    nap_100us();
  atomic_store(&g_in_handler, 0);
}

/* Lets B go and waits (10 s at most) until it has left the handler, so
 * that the next trial's signal finds it back in pto's code. */
static void release_b(void) {
  atomic_store(&g_release_b, 1);
  for (int w = 0; atomic_load(&g_in_handler) && w < 100000; w++)
    nap_100us();
}

static void ran_clear(ran_rec *r) {
  atomic_store(&r->core, -1);
  atomic_store(&r->held, 0);
  atomic_store(&r->ran, 0);
}

static void ran_note(ran_rec *r, const pto_kctx *c) {
  atomic_store(&r->core, c->core_id);
  atomic_store(&r->held, atomic_load(&g_in_handler));
  atomic_fetch_add(&r->ran, 1);
}

static ran_seen ran_read(ran_rec *r) {
  return (ran_seen){atomic_load(&r->core), atomic_load(&r->held), atomic_load(&r->ran)};
}

static int k_hold(const pto_kctx *c) {
  atomic_store(&g_run, (const pto_run *)c->run);
  atomic_store(&g_hold_core, c->core_id);
  for (int i = 0; !atomic_load(&g_hold_go) && i < 10 * WAIT_MS; i++)
    nap_100us();
  return 0;
}

/* X: runs until Y has been submitted (and placed) */
static int k_x(const pto_kctx *c) {
  atomic_store(&g_x_started, 1);
  for (int i = 0; !atomic_load(&g_y_submitted) && i < 10 * WAIT_MS; i++)
    nap_100us();
  nap_100us();
  ran_note(&g_x, c);
  return 0;
}

static int k_y(const pto_kctx *c) {
  ran_note(&g_y, c);
  return 0;
}

static void submit(pto_orch *o, int k) {
  pto_args a;
  pto_args_init(&a);
  assert_int_equal(pto_submit(o, k, &a, NULL, NULL), PTO_OK);
}

/* Waits up to WAIT_MS for *v to reach want (no pto call); true if it did. */
static bool await(_Atomic int *v, int want) {
  for (int i = 0; i < 10 * WAIT_MS; i++) {
    if (atomic_load(v) >= want) return true;
    nap_100us();
  }
  return atomic_load(v) >= want;
}

typedef struct trial {
  bool placed_on_b;
  int a, b;
  ran_seen x, y; /* within WAIT_MS of their submits, B held */
} trial;

static void orch(pto_orch *o, void *arg) {
  trial *t = arg;
  atomic_store(&g_hold_core, -1);
  submit(o, g_hold_k);
  for (int i = 0; atomic_load(&g_hold_core) < 0 && i < 10 * WAIT_MS; i++)
    nap_100us();
  t->a = atomic_load(&g_hold_core);
  t->b = 1 - t->a;
  const pto_run *r = atomic_load(&g_run);
  if (t->a < 0 || !r) return;          /* the checks below name it */
  struct timespec idle = {0, 2000000}; /* B idles, then parks */
  nanosleep(&idle, NULL);
  pthread_kill(r->cores[t->b].thread, SIGUSR1);
  if (!await(&g_in_handler, 1)) return;
  uint64_t before = atomic_load(&r->cores[t->b].dispatched);
  submit(o, g_x_k);
  /* placed by the submit's pass, or by a scheduler thread's soon after */
  for (int i = 0; i < 200 && atomic_load(&r->cores[t->b].dispatched) == before; i++)
    nap_100us();
  t->placed_on_b = atomic_load(&r->cores[t->b].dispatched) == before + 1;
  atomic_store(&g_hold_go, 1);
  if (await(&g_x_started, 1)) submit(o, g_y_k);
  atomic_store(&g_y_submitted, 1);
  (void)await(&g_x.ran, 1);
  (void)await(&g_y.ran, 1);
  t->x = ran_read(&g_x);
  t->y = ran_read(&g_y);
  atomic_store(&g_release_b, 1);
}

/* 1 cluster x 2 AIV, 1 scheduler, with the handler that holds core B
 * installed */
static pto_chip *two_core_chip(bool sched_threads) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = hold_here;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.schedulers = 1;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  return chip;
}

/* Block `what` of trial i ran once on core A while B was held; else the
 * failure names what was seen. */
static void expect_on_a(int i, const char *mode, const char *what, const ran_seen *x,
                        const trial *t, const char *note) {
  if (x->ran && x->core == t->a && x->held) return;
  print_error("trial %d (%s): %s %s on core %d, core B %d %s; expected it on core A %d while B "
              "was held (%s)\n",
              i, mode, what, x->ran ? "ran" : "did not run within 2 s", x->core, t->b,
              x->held ? "held" : "let go", t->a, note);
  fail();
}

static void run_trials(bool sched_threads) {
  pto_chip *chip = two_core_chip(sched_threads);
  assert_int_equal(pto_kernel_register_aiv(chip, "hold", k_hold, &g_hold_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "x", k_x, &g_x_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "y", k_y, &g_y_k), PTO_OK);
  int placed = 0;
  for (int i = 0; i < TRIALS; i++) {
    atomic_store(&g_hold_go, 0);
    ran_clear(&g_x);
    ran_clear(&g_y);
    atomic_store(&g_x_started, 0);
    atomic_store(&g_y_submitted, 0);
    atomic_store(&g_in_handler, 0);
    atomic_store(&g_release_b, 0);
    atomic_store(&g_run, NULL);
    trial t;
    memset(&t, 0, sizeof t);
    pto_run_stats st;
    pto_error_info err;
    int rc = pto_chip_run(chip, orch, &t, &st, &err);
    release_b(); /* whatever happened above */
    if (rc != PTO_OK) {
      print_error("trial %d: the run failed: %s: %s\n", i, pto_status_name(rc), err.details);
      fail();
    }
    const char *mode = sched_threads ? "scheduler threads" : "role mode";
    expect_on_a(i, mode, "X", &t.x, &t, t.placed_on_b ? "X placed on B" : "X not placed on B");
    expect_on_a(i, mode, "Y", &t.y, &t, "after X, not behind the block taken from B");
    assert_int_equal(atomic_load(&g_x.ran), 1);
    assert_int_equal(atomic_load(&g_y.ran), 1);
    /* X went to B first in most trials: then it was taken (a steal) */
    if (t.placed_on_b) {
      placed++;
      assert_true(st.steals >= 1);
    }
  }
  /* the state the test is about was made at least once */
  if (placed == 0) {
    print_error("X was never placed on the held core in %d trials\n", TRIALS);
    fail();
  }
  pto_chip_destroy(chip);
}

/* ---- the orchestrator moves a run's first block (orch.c,
 * orch_unstarted_look) ----
 *
 * Every core parked (2 ms idle), core B held in the handler, then FIRST
 * (one block, writing a cell) is submitted: the pass places it on a parked
 * core. When that is B (the trial counts only those; A is the other), the
 * orchestrator submits DEPENDENTS tasks that read FIRST's cell, so that no
 * task retires, and then waits in its own code for FIRST to run. Its look
 * every 64 submits finds B's block unstarted at two looks and has A take
 * it: FIRST runs on A while B is still held. Only when most blocks timed
 * in the run before took UNSTARTED_MIN_BLOCK_NS or more: after a run of
 * empty blocks, voted short, the orchestrator asks nothing moved (a chain
 * of empty blocks runs faster after that wait; the vote and the asks are
 * read white box). A sanitizer's build may vote even empty blocks long:
 * the test prints how many trials were voted short. */
#define DEPENDENTS 256

static int g_first_k, g_dep_k, g_warm_k;
static int64_t g_cell, g_dep_cells[DEPENDENTS];
static uint64_t g_warm_ns;

static int k_first(const pto_kctx *c) {
  ran_note(&g_first, c);
  return 0;
}

static int k_dep(const pto_kctx *c) {
  (void)c;
  return 0;
}

/* a block of g_warm_ns; records the run state (white box: the cores'
 * threads) */
static int k_warm(const pto_kctx *c) {
  atomic_store(&g_run, (const pto_run *)c->run);
  if (!g_warm_ns) return 0; /* empty */
  uint64_t end = pto_now_ns() + g_warm_ns;
  while (pto_now_ns() < end) {
  }
  return 0;
}

/* Blocks enough for the look's vote (UNSTARTED_MIN_TIMED): a core times
 * one block in 16, one in 256 of blocks under 1 us (pull_hold.h) */
static void orch_warm(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < (g_warm_ns ? 512 : 8192); i++)
    submit(o, g_warm_k);
}

typedef struct first_trial {
  int b;            /* the held core */
  bool on_b;        /* FIRST was placed on it */
  ran_seen first;   /* FIRST, within 50 ms of the last submit, B held */
  uint64_t asks;    /* blocks the orchestrator asked moved (white box) */
  bool long_before; /* the run before's vote (white box, run_reset) */
} first_trial;

static void orch_first(pto_orch *o, void *arg) {
  first_trial *t = arg;
  struct timespec idle = {0, 2000000}; /* every core parks */
  nanosleep(&idle, NULL);
  const pto_run *r = atomic_load(&g_run);
  t->long_before = r->prev_blocks_long;
  pthread_kill(r->cores[t->b].thread, SIGUSR1);
  assert_true(await(&g_in_handler, 1));
  uint64_t before = atomic_load(&r->cores[t->b].dispatched);
  int64_t one = 1;
  pto_tensor cell;
  pto_tensor_init(&cell, &g_cell, sizeof g_cell, PTO_I64, 1, &one);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &cell);
  assert_int_equal(pto_submit(o, g_first_k, &a, NULL, NULL), PTO_OK);
  t->on_b = atomic_load(&r->cores[t->b].dispatched) == before + 1;
  if (!t->on_b) { /* on A: it runs; not this test's case */
    atomic_store(&g_release_b, 1);
    return;
  }
  for (int i = 0; i < DEPENDENTS; i++) {
    pto_tensor mine;
    pto_tensor_init(&mine, &g_dep_cells[i], sizeof g_dep_cells[i], PTO_I64, 1, &one);
    pto_args_init(&a);
    pto_args_input(&a, &cell);
    pto_args_output_existing(&a, &mine);
    assert_int_equal(pto_submit(o, g_dep_k, &a, NULL, NULL), PTO_OK);
  }
  for (int i = 0; i < 500 && !atomic_load(&g_first.ran); i++) /* 50 ms */
    nap_100us();
  t->first = ran_read(&g_first);
  t->asks = r->unstarted_asks;
  atomic_store(&g_release_b, 1); /* B's lost claim, or FIRST, ends the run */
}

/* What the trials in which FIRST went to the held core saw. */
typedef struct first_counts {
  int moved;           /* FIRST ran on the free core while B was held, asked */
  int short_before;    /* the run before's blocks were voted short */
  uint64_t asks_short; /* asks in those trials */
} first_counts;

/* Trials until FIRST went to the held core 5 times (at most 200), after
 * a warm-up run of blocks of warm_ns. */
static first_counts first_trials(uint64_t warm_ns) {
  first_counts n = {0, 0, 0};
  pto_chip *chip = two_core_chip(false);
  assert_int_equal(pto_kernel_register_aiv(chip, "first", k_first, &g_first_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "dep", k_dep, &g_dep_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "warm", k_warm, &g_warm_k), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "hold", k_hold, &g_hold_k), PTO_OK);
  int on_b = 0;
  for (int i = 0; i < 200 && on_b < 5; i++) {
    pto_run_stats st;
    pto_error_info err;
    /* the run right before the trial sets the blocks' length the look
     * reads (run_reset) */
    g_warm_ns = warm_ns;
    assert_int_equal(pto_chip_run(chip, orch_warm, NULL, &st, &err), PTO_OK);
    ran_clear(&g_first);
    atomic_store(&g_in_handler, 0);
    atomic_store(&g_release_b, 0);
    first_trial t = {.b = i & 1};
    int rc = pto_chip_run(chip, orch_first, &t, &st, &err);
    release_b();
    if (rc != PTO_OK) {
      print_error("trial %d: the run failed: %s: %s\n", i, pto_status_name(rc), err.details);
      fail();
    }
    assert_int_equal(atomic_load(&g_first.ran), 1);
    if (!t.on_b) continue;
    on_b++;
    /* moved: run on A while B was held; asked: by the orchestrator (A
     * woken by anything else would take it itself, sched_lone_ask) */
    n.moved += t.first.ran && t.first.core == 1 - t.b && t.first.held && t.asks > 0;
    if (!t.long_before) {
      n.short_before++;
      n.asks_short += t.asks;
    }
  }
  pto_chip_destroy(chip);
  if (on_b < 5) {
    print_error("FIRST went to the held core %d times in 200 trials, expected 5\n", on_b);
    fail();
  }
  return n;
}

static void test_orchestrator_moves_a_first_block(void **state) {
  (void)state;
  first_counts n = first_trials(20000); /* 20 us blocks before */
  if (n.moved != 5 || n.short_before != 0) {
    print_error("after blocks of 20 us (voted short before %d of 5 trials), FIRST ran on the "
                "free core while B was held in %d of 5 trials, expected 5\n",
                n.short_before, n.moved);
    fail();
  }
}

static void test_orchestrator_leaves_it_after_empty_blocks(void **state) {
  (void)state;
  first_counts n = first_trials(0); /* empty blocks before */
  /* voted short: no ask. A sanitizer's build may time even an empty
   * block over the threshold, and vote long: then the ask is the gate's
   * answer, and only the vote's count is printed */
  printf("after empty blocks: voted short before %d of 5 trials\n", n.short_before);
  if (n.asks_short != 0) {
    print_error("after empty blocks, voted short before %d trials, the orchestrator asked "
                "%llu blocks moved in them, expected none\n",
                n.short_before, (unsigned long long)n.asks_short);
    fail();
  }
}

static void test_role_mode(void **state) {
  (void)state;
  run_trials(false);
}

static void test_scheduler_threads(void **state) {
  (void)state;
  run_trials(true);
}

int main(void) {
  setenv("PTO_ORCH_GATHER", "0", 1); /* before any option is read: above */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_role_mode),
      cmocka_unit_test(test_scheduler_threads),
      cmocka_unit_test(test_orchestrator_moves_a_first_block),
      cmocka_unit_test(test_orchestrator_leaves_it_after_empty_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
