/* test_async_lifetime.c — asynchronous completion tokens against the
 * lifetime of runs (chip.h: any thread may call pto_chip_async_complete).
 *
 *  - A token stays invalid forever once its block completed: a token
 *    from 65 536 runs ago must not complete a block of the current run
 *    (the old token carried a 16-bit run tag). Slots and generations
 *    belong to the chip, and a generation is never reused.
 *  - A completer racing with the end of runs (here: one that presents a
 *    bogus token in a loop while the main thread runs the chip again and
 *    again) must never touch a freed run: run under ASan, the old code's
 *    completer read the run after pto_chip_run freed it.
 *  - A refused begin says why: a second begin in one block, a NULL token
 *    pointer (before, a bare PTO_EINVAL, and the run's details said only
 *    that the kernel returned -1). */
#include <pthread.h>
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

#include "chip/run.h" /* white box: to age the chip by 65 535 runs at once */
#include "pto/pto.h"

static _Atomic uint64_t token;
static _Atomic int have_token;
static int k_async;

static int async_kernel(const pto_kctx *c) {
  uint64_t t;
  int rc = pto_kctx_async_begin(c, &t);
  if (rc) return rc;
  atomic_store(&token, t);
  atomic_store(&have_token, 1);
  return 0;
}

static uint64_t wait_token(void) {
  for (int i = 0; i < 20000 && !atomic_load(&have_token); i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  assert_true(atomic_load(&have_token));
  atomic_store(&have_token, 0);
  return atomic_load(&token);
}

typedef struct stale_st {
  uint64_t old, cur;
  int rc_first, rc_old, rc_cur;
} stale_st;

static void first_run(pto_orch *o, void *arg) {
  stale_st *st = arg;
  pto_submit(o, k_async, NULL, NULL, NULL);
  st->old = wait_token();
  st->rc_first = pto_chip_async_complete(pto_orch_chip(o), st->old);
}

static void later_run(pto_orch *o, void *arg) {
  stale_st *st = arg;
  pto_submit(o, k_async, NULL, NULL, NULL);
  st->cur = wait_token();
  st->rc_old = pto_chip_async_complete(pto_orch_chip(o), st->old);
  st->rc_cur = pto_chip_async_complete(pto_orch_chip(o), st->cur);
}

static pto_chip *make_chip(void) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "async", async_kernel, &k_async), PTO_OK);
  return chip;
}

static void test_token_from_65536_runs_ago(void **state) {
  (void)state;
  pto_chip *chip = make_chip();
  stale_st st = {0};
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, first_run, &st, NULL, &err), PTO_OK);
  assert_int_equal(st.rc_first, PTO_OK);
  chip->run_seq += 65535; /* as if 65 535 runs had happened since */
  int rc = pto_chip_run(chip, later_run, &st, NULL, &err);
  pto_chip_destroy(chip);
  printf("token 0x%llx of an earlier run presented in a later one: %s (run: %s: %s)\n",
         (unsigned long long)st.old, pto_status_name(st.rc_old), pto_status_name(rc), err.details);
  if (st.rc_old != PTO_EASYNC_INVALID)
    fail_msg("a token completed 65 536 runs ago was accepted (%s), expected PTO_EASYNC_INVALID: "
             "it completed a block of the current run that nobody completed",
             pto_status_name(st.rc_old));
  assert_int_equal(rc, PTO_OK); /* chip.h: a token of an earlier run leaves this one alone */
}

/* A token never handed out (0: a variable pto_kctx_async_begin never set)
 * fails the run at once, naming it; before, it passed for an earlier
 * run's and the run waited for its real completion until the watchdog. */
static void zero_token_run(pto_orch *o, void *arg) {
  int *rc = arg;
  pto_submit(o, k_async, NULL, NULL, NULL);
  uint64_t real = wait_token();
  *rc = pto_chip_async_complete(pto_orch_chip(o), 0);
  (void)real; /* never completed: the run ends on the bad token */
}

static void test_zero_token_fails_the_run(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.watchdog_ms = 60000; /* what ends the run must not be the watchdog */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "async", async_kernel, &k_async), PTO_OK);
  int rc_complete = 0;
  pto_error_info err;
  int rc = pto_chip_run(chip, zero_token_run, &rc_complete, NULL, &err);
  printf("token 0: %s; run: %s: %s\n", pto_status_name(rc_complete), pto_status_name(rc),
         err.details);
  assert_int_equal(rc_complete, PTO_EASYNC_INVALID);
  assert_int_equal(rc, PTO_EASYNC_INVALID);
  assert_non_null(strstr(err.details, "never handed out"));
  /* and the next run is whole */
  stale_st st = {0};
  assert_int_equal(pto_chip_run(chip, first_run, &st, NULL, &err), PTO_OK);
  assert_int_equal(st.rc_first, PTO_OK);
  pto_chip_destroy(chip);
}

