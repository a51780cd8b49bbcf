/* test_wide_chip.c — a scheduler that owns many clusters: more placements
 * in one dispatch pass than any small fixed-size buffer would hold (the
 * scheduler's scratch arrays are sized by its core count). A wide normal
 * AIV task, a wide MIX task and a gang (sync_start) MIX task as wide as
 * the chip, on one scheduler: every block must run exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

#define CLUSTERS 70

static _Atomic int hits[3][2 * CLUSTERS * 3];

static int mark(const pto_kctx *c) {
  int which = (int)c->scalars[0];
  int slot = c->block_idx * 3 + (c->core_type == PTO_CORE_AIC ? 0 : 1 + c->sub_block_id);
  atomic_fetch_add(&hits[which][slot], 1);
  return 0;
}

static int k_aiv, k_mix;

static void orch(pto_orch *o, void *arg) {
  (void)arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, 0);
  pto_submit_opts wide = {.block_num = 2 * CLUSTERS};
  pto_submit(o, k_aiv, &a, &wide, NULL);
  pto_args_init(&a);
  pto_args_scalar(&a, 1);
  pto_submit_opts mix = {.block_num = CLUSTERS};
  pto_submit(o, k_mix, &a, &mix, NULL);
  pto_args_init(&a);
  pto_args_scalar(&a, 2);
  pto_submit_opts gang = {.block_num = CLUSTERS, .sync_start = true};
  pto_submit(o, k_mix, &a, &gang, NULL);
}

static void test_one_scheduler_many_clusters(void **state) {
  (void)state;
  memset(hits, 0, sizeof hits);
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = CLUSTERS;
  cfg.schedulers = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "mark", mark, &k_aiv), PTO_OK);
  pto_kernel_desc d = {.name = "mark_mix", .aic = mark, .aiv = mark, .aiv_count = 2};
  assert_int_equal(pto_kernel_register(chip, &d, &k_mix), PTO_OK);
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(chip, orch, NULL, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  pto_chip_destroy(chip);
  for (int b = 0; b < 2 * CLUSTERS; b++)
    assert_int_equal(hits[0][b * 3 + 1], 1);
  for (int which = 1; which <= 2; which++)
    for (int b = 0; b < CLUSTERS; b++)
      for (int part = 0; part < 3; part++)
        assert_int_equal(hits[which][b * 3 + part], 1);
  assert_int_equal(st.sync_tasks, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_scheduler_many_clusters)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
