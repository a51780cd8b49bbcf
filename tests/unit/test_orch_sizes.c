/* test_orch_sizes.c — counts and sizes at submit, and OUTPUT lifetimes.
 *
 * Sizes: the heap a task's OUTPUTs need is summed with checked arithmetic,
 * so OUTPUTs whose sizes wrap 64 bits are refused at once (the task never
 * runs) and a request larger than the heap ring fails at once with the
 * sizes in the details instead of waiting for back-pressure. Counts: a
 * task's blocks times the cores of a block (the units the scheduler counts
 * to complete it) must fit an int32; a block_num whose product wraps is
 * refused with PTO_EINVAL naming it, and no block runs.
 *
 * Lifetimes: a runtime-allocated OUTPUT view is valid until the scope it
 * was allocated in ends (the run itself for top-level ones). Passing it, or
 * a view derived from it, to a later submit or host read/write fails with
 * PTO_EINVAL naming the argument, instead of silently reading whichever
 * tensor reuses its heap range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/kernels.h"
#include "pto/pto.h"

typedef struct os_ctx {
  pto_chip *chip;
  int fill, copy, count;
  int mix2, mix3; /* MIX kernels: 1 AIC + 1 AIV, 1 AIC + 2 AIV */
  int rc[8];
  float out[64];
  pto_tensor keep; /* a view kept from an earlier scope or run */
} os_ctx;

static _Atomic int g_runs; /* blocks of the counting kernel that ran */

static int os_count(const pto_kctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&g_runs, 1);
  return PTO_OK;
}

static int os_setup(void **state) {
  os_ctx *c = calloc(1, sizeof *c);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  cfg.heap_bytes = 1u << 20;
  cfg.alloc_timeout_ms = 5000; /* a wait for back-pressure would show */
  cfg.watchdog_ms = 10000;
  if (pto_chip_create(&cfg, &c->chip) ||
      pto_kernel_register_aiv(c->chip, "fill", pto_kern_fill, &c->fill) ||
      pto_kernel_register_aiv(c->chip, "copy", pto_kern_copy, &c->copy) ||
      pto_kernel_register_aiv(c->chip, "count", os_count, &c->count) ||
      pto_kernel_register(c->chip, &(pto_kernel_desc){"mix2", os_count, os_count, 1}, &c->mix2) ||
      pto_kernel_register(c->chip, &(pto_kernel_desc){"mix3", os_count, os_count, 2}, &c->mix3))
    return -1;
  *state = c;
  return 0;
}

static int os_teardown(void **state) {
  os_ctx *c = *state;
  pto_chip_destroy(c->chip);
  free(c);
  return 0;
}

static int run(os_ctx *c, pto_orch_fn fn, pto_error_info *err) {
  for (int i = 0; i < 8; i++)
    c->rc[i] = 12345;
  atomic_store(&g_runs, 0);
  int rc = pto_chip_run(c->chip, fn, c, NULL, err);
  if (rc) fprintf(stderr, "run: %s: %s\n", pto_status_name(rc), err->details);
  return rc;
}

/* ---- sizes ---- */

/* Four OUTPUTs of 2^62 bytes each (plus one small one): their sum wraps. */
static void orch_wrapping_outputs(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_tensor big[4], small;
  int64_t n = INT64_C(1) << 60, n16 = 16; /* f32: 2^62 bytes */
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 4; i++) {
    pto_tensor_desc(&big[i], PTO_F32, 1, &n);
    pto_args_output(&a, &big[i]);
  }
  pto_tensor_desc(&small, PTO_F32, 1, &n16);
  pto_args_output(&a, &small);
  c->rc[0] = pto_submit(o, c->count, &a, NULL, NULL);
  /* without the small one the wrapped sum is 0: "no heap needed" */
  pto_args_init(&a);
  for (int i = 0; i < 4; i++)
    pto_args_output(&a, &big[i]);
  c->rc[1] = pto_submit(o, c->count, &a, NULL, NULL);
}

