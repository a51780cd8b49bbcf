/* test_orch_errors.c — the bad-input matrix of the orchestration API.
 *
 * Every bad call inside a run must return PTO_EINVAL (or the documented
 * code), latch it with details that name the problem, turn the next submit
 * into a no-op returning the latched code, and leave the chip usable: the
 * next run on it succeeds. Calls outside a run (NULL orchestrator, bad
 * chip configurations, bad kernel descriptors) must fail without side
 * effects. Under ASan this also checks that failed runs leak nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "pto/kernels.h"
#include "pto/pto.h"

/* ---- fixture ---- */

typedef struct oe_ctx {
  pto_chip *chip;   /* 2 clusters of 1 AIC + 2 AIV */
  pto_chip *no_aic; /* 2 clusters of 0 AIC + 2 AIV */
  int fill, mm, mix, mix_no_aic, aic_no_aic;
  float buf[64];
  float small[16];
  pto_tensor t; /* [4, 16] over buf */
  int rc_bad, rc_after, status_seen;
  pto_task_id first;
} oe_ctx;

static int oe_nop(const pto_kctx *ctx) {
  (void)ctx;
  return PTO_OK;
}

static oe_ctx *g_ctx;

static int oe_setup(void **state) {
  oe_ctx *c = calloc(1, sizeof *c);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 1;
  cfg.watchdog_ms = 5000;
  if (pto_chip_create(&cfg, &c->chip)) return -1;
  cfg.aic_per_cluster = 0;
  if (pto_chip_create(&cfg, &c->no_aic)) return -1;
  pto_kernel_desc mix = {.name = "mix", .aic = oe_nop, .aiv = oe_nop, .aiv_count = 2};
  if (pto_kernel_register_aiv(c->chip, "fill", pto_kern_fill, &c->fill) ||
      pto_kernel_register_aic(c->chip, "mm", oe_nop, &c->mm) ||
      pto_kernel_register(c->chip, &mix, &c->mix) ||
      pto_kernel_register(c->no_aic, &mix, &c->mix_no_aic) ||
      pto_kernel_register_aic(c->no_aic, "aic_only", oe_nop, &c->aic_no_aic))
    return -1;
  int64_t shape[2] = {4, 16};
  if (pto_tensor_init(&c->t, c->buf, sizeof c->buf, PTO_F32, 2, shape)) return -1;
  g_ctx = c;
  *state = c;
  return 0;
}

static int oe_teardown(void **state) {
  oe_ctx *c = *state;
  pto_chip_destroy(c->chip);
  pto_chip_destroy(c->no_aic);
  free(c);
  return 0;
}

/* A valid fill of c->t with v. */
static int oe_fill(pto_orch *o, oe_ctx *c, float v) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  pto_args_scalar_f32(&a, v);
  return pto_submit(o, c->fill, &a, NULL, NULL);
}

/* ---- the bad calls (each stores its return code in c->rc_bad) ---- */

typedef void (*bad_fn)(pto_orch *o, oe_ctx *c);

static void bad_33_tensors(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < PTO_MAX_TENSOR_ARGS + 1; i++)
    pto_args_input(&a, &c->t);
  c->rc_bad = pto_submit(o, c->fill, &a, NULL, NULL);
}

static void bad_17_scalars(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  for (int i = 0; i < PTO_MAX_SCALAR_ARGS + 1; i++)
    pto_args_scalar(&a, 1);
  c->rc_bad = pto_submit(o, c->fill, &a, NULL, NULL);
}

static void bad_tensor_after_scalar(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar_f32(&a, 1.0f);
  pto_args_output_existing(&a, &c->t);
  c->rc_bad = pto_submit(o, c->fill, &a, NULL, NULL);
}

/* Submits c->t altered by `edit` as the INPUT argument 0 of a task. */
static void submit_edited(pto_orch *o, oe_ctx *c, pto_tensor t) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &t);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

static void bad_ndims_0(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.ndims = 0;
  submit_edited(o, c, t);
}

static void bad_ndims_6(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.ndims = 6;
  submit_edited(o, c, t);
}

static void bad_stride_0(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.stride[0] = 0;
  submit_edited(o, c, t);
}

static void bad_stride_negative(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.stride[1] = -1;
  submit_edited(o, c, t);
}

static void bad_view_outside(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.offset = 1; /* the last element lies one past the buffer */
  submit_edited(o, c, t);
}

static void bad_view_shape_outside(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.shape[0] = 5;
  submit_edited(o, c, t);
}

static void bad_negative_offset(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.offset = -1;
  t.shape[1] = 8;
  submit_edited(o, c, t);
}

static void bad_shape_0(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.shape[1] = 0;
  submit_edited(o, c, t);
}

static void bad_dtype(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.dtype = 99;
  submit_edited(o, c, t);
}

static void bad_null_buf(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.buf = NULL;
  submit_edited(o, c, t);
}

static void bad_output_desc(pto_orch *o, oe_ctx *c) {
  pto_tensor d;
  int64_t shape[2] = {4, 16};
  pto_tensor_desc(&d, PTO_F32, 2, shape);
  d.shape[0] = -4;
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &d);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

