/* test_orch_thread.c — the orchestrator's thread rule (docs/chip.md,
 * "Threads of a chip"): a pto_orch takes submits, scopes, host reads and
 * writes and waits only from the thread running the orchestration
 * function. The same call from another thread returns PTO_EINVAL, does
 * nothing (its task never runs, the owner's state is not touched) and
 * fails the run with details naming the rule, also while the owner is
 * submitting at the same moment (run under TSan: the refusal must not
 * race). pto_orch_fatal and pto_orch_status are the calls any thread may
 * make during the run. */
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

#define RULE "called from a thread other than the one running the orchestration function"

static _Atomic int g_owner_blocks, g_foreign_blocks;

static int k_owner(const pto_kctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&g_owner_blocks, 1);
  return 0;
}

static int k_foreign(const pto_kctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&g_foreign_blocks, 1);
  return 0;
}

typedef struct th_ctx {
  pto_chip *chip;
  int k_owner, k_foreign;
  float data[64];
  pto_tensor t;
  int call;               /* which call the other thread makes (calls[] below) */
  int foreign_rc;         /* what it returned */
  pto_task_id foreign_id; /* the id its pto_submit gave back */
  int owner_rc_after;     /* the owner's next submit after it */
  _Atomic int started;    /* concurrent case: the owner has submitted */
  int owner_submits;      /* concurrent case: submits that returned PTO_OK */
} th_ctx;

static pto_chip *make_chip(th_ctx *c) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  cfg.watchdog_ms = 10000;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "owner", k_owner, &c->k_owner), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "foreign", k_foreign, &c->k_foreign), 0);
  int64_t n = 64;
  pto_tensor_init(&c->t, c->data, sizeof c->data, PTO_F32, 1, &n);
  atomic_store(&g_owner_blocks, 0);
  atomic_store(&g_foreign_blocks, 0);
  return chip;
}

static int submit_with(pto_orch *o, int kernel, const pto_tensor *t) {
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, t);
  return pto_submit(o, kernel, &a, NULL, NULL);
}

/* Every orchestrator call that touches the owner's state, made by the
 * other thread. */
typedef struct foreign_arg {
  pto_orch *o;
  th_ctx *c;
} foreign_arg;

static const char *const calls[] = {"pto_submit",      "pto_submit_dummy",  "pto_submit_v",
                                    "pto_scope_begin", "pto_scope_end",     "pto_orch_read",
                                    "pto_orch_write",  "pto_orch_wait_task"};
#define NCALLS ((int)(sizeof calls / sizeof calls[0]))

static void *foreign_call(void *p) {
  foreign_arg *f = p;
  pto_orch *o = f->o;
  th_ctx *c = f->c;
  float buf[64] = {0};
  pto_task_id id = 12345;
  switch (c->call) {
  case 0: {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &c->t);
    c->foreign_rc = pto_submit(o, c->k_foreign, &a, NULL, &id);
    c->foreign_id = id; /* a refused submit names no task */
    break;
  }
  case 1: c->foreign_rc = pto_submit_dummy(o, NULL, NULL, NULL); break;
  case 2: c->foreign_rc = pto_submit_v(o, c->k_foreign, PTO_INOUT(&c->t)); break;
  case 3: c->foreign_rc = pto_scope_begin(o, PTO_SCOPE_AUTO); break;
  case 4: c->foreign_rc = pto_scope_end(o); break;
  case 5: c->foreign_rc = pto_orch_read(o, &c->t, buf, -1); break;
  case 6: c->foreign_rc = pto_orch_write(o, &c->t, buf, -1); break;
  case 7: c->foreign_rc = pto_orch_wait_task(o, 0, -1); break;
  }
  return NULL;
}

static void orch_one_foreign_call(pto_orch *o, void *arg) {
  th_ctx *c = arg;
  assert_int_equal(submit_with(o, c->k_owner, &c->t), 0);
  if (c->call == 4) pto_scope_begin(o, PTO_SCOPE_AUTO); /* a scope the other thread would end */
  foreign_arg f = {o, c};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, foreign_call, &f), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  c->owner_rc_after = submit_with(o, c->k_owner, &c->t);
}

