/* test_kernel_why.c — a kernel's reason (pto_kctx_fail) names only its own
 * block's failure. A kernel that gives a reason and then returns 0 leaves
 * it behind no more: the next run's failure of another kernel on the same
 * core thread, whose task, block and core are the same numbers (task ids
 * restart at 0 every run), is reported without it. Plainly and in checking
 * mode (whose units run on threads of their own, contract.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

static int k_warn = -1, k_plain = -1, k_reason = -1;

static int warn(const pto_kctx *c) { /* a reason, then success */
  pto_kctx_fail(c, PTO_EKERNEL, "a reason of run 1");
  return 0;
}
static int plain(const pto_kctx *c) { /* fails, gives no reason */
  (void)c;
  return -1;
}
static int reason(const pto_kctx *c) { return pto_kctx_fail(c, PTO_EKERNEL, "its own reason"); }

static void orch_one(pto_orch *o, void *arg) { pto_submit_v(o, *(int *)arg); }

static void stale_reason(bool check) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 1; /* one core: every block on the same thread */
  cfg.check = check;
  pto_chip *chip;
  pto_error_info e;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &e), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "warn", warn, &k_warn), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "plain_fail", plain, &k_plain), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "reason", reason, &k_reason), 0);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(pto_chip_run(chip, orch_one, &k_warn, NULL, &e), 0);
    int rc = pto_chip_run(chip, orch_one, &k_plain, NULL, &e);
    printf("check %d, run after a kept reason: %s: %s\n", check, pto_status_name(rc), e.details);
    assert_int_equal(rc, PTO_EINVAL); /* -1 is a pto status */
    assert_string_equal(e.kernel, "plain_fail");
    /* and the details say so: PTO_EINVAL's hint is about pto's arguments */
    assert_non_null(strstr(e.details, "returned -1 (read as PTO_EINVAL, a pto status; a failure "
                                      "of the kernel's own is PTO_EKERNEL"));
    if (strstr(e.details, "run 1")) fail_msg("a reason of another run: %s", e.details);
    /* a kernel's own reason still comes with its own failure */
    rc = pto_chip_run(chip, orch_one, &k_reason, NULL, &e);
    assert_int_equal(rc, PTO_EKERNEL);
    assert_non_null(strstr(e.details, ": its own reason"));
  }
  pto_chip_destroy(chip);
}

static void test_no_reason_from_an_earlier_run(void **state) {
  (void)state;
  stale_reason(false);
}

static void test_no_reason_from_an_earlier_run_checked(void **state) {
  (void)state;
  stale_reason(true);
}

/* pto_kctx_fail with a code that is not negative (0 among them) still
 * fails the block, as PTO_EKERNEL with its reason: before, code 0 returned
 * 0, the block succeeded and the reason was dropped. */
static int k_zero = -1, k_positive = -1;
static int zero(const pto_kctx *c) { return pto_kctx_fail(c, 0, "zero code, %d", 42); }
static int positive(const pto_kctx *c) { return pto_kctx_fail(c, 5, "positive code"); }

static void test_fail_with_a_code_not_negative(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  pto_chip *chip;
  pto_error_info e;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &e), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "zero", zero, &k_zero), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "positive", positive, &k_positive), 0);
  int rc = pto_chip_run(chip, orch_one, &k_zero, NULL, &e);
  printf("pto_kctx_fail(ctx, 0, ...): %s: %s\n", pto_status_name(rc), e.details);
  assert_int_equal(rc, PTO_EKERNEL);
  assert_string_equal(e.kernel, "zero");
  assert_non_null(strstr(e.details, ": zero code, 42"));
  rc = pto_chip_run(chip, orch_one, &k_positive, NULL, &e);
  printf("pto_kctx_fail(ctx, 5, ...): %s: %s\n", pto_status_name(rc), e.details);
  assert_int_equal(rc, PTO_EKERNEL);
  assert_non_null(strstr(e.details, ": positive code"));
  /* what it returns, without a context too */
  assert_int_equal(pto_kctx_fail(NULL, 0, "x"), PTO_EKERNEL);
  assert_int_equal(pto_kctx_fail(NULL, 3, "x"), PTO_EKERNEL);
  assert_int_equal(pto_kctx_fail(NULL, PTO_EINVAL, "x"), PTO_EINVAL);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_reason_from_an_earlier_run),
      cmocka_unit_test(test_no_reason_from_an_earlier_run_checked),
      cmocka_unit_test(test_fail_with_a_code_not_negative),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