/* OUTPUT allocates; a tensor of the caller's memory passed as OUTPUT
 * would be left unwritten (its result in pto's buffer alone). Before, the
 * submit and the run succeeded and the caller's buffer stayed as it was. */
static void bad_output_of_callers_buffer(pto_orch *o, oe_ctx *c) {
  pto_tensor mine;
  int64_t shape[1] = {16};
  pto_tensor_init(&mine, c->buf, sizeof c->buf, PTO_F32, 1, shape);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &mine);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

static void bad_null_tensor(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &c->t);
  pto_args_input(&a, NULL);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

static void bad_access_mode(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_add(&a, (pto_access)9, &c->t);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

/* A scalar after the bad tensor: the tensor's own fault is named, not
 * "added after a scalar" (the scalar came after it). */
static void bad_null_tensor_then_scalar(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, NULL);
  pto_args_scalar(&a, 1);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

static void bad_access_mode_then_scalar(pto_orch *o, oe_ctx *c) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &c->t);
  pto_args_add(&a, (pto_access)9, &c->t);
  pto_args_scalar(&a, 1);
  c->rc_bad = pto_submit(o, c->mm, &a, NULL, NULL);
}

/* pto_args is a public struct: a program may fill it by hand, bypassing
 * the builder's checks. Submits one built by the builder (a valid fill of
 * c->t), then with `edit` applied to its counts or modes. */
static void submit_hand_built(pto_orch *o, oe_ctx *c, void (*edit)(pto_args *a)) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  pto_args_scalar_f32(&a, 1.0f);
  edit(&a);
  c->rc_bad = pto_submit(o, c->fill, &a, NULL, NULL);
}
static void ntensors_negative(pto_args *a) { a->ntensors = -1; }
static void ntensors_over(pto_args *a) { a->ntensors = PTO_MAX_TENSOR_ARGS + 1; }
static void nscalars_negative(pto_args *a) { a->nscalars = -2; }
static void nscalars_over(pto_args *a) { a->nscalars = PTO_MAX_SCALAR_ARGS + 8; }
static void access_over(pto_args *a) { a->access[0] = 9; }
/* OUTPUT over a descriptor, but no tensor to write the allocated view
 * back into (outputs[0], which only pto_args_output sets) */
static void output_no_writeback(pto_args *a) {
  a->access[0] = PTO_OUTPUT;
  a->tensors[0].buf = NULL;
  a->tensors[0].buf_bytes = 0;
}
static void bad_hand_ntensors_negative(pto_orch *o, oe_ctx *c) {
  submit_hand_built(o, c, ntensors_negative);
}
static void bad_hand_ntensors_over(pto_orch *o, oe_ctx *c) {
  submit_hand_built(o, c, ntensors_over);
}
static void bad_hand_nscalars_negative(pto_orch *o, oe_ctx *c) {
  submit_hand_built(o, c, nscalars_negative);
}
static void bad_hand_nscalars_over(pto_orch *o, oe_ctx *c) {
  submit_hand_built(o, c, nscalars_over);
}
static void bad_hand_access(pto_orch *o, oe_ctx *c) { submit_hand_built(o, c, access_over); }
static void bad_hand_output_no_writeback(pto_orch *o, oe_ctx *c) {
  submit_hand_built(o, c, output_no_writeback);
}

static void submit_priority(pto_orch *o, oe_ctx *c, int priority) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  pto_args_scalar_f32(&a, 1.0f);
  pto_submit_opts so = {.priority = priority};
  c->rc_bad = pto_submit(o, c->fill, &a, &so, NULL);
}
static void bad_priority_over(pto_orch *o, oe_ctx *c) {
  submit_priority(o, c, PTO_PRIORITY_MAX + 1);
}
static void bad_priority_negative(pto_orch *o, oe_ctx *c) { submit_priority(o, c, -1); }

static void bad_kernel_99(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_submit(o, 99, NULL, NULL, NULL);
}
static void bad_kernel_m1(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_submit(o, -1, NULL, NULL, NULL);
}
static void bad_kernel_m7(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_submit(o, -7, NULL, NULL, NULL);
}

static void bad_block_num(pto_orch *o, oe_ctx *c) {
  pto_submit_opts so = {.block_num = -3};
  c->rc_bad = pto_submit(o, c->mm, NULL, &so, NULL);
}

static void bad_block_num_dummy(pto_orch *o, oe_ctx *c) {
  pto_submit_opts so = {.block_num = -1};
  c->rc_bad = pto_submit_dummy(o, NULL, &so, NULL);
}

static void bad_mix_no_aic(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_submit(o, c->mix_no_aic, NULL, NULL, NULL);
}

static void bad_aic_no_aic(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_submit(o, c->aic_no_aic, NULL, NULL, NULL);
}

static void bad_deps_null(pto_orch *o, oe_ctx *c) {
  pto_submit_opts so = {.deps = NULL, .ndeps = 2};
  c->rc_bad = pto_submit(o, c->mm, NULL, &so, NULL);
}

static void bad_deps_negative_count(pto_orch *o, oe_ctx *c) {
  pto_task_id d = c->first;
  pto_submit_opts so = {.deps = &d, .ndeps = -1};
  c->rc_bad = pto_submit(o, c->mm, NULL, &so, NULL);
}

