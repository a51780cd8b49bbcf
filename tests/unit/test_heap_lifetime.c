/* test_heap_lifetime.c — a task's OUTPUT buffer stays intact for every
 * consumer that reads it, however long the consumer runs and however soon
 * the producer retires. Consumers take no reference on their producer
 * (docs/chip.md, "Link"): the producer's slot is recycled as soon as it is
 * done, and only its scope's hold on the heap range keeps the buffer. So
 * the test makes the producer retire early and the heap cycle hard while
 * a slow consumer still reads: a small heap, many later tasks that each
 * allocate and fill an OUTPUT buffer with another pattern (in manual
 * scopes: no inferred edge orders them after the consumer's read), and a
 * consumer that checks the producer's pattern before and after a sleep.
 * Any reuse of the producer's bytes shows as a wrong word, printed with
 * its index. */
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

#define WORDS   512 /* 4 KiB OUTPUT buffers */
#define LATER   400 /* tasks submitted while the consumer sleeps */
#define PATTERN 0x5A5A000000000000ull

static int kid_fill, kid_check, kid_copy;
static _Atomic int64_t bad_index = -1;
static _Atomic uint64_t bad_value;

static uint64_t *words(const pto_tensor *t) { return (uint64_t *)t->buf + t->offset; }

/* tensors[0]: OUTPUT; scalars[0]: the pattern */
static int k_fill(const pto_kctx *c) {
  uint64_t *w = words(&c->tensors[0]);
  for (int i = 0; i < WORDS; i++)
    w[i] = c->scalars[0] + (uint64_t)i;
  return 0;
}

static void check(const uint64_t *w) {
  for (int i = 0; i < WORDS; i++)
    if (w[i] != PATTERN + (uint64_t)i) {
      int64_t none = -1;
      if (atomic_compare_exchange_strong(&bad_index, &none, i)) atomic_store(&bad_value, w[i]);
      return;
    }
}

/* tensors[0]: INPUT, the producer's buffer; reads it, sleeps, reads again */
static int k_check(const pto_kctx *c) {
  const uint64_t *w = words(&c->tensors[0]);
  check(w);
  struct timespec ts = {0, 30 * 1000000L};
  nanosleep(&ts, NULL);
  check(w);
  return 0;
}

/* tensors[0]: INPUT (a later task's buffer), tensors[1]: OUTPUT_EXISTING:
 * keeps the later tasks' buffers read, so they are real consumers too */
static int k_copy(const pto_kctx *c) {
  words(&c->tensors[1])[0] = words(&c->tensors[0])[0];
  return 0;
}

typedef struct job {
  uint64_t sink[LATER]; /* one word per copy: copies in manual scopes are unordered */
  int rc;
} job;

