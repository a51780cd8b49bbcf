/* test_spread.c — a CPU per core while the orchestrator waits for a run's
 * last tasks (pto_chip_config.spread_cores, src/chip/spread.c).
 *
 * Each case runs a two-block task on a chip of two cores: both blocks start,
 * the orchestration function returns, and each block then reads the CPUs its
 * own thread may run on.
 *  - spread_cores = 1: core i is bound to the ((first + i) mod n)-th CPU of
 *    the n the test may use (first: 0, or a node rank's offset, 1 here);
 *  - in the next run, while the orchestrator still submits, both cores may
 *    run on every CPU again;
 *  - spread_cores = 0: the cores keep every CPU throughout;
 *  - on a machine that gives the test one CPU there is nothing to spread:
 *    the cores keep that CPU. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/node_hooks.h" /* white box: a node rank's first CPU */
#include "pto/pto.h"

#define WAIT_MS 5000

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
  pto_submit_opts so = {.block_num = 2};
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

static pto_chip *make_chip(int spread) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.spread_cores = spread;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
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
  pto_chip *chip = make_chip(1);
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
    pto_chip *chip = make_chip(1);
    chip_set_cpu_first(chip, 1);
    probe_run(chip, true, false);
    expect_free("one CPU, nothing to spread");
    pto_chip_destroy(chip);
    return;
  }
  pto_chip *chip = make_chip(1);
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

int main(void) {
  sched_getaffinity(0, sizeof all_cpus, &all_cpus);
  nall = CPU_COUNT(&all_cpus);
  printf("the test may use %d CPUs\n", nall);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spread_while_the_orchestrator_waits),
      cmocka_unit_test(test_a_node_rank_counts_on_from_its_first_cpu),
      cmocka_unit_test(test_spread_cores_0_leaves_them_to_the_os),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