/* ---- a refused begin says why ---- */

static int misuse; /* 0: begins twice; 1: a NULL token pointer */
static char misuse_why[400];
static int misuse_rc;

static int misuse_kernel(const pto_kctx *c) {
  uint64_t t;
  int rc;
  if (misuse == 0) {
    rc = pto_kctx_async_begin(c, &t);
    if (rc) return rc;
    atomic_store(&token, t);
    atomic_store(&have_token, 1);
    uint64_t again;
    rc = pto_kctx_async_begin(c, &again);
  } else {
    rc = pto_kctx_async_begin(c, NULL);
  }
  misuse_rc = rc;
  snprintf(misuse_why, sizeof misuse_why, "%s", pto_last_error());
  return rc;
}

static void misuse_run(pto_orch *o, void *arg) {
  int *kid = arg;
  pto_submit(o, *kid, NULL, NULL, NULL);
  if (misuse == 0) /* the first begin's block completes: only the second is refused */
    pto_chip_async_complete(pto_orch_chip(o), wait_token());
}

static void test_refused_begin_says_why(void **state) {
  (void)state;
  pto_chip *chip = make_chip();
  int kid;
  assert_int_equal(pto_kernel_register_aiv(chip, "misuse", misuse_kernel, &kid), PTO_OK);
  static const char *const what[] = {"already went asynchronous", "token is NULL"};
  for (misuse = 0; misuse < 2; misuse++) {
    misuse_why[0] = '\0';
    pto_error_info err;
    int rc = pto_chip_run(chip, misuse_run, &kid, NULL, &err);
    printf("%s: begin returned %s ('%s'); run: %s: %s\n", misuse ? "NULL token" : "second begin",
           pto_status_name(misuse_rc), misuse_why, pto_status_name(rc), err.details);
    assert_int_equal(misuse_rc, PTO_EINVAL);
    assert_int_equal(rc, PTO_EINVAL);
    if (!strstr(misuse_why, what[misuse]) || !strstr(err.details, what[misuse]))
      fail_msg("a refused pto_kctx_async_begin (%s) should say '%s' in pto_last_error ('%s') and "
               "in the run's details ('%s')",
               misuse ? "NULL token" : "second begin", what[misuse], misuse_why, err.details);
  }
  /* and the chip runs on */
  stale_st st = {0};
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, first_run, &st, NULL, &err), PTO_OK);
  assert_int_equal(st.rc_first, PTO_OK);
  pto_chip_destroy(chip);
}

/* ---- a completer racing with the end of runs ---- */

#define RUNS 60
static _Atomic int stop_completer;
static _Atomic uint64_t calls;

static void *completer(void *arg) {
  pto_chip *chip = arg;
  /* lowest priority, on the main thread's CPU: whenever the main thread
   * wakes (from joining the run's threads, say) it preempts us, often
   * between our load of the run and our use of it */
  struct sched_param sp = {0};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
  while (!atomic_load(&stop_completer)) {
    pto_chip_async_complete(chip, 0x5eed0000ffffull); /* never a valid token */
    atomic_fetch_add(&calls, 1);
  }
  return NULL;
}

static void empty_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
  struct timespec ts = {0, 300000}; /* the completer gets the CPU meanwhile */
  nanosleep(&ts, NULL);
}

static void test_late_completer_races_teardown(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  atomic_store(&stop_completer, 0);
  cpu_set_t all, one;
  sched_getaffinity(0, sizeof all, &all);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  sched_setaffinity(0, sizeof one, &one); /* inherited by the completer and the run's threads */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, completer, chip), 0);
  int ok = 0, invalid = 0;
  for (int i = 0; i < RUNS; i++) {
    pto_error_info err;
    int rc = pto_chip_run(chip, empty_orch, NULL, NULL, &err);
    if (rc == PTO_OK)
      ok++;
    else if (rc == PTO_EASYNC_INVALID)
      invalid++;
    else
      fail_msg("run %d returned %s: %s", i, pto_status_name(rc), err.details);
  }
  atomic_store(&stop_completer, 1);
  pthread_join(th, NULL);
  sched_setaffinity(0, sizeof all, &all);
  printf("%d runs against a looping bogus completer (%llu calls): %d ok, %d failed with "
         "PTO_EASYNC_INVALID\n",
         RUNS, (unsigned long long)atomic_load(&calls), ok, invalid);
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, empty_orch, NULL, NULL, &err), PTO_OK);
  /* with no run in progress, a token is simply invalid */
  assert_int_equal(pto_chip_async_complete(chip, 1), PTO_EASYNC_INVALID);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_token_from_65536_runs_ago),
      cmocka_unit_test(test_zero_token_fails_the_run),
      cmocka_unit_test(test_late_completer_races_teardown),
      cmocka_unit_test(test_refused_begin_says_why),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