static void bad_dep_future(pto_orch *o, oe_ctx *c) {
  pto_task_id d[2] = {c->first, c->first + 5};
  pto_submit_opts so = {.deps = d, .ndeps = 2};
  c->rc_bad = pto_submit_dummy(o, NULL, &so, NULL);
}

static void bad_dep_negative(pto_orch *o, oe_ctx *c) {
  pto_task_id d = -2;
  pto_submit_opts so = {.deps = &d, .ndeps = 1};
  c->rc_bad = pto_submit(o, c->mm, NULL, &so, NULL);
}

static void bad_read_dst(pto_orch *o, oe_ctx *c) { c->rc_bad = pto_orch_read(o, &c->t, NULL, -1); }
static void bad_read_tensor(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_orch_read(o, NULL, c->small, -1);
}
static void bad_read_view(pto_orch *o, oe_ctx *c) {
  pto_tensor t = c->t;
  t.stride[1] = 0;
  c->rc_bad = pto_orch_read(o, &t, c->small, -1);
}
static void bad_write_src(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_orch_write(o, &c->t, NULL, -1);
}
static void bad_wait_task(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_orch_wait_task(o, c->first + 100, -1);
}
static void bad_scope_end(pto_orch *o, oe_ctx *c) { c->rc_bad = pto_scope_end(o); }
static void bad_auto_in_manual(pto_orch *o, oe_ctx *c) {
  if (pto_scope_begin(o, PTO_SCOPE_MANUAL)) return;
  c->rc_bad = pto_scope_begin(o, PTO_SCOPE_AUTO);
}
static void bad_scope_mode(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_scope_begin(o, (pto_scope_mode)5);
}

/* Not an invalid argument, but the same latch: after a fatal, submits
 * return PTO_EFATAL. */
static void fatal_then_submit(pto_orch *o, oe_ctx *c) {
  c->rc_bad = pto_orch_fatal(o, "stop %d", 7);
}

typedef struct bad_case {
  const char *name;
  bad_fn fn;
  const char *needle; /* must appear in err.details */
  bool no_aic;        /* run on the chip without AIC cores */
  int code;           /* 0 = PTO_EINVAL */
} bad_case;

