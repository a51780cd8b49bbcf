/* test_thread_start.c — a thread that cannot start is named: which thread
 * (core i of n, scheduler j of m, the watchdog, a checking-mode part of a
 * block), how many of the run's threads were started, and the error
 * pthread_create returned.
 *
 * The program is linked with -Wl,--wrap=pthread_create (tests/CMakeLists.txt):
 * every pthread_create of the library goes through thread_fault.h, and
 * fails with EAGAIN from the chosen call after thread_fault_arm() on. A thread start that
 * fails this way is what an exhausted process (thread or memory limits)
 * gets, and it fails at the call the test chooses. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"
#include "thread_fault.h"

/* From now on, the from-th pthread_create (0: the next) and every later one fail. */

static void expect(const pto_error_info *err, const char *want) {
  if (!strstr(err->details, want))
    fail_msg("error details \"%s\"\n  do not name \"%s\"", err->details, want);
}

static void nop_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

static pto_chip *chip_of(int clusters, int schedulers, int sched_threads) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.schedulers = schedulers;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  return chip;
}

/* Two clusters: 6 cores; with sched_threads, 2 scheduler threads; a watchdog. */
static void fails_at(int sched_threads, int from, const char *thread, const char *started) {
  pto_chip *chip = chip_of(2, 2, sched_threads);
  pto_error_info err;
  thread_fault_arm(from);
  int rc = pto_chip_run(chip, nop_orch, NULL, NULL, &err);
  thread_fault_arm(-1);
  assert_int_equal(rc, PTO_ESYSTEM);
  print_message("%s\n", err.details);
  expect(&err, thread);
  expect(&err, started);
  expect(&err, "pthread_create: Resource temporarily unavailable");
  /* the threads not started are started by the next run */
  assert_int_equal(pto_chip_run(chip, nop_orch, NULL, NULL, &err), PTO_OK);
  pto_chip_destroy(chip);
}

static void test_core_thread_named(void **state) {
  (void)state;
  fails_at(0, 0, "cannot start the thread of core 0 of 6", "0 of the run's 7 threads started");
  fails_at(0, 4, "cannot start the thread of core 4 of 6", "4 of the run's 7 threads started");
}

static void test_scheduler_thread_named(void **state) {
  (void)state;
  fails_at(1, 7, "cannot start the thread of scheduler 1 of 2", "7 of the run's 9 threads started");
}

static void test_watchdog_thread_named(void **state) {
  (void)state;
  fails_at(0, 6, "cannot start the watchdog thread", "6 of the run's 7 threads started");
  fails_at(1, 8, "cannot start the watchdog thread", "8 of the run's 9 threads started");
}

/* ---- checking mode: the parts of a MIX block run as threads of their own ---- */

static int32_t mix_out[4];
static int mix_kid;

static int mix_part(const pto_kctx *ctx) {
  (void)ctx;
  return PTO_OK;
}

static void mix_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor b;
  int64_t four[1] = {4};
  pto_tensor_init(&b, mix_out, sizeof mix_out, PTO_I32, 1, four);
  pto_submit_v(o, mix_kid, PTO_OUT_EXISTING(&b));
}

static void test_checking_part_thread_named(void **state) {
  (void)state;
  for (int from = 0; from <= 2; from++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 1;
    cfg.check = 1;
    cfg.check_seed = 5;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    pto_kernel_desc d = {"mix", mix_part, mix_part, 2};
    assert_int_equal(pto_kernel_register(chip, &d, &mix_kid), PTO_OK);
    pto_error_info err;
    /* the run's own threads are started by a first run */
    assert_int_equal(pto_chip_run(chip, mix_orch, NULL, NULL, &err), PTO_OK);
    thread_fault_arm(from);
    int rc = pto_chip_run(chip, mix_orch, NULL, NULL, &err);
    thread_fault_arm(-1);
    assert_int_equal(rc, PTO_ESYSTEM);
    print_message("%s\n", err.details);
    char want[128];
    snprintf(want, sizeof want,
             "checking mode: cannot start the thread of part %d of 3 of kernel 'mix' block 0/1",
             from);
    expect(&err, want);
    expect(&err, "pthread_create: Resource temporarily unavailable");
    assert_int_equal(pto_chip_run(chip, mix_orch, NULL, NULL, &err), PTO_OK);
    pto_chip_destroy(chip);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_core_thread_named),
      cmocka_unit_test(test_scheduler_thread_named),
      cmocka_unit_test(test_watchdog_thread_named),
      cmocka_unit_test(test_checking_part_thread_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
