/* test_redux.c — PTO_REDUX (src/chip/redux.c): contributions to a
 * reduction work on private copies set to the op's identity, and the
 * copies are folded into the tensor in submission order before the next
 * other access to its bytes.
 *
 * - an f32 sum whose value depends on the order of its terms equals the
 *   sequential fold bit for bit, on several chip shapes and runs;
 * - every built-in op over every dtype equals the sequential fold, with
 *   accesses before and after the group and a host read in the middle;
 * - tasks of several blocks and MIX kernels give every core its own copy,
 *   folded in block order, then core order (AIC first);
 * - a user op's init and combine are the ones used;
 * - a dummy task's copy is the identity, in a run and in each launch of a
 *   captured graph, over heap an earlier run filled with other bytes;
 * - the trace names the combine tasks and marks the contributions;
 * - a group's slab is as large as the heap has room for now, never a
 *   reason to refuse a contribution whose own copies fit (beside a
 *   scope's OUTPUT, or its own OUTPUT buffers); when even those never
 *   fit, the deadlock names their bytes;
 * - bad input (unknown op, dtype mismatch, a REDUX view overlapping the
 *   task's other arguments, a ninth REDUX argument, a manual scope)
 *   fails the run naming what was wrong;
 * - a group folded while a manual scope is current (at its end, at the
 *   orchestration's end with it open, for a host read or a task reading
 *   the bytes in it) is ordered after an earlier slow writer of them.
 * Nothing depends on timing to pass; the slow writer makes a fold that is
 * not ordered after it show every time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/half.h"
#include "pto/pto.h"

#define NELEM 5

/* ---- element access by dtype, as double (exact for every value used) ---- */

static double get(const void *p, int dt) {
  switch (dt) {
  case PTO_F32: return *(const float *)p;
  case PTO_F64: return *(const double *)p;
  case PTO_F16: return half_to_f32(*(const uint16_t *)p);
  case PTO_BF16: return bf16_to_f32(*(const uint16_t *)p);
  case PTO_I32: return *(const int32_t *)p;
  case PTO_I16: return *(const int16_t *)p;
  case PTO_I8: return *(const int8_t *)p;
  case PTO_U8: return *(const uint8_t *)p;
  default: return (double)*(const int64_t *)p;
  }
}

/* Integers wrap as the library's ops do (through int64: a double out of
 * an integer type's range must not be converted to it directly). */
static void put(void *p, int dt, double v) {
  switch (dt) {
  case PTO_F32: *(float *)p = (float)v; break;
  case PTO_F64: *(double *)p = v; break;
  case PTO_F16: *(uint16_t *)p = f32_to_half((float)v); break;
  case PTO_BF16: *(uint16_t *)p = f32_to_bf16((float)v); break;
  case PTO_I32: *(int32_t *)p = (int32_t)(int64_t)v; break;
  case PTO_I16: *(int16_t *)p = (int16_t)(int64_t)v; break;
  case PTO_I8: *(int8_t *)p = (int8_t)(int64_t)v; break;
  case PTO_U8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  default: *(int64_t *)p = (int64_t)v; break;
  }
}

/* x op y as the library computes it: f32, f16 and bf16 in float, the
 * rest exactly (the values used stay far below 2^53), then rounded or
 * wrapped to the dtype. */
static double apply(int op, int dt, double x, double y) {
  double z;
  if (dt == PTO_F32 || dt == PTO_F16 || dt == PTO_BF16) {
    float a = (float)x, b = (float)y;
    z = op == PTO_REDUX_SUM    ? a + b
        : op == PTO_REDUX_PROD ? a * b
        : op == PTO_REDUX_MAX  ? (b > a ? b : a)
                               : (b < a ? b : a);
  } else {
    z = op == PTO_REDUX_SUM    ? x + y
        : op == PTO_REDUX_PROD ? x * y
        : op == PTO_REDUX_MAX  ? (y > x ? y : x)
                               : (y < x ? y : x);
  }
  unsigned char b[8];
  put(b, dt, z);
  return get(b, dt);
}

/* ---- kernels ---- */

/* What element i adds to a contribution's value: i, except for prod
 * (whose values must stay small). */
static double shift(int op, int64_t i) { return op == PTO_REDUX_PROD ? 0 : (double)i; }

/* tensor 0 (REDUX, any dtype, NELEM): copy[i] = copy[i] op (value +
 * shift(i)); scalars: [0] op, [1] value as f64 bits. */
static int k_contrib(const pto_kctx *c) {
  const pto_tensor *t = &c->tensors[0];
  int op = (int)c->scalars[0];
  double v;
  memcpy(&v, &c->scalars[1], sizeof v);
  for (int64_t i = 0; i < pto_tensor_numel(t); i++) {
    void *p = pto_tensor_at_linear(t, i);
    double y = apply(PTO_REDUX_SUM, t->dtype, v, shift(op, i));
    put(p, t->dtype, apply(op, t->dtype, get(p, t->dtype), y));
  }
  return 0;
}

/* tensor 0 (INOUT, any dtype): x = x * 2 - 1 (an access that must come
 * before or after the whole group: it does not commute with the op) */
static int k_twice(const pto_kctx *c) {
  const pto_tensor *t = &c->tensors[0];
  for (int64_t i = 0; i < pto_tensor_numel(t); i++) {
    void *p = pto_tensor_at_linear(t, i);
    put(p, t->dtype, get(p, t->dtype) * 2 - 1);
  }
  return 0;
}

/* tensor 0 (OUTPUT or OUTPUT_EXISTING, any dtype) = scalar 0 (f64 bits) */
static int k_fill(const pto_kctx *c) {
  double v;
  memcpy(&v, &c->scalars[0], sizeof v);
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    put(pto_tensor_at_linear(&c->tensors[0], i), c->tensors[0].dtype, v);
  return 0;
}

/* tensor 1 (OUTPUT_EXISTING) = tensor 0 (INPUT), same dtype and count */
static int k_copy(const pto_kctx *c) {
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    put(pto_tensor_at_linear(&c->tensors[1], i), c->tensors[1].dtype,
        get(pto_tensor_at_linear(&c->tensors[0], i), c->tensors[0].dtype));
  return 0;
}

