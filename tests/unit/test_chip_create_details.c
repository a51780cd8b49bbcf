/* test_chip_create_details.c — pto_chip_create_ex says which field of the
 * configuration is wrong (issue 8, item 16): every invalid field gives
 * PTO_EINVAL with details naming it and its value, also through
 * pto_node_create. And every call that takes a pto_error_info says why it
 * failed in pto_last_error() too, so a caller that passes NULL (or calls
 * pto_chip_create, which takes none) still learns it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/graph.h"
#include "pto/node.h"
#include "pto/pto.h"

typedef struct bad_cfg {
  const char *field; /* must appear in the details */
  const char *value; /* so must this */
  void (*apply)(pto_chip_config *c);
  const char *limit; /* and this, when set: the bound it passed */
} bad_cfg;

#define BAD(field_, value_, stmt)                                                                  \
  static void set_##field_##_##value_(pto_chip_config *c) { stmt; }
BAD(clusters, 0, c->clusters = 0)
BAD(clusters, 5000, c->clusters = 5000)
BAD(schedulers, 9, c->schedulers = 9)
BAD(aic_per_cluster, 2, c->aic_per_cluster = 2)
BAD(aiv_per_cluster, 3, c->aiv_per_cluster = 3)
BAD(task_slots, 1, c->task_slots = 1)
BAD(dep_entries, 0, c->dep_entries = 0)
/* a task's fanin (1 + its dependencies, at most dep_entries) is an int32 */
BAD(dep_entries, 2147483647, c->dep_entries = 2147483647)
BAD(tensormap_entries, 0, c->tensormap_entries = 0)
BAD(heap_bytes, 8, c->heap_bytes = 8)
BAD(watchdog_ms, 0, c->watchdog_ms = 0)
BAD(alloc_timeout_ms, 0, c->alloc_timeout_ms = 0)
BAD(shutdown_ms, 0, c->shutdown_ms = 0)
BAD(async_slots, 70000, c->async_slots = 70000)
/* its nanoseconds wrapped a uint64: a healthy run failed with PTO_ESCHED_TIMEOUT */
BAD(watchdog_ms, 18446744073710, c->watchdog_ms = 18446744073710)
BAD(watchdog_ms, 86400001, c->watchdog_ms = 86400001)
/* the ready queues pack a slot index in RQ_IDX_BITS bits (ready_queue.h) */
BAD(task_slots, 16777217, c->task_slots = 16777217)
BAD(task_slots, 4294967295, c->task_slots = 4294967295u)
/* the TensorMap counts its entries in an int32: the run could not be set up */
BAD(tensormap_entries, 2147483648, c->tensormap_entries = 2147483648u)
static void set_no_cores(pto_chip_config *c) { c->aic_per_cluster = c->aiv_per_cluster = 0; }