static const bad_case cases[] = {
    {"33 tensor arguments", bad_33_tensors, "more than 32 tensor arguments", false, 0},
    {"17 scalar arguments", bad_17_scalars, "more than 16 scalar arguments", false, 0},
    {"tensor after a scalar", bad_tensor_after_scalar, "tensor argument 0 added after a scalar",
     false, 0},
    {"ndims 0", bad_ndims_0, "tensor argument 0 (INPUT): ndims 0 is outside 1..5", false, 0},
    {"ndims 6", bad_ndims_6, "tensor argument 0 (INPUT): ndims 6 is outside 1..5", false, 0},
    {"stride 0", bad_stride_0, "tensor argument 0 (INPUT): stride[0] is 0 (must be > 0)", false, 0},
    {"negative stride", bad_stride_negative, "stride[1] is -1 (must be > 0)", false, 0},
    {"view past the buffer end (offset)", bad_view_outside,
     "tensor argument 0 (INPUT): it reaches byte 260 but the buffer has 256 bytes", false, 0},
    {"view past the buffer end (shape)", bad_view_shape_outside,
     "tensor argument 0 (INPUT): it reaches byte 320 but the buffer has 256 bytes", false, 0},
    {"negative offset", bad_negative_offset, "offset -1 is negative", false, 0},
    {"shape 0", bad_shape_0, "tensor argument 0 (INPUT): shape[1] is 0 (< 1)", false, 0},
    {"unknown dtype", bad_dtype, "dtype 99", false, 0},
    {"NULL buffer", bad_null_buf, "tensor argument 0 (INPUT): buf is NULL", false, 0},
    {"OUTPUT descriptor with a negative shape", bad_output_desc,
     "tensor argument 0 (OUTPUT): dtype, ndims (1..5) or a shape (>= 1) is invalid", false, 0},
    {"OUTPUT of a buffer of the caller's", bad_output_of_callers_buffer,
     "tensor argument 0 (OUTPUT): its buf is memory of yours: OUTPUT allocates a new buffer", false,
     0},
    {"NULL tensor", bad_null_tensor, "tensor argument 1: NULL tensor", false, 0},
    {"unknown access mode", bad_access_mode,
     "tensor argument 0: access mode is not a pto_access (0..6)", false, 0},
    {"NULL tensor, then a scalar", bad_null_tensor_then_scalar, "tensor argument 0: NULL tensor",
     false, 0},
    {"unknown access mode, then a scalar", bad_access_mode_then_scalar,
     "tensor argument 1: access mode is not a pto_access (0..6)", false, 0},
    {"hand-built args: ntensors -1", bad_hand_ntensors_negative,
     "pto_args.ntensors is -1: must be 0..32", false, 0},
    {"hand-built args: ntensors 33", bad_hand_ntensors_over,
     "pto_args.ntensors is 33: must be 0..32", false, 0},
    {"hand-built args: nscalars -2", bad_hand_nscalars_negative,
     "pto_args.nscalars is -2: must be 0..16", false, 0},
    {"hand-built args: nscalars 24", bad_hand_nscalars_over,
     "pto_args.nscalars is 24: must be 0..16", false, 0},
    {"hand-built args: access mode 9", bad_hand_access,
     "tensor argument 0: pto_args.access[0] is 9, not a pto_access (0..6)", false, 0},
    {"hand-built args: OUTPUT with outputs[] NULL", bad_hand_output_no_writeback,
     "tensor argument 0 (OUTPUT): pto_args.outputs[0] is NULL", false, 0},
    {"priority above PTO_PRIORITY_MAX", bad_priority_over, "priority 4: must be 0..3", false, 0},
    {"negative priority", bad_priority_negative, "priority -1: must be 0..3", false, 0},
    {"unknown kernel 99", bad_kernel_99, "unknown kernel id 99", false, 0},
    {"kernel id -1", bad_kernel_m1, "unknown kernel id -1", false, 0},
    {"kernel id -7", bad_kernel_m7, "unknown kernel id -7", false, 0},
    {"block_num < 1", bad_block_num, "block_num -3", false, 0},
    {"dummy with block_num < 1", bad_block_num_dummy, "block_num -1", false, 0},
    {"MIX kernel on a chip without AIC", bad_mix_no_aic, "'mix' needs 1 AIC + 2 AIV", true, 0},
    {"AIC kernel on a chip without AIC", bad_aic_no_aic, "'aic_only' needs 1 AIC + 0 AIV", true, 0},
    {"explicit deps NULL", bad_deps_null, "ndeps 2 with deps NULL", false, 0},
    {"negative ndeps", bad_deps_negative_count, "ndeps -1", false, 0},
    {"dependency on a later task", bad_dep_future, "not an earlier task", false, 0},
    {"dependency on task -2", bad_dep_negative, "explicit dep 0 is task -2", false, 0},
    {"pto_orch_read into NULL", bad_read_dst, "dst is NULL", false, 0},
    {"pto_orch_read of NULL", bad_read_tensor, "pto_orch_read: NULL or invalid tensor", false, 0},
    {"pto_orch_read of a bad view", bad_read_view, "pto_orch_read: NULL or invalid tensor", false,
     0},
    {"pto_orch_write from NULL", bad_write_src, "src is NULL", false, 0},
    {"wait for a task never submitted", bad_wait_task, "is not a submitted task", false, 0},
    {"scope_end without scope_begin", bad_scope_end, "scope_end without scope_begin", false, 0},
    {"automatic scope inside a manual one", bad_auto_in_manual,
     "automatic scope cannot be nested in a manual scope", false, 0},
    {"unknown scope mode", bad_scope_mode, "unknown mode 5", false, 0},
    {"submit after pto_orch_fatal", fatal_then_submit, "stop 7", false, PTO_EFATAL},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* ---- running one case ---- */

typedef struct oe_run {
  oe_ctx *c;
  const bad_case *bc;
} oe_run;

/* A valid task first (so the failure meets work in flight), then the bad
 * call, then a valid submit that must return the latched code. */
static void oe_orch(pto_orch *o, void *arg) {
  oe_run *r = arg;
  oe_ctx *c = r->c;
  if (r->bc->no_aic) {
    pto_submit_dummy(o, NULL, NULL, &c->first);
  } else {
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &c->t);
    pto_args_scalar_f32(&a, 1.0f);
    pto_submit(o, c->fill, &a, NULL, &c->first);
  }
  r->bc->fn(o, c);
  c->status_seen = pto_orch_status(o);
  c->rc_after = pto_submit_dummy(o, NULL, NULL, NULL);
}

static void oe_good_orch(pto_orch *o, void *arg) { oe_fill(o, arg, 42.0f); }
static void oe_empty_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

static void test_case(void **state) {
  const bad_case *bc = *state;
  oe_ctx *c = g_ctx;
  pto_chip *chip = bc->no_aic ? c->no_aic : c->chip;
  const int code = bc->code ? bc->code : PTO_EINVAL;
  c->rc_bad = c->rc_after = c->status_seen = 12345;
  oe_run r = {c, bc};
  pto_error_info err;
  pto_run_stats st;
  int rc = pto_chip_run(chip, oe_orch, &r, &st, &err);
  if (!strstr(err.details, bc->needle) || rc != code)
    fprintf(stderr, "case '%s': run returned %s, details: %s\n", bc->name, pto_status_name(rc),
            err.details);
  assert_int_equal(rc, code);
  assert_int_equal(err.code, code);
  assert_int_equal(c->rc_bad, code);
  assert_int_equal(c->status_seen, code);
  assert_int_equal(c->rc_after, code); /* later submits are no-ops returning the latch */
  assert_non_null(strstr(err.details, bc->needle));
  assert_int_equal(st.tasks, 1); /* only the valid first task was accepted */

  /* the run ended cleanly: the chip runs again */
  if (!bc->no_aic) {
    memset(c->buf, 0, sizeof c->buf);
    rc = pto_chip_run(chip, oe_good_orch, c, NULL, &err);
    assert_int_equal(rc, PTO_OK);
    for (int i = 0; i < 64; i++)
      assert_true(c->buf[i] == 42.0f);
  } else {
    assert_int_equal(pto_chip_run(chip, oe_empty_orch, NULL, NULL, &err), PTO_OK);
  }
}

