/* test_idle_first.c — a single-core block goes to an idle core of any
 * scheduler before a busy core's pending slot (sched.c, dispatch_shape).
 *
 * The default chip shape: 8 clusters x (1 AIC + 2 AIV), 3 schedulers, so
 * 16 AIV cores, at most 6 of them a scheduler's. 16 AIV blocks that can
 * only all end together: each block, once started, waits until all 16
 * are running (a barrier; it gives up after BARRIER_MS, the test's safety
 * net, or when the run is cancelled, and then leaves the count). They fit, one per AIV core, only
 * if no scheduler puts a block behind one of its own busy cores while another scheduler has an idle
 * one: such a block would wait for a barrier that waits for it. Each case checks that all 16 were
 * running at once, on 16 distinct cores.
 *  - submitted: the orchestrator submits the 16 blocks, each ready at once
 *    (before the fix, the first scheduler's pass queued blocks 7-12 behind
 *    its six busy cores: 6 of 16 ever ran at once);
 *  - released: one producer's completion makes all 16 ready at once, on a
 *    core, in a scheduler's pass (the second scheduler, kicked for what the
 *    first left, queued the last four behind its busy cores);
 *  - both again with dedicated scheduler threads (cfg.sched_threads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pto/pto.h"

#define NBLOCKS    16
#define BARRIER_MS 3000

static int g_barrier_k, g_producer_k;
static _Atomic int g_running, g_max_seen, g_core[NBLOCKS], g_go;
static uint64_t g_buf[NBLOCKS + 1];

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap(void) {
  struct timespec ts = {0, 200000};
  nanosleep(&ts, NULL);
}

/* scalar 0: which block (0..NBLOCKS-1) */
static int k_barrier(const pto_kctx *c) {
  int which = (int)c->scalars[0];
  atomic_store(&g_core[which], c->core_id);
  int n = atomic_fetch_add(&g_running, 1) + 1;
  uint64_t until = now_ms() + BARRIER_MS;
  while (n < NBLOCKS && now_ms() < until && !pto_kctx_cancelled(c)) {
    nap();
    n = atomic_load(&g_running);
  }
  int m = atomic_load(&g_max_seen);
  while (n > m && !atomic_compare_exchange_weak(&g_max_seen, &m, n)) {
  }
  /* after the barrier: once all have started, none waits for this one */
  if (n < NBLOCKS) atomic_fetch_sub(&g_running, 1);
  return 0;
}

/* holds until the orchestrator has submitted every consumer */
static int k_producer(const pto_kctx *c) {
  while (!atomic_load(&g_go) && !pto_kctx_cancelled(c))
    nap();
  return 0;
}

static pto_tensor word(int i) {
  pto_tensor t;
  int64_t one = 1;
  pto_tensor_init(&t, &g_buf[i], sizeof g_buf[i], PTO_I64, 1, &one);
  return t;
}

static void submit_block(pto_orch *o, int which, bool after_producer) {
  pto_args a;
  pto_args_init(&a);
  pto_tensor in = word(NBLOCKS), out = word(which);
  if (after_producer) pto_args_input(&a, &in);
  pto_args_output_existing(&a, &out);
  pto_args_scalar(&a, (uint64_t)which);
  assert_int_equal(pto_submit(o, g_barrier_k, &a, NULL, NULL), 0);
}

static void orch_submitted(pto_orch *o, void *arg) {
  (void)arg;
  for (int i = 0; i < NBLOCKS; i++)
    submit_block(o, i, false);
}

static void orch_released(pto_orch *o, void *arg) {
  (void)arg;
  pto_args a;
  pto_args_init(&a);
  pto_tensor t = word(NBLOCKS);
  pto_args_output_existing(&a, &t);
  assert_int_equal(pto_submit(o, g_producer_k, &a, NULL, NULL), 0);
  for (int i = 0; i < NBLOCKS; i++)
    submit_block(o, i, true);
  atomic_store(&g_go, 1);
}

static void run_case(pto_orch_fn fn, bool sched_threads, const char *name) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 8;
  cfg.aic_per_cluster = 1;
  cfg.aiv_per_cluster = 2;
  cfg.schedulers = 3;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "barrier", k_barrier, &g_barrier_k), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "producer", k_producer, &g_producer_k), 0);
  atomic_store(&g_running, 0);
  atomic_store(&g_max_seen, 0);
  atomic_store(&g_go, 0);
  pto_error_info err;
  if (pto_chip_run(chip, fn, NULL, NULL, &err) != 0) {
    print_error("%s: run failed: %s\n", name, err.details);
    fail();
  }
  pto_chip_destroy(chip);
  bool used[64] = {false};
  int distinct = 0;
  char where[200] = "";
  for (int i = 0, len = 0; i < NBLOCKS; i++) {
    int c = atomic_load(&g_core[i]);
    if (c >= 0 && c < 64 && !used[c]) {
      used[c] = true;
      distinct++;
    }
    if (len >= 0 && len < (int)sizeof where)
      len += snprintf(where + len, sizeof where - (size_t)len, " %d", c);
  }
  if (atomic_load(&g_max_seen) != NBLOCKS || distinct != NBLOCKS) {
    print_error("%s%s: %d of %d blocks ran at once, on %d distinct cores (expected %d); blocks "
                "0..%d ran on cores%s\n",
                name, sched_threads ? " (sched_threads)" : "", atomic_load(&g_max_seen), NBLOCKS,
                distinct, NBLOCKS, NBLOCKS - 1, where);
    fail();
  }
}

static void test_submitted(void **state) {
  (void)state;
  run_case(orch_submitted, false, "submitted");
}
static void test_released(void **state) {
  (void)state;
  run_case(orch_released, false, "released");
}
static void test_submitted_sched_threads(void **state) {
  (void)state;
  run_case(orch_submitted, true, "submitted");
}
static void test_released_sched_threads(void **state) {
  (void)state;
  run_case(orch_released, true, "released");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submitted),
      cmocka_unit_test(test_released),
      cmocka_unit_test(test_submitted_sched_threads),
      cmocka_unit_test(test_released_sched_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
