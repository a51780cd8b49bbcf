/* test_submit_v.c — the compact submit (pto_submit_v, pto/orch.h).
 *
 * It must hand the kernel exactly what the argument builder would (tensors
 * in order among tensors, scalars among scalars, f32 scalars as their bits,
 * blocks, the task id, an OUTPUT's allocated buffer written back), order
 * tasks by their tensors as pto_submit does, and fail a bad list at run
 * time with details naming the argument's position. The compile-time half
 * (a double scalar, a tensor by value, a const tensor to PTO_OUT, a raw
 * pointer in the list) is tests/unit/submit_v_misuse.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/kernels.h"
#include "pto/pto.h"

typedef struct seen {
  int32_t ntensors, nscalars, block_num, blocks_ran;
  uint64_t scalars[4];
  int access_buf_set[3];
} seen;

static seen g_seen;
static _Atomic int g_blocks;

static int k_record(const pto_kctx *ctx) {
  if (ctx->block_idx == 0) {
    g_seen.ntensors = ctx->ntensors;
    g_seen.nscalars = ctx->nscalars;
    g_seen.block_num = ctx->block_num;
    for (int i = 0; i < ctx->nscalars && i < 4; i++)
      g_seen.scalars[i] = ctx->scalars[i];
    for (int i = 0; i < ctx->ntensors && i < 3; i++)
      g_seen.access_buf_set[i] = ctx->tensors[i].buf != NULL;
  }
  g_blocks++;
  return 0;
}

typedef struct fix {
  pto_chip *chip;
  int rec, add, fill;
  float a[16], b[16], out[16];
  pto_tensor ta, tb, tout;
  pto_task_id id;
  int rc;
} fix;

static int setup(void **state) {
  fix *f = calloc(1, sizeof *f);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.watchdog_ms = 5000;
  if (pto_chip_create(&cfg, &f->chip) ||
      pto_kernel_register_aiv(f->chip, "record", k_record, &f->rec) ||
      pto_kernel_register_aiv(f->chip, "add", pto_kern_add, &f->add) ||
      pto_kernel_register_aiv(f->chip, "fill", pto_kern_fill, &f->fill))
    return -1;
  int64_t shape[1] = {16};
  for (int i = 0; i < 16; i++) {
    f->a[i] = (float)(i + 1);
    f->b[i] = (float)(100 * (i + 1));
  }
  if (pto_tensor_init(&f->ta, f->a, sizeof f->a, PTO_F32, 1, shape) ||
      pto_tensor_init(&f->tb, f->b, sizeof f->b, PTO_F32, 1, shape) ||
      pto_tensor_init(&f->tout, f->out, sizeof f->out, PTO_F32, 1, shape))
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fix *f = *state;
  pto_chip_destroy(f->chip);
  free(f);
  return 0;
}

/* ---- what the kernel sees ---- */

static void orch_record(pto_orch *o, void *arg) {
  fix *f = arg;
  pto_tensor c;
  int64_t shape[1] = {16};
  pto_tensor_desc(&c, PTO_F32, 1, shape);
  const pto_tensor *ca = &f->ta; /* a const tensor is fine for inputs */
  f->rc = pto_submit_v(o, f->rec, PTO_SCALAR(7), PTO_IN(ca), PTO_SCALAR(2.5f), PTO_OUT(&c),
                       PTO_SCALAR(-3), PTO_INOUT(&f->tout), PTO_SCALAR((uint8_t)255), PTO_BLOCKS(3),
                       PTO_TASK_ID(&f->id));
  if (f->rc == 0 && c.buf == NULL) f->rc = -1000; /* OUTPUT not written back */
}

