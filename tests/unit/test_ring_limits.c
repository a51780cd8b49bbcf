/* test_ring_limits.c — what the orchestrator's rings hold and when a
 * submit that cannot get room fails.
 *
 *  - A task with OUTPUT buffers holds only its heap range until its scope
 *    ends: its slot, argument storage and dependency nodes retire as soon
 *    as it is done, so later tasks of any kind keep flowing (one top-level
 *    OUTPUT task followed by 200 plain tasks on a 64-slot ring), and later
 *    heap allocations step around the held range (many scoped temporaries
 *    on a small heap while a top-level output stays intact). A range whose
 *    scope ended stays held until the tasks that may read it retired.
 *  - Open scopes that hold more OUTPUT bytes than the heap fail at once
 *    with PTO_ESCOPE_DEADLOCK, naming the scope and heap_bytes.
 *  - A wait for room that nothing can ever free (no task is live, or no
 *    live task's retirement would give it: an open scope holds the heap,
 *    the task's own arguments fill the TensorMap) fails at once with its
 *    ring's code and the real cause, instead of waiting alloc_timeout_ms
 *    for a long task and reporting "no task retired".
 *  - Any valid task's arguments fit the argument ring, even with the
 *    fewest task slots.
 *  - A dependency takes an entry only while its producer is live: a task
 *    with more producers than dep_entries, all of them done, runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pto/kernels.h"
#include "pto/pto.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int k_fill, k_nop;
static int nop(const pto_kctx *c) {
  (void)c;
  return 0;
}

/* A 2-cluster chip with the kernels fill and nop; 0 keeps a default. */
static pto_chip *make_chip_deps(uint32_t slots, size_t heap, uint32_t tmap, uint32_t deps) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.task_slots = slots;
  if (heap) cfg.heap_bytes = heap;
  if (tmap) cfg.tensormap_entries = tmap;
  if (deps) cfg.dep_entries = deps;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", pto_kern_fill, &k_fill), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "nop", nop, &k_nop), PTO_OK);
  return chip;
}

static pto_chip *make_chip(uint32_t slots, size_t heap, uint32_t tmap) {
  return make_chip_deps(slots, heap, tmap, 0);
}

typedef struct run_out {
  int rc, orch_rc, failed_at;
  double ms;
  pto_error_info err;
} run_out;

static void run(pto_chip *chip, pto_orch_fn fn, void *arg, run_out *out) {
  double t0 = now_ms();
  out->rc = pto_chip_run(chip, fn, arg, NULL, &out->err);
  out->ms = now_ms() - t0;
  if (out->rc) pto_error_print(&out->err, stdout);
}

/* fill OUTPUT t (a descriptor of rows x cols) with v */
static int fill_output(pto_orch *o, pto_tensor *t, int64_t rows, int64_t cols, float v) {
  int64_t shape[2] = {rows, cols};
  pto_tensor_desc(t, PTO_F32, 2, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, t);
  pto_args_scalar_f32(&a, v);
  return pto_submit(o, k_fill, &a, NULL, NULL);
}

static int check_all(pto_orch *o, const pto_tensor *t, int n, float want, const char *what) {
  float got[1024];
  assert_true(n <= 1024);
  int rc = pto_orch_read(o, t, got, -1);
  if (rc) return rc;
  for (int i = 0; i < n; i++)
    if (got[i] != want) {
      printf("%s: element %d is %g, expected %g\n", what, i, (double)got[i], (double)want);
      return -1000;
    }
  return 0;
}

/* ---- one held OUTPUT does not pin later task slots ---- */

typedef struct plain_st {
  float buf[64];
  run_out out;
} plain_st;

static void output_then_plain(pto_orch *o, void *arg) {
  plain_st *st = arg;
  pto_tensor held, plain;
  st->out.failed_at = -1;
  if ((st->out.orch_rc = fill_output(o, &held, 4, 16, 7.0f))) return;
  int64_t shape[1] = {64};
  pto_tensor_init(&plain, st->buf, sizeof st->buf, PTO_F32, 1, shape);
  for (int i = 0; i < 200; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &plain);
    pto_args_scalar_f32(&a, (float)i);
    if ((st->out.orch_rc = pto_submit(o, k_fill, &a, NULL, NULL))) {
      st->out.failed_at = i;
      return;
    }
  }
  st->out.orch_rc = check_all(o, &held, 64, 7.0f, "held OUTPUT");
}

static void test_output_then_plain_tasks(void **state) {
  (void)state;
  pto_chip *chip = make_chip(64, 0, 0);
  plain_st st = {0};
  run(chip, output_then_plain, &st, &st.out);
  pto_chip_destroy(chip);
  if (st.out.rc)
    fail_msg("one top-level OUTPUT task, then 200 plain tasks on 64 slots: run returned %s "
             "(plain task #%d failed), expected PTO_OK",
             pto_status_name(st.out.rc), st.out.failed_at);
  assert_int_equal(st.out.orch_rc, 0);
  assert_true(st.buf[0] == 199.0f);
}

