/* test_contract_units.c — checking mode's units and order (docs/contracts.md):
 * the parts of a MIX block and the blocks of a sync_start gang run together
 * (they wait for each other) and are checked as one unit; the order is a
 * function of the seed; what checking mode cannot check is refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

static pto_chip *checked_chip(int clusters, uint64_t seed) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.check = 1;
  cfg.check_seed = seed;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  return chip;
}

/* ---- a gang whose blocks meet at a barrier, one of them straying ---- */

#define GANG 4
static int32_t arrive;        /* the barrier (pto does not know it: a global) */
static int32_t out[2 * GANG]; /* tensor 0: [GANG] declared */
static int stray_block = -1;

static int gang_kernel(const pto_kctx *ctx) {
  __atomic_fetch_add(&arrive, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&arrive, __ATOMIC_ACQUIRE) % GANG != 0)
    if (pto_kctx_cancelled(ctx)) return PTO_ESHUTDOWN;
  int32_t *o = (int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  o[ctx->block_idx] = ctx->block_idx + 1;
  if (ctx->block_idx == stray_block) o[GANG + 1] = 7; /* past the view */
  return PTO_OK;
}

static void gang_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor t;
  int64_t shape[1] = {GANG};
  pto_tensor_init(&t, out, sizeof out, PTO_I32, 1, shape);
  pto_submit_v(o, *(int *)pto_chip_get_config(pto_orch_chip(o))->env, PTO_OUT_EXISTING(&t),
               PTO_BLOCKS(GANG), PTO_SYNC_START);
}

static void test_gang_runs_together_and_is_checked_as_one(void **state) {
  (void)state;
  for (int stray = -1; stray <= 2; stray += 3) {
    int kid;
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = GANG;
    cfg.check = 1;
    cfg.check_seed = 3;
    cfg.env = &kid;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "gang", gang_kernel, &kid), PTO_OK);
    memset(out, 0, sizeof out);
    arrive = 0;
    stray_block = stray;
    pto_error_info err;
    int rc = pto_chip_run(chip, gang_orch, NULL, NULL, &err);
    pto_chip_destroy(chip);
    if (stray < 0) {
      /* both runs of the gang (the checked one and the flipped one) met */
      assert_int_equal(rc, PTO_OK);
      for (int b = 0; b < GANG; b++)
        assert_int_equal(out[b], b + 1);
    } else {
      assert_int_equal(rc, PTO_ECONTRACT);
      assert_int_equal(err.arg, 0);
      assert_non_null(strstr(err.details, "gang of 4 blocks wrote outside its declared writes"));
      assert_non_null(strstr(err.details, "byte 20 changed 0x00 -> 0x07"));
    }
  }
}

/* ---- a MIX block whose AIV part reads what the AIC part was not given ---- */

static int32_t mix_in[8], mix_out[8];

static int mix_aic(const pto_kctx *ctx) {
  (void)ctx;
  return PTO_OK;
}

static int mix_aiv(const pto_kctx *ctx) {
  const int32_t *in = (const int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  int32_t *o = (int32_t *)ctx->tensors[1].buf + ctx->tensors[1].offset;
  o[ctx->sub_block_id] = in[ctx->sub_block_id] + in[4]; /* in[4]: past the 4 declared */
  return PTO_OK;
}

static int mix_kid;
static void mix_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor a, b;
  int64_t four[1] = {4}, two[1] = {2};
  pto_tensor_init(&a, mix_in, sizeof mix_in, PTO_I32, 1, four);
  pto_tensor_init(&b, mix_out, sizeof mix_out, PTO_I32, 1, two);
  pto_submit_v(o, mix_kid, PTO_IN(&a), PTO_OUT_EXISTING(&b));
}

static void test_mix_block_read_outside(void **state) {
  (void)state;
  pto_chip *chip = checked_chip(2, 9);
  pto_kernel_desc d = {"mix", mix_aic, mix_aiv, 2};
  assert_int_equal(pto_kernel_register(chip, &d, &mix_kid), PTO_OK);
  for (int i = 0; i < 8; i++)
    mix_in[i] = 10 * i;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, mix_orch, NULL, NULL, &err), PTO_ECONTRACT);
  assert_int_equal(err.arg, 1);
  assert_string_equal(err.kernel, "mix");
  assert_non_null(strstr(err.details, "block 0/1 reads memory it did not declare: argument 1"));
  /* the opt-out: its writes are still checked, the second run is skipped */
  assert_int_equal(pto_kernel_skip_read_check(chip, mix_kid), PTO_OK);
  assert_int_equal(pto_chip_run(chip, mix_orch, NULL, NULL, &err), PTO_OK);
  assert_int_equal(mix_out[1], 10 + 40);
  assert_int_equal(pto_kernel_skip_read_check(chip, 99), PTO_EINVAL);
  pto_chip_destroy(chip);
}

/* ---- the order is the seed's ---- */

#define NIND 8
static int order[NIND], norder;
static int32_t cells[NIND];

