/* test_spread.c — which CPUs a run's threads may use
 * (pto_chip_config.spread_cores, src/chip/spread.c).
 *
 * Each case runs a two-block task on a chip of two cores: both blocks start,
 * the orchestration function returns, and each block then reads the CPUs its
 * own thread may run on.
 *  - spread_cores = 2: core i is bound to the ((first + i) mod n)-th CPU of
 *    the n the test may use (first: 0, or a node rank's offset, 1 here);
 *  - in the next run, while the orchestrator still submits, both cores may
 *    run on every CPU again;
 *  - spread_cores = 0: the cores keep every CPU throughout;
 *  - on a machine that gives the test one CPU there is nothing to spread:
 *    the cores keep that CPU.
 * And, after a warm-up of two-block tasks that lets each core time its
 * blocks (src/chip/pull_hold.h), with both cores held by a blocker and 200
 * ready tasks queued behind them (the orchestrator far ahead of cores with
 * a backlog):
 *  - warmed up with short blocks, the orchestrator runs on one CPU, and
 *    the cores on all the others, until its function returns (then the
 *    test's thread has all its CPUs again);
 *  - its first wait (pto_orch_wait_task) gives its CPU back at once;
 *  - an orchestrator that stops submitting in its own code gets it back
 *    from the watchdog within a few ticks;
 *  - warmed up with blocks of 4 ms (longer than a quarter of
 *    PTO_PULL_HOLD_NS, which this program sets to 10 ms), it keeps every
 *    CPU: real kernels need the CPU more than the orchestrator does;
 *  - spread_cores = 0 never does any of it.
 * The cases that expect a bind use spread_cores = 2, which binds whatever
 * else runs on the machine. spread_cores = 1 (the default) binds only
 * while the threads runnable on the machine that are not pto's fit on the
 * CPUs outside the test's: with threads of the test's own spinning (one
 * more than those CPUs, and two more for the cores, counted as pto's
 * while their kernels sleep), it binds neither the cores nor the
 * orchestrator. Whether it binds on a quiet machine depends on what else
 * the machine runs, so that is checked through its decision
 * (cpu_set_unshared) and the count it reads (cpu_runnable_now). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/node_hooks.h" /* white box: a node rank's first CPU */
#include "common/cpu_bind.h" /* white box: the machine's runnable threads */
#include "common/wait.h"     /* pto_cpu_relax */
#include "pto/pto.h"

#define WAIT_MS 5000
#define LONG_NS 4000000 /* 4 ms: a warm-up block longer than a quarter of PTO_PULL_HOLD_NS */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* What the test's own thread may run on: the cores' threads start with it. */
static cpu_set_t all_cpus;
static int nall;

/* The CPU index (0-based, counted within all_cpus) of the only CPU in s, or
 * -1 when s holds more or other CPUs. */
static int only_cpu(const cpu_set_t *s) {
  if (CPU_COUNT(s) != 1) return -1;
  for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &all_cpus)) continue;
    if (CPU_ISSET(cpu, s)) return k;
    k++;
  }
  return -1;
}

/* ---- one probe run ---- */

typedef struct probe {
  _Atomic int started;  /* blocks running */
  _Atomic int returned; /* the orchestration function has returned */
  _Atomic int seen;     /* blocks that recorded their CPUs */
  bool after;           /* record after the function returned, else during it */
  bool expect_bound;    /* after: wait (up to WAIT_MS) for the bind to land */
  cpu_set_t cpus[2];    /* per core id */
} probe;

static probe P;

static int k_probe(const pto_kctx *c) {
  probe *p = &P;
  atomic_fetch_add(&p->started, 1);
  cpu_set_t s;
  if (p->after) {
    uint64_t end = now_ms() + WAIT_MS;
    while (!atomic_load(&p->returned) && now_ms() < end)
      sleep_ms(1);
    /* the bind follows the return; without it, give it time to (wrongly) land */
    if (!p->expect_bound) sleep_ms(50);
    do {
      sched_getaffinity(0, sizeof s, &s);
      if (!p->expect_bound || CPU_COUNT(&s) == 1) break;
      sleep_ms(1);
    } while (now_ms() < end);
  } else {
    sched_getaffinity(0, sizeof s, &s);
  }
  p->cpus[c->core_id] = s;
  atomic_fetch_add(&p->seen, 1);
  return 0;
}