/* tensor 0 (OUTPUT_EXISTING, i32) = scalar 0, after SLOW_MS: a writer
 * that a task not ordered after it overtakes every time */
#define SLOW_MS 80
static int k_slow_set(const pto_kctx *c) {
  usleep(SLOW_MS * 1000);
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    *(int32_t *)pto_tensor_at_linear(&c->tensors[0], i) = (int32_t)c->scalars[0];
  return 0;
}

typedef struct fixture {
  int k_slow_set;
  int k_fill, k_copy;
  int k_contrib, k_twice, k_mix;
  int op_and; /* a user op: bitwise and over u8 */
  int rc;
} fixture;

static void u8_and_init(void *dst, int64_t n) { memset(dst, 0xff, (size_t)n); }
static void u8_and_combine(void *acc, const void *src, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    ((uint8_t *)acc)[i] &= ((const uint8_t *)src)[i];
}

static int k_and(const pto_kctx *c) { /* tensor 0 (REDUX and, u8): copy &= scalar 0 */
  uint8_t *p = (uint8_t *)c->tensors[0].buf + c->tensors[0].offset;
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    p[i] &= (uint8_t)(c->scalars[0] >> (8 * (i % 4)));
  return 0;
}

static pto_chip *make_chip(fixture *f, int clusters, int schedulers, uint64_t heap) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.schedulers = schedulers;
  cfg.watchdog_ms = 20000;
  /* heap waits end when folds retire: on a loaded machine no retirement
   * may come for a while, which is not a deadlock */
  cfg.alloc_timeout_ms = 20000;
  if (heap) cfg.heap_bytes = heap;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "contrib", k_contrib, &f->k_contrib), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "twice", k_twice, &f->k_twice), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "and", k_and, &f->k_mix), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", k_fill, &f->k_fill), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "copy", k_copy, &f->k_copy), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "slow_set", k_slow_set, &f->k_slow_set), PTO_OK);
  pto_redux_op_desc d = {"and", PTO_U8, u8_and_init, u8_and_combine};
  assert_int_equal(pto_redux_register(chip, &d, &f->op_and), PTO_OK);
  return chip;
}

/* Runs fn on chip and fails the test, printing the run's error, unless it
 * ends with PTO_OK. */
static void run_ok(pto_chip *chip, pto_orch_fn fn, void *arg) {
  pto_error_info err;
  int rc = pto_chip_run(chip, fn, arg, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
}

static void submit_contrib(pto_orch *o, const fixture *f, const pto_tensor *t, int op, double v,
                           int priority) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  pto_submit_v(o, f->k_contrib, PTO_REDUX(t, op), PTO_SCALAR((uint64_t)op), PTO_SCALAR(bits),
               PTO_PRIORITY(priority));
}

/* ---- an order-sensitive f32 sum, bit for bit ---- */

#define NSUM 600
static float g_sum_terms[NSUM];

typedef struct sum_run {
  fixture *f;
  float acc[NELEM];
} sum_run;

static void orch_sum(pto_orch *o, void *arg) {
  sum_run *s = arg;
  pto_tensor t;
  int64_t n = NELEM;
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_F32, 1, &n);
  for (int k = 0; k < NSUM; k++)
    submit_contrib(o, s->f, &t, PTO_REDUX_SUM, g_sum_terms[k], k % 4);
}

static void test_f32_sum_bit_exact(void **state) {
  (void)state;
  /* terms of very different sizes: the sum depends on their order */
  uint32_t seed = 7;
  for (int k = 0; k < NSUM; k++) {
    seed = seed * 1103515245u + 12345u;
    float mag = (seed >> 8 & 3) == 0 ? 1e7f : (seed >> 8 & 3) == 1 ? 1.0f : 1e-3f;
    g_sum_terms[k] = (float)((int)((seed >> 12) % 2000) - 1000) * mag / 7.0f;
  }
  float want[NELEM], reversed[NELEM];
  for (int i = 0; i < NELEM; i++) {
    want[i] = reversed[i] = 0.5f;
    for (int k = 0; k < NSUM; k++) {
      want[i] = want[i] + (g_sum_terms[k] + (float)i);
      reversed[i] = reversed[i] + (g_sum_terms[NSUM - 1 - k] + (float)i);
    }
  }
  assert_true(memcmp(want, reversed, sizeof want) != 0); /* the test can see the order */
  static const int shapes[][3] = {{1, 1, 0}, {4, 2, 0}, {8, 3, 0}, {2, 1, 4096}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    fixture f;
    pto_chip *chip = make_chip(&f, shapes[s][0], shapes[s][1], (uint64_t)shapes[s][2]);
    for (int rep = 0; rep < 2; rep++) {
      sum_run r = {&f, {0}};
      for (int i = 0; i < NELEM; i++)
        r.acc[i] = 0.5f;
      run_ok(chip, orch_sum, &r);
      for (int i = 0; i < NELEM; i++)
        if (memcmp(&r.acc[i], &want[i], sizeof(float)) != 0) {
          fprintf(stderr, "chip %d x %d heap %d: element %d = %.9g, sequential %.9g\n",
                  shapes[s][0], shapes[s][1], shapes[s][2], i, r.acc[i], want[i]);
          fail();
        }
    }
    pto_chip_destroy(chip);
  }
}

/* ---- every built-in op over every dtype ---- */

typedef struct ops_run {
  fixture *f;
  unsigned char buf[PTO_DTYPE_COUNT][PTO_REDUX_BUILTINS][NELEM * 8];
  unsigned char mid[PTO_DTYPE_COUNT][PTO_REDUX_BUILTINS][NELEM * 8]; /* host read */
} ops_run;

#define NCONTRIB 40

/* Contribution k's value: small, and for prod mostly 1 (no overflow). */
static double value_of(int op, int k) {
  if (op == PTO_REDUX_PROD) return k % 7 == 3 ? 2 : k % 11 == 5 ? -1 : 1;
  return (double)((k * 37) % 23) - 11;
}