static int log_kernel(const pto_kctx *ctx) {
  int32_t *c = (int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  *c = 1;
  uintptr_t p = (uintptr_t)c, lo = (uintptr_t)cells;
  if (p >= lo && p < lo + sizeof cells && norder < NIND) /* not the flipped run's copy */
    order[norder++] = (int)((p - lo) / sizeof *cells);
  return PTO_OK;
}

static int log_kid;
static void independent_orch(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < NIND; i++) {
    pto_tensor t;
    int64_t one[1] = {1};
    pto_tensor_init(&t, &cells[i], sizeof cells[i], PTO_I32, 1, one);
    pto_submit_v(o, log_kid, PTO_OUT_EXISTING(&t));
  }
}

static void run_order(uint64_t seed, int *got) {
  pto_chip *chip = checked_chip(1, seed);
  assert_int_equal(pto_kernel_register_aiv(chip, "log", log_kernel, &log_kid), PTO_OK);
  norder = 0;
  assert_int_equal(pto_chip_run(chip, independent_orch, NULL, NULL, NULL), PTO_OK);
  pto_chip_destroy(chip);
  assert_int_equal(norder, NIND);
  memcpy(got, order, sizeof order);
}

static void test_order_follows_the_seed(void **state) {
  (void)state;
  int a[NIND], b[NIND], c[NIND];
  run_order(11, a);
  run_order(11, b);
  run_order(12, c);
  assert_memory_equal(a, b, sizeof a);     /* the same seed repeats the order */
  assert_memory_not_equal(a, c, sizeof a); /* another one (these seeds) does not */
}

/* ---- refused by name ---- */

static int async_kernel(const pto_kctx *ctx) {
  uint64_t token;
  return pto_kctx_async_begin(ctx, &token);
}

static int async_kid;
static void one_task(pto_orch *o, void *arg) {
  (void)arg;
  pto_submit(o, async_kid, NULL, NULL, NULL);
}

/* PTO_CHECK_SEED is a decimal integer, digits only, as every PTO_*
 * number: strtoull alone skipped leading spaces and took a sign, so
 * ' -5' became 18446744073709551611 and ' 5', '+5' passed. */
static void test_check_seed_digits_only(void **state) {
  (void)state;
  static const char *const bad[] = {" -5", " 5", "+5", "\t7", " +0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("PTO_CHECK", "contracts", 1);
    setenv("PTO_CHECK_SEED", bad[i], 1);
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    pto_chip *chip = NULL;
    pto_error_info err;
    int rc = pto_chip_create_ex(&cfg, &chip, &err);
    if (rc == PTO_OK) pto_chip_destroy(chip);
    if (rc != PTO_EINVAL)
      fail_msg("PTO_CHECK_SEED='%s' gave %s (check_seed %llu), expected PTO_EINVAL", bad[i],
               pto_status_name(rc), (unsigned long long)cfg.check_seed);
    char want[80];
    snprintf(want, sizeof want, "PTO_CHECK_SEED = '%s', must be a decimal integer", bad[i]);
    assert_non_null(strstr(err.details, want));
  }
  setenv("PTO_CHECK_SEED", "18446744073709551615", 1); /* the largest: taken */
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  assert_int_equal(cfg.check, 1);
  assert_true(cfg.check_seed == UINT64_MAX);
  unsetenv("PTO_CHECK_SEED");
  unsetenv("PTO_CHECK");
}

static void test_async_and_bad_values_refused(void **state) {
  (void)state;
  pto_chip *chip = checked_chip(1, 1);
  assert_int_equal(pto_kernel_register_aiv(chip, "async", async_kernel, &async_kid), PTO_OK);
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, one_task, NULL, NULL, &err), PTO_ECONTRACT);
  assert_non_null(strstr(err.details, "asked for asynchronous completion"));
  assert_int_equal(err.arg, -1);
  pto_chip_destroy(chip);

  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.check = 2;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "check = 2, must be 0 (off) or 1 (contracts)"));
  setenv("PTO_CHECK_SEED", "12x", 1);
  pto_chip_config_init(&cfg);
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "PTO_CHECK_SEED = '12x', must be a decimal integer"));
  unsetenv("PTO_CHECK_SEED");
  /* checking mode and a controlled schedule both order the blocks */
  pto_chip_config_init(&cfg);
  cfg.check = 1;
  cfg.schedule_seed = 7;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "cannot be combined"));
}

/* ---- an INPUT negated in place: every word's sign bit flipped ---- */

static double neg_in[64];

static int negate_kernel(const pto_kctx *ctx) {
  double *in = (double *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  for (int i = 0; i < 64; i++)
    in[i] = -in[i];
  return PTO_OK;
}

static int negate_kid;
static void negate_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor t;
  int64_t n[1] = {64};
  pto_tensor_init(&t, neg_in, sizeof neg_in, PTO_F64, 1, n);
  pto_submit_v(o, negate_kid, PTO_IN(&t));
}

/* Flipping the same bit of word pairs must not cancel out in the compare
 * (a hash of lanes combined by xor once let this pass). */