static int kid;

static void orch_probe(pto_orch *o, void *arg) {
  (void)arg;
  probe *p = &P;
  /* started together, a block on each core (without, the core whose
   * block ends first may take the other from a core still waking:
   * sched.c, take_lone) */
  pto_submit_opts so = {.block_num = 2, .sync_start = true};
  pto_args a;
  pto_args_init(&a);
  assert_int_equal(pto_submit(o, kid, &a, &so, NULL), 0);
  /* both blocks run (and, during, have recorded) before we return */
  uint64_t end = now_ms() + WAIT_MS;
  while (atomic_load(p->after ? &p->started : &p->seen) < 2 && now_ms() < end)
    sleep_ms(1);
  assert_int_equal(atomic_load(p->after ? &p->started : &p->seen), 2);
  atomic_store(&p->returned, 1); /* the last thing before pto returns to the run */
}

static void probe_run(pto_chip *chip, bool after, bool expect_bound) {
  memset(&P, 0, sizeof P);
  P.after = after;
  P.expect_bound = expect_bound;
  assert_int_equal(pto_chip_run(chip, orch_probe, NULL, NULL, NULL), 0);
  assert_int_equal(atomic_load(&P.seen), 2);
}

/* ---- the orchestrator alone while it runs far ahead ---- */

typedef struct ahead {
  _Atomic int blocked;  /* blocker blocks running */
  _Atomic int check;    /* blockers: record your CPUs now */
  _Atomic int recorded; /* blockers that did */
  _Atomic int go;       /* blockers: return */
  cpu_set_t cpus[2];    /* blockers' CPUs, per core id */
} ahead;

static ahead A;

static bool wait_flag(_Atomic int *f, int v) {
  uint64_t end = now_ms() + WAIT_MS;
  while (atomic_load(f) < v && now_ms() < end)
    sleep_ms(1);
  return atomic_load(f) >= v;
}

/* Holds its core until `go`, recording its CPUs when asked. */
static int k_block(const pto_kctx *c) {
  atomic_fetch_add(&A.blocked, 1);
  while (!atomic_load(&A.check) && !pto_kctx_cancelled(c))
    sleep_ms(1);
  sched_getaffinity(0, sizeof A.cpus[0], &A.cpus[c->core_id]);
  atomic_fetch_add(&A.recorded, 1);
  while (!atomic_load(&A.go) && !pto_kctx_cancelled(c))
    sleep_ms(1);
  return 0;
}

static int k_noop(const pto_kctx *c) {
  (void)c;
  return 0;
}

/* Runs for scalar 0 ns (the warm-up's blocks). */
static int k_busy(const pto_kctx *c) {
  uint64_t ns = c->scalars[0];
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do
    clock_gettime(CLOCK_MONOTONIC, &t);
  while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec -
             (uint64_t)t0.tv_nsec <
         ns);
  return 0;
}

static int kid_block, kid_noop, kid_busy;

/* How the orchestration ends its time alone (or checks it never began). */
typedef enum { END_RETURN, END_WAIT, END_IDLE, END_NONE } ahead_end;

typedef struct ahead_case {
  ahead_end end;
  uint64_t warm_ns; /* how long the warm-up's blocks run: 0, or LONG_NS */
  int alone_cpu;    /* the orchestrator's only CPU while ahead, -1: more */
  uint64_t idle_ms; /* END_IDLE: how long until it had every CPU again */
  bool free_after;  /* END_WAIT/END_IDLE: every CPU again afterwards */
  pto_task_id blocker;
} ahead_case;