static void orch_ops(pto_orch *o, void *arg) {
  ops_run *s = arg;
  for (int dt = 0; dt < PTO_DTYPE_COUNT; dt++)
    for (int op = 0; op < PTO_REDUX_BUILTINS; op++) {
      pto_tensor t;
      int64_t n = NELEM;
      pto_tensor_init(&t, s->buf[dt][op], NELEM * pto_dtype_size((pto_dtype)dt), (pto_dtype)dt, 1,
                      &n);
      pto_submit_v(o, s->f->k_twice, PTO_INOUT(&t));
      for (int k = 0; k < NCONTRIB; k++) {
        submit_contrib(o, s->f, &t, op, value_of(op, k), 0);
        if (k == NCONTRIB / 2) pto_orch_read(o, &t, s->mid[dt][op], -1);
      }
      pto_submit_v(o, s->f->k_twice, PTO_INOUT(&t));
    }
}

static void test_builtin_ops_all_dtypes(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 3, 2, 0);
  static ops_run s;
  memset(&s, 0, sizeof s);
  s.f = &f;
  for (int dt = 0; dt < PTO_DTYPE_COUNT; dt++)
    for (int op = 0; op < PTO_REDUX_BUILTINS; op++)
      for (int i = 0; i < NELEM; i++)
        put(s.buf[dt][op] + i * pto_dtype_size((pto_dtype)dt), dt, i + 2);
  run_ok(chip, orch_ops, &s);
  static const char *names[] = {"f32", "f16", "bf16", "i32", "i16", "i8", "u8", "i64", "f64"};
  for (int dt = 0; dt < PTO_DTYPE_COUNT; dt++)
    for (int op = 0; op < PTO_REDUX_BUILTINS; op++)
      for (int i = 0; i < NELEM; i++) {
        size_t es = pto_dtype_size((pto_dtype)dt);
        double x = apply(PTO_REDUX_SUM, dt, (i + 2) * 2, -1), mid = 0;
        for (int k = 0; k < NCONTRIB; k++) {
          x = apply(op, dt, x, apply(PTO_REDUX_SUM, dt, value_of(op, k), shift(op, i)));
          if (k == NCONTRIB / 2) mid = x;
        }
        x = apply(PTO_REDUX_SUM, dt, x * 2, -1);
        double got = get(s.buf[dt][op] + i * es, dt), got_mid = get(s.mid[dt][op] + i * es, dt);
        if (got != x || got_mid != mid) {
          fprintf(stderr, "%s %s element %d: %g (at the host read %g), sequential %g (%g)\n",
                  names[dt], pto_redux_op_name(chip, op), i, got, got_mid, x, mid);
          fail();
        }
      }
  pto_chip_destroy(chip);
}

/* ---- the heap ring: slabs of open groups, scopes ---- */

#define NVIEWS 6

typedef struct pressure_run {
  fixture *f;
  float acc[NVIEWS][NELEM];
  float out[10][NELEM];
} pressure_run;

/* Contributions to 6 arrays in turn on a 4 KiB heap: each group's slab
 * (16 slots of 64 bytes) is a quarter of it, so opening the fifth finds no
 * room while the others are open: they are folded to make it. */
static void orch_pressure(pto_orch *o, void *arg) {
  pressure_run *s = arg;
  for (int k = 0; k < 40; k++)
    for (int v = 0; v < NVIEWS; v++) {
      pto_tensor t;
      int64_t n = NELEM;
      pto_tensor_init(&t, s->acc[v], sizeof s->acc[v], PTO_F32, 1, &n);
      submit_contrib(o, s->f, &t, PTO_REDUX_SUM, k * 10 + v, 0);
    }
}

static void test_heap_pressure(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  static pressure_run s;
  memset(&s, 0, sizeof s);
  s.f = &f;
  run_ok(chip, orch_pressure, &s);
  for (int v = 0; v < NVIEWS; v++)
    for (int i = 0; i < NELEM; i++) {
      float want = 0;
      for (int k = 0; k < 40; k++)
        want += (float)(k * 10 + v + i);
      assert_true(s.acc[v][i] == want);
    }
  pto_chip_destroy(chip);
}

/* Contributions (their group's slab a quarter of the 4 KiB heap), then an
 * OUTPUT buffer of the whole heap in a scope: only the group's fold gives the slab
 * back, so the allocation folds the open groups instead of waiting for
 * room that nothing else can free (it was refused as a scope deadlock). */
typedef struct whole_run {
  fixture *f;
  float acc[NELEM];
  float out[NELEM];
} whole_run;

static void orch_whole_heap(pto_orch *o, void *arg) {
  whole_run *s = arg;
  pto_tensor t, big, host, head;
  int64_t n = NELEM, nbig = 4096 / sizeof(float);
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_F32, 1, &n);
  for (int k = 0; k < 3; k++)
    submit_contrib(o, s->f, &t, PTO_REDUX_SUM, k + 1, 0);
  pto_scope_begin(o, PTO_SCOPE_AUTO); /* the big buffer goes back at its end */
  pto_tensor_desc(&big, PTO_F32, 1, &nbig);
  pto_submit_v(o, s->f->k_fill, PTO_OUT(&big), PTO_SCALAR((uint64_t)0));
  int64_t zero = 0;
  pto_tensor_slice(&big, &zero, &n, &head);
  pto_tensor_init(&host, s->out, sizeof s->out, PTO_F32, 1, &n);
  pto_submit_v(o, s->f->k_copy, PTO_IN(&head), PTO_OUT_EXISTING(&host));
  pto_scope_end(o);
  for (int k = 3; k < 6; k++) /* a new group, after the fold */
    submit_contrib(o, s->f, &t, PTO_REDUX_SUM, k + 1, 0);
}