static void test_input_negated_in_place(void **state) {
  (void)state;
  pto_chip *chip = checked_chip(1, 5);
  assert_int_equal(pto_kernel_register_aiv(chip, "negate", negate_kernel, &negate_kid), PTO_OK);
  for (int i = 0; i < 64; i++)
    neg_in[i] = 1.0 + i;
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, negate_orch, NULL, NULL, &err), PTO_ECONTRACT);
  assert_int_equal(err.arg, 0);
  assert_non_null(strstr(err.details, "argument 0 (INPUT, buffer"));
  assert_non_null(strstr(err.details, "byte 7 changed 0x3f -> 0xbf, inside its INPUT view"));
  pto_chip_destroy(chip);
}

/* ---- a COMMUTE argument's stray write names its mode ---- */

static int32_t acc_buf[8];

static int commute_past(const pto_kctx *ctx) {
  int32_t *a = (int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  a[0] += 1;
  a[6] = 9; /* past the 4 declared */
  return PTO_OK;
}

static int commute_kid;
static void commute_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor t;
  int64_t four[1] = {4};
  pto_tensor_init(&t, acc_buf, sizeof acc_buf, PTO_I32, 1, four);
  pto_submit_v(o, commute_kid, PTO_COMMUTE(&t));
}

static void test_commute_breach_names_its_mode(void **state) {
  (void)state;
  pto_chip *chip = checked_chip(1, 2);
  assert_int_equal(pto_kernel_register_aiv(chip, "commute_past", commute_past, &commute_kid),
                   PTO_OK);
  memset(acc_buf, 0, sizeof acc_buf);
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, commute_orch, NULL, NULL, &err), PTO_ECONTRACT);
  assert_int_equal(err.arg, 0);
  assert_non_null(strstr(err.details, "argument 0 (COMMUTE, buffer"));
  assert_non_null(strstr(err.details, "byte 24 changed 0x00 -> 0x09"));
  pto_chip_destroy(chip);
}

/* ---- a kernel that writes its declared bytes through a global pointer ---- */

static int32_t g_acc[4];

static int global_add(const pto_kctx *ctx) {
  (void)ctx;
  for (int i = 0; i < 4; i++)
    g_acc[i] += 1; /* g_acc, not ctx->tensors[0] */
  return PTO_OK;
}

static int global_set(const pto_kctx *ctx) {
  (void)ctx;
  for (int i = 0; i < 4; i++)
    g_acc[i] = 7; /* the same value each run */
  return PTO_OK;
}

static int global_kid;
static void global_orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor t;
  int64_t four[1] = {4};
  pto_tensor_init(&t, g_acc, sizeof g_acc, PTO_I32, 1, four);
  pto_submit_v(o, global_kid, PTO_INOUT(&t));
}

/* The read check's second run must not write the program's memory twice,
 * nor blame an undeclared read: it names the access that bypassed the
 * tensors and leaves the bytes as the real run left them. */
static void test_write_through_global_pointer(void **state) {
  (void)state;
  pto_chip *chip = checked_chip(1, 4);
  assert_int_equal(pto_kernel_register_aiv(chip, "global_add", global_add, &global_kid), PTO_OK);
  memset(g_acc, 0, sizeof g_acc);
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, global_orch, NULL, NULL, &err), PTO_ECONTRACT);
  assert_int_equal(err.arg, 0);
  assert_non_null(strstr(err.details, "block 0/1 wrote argument 0's bytes other than through its "
                                      "tensors (ctx->tensors)"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(g_acc[i], 1); /* once: the second run's writes were undone */
  /* opted out of the read check: one run, no report */
  assert_int_equal(pto_kernel_skip_read_check(chip, global_kid), PTO_OK);
  assert_int_equal(pto_chip_run(chip, global_orch, NULL, NULL, &err), PTO_OK);
  for (int i = 0; i < 4; i++)
    assert_int_equal(g_acc[i], 2);
  pto_chip_destroy(chip);
  /* a write of the same value each run is seen too (it was blamed on an
   * undeclared read: the scratch copy's byte kept its old value) */
  chip = checked_chip(1, 4);
  assert_int_equal(pto_kernel_register_aiv(chip, "global_set", global_set, &global_kid), PTO_OK);
  memset(g_acc, 0, sizeof g_acc);
  assert_int_equal(pto_chip_run(chip, global_orch, NULL, NULL, &err), PTO_ECONTRACT);
  assert_non_null(strstr(err.details, "other than through its tensors (ctx->tensors): its byte 0 "
                                      "was written again by the read check's second run"));
  assert_int_equal(g_acc[0], 7);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gang_runs_together_and_is_checked_as_one),
      cmocka_unit_test(test_mix_block_read_outside),
      cmocka_unit_test(test_order_follows_the_seed),
      cmocka_unit_test(test_async_and_bad_values_refused),
      cmocka_unit_test(test_check_seed_digits_only),
      cmocka_unit_test(test_input_negated_in_place),
      cmocka_unit_test(test_commute_breach_names_its_mode),
      cmocka_unit_test(test_write_through_global_pointer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
