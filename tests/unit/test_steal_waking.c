/* test_steal_waking.c — a block pending on a core that is still waking is
 * taken by an idle core of another scheduler (src/chip/steal.h; sched.c,
 * steal_pending), trial after trial.
 *
 * 2 clusters x 1 AIV, 2 schedulers: core 0 is scheduler 0's, core 1
 * scheduler 1's. Each trial:
 *  1. SETUP, 2 blocks: the one on core 1 (X) runs until the orchestrator
 *     releases it, the one on core 0 ends at once; then core 0 idles long
 *     enough (1 ms) to park on its futex;
 *  2. PAIR, 2 blocks, is submitted: core 1 is busy, so scheduler 0's pass
 *     puts both on core 0, one running and one pending, and wakes it;
 *  3. X is released at once: core 1 falls idle while core 0 is still
 *     waking and has claimed neither block.
 * Each PAIR block, once started, waits until both are running (a barrier;
 * BARRIER_MS is only the safety net of a failing trial). They meet only if
 * the pending one moves to core 1: a block left pending behind a running
 * one while a core of its type idles waits for a barrier that waits for
 * it. Each trial checks that both PAIR blocks were running at once, on
 * the two cores: a structural fact, whatever the timing. Before the take
 * of a block from a core that has claimed neither, the first trial in
 * which core 1's pass ran before core 0 woke failed.
 *
 * The same with a MIX block: on 2 clusters x (1 AIC + 1 AIV), MIX (AIC +
 * AIV, one block) is submitted instead of PAIR, then SINGLE (one AIV
 * block): SINGLE must not go behind MIX's AIV part on cluster 0's AIV
 * core, from where the take of the first unclaimed block would move that
 * part to cluster 1 (sched.c, has_room). Each trial checks that MIX's two
 * parts ran on one cluster.
 *
 * Both modes: the scheduling role, and dedicated scheduler threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "pto/pto.h"

#define TRIALS     300
#define BARRIER_MS 3000          /* a failing trial's safety net, never reached when it passes */
#define PARK_US    1000          /* core 0 idles this long before PAIR: it parks */
#define MAX_REDONE (50 * TRIALS) /* setups that may land wholly on core 0 */

static int g_setup_k, g_pair_k, g_mix_k, g_single_k;
static _Atomic int g_setup_gen, g_x, g_setup_other, g_release, g_pair_n;
static _Atomic int g_pair_core[2], g_pair_met[2], g_mix_cluster[2];

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* SETUP (scalar 0: its generation): the first of its blocks on cluster 1
 * is X (busy until released: it spins, so that cluster 0's wake-up
 * competes for a CPU); another block counts itself; a block of an earlier
 * SETUP that ran late does nothing */
static int k_setup(const pto_kctx *c) {
  if ((int)c->scalars[0] != atomic_load(&g_setup_gen)) return 0;
  int none = 0;
  if (c->cluster_id != 1 || !atomic_compare_exchange_strong(&g_x, &none, 1)) {
    atomic_fetch_add(&g_setup_other, 1);
    return 0;
  }
  while (!atomic_load(&g_release) && !pto_kctx_cancelled(c)) {
  }
  return 0;
}

/* PAIR: block b records its core, then waits until both blocks run */
static int k_pair(const pto_kctx *c) {
  int b = c->block_idx;
  atomic_store(&g_pair_core[b], c->core_id);
  int n = atomic_fetch_add(&g_pair_n, 1) + 1;
  uint64_t until = now_ms() + BARRIER_MS;
  while (n < 2 && now_ms() < until && !pto_kctx_cancelled(c)) {
    nap_us(100);
    n = atomic_load(&g_pair_n);
  }
  atomic_store(&g_pair_met[b], n >= 2);
  return 0;
}

/* MIX: each part records its cluster (0: AIC, 1: AIV) */
static int k_mix_aic(const pto_kctx *c) {
  atomic_store(&g_mix_cluster[0], c->cluster_id);
  return 0;
}
static int k_mix_aiv(const pto_kctx *c) {
  atomic_store(&g_mix_cluster[1], c->cluster_id);
  return 0;
}
static int k_single(const pto_kctx *c) {
  (void)c;
  return 0;
}

/* blocks of kernel k, with one scalar argument */
static pto_task_id submit_n(pto_orch *o, int k, int blocks, uint64_t scalar) {
  pto_submit_opts opts = {.block_num = blocks};
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, scalar);
  pto_task_id id = -1;
  assert_int_equal(pto_submit(o, k, &a, &opts, &id), 0);
  return id;
}

typedef bool (*trial_fn)(pto_orch *, int);

/* One run's trials: what follows each SETUP, and the tally */
typedef struct trials {
  trial_fn trial;
  int done, failed_at, setups_redone;
} trials;

/* SETUP until X runs on cluster 1 (both blocks may land on cluster 0 when
 * scheduler 1's pass is late: then again); *s: its task. False once the
 * run failed, or after MAX_REDONE setups in vain (a safety net). */