static void test_whole_heap_after_contributions(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  whole_run s;
  memset(&s, 0, sizeof s);
  for (int i = 0; i < NELEM; i++)
    s.out[i] = -1;
  s.f = &f;
  for (int round = 0; round < 2; round++) { /* and again on the same chip */
    memset(s.acc, 0, sizeof s.acc);
    run_ok(chip, orch_whole_heap, &s);
    for (int i = 0; i < NELEM; i++) {
      assert_true(s.acc[i] == (float)(21 + 6 * i)); /* 1 + ... + 6, and i per contribution */
      assert_true(s.out[i] == 0.0f);
    }
  }
  pto_chip_destroy(chip);
}

/* One task whose REDUX copies and OUTPUT buffers together exceed the heap
 * ring can never run: refused as that, not as open scopes (there are
 * none; it was "close scopes sooner"), naming the task's one copy (64
 * bytes), not a quarter-heap slab (it was 1024). */
static void orch_copies_and_output(pto_orch *o, void *arg) {
  whole_run *s = arg;
  pto_tensor t, big;
  int64_t n = NELEM, nbig = 4096 / sizeof(float);
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_F32, 1, &n);
  pto_tensor_desc(&big, PTO_F32, 1, &nbig);
  pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, PTO_REDUX_SUM), PTO_OUT(&big),
               PTO_SCALAR((uint64_t)PTO_REDUX_SUM), PTO_SCALAR(0));
}

static void test_copies_and_output_over_the_heap(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  whole_run s;
  memset(&s, 0, sizeof s);
  s.f = &f;
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_copies_and_output, &s, NULL, &err);
  if (rc != PTO_EHEAP_DEADLOCK || !strstr(err.details, "REDUX private copies hold 64 bytes"))
    fail_msg("%s: %s", pto_status_name(rc), err.details);
  run_ok(chip, orch_whole_heap, &s); /* and the chip runs on */
  pto_chip_destroy(chip);
}

/* ---- a slab no larger than the heap allows ---- */

/* A scope's OUTPUT buffer holds all of the 4 KiB heap but `free_bytes`,
 * then `contribs` contributions of one slot each (64 i32: 256 bytes) go
 * to one view inside it. A group's slab was always a quarter of the heap
 * (1024 bytes) and was waited for: with 512 bytes free the contribution
 * that needs 256 was refused as a scope deadlock ("1024 contiguous bytes
 * for REDUX private copies (heap_bytes 4096) can never be found"). */
#define NPIN 64
typedef struct pinned_run {
  fixture *f;
  int64_t free_bytes;
  int contribs;
  int32_t acc[NPIN];
} pinned_run;

static void orch_pinned(pto_orch *o, void *arg) {
  pinned_run *s = arg;
  int64_t n = NPIN, nbig = (4096 - s->free_bytes) / (int64_t)sizeof(int32_t);
  pto_tensor t, big;
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_I32, 1, &n);
  pto_tensor_desc(&big, PTO_I32, 1, &nbig);
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  if (pto_submit_v(o, s->f->k_fill, PTO_OUT(&big), PTO_SCALAR((uint64_t)0))) return;
  for (int k = 0; k < s->contribs; k++)
    submit_contrib(o, s->f, &t, PTO_REDUX_SUM, k + 1, 0);
  pto_scope_end(o);
}

/* Runs orch_pinned with 512 bytes free and 5 contributions (slabs of two
 * slots, then of what comes back: more folds than slots) and checks the
 * sum 1 + ... + 5 plus i per contribution. */
static void run_pinned_ok(pto_chip *chip, fixture *f) {
  pinned_run s = {.f = f, .free_bytes = 512, .contribs = 5};
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_pinned, &s, NULL, &err);
  if (rc != PTO_OK) fail_msg("%s: %s", pto_status_name(rc), err.details);
  for (int i = 0; i < NPIN; i++)
    assert_int_equal(s.acc[i], 15 + 5 * i);
}

static void test_slab_fits_beside_scope(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  pinned_run s = {.f = &f, .free_bytes = 512, .contribs = 1};
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_pinned, &s, NULL, &err);
  if (rc != PTO_OK) fail_msg("%s: %s", pto_status_name(rc), err.details);
  for (int i = 0; i < NPIN; i++)
    assert_int_equal(s.acc[i], 1 + i);
  run_pinned_ok(chip, &f); /* more contributions than the slab has slots */
  run_pinned_ok(chip, &f); /* and again on the same chip */
  pto_chip_destroy(chip);
}

/* With 128 bytes free even the task's own copy (256 bytes) can never fit:
 * a scope deadlock naming those 256 bytes, not a slab's 1024. */
static void test_slab_minimum_never_fits(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  pinned_run s = {.f = &f, .free_bytes = 128, .contribs = 1};
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_pinned, &s, NULL, &err);
  if (rc != PTO_ESCOPE_DEADLOCK ||
      !strstr(err.details, "256 contiguous bytes for this task's REDUX private copies"))
    fail_msg("%s: %s", pto_status_name(rc), err.details);
  assert_int_equal(s.acc[0], 0); /* nothing ran */
  run_pinned_ok(chip, &f);       /* and the chip runs on */
  pto_chip_destroy(chip);
}

/* One task's copy (256 bytes) and OUTPUT buffer (3584 bytes) fit the 4
 * KiB heap together, a quarter-heap slab and the buffer do not: the slab
 * leaves the buffer room (it was refused, "REDUX private copies hold 1024
 * bytes"). */
static void orch_copy_beside_output(pto_orch *o, void *arg) {
  pinned_run *s = arg;
  int64_t n = NPIN, nbig = (4096 - s->free_bytes) / (int64_t)sizeof(int32_t);
  pto_tensor t, big;
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_I32, 1, &n);
  pto_tensor_desc(&big, PTO_I32, 1, &nbig);
  for (int k = 0; k < s->contribs; k++)
    pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, PTO_REDUX_SUM), PTO_OUT(&big),
                 PTO_SCALAR((uint64_t)PTO_REDUX_SUM), PTO_SCALAR(0));
}

static void test_slab_leaves_room_for_outputs(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  pinned_run s = {.f = &f, .free_bytes = 512, .contribs = 1};
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_copy_beside_output, &s, NULL, &err);
  if (rc != PTO_OK) fail_msg("%s: %s", pto_status_name(rc), err.details);
  for (int i = 0; i < NPIN; i++)
    assert_int_equal(s.acc[i], i); /* value 0, plus i */
  run_pinned_ok(chip, &f);
  pto_chip_destroy(chip);
}

