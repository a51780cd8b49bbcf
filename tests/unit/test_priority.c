/* test_priority.c — ready blocks of a higher priority are dispatched first
 * (pto_submit_opts.priority, PTO_PRIORITY; src/chip/priority.h).
 *
 * On one AIV core, a gate task runs until the orchestration has submitted
 * 60 tasks of random priorities (some of several blocks), each with an
 * explicit dependency on the gate: the gate's completion makes all of them
 * ready in one pass, which then dispatches. The blocks must start in
 * priority order, highest first, a task's blocks one after another. This
 * depends on no timing (the gate waits for a flag; its 10 s deadline is a
 * safety net, and a gate that times out fails the test). Once with the
 * scheduling role, once with a scheduler thread; and pto_submit_v's
 * PTO_PRIORITY, in range and out. */
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

#define NTASKS    60
#define MAXBLOCKS 3

static _Atomic int g_submitted_all, g_gate_timed_out, g_next;
static int g_seq[NTASKS * MAXBLOCKS]; /* which task each started block belongs to */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int k_gate(const pto_kctx *c) {
  uint64_t deadline = now_ns() + 10000000000ull;
  while (!atomic_load(&g_submitted_all)) {
    if (now_ns() > deadline || pto_kctx_cancelled(c)) {
      atomic_store(&g_gate_timed_out, 1);
      return 0;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* scalar 0: the task's index in submission order */
static int k_seq(const pto_kctx *c) {
  int i = atomic_fetch_add(&g_next, 1);
  if (i < NTASKS * MAXBLOCKS) g_seq[i] = (int)c->scalars[0];
  return 0;
}

typedef struct fixture {
  int k_gate, k_seq;
  int prio[NTASKS], blocks[NTASKS];
} fixture;

static void orch(pto_orch *o, void *arg) {
  fixture *f = arg;
  pto_task_id gate;
  pto_submit(o, f->k_gate, NULL, NULL, &gate);
  for (int i = 0; i < NTASKS; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_scalar(&a, (uint64_t)i);
    pto_submit_opts opts = {
        .block_num = f->blocks[i], .deps = &gate, .ndeps = 1, .priority = f->prio[i]};
    pto_submit(o, f->k_seq, &a, &opts, NULL);
  }
  atomic_store(&g_submitted_all, 1);
}

static void run_case(int sched_threads) {
  fixture f;
  memset(&f, 0, sizeof f);
  uint32_t seed = 7u + (uint32_t)sched_threads;
  int total = 0;
  for (int i = 0; i < NTASKS; i++) {
    seed = seed * 1103515245u + 12345u;
    f.prio[i] = (int)(seed >> 16) % (PTO_PRIORITY_MAX + 1);
    f.blocks[i] = 1 + (int)(seed >> 20) % MAXBLOCKS;
    total += f.blocks[i];
  }
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  cfg.aic_per_cluster = 1;
  cfg.aiv_per_cluster = 1; /* one AIV core: the start order is the dispatch order */
  cfg.schedulers = 1;
  cfg.sched_threads = sched_threads;
  cfg.watchdog_ms = 20000;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gate", k_gate, &f.k_gate), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "seq", k_seq, &f.k_seq), PTO_OK);
  atomic_store(&g_submitted_all, 0);
  atomic_store(&g_gate_timed_out, 0);
  atomic_store(&g_next, 0);
  pto_error_info err;
  int rc = pto_chip_run(chip, orch, &f, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(atomic_load(&g_gate_timed_out), 0);
  assert_int_equal(atomic_load(&g_next), total);
  /* priorities never rise from one started block to the next, a task's
   * blocks start one after another, and every block ran once (ties start
   * in the order they became ready: the gate's release order, docs/chip.md) */
  int bad = -1, ran[NTASKS] = {0};
  for (int k = 0; k < total && bad < 0; k++) {
    int i = g_seq[k];
    if (i < 0 || i >= NTASKS || ++ran[i] > f.blocks[i] ||
        (k > 0 && f.prio[i] > f.prio[g_seq[k - 1]]) || (k > 0 && ran[i] > 1 && g_seq[k - 1] != i))
      bad = k;
  }
  if (bad >= 0) {
    fprintf(stderr,
            "sched_threads %d: block %d started task %d (priority %d) out of order; "
            "started (task:priority):",
            sched_threads, bad, g_seq[bad], f.prio[g_seq[bad]]);
    for (int i = 0; i < total && i < 24; i++)
      fprintf(stderr, " %d:%d", g_seq[i], f.prio[g_seq[i]]);
    fprintf(stderr, " ...\n");
  }
  assert_int_equal(bad, -1);
  pto_chip_destroy(chip);
}

static void test_priority_order_role(void **state) {
  (void)state;
  run_case(0);
}

static void test_priority_order_sched_thread(void **state) {
  (void)state;
  run_case(1);
}

/* pto_submit_v's PTO_PRIORITY reaches the task, and a bad one is refused. */
static int g_kv;
static int k_v(const pto_kctx *c) {
  (void)c;
  return 0;
}
static void orch_v(pto_orch *o, void *arg) {
  int *rc = arg;
  rc[0] = pto_submit_v(o, g_kv, PTO_SCALAR(1), PTO_PRIORITY(PTO_PRIORITY_MAX));
  rc[1] = pto_submit_v(o, g_kv, PTO_SCALAR(1), PTO_PRIORITY(-1));
}

static void test_submit_v_priority(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 1;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "v", k_v, &g_kv), PTO_OK);
  int rc[2] = {-1, -1};
  pto_error_info err;
  assert_int_equal(pto_chip_run(chip, orch_v, rc, NULL, &err), PTO_EINVAL);
  assert_int_equal(rc[0], PTO_OK);
  assert_int_equal(rc[1], PTO_EINVAL);
  assert_non_null(strstr(err.details, "PTO_PRIORITY(-1): between 0 and 3"));
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_priority_order_role),
      cmocka_unit_test(test_priority_order_sched_thread),
      cmocka_unit_test(test_submit_v_priority),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
