/* test_options.c — the options table (src/common/options.c, issue 11): an
 * invalid PTO_* environment value is an error naming the variable, not
 * silently ignored; a valid one sets the default; every row is complete. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/options.h"
#include "pto/node.h"
#include "pto/pto.h"

/* pto_chip_create_ex with `var` set to `value`: its status and details. */
static int create_with(const char *var, const char *value, pto_error_info *err) {
  setenv(var, value, 1);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_chip *chip = NULL;
  int rc = pto_chip_create_ex(&cfg, &chip, err);
  unsetenv(var);
  if (chip) pto_chip_destroy(chip);
  return rc;
}

static void test_invalid_values_named(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"PTO_CLUSTERS", "abc"},      {"PTO_CLUSTERS", "-3"},         {"PTO_CLUSTERS", "0"},
      {"PTO_CLUSTERS", "4x"},       {"PTO_CLUSTERS", ""},           {"PTO_SCHEDULERS", "two"},
      {"PTO_WATCHDOG_MS", "-1"},    {"PTO_WATCHDOG_MS", "1e3"},     {"PTO_TASK_SLOTS", "1"},
      {"PTO_PARK_MAX_MS", "0"},     {"PTO_SPIN_NS", "99999999999"}, {"PTO_HEARTBEAT_MS", " 5"},
      {"PTO_NODE_WAIT_MS", "soon"}, {"PTO_ASYNC_SLOTS", "65536"},   {"PTO_ASYNC_SLOTS", "-1"},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pto_error_info err;
    int rc = create_with(cases[i][0], cases[i][1], &err);
    char want[64];
    snprintf(want, sizeof want, "%s='%s'", cases[i][0], cases[i][1]);
    if (rc != PTO_EINVAL || !strstr(err.details, want)) {
      fprintf(stderr, "%s: pto_chip_create_ex gave %s '%s', expected PTO_EINVAL naming %s\n", want,
              pto_status_name(rc), err.details, want);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

static void test_valid_values_used(void **state) {
  (void)state;
  setenv("PTO_CLUSTERS", "4", 1);
  setenv("PTO_WATCHDOG_MS", "1234", 1);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_node_config ncfg;
  setenv("PTO_NODE_WAIT_MS", "777", 1);
  pto_node_config_init(&ncfg);
  unsetenv("PTO_CLUSTERS");
  unsetenv("PTO_WATCHDOG_MS");
  unsetenv("PTO_NODE_WAIT_MS");
  assert_int_equal(cfg.clusters, 4);
  assert_int_equal(cfg.watchdog_ms, 1234);
  assert_int_equal(ncfg.wait_timeout_ms, 777);
  pto_chip_config_init(&cfg);
  assert_int_equal(cfg.clusters, pto_option_desc_of(PTO_OPT_CLUSTERS)->def);
  char err[256];
  assert_int_equal(pto_options_check(err, sizeof err), 0);
}

/* A chip field and its variable take the same range: PTO_ASYNC_SLOTS
 * took 1..2^20 where async_slots takes 0..65535 (a value the variable
 * allowed then failed pto_chip_create, and 0 was refused); the timeouts'
 * variables stop at a day, and so does watchdog_ms, whose nanoseconds
 * wrapped past it. */
static void test_fields_and_variables_agree(void **state) {
  (void)state;
  static const struct {
    pto_opt opt;
    long long max;
  } rows[] = {{PTO_OPT_ASYNC_SLOTS, 65535},
              {PTO_OPT_WATCHDOG_MS, 24ll * 3600 * 1000},
              {PTO_OPT_TASK_SLOTS, 1 << 24}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const pto_option_desc *d = pto_option_desc_of(rows[i].opt);
    if (d->max != rows[i].max)
      fail_msg("%s: the variable's most is %lld, the field's %lld", d->env, d->max, rows[i].max);
  }
  assert_int_equal(pto_option_desc_of(PTO_OPT_ASYNC_SLOTS)->min, 0);
  pto_error_info err;
  assert_int_equal(create_with("PTO_ASYNC_SLOTS", "0", &err), PTO_OK);
  assert_int_equal(create_with("PTO_ASYNC_SLOTS", "65535", &err), PTO_OK);
  assert_int_equal(create_with("PTO_WATCHDOG_MS", "86400000", &err), PTO_OK);
  setenv("PTO_ASYNC_SLOTS", "0", 1);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  unsetenv("PTO_ASYNC_SLOTS");
  assert_int_equal(cfg.async_slots, 0);
}

/* Every row has a name, a PTO_ variable of its own, a doc line and a
 * default inside its range. */
static void test_table_complete(void **state) {
  (void)state;
  for (int i = 0; i < PTO_OPT_COUNT; i++) {
    const pto_option_desc *d = pto_option_desc_of((pto_opt)i);
    assert_non_null(d);
    assert_non_null(d->name);
    assert_non_null(d->env);
    assert_non_null(d->doc);
    assert_true(strncmp(d->env, "PTO_", 4) == 0);
    assert_true(d->min <= d->def && d->def <= d->max);
    for (int j = 0; j < i; j++)
      assert_string_not_equal(d->env, pto_option_desc_of((pto_opt)j)->env);
  }
  assert_null(pto_option_desc_of(PTO_OPT_COUNT));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_invalid_values_named),
      cmocka_unit_test(test_valid_values_used),
      cmocka_unit_test(test_table_complete),
      cmocka_unit_test(test_fields_and_variables_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