/* ---- heap allocations step around a held range ---- */

typedef struct reuse_st {
  int iters;
  run_out out;
} reuse_st;

static void held_then_scoped_temps(pto_orch *o, void *arg) {
  reuse_st *st = arg;
  pto_tensor held;
  st->out.failed_at = -1;
  if ((st->out.orch_rc = fill_output(o, &held, 4, 256, 1.0f))) return; /* 4 KiB */
  for (int i = 0; i < 40; i++) {
    if ((st->out.orch_rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) return;
    pto_tensor tmp[2];
    for (int k = 0; k < 2; k++)
      if ((st->out.orch_rc = fill_output(o, &tmp[k], 4, 256, (float)(i * 2 + k + 2)))) {
        st->out.failed_at = i;
        return;
      }
    for (int k = 0; k < 2; k++)
      if ((st->out.orch_rc = check_all(o, &tmp[k], 1024, (float)(i * 2 + k + 2), "temporary")))
        return;
    if ((st->out.orch_rc = pto_scope_end(o))) return;
    if ((st->out.orch_rc = check_all(o, &held, 1024, 1.0f, "held OUTPUT"))) return;
    st->iters++;
  }
}

static void test_heap_steps_around_held_output(void **state) {
  (void)state;
  pto_chip *chip = make_chip(64, 5 * 4096 + 512, 0); /* room for 5 such buffers */
  reuse_st st = {0};
  run(chip, held_then_scoped_temps, &st, &st.out);
  pto_chip_destroy(chip);
  if (st.out.rc)
    fail_msg("top-level 4 KiB OUTPUT, then scoped pairs of 4 KiB temporaries on a 20.5 KiB "
             "heap: run returned %s at iteration %d, expected PTO_OK",
             pto_status_name(st.out.rc), st.iters);
  assert_int_equal(st.out.orch_rc, 0);
  assert_int_equal(st.iters, 40);
}

/* ---- a held range outlives its scope until its readers retired ---- */

static int k_slow_copy;
static int slow_copy(const pto_kctx *c) { /* t0 in -> t1 out, contiguous */
  struct timespec ts = {0, 20 * 1000000L};
  nanosleep(&ts, NULL);
  const pto_tensor *in = &c->tensors[0], *out = &c->tensors[1];
  memcpy((float *)out->buf + out->offset, (const float *)in->buf + in->offset,
         (size_t)in->shape[0] * (size_t)in->shape[1] * sizeof(float));
  return 0;
}

typedef struct late_st {
  float got[1024];
  run_out out;
} late_st;

static void reader_after_scope(pto_orch *o, void *arg) {
  late_st *st = arg;
  pto_tensor tmp, got, other;
  int64_t shape[2] = {4, 256};
  pto_tensor_init(&got, st->got, sizeof st->got, PTO_F32, 2, shape);
  if ((st->out.orch_rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) return;
  pto_task_id producer;
  if ((st->out.orch_rc = fill_output(o, &tmp, 4, 256, 5.0f))) return;
  producer = 0;
  /* the producer retires before its reader is even submitted */
  if ((st->out.orch_rc = pto_orch_wait_task(o, producer, -1))) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &tmp);
  pto_args_output_existing(&a, &got);
  if ((st->out.orch_rc = pto_submit(o, k_slow_copy, &a, NULL, NULL))) return;
  if ((st->out.orch_rc = pto_scope_end(o))) return;
  /* the whole heap again, in two buffers (the second at another base
   * address than tmp): must wait for the reader, not overwrite tmp */
  if ((st->out.orch_rc = fill_output(o, &other, 1, 16, 9.0f))) return;
  if ((st->out.orch_rc = fill_output(o, &other, 4, 252, 9.0f))) return;
  if ((st->out.orch_rc = check_all(o, &got, 1024, 5.0f, "reader of the ended scope's OUTPUT")))
    return;
}

static void test_held_until_readers_retire(void **state) {
  (void)state;
  pto_chip *chip = make_chip(64, 4096, 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "slow_copy", slow_copy, &k_slow_copy), PTO_OK);
  late_st st = {0};
  run(chip, reader_after_scope, &st, &st.out);
  pto_chip_destroy(chip);
  assert_int_equal(st.out.rc, PTO_OK);
  assert_int_equal(st.out.orch_rc, 0);
}

/* ---- open scopes holding more than the heap fail at once ---- */