/* ---- calls outside a run ---- */

static void test_null_orchestrator(void **state) {
  (void)state;
  oe_ctx *c = g_ctx;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &c->t);
  assert_int_equal(pto_submit(NULL, c->fill, &a, NULL, NULL), PTO_EINVAL);
  assert_int_equal(pto_submit_dummy(NULL, NULL, NULL, NULL), PTO_EINVAL);
  assert_int_equal(pto_scope_begin(NULL, PTO_SCOPE_AUTO), PTO_EINVAL);
  assert_int_equal(pto_scope_end(NULL), PTO_EINVAL);
  assert_int_equal(pto_orch_read(NULL, &c->t, c->buf, 0), PTO_EINVAL);
  assert_int_equal(pto_orch_write(NULL, &c->t, c->buf, 0), PTO_EINVAL);
  assert_int_equal(pto_orch_wait_task(NULL, 0, 0), PTO_EINVAL);
  assert_int_equal(pto_orch_fatal(NULL, "x"), PTO_EINVAL);
  assert_int_equal(pto_orch_status(NULL), PTO_EINVAL);
  assert_null(pto_orch_chip(NULL));
  /* the builder ignores a NULL pto_args */
  pto_args_init(NULL);
  pto_args_input(NULL, &c->t);
  pto_args_scalar(NULL, 1);
}

static void test_run_bad_arguments(void **state) {
  (void)state;
  oe_ctx *c = g_ctx;
  pto_error_info err;
  assert_int_equal(pto_chip_run(NULL, oe_good_orch, c, NULL, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "chip is NULL"));
  assert_int_equal(pto_chip_run(c->chip, NULL, c, NULL, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "orchestration function is NULL"));
  assert_int_equal(pto_chip_run(c->chip, oe_good_orch, c, NULL, NULL), PTO_OK);
}

/* A run started on a chip that is already running fails at once with
 * PTO_EBUSY and leaves the outer run alone. */
typedef struct nested {
  oe_ctx *c;
  int rc;
  pto_error_info err;
} nested;

static void nested_orch(pto_orch *o, void *arg) {
  nested *n = arg;
  n->rc = pto_chip_run(pto_orch_chip(o), oe_good_orch, n->c, NULL, &n->err);
  oe_fill(o, n->c, 5.0f);
}

static void test_nested_run_busy(void **state) {
  (void)state;
  nested n = {g_ctx, 0, {0}};
  memset(g_ctx->buf, 0, sizeof g_ctx->buf);
  assert_int_equal(pto_chip_run(g_ctx->chip, nested_orch, &n, NULL, NULL), PTO_OK);
  assert_int_equal(n.rc, PTO_EBUSY);
  assert_non_null(strstr(n.err.details, "already running"));
  assert_true(g_ctx->buf[0] == 5.0f);
}

/* A pto_orch kept past its run: every call on it does nothing and returns
 * PTO_EINVAL, and the chip's next run is not touched by them. Before, a
 * submit on it returned PTO_OK into the chip's idle run and its task never
 * ran (and the handle lived on pto_chip_run's stack). */
static pto_orch *kept;
static void keep_orch(pto_orch *o, void *arg) {
  kept = o;
  oe_fill(o, arg, 7.0f);
}