static void orch(pto_orch *o, void *arg) {
  job *j = arg;
  int64_t shape[1] = {WORDS};

  if ((j->rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) return;
  pto_tensor out;
  pto_tensor_desc(&out, PTO_I64, 1, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &out);
  pto_args_scalar(&a, PATTERN);
  if ((j->rc = pto_submit(o, kid_fill, &a, NULL, NULL))) return;
  pto_args_init(&a);
  pto_args_input(&a, &out);
  if ((j->rc = pto_submit(o, kid_check, &a, NULL, NULL))) return;
  if ((j->rc = pto_scope_end(o))) return;
  /* the producer is done long before the consumer: the later tasks cycle
   * the heap, each pair in its own manual scope, so that no inferred edge
   * (a write after the consumer's read of the same bytes) would order a
   * reuse of the producer's bytes after the consumer: only the hold does */
  for (int k = 0; k < LATER; k++) {
    if ((j->rc = pto_scope_begin(o, PTO_SCOPE_MANUAL))) return;
    pto_tensor t;
    pto_tensor_desc(&t, PTO_I64, 1, shape);
    pto_args_init(&a);
    pto_args_output(&a, &t);
    pto_args_scalar(&a, (uint64_t)k << 32);
    pto_task_id fill;
    if ((j->rc = pto_submit(o, kid_fill, &a, NULL, &fill))) return;
    pto_tensor sink;
    pto_tensor_init(&sink, &j->sink[k], sizeof j->sink[k], PTO_I64, 1, (int64_t[]){1});
    pto_args_init(&a);
    pto_args_input(&a, &t);
    pto_args_inout(&a, &sink);
    pto_submit_opts so = {.deps = &fill, .ndeps = 1};
    if ((j->rc = pto_submit(o, kid_copy, &a, &so, NULL))) return;
    if ((j->rc = pto_scope_end(o))) return;
  }
}

static void test_output_outlives_its_retired_producer(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.heap_bytes = 16 * WORDS * sizeof(uint64_t); /* 16 buffers: the heap wraps often */
  cfg.task_slots = 64;                            /* the producer's slot is reused too */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", k_fill, &kid_fill), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "check", k_check, &kid_check), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "copy", k_copy, &kid_copy), PTO_OK);
  static job j;
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(chip, orch, &j, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(j.rc, PTO_OK);
  assert_int_equal(st.tasks, 2 + 2 * LATER);
  int64_t i = atomic_load(&bad_index);
  if (i >= 0)
    fail_msg("the consumer read word %lld = 0x%llx of its producer's OUTPUT, expected 0x%llx: "
             "the buffer was reused while it read",
             (long long)i, (unsigned long long)atomic_load(&bad_value),
             (unsigned long long)(PATTERN + (uint64_t)i));
}

/* ---- a scope's buffers across the ring's end ----
 * A heap of 4 buffers. Scope 1's buffer A takes [0, 1) (in buffers) and
 * stays live (its task waits for `a_go`) while scope 2's B1, B2, B3 take
 * [1, 4), one held range up to the ring's end. Once all retired, B4
 * starts the next lap at physical 0, right after B3, so scope 2 holds
 * offsets [1, 5): a range across the ring's physical end. B5, after B4
 * retired, must not be placed on B4's bytes (it was: the held range's
 * physical interval was taken as [1, 5), missing [0, 1)); it finds no
 * room (scope 2 holds the whole ring), which is the right answer. */
static _Atomic int a_go;
static int kid_wait;

/* tensors[0]: OUTPUT; fills it as k_fill once a_go is set */
static int k_wait_fill(const pto_kctx *c) {
  while (!atomic_load(&a_go) && !pto_kctx_cancelled(c)) {
    struct timespec ts = {0, 100000L};
    nanosleep(&ts, NULL);
  }
  return k_fill(c);
}

typedef struct lap_job {
  uint64_t *b[6];
  uint64_t b4_words[WORDS];
  int rc5;
} lap_job;

static pto_task_id lap_out(pto_orch *o, int kid, pto_tensor *t, uint64_t pattern) {
  int64_t shape[1] = {WORDS};
  pto_tensor_desc(t, PTO_I64, 1, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, t);
  pto_args_scalar(&a, pattern);
  pto_task_id id = PTO_TASK_NONE;
  pto_submit(o, kid, &a, NULL, &id);
  return id;
}

static void lap_orch(pto_orch *o, void *arg) {
  lap_job *j = arg;
  pto_tensor t[6];
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_task_id a = lap_out(o, kid_wait, &t[0], PATTERN);
  pto_scope_end(o);
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_task_id b[4];
  for (int k = 1; k <= 3; k++) /* while A is live: the ring is never empty */
    b[k] = lap_out(o, kid_fill, &t[k], (uint64_t)k << 40);
  atomic_store(&a_go, 1);
  pto_orch_wait_task(o, a, 10000);
  for (int k = 1; k <= 3; k++)
    pto_orch_wait_task(o, b[k], 10000);
  pto_orch_wait_task(o, lap_out(o, kid_fill, &t[4], 4ull << 40), 10000);
  /* B5: refused (scope 2 holds the whole ring), or anywhere but B4 */
  lap_out(o, kid_fill, &t[5], 5ull << 40);
  j->rc5 = pto_orch_status(o);
  for (int k = 0; k <= 5; k++)
    j->b[k] = t[k].buf;
  if (!j->rc5) pto_orch_read(o, &t[4], j->b4_words, 10000);
  pto_scope_end(o);
}

static void test_scope_range_across_the_ring_end(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.heap_bytes = 4 * WORDS * sizeof(uint64_t);
  cfg.alloc_timeout_ms = 200;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", k_fill, &kid_fill), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "wait_fill", k_wait_fill, &kid_wait), PTO_OK);
  static lap_job j;
  pto_error_info err;
  int rc = pto_chip_run(chip, lap_orch, &j, NULL, &err);
  pto_chip_destroy(chip);
  size_t bytes = WORDS * sizeof(uint64_t);
  for (int k = 0; k <= 4; k++)
    assert_non_null(j.b[k]);
  /* the layout the comment describes: B4 starts the second lap */
  assert_true(j.b[1] == j.b[0] + WORDS && j.b[3] == j.b[0] + 3 * WORDS && j.b[4] == j.b[0]);
  for (int k = 1; k <= 5; k++)
    for (int m = 1; m < k; m++)
      if (j.b[k] && j.b[m] && (size_t)((char *)j.b[k] - (char *)j.b[m] + bytes - 1) < 2 * bytes - 1)
        fail_msg("buffers B%d and B%d of one open scope share bytes (%p, %p)", m, k, (void *)j.b[m],
                 (void *)j.b[k]);
  if (j.rc5) { /* refused: no room, rightly */
    assert_int_equal(rc, j.rc5);
    assert_true(rc == PTO_ESCOPE_DEADLOCK || rc == PTO_EHEAP_DEADLOCK);
  } else {
    assert_int_equal(rc, PTO_OK);
    for (int i = 0; i < WORDS; i++)
      assert_true(j.b4_words[i] == (4ull << 40) + (uint64_t)i);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_outlives_its_retired_producer),
      cmocka_unit_test(test_scope_range_across_the_ring_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
