/* test_rec_file.c — the files of records (src/common/rec_file.h): one
 * file is one file however it is spelt, and a record written over an
 * existing file replaces it only whole, a failed write leaving it as it
 * was. */
#include <errno.h>
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

#include "common/rec_file.h"
#include "temp_dir.h"

static void put(const char *file, const char *text) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *got(const char *file) {
  static char buf[256];
  FILE *f = fopen(file, "r");
  assert_non_null(f);
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  buf[k] = 0;
  fclose(f);
  return buf;
}

static int entries(void) { /* files in dir: no temporary one left behind */
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  assert_int_equal(fscanf(p, "%d", &n), 1);
  pclose(p);
  return n;
}

static void test_same_file(void **state) {
  (void)state;
  const char *a = in_dir("a"), *b = in_dir("b");
  char dot[300];
  snprintf(dot, sizeof dot, "%s/./a", dir);
  assert_true(rec_file_same(a, a)); /* neither exists: the string */
  assert_false(rec_file_same(a, b));
  put(a, "x\n");
  assert_true(rec_file_same(a, dot)); /* another spelling */
  assert_false(rec_file_same(a, b));
  assert_int_equal(link(a, b), 0); /* a hard link */
  assert_true(rec_file_same(a, b));
  put(in_dir("c"), "x\n");
  assert_false(rec_file_same(a, in_dir("c"))); /* the same bytes, another file */
}

static void test_written_whole_or_not_at_all(void **state) {
  (void)state;
  const char *r = in_dir("rec");
  put(r, "old\n");
  int files = entries();
  rec_file w;
  assert_int_equal(rec_file_open(&w, r), 0);
  fputs("new\n", w.f);
  assert_string_equal(got(r), "old\n"); /* not truncated while it is written */
  assert_int_equal(rec_file_close(&w, r), 0);
  assert_string_equal(got(r), "new\n");
  assert_int_equal(entries(), files);
  /* a write that fails (its descriptor gone under it): the old file stays */
  assert_int_equal(rec_file_open(&w, r), 0);
  fputs("lost\n", w.f);
  close(fileno(w.f));
  assert_int_equal(rec_file_close(&w, r), -1);
  assert_int_equal(errno, EBADF);
  assert_string_equal(got(r), "new\n");
  assert_int_equal(entries(), files);
  /* a new file */
  const char *fresh = in_dir("fresh");
  assert_int_equal(rec_file_open(&w, fresh), 0);
  fputs("one\n", w.f);
  assert_int_equal(rec_file_close(&w, fresh), 0);
  assert_string_equal(got(fresh), "one\n");
}

static void test_not_a_regular_file(void **state) {
  (void)state;
  rec_file w;
  /* a directory: named by its own errno */
  const char *d = in_dir("adir");
  assert_int_equal(mkdir(d, 0700), 0);
  assert_int_equal(rec_file_open(&w, d), -1);
  assert_int_equal(errno, EISDIR);
  /* a device is written in place: /dev/full fails at the write */
  if (access("/dev/full", W_OK) == 0) {
    assert_int_equal(rec_file_open(&w, "/dev/full"), 0);
    fputs("x\n", w.f);
    assert_int_equal(rec_file_close(&w, "/dev/full"), -1);
    assert_int_equal(errno, ENOSPC);
  }
  /* a missing directory */
  assert_int_equal(rec_file_open(&w, in_dir("none/rec")), -1);
  assert_int_equal(errno, ENOENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_file),
      cmocka_unit_test(test_written_whole_or_not_at_all),
      cmocka_unit_test(test_not_a_regular_file),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