/* A reduction into a scope's OUTPUT buffer is folded when the scope ends,
 * while the buffer is still held: a later scope's buffer, which may reuse
 * its bytes, must come out as written. */
static void orch_scopes(pto_orch *o, void *arg) {
  pressure_run *s = arg;
  for (int round = 0; round < 10; round++) {
    int64_t n = NELEM;
    pto_tensor t, u, host;
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    pto_tensor_desc(&t, PTO_F32, 1, &n);
    pto_submit_v(o, s->f->k_fill, PTO_OUT(&t), PTO_SCALAR((uint64_t)0));
    for (int k = 0; k < 12; k++)
      submit_contrib(o, s->f, &t, PTO_REDUX_SUM, 1000 + k, 0);
    pto_scope_end(o);
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    pto_tensor_desc(&u, PTO_F32, 1, &n);
    double v = round + 0.5;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pto_submit_v(o, s->f->k_fill, PTO_OUT(&u), PTO_SCALAR(bits));
    pto_tensor_init(&host, s->out[round], sizeof s->out[round], PTO_F32, 1, &n);
    pto_submit_v(o, s->f->k_copy, PTO_IN(&u), PTO_OUT_EXISTING(&host));
    pto_scope_end(o);
  }
}

static void test_scope_end_folds(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096);
  static pressure_run s;
  memset(&s, 0, sizeof s);
  s.f = &f;
  run_ok(chip, orch_scopes, &s);
  for (int round = 0; round < 10; round++)
    for (int i = 0; i < NELEM; i++)
      if (s.out[round][i] != (float)round + 0.5f) {
        fprintf(stderr, "round %d element %d: %g, written %g\n", round, i, s.out[round][i],
                round + 0.5);
        fail();
      }
  pto_chip_destroy(chip);
}

/* ---- a fold while a manual scope is current ---- */

/* The combine task is the runtime's: whatever scope is current when a
 * group folds, it is ordered after the earlier writers of the reduced
 * bytes (a manual scope's rule of no inferred edges is for the scope's
 * own tasks), and later accesses and the next group's fold after it. A
 * slow writer of x, then contributions of 1 to x, then a manual scope
 * that folds them in one of four ways: */
enum {
  MANUAL_SCOPE_END,  /* an empty manual scope: the fold at its end */
  MANUAL_LEFT_OPEN,  /* no scope_end: the folds at the orchestration's end */
  MANUAL_HOST_READ,  /* pto_orch_read of x inside it */
  MANUAL_SUBMIT_READ /* a task reading x inside it, then more after it */
};

typedef struct manual_run {
  fixture *f;
  int how;
  int32_t x[1];
  int32_t read; /* what pto_orch_read saw (MANUAL_HOST_READ) */
  int rc;       /* the first failed call's code */
} manual_run;

static int add_ones(pto_orch *o, const fixture *f, const pto_tensor *x, int count) {
  uint64_t one;
  double v = 1;
  memcpy(&one, &v, sizeof one);
  int rc = PTO_OK;
  for (int k = 0; k < count && !rc; k++)
    rc = pto_submit_v(o, f->k_contrib, PTO_REDUX(x, PTO_REDUX_SUM),
                      PTO_SCALAR((uint64_t)PTO_REDUX_SUM), PTO_SCALAR(one));
  return rc;
}

static void orch_manual_fold(pto_orch *o, void *arg) {
  manual_run *s = arg;
  int64_t n = 1;
  pto_tensor x;
  pto_tensor_init(&x, s->x, sizeof s->x, PTO_I32, 1, &n);
  int rc = pto_submit_v(o, s->f->k_slow_set, PTO_OUT_EXISTING(&x), PTO_SCALAR(5));
  if (!rc) rc = add_ones(o, s->f, &x, 3); /* x = 5 + 3 */
  if (!rc) rc = pto_scope_begin(o, PTO_SCOPE_MANUAL);
  if (!rc && s->how == MANUAL_HOST_READ) rc = pto_orch_read(o, &x, &s->read, -1);
  if (!rc && s->how == MANUAL_SUBMIT_READ) {
    /* a dummy: the scope's own task is not ordered after the fold its
     * submit causes (nor after the slow writer), so a kernel reading x
     * here would race with both */
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &x);
    rc = pto_submit_dummy(o, &a, NULL, NULL);
  }
  if (!rc && s->how != MANUAL_LEFT_OPEN) rc = pto_scope_end(o);
  if (!rc && s->how == MANUAL_SUBMIT_READ) { /* after the fold: x = 8 * 2 - 1, then + 2 */
    rc = pto_submit_v(o, s->f->k_twice, PTO_INOUT(&x));
    if (!rc) rc = add_ones(o, s->f, &x, 2);
  }
  s->rc = rc;
}

static void check_manual_fold(int how, const char *name) {
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 0);
  int32_t want = how == MANUAL_SUBMIT_READ ? 17 : 8;
  int wrong = 0;
  for (int rep = 0; rep < 4; rep++) {
    manual_run s = {&f, how, {0}, -1, 0};
    run_ok(chip, orch_manual_fold, &s);
    assert_int_equal(s.rc, PTO_OK);
    if (s.x[0] != want || (how == MANUAL_HOST_READ && s.read != 8)) {
      fprintf(stderr, "%s, run %d: x = %d, expected %d", name, rep, s.x[0], want);
      if (how == MANUAL_HOST_READ) fprintf(stderr, "; pto_orch_read saw %d, expected 8", s.read);
      fprintf(stderr, "\n");
      wrong++;
    }
  }
  pto_chip_destroy(chip);
  assert_int_equal(wrong, 0);
}

static void test_manual_scope_end_fold_ordered(void **state) {
  (void)state;
  check_manual_fold(MANUAL_SCOPE_END, "fold at a manual scope's end");
}

static void test_manual_scope_left_open_fold_ordered(void **state) {
  (void)state;
  check_manual_fold(MANUAL_LEFT_OPEN, "fold at the end with a manual scope open");
}