static void test_each_field_named(void **state) {
  (void)state;
  const bad_cfg cases[] = {
      {"clusters", "0", set_clusters_0, NULL},
      {"clusters", "5000", set_clusters_5000, NULL},
      {"schedulers", "9", set_schedulers_9, NULL},
      {"aic_per_cluster", "2", set_aic_per_cluster_2, NULL},
      {"aiv_per_cluster", "3", set_aiv_per_cluster_3, NULL},
      {"task_slots", "1", set_task_slots_1, NULL},
      {"dep_entries", "0", set_dep_entries_0, NULL},
      {"dep_entries", "2147483647", set_dep_entries_2147483647, NULL},
      {"tensormap_entries", "0", set_tensormap_entries_0, NULL},
      {"heap_bytes", "8", set_heap_bytes_8, NULL},
      {"watchdog_ms", "0", set_watchdog_ms_0, NULL},
      {"alloc_timeout_ms", "0", set_alloc_timeout_ms_0, NULL},
      {"shutdown_ms", "0", set_shutdown_ms_0, NULL},
      {"async_slots", "70000", set_async_slots_70000, "65535"},
      {"watchdog_ms", "18446744073710", set_watchdog_ms_18446744073710, "86400000"},
      {"watchdog_ms", "86400001", set_watchdog_ms_86400001, "86400000"},
      {"task_slots", "16777217", set_task_slots_16777217, "16777216"},
      {"task_slots", "4294967295", set_task_slots_4294967295, "16777216"},
      {"tensormap_entries", "2147483648", set_tensormap_entries_2147483648, "2147483647"},
      {"aiv_per_cluster", "both 0", set_no_cores, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 8;
    cfg.schedulers = 0;
    cases[i].apply(&cfg);
    pto_chip *chip = (pto_chip *)&cfg; /* must come back NULL */
    pto_error_info err;
    int rc = pto_chip_create_ex(&cfg, &chip, &err);
    if (rc != PTO_EINVAL || err.code != PTO_EINVAL || chip != NULL)
      fail_msg("%s = %s: status %s, err.code %s, chip %p; expected PTO_EINVAL and NULL",
               cases[i].field, cases[i].value, pto_status_name(rc), pto_status_name(err.code),
               (void *)chip);
    if (!strstr(err.details, cases[i].field) || !strstr(err.details, cases[i].value))
      fail_msg("%s = %s: details '%s' do not name the field and its value", cases[i].field,
               cases[i].value, err.details);
    if (cases[i].limit && !strstr(err.details, cases[i].limit))
      fail_msg("%s = %s: details '%s' do not name the limit %s", cases[i].field, cases[i].value,
               err.details, cases[i].limit);
  }
}

/* The largest values are accepted (no run: nothing is allocated). */
static void test_limits_accepted(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.watchdog_ms = 24ll * 3600 * 1000; /* a day, as PTO_WATCHDOG_MS allows */
  cfg.task_slots = 1u << 24;
  cfg.tensormap_entries = 2147483647u;
  cfg.async_slots = 65535;
  pto_chip *chip = NULL;
  pto_error_info err;
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc) fail_msg("%s: %s", pto_status_name(rc), err.details);
  pto_chip_destroy(chip);
}

static int nothing_orch_ran;
static void nothing_orch(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
  nothing_orch_ran = 1;
}

/* A run that cannot be set up names the part that failed, not every ring:
 * a heap ring too large to address fails as the heap ring, with its size. */
static void test_setup_failure_names_its_part(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.heap_bytes = SIZE_MAX;
  pto_chip *chip = NULL;
  pto_error_info err;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_OK);
  nothing_orch_ran = 0;
  int rc = pto_chip_run(chip, nothing_orch, NULL, NULL, &err);
  printf("a heap of SIZE_MAX bytes: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_ENOMEM);
  assert_int_equal(nothing_orch_ran, 0);
  if (!strstr(err.details, "heap ring") ||
      !strstr(err.details, "heap_bytes = 18446744073709551615") ||
      strstr(err.details, "task_slots"))
    fail_msg("details '%s' do not name the heap ring and its heap_bytes alone", err.details);
  pto_chip_destroy(chip);
}

static void test_null_arguments(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_chip *chip;
  pto_error_info err;
  assert_int_equal(pto_chip_create_ex(NULL, &chip, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "cfg"));
  assert_int_equal(pto_chip_create_ex(&cfg, NULL, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "out"));
  assert_int_equal(pto_chip_create_ex(&cfg, NULL, NULL), PTO_EINVAL); /* err is optional */
}

static void test_valid_config_clears_err(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_chip *chip = NULL;
  pto_error_info err;
  memset(&err, 0x5a, sizeof err);
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_OK);
  assert_non_null(chip);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.details, "");
  pto_chip_destroy(chip);
}

/* A node's chip configuration is checked by pto_node_create, which names
 * the field (the chip processes could only fail without details). */