static void test_kernel_sees_the_builders_arguments(void **state) {
  fix *f = *state;
  memset(&g_seen, 0, sizeof g_seen);
  g_blocks = 0;
  f->id = -1;
  pto_error_info err;
  int rc = pto_chip_run(f->chip, orch_record, f, NULL, &err);
  if (rc || f->rc) fail_msg("run %s, submit %d: %s", pto_status_name(rc), f->rc, err.details);
  assert_int_equal(g_seen.ntensors, 3);
  assert_int_equal(g_seen.nscalars, 4);
  assert_int_equal(g_seen.block_num, 3);
  assert_int_equal(g_blocks, 3);
  assert_int_equal(f->id, 0);
  union {
    float f;
    uint32_t u;
  } c = {.f = 2.5f};
  const uint64_t want[4] = {7, c.u, (uint64_t)-3, 255};
  for (int i = 0; i < 4; i++)
    if (g_seen.scalars[i] != want[i])
      fail_msg("scalar %d: 0x%llx, expected 0x%llx", i, (unsigned long long)g_seen.scalars[i],
               (unsigned long long)want[i]);
  for (int i = 0; i < 3; i++)
    assert_true(g_seen.access_buf_set[i]);
}

/* ---- dependencies as with pto_submit: fill, then add reads it ---- */

static void orch_chain(pto_orch *o, void *arg) {
  fix *f = arg;
  f->rc = pto_submit_v(o, f->fill, PTO_OUT_EXISTING(&f->tb), PTO_SCALAR(0.5f));
  if (!f->rc)
    f->rc = pto_submit_v(o, f->add, PTO_IN(&f->ta), PTO_IN(&f->tb), PTO_OUT_EXISTING(&f->tout));
}

static void test_orders_tasks_by_their_tensors(void **state) {
  fix *f = *state;
  for (int i = 0; i < 16; i++)
    f->out[i] = -1.0f;
  pto_error_info err;
  int rc = pto_chip_run(f->chip, orch_chain, f, NULL, &err);
  if (rc || f->rc) fail_msg("run %s, submit %d: %s", pto_status_name(rc), f->rc, err.details);
  for (int i = 0; i < 16; i++)
    if (f->out[i] != (float)(i + 1) + 0.5f)
      fail_msg("out[%d] = %g, expected %g", i, f->out[i], (float)(i + 1) + 0.5f);
}

/* ---- misuse at run time ---- */

typedef enum bad_case {
  BAD_TAG,
  BAD_KIND,
  NULL_TENSOR,
  TOO_MANY_TENSORS,
  TOO_MANY_SCALARS,
  ZERO_BLOCKS
} bad_case;
static bad_case g_case;

static void orch_bad(pto_orch *o, void *arg) {
  fix *f = arg;
  pto_tensor *none = NULL;
  pto_arg many[PTO_MAX_TENSOR_ARGS + PTO_MAX_SCALAR_ARGS + 1];
  int n = 0;
  switch (g_case) {
  case BAD_TAG: f->rc = pto_submit_v(o, f->rec, PTO_IN(&f->ta), (pto_arg){0}); break;
  case BAD_KIND:
    f->rc = pto_submit_v(o, f->rec, PTO_IN(&f->ta), PTO_SCALAR(1),
                         (pto_arg){PTO_ARG_MAGIC, 99, 0, {.u = 0}});
    break;
  case NULL_TENSOR: f->rc = pto_submit_v(o, f->rec, PTO_IN(none)); break;
  case TOO_MANY_TENSORS:
    for (n = 0; n <= PTO_MAX_TENSOR_ARGS; n++)
      many[n] = PTO_IN(&f->ta);
    f->rc = pto_submit_argv(o, f->rec, many, n);
    break;
  case TOO_MANY_SCALARS:
    many[n++] = PTO_IN(&f->ta);
    for (int k = 0; k <= PTO_MAX_SCALAR_ARGS; k++)
      many[n++] = PTO_SCALAR(k);
    f->rc = pto_submit_argv(o, f->rec, many, n);
    break;
  case ZERO_BLOCKS: f->rc = pto_submit_v(o, f->rec, PTO_IN(&f->ta), PTO_BLOCKS(0)); break;
  }
  /* the failure is latched: a good submit afterwards does nothing */
  if (pto_submit_v(o, f->rec, PTO_IN(&f->ta)) != f->rc) f->rc = -2000;
}