static void test_manual_scope_host_read_fold_ordered(void **state) {
  (void)state;
  check_manual_fold(MANUAL_HOST_READ, "fold for pto_orch_read in a manual scope");
}

static void test_manual_scope_submit_fold_ordered(void **state) {
  (void)state;
  check_manual_fold(MANUAL_SUBMIT_READ, "fold for a reader in a manual scope");
}

/* ---- tasks of several cores ---- */

#define MIX_TASKS  20
#define MIX_BLOCKS 3
#define MIX_UNITS  (MIX_BLOCKS * 3) /* AIC + 2 AIV per block */

/* The value unit u of task k stores: sizes apart by 10^8, so the f32 sum
 * shows the order of the units. */
static float unit_value(int k, int u) {
  static const float mags[] = {1e8f, 1.0f, -1e8f, 3e-3f};
  return (float)(k * 7 + u * 3 + 1) * mags[(k + u) % 4];
}

/* tensor 0 (REDUX sum, f32, NELEM): this core's copy[i] = unit_value +
 * i, stored, not added: a copy two cores shared would lose one. */
static int k_unit(const pto_kctx *c) {
  int per = 3, u = c->block_idx * per + (c->core_type == PTO_CORE_AIC ? 0 : 1 + c->sub_block_id);
  float *p = (float *)c->tensors[0].buf + c->tensors[0].offset;
  for (int i = 0; i < NELEM; i++)
    p[i] = unit_value((int)c->scalars[0], u) + (float)i;
  return 0;
}

typedef struct mix_run {
  int k_mix, k_aiv;
  float acc[NELEM];
} mix_run;

static void orch_mix(pto_orch *o, void *arg) {
  mix_run *s = arg;
  pto_tensor t;
  int64_t n = NELEM;
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_F32, 1, &n);
  for (int k = 0; k < MIX_TASKS; k++)
    pto_submit_v(o, s->k_mix, PTO_REDUX(&t, PTO_REDUX_SUM), PTO_SCALAR((uint64_t)k),
                 PTO_BLOCKS(MIX_BLOCKS));
}

static void test_multi_core_units(void **state) {
  (void)state;
  static const int shapes[][2] = {{1, 1}, {3, 2}, {6, 3}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = shapes[sh][0];
    cfg.schedulers = shapes[sh][1];
    cfg.watchdog_ms = 20000;
    pto_chip *chip = NULL;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    mix_run s = {0};
    pto_kernel_desc d = {.name = "unit", .aic = k_unit, .aiv = k_unit, .aiv_count = 2};
    assert_int_equal(pto_kernel_register(chip, &d, &s.k_mix), PTO_OK);
    for (int i = 0; i < NELEM; i++)
      s.acc[i] = 0.5f;
    run_ok(chip, orch_mix, &s);
    for (int i = 0; i < NELEM; i++) {
      float want = 0.5f;
      for (int k = 0; k < MIX_TASKS; k++)
        for (int u = 0; u < MIX_UNITS; u++)
          want = want + (unit_value(k, u) + (float)i);
      if (memcmp(&s.acc[i], &want, sizeof want) != 0) {
        fprintf(stderr, "chip %d x %d: element %d = %.9g, sequential %.9g\n", shapes[sh][0],
                shapes[sh][1], i, s.acc[i], want);
        fail();
      }
    }
    pto_chip_destroy(chip);
  }
}

/* ---- a user op ---- */

typedef struct and_run {
  fixture *f;
  uint8_t bytes[8];
} and_run;

static void orch_and(pto_orch *o, void *arg) {
  and_run *s = arg;
  pto_tensor t;
  int64_t n = 8;
  pto_tensor_init(&t, s->bytes, sizeof s->bytes, PTO_U8, 1, &n);
  for (int k = 0; k < 30; k++) {
    uint64_t mask = ~((uint64_t)1 << (k % 29)); /* clears bit k % 29 of its word */
    pto_submit_v(o, s->f->k_mix, PTO_REDUX(&t, s->f->op_and), PTO_SCALAR(mask));
  }
}

static void test_user_op(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 0);
  assert_string_equal(pto_redux_op_name(chip, f.op_and), "and");
  assert_null(pto_redux_op_name(chip, f.op_and + 1));
  and_run s = {&f, {0}};
  memset(s.bytes, 0xff, sizeof s.bytes);
  uint8_t want[8];
  for (int i = 0; i < 8; i++) {
    want[i] = 0xff;
    for (int k = 0; k < 30; k++)
      want[i] &= (uint8_t)(~((uint64_t)1 << (k % 29)) >> (8 * (i % 4)));
  }
  pto_run_stats st;
  assert_int_equal(pto_chip_run(chip, orch_and, &s, &st, NULL), PTO_OK);
  assert_memory_equal(s.bytes, want, sizeof want);
  /* the stats count the combine tasks and their blocks with the 30
   * contributions (pto_run_stats.tasks, .blocks) */
  printf("30 contributions: %llu tasks, %llu blocks\n", (unsigned long long)st.tasks,
         (unsigned long long)st.blocks);
  assert_true(st.tasks > 30);
  assert_true(st.blocks > 30);
  pto_chip_destroy(chip);
}

/* ---- dummy contributions ----
 * A dummy task runs on no core, so nothing but the orchestrator sets its
 * copy to the identity (a core sets its own before its kernel, redux.h):
 * at submit, and at every launch of a captured graph. The copies are
 * heap that an earlier run filled with other bytes. */

typedef struct dummy_run {
  fixture *f;
  int32_t acc[NELEM];
} dummy_run;

static void orch_garbage(pto_orch *o, void *arg) { /* the whole heap, not the identity */
  fixture *f = arg;
  pto_tensor big;
  int64_t n = 4096 / sizeof(int32_t);
  pto_tensor_desc(&big, PTO_I32, 1, &n);
  pto_submit_v(o, f->k_fill, PTO_OUT(&big), PTO_SCALAR(0x40dead0000000000ull)); /* 31412.0 */
}

