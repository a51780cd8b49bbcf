/* test_status.c — every status code has a distinct PTO_ name and a hint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pto/status.h"

static const int all_codes[] = {
    PTO_OK,
    PTO_EINVAL,
    PTO_ENOMEM,
    PTO_ESCOPE_DEADLOCK,
    PTO_EHEAP_DEADLOCK,
    PTO_ETASK_RING_DEADLOCK,
    PTO_EDEP_OVERFLOW,
    PTO_ESYNC_WIDTH,
    PTO_ETENSOR_WAIT_TIMEOUT,
    PTO_EFATAL,
    PTO_ESCOPE_OVERFLOW,
    PTO_ETENSORMAP_OVERFLOW,
    PTO_ESCHED_TIMEOUT,
    PTO_EASYNC_INVALID,
    PTO_EASYNC_OVERFLOW,
    PTO_EKERNEL,
    PTO_ESHUTDOWN,
    PTO_EBUSY,
    PTO_EINTERNAL,
    PTO_EGRAPH,
    PTO_EREPLAY,
    PTO_EDEVICE_BUSY,
    PTO_ECHIP_DIED,
    PTO_ESTARTUP_TIMEOUT,
    PTO_ECONTROL_TIMEOUT,
    PTO_EWAIT_TIMEOUT,
    PTO_EBOUNDS,
    PTO_EPEER,
    PTO_EPOISONED,
    PTO_ESYSTEM,
    PTO_EMPI,
    PTO_EALIGN,
    PTO_ECANCELLED,
};
#define NCODES (sizeof all_codes / sizeof all_codes[0])

static void test_names_distinct_and_prefixed(void **state) {
  (void)state;
  for (size_t i = 0; i < NCODES; i++) {
    const char *n = pto_status_name(all_codes[i]);
    assert_non_null(n);
    assert_int_equal(strncmp(n, "PTO_", 4), 0);
    assert_string_not_equal(n, "PTO_E?");
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(n, pto_status_name(all_codes[j]));
  }
}

static void test_names_match_enum(void **state) {
  (void)state;
  assert_string_equal(pto_status_name(PTO_OK), "PTO_OK");
  assert_string_equal(pto_status_name(PTO_EINVAL), "PTO_EINVAL");
  assert_string_equal(pto_status_name(PTO_EHEAP_DEADLOCK), "PTO_EHEAP_DEADLOCK");
  assert_string_equal(pto_status_name(PTO_ETENSOR_WAIT_TIMEOUT), "PTO_ETENSOR_WAIT_TIMEOUT");
  assert_string_equal(pto_status_name(PTO_EALIGN), "PTO_EALIGN");
}

static void test_hints_nonempty_one_line(void **state) {
  (void)state;
  for (size_t i = 0; i < NCODES; i++) {
    const char *h = pto_strerror(all_codes[i]);
    assert_non_null(h);
    assert_true(strlen(h) > 0);
    assert_null(strchr(h, '\n'));
    assert_string_not_equal(h, "unknown status");
  }
  assert_non_null(strstr(pto_strerror(PTO_EHEAP_DEADLOCK), "heap_bytes"));
}

static void test_unknown(void **state) {
  (void)state;
  const int unknown[] = {1, -28, -29, -42, -1000, 12345, INT32_MIN};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    assert_string_equal(pto_status_name(unknown[i]), "PTO_E?");
    assert_string_equal(pto_strerror(unknown[i]), "unknown status");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_distinct_and_prefixed),
      cmocka_unit_test(test_names_match_enum),
      cmocka_unit_test(test_hints_nonempty_one_line),
      cmocka_unit_test(test_unknown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