static void test_node_names_chip_field(void **state) {
  (void)state;
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  cfg.nchips = 1;
  cfg.chip.aiv_per_cluster = 7;
  pto_node *node = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &node, &err);
  if (node) pto_node_destroy(node);
  if (rc != PTO_EINVAL || !strstr(err.details, "aiv_per_cluster = 7"))
    fail_msg("status %s, details '%s'; expected PTO_EINVAL naming aiv_per_cluster = 7",
             pto_status_name(rc), err.details);
}

/* The node orchestrator's TensorMap has the chip's limit: refused at
 * pto_node_create, not when the node's first run sets it up. */
static void test_node_tensormap_entries_limit(void **state) {
  (void)state;
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  cfg.nchips = 1;
  cfg.tensormap_entries = 2147483648u;
  pto_node *node = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &node, &err);
  if (node) pto_node_destroy(node);
  if (rc != PTO_EINVAL || !strstr(err.details, "tensormap_entries is 2147483648") ||
      !strstr(err.details, "2147483647"))
    fail_msg("status %s, details '%s'; expected PTO_EINVAL naming tensormap_entries, its value "
             "and 2147483647",
             pto_status_name(rc), err.details);
}

static void orch_nothing(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}

/* pto_last_error() holds `want` after a call that returned `rc`, which
 * must be `code`. */
static void expect_last(const char *call, int rc, int code, const char *want) {
  if (rc != code || !strstr(pto_last_error(), want))
    fail_msg("%s: status %s, pto_last_error() '%s'; expected %s and '%s'", call,
             pto_status_name(rc), pto_last_error(), pto_status_name(code), want);
}

static void test_null_err_says_why_in_last_error(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 0;
  pto_chip *chip = NULL;
  expect_last("pto_chip_create", pto_chip_create(&cfg, &chip), PTO_EINVAL, "clusters = 0");
  cfg.clusters = 1;
  cfg.aiv_per_cluster = 3;
  expect_last("pto_chip_create_ex", pto_chip_create_ex(&cfg, &chip, NULL), PTO_EINVAL,
              "aiv_per_cluster = 3");
  setenv("PTO_SPREAD_CORES", "9", 1);
  pto_chip_config_init(&cfg);
  expect_last("pto_chip_create with a bad environment", pto_chip_create(&cfg, &chip), PTO_EINVAL,
              "PTO_SPREAD_CORES='9'");
  unsetenv("PTO_SPREAD_CORES");
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  expect_last("pto_chip_run", pto_chip_run(chip, NULL, NULL, NULL, NULL), PTO_EINVAL,
              "orchestration function is NULL");
  pto_graph *g = NULL;
  expect_last("pto_graph_capture", pto_graph_capture(chip, orch_nothing, NULL, NULL, NULL, NULL),
              PTO_EGRAPH, "graph (the result) is NULL");
  expect_last("pto_graph_launch", pto_graph_launch(chip, g, NULL, NULL, NULL), PTO_EGRAPH,
              "graph is NULL");
  /* the same details as err gets, when it is passed */
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, NULL, NULL, NULL, &err), PTO_EINVAL);
  assert_string_equal(pto_last_error(), err.details);
  pto_chip_destroy(chip);
  pto_node_config ncfg;
  pto_node_config_init(&ncfg);
  ncfg.nchips = 1;
  ncfg.chip.aiv_per_cluster = 7;
  pto_node *node = NULL;
  expect_last("pto_node_create", pto_node_create(&ncfg, &node, NULL), PTO_EINVAL,
              "aiv_per_cluster = 7");
  expect_last("pto_node_run", pto_node_run(NULL, NULL, NULL, NULL), PTO_EINVAL,
              "pto_node_run: node is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_field_named),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_valid_config_clears_err),
      cmocka_unit_test(test_limits_accepted),
      cmocka_unit_test(test_setup_failure_names_its_part),
      cmocka_unit_test(test_node_names_chip_field),
      cmocka_unit_test(test_node_tensormap_entries_limit),
      cmocka_unit_test(test_null_err_says_why_in_last_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