static void orch_dummies(pto_orch *o, void *arg) {
  dummy_run *s = arg;
  pto_tensor t;
  int64_t n = NELEM;
  pto_tensor_init(&t, s->acc, sizeof s->acc, PTO_I32, 1, &n);
  for (int k = 0; k < 40; k++) {
    if (k % 3 == 1) {
      pto_args a;
      pto_args_init(&a);
      pto_args_redux(&a, &t, PTO_REDUX_SUM);
      pto_submit_dummy(o, &a, NULL, NULL);
    } else {
      submit_contrib(o, s->f, &t, PTO_REDUX_SUM, k, 0);
    }
  }
}

static void check_dummies(const dummy_run *s, const char *when) {
  for (int i = 0; i < NELEM; i++) {
    int32_t want = 0;
    for (int k = 0; k < 40; k++)
      if (k % 3 != 1) want += k + i;
    if (s->acc[i] != want) {
      fprintf(stderr, "%s: element %d = %d, expected %d\n", when, i, s->acc[i], want);
      fail();
    }
  }
}

static void test_dummy_contributions(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 4096); /* every run's slabs at the heap's start */
  dummy_run s = {&f, {0}};
  run_ok(chip, orch_garbage, &f);
  run_ok(chip, orch_dummies, &s);
  check_dummies(&s, "dynamic run");
  memset(s.acc, 0, sizeof s.acc);
  pto_graph *g = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orch_dummies, &s, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  check_dummies(&s, "capture");
  for (int launch = 0; launch < 2; launch++) {
    run_ok(chip, orch_garbage, &f);
    memset(s.acc, 0, sizeof s.acc);
    rc = pto_graph_launch(chip, g, NULL, NULL, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    check_dummies(&s, launch ? "launch 1" : "launch 0");
  }
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* ---- the trace ---- */

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
    n++;
  return n;
}

static void test_trace_names(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 0);
  char path[] = "/tmp/pto_test_redux_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(pto_chip_set_trace(chip, path), PTO_OK);
  sum_run r = {&f, {0}};
  assert_int_equal(pto_chip_run(chip, orch_sum, &r, NULL, NULL), PTO_OK);
  pto_chip_destroy(chip);
  FILE *in = fopen(path, "r");
  assert_non_null(in);
  static char text[1 << 22];
  size_t n = fread(text, 1, sizeof text - 1, in);
  text[n] = '\0';
  fclose(in);
  unlink(path);
  /* every contribution is marked with its priority; at least one combine */
  assert_int_equal(count(text, "\"name\":\"contrib\""), NSUM);
  assert_int_equal(count(text, "\"redux\":"), NSUM);
  assert_true(count(text, "\"name\":\"redux_combine\"") >= 1);
}

/* ---- bad input ---- */

typedef struct bad_run {
  fixture *f;
  int which;
  int32_t i32[8];
} bad_run;

static void orch_bad(pto_orch *o, void *arg) {
  bad_run *s = arg;
  pto_tensor t, half;
  int64_t n = 8, four = 4, start = 2;
  pto_tensor_init(&t, s->i32, sizeof s->i32, PTO_I32, 1, &n);
  pto_tensor_slice(&t, &start, &four, &half);
  switch (s->which) {
  case 0:
    s->f->rc = pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, 99), PTO_SCALAR(0), PTO_SCALAR(0));
    break;
  case 1:
    s->f->rc = pto_submit_v(o, s->f->k_mix, PTO_REDUX(&t, s->f->op_and), PTO_SCALAR(0));
    break;
  case 2:
    s->f->rc = pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, PTO_REDUX_SUM), PTO_IN(&half),
                            PTO_SCALAR(0), PTO_SCALAR(0));
    break;
  case 3:
    s->f->rc = pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, PTO_REDUX_SUM),
                            PTO_REDUX(&half, PTO_REDUX_MAX), PTO_SCALAR(0), PTO_SCALAR(0));
    break;
  case 4: {
    pto_args a;
    pto_args_init(&a);
    for (int i = 0; i < 9; i++)
      pto_args_redux(&a, &half, PTO_REDUX_SUM);
    s->f->rc = pto_submit(o, s->f->k_contrib, &a, NULL, NULL);
    break;
  }
  default:
    pto_scope_begin(o, PTO_SCOPE_MANUAL);
    s->f->rc = pto_submit_v(o, s->f->k_contrib, PTO_REDUX(&t, PTO_REDUX_MAX), PTO_SCALAR(2),
                            PTO_SCALAR(0));
    pto_scope_end(o);
    break;
  }
}

static void test_bad_input(void **state) {
  (void)state;
  static const char *const want[] = {
      "tensor argument 0 (REDUX): unknown op 99",
      "tensor argument 0 (REDUX): op 'and' reduces u8 but the view is i32",
      "tensor argument 0 (REDUX): its bytes overlap tensor argument 1 (INPUT)",
      "tensor argument 0 (REDUX): its bytes overlap tensor argument 1 (REDUX)",
      "tensor argument 8 (REDUX): a task has at most 8 REDUX arguments",
      "tensor argument 0 (REDUX): not inside a manual scope",
  };
  fixture f;
  pto_chip *chip = make_chip(&f, 1, 1, 0);
  for (int w = 0; w < 6; w++) {
    bad_run s = {&f, w, {1, 2, 3, 4, 5, 6, 7, 8}};
    f.rc = 0;
    pto_error_info err;
    assert_int_equal(pto_chip_run(chip, orch_bad, &s, NULL, &err), PTO_EINVAL);
    assert_int_equal(f.rc, PTO_EINVAL);
    if (!strstr(err.details, want[w])) fprintf(stderr, "details: %s\n", err.details);
    assert_non_null(strstr(err.details, want[w]));
    for (int i = 0; i < 8; i++) /* nothing was folded into the tensor */
      assert_int_equal(s.i32[i], i + 1);
  }
  /* registration: incomplete or mistyped descs, too many ops */
  int id;
  pto_redux_op_desc d = {"x", PTO_U8, u8_and_init, NULL};
  assert_int_equal(pto_redux_register(chip, &d, &id), PTO_EINVAL);
  d.combine = u8_and_combine;
  d.dtype = PTO_DTYPE_COUNT;
  assert_int_equal(pto_redux_register(chip, &d, &id), PTO_EINVAL);
  d.dtype = PTO_U8;
  /* a name longer than the 31 bytes kept, or with a control character:
   * refused, saying why (before: cut short, or kept with its newline) */
  static const struct {
    const char *name, *why;
  } bad_names[] = {
      {"and_of_the_bytes_of_every_contribution", "is 38 bytes long, more than the 31"},
      {"and\nor", "name 'and\\nor' has a control character (0x0a) at byte 3"},
  };
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    d.name = bad_names[i].name;
    id = -5;
    assert_int_equal(pto_redux_register(chip, &d, &id), PTO_EINVAL);
    assert_int_equal(id, -5);
    if (!strstr(pto_last_error(), bad_names[i].why))
      fail_msg("op '%s' refused saying '%s', expected '%s'", bad_names[i].name, pto_last_error(),
               bad_names[i].why);
  }
  d.name = "x";
  for (int i = 1; i < PTO_MAX_REDUX_OPS; i++)
    assert_int_equal(pto_redux_register(chip, &d, &id), PTO_OK);
  assert_int_equal(pto_redux_register(chip, &d, &id), PTO_EINVAL);
  if (!strstr(pto_last_error(), "at most 16 ops"))
    fail_msg("17th op refused saying '%s', expected 'at most 16 ops'", pto_last_error());
  pto_chip_destroy(chip);
}

