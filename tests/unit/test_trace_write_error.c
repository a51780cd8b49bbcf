/* test_trace_write_error.c — a run whose trace cannot be written fails, and
 * its error names the file and the OS's reason (issue 8, item 16): a
 * missing directory (open fails) and a full disk (/dev/full: the writes
 * fail). A run that failed on its own keeps its own error. Merging traces
 * (what a node run does at its end) names the input or output file too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/trace.h"
#include "pto/node.h"
#include "pto/pto.h"
#include "trace_read.h"

enum { N = 64 };
static float buf[N];
static int k_inc;

static int inc(const pto_kctx *k) {
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&k->tensors[0])[i] += 1.0f;
  return 0;
}

static void orchestrate(pto_orch *o, void *arg) {
  int64_t n = N;
  pto_tensor t;
  pto_tensor_init(&t, buf, sizeof buf, PTO_F32, 1, &n);
  for (int i = 0; i < 3; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    pto_submit(o, k_inc, &a, NULL, NULL);
  }
  if (arg) pto_orch_fatal(o, "the orchestration gave up");
}

/* A chip of `clusters` clusters with the kernel inc. */
static pto_chip *inc_chip(int clusters) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "inc", inc, &k_inc), PTO_OK);
  return chip;
}

/* One traced run into `path`; returns its status, err filled. */
static int traced_run(const char *path, bool fatal, pto_error_info *err) {
  pto_chip *chip = inc_chip(2);
  assert_int_equal(pto_chip_set_trace(chip, path), PTO_OK);
  memset(buf, 0, sizeof buf);
  int rc = pto_chip_run(chip, orchestrate, fatal ? (void *)1 : NULL, NULL, err);
  pto_chip_destroy(chip);
  return rc;
}

static void expect_details(const pto_error_info *err, const char *a, const char *b) {
  if (!strstr(err->details, a) || !strstr(err->details, b))
    fail_msg("details '%s' should name '%s' and '%s'", err->details, a, b);
}

static void test_missing_directory(void **state) {
  (void)state;
  const char *path = "/nonexistent-pto-dir/run.json";
  pto_error_info err;
  int rc = traced_run(path, false, &err);
  /* the run computed everything; only its trace is missing */
  assert_true(buf[0] == 3.0f && buf[N - 1] == 3.0f);
  if (rc != PTO_ESYSTEM || err.code != PTO_ESYSTEM)
    fail_msg("status %s, err.code %s (details '%s'); expected PTO_ESYSTEM for both",
             pto_status_name(rc), pto_status_name(err.code), err.details);
  expect_details(&err, path, "No such file or directory");
}

static void test_disk_full(void **state) {
  (void)state;
  pto_error_info err;
  int rc = traced_run("/dev/full", false, &err);
  if (rc != PTO_ESYSTEM || err.code != PTO_ESYSTEM)
    fail_msg("status %s, err.code %s (details '%s'); expected PTO_ESYSTEM for both",
             pto_status_name(rc), pto_status_name(err.code), err.details);
  expect_details(&err, "/dev/full", "No space left on device");
}

static void test_run_error_stays_first(void **state) {
  (void)state;
  pto_error_info err;
  int rc = traced_run("/nonexistent-pto-dir/run.json", true, &err);
  if (rc != PTO_EFATAL || err.code != PTO_EFATAL)
    fail_msg("status %s, err.code %s (details '%s'); expected the run's own PTO_EFATAL",
             pto_status_name(rc), pto_status_name(err.code), err.details);
}

/* An empty path is refused when it is set, saying why, and the setting
 * stays as it was; before, it was taken, and every run did all its work
 * and then failed with "trace file : cannot open for writing: No such
 * file or directory". The same for a node's trace_path. */
static void test_empty_path_refused(void **state) {
  (void)state;
  pto_chip *chip = inc_chip(1);
  int rc = pto_chip_set_trace(chip, "");
  const char *why = pto_last_error();
  printf("pto_chip_set_trace(chip, \"\"): %s ('%s')\n", pto_status_name(rc), why);
  if (rc != PTO_EINVAL || !strstr(why, "empty"))
    fail_msg("pto_chip_set_trace(chip, \"\") returned %s ('%s'); expected PTO_EINVAL saying the "
             "path is empty",
             pto_status_name(rc), why);
  pto_error_info err;
  memset(buf, 0, sizeof buf);
  rc = pto_chip_run(chip, orchestrate, NULL, NULL, &err);
  if (rc != PTO_OK)
    fail_msg("the run after the refused path: %s: %s", pto_status_name(rc), err.details);
  pto_chip_destroy(chip);

  pto_node_config ncfg;
  pto_node_config_init(&ncfg);
  ncfg.nchips = 1;
  ncfg.trace_path = "";
  pto_node *node = NULL;
  rc = pto_node_create(&ncfg, &node, &err);
  if (node) pto_node_destroy(node);
  printf("pto_node_create with trace_path \"\": %s ('%s')\n", pto_status_name(rc), err.details);
  if (rc != PTO_EINVAL || !strstr(err.details, "trace_path is empty"))
    fail_msg("pto_node_create with trace_path \"\" returned %s ('%s'); expected PTO_EINVAL saying "
             "trace_path is empty",
             pto_status_name(rc), err.details);
}

