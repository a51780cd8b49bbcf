/* test_starved_core.c — a core whose placed block gets no CPU while the
 * orchestrator submits is moved off the orchestrator's CPU
 * (src/chip/spread.c, cores_starved and starved_move).
 *
 * The failure it guards: the OS woke a parked core on the CPU of the
 * orchestrator, which made its task ready, and left it queued there behind
 * the orchestrator's submits while the other CPU idled. A dependent graph
 * (a stencil of 4 tasks a step, each reading its 3 neighbours of the step
 * before, on 2 cores) then ran 6 of its 4000 tasks during the
 * orchestration and the rest after it (seen on a 2-CPU virtual machine
 * whose kernel packs threads onto few CPUs): the orchestration and the
 * execution took turns instead of overlapping.
 *
 * Here the OS's choice is forced: the chip's core threads are created
 * while the orchestrator's thread may run on one CPU only, so they inherit
 * that one CPU, and the orchestrator's thread gets every CPU back before
 * it submits. The cores' blocks can then only run on the orchestrator's
 * CPU, when the OS preempts it, unless pto moves them. After its submits
 * the orchestrator keeps its CPU busy until every task has run (2 s at
 * most). The test asserts that every task ran once, in order, and that
 * tasks ran on the busy orchestrator's CPU only if a core was moved off it
 * (pto_run_stats.cores_moved; the blocks that ran there before the move).
 * When the OS put the orchestrator on another CPU first (under load it
 * may), nothing waits behind it and nothing is moved. Without the move,
 * 1100-1900 of the 4000 tasks ran on its CPU, until the OS moved the
 * orchestrator after some milliseconds. On a machine of one CPU nothing
 * can move: it only checks the results. */
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

#include "pto/pto.h"

#define WIDTH 4
#define STEPS 1000
#define NT    (WIDTH * STEPS)

static int64_t cells[NT];
static _Atomic int orch_done, orch_cpu, apart, stacked, ran, out_of_order;
static int kid;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* cell i = 1 + the largest of the cells it reads (its step's number + 1),
 * after about 1 us of work (not a short block, pull_hold.h: the rule that
 * puts a far-ahead orchestrator on a CPU of its own stays out of it) */
static int k_step(const pto_kctx *c) {
  int64_t i = (int64_t)c->scalars[0], t = i / WIDTH, x = i % WIDTH, v = 0;
  if (t > 0)
    for (int64_t k = x > 0 ? x - 1 : 0; k <= (x < WIDTH - 1 ? x + 1 : WIDTH - 1); k++) {
      int64_t p = cells[(t - 1) * WIDTH + k];
      if (p != t) atomic_fetch_add(&out_of_order, 1);
      if (p > v) v = p;
    }
  cells[i] = v + 1;
  if (!atomic_load(&orch_done))
    atomic_fetch_add(sched_getcpu() != atomic_load(&orch_cpu) ? &apart : &stacked, 1);
  atomic_fetch_add(&ran, 1);
  uint64_t until = now_ns() + 1000;
  while (now_ns() < until) {
  }
  return 0;
}

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor row, prev, v;
  memset(&prev, 0, sizeof prev);
  for (int t = 0; t < STEPS; t++) {
    int64_t shape[1] = {WIDTH};
    pto_tensor_init(&row, cells + (size_t)t * WIDTH, WIDTH * sizeof(int64_t), PTO_I64, 1, shape);
    for (int x = 0; x < WIDTH; x++) {
      pto_args a;
      pto_args_init(&a);
      int64_t at = x, one = 1;
      pto_tensor_slice(&row, &at, &one, &v);
      pto_args_output_existing(&a, &v);
      if (t > 0) {
        int64_t lo = x > 0 ? x - 1 : 0, n = (x < WIDTH - 1 ? x + 1 : WIDTH - 1) - lo + 1;
        pto_tensor_slice(&prev, &lo, &n, &v);
        pto_args_input(&a, &v);
      }
      pto_args_scalar(&a, (uint64_t)(t * WIDTH + x));
      atomic_store(&orch_cpu, sched_getcpu());
      if (pto_submit(o, kid, &a, NULL, NULL) != PTO_OK) return;
    }
    prev = row;
  }
  /* its CPU stays busy until every task has run */
  for (uint64_t until = now_ns() + 2000000000u; atomic_load(&ran) < NT && now_ns() < until;)
    atomic_store(&orch_cpu, sched_getcpu());
  atomic_store(&orch_done, 1);
}

static void test_cores_leave_the_busy_orchestrators_cpu(void **state) {
  (void)state;
  cpu_set_t all, one;
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  int here = sched_getcpu();
  assert_true(here >= 0);
  CPU_ZERO(&one);
  CPU_SET(here, &one);
  /* the core threads start with this thread's CPUs: this one only */
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.spread_cores = 2; /* as if no other process ran: the test may share the machine */
  pto_chip *chip;
  int rc = pto_chip_create(&cfg, &chip);
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "step", k_step, &kid), PTO_OK);
  memset(cells, 0, sizeof cells);
  atomic_store(&orch_done, 0);
  atomic_store(&apart, 0);
  atomic_store(&stacked, 0);
  atomic_store(&ran, 0);
  atomic_store(&out_of_order, 0);
  pto_error_info err;
  pto_run_stats st;
  rc = pto_chip_run(chip, orchestrate, NULL, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  pto_chip_destroy(chip);
  for (int i = 0; i < NT; i++)
    if (cells[i] != i / WIDTH + 1)
      fail_msg("cell %d is %lld, expected %d", i, (long long)cells[i], i / WIDTH + 1);
  assert_int_equal(atomic_load(&out_of_order), 0);
  int a = atomic_load(&apart), b = atomic_load(&stacked);
  printf("%llu cores moved; while the orchestrator was busy, %d tasks ran on other CPUs, %d on "
         "its CPU (%d CPUs)\n",
         (unsigned long long)st.cores_moved, a, b, CPU_COUNT(&all));
  /* the OS may have put the orchestrator elsewhere first: then nothing
   * waited behind it, and nothing needed moving */
  if (CPU_COUNT(&all) >= 2 && st.cores_moved == 0 && b > 0)
    fail_msg("%d tasks ran on the busy orchestrator's CPU and no core was moved off it", b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cores_leave_the_busy_orchestrators_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