static void scope_over_heap(pto_orch *o, void *arg) {
  run_out *out = arg;
  out->failed_at = -1;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  for (int i = 0; i < 8; i++) {
    pto_tensor t;
    if ((out->orch_rc = fill_output(o, &t, 4, 256, 1.0f))) {
      out->failed_at = i;
      return;
    }
  }
  pto_scope_end(o);
}

static void test_scope_over_heap_fails_fast(void **state) {
  (void)state;
  pto_chip *chip = make_chip(64, 4 * 4096, 0);
  run_out out = {0};
  run(chip, scope_over_heap, &out, &out);
  pto_chip_destroy(chip);
  printf("scope over heap: %s after %.0f ms at OUTPUT task #%d: %s\n", pto_status_name(out.rc),
         out.ms, out.failed_at, out.err.details);
  assert_int_equal(out.rc, PTO_ESCOPE_DEADLOCK);
  assert_int_equal(out.failed_at, 4);
  assert_int_equal(out.err.task_id, 0);
  assert_non_null(strstr(out.err.details, "scope"));
  assert_non_null(strstr(out.err.details, "heap_bytes 16384"));
  assert_true(out.ms < 300.0); /* alloc_timeout_ms is 500 */
}

/* ---- arguments of any valid task fit the argument ring ---- */

typedef struct args_st {
  float buf[PTO_MAX_TENSOR_ARGS][16];
  run_out out;
} args_st;

static void max_args(pto_orch *o, void *arg) {
  args_st *st = arg;
  for (int rep = 0; rep < 3; rep++) {
    pto_args a;
    pto_args_init(&a);
    for (int i = 0; i < PTO_MAX_TENSOR_ARGS; i++) {
      pto_tensor t;
      int64_t n = 16;
      pto_tensor_init(&t, st->buf[i], sizeof st->buf[i], PTO_F32, 1, &n);
      pto_args_input(&a, &t);
    }
    for (int i = 0; i < PTO_MAX_SCALAR_ARGS; i++)
      pto_args_scalar(&a, (uint64_t)i);
    if ((st->out.orch_rc = pto_submit(o, k_nop, &a, NULL, NULL))) return;
  }
}

static void test_max_args_fit_two_slots(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 0, 0);
  args_st st = {0};
  run(chip, max_args, &st, &st.out);
  pto_chip_destroy(chip);
  if (st.out.rc)
    fail_msg("a task with %d tensors and %d scalars on a 2-slot chip: run returned %s after "
             "%.0f ms (%s), expected PTO_OK",
             PTO_MAX_TENSOR_ARGS, PTO_MAX_SCALAR_ARGS, pto_status_name(st.out.rc), st.out.ms,
             st.out.err.details);
  assert_int_equal(st.out.orch_rc, 0);
}

/* ---- room that nothing can free: refused at once ---- */

typedef struct tmap_st {
  float a[16], b[16];
  run_out out;
} tmap_st;

static void two_tensors(pto_orch *o, void *arg) {
  tmap_st *st = arg;
  pto_tensor ta, tb;
  int64_t n = 16;
  pto_tensor_init(&ta, st->a, sizeof st->a, PTO_F32, 1, &n);
  pto_tensor_init(&tb, st->b, sizeof st->b, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &ta);
  pto_args_input(&a, &tb);
  st->out.orch_rc = pto_submit(o, k_nop, &a, NULL, NULL);
}

static void test_never_room_fails_at_once(void **state) {
  (void)state;
  pto_chip *chip = make_chip(64, 0, 1); /* one TensorMap entry; the task needs two */
  tmap_st st = {0};
  run(chip, two_tensors, &st, &st.out);
  pto_chip_destroy(chip);
  printf("TensorMap of 1 entry, task with 2 tensors: %s after %.0f ms: %s\n",
         pto_status_name(st.out.rc), st.out.ms, st.out.err.details);
  assert_int_equal(st.out.rc, PTO_ETENSORMAP_OVERFLOW);
  if (st.out.ms >= 300.0)
    fail_msg("the refusal took %.0f ms: it waited alloc_timeout_ms (500) for room that no live "
             "task could free",
             st.out.ms);
  assert_non_null(strstr(st.out.err.details, "no task is live"));
}

/* ---- dependencies on tasks already done need no entry ---- */

typedef struct deps_st {
  float buf[5][16];
  run_out out;
} deps_st;

/* five producers of five buffers, done (not yet retired: a submit retires
 * once per 32), then one task reading all five */
