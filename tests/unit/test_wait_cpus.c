/* test_wait_cpus.c — src/common/wait.c counts the CPUs pto's threads may
 * run on, not the machine's: a process pinned to one CPU (taskset, a
 * container's cpuset, an MPI rank bound to a core) has one, and a waiter
 * that believed in a free second CPU spun away the time slice of the very
 * thread it waited for. The process pins itself to one CPU before pto
 * first counts, as such a process would be from its start. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "common/cpu_bind.h"
#include "common/wait.h"
#include "pto/pto.h"

static int g_first_cpu; /* the CPU the process is pinned to */

static void *count_elsewhere(void *arg) {
  (void)arg;
  return (void *)(intptr_t)pto_wait_cpus();
}

static void test_one_cpu_is_counted_once_pinned(void **state) {
  (void)state;
  if (pto_wait_cpus() != 1) {
    print_error("pinned to CPU %d: pto counts %d CPUs, expected 1\n", g_first_cpu, pto_wait_cpus());
    fail();
  }
  /* a thread created later asks the same count (it was read once) */
  pthread_t t;
  void *got;
  assert_int_equal(pthread_create(&t, NULL, count_elsewhere, NULL), 0);
  assert_int_equal(pthread_join(t, &got), 0);
  assert_int_equal((int)(intptr_t)got, 1);
}

/* The chip still runs on one CPU: every run's one task completes. */
static int g_kernel, g_ran;
static int k_count(const pto_kctx *c) {
  (void)c;
  __atomic_fetch_add(&g_ran, 1, __ATOMIC_RELAXED);
  return 0;
}
static void orch_one(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_submit(o, g_kernel, NULL, NULL, NULL), 0);
}

static void test_runs_complete_on_one_cpu(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &g_kernel), 0);
  for (int i = 0; i < 200; i++) {
    pto_error_info err;
    if (pto_chip_run(chip, orch_one, NULL, NULL, &err) != 0) {
      print_error("run %d: %s\n", i, err.details);
      fail();
    }
  }
  assert_int_equal(g_ran, 200);
  pto_chip_destroy(chip);
}

int main(void) {
  cpu_set_t all;
  if (cpu_set_of_self(&all) != 0) return 1;
  for (g_first_cpu = 0; !CPU_ISSET(g_first_cpu, &all); g_first_cpu++) {
  }
  printf("the test may use %d CPUs; it pins itself to CPU %d\n", CPU_COUNT(&all), g_first_cpu);
  if (cpu_bind_thread(pthread_self(), &all, 0) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_cpu_is_counted_once_pinned),
      cmocka_unit_test(test_runs_complete_on_one_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