static void test_output_sizes_wrap(void **state) {
  os_ctx *c = *state;
  pto_error_info err;
  int rc = run(c, orch_wrapping_outputs, &err);
  if (c->rc[0] != PTO_EHEAP_DEADLOCK || atomic_load(&g_runs) != 0)
    fprintf(stderr,
            "wrapping OUTPUT sizes: submit returned %s (expected PTO_EHEAP_DEADLOCK), "
            "kernel ran %d times (expected 0)\n",
            pto_status_name(c->rc[0]), atomic_load(&g_runs));
  assert_int_equal(c->rc[0], PTO_EHEAP_DEADLOCK);
  assert_int_equal(c->rc[1], PTO_EHEAP_DEADLOCK); /* the latched code */
  assert_int_equal(atomic_load(&g_runs), 0);
  assert_int_equal(rc, PTO_EHEAP_DEADLOCK);
  /* the details name the argument sizes and the heap */
  assert_non_null(strstr(err.details, "4611686018427387904"));
  assert_non_null(strstr(err.details, "heap_bytes is 1048576"));
}

static void orch_too_big(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_tensor t1, t2;
  int64_t n = 600 * 256; /* f32: 600 KiB, so two need 1.2 MiB > 1 MiB */
  pto_tensor_desc(&t1, PTO_F32, 1, &n);
  pto_tensor_desc(&t2, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t1);
  pto_args_output(&a, &t2);
  c->rc[0] = pto_submit(o, c->count, &a, NULL, NULL);
}

static void test_output_larger_than_heap_fails_at_once(void **state) {
  os_ctx *c = *state;
  pto_error_info err;
  pto_run_stats st;
  atomic_store(&g_runs, 0);
  int rc = pto_chip_run(c->chip, orch_too_big, c, &st, &err);
  assert_int_equal(rc, PTO_EHEAP_DEADLOCK);
  assert_int_equal(c->rc[0], PTO_EHEAP_DEADLOCK);
  assert_int_equal(atomic_load(&g_runs), 0);
  if (st.host_us > 1000000.0)
    fprintf(stderr, "took %.0f us: waited for back-pressure\n", st.host_us);
  assert_true(st.host_us < 1000000.0); /* alloc_timeout_ms is 5000 */
  assert_non_null(strstr(err.details, "1228800"));
  assert_non_null(strstr(err.details, "heap_bytes is 1048576"));
}

/* A heap_bytes whose rounding to the ring's alignment wraps (to a ring of
 * 0 bytes) is refused when the run sets up. */
