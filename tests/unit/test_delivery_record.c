/* test_delivery_record.c — a node chip task's delivery record
 * (src/comm/delivery.h) read from files that are not what it wrote: a NUL
 * byte inside a line, a missing file, a directory; and a record that
 * cannot be written. Each is refused naming the file and the cause, never
 * a crash; a good record still replays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/delivery.h"
#include "pto/status.h"
#include "temp_dir.h"

static void put(const char *file, const char *text, size_t len) {
  FILE *f = fopen(file, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  fclose(f);
}

static void expect_refused(const char *file, const char *want) {
  char why[512] = "";
  int rc = delivery_begin(NULL, file, why, sizeof why);
  if (rc != PTO_EREPLAY || !strstr(why, want) || !strstr(why, file))
    fail_msg("%s: expected PTO_EREPLAY with '%s', got %d: %s", file, want, rc, why);
}

static void test_good_record_replays(void **state) {
  (void)state;
  const char *r = in_dir("good");
  char why[512] = "";
  size_t order[3] = {2, 0, 1};
  assert_int_equal(delivery_begin(r, NULL, why, sizeof why), 0);
  delivery_order(1, 0, 3, order);
  assert_int_equal(delivery_end(why, sizeof why), 0);
  size_t again[3] = {0, 1, 2};
  assert_int_equal(delivery_begin(NULL, r, why, sizeof why), 0);
  delivery_order(1, 0, 3, again);
  assert_int_equal(delivery_end(why, sizeof why), 0);
  assert_int_equal(again[0], 2);
  assert_int_equal(again[1], 0);
  assert_int_equal(again[2], 1);
}

/* A NUL byte inside a batch line: next_line looked for the line's end
 * with strchr, which stopped at the NUL, and wrote through NULL. */
static void test_nul_byte_refused(void **state) {
  (void)state;
  const char *r = in_dir("nul");
  static const char text[] = "pto-delivery 1\nL 1 0 3 2 0 1\0x\nend\n";
  put(r, text, sizeof text - 1);
  expect_refused(r, "line 2: a NUL byte (a record is text)");
  /* nothing of it is left to replay */
  char why[512] = "";
  size_t order[3] = {0, 1, 2};
  delivery_order(1, 0, 3, order);
  assert_int_equal(order[0], 0);
  assert_int_equal(delivery_end(why, sizeof why), 0);
}

static void test_unreadable_named_with_the_cause(void **state) {
  (void)state;
  expect_refused(in_dir("missing"), "cannot open: No such file or directory");
  const char *d = in_dir("adir");
  assert_int_equal(mkdir(d, 0700), 0);
  expect_refused(d, "cannot read: Is a directory");
  static const char cut[] = "pto-delivery 1\nL 1 0 3 2 0 1\nend";
  put(in_dir("cut"), cut, sizeof cut - 1);
  expect_refused(in_dir("cut"), "truncated");
}

static void test_unwritable_named_with_the_cause(void **state) {
  (void)state;
  const char *d = in_dir("wdir");
  assert_int_equal(mkdir(d, 0700), 0);
  char why[512] = "";
  assert_int_equal(delivery_begin(d, NULL, why, sizeof why), 0);
  assert_int_equal(delivery_end(why, sizeof why), PTO_ESYSTEM);
  assert_non_null(strstr(why, "cannot be written: Is a directory"));
  assert_non_null(strstr(why, d));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_record_replays),
      cmocka_unit_test(test_nul_byte_refused),
      cmocka_unit_test(test_unreadable_named_with_the_cause),
      cmocka_unit_test(test_unwritable_named_with_the_cause),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