static void test_each_call_from_another_thread(void **state) {
  (void)state;
  for (int call = 0; call < NCALLS; call++) {
    th_ctx c = {.call = call, .foreign_rc = 12345, .foreign_id = PTO_TASK_NONE};
    c.chip = make_chip(&c);
    pto_error_info err;
    int rc = pto_chip_run(c.chip, orch_one_foreign_call, &c, NULL, &err);
    if (c.foreign_rc != PTO_EINVAL || rc != PTO_EINVAL || !strstr(err.details, calls[call]) ||
        !strstr(err.details, RULE))
      fail_msg("%s from another thread: returned %s (expected PTO_EINVAL), run %s, details '%s'",
               calls[call], pto_status_name(c.foreign_rc), pto_status_name(rc), err.details);
    assert_int_equal(c.owner_rc_after, PTO_EINVAL); /* the run failed: nothing more goes in */
    assert_int_equal(c.foreign_id, PTO_TASK_NONE);
    assert_int_equal(atomic_load(&g_foreign_blocks), 0);
    assert_int_equal(err.task_id, PTO_TASK_NONE);
    pto_chip_destroy(c.chip);
  }
}

/* The other thread submits while the owner submits a chain of 4000 tasks:
 * the refusal reads nothing the owner writes (TSan checks it), the owner's
 * submits before it were accepted, the foreign task never runs. */
static void *foreign_while_owner_submits(void *p) {
  foreign_arg *f = p;
  while (!atomic_load(&f->c->started))
    sched_yield();
  f->c->foreign_rc = submit_with(f->o, f->c->k_foreign, &f->c->t);
  return NULL;
}

static void orch_concurrent(pto_orch *o, void *arg) {
  th_ctx *c = arg;
  foreign_arg f = {o, c};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, foreign_while_owner_submits, &f), 0);
  for (int i = 0; i < 4000; i++) {
    if (submit_with(o, c->k_owner, &c->t) != PTO_OK) break;
    c->owner_submits++;
    atomic_store(&c->started, 1);
  }
  assert_int_equal(pthread_join(th, NULL), 0);
}

static void test_refusal_while_the_owner_submits(void **state) {
  (void)state;
  th_ctx c = {.foreign_rc = 12345};
  c.chip = make_chip(&c);
  pto_error_info err;
  int rc = pto_chip_run(c.chip, orch_concurrent, &c, NULL, &err);
  if (c.foreign_rc != PTO_EINVAL || rc != PTO_EINVAL || !strstr(err.details, RULE))
    fail_msg("submit from another thread during the owner's submits: returned %s, run %s, "
             "details '%s'",
             pto_status_name(c.foreign_rc), pto_status_name(rc), err.details);
  assert_true(c.owner_submits >= 1);
  assert_int_equal(atomic_load(&g_foreign_blocks), 0);
  assert_true(atomic_load(&g_owner_blocks) <= c.owner_submits);
  pto_chip_destroy(c.chip);
}

/* pto_orch_fatal and pto_orch_status from another thread: the run fails
 * with the fatal's own message, and the status is read. */
typedef struct fatal_arg {
  pto_orch *o;
  int fatal_rc, status_rc;
} fatal_arg;

static void *foreign_fatal(void *p) {
  fatal_arg *f = p;
  f->fatal_rc = pto_orch_fatal(f->o, "stopped by a watcher thread");
  f->status_rc = pto_orch_status(f->o);
  return NULL;
}

static void orch_fatal_elsewhere(pto_orch *o, void *arg) {
  fatal_arg *f = arg;
  f->o = o;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, foreign_fatal, f), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
}

static void test_fatal_from_another_thread(void **state) {
  (void)state;
  th_ctx c = {0};
  c.chip = make_chip(&c);
  fatal_arg f = {0};
  pto_error_info err;
  int rc = pto_chip_run(c.chip, orch_fatal_elsewhere, &f, NULL, &err);
  assert_int_equal(rc, PTO_EFATAL);
  assert_int_equal(f.fatal_rc, PTO_EFATAL);
  assert_int_equal(f.status_rc, PTO_EFATAL);
  assert_non_null(strstr(err.details, "stopped by a watcher thread"));
  pto_chip_destroy(c.chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_call_from_another_thread),
      cmocka_unit_test(test_refusal_while_the_owner_submits),
      cmocka_unit_test(test_fatal_from_another_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
