/* test_orch_batch.c — batched submission (pto_orch_batch_begin/end,
 * pto/orch.h): the tasks ready at their submit are gathered and pushed
 * together, at the batch's end, when PTO_ORCH_BATCH_MAX are gathered, at
 * a submit of a task that is not ready, before any wait of the
 * orchestrator and at the orchestration's end.
 *
 * Each case runs on one AIV core and counts the blocks that ran. That a
 * gathered task has not started is asserted after a pause (a pushed task
 * would have run by then, so the assertion fails when gathering is
 * broken, and never passes by luck when it works); that a push happened is
 * awaited with a deadline, without any call that would push itself. The
 * randomized graphs of test_differential and test_reuse_differential also
 * submit in batches. */
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

#define NT 80

static int g_k;
static _Atomic int g_ran;   /* blocks run */
static int g_order[2 * NT]; /* the scalar of each, in order */
static int64_t g_buf[NT];

static int k_count(const pto_kctx *c) {
  int at = atomic_fetch_add_explicit(&g_ran, 1, memory_order_acq_rel);
  if (at < 2 * NT) g_order[at] = (int)c->scalars[0];
  return 0;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits up to 5 s for `want` blocks to have run (no pto call: none
 * pushes). */
static int await_ran(int want) {
  for (int i = 0; i < 5000 && atomic_load(&g_ran) < want; i++)
    pause_ms(1);
  return atomic_load(&g_ran);
}

static pto_tensor cell(int i) {
  int64_t n = 1;
  pto_tensor t;
  pto_tensor_init(&t, &g_buf[i], sizeof g_buf[i], PTO_I64, 1, &n);
  return t;
}

/* A task on cell i: writes it (independent of the others), or reads it. */
static int submit_on(pto_orch *o, int i, bool reads, pto_task_id *id) {
  pto_tensor t = cell(i);
  pto_args a;
  pto_args_init(&a);
  if (reads)
    pto_args_input(&a, &t);
  else
    pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, (uint64_t)i);
  return pto_submit(o, g_k, &a, NULL, id);
}

static pto_chip *one_core(void) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 1;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &g_k), PTO_OK);
  atomic_store(&g_ran, 0);
  return chip;
}

static int run(pto_chip *chip, pto_orch_fn fn, pto_error_info *err) {
  pto_run_stats st;
  return pto_chip_run(chip, fn, NULL, &st, err);
}

/* One run of fn on a chip of its own, which must end with `want`. */
static void run_case(pto_orch_fn fn, int want, pto_error_info *err) {
  pto_chip *chip = one_core();
  assert_int_equal(run(chip, fn, err), want);
  pto_chip_destroy(chip);
}

/* Ten independent tasks in a batch: none starts before its end; then all
 * run, in submission order (one core, one queue). */
static void orch_until_end(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  for (int i = 0; i < 10; i++)
    assert_int_equal(submit_on(o, i, false, NULL), PTO_OK);
  pause_ms(30);
  assert_int_equal(atomic_load(&g_ran), 0); /* gathered */
  assert_int_equal(pto_orch_batch_end(o), PTO_OK);
  assert_int_equal(await_ran(10), 10); /* pushed at the end */
}

static void test_gathered_until_end(void **state) {
  (void)state;
  pto_error_info err;
  run_case(orch_until_end, PTO_OK, &err);
  for (int i = 0; i < 10; i++)
    assert_int_equal(g_order[i], i);
}

/* A full batch is pushed at once; the task after it waits for the end;
 * nested batches end at the outermost end. */
static void orch_full(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  for (int i = 0; i < PTO_ORCH_BATCH_MAX; i++)
    assert_int_equal(submit_on(o, i, false, NULL), PTO_OK);
  assert_int_equal(await_ran(PTO_ORCH_BATCH_MAX), PTO_ORCH_BATCH_MAX);
  assert_int_equal(submit_on(o, PTO_ORCH_BATCH_MAX, false, NULL), PTO_OK);
  assert_int_equal(pto_orch_batch_end(o), PTO_OK); /* the inner one */
  pause_ms(30);
  assert_int_equal(atomic_load(&g_ran), PTO_ORCH_BATCH_MAX);
  assert_int_equal(pto_orch_batch_end(o), PTO_OK);
  assert_int_equal(await_ran(PTO_ORCH_BATCH_MAX + 1), PTO_ORCH_BATCH_MAX + 1);
}