static void test_orch_used_after_its_run(void **state) {
  (void)state;
  oe_ctx *c = g_ctx;
  memset(c->buf, 0, sizeof c->buf);
  assert_int_equal(pto_chip_run(c->chip, keep_orch, c, NULL, NULL), PTO_OK);
  assert_true(c->buf[0] == 7.0f);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  pto_args_scalar_f32(&a, 9.0f);
  pto_task_id id = 77;
  assert_int_equal(pto_submit(kept, c->fill, &a, NULL, &id), PTO_EINVAL);
  assert_int_equal(id, PTO_TASK_NONE);
  assert_int_equal(pto_submit_dummy(kept, NULL, NULL, NULL), PTO_EINVAL);
  assert_int_equal(pto_scope_begin(kept, PTO_SCOPE_AUTO), PTO_EINVAL);
  assert_int_equal(pto_scope_end(kept), PTO_EINVAL);
  assert_int_equal(pto_orch_read(kept, &c->t, c->small, 0), PTO_EINVAL);
  assert_int_equal(pto_orch_wait_task(kept, 0, 0), PTO_EINVAL);
  assert_int_equal(pto_orch_fatal(kept, "after the run"), PTO_EINVAL);
  assert_int_equal(pto_orch_status(kept), PTO_EINVAL);
  assert_string_equal(pto_last_error(),
                      "pto_orch_status: this pto_orch's run has ended; the call did nothing (a "
                      "pto_orch is its run's only while the orchestration function runs: keep "
                      "none past it)");
  assert_int_equal(pto_scope_begin(kept, PTO_SCOPE_AUTO), PTO_EINVAL);
  assert_non_null(strstr(pto_last_error(), "pto_scope_begin: this pto_orch's run has ended"));
  assert_null(pto_orch_chip(kept));
  assert_true(c->buf[0] == 7.0f); /* nothing ran */
  /* the next run sees none of it: its own task only, and success */
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(c->chip, oe_good_orch, c, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(st.tasks, 1);
  assert_true(c->buf[0] == 42.0f);
}

/* A pto_orch kept from one run and used during the chip's next run: the
 * next run hands out a handle of its own, and every call on the old one,
 * from the orchestrator's thread or another, does nothing to it and
 * returns PTO_EINVAL (before, the old pointer was the new run's handle:
 * its submits ran in the new run, its pto_orch_fatal failed it). */
typedef struct stale {
  oe_ctx *c;
  pto_orch *cur;
  int rc_submit, rc_dummy, rc_v, rc_scope, rc_read, rc_wait, rc_fatal, rc_status;
  int rc_fatal_thread, rc_status_thread;
  pto_chip *chip_of_kept;
  pto_task_id id, id_v;
} stale;

static void *stale_thread(void *arg) {
  stale *s = arg;
  s->rc_fatal_thread = pto_orch_fatal(kept, "from another thread, with run 1's handle");
  s->rc_status_thread = pto_orch_status(kept);
  return NULL;
}

static void stale_orch(pto_orch *o, void *arg) {
  stale *s = arg;
  oe_ctx *c = s->c;
  s->cur = o;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &c->t);
  pto_args_scalar_f32(&a, 9.0f);
  s->id = s->id_v = 77;
  s->rc_submit = pto_submit(kept, c->fill, &a, NULL, &s->id);
  s->rc_dummy = pto_submit_dummy(kept, NULL, NULL, NULL);
  s->rc_v =
      pto_submit_v(kept, c->fill, PTO_OUT_EXISTING(&c->t), PTO_SCALAR(9.0f), PTO_TASK_ID(&s->id_v));
  s->rc_scope = pto_scope_begin(kept, PTO_SCOPE_AUTO);
  s->rc_read = pto_orch_read(kept, &c->t, c->small, 0);
  s->rc_wait = pto_orch_wait_task(kept, 0, 0);
  s->rc_fatal = pto_orch_fatal(kept, "with run 1's handle");
  s->rc_status = pto_orch_status(kept);
  s->chip_of_kept = pto_orch_chip(kept);
  pthread_t th;
  if (pthread_create(&th, NULL, stale_thread, s) == 0) pthread_join(th, NULL);
  oe_fill(o, c, 42.0f); /* the run's own task */
}