static void orch_ahead(pto_orch *o, void *arg) {
  ahead_case *k = arg;
  pto_submit_opts so = {.block_num = 2};
  pto_args a;
  /* the warm-up: 64 blocks per core, each core times 4 of them; one task at
   * a time, so both cores are idle when the next comes and take a block each */
  for (int i = 0; i < 64; i++) {
    pto_task_id id;
    pto_args_init(&a);
    pto_args_scalar(&a, k->warm_ns);
    assert_int_equal(pto_submit(o, kid_busy, &a, &so, &id), 0);
    assert_int_equal(pto_orch_wait_task(o, id, WAIT_MS), 0);
  }
  pto_args_init(&a);
  assert_int_equal(pto_submit(o, kid_block, &a, &so, &k->blocker), 0);
  assert_true(wait_flag(&A.blocked, 2)); /* both cores are held */
  /* 200 ready tasks queue behind them: far ahead of cores with a backlog */
  for (int i = 0; i < 200; i++) {
    pto_args_init(&a);
    assert_int_equal(pto_submit(o, kid_noop, &a, NULL, NULL), 0);
  }
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  k->alone_cpu = only_cpu(&s);
  atomic_store(&A.check, 1);
  assert_true(wait_flag(&A.recorded, 2));
  switch (k->end) {
  case END_WAIT:
    atomic_store(&A.go, 1);
    assert_int_equal(pto_orch_wait_task(o, k->blocker, WAIT_MS), 0);
    sched_getaffinity(0, sizeof s, &s);
    k->free_after = CPU_EQUAL(&s, &all_cpus);
    break;
  case END_IDLE: { /* busy in its own code: no submit, no wait */
    uint64_t t0 = now_ms();
    do {
      sched_getaffinity(0, sizeof s, &s);
      if (CPU_EQUAL(&s, &all_cpus)) break;
      sleep_ms(5);
    } while (now_ms() - t0 < WAIT_MS);
    k->idle_ms = now_ms() - t0;
    k->free_after = CPU_EQUAL(&s, &all_cpus);
    atomic_store(&A.go, 1);
    break;
  }
  default: atomic_store(&A.go, 1);
  }
}

/* One cluster of two AIV cores; watchdog_ms 0: the default. */
static pto_chip *two_core_chip(int spread, int64_t watchdog_ms) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.spread_cores = spread;
  if (watchdog_ms) cfg.watchdog_ms = watchdog_ms;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  return chip;
}

static void ahead_run(int spread, ahead_case *k) {
  memset(&A, 0, sizeof A);
  /* the watchdog ticks every 100 ms; the blockers never stall it */
  pto_chip *chip = two_core_chip(spread, 8000);
  assert_int_equal(pto_kernel_register_aiv(chip, "block", k_block, &kid_block), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "noop", k_noop, &kid_noop), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "busy", k_busy, &kid_busy), 0);
  assert_int_equal(pto_chip_run(chip, orch_ahead, k, NULL, NULL), 0);
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  if (!CPU_EQUAL(&s, &all_cpus)) {
    print_error("after the run the test's thread may run on %d CPUs, expected its %d again\n",
                CPU_COUNT(&s), nall);
    fail();
  }
  pto_chip_destroy(chip);
}

/* While alone: the orchestrator on one CPU, each core on every other one. */
static void expect_alone(const ahead_case *k) {
  printf("ahead of a backlog: the orchestrator on CPU #%d of %d\n", k->alone_cpu, nall);
  if (nall < 2) {
    assert_int_equal(k->alone_cpu, 0); /* its one CPU, as before */
    return;
  }
  if (k->alone_cpu < 0) {
    print_error("far ahead of cores with a backlog, the orchestrator may still run on every CPU\n");
    fail();
  }
  for (int i = 0; i < 2; i++) {
    cpu_set_t want = all_cpus;
    int cpu = 0;
    for (int j = 0; cpu < CPU_SETSIZE; cpu++)
      if (CPU_ISSET(cpu, &all_cpus) && j++ == k->alone_cpu) break;
    CPU_CLR(cpu, &want);
    if (!CPU_EQUAL(&A.cpus[i], &want)) {
      print_error("core %d may run on %d CPUs (CPU #%d of the orchestrator's %s), expected the %d "
                  "others\n",
                  i, CPU_COUNT(&A.cpus[i]), k->alone_cpu,
                  CPU_ISSET(cpu, &A.cpus[i]) ? "among them" : "not", nall - 1);
      fail();
    }
  }
}

/* A run warmed up with short blocks, ending its time alone by `end`: it
 * must have run alone first. */
static ahead_case alone_run(ahead_end end) {
  ahead_case k = {.end = end};
  ahead_run(2, &k);
  expect_alone(&k);
  return k;
}

static void test_the_orchestrator_runs_alone_while_far_ahead(void **state) {
  (void)state;
  alone_run(END_RETURN);
}

static void test_its_first_wait_gives_its_cpu_back(void **state) {
  (void)state;
  ahead_case k = alone_run(END_WAIT);
  if (!k.free_after) {
    print_error("after pto_orch_wait_task the orchestrator still runs alone on a CPU\n");
    fail();
  }
}