static void five_done_producers(pto_orch *o, void *arg) {
  deps_st *st = arg;
  pto_tensor t[5];
  int64_t n = 16;
  for (int i = 0; i < 5; i++) {
    pto_tensor_init(&t[i], st->buf[i], sizeof st->buf[i], PTO_F32, 1, &n);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &t[i]);
    pto_args_scalar_f32(&a, (float)i);
    if ((st->out.orch_rc = pto_submit(o, k_fill, &a, NULL, NULL))) return;
  }
  struct timespec ts = {0, 100 * 1000000L}; /* the producers end meanwhile */
  nanosleep(&ts, NULL);
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 5; i++)
    pto_args_input(&a, &t[i]);
  st->out.orch_rc = pto_submit(o, k_nop, &a, NULL, NULL);
}

static void test_done_producers_need_no_dep_entry(void **state) {
  (void)state;
  pto_chip *chip = make_chip_deps(64, 0, 0, 4);
  deps_st st = {0};
  run(chip, five_done_producers, &st, &st.out);
  if (st.out.rc)
    fail_msg("a task reading 5 buffers whose producers are done, dep_entries 4: run returned %s "
             "(%s), expected PTO_OK: a done producer needs no dependency entry",
             pto_status_name(st.out.rc), st.out.err.details);
  assert_int_equal(st.out.orch_rc, 0);
  for (int i = 0; i < 5; i++)
    assert_true(st.buf[i][15] == (float)i);
  pto_chip_destroy(chip);
}

/* ---- room that no retirement can give: refused at once, even while a
 * task is live ---- */

static int k_sleep;
static int sleep_1500ms(const pto_kctx *c) {
  (void)c;
  struct timespec ts = {1, 500 * 1000000L};
  nanosleep(&ts, NULL);
  return 0;
}

static double refused_ms; /* from the sleeper's submit to the refusal */

static void slow_then_scope_over_heap(pto_orch *o, void *arg) {
  run_out *out = arg;
  double t0 = now_ms();
  if ((out->orch_rc = pto_submit(o, k_sleep, NULL, NULL, NULL))) return;
  scope_over_heap(o, arg);
  refused_ms = now_ms() - t0;
}

static void slow_then_two_tensors(pto_orch *o, void *arg) {
  tmap_st *st = arg;
  double t0 = now_ms();
  if ((st->out.orch_rc = pto_submit(o, k_sleep, NULL, NULL, NULL))) return;
  two_tensors(o, arg);
  refused_ms = now_ms() - t0;
}

static void test_never_room_while_a_task_runs(void **state) {
  (void)state;
  /* the heap held whole by an open scope */
  pto_chip *chip = make_chip(64, 4 * 4096, 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "sleep", sleep_1500ms, &k_sleep), PTO_OK);
  run_out out = {0};
  run(chip, slow_then_scope_over_heap, &out, &out);
  pto_chip_destroy(chip);
  double heap_ms = refused_ms;
  printf("scope over heap, a 1.5 s task live: %s after %.0f ms at OUTPUT task #%d: %s\n",
         pto_status_name(out.rc), heap_ms, out.failed_at, out.err.details);
  assert_int_equal(out.rc, PTO_ESCOPE_DEADLOCK);
  assert_int_equal(out.failed_at, 4);
  assert_int_equal(out.err.task_id, 1); /* the scope's first OUTPUT task */
  assert_non_null(strstr(out.err.details, "heap_bytes 16384"));
  /* a TensorMap too small for the task's own arguments */
  chip = make_chip(64, 0, 1);
  assert_int_equal(pto_kernel_register_aiv(chip, "sleep", sleep_1500ms, &k_sleep), PTO_OK);
  tmap_st st = {0};
  run(chip, slow_then_two_tensors, &st, &st.out);
  pto_chip_destroy(chip);
  printf("TensorMap of 1 entry, task with 2 tensors, a 1.5 s task live: %s after %.0f ms: %s\n",
         pto_status_name(st.out.rc), refused_ms, st.out.err.details);
  assert_int_equal(st.out.rc, PTO_ETENSORMAP_OVERFLOW);
  assert_non_null(strstr(st.out.err.details, "tensormap_entries 1"));
  /* both refused at once, not after alloc_timeout_ms (500) for nothing */
  if (heap_ms >= 300.0 || refused_ms >= 300.0)
    fail_msg("refused after %.0f ms (heap) and %.0f ms (TensorMap): waited for room that no "
             "retirement could give",
             heap_ms, refused_ms);
  assert_null(strstr(out.err.details, "no task retired"));
  assert_null(strstr(st.out.err.details, "no task retired"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_then_plain_tasks),
      cmocka_unit_test(test_heap_steps_around_held_output),
      cmocka_unit_test(test_held_until_readers_retire),
      cmocka_unit_test(test_scope_over_heap_fails_fast),
      cmocka_unit_test(test_max_args_fit_two_slots),
      cmocka_unit_test(test_never_room_fails_at_once),
      cmocka_unit_test(test_done_producers_need_no_dep_entry),
      cmocka_unit_test(test_never_room_while_a_task_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