static void orch_one_output(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_tensor t;
  int64_t n = 16;
  pto_tensor_desc(&t, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  c->rc[0] = pto_submit(o, c->count, &a, NULL, NULL);
}

static void test_heap_bytes_that_wrap(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  cfg.heap_bytes = SIZE_MAX - 10;
  os_ctx c = {0};
  assert_int_equal(pto_chip_create(&cfg, &c.chip), 0);
  assert_int_equal(pto_kernel_register_aiv(c.chip, "count", os_count, &c.count), 0);
  pto_error_info err;
  int rc = pto_chip_run(c.chip, orch_one_output, &c, NULL, &err);
  if (rc != PTO_ENOMEM)
    fprintf(stderr, "heap_bytes 2^64 - 11: run returned %s (expected PTO_ENOMEM): %s\n",
            pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_ENOMEM);
  assert_non_null(strstr(err.details, "the heap ring (heap_bytes = 18446744073709551605)"));
  pto_chip_destroy(c.chip);
}

/* An OUTPUT larger than a heap_bytes that is not a multiple of the ring's
 * alignment: the details name heap_bytes as configured, and what the ring
 * holds (before: "heap_bytes is 1024" for a heap_bytes of 1000). */
static void orch_two_kib(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_tensor t;
  int64_t n = 512; /* f32: 2048 bytes */
  pto_tensor_desc(&t, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  c->rc[0] = pto_submit(o, c->count, &a, NULL, NULL);
}

static void test_heap_bytes_named_as_configured(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.schedulers = 1;
  cfg.heap_bytes = 1000;
  os_ctx c = {0};
  assert_int_equal(pto_chip_create(&cfg, &c.chip), 0);
  assert_int_equal(pto_kernel_register_aiv(c.chip, "count", os_count, &c.count), 0);
  pto_error_info err;
  int rc = pto_chip_run(c.chip, orch_two_kib, &c, NULL, &err);
  const char *want = "heap_bytes is 1000 (the heap ring holds 1024: a multiple of 64)";
  if (rc != PTO_EHEAP_DEADLOCK || !strstr(err.details, want))
    fail_msg("heap_bytes 1000, an OUTPUT of 2048 bytes: %s: '%s'; expected PTO_EHEAP_DEADLOCK "
             "and '%s'",
             pto_status_name(rc), err.details, want);
  pto_chip_destroy(c.chip);
}

/* A block count whose units (blocks x cores per block) wrap an int32:
 * 1431655766 x 3 is 2^32 + 2, which wrapped to 2 units; 2^30 x 2 is 2^31,
 * which wrapped negative. Each is refused before anything runs, through
 * pto_submit and through the compact submit. */
static int g_kernel, g_blocks, g_compact;

static void orch_many_blocks(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  if (g_compact) {
    c->rc[0] = pto_submit_v(o, g_kernel, PTO_BLOCKS(g_blocks));
  } else {
    pto_submit_opts so = {.block_num = g_blocks};
    c->rc[0] = pto_submit(o, g_kernel, NULL, &so, NULL);
  }
  c->rc[1] = pto_submit(o, c->count, NULL, NULL, NULL); /* after the refusal: not run */
}

static void test_block_units_overflow(void **state) {
  os_ctx *c = *state;
  const struct {
    int kernel, blocks;
    const char *needle;
  } cases[] = {
      {c->mix3, 1431655766, "block_num 1431655766 x 3 cores"},
      {c->mix2, 1 << 30, "block_num 1073741824 x 2 cores"},
  };
  for (size_t i = 0; i < 2 * sizeof cases / sizeof cases[0]; i++) {
    g_kernel = cases[i / 2].kernel;
    g_blocks = cases[i / 2].blocks;
    g_compact = (int)(i % 2);
    pto_error_info err;
    int rc = run(c, orch_many_blocks, &err);
    if (c->rc[0] != PTO_EINVAL || atomic_load(&g_runs) != 0)
      fprintf(stderr,
              "block_num %d of a %d-core MIX kernel (%s): submit returned %s (expected "
              "PTO_EINVAL), run %s, kernel ran %d times (expected 0)\n",
              g_blocks, cases[i / 2].kernel == c->mix3 ? 3 : 2,
              g_compact ? "pto_submit_v" : "pto_submit", pto_status_name(c->rc[0]),
              pto_status_name(rc), atomic_load(&g_runs));
    assert_int_equal(c->rc[0], PTO_EINVAL);
    assert_int_equal(c->rc[1], PTO_EINVAL); /* the latched code */
    assert_int_equal(atomic_load(&g_runs), 0);
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, cases[i / 2].needle));
  }
}

/* ---- lifetimes ---- */

static pto_tensor filled(pto_orch *o, os_ctx *c, float v, int *rc) {
  pto_tensor t;
  int64_t sh[2] = {4, 16};
  pto_tensor_desc(&t, PTO_F32, 2, sh);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  pto_args_scalar_f32(&a, v);
  *rc = pto_submit(o, c->fill, &a, NULL, NULL);
  return t;
}

static int copy_to(pto_orch *o, os_ctx *c, const pto_tensor *in, pto_tensor *out) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output(&a, out);
  return pto_submit(o, c->copy, &a, NULL, NULL);
}

/* out1 is filled with 1 in a scope that ends; its heap range is reused by
 * out2 (filled with 2) in the next scope; then out1 is read. */
static void orch_stale_input(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor out1 = filled(o, c, 1.0f, &c->rc[0]);
  pto_scope_end(o);
  pto_orch_wait_task(o, 0, -1); /* retired: its range goes back to the heap */
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor out2 = filled(o, c, 2.0f, &c->rc[1]);
  if (out2.buf == out1.buf) c->rc[6] = 1; /* the range really was reused */
  pto_tensor res;
  int64_t sh[2] = {4, 16};
  pto_tensor_desc(&res, PTO_F32, 2, sh);
  c->rc[2] = copy_to(o, c, &out1, &res);
  if (!c->rc[2]) c->rc[3] = pto_orch_read(o, &res, c->out, -1);
  pto_scope_end(o);
}