static void expect_bad(fix *f, bad_case c, const char *want1, const char *want2) {
  g_case = c;
  g_blocks = 0;
  pto_error_info err;
  int rc = pto_chip_run(f->chip, orch_bad, f, NULL, &err);
  if (rc != PTO_EINVAL || f->rc != PTO_EINVAL || !strstr(err.details, want1) ||
      !strstr(err.details, want2) || g_blocks != 0)
    fail_msg("case %d: run %s, submit %s, %d blocks ran, details '%s'; expected PTO_EINVAL "
             "naming '%s' and '%s'",
             (int)c, pto_status_name(rc), pto_status_name(f->rc), (int)g_blocks, err.details, want1,
             want2);
}

static void test_misuse_named_at_run_time(void **state) {
  fix *f = *state;
  expect_bad(f, BAD_TAG, "pto_submit_v argument 2", "not made by PTO_IN");
  expect_bad(f, BAD_KIND, "argument 3", "unknown argument kind 99");
  expect_bad(f, NULL_TENSOR, "argument 1", "NULL tensor");
  expect_bad(f, TOO_MANY_TENSORS, "argument 33", "more than 32 tensor arguments");
  expect_bad(f, TOO_MANY_SCALARS, "argument 18", "more than 16 scalar arguments");
  expect_bad(f, ZERO_BLOCKS, "argument 2", "PTO_BLOCKS(0)");
  /* the chip is still usable */
  pto_error_info err;
  int rc = pto_chip_run(f->chip, orch_chain, f, NULL, &err);
  if (rc || f->rc) fail_msg("after the bad runs: %s: %s", pto_status_name(rc), err.details);
}

/* A failed pto_submit_v leaves PTO_TASK_NONE in its PTO_TASK_ID, as
 * pto_submit does: also when the list fails before that argument is read,
 * when the run has failed already, and when the handle is not a run's. */
typedef struct ids {
  fix *f;
  pto_task_id bad_before, bad_after, latched;
  int rc_bad_before, rc_bad_after, rc_latched;
} ids;

static void orch_ids(pto_orch *o, void *arg) {
  ids *x = arg;
  fix *f = x->f;
  pto_tensor *none = NULL;
  x->bad_before = x->bad_after = x->latched = 77;
  x->rc_bad_before = pto_submit_v(o, f->rec, PTO_IN(none), PTO_TASK_ID(&x->bad_before));
  /* the failure is latched: each later submit fails at once */
  x->rc_bad_after = pto_submit_v(o, f->rec, PTO_TASK_ID(&x->bad_after), PTO_BLOCKS(0));
  x->rc_latched = pto_submit_v(o, f->rec, PTO_IN(&f->ta), PTO_TASK_ID(&x->latched));
}

static void test_task_id_none_on_failure(void **state) {
  fix *f = *state;
  ids x = {.f = f};
  pto_error_info err;
  assert_int_equal(pto_chip_run(f->chip, orch_ids, &x, NULL, &err), PTO_EINVAL);
  assert_int_equal(x.rc_bad_before, PTO_EINVAL);
  assert_int_equal(x.bad_before, PTO_TASK_NONE);
  assert_int_equal(x.rc_bad_after, PTO_EINVAL);
  assert_int_equal(x.bad_after, PTO_TASK_NONE);
  assert_int_equal(x.rc_latched, PTO_EINVAL);
  assert_int_equal(x.latched, PTO_TASK_NONE);
  pto_task_id id = 77;
  assert_int_equal(pto_submit_v(NULL, f->rec, PTO_IN(&f->ta), PTO_TASK_ID(&id)), PTO_EINVAL);
  assert_int_equal(id, PTO_TASK_NONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_sees_the_builders_arguments),
      cmocka_unit_test(test_orders_tasks_by_their_tensors),
      cmocka_unit_test(test_misuse_named_at_run_time),
      cmocka_unit_test(test_task_id_none_on_failure),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