static void test_merge_names_the_file(void **state) {
  (void)state;
  char in[128], why[512];
  snprintf(in, sizeof in, "/tmp/pto_test_trace_write_error_%d.json", (int)getpid());
  pto_trace *t = trace_create(0, "p");
  trace_track(t, "core 0");
  trace_slice(t, 0, "k", "block", 10, 20, 0, 0);
  assert_int_equal(trace_write(t, in), 0);
  trace_destroy(t);
  const char *ins[] = {in};
  int rc = trace_merge_ex(ins, 1, "/dev/full", why, sizeof why);
  assert_int_equal(rc, PTO_ESYSTEM);
  if (!strstr(why, "/dev/full") || !strstr(why, "No space left on device"))
    fail_msg("merge into /dev/full: '%s'", why);
  const char *missing[] = {in, "/nonexistent-pto-dir/rank1.json"};
  rc = trace_merge_ex(missing, 2, "/dev/null", why, sizeof why);
  assert_int_equal(rc, PTO_ESYSTEM);
  if (!strstr(why, "/nonexistent-pto-dir/rank1.json") || !strstr(why, "No such file"))
    fail_msg("merge of a missing input: '%s'", why);
  const char *twice[] = {in, in};
  rc = trace_merge_ex(twice, 2, "/dev/null", why, sizeof why);
  assert_int_equal(rc, PTO_EINVAL);
  if (!strstr(why, "same rank")) fail_msg("merge of one rank twice: '%s'", why);
  unlink(in);
}

/* The node run's concatenation of its ranks' files names what was wrong. */
static void test_concat_names_the_file(void **state) {
  (void)state;
  char a[128], b[128], half[128], why[512];
  snprintf(a, sizeof a, "/tmp/pto_test_trace_concat_a_%d.json", (int)getpid());
  snprintf(b, sizeof b, "/tmp/pto_test_trace_concat_b_%d.json", (int)getpid());
  snprintf(half, sizeof half, "/tmp/pto_test_trace_concat_h_%d.json", (int)getpid());
  for (int i = 0; i < 2; i++) {
    pto_trace *t = trace_create(i, "p");
    trace_track(t, "core 0");
    trace_set_origin(t, 5 + (uint64_t)i); /* b's origin differs */
    trace_slice(t, 0, "k", "block", 10, 20, 0, 0);
    assert_int_equal(trace_write(t, i ? b : a), 0);
    trace_destroy(t);
  }
  const char *ins[] = {a};
  int rc = trace_concat(ins, 1, "/dev/full", why, sizeof why);
  if (rc != PTO_ESYSTEM || !strstr(why, "/dev/full") || !strstr(why, "No space left on device"))
    fail_msg("concat into /dev/full: %s, '%s'", pto_status_name(rc), why);
  const char *missing[] = {a, "/nonexistent-pto-dir/rank1.json"};
  rc = trace_concat(missing, 2, "/dev/null", why, sizeof why);
  if (rc != PTO_ESYSTEM || !strstr(why, "/nonexistent-pto-dir/rank1.json") ||
      !strstr(why, "No such file"))
    fail_msg("concat of a missing input: %s, '%s'", pto_status_name(rc), why);
  const char *two[] = {a, b};
  rc = trace_concat(two, 2, "/dev/null", why, sizeof why);
  if (rc != PTO_EINVAL || !strstr(why, b) || !strstr(why, "origin"))
    fail_msg("concat of two runs' files: %s, '%s'", pto_status_name(rc), why);
  FILE *f = fopen(half, "w"); /* a chip killed while writing */
  assert_non_null(f);
  fputs("{\"traceEvents\":[\n{\"name\":\"k\"", f);
  fclose(f);
  assert_false(trace_file_complete(half));
  assert_true(trace_file_complete(a));
  const char *cut[] = {a, half};
  rc = trace_concat(cut, 2, "/dev/null", why, sizeof why);
  if (rc != PTO_EINVAL || !strstr(why, half))
    fail_msg("concat of half a file: %s, '%s'", pto_status_name(rc), why);
  unlink(a);
  unlink(b);
  unlink(half);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_directory),     cmocka_unit_test(test_disk_full),
      cmocka_unit_test(test_run_error_stays_first), cmocka_unit_test(test_merge_names_the_file),
      cmocka_unit_test(test_concat_names_the_file), cmocka_unit_test(test_empty_path_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