/* A REDUX view whose private copies (one per core of the task) need 2^64
 * bytes or more is refused naming the sizes, as any larger than the heap.
 * Before, the size wrapped to 0 and passed: the copies got a few bytes of
 * heap, and the cores' identity writes ran past them (a segmentation
 * fault). The view claims 2^62 bytes of a small array: nothing may touch
 * it. */
static int32_t huge_backing[8];
static void orch_huge_copies(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_tensor t;
  int64_t n = (int64_t)1 << 60; /* 2^62 bytes of i32 */
  assert_int_equal(pto_tensor_init(&t, huge_backing, (size_t)1 << 62, PTO_I32, 1, &n), PTO_OK);
  f->rc = pto_submit_v(o, f->k_contrib, PTO_REDUX(&t, PTO_REDUX_SUM), PTO_SCALAR(0), PTO_SCALAR(0),
                       PTO_BLOCKS(4));
}

static void test_copies_size_overflow(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 2, 1, 0);
  pto_error_info err;
  f.rc = 0;
  int rc = pto_chip_run(chip, orch_huge_copies, &f, NULL, &err);
  const char *want = "its private copies, one per core of the task (4), need 2^64 or more bytes";
  if (rc != PTO_EHEAP_DEADLOCK || f.rc != PTO_EHEAP_DEADLOCK || !strstr(err.details, want))
    fail_msg("run %s, submit %s: '%s'; expected PTO_EHEAP_DEADLOCK with '%s'", pto_status_name(rc),
             pto_status_name(f.rc), err.details, want);
  for (int i = 0; i < 8; i++)
    assert_int_equal(huge_backing[i], 0);
  pto_chip_destroy(chip);
}

/* Ops are registered between runs (pto/redux.h), as kernels are: during a
 * run the cores read the chip's op table, and a registration is refused
 * with PTO_EBUSY saying so. Before, it returned PTO_OK and wrote the table
 * (and its count) under the cores' reads. */
typedef struct reg_in_run {
  pto_chip *chip;
  int rc, id;
  char why[256];
} reg_in_run;
static void orch_register(pto_orch *o, void *arg) {
  (void)o;
  reg_in_run *x = arg;
  pto_redux_op_desc d = {"late_and", PTO_U8, u8_and_init, u8_and_combine};
  x->rc = pto_redux_register(x->chip, &d, &x->id);
  snprintf(x->why, sizeof x->why, "%s", pto_last_error());
}

static void test_register_during_a_run(void **state) {
  (void)state;
  fixture f;
  pto_chip *chip = make_chip(&f, 1, 1, 0);
  reg_in_run x = {chip, 0, -1, ""};
  assert_int_equal(pto_chip_run(chip, orch_register, &x, NULL, NULL), PTO_OK);
  if (x.rc != PTO_EBUSY || !strstr(x.why, "the chip is running"))
    fail_msg("pto_redux_register during a run: %s ('%s'), expected PTO_EBUSY saying the chip is "
             "running",
             pto_status_name(x.rc), x.why);
  assert_null(pto_redux_op_name(chip, PTO_REDUX_USER + 1)); /* nothing registered */
  pto_redux_op_desc d = {"late_and", PTO_U8, u8_and_init, u8_and_combine};
  assert_int_equal(pto_redux_register(chip, &d, &x.id), PTO_OK); /* between runs */
  assert_string_equal(pto_redux_op_name(chip, x.id), "late_and");
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_during_a_run),
      cmocka_unit_test(test_copies_size_overflow),
      cmocka_unit_test(test_f32_sum_bit_exact),
      cmocka_unit_test(test_builtin_ops_all_dtypes),
      cmocka_unit_test(test_heap_pressure),
      cmocka_unit_test(test_multi_core_units),
      cmocka_unit_test(test_whole_heap_after_contributions),
      cmocka_unit_test(test_copies_and_output_over_the_heap),
      cmocka_unit_test(test_slab_fits_beside_scope),
      cmocka_unit_test(test_slab_minimum_never_fits),
      cmocka_unit_test(test_slab_leaves_room_for_outputs),
      cmocka_unit_test(test_scope_end_folds),
      cmocka_unit_test(test_manual_scope_end_fold_ordered),
      cmocka_unit_test(test_manual_scope_left_open_fold_ordered),
      cmocka_unit_test(test_manual_scope_host_read_fold_ordered),
      cmocka_unit_test(test_manual_scope_submit_fold_ordered),
      cmocka_unit_test(test_user_op),
      cmocka_unit_test(test_dummy_contributions),
      cmocka_unit_test(test_trace_names),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