static void test_the_watchdog_gives_an_idle_orchestrators_cpu_back(void **state) {
  (void)state;
  ahead_case k = alone_run(END_IDLE);
  printf("no submit and no wait: every CPU again after %llu ms (watchdog ticks: 100 ms)\n",
         (unsigned long long)k.idle_ms);
  if (nall > 1 && (!k.free_after || k.idle_ms > 1000)) {
    print_error("an orchestrator that stopped submitting kept its CPU for %llu ms; expected "
                "back within two or three watchdog ticks (100 ms each)\n",
                (unsigned long long)k.idle_ms);
    fail();
  }
}

/* Ahead of a backlog, yet the orchestrator kept every CPU, and so did the
 * cores. */
static void expect_never_alone(const ahead_case *k, const char *why) {
  printf("%s, then ahead of a backlog: the orchestrator on CPU #%d of %d (-1: more)\n", why,
         k->alone_cpu, nall);
  if (nall > 1 && k->alone_cpu >= 0) {
    print_error("%s, yet the orchestrator ran on CPU #%d alone; expected every CPU\n", why,
                k->alone_cpu);
    fail();
  }
  for (int i = 0; i < 2; i++)
    assert_true(CPU_EQUAL(&A.cpus[i], &all_cpus));
}

static void test_long_blocks_never_set_it_alone(void **state) {
  (void)state;
  ahead_case k = {.end = END_RETURN, .warm_ns = LONG_NS};
  ahead_run(2, &k);
  expect_never_alone(&k, "blocks of 4 ms (long blocks need the cores' CPUs)");
}

static void test_spread_cores_0_never_sets_it_alone(void **state) {
  (void)state;
  ahead_case k = {.end = END_RETURN};
  ahead_run(0, &k);
  expect_never_alone(&k, "spread_cores = 0");
}

static pto_chip *make_chip(int spread) {
  pto_chip *chip = two_core_chip(spread, 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "probe", k_probe, &kid), 0);
  return chip;
}

/* Core i may run on every CPU the test may. */
static void expect_free(const char *when) {
  for (int i = 0; i < 2; i++) {
    if (CPU_EQUAL(&P.cpus[i], &all_cpus)) continue;
    print_error("%s: core %d may run on %d CPUs (only CPU #%d of the test's if 1), expected all %d "
                "of the test's\n",
                when, i, CPU_COUNT(&P.cpus[i]), only_cpu(&P.cpus[i]), nall);
    fail();
  }
}

/* Core i runs only on the ((first + i) mod n)-th CPU of the test's n. */
static void expect_spread(int first) {
  for (int i = 0; i < 2; i++) {
    int want = (first + i) % nall, got = only_cpu(&P.cpus[i]);
    printf("core %d: bound to CPU #%d of %d (expected #%d)\n", i, got, nall, want);
    if (got != want) {
      print_error("after the orchestration returned, core %d may run on %d CPUs (#%d if 1), "
                  "expected only CPU #%d of the test's %d\n",
                  i, CPU_COUNT(&P.cpus[i]), got, want, nall);
      fail();
    }
  }
}

static void test_spread_while_the_orchestrator_waits(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2);
  for (int round = 0; round < 3; round++) {
    probe_run(chip, true, nall > 1);
    if (nall > 1)
      expect_spread(0);
    else
      expect_free("one CPU, nothing to spread");
    /* the next run's orchestration: every CPU again */
    probe_run(chip, false, false);
    expect_free("while the next orchestration submits");
  }
  pto_chip_destroy(chip);
}

static void test_a_node_rank_counts_on_from_its_first_cpu(void **state) {
  (void)state;
  if (nall < 2) {
    printf("one CPU: the offset cannot show\n");
    pto_chip *chip = make_chip(2);
    chip_set_cpu_first(chip, 1);
    probe_run(chip, true, false);
    expect_free("one CPU, nothing to spread");
    pto_chip_destroy(chip);
    return;
  }
  pto_chip *chip = make_chip(2);
  chip_set_cpu_first(chip, 1);
  probe_run(chip, true, true);
  expect_spread(1);
  pto_chip_destroy(chip);
}