static void test_stale_output_input(void **state) {
  os_ctx *c = *state;
  pto_error_info err;
  int rc = run(c, orch_stale_input, &err);
  assert_int_equal(c->rc[0], 0);
  assert_int_equal(c->rc[1], 0);
  assert_int_equal(c->rc[6], 1);
  if (c->rc[2] != PTO_EINVAL)
    fprintf(stderr,
            "stale OUTPUT view as INPUT: submit returned %s (expected PTO_EINVAL), "
            "read %g (out1 held 1, out2 holds 2)\n",
            pto_status_name(c->rc[2]), (double)c->out[0]);
  assert_int_equal(c->rc[2], PTO_EINVAL);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "tensor argument 0 (INPUT)"));
  assert_non_null(strstr(err.details, "scope"));
}

/* Host access, derived views and raw views of an ended scope's output; the
 * scope just ended, nothing was reallocated yet. */
typedef enum { USE_READ, USE_WRITE, USE_SLICE, USE_RAW, USE_INOUT } use_kind;
static use_kind g_use;

static void orch_stale_use(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor out1 = filled(o, c, 1.0f, &c->rc[0]);
  pto_scope_end(o);
  pto_tensor v = out1;
  int64_t start[2] = {1, 0}, shape[2] = {2, 16};
  switch (g_use) {
  case USE_READ: c->rc[1] = pto_orch_read(o, &out1, c->out, -1); break;
  case USE_WRITE: c->rc[1] = pto_orch_write(o, &out1, c->out, -1); break;
  case USE_SLICE:
    pto_tensor_slice(&out1, start, shape, &v);
    c->rc[1] = pto_orch_read(o, &v, c->out, -1);
    break;
  case USE_RAW: /* a view built over the runtime's memory by hand */
    pto_tensor_init(&v, out1.buf, out1.buf_bytes, PTO_I32, 2, out1.shape);
    c->rc[1] = pto_orch_read(o, &v, c->out, -1);
    break;
  case USE_INOUT: {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &v);
    pto_args_scalar_f32(&a, 3.0f);
    c->rc[1] = pto_submit(o, c->fill, &a, NULL, NULL);
    break;
  }
  }
}

static void test_stale_output_uses(void **state) {
  os_ctx *c = *state;
  static const struct {
    use_kind k;
    const char *needle;
  } uses[] = {{USE_READ, "pto_orch_read"},
              {USE_WRITE, "pto_orch_write"},
              {USE_SLICE, "pto_orch_read"},
              {USE_RAW, "pto_orch_read"},
              {USE_INOUT, "tensor argument 0 (INOUT)"}};
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
    g_use = uses[i].k;
    pto_error_info err;
    int rc = run(c, orch_stale_use, &err);
    if (c->rc[1] != PTO_EINVAL)
      fprintf(stderr, "use %zu of a stale OUTPUT view returned %s (expected PTO_EINVAL)\n", i,
              pto_status_name(c->rc[1]));
    assert_int_equal(c->rc[0], 0);
    assert_int_equal(c->rc[1], PTO_EINVAL);
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, uses[i].needle));
    assert_non_null(strstr(err.details, "scope"));
  }
}

/* Every legal use keeps working: top-level outputs for the whole run,
 * scoped outputs (and views derived from them, or built over their memory)
 * until their scope ends, outputs of an outer scope inside an inner one. */
static void orch_live_uses(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  int rc = 0, r;
  pto_tensor top = filled(o, c, 1.0f, &r);
  rc |= r;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor s1 = filled(o, c, 2.0f, &r);
  rc |= r;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor s2 = filled(o, c, 3.0f, &r);
  rc |= r;
  pto_tensor res;
  int64_t sh[2] = {4, 16}, start[2] = {2, 0}, half[2] = {2, 16};
  pto_tensor_desc(&res, PTO_F32, 2, sh);
  rc |= copy_to(o, c, &s1, &res); /* outer scope's output */
  rc |= copy_to(o, c, &top, &res);
  pto_tensor sl, raw;
  pto_tensor_slice(&s2, start, half, &sl);
  pto_tensor_init(&raw, s2.buf, s2.buf_bytes, PTO_F32, 2, sh);
  rc |= pto_orch_read(o, &sl, c->out, -1);
  rc |= pto_orch_read(o, &raw, c->out, -1);
  pto_scope_end(o);
  rc |= pto_orch_read(o, &s1, c->out, -1);
  pto_scope_end(o);
  rc |= pto_orch_read(o, &top, c->out, -1);
  c->rc[0] = rc;
  c->keep = top;
}

