/* test_books.c — pto's own bookkeeping, breached on purpose (white box):
 * each breach is named as PTO_EINTERNAL, never passed as success, left to
 * hang, or misnamed as the program's stall (watchdog.c, run_books_broken).
 *
 *  - more completions than submitted tasks at a run's end (a stale block
 *    of an earlier run ran in this one): the run used to hang, its
 *    orchestrator waiting for completed == submitted;
 *  - the same, found by the watchdog while the run stalls;
 *  - a ready queue whose head position was claimed and never published: a
 *    later ready task of that shape waits forever, once reported as a
 *    "dependency deadlock (oldest waiting: -1)";
 *  - a COMMUTE table left holding a task at a successful run's end (its
 *    bytes would be held from the next run's tasks of that slot);
 *
 * and each time the chip's next run is correct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/run.h" /* white box: the run's counters and queues */
#include "pto/pto.h"

static int k_put_id;
static int k_put(const pto_kctx *c) {
  *(int64_t *)c->tensors[0].buf = (int64_t)c->scalars[0];
  return 0;
}

static void put(pto_orch *o, int64_t *x, uint64_t v) {
  int64_t n = 1;
  pto_tensor t;
  pto_tensor_init(&t, x, sizeof *x, PTO_I64, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, v);
  pto_submit(o, k_put_id, &a, NULL, NULL);
}

enum {
  BREACH_COMPLETED_AT_END,
  BREACH_COMPLETED_IN_STALL,
  BREACH_UNPUBLISHED_HEAD,
  BREACH_COMMUTE_HELD,
  BREACHES
};

typedef struct breach {
  int kind;
  int64_t x;
} breach;

static void breach_orch(pto_orch *o, void *arg) {
  breach *b = arg;
  pto_run *r = o->run;
  switch (b->kind) {
  case BREACH_COMPLETED_AT_END: atomic_fetch_add(&r->completed, 3); break;
  case BREACH_COMPLETED_IN_STALL: {
    atomic_fetch_add(&r->completed, 5);
    /* the orchestrator then stays quiet until the watchdog ends the run */
    while (!pto_orch_status(o)) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    break;
  }
  case BREACH_UNPUBLISHED_HEAD:
    (void)rq_push_claim(&r->queues[SHAPE_AIV].lf); /* claimed, never published */
    put(o, &b->x, 1);                              /* queued behind it */
    break;
  case BREACH_COMMUTE_HELD: /* a slot in the held set that nobody releases */
    cm_lock(&r->cm);
    atomic_store(&r->cm.links[3].inbox, CM_INBOX_EMPTY); /* held: its inbox open */
    r->cm.links[3].held_pos = 0;
    r->cm.held[0] = (cm_held){r->cm.links[3].lo, r->cm.links[3].hi, 3, 0};
    r->cm.nheld = 1;
    cm_unlock(&r->cm);
    break;
  }
}

static void next_orch(pto_orch *o, void *arg) { put(o, arg, 42); }

static void test_breaches_are_named(void **state) {
  (void)state;
  static const char *const want[] = {
      "at the run's end: 3 task completions counted for 0 submitted tasks",
      "task completions counted for 0 submitted tasks",
      "the AIV ready queue's head, position 0, was claimed by a push that never published it",
      "at the run's end: the COMMUTE table still holds task slot 3 after every task completed",
  };
  for (int kind = 0; kind < BREACHES; kind++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 1;
    cfg.watchdog_ms = 200;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "put", k_put, &k_put_id), PTO_OK);
    breach b = {kind, 0};
    pto_error_info err;
    int rc = pto_chip_run(chip, breach_orch, &b, NULL, &err);
    printf("breach %d: %s: %s\n", kind, pto_status_name(rc), err.details);
    if (rc != PTO_EINTERNAL || !strstr(err.details, want[kind]))
      fail_msg("breach %d: %s (%s), expected PTO_EINTERNAL with \"%s\"", kind, pto_status_name(rc),
               err.details, want[kind]);
    int64_t x = 0;
    rc = pto_chip_run(chip, next_orch, &x, NULL, &err);
    if (rc != PTO_OK || x != 42)
      fail_msg("breach %d: the next run returned %s (%s), x = %lld (expected PTO_OK, 42)", kind,
               pto_status_name(rc), err.details, (long long)x);
    pto_chip_destroy(chip);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_breaches_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