static void test_spread_cores_0_leaves_them_to_the_os(void **state) {
  (void)state;
  pto_chip *chip = make_chip(0);
  probe_run(chip, true, false);
  expect_free("spread_cores = 0, after the orchestration returned");
  probe_run(chip, false, false);
  expect_free("spread_cores = 0, during the orchestration");
  pto_chip_destroy(chip);
}

/* ---- giving way to other threads (spread_cores = 1) ---- */

/* Threads of the test's own, not pto's: each spins until stopped. */
typedef struct spinners {
  int n;
  pthread_t t[64];
  _Atomic int stop;
} spinners;

static void *spin_main(void *arg) {
  spinners *s = arg;
  while (!atomic_load_explicit(&s->stop, memory_order_relaxed))
    pto_cpu_relax();
  return NULL;
}

/* Enough spinning threads that the others do not fit outside the test's
 * CPUs: one more than those CPUs, and two for the cores, which pto counts
 * as runnable while their kernels sleep. */
static void spinners_start(spinners *s) {
  s->n = cpu_online() - nall + 3;
  if (s->n > 64) s->n = 64;
  atomic_store(&s->stop, 0);
  for (int i = 0; i < s->n; i++)
    assert_int_equal(pthread_create(&s->t[i], NULL, spin_main, s), 0);
}

static void spinners_stop(spinners *s) {
  atomic_store(&s->stop, 1);
  for (int i = 0; i < s->n; i++)
    pthread_join(s->t[i], NULL);
}

static void test_cores_give_way_to_other_threads(void **state) {
  (void)state;
  spinners s;
  spinners_start(&s);
  pto_chip *chip = make_chip(1);
  probe_run(chip, true, false);
  expect_free("spread_cores = 1 with other threads runnable, after the orchestration returned");
  pto_chip_destroy(chip);
  spinners_stop(&s);
}

static void test_the_orchestrator_gives_way_to_other_threads(void **state) {
  (void)state;
  spinners s;
  spinners_start(&s);
  ahead_case k = {.end = END_RETURN};
  ahead_run(1, &k);
  spinners_stop(&s);
  expect_never_alone(&k, "spread_cores = 1 with other threads runnable");
}

/* The decision: the others fit on the CPUs outside the set. */
static void test_the_decision_counts_the_cpus_outside(void **state) {
  (void)state;
  assert_true(cpu_set_unshared(0, 2, 2));  /* a quiet 2-CPU machine */
  assert_false(cpu_set_unshared(1, 2, 2)); /* one other thread */
  assert_true(cpu_set_unshared(6, 8, 2));  /* 6 others, 6 CPUs outside ours */
  assert_false(cpu_set_unshared(7, 8, 2));
  /* what it reads: at least the caller, running, and each spinner */
  int quiet = cpu_runnable_now();
  printf("runnable threads on the machine now: %d (online CPUs: %d)\n", quiet, cpu_online());
  assert_true(quiet >= 1);
  spinners s;
  spinners_start(&s);
  int busy = cpu_runnable_now();
  spinners_stop(&s);
  printf("with %d spinners: %d\n", s.n, busy);
  assert_true(busy >= s.n + 1);
}

int main(void) {
  /* blocks are short under a quarter of this, 2.5 ms: the warm-up's empty
   * blocks are, also under a sanitizer, and its blocks of LONG_NS are not
   * (set before the first option is read, once per process) */
  setenv("PTO_PULL_HOLD_NS", "10000000", 1);
  sched_getaffinity(0, sizeof all_cpus, &all_cpus);
  nall = CPU_COUNT(&all_cpus);
  printf("the test may use %d CPUs\n", nall);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spread_while_the_orchestrator_waits),
      cmocka_unit_test(test_a_node_rank_counts_on_from_its_first_cpu),
      cmocka_unit_test(test_spread_cores_0_leaves_them_to_the_os),
      cmocka_unit_test(test_the_orchestrator_runs_alone_while_far_ahead),
      cmocka_unit_test(test_its_first_wait_gives_its_cpu_back),
      cmocka_unit_test(test_the_watchdog_gives_an_idle_orchestrators_cpu_back),
      cmocka_unit_test(test_long_blocks_never_set_it_alone),
      cmocka_unit_test(test_spread_cores_0_never_sets_it_alone),
      cmocka_unit_test(test_cores_give_way_to_other_threads),
      cmocka_unit_test(test_the_orchestrator_gives_way_to_other_threads),
      cmocka_unit_test(test_the_decision_counts_the_cpus_outside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