static bool setup(pto_orch *o, trials *t, pto_task_id *s) {
  while (t->setups_redone <= MAX_REDONE) {
    int gen = atomic_fetch_add(&g_setup_gen, 1) + 1;
    atomic_store(&g_x, 0);
    atomic_store(&g_setup_other, 0);
    atomic_store(&g_release, 0);
    *s = submit_n(o, g_setup_k, 2, (uint64_t)gen);
    while (!atomic_load(&g_x) && atomic_load(&g_setup_other) < 2 && pto_orch_status(o) == 0)
      nap_us(50);
    if (pto_orch_status(o) != 0) return false;
    if (atomic_load(&g_x)) return true;
    assert_int_equal(pto_orch_wait_task(o, *s, -1), 0);
    t->setups_redone++;
  }
  return false;
}

/* PAIR while X ends; true when both ran at once on the two cores */
static bool trial_pair(pto_orch *o, int i) {
  atomic_store(&g_pair_n, 0);
  for (int b = 0; b < 2; b++) {
    atomic_store(&g_pair_core[b], -1);
    atomic_store(&g_pair_met[b], 0);
  }
  pto_task_id pair = submit_n(o, g_pair_k, 2, 0);
  atomic_store(&g_release, 1);
  assert_int_equal(pto_orch_wait_task(o, pair, -1), 0);
  int c0 = atomic_load(&g_pair_core[0]), c1 = atomic_load(&g_pair_core[1]);
  if (atomic_load(&g_pair_met[0]) && atomic_load(&g_pair_met[1]) && c0 != c1) return true;
  print_error("trial %d: PAIR's blocks ran on cores %d and %d, %s\n", i, c0, c1,
              atomic_load(&g_pair_met[0]) && atomic_load(&g_pair_met[1])
                  ? "at once"
                  : "one after the other: one waited pending behind the other while the "
                    "other core idled");
  return false;
}

/* MIX, then SINGLE, while X ends; true when MIX's parts ran on one
 * cluster */
static bool trial_mix(pto_orch *o, int i) {
  for (int p = 0; p < 2; p++)
    atomic_store(&g_mix_cluster[p], -1);
  pto_task_id mix = submit_n(o, g_mix_k, 1, 0), single = submit_n(o, g_single_k, 1, 0);
  atomic_store(&g_release, 1);
  assert_int_equal(pto_orch_wait_task(o, mix, -1), 0);
  assert_int_equal(pto_orch_wait_task(o, single, -1), 0);
  int aic = atomic_load(&g_mix_cluster[0]), aiv = atomic_load(&g_mix_cluster[1]);
  if (aic == aiv) return true;
  print_error("trial %d: MIX's AIC part ran on cluster %d, its AIV part on cluster %d\n", i, aic,
              aiv);
  return false;
}

static void orch(pto_orch *o, void *arg) {
  trials *t = arg;
  for (int i = 0; i < TRIALS && t->failed_at < 0; i++) {
    pto_task_id s;
    if (!setup(o, t, &s)) return;
    nap_us(PARK_US);
    if (!t->trial(o, i)) t->failed_at = i; /* it releases X */
    assert_int_equal(pto_orch_wait_task(o, s, -1), 0);
    t->done++;
  }
}

/* 2 clusters x (aic AIC + 1 AIV), 2 schedulers */
static void run_case(trial_fn trial, int aic, bool sched_threads) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.aic_per_cluster = aic;
  cfg.aiv_per_cluster = 1;
  cfg.schedulers = 2;
  cfg.sched_threads = sched_threads;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "setup", k_setup, &g_setup_k), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "pair", k_pair, &g_pair_k), 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "single", k_single, &g_single_k), 0);
  if (aic) {
    pto_kernel_desc mix = {.name = "mix", .aic = k_mix_aic, .aiv = k_mix_aiv, .aiv_count = 1};
    assert_int_equal(pto_kernel_register(chip, &mix, &g_mix_k), 0);
  }
  trials t = {trial, 0, -1, 0};
  pto_run_stats st;
  pto_error_info err;
  if (pto_chip_run(chip, orch, &t, &st, &err) != 0) {
    print_error("run failed: %s\n", err.details);
    fail();
  }
  pto_chip_destroy(chip);
  printf("%s, %s: %d trials, %d setups redone, steals %llu%s\n",
         trial == trial_pair ? "PAIR" : "MIX", sched_threads ? "sched_threads" : "role", t.done,
         t.setups_redone, (unsigned long long)st.steals, t.failed_at >= 0 ? ": FAILED" : "");
  if (t.failed_at >= 0) fail_msg("trial %d of %d failed", t.failed_at, TRIALS);
  if (t.done < TRIALS)
    fail_msg("%d of %d trials done: X never ran on cluster 1 in %d setups", t.done, TRIALS,
             t.setups_redone);
}

static void test_role(void **state) {
  (void)state;
  run_case(trial_pair, 0, false);
}

static void test_sched_threads(void **state) {
  (void)state;
  run_case(trial_pair, 0, true);
}

static void test_mix_role(void **state) {
  (void)state;
  run_case(trial_mix, 1, false);
}

static void test_mix_sched_threads(void **state) {
  (void)state;
  run_case(trial_mix, 1, true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_role),
      cmocka_unit_test(test_sched_threads),
      cmocka_unit_test(test_mix_role),
      cmocka_unit_test(test_mix_sched_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