static void orch_use_kept(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  pto_tensor fresh = filled(o, c, 5.0f, &c->rc[0]); /* likely the same address */
  (void)fresh;
  c->rc[1] = pto_orch_read(o, &c->keep, c->out, -1);
}

static void test_live_outputs_and_previous_run(void **state) {
  os_ctx *c = *state;
  pto_error_info err;
  assert_int_equal(run(c, orch_live_uses, &err), 0);
  assert_int_equal(c->rc[0], 0);
  assert_true(c->out[0] == 1.0f);
  /* a top-level output of the previous run is stale in this one */
  int rc = run(c, orch_use_kept, &err);
  assert_int_equal(c->rc[0], 0);
  if (c->rc[1] != PTO_EINVAL)
    fprintf(stderr, "OUTPUT view of the previous run: read returned %s, saw %g\n",
            pto_status_name(c->rc[1]), (double)c->out[0]);
  assert_int_equal(c->rc[1], PTO_EINVAL);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "pto_orch_read"));
}

/* An output of an open scope stays valid while later scopes' temporaries
 * wrap the heap ring around it several times (the ring's tail passes its
 * held range): reads of it, and of a view built over its memory, succeed
 * and see its data; once its scope ends, they fail. */
static void orch_held_across_laps(pto_orch *o, void *arg) {
  os_ctx *c = arg;
  int rc = 0, r;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor x = filled(o, c, 7.0f, &r);
  rc |= r;
  for (int i = 0; i < 40; i++) { /* 40 x 64 KiB temporaries: 2.5 laps of 1 MiB */
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    pto_tensor tmp;
    int64_t big[2] = {64, 256};
    pto_tensor_desc(&tmp, PTO_F32, 2, big);
    pto_args a;
    pto_args_init(&a);
    pto_args_output(&a, &tmp);
    pto_args_scalar_f32(&a, (float)i);
    rc |= pto_submit(o, c->fill, &a, NULL, NULL);
    pto_scope_end(o);
  }
  pto_tensor raw;
  int64_t sh[2] = {4, 16};
  pto_tensor_init(&raw, x.buf, x.buf_bytes, PTO_F32, 2, sh);
  c->rc[1] = pto_orch_read(o, &x, c->out, -1);
  float first = c->out[0];
  c->rc[2] = pto_orch_read(o, &raw, c->out, -1);
  c->out[1] = first;
  pto_scope_end(o);
  c->rc[3] = pto_orch_read(o, &x, c->out + 2, -1);
  c->rc[0] = rc;
}

static void test_output_held_across_heap_laps(void **state) {
  os_ctx *c = *state;
  pto_error_info err;
  int rc = run(c, orch_held_across_laps, &err);
  if (c->rc[1] || c->rc[2] || c->out[0] != 7.0f || c->out[1] != 7.0f)
    fprintf(stderr,
            "output of an open scope after 2.5 heap laps: read %s (saw %g), raw view read %s "
            "(saw %g); expected PTO_OK and 7 for both\n",
            pto_status_name(c->rc[1]), (double)c->out[1], pto_status_name(c->rc[2]),
            (double)c->out[0]);
  assert_int_equal(c->rc[0], 0);
  assert_int_equal(c->rc[1], 0);
  assert_int_equal(c->rc[2], 0);
  assert_true(c->out[0] == 7.0f && c->out[1] == 7.0f);
  assert_int_equal(c->rc[3], PTO_EINVAL); /* its scope has ended */
  assert_int_equal(rc, PTO_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_sizes_wrap),
      cmocka_unit_test(test_output_larger_than_heap_fails_at_once),
      cmocka_unit_test(test_heap_bytes_that_wrap),
      cmocka_unit_test(test_heap_bytes_named_as_configured),
      cmocka_unit_test(test_block_units_overflow),
      cmocka_unit_test(test_stale_output_input),
      cmocka_unit_test(test_stale_output_uses),
      cmocka_unit_test(test_live_outputs_and_previous_run),
      cmocka_unit_test(test_output_held_across_heap_laps),
  };
  return cmocka_run_group_tests(tests, os_setup, os_teardown);
}