static void test_full_batch_pushed(void **state) {
  (void)state;
  pto_error_info err;
  run_case(orch_full, PTO_OK, &err);
}

/* A submit that waits on a gathered task pushes the batch: the reader of
 * cell 0 may run only after its writer, which the batch holds. */
static void orch_dependent(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  assert_int_equal(submit_on(o, 0, false, NULL), PTO_OK);
  assert_int_equal(submit_on(o, 1, false, NULL), PTO_OK);
  pause_ms(20);
  assert_int_equal(atomic_load(&g_ran), 0);
  assert_int_equal(submit_on(o, 0, true, NULL), PTO_OK); /* not ready: waits on task 0 */
  assert_int_equal(await_ran(3), 3);
  assert_int_equal(pto_orch_batch_end(o), PTO_OK);
}

static void test_dependent_submit_pushes(void **state) {
  (void)state;
  pto_error_info err;
  run_case(orch_dependent, PTO_OK, &err);
}

/* Every wait of the orchestrator pushes first: a wait for a gathered
 * task, a read of its output, ends (with the default watchdog, a wait
 * that never pushed would end only with the run failing). */
static void orch_waits(pto_orch *o, void *arg) {
  (void)arg;
  pto_task_id id;
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  assert_int_equal(submit_on(o, 0, false, &id), PTO_OK);
  assert_int_equal(pto_orch_wait_task(o, id, 5000), PTO_OK);
  assert_int_equal(atomic_load(&g_ran), 1);
  assert_int_equal(submit_on(o, 1, false, NULL), PTO_OK);
  int64_t v;
  pto_tensor t = cell(1);
  assert_int_equal(pto_orch_read(o, &t, &v, 5000), PTO_OK);
  assert_int_equal(atomic_load(&g_ran), 2);
  /* left open: the orchestration's end pushes the rest */
  assert_int_equal(submit_on(o, 2, false, NULL), PTO_OK);
}

static void test_waits_push(void **state) {
  (void)state;
  pto_error_info err;
  run_case(orch_waits, PTO_OK, &err);
  assert_int_equal(atomic_load(&g_ran), 3);
}

/* An end without a batch fails the run, named. */
static void orch_unbalanced(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_orch_batch_end(o), PTO_EINVAL);
}

static void test_end_without_begin(void **state) {
  (void)state;
  pto_error_info err;
  run_case(orch_unbalanced, PTO_EINVAL, &err);
  if (!strstr(err.details, "pto_orch_batch_end without pto_orch_batch_begin"))
    fail_msg("details: %s", err.details);
}

/* A run that fails with a batch open (its tasks never run: the run
 * stops), then a run on the same chip: it does not gather (its batch
 * depth starts at 0), runs only its own tasks, and succeeds. */
static void orch_fails_in_batch(pto_orch *o, void *arg) {
  (void)arg;
  assert_int_equal(pto_orch_batch_begin(o), PTO_OK);
  for (int i = 0; i < 5; i++)
    assert_int_equal(submit_on(o, 40 + i, false, NULL), PTO_OK);
  pto_orch_fatal(o, "gives up with a batch open");
}

static void orch_plain(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < 5; i++)
    assert_int_equal(submit_on(o, i, false, NULL), PTO_OK);
  assert_int_equal(await_ran(5), 5); /* pushed at each submit */
}

static void test_failed_run_then_clean(void **state) {
  (void)state;
  pto_chip *chip = one_core();
  pto_error_info err;
  assert_int_equal(run(chip, orch_fails_in_batch, &err), PTO_EFATAL);
  assert_int_equal(atomic_load(&g_ran), 0);
  assert_int_equal(run(chip, orch_plain, &err), PTO_OK);
  assert_int_equal(atomic_load(&g_ran), 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(g_order[i], i);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gathered_until_end),      cmocka_unit_test(test_full_batch_pushed),
      cmocka_unit_test(test_dependent_submit_pushes), cmocka_unit_test(test_waits_push),
      cmocka_unit_test(test_end_without_begin),       cmocka_unit_test(test_failed_run_then_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