static void test_orch_of_an_earlier_run_in_the_next(void **state) {
  (void)state;
  oe_ctx *c = g_ctx;
  memset(c->buf, 0, sizeof c->buf);
  assert_int_equal(pto_chip_run(c->chip, keep_orch, c, NULL, NULL), PTO_OK);
  assert_true(c->buf[0] == 7.0f);
  stale s = {.c = c};
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(c->chip, stale_orch, &s, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_true(s.cur != kept);
  assert_int_equal(s.rc_submit, PTO_EINVAL);
  assert_int_equal(s.id, PTO_TASK_NONE);
  assert_int_equal(s.rc_dummy, PTO_EINVAL);
  assert_int_equal(s.rc_v, PTO_EINVAL);
  assert_int_equal(s.id_v, PTO_TASK_NONE);
  assert_int_equal(s.rc_scope, PTO_EINVAL);
  assert_int_equal(s.rc_read, PTO_EINVAL);
  assert_int_equal(s.rc_wait, PTO_EINVAL);
  assert_int_equal(s.rc_fatal, PTO_EINVAL);
  assert_int_equal(s.rc_status, PTO_EINVAL);
  assert_null(s.chip_of_kept);
  assert_int_equal(s.rc_fatal_thread, PTO_EINVAL);
  assert_int_equal(s.rc_status_thread, PTO_EINVAL);
  assert_int_equal(st.tasks, 1); /* its own task only */
  assert_true(c->buf[0] == 42.0f);
  /* nor is the handle of that second run any use in a third */
  kept = s.cur;
  assert_int_equal(pto_chip_run(c->chip, stale_orch, &s, &st, &err), PTO_OK);
  assert_int_equal(s.rc_submit, PTO_EINVAL);
  assert_int_equal(s.rc_fatal_thread, PTO_EINVAL);
  assert_int_equal(st.tasks, 1);
}

/* A descriptor passed as OUTPUT again is fine: its buf is then an
 * earlier OUTPUT's, in pto's heap. */
static int reused_rc[2];
static void output_desc_twice(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor d;
  int64_t shape[1] = {16};
  pto_tensor_desc(&d, PTO_F32, 1, shape);
  for (int i = 0; i < 2; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_output(&a, &d);
    reused_rc[i] = pto_submit_dummy(o, &a, NULL, NULL);
  }
}

static void test_output_descriptor_reused(void **state) {
  (void)state;
  reused_rc[0] = reused_rc[1] = 12345;
  assert_int_equal(pto_chip_run(g_ctx->chip, output_desc_twice, NULL, NULL, NULL), PTO_OK);
  assert_int_equal(reused_rc[0], PTO_OK);
  assert_int_equal(reused_rc[1], PTO_OK);
}

static void test_bad_configs(void **state) {
  (void)state;
  pto_chip *chip = (pto_chip *)1;
  pto_chip_config base;
  pto_chip_config_init(&base);
  base.clusters = 2;
  base.schedulers = 1;
  assert_int_equal(pto_chip_create(NULL, &chip), PTO_EINVAL);
  assert_int_equal(pto_chip_create(&base, NULL), PTO_EINVAL);
  pto_chip_config c;
#define EXPECT_BAD_CONFIG(STMT)                                                                    \
  do {                                                                                             \
    c = base;                                                                                      \
    STMT;                                                                                          \
    chip = (pto_chip *)1;                                                                          \
    assert_int_equal(pto_chip_create(&c, &chip), PTO_EINVAL);                                      \
    assert_null(chip);                                                                             \
  } while (0)
  EXPECT_BAD_CONFIG(c.clusters = 0);
  EXPECT_BAD_CONFIG(c.clusters = -1);
  EXPECT_BAD_CONFIG(c.schedulers = 3);
  EXPECT_BAD_CONFIG(c.schedulers = -1);
  EXPECT_BAD_CONFIG(c.aic_per_cluster = 2);
  EXPECT_BAD_CONFIG(c.aic_per_cluster = -1);
  EXPECT_BAD_CONFIG(c.aiv_per_cluster = 3);
  EXPECT_BAD_CONFIG((c.aic_per_cluster = 0, c.aiv_per_cluster = 0));
  EXPECT_BAD_CONFIG(c.task_slots = 1);
  EXPECT_BAD_CONFIG(c.dep_entries = 0);
  EXPECT_BAD_CONFIG(c.tensormap_entries = 0);
  EXPECT_BAD_CONFIG(c.heap_bytes = 0);
  EXPECT_BAD_CONFIG(c.watchdog_ms = 0);
  EXPECT_BAD_CONFIG(c.alloc_timeout_ms = -5);
  EXPECT_BAD_CONFIG(c.shutdown_ms = 0);
#undef EXPECT_BAD_CONFIG
  c = base;
  assert_int_equal(pto_chip_create(&c, &chip), PTO_OK);
  pto_chip_destroy(chip);
}

/* A refused registration returns its code and says why in
 * pto_last_error() (the calls take no pto_error_info). */
#define EXPECT_REG(call, code, why)                                                                \
  do {                                                                                             \
    assert_int_equal((call), (code));                                                              \
    if (!strstr(pto_last_error(), (why))) {                                                        \
      fprintf(stderr, "%s: pto_last_error() is '%s', expected it to contain '%s'\n", #call,        \
              pto_last_error(), (why));                                                            \
      fail();                                                                                      \
    }                                                                                              \
  } while (0)

static void test_bad_kernel_descs(void **state) {
  (void)state;
  oe_ctx *c = g_ctx;
  int id = -5;
  pto_kernel_desc ok = {.name = "k", .aiv = oe_nop};
  EXPECT_REG(pto_kernel_register(NULL, &ok, &id), PTO_EINVAL, "chip is NULL");
  EXPECT_REG(pto_kernel_register(c->chip, NULL, &id), PTO_EINVAL, "desc is NULL");
  EXPECT_REG(pto_kernel_register(c->chip, &ok, NULL), PTO_EINVAL, "'k': kernel_id is NULL");
  pto_kernel_desc d = ok;
  d.name = NULL;
  EXPECT_REG(pto_kernel_register(c->chip, &d, &id), PTO_EINVAL, "name is NULL");
  d = (pto_kernel_desc){.name = "none"};
  EXPECT_REG(pto_kernel_register(c->chip, &d, &id), PTO_EINVAL,
             "'none' has no function (aic and aiv are NULL)");
  d = (pto_kernel_desc){.name = "three", .aiv = oe_nop, .aiv_count = 3};
  EXPECT_REG(pto_kernel_register(c->chip, &d, &id), PTO_EINVAL,
             "'three': aiv_count = 3, must be 0, 1 or 2");
  d = (pto_kernel_desc){.name = "neg", .aiv = oe_nop, .aiv_count = -1};
  EXPECT_REG(pto_kernel_register(c->chip, &d, &id), PTO_EINVAL, "aiv_count = -1");
  d = (pto_kernel_desc){.name = "count_no_fn", .aic = oe_nop, .aiv_count = 2};
  EXPECT_REG(pto_kernel_register(c->chip, &d, &id), PTO_EINVAL,
             "'count_no_fn': aiv_count = 2 without an aiv function");
  EXPECT_REG(pto_kernel_register_aic(c->chip, "null", NULL, &id), PTO_EINVAL,
             "'null' has no function");
  EXPECT_REG(pto_kernel_register_aiv(c->chip, "null", NULL, &id), PTO_EINVAL,
             "'null' has no function");
  assert_int_equal(id, -5); /* untouched by every failure */
}

/* A chip of one cluster, for the registration tests. */
static pto_chip *one_cluster_chip(void) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  return chip;
}

/* A kernel's name is one line of a schedule record (its parser reads
 * lines) and is kept in 48 bytes: a name with a control character, or
 * longer than 47 bytes, is refused, saying which byte or how long. Before,
 * "a\nb" was registered (its record could not be replayed) and a long name
 * was cut short, so two long names of one prefix went by one name. */
static void test_kernel_names_fit_records(void **state) {
  (void)state;
  pto_chip *chip = one_cluster_chip();
  char name[64];
  memset(name, 'a', sizeof name);
  name[48] = '\0';
  int id = -5;
  EXPECT_REG(pto_kernel_register_aiv(chip, name, oe_nop, &id), PTO_EINVAL,
             "is 48 bytes long, more than the 47 a name may have");
  pto_kernel_desc d = {.name = name, .aic = oe_nop, .aiv = oe_nop};
  name[48] = 'b'; /* the same first 47 bytes as the next one */
  name[49] = '\0';
  EXPECT_REG(pto_kernel_register(chip, &d, &id), PTO_EINVAL,
             "is 49 bytes long, more than the 47 a name may have");
  EXPECT_REG(pto_kernel_register_aic(chip, "a\nb", oe_nop, &id), PTO_EINVAL,
             "name 'a\\nb' has a control character (0x0a) at byte 1");
  EXPECT_REG(pto_kernel_register_aiv(chip, "tab\there", oe_nop, &id), PTO_EINVAL,
             "has a control character (0x09) at byte 3");
  EXPECT_REG(pto_kernel_register_aiv(chip, "del\x7f", oe_nop, &id), PTO_EINVAL,
             "has a control character (0x7f) at byte 3");
  assert_int_equal(id, -5); /* untouched by every refusal */
  name[47] = '\0';          /* 47 bytes fit, as do spaces and UTF-8 */
  assert_int_equal(pto_kernel_register_aiv(chip, name, oe_nop, &id), PTO_OK);
  assert_int_equal(id, 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "a kernel, caf\xc3\xa9", oe_nop, &id), PTO_OK);
  assert_int_equal(id, 1);
  pto_chip_destroy(chip);
}

/* Names tell kernels apart (traces, schedule records): a second kernel of
 * one name is refused; a chip holds at most 256 kernels; the table is not
 * written during a run. Before, each passed or failed without a reason. */
static int reg_during_run_rc;
static int reg_during_run_id = -5;
static char reg_during_run_why[400];
static void register_in_orch(pto_orch *o, void *arg) {
  (void)o;
  reg_during_run_rc = pto_kernel_register_aiv((pto_chip *)arg, "late", oe_nop, &reg_during_run_id);
  snprintf(reg_during_run_why, sizeof reg_during_run_why, "%s", pto_last_error());
}

static void test_kernel_register_refusals(void **state) {
  (void)state;
  pto_chip *chip = one_cluster_chip();
  int id = -5, first = -5;
  assert_int_equal(pto_kernel_register_aiv(chip, "twice", oe_nop, &first), PTO_OK);
  EXPECT_REG(pto_kernel_register_aic(chip, "twice", oe_nop, &id), PTO_EINVAL,
             "a kernel named 'twice' is already registered (id 0)");
  assert_int_equal(id, -5);
  assert_int_equal(pto_chip_run(chip, register_in_orch, chip, NULL, NULL), PTO_OK);
  assert_int_equal(reg_during_run_rc, PTO_EBUSY);
  assert_int_equal(reg_during_run_id, -5);
  assert_non_null(strstr(reg_during_run_why, "'late': the chip is running"));
  char name[32];
  for (int i = 1; i < 256; i++) {
    snprintf(name, sizeof name, "k%d", i);
    assert_int_equal(pto_kernel_register_aiv(chip, name, oe_nop, &id), PTO_OK);
    assert_int_equal(id, i);
  }
  EXPECT_REG(pto_kernel_register_aiv(chip, "k256", oe_nop, &id), PTO_EINVAL,
             "'k256': a chip holds at most 256 kernels");
  assert_int_equal(id, 255);
  pto_chip_destroy(chip);
}

int main(void) {
  struct CMUnitTest tests[NCASES + 10];
  char names[NCASES][96];
  for (size_t i = 0; i < NCASES; i++) {
    snprintf(names[i], sizeof names[i], "bad input: %s", cases[i].name);
    tests[i] = (struct CMUnitTest){names[i], test_case, NULL, NULL, (void *)&cases[i]};
  }
  tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(test_null_orchestrator);
  tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_run_bad_arguments);
  tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_bad_configs);
  tests[NCASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_bad_kernel_descs);
  tests[NCASES + 4] = (struct CMUnitTest)cmocka_unit_test(test_nested_run_busy);
  tests[NCASES + 5] = (struct CMUnitTest)cmocka_unit_test(test_orch_used_after_its_run);
  tests[NCASES + 6] = (struct CMUnitTest)cmocka_unit_test(test_orch_of_an_earlier_run_in_the_next);
  tests[NCASES + 7] = (struct CMUnitTest)cmocka_unit_test(test_kernel_register_refusals);
  tests[NCASES + 8] = (struct CMUnitTest)cmocka_unit_test(test_output_descriptor_reused);
  tests[NCASES + 9] = (struct CMUnitTest)cmocka_unit_test(test_kernel_names_fit_records);
  /* one fixture for all (a case's state is its table row, not the fixture) */
  void *fixture = NULL;
  if (oe_setup(&fixture) != 0) {
    fprintf(stderr, "test_orch_errors: fixture setup failed\n");
    return 1;
  }
  int failed = _cmocka_run_group_tests("orch_errors", tests, NCASES + 10, NULL, NULL);
  oe_teardown(&fixture);
  return failed;
}
