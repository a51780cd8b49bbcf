/* test_node_epochs.c — the epochs that tag signal cells (docs/comm.md,
 * "Signals are safe to reuse by construction") over a long node run and
 * when the node starts tasks in another order than they were submitted.
 *
 * White-box (node_internal.h): skip_tasks makes the node's counters jump
 * as if billions of node tasks had started and ended between two tasks of
 * one run, so that a cell written by one task is used again 2^31 or 2^32
 * tasks later:
 *   - a new cell (a zeroed window) of a node that ran 2^31 tasks in its
 *     earlier runs takes a notify (it was dropped: the epoch, then the
 *     node's task id, compared as older than the cell's 0);
 *   - a cell last written 2^31 + 1 tasks ago takes the notifies of the
 *     current task (they were dropped as late signals of an older task:
 *     the wait timed out);
 *   - a task 2^32 tasks after the one that left credits in a cell cannot
 *     read them (it read them as its own: a silent wrong value): the run
 *     has no epoch left for it, and its read fails naming the limit;
 *   - the last epoch of a run is a task's like any other, the one after it
 *     is none (it was 0: a set to 1 failed as an overflow), and the next
 *     run starts again;
 *   - two tasks whose cells are COMMUTE views run in either order, the
 *     later submitted first, and each sees its own notifies (the earlier
 *     submitted one's were dropped as older).
 *
 * The nodes lease device ids of their own (TEST_DEV0, TEST_DEV0 + 1). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "node/node_internal.h" /* skip_tasks */
#include "node_create.h"

#include "scenes/dist_scene.h"

#define TEST_DEV0 92
#define WAIT_MS   1000 /* the domain's wait deadline: a lost notify fails in 1 s */
#define UNSET     (-1)

enum { K_SIG = 0 };
/* what a task does with rank 1's cell (element 0 of "sig") */
enum { M_READ = 0, M_SET = 1, M_ADD = 2 };

static int kid = -1;

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- the kernel (runs in the chip processes) ----
 * tensors: gate (INPUT, unread), my "sig", my row of out (2 int32);
 * scalars: domain, mode, value. Rank 1 writes the task's epoch into
 * out[1] (white-box: its comm state), then
 *   M_READ: rank 1 reads its cell;
 *   M_SET:  rank 0 sets rank 1's cell to value, rank 1 waits for == value;
 *   M_ADD:  rank 0 adds 1 to rank 1's cell, rank 1 waits for >= 1;
 * and rank 1 writes the value it reads into out[0]. */
static int sig_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int mode = (int)DIST_SCALAR(ctx, 1);
  int32_t v = (int32_t)DIST_SCALAR(ctx, 2);
  const pto_tensor *sig = &ctx->tensors[1];
  int32_t *out = pto_tensor_at_linear(&ctx->tensors[2], 0);
  int rank = pto_comm_rank(pto_kctx_comm(ctx), dom), rc = 0;
  if (rank == 1) out[1] = (int32_t)pto_kctx_comm(ctx)->epoch;
  if (rank == 0)
    return mode == M_READ
               ? 0
               : pto_notify(ctx, dom, 1, sig, mode == M_SET ? PTO_SIGNAL_SET : PTO_SIGNAL_ADD,
                            mode == M_SET ? v : 1);
  if (mode != M_READ)
    rc = pto_signal_wait(ctx, dom, sig, mode == M_SET ? PTO_CMP_EQ : PTO_CMP_GE,
                         mode == M_SET ? v : 1, -1);
  int32_t seen = UNSET;
  if (!rc) rc = pto_signal_read(ctx, dom, sig, &seen);
  if (!rc) out[0] = seen;
  return rc;
}

static int epochs_init(pto_chip *chip, int rank, void *arg) {
  (void)rank, (void)arg;
  int rc = pto_kernel_register_aiv(chip, "sig", sig_kernel, &kid);
  return rc ? rc : kid == K_SIG ? 0 : 1;
}

/* ---- the parent side ---- */

static pto_node *node; /* the test's, destroyed by its teardown (also after a failure) */

static int destroy_node(void **s) {
  (void)s;
  if (node) pto_node_destroy(node);
  node = NULL;
  return 0;
}

static pto_node *make_node(void) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  dist_config(&o, 2, epochs_init, &cfg);
  cfg.device_ids = devs;
  cfg.nworkers = 1;
  cfg.chip.clusters = 1;
  cfg.chip.watchdog_ms = 5000;
  cfg.wait_timeout_ms = WAIT_MS;
  cfg.quiet = true;
  return node = node_create_ok(&cfg);
}

/* White-box: as if k node tasks had started and ended since the last one.
 * Every task of the run has finished (pto_node_wait_all), so nothing looks
 * up an id across the jump. */
static void skip_tasks(pto_node_orch *no, int64_t k) {
  pto_node *n = pto_node_orch_node(no);
  assert_int_equal(n->oldest_live, n->next_id);
  n->next_id += k;
  n->base_id += k;
  n->oldest_live += k;
  n->started += (uint64_t)k;
}

typedef struct io {
  /* per lane g: gate[g] [2, 1] int32, gate[0] written by the slow host
   * task; out[g] [2, 2] int32, rank 1's row the value it read and the
   * epoch of the last task of lane g */
  pto_tensor gate[2], out[2];
  uint32_t last_epoch; /* last_epochs_orch: the epoch of the last set that came */
  pto_domain dom;
  bool commute; /* the cells as COMMUTE views (else INOUT) */
  int rc[8];    /* what the orchestration's calls returned, in order */
  int nrc;
} io;

static void note(io *x, int rc) {
  if (x->nrc < 8) x->rc[x->nrc++] = rc;
}

static int32_t seen(const io *x, int g) { return ((const int32_t *)x->out[g].buf)[2]; }
static uint32_t epoch_of(const io *x, int g) {
  return (uint32_t)((const int32_t *)x->out[g].buf)[3];
}

/* A group task on chips 0 and 1 doing `mode` on rank 1's cell, in lane g:
 * gate g is each rank's INPUT (gate 0 is the slow host task's output), out
 * g its OUTPUT_EXISTING (tasks of two lanes depend on each other only
 * through the cells). */
static void sig_task(pto_node_orch *no, io *x, int mode, int32_t value, int g) {
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t one = 1;
    pto_tensor gate = dist_row(&x->gate[g], r), out = dist_row(&x->out[g], r), sig;
    note(x, pto_node_window_tensor(no, x->dom, r, "sig", PTO_I64, 1, &one, &sig));
    pto_args_input(&a, &gate);
    if (x->commute)
      pto_args_commute(&a, &sig);
    else
      pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &out);
  }
  dist_scalars(&a, K_SIG, 3, 1);
  pto_args_scalar(&a, (uint64_t)x->dom);
  pto_args_scalar(&a, (uint64_t)mode);
  pto_args_scalar(&a, (uint64_t)(uint32_t)value);
  note(x, pto_node_submit_group(no, dist_pair_chips, 2, dist_chip_orch, &a, NULL));
}

static void make_domain(pto_node_orch *no, io *x) {
  const pto_window_buffer bufs[] = {{"sig", 8}};
  note(x, pto_node_domain_create(no, dist_pair_chips, 2, bufs, 1, &x->dom));
}

static io *new_io(pto_node *n) {
  static io x;
  memset(&x, 0, sizeof x);
  int64_t sh[2] = {2, 1}, sh2[2] = {2, 2};
  for (int g = 0; g < 2; g++) {
    assert_int_equal(pto_node_host_tensor(n, PTO_I32, 2, sh, &x.gate[g]), 0);
    assert_int_equal(pto_node_host_tensor(n, PTO_I32, 2, sh2, &x.out[g]), 0);
  }
  return &x;
}

static void reset_out(io *x) {
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < 4; i++)
      ((int32_t *)x->out[g].buf)[i] = UNSET;
  x->nrc = 0;
}

static int run(pto_node *n, pto_node_orch_fn fn, io *x, pto_error_info *err) {
  reset_out(x);
  int rc = pto_node_run(n, fn, x, err);
  for (int i = 0; i < x->nrc; i++)
    if (x->rc[i] && x->rc[i] != rc)
      fprintf(stderr, "orchestration call %d returned %s\n", i, pto_status_name(x->rc[i]));
  return rc;
}

/* ---- a new cell after 2^31 tasks of the node ---- */

static void fresh_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  sig_task(no, x, M_SET, 5, 1);
}

static void test_fresh_cell_after_2_31_node_tasks(void **s) {
  (void)s;
  pto_node *n = make_node();
  io *x = new_io(n);
  /* white-box: as if the node's earlier runs had started 2^31 tasks */
  n->next_id += INT64_C(1) << 31;
  pto_error_info err;
  int rc = run(n, fresh_orch, x, &err);
  if (rc) /* before: the set, of an epoch 2^31 after the zeroed cell's 0, was dropped */
    fail_msg("run: %s: %s", pto_status_name(rc), err.details);
  assert_int_equal(seen(x, 1), 5);
  assert_int_equal(epoch_of(x, 1), 1); /* the run's first task */
}

/* ---- a cell idle for 2^31 + 1 tasks ---- */

static void idle_half_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  sig_task(no, x, M_SET, 7, 1);
  note(x, pto_node_wait_all(no));
  skip_tasks(no, INT64_C(1) << 31);
  sig_task(no, x, M_ADD, 0, 1); /* 2^31 + 1 tasks after the set */
}

static void test_cell_idle_2_31_tasks(void **s) {
  (void)s;
  pto_node *n = make_node();
  io *x = new_io(n);
  pto_error_info err;
  int rc = run(n, idle_half_orch, x, &err);
  if (rc) /* before: the add was dropped as a late signal, the wait timed out */
    fail_msg("run: %s: %s", pto_status_name(rc), err.details);
  assert_int_equal(seen(x, 1), 1); /* the add on a cell whose 7 is another task's */
  assert_int_equal(epoch_of(x, 1), (UINT32_C(1) << 31) + 2);
}

/* ---- credits left 2^32 tasks ago ---- */

static void full_cycle_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  sig_task(no, x, M_SET, 7, 1);
  note(x, pto_node_wait_all(no));
  skip_tasks(no, (INT64_C(1) << 32) - 1);
  sig_task(no, x, M_READ, 0, 0); /* 2^32 tasks after the set */
}

static void test_cell_left_2_32_tasks_ago(void **s) {
  (void)s;
  pto_node *n = make_node();
  io *x = new_io(n);
  pto_error_info err;
  int rc = run(n, full_cycle_orch, x, &err);
  /* before: the read saw the 7 of the task 2^32 tasks earlier, as its own */
  if (!rc) fail_msg("run passed: rank 1 read %d in its cell", seen(x, 0));
  /* the run has no epoch left for the reader: its read fails, named */
  assert_int_equal(rc, PTO_EINVAL);
  if (!strstr(err.details, "has no epoch")) fail_msg("details: %s", err.details);
  assert_int_equal(seen(x, 1), 7);     /* the set's task */
  assert_int_equal(seen(x, 0), UNSET); /* the reader's */
  assert_int_equal(epoch_of(x, 0), 0); /* none */
}

/* ---- the last epochs of a run ---- */

static void last_epochs_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  /* tasks 1, 2^31 - 1 and 2^32 - 3 of the run set the cell: each less
   * than 2^31 tasks after the one before */
  for (int i = 0; i < 3; i++) {
    if (i) skip_tasks(no, (INT64_C(1) << 31) - 3);
    sig_task(no, x, M_SET, 7 + i, 1);
    note(x, pto_node_wait_all(no));
    if (seen(x, 1) != 7 + i) return;
  }
  sig_task(no, x, M_READ, 0, 1); /* task 2^32 - 2 */
  note(x, pto_node_wait_all(no));
  if (seen(x, 1) != 0) return;
  sig_task(no, x, M_SET, 9, 1); /* task 2^32 - 1: the last epoch */
  note(x, pto_node_wait_all(no));
  if (seen(x, 1) != 9) return;
  x->last_epoch = epoch_of(x, 1);
  sig_task(no, x, M_SET, 1, 1); /* task 2^32: none left */
}

static void again_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  sig_task(no, x, M_SET, 1, 1);
}

static void test_last_epochs_of_a_run(void **s) {
  (void)s;
  pto_node *n = make_node();
  io *x = new_io(n);
  pto_error_info err;
  int rc = run(n, last_epochs_orch, x, &err);
  if (rc != PTO_EINVAL || !strstr(err.details, "has no epoch"))
    fail_msg("rank 1 read %d; run: %s: %s", seen(x, 1), pto_status_name(rc), err.details);
  assert_int_equal(x->last_epoch, UINT32_MAX);
  assert_int_equal(seen(x, 1), 9);     /* the set of the task without an epoch never came */
  assert_int_equal(epoch_of(x, 1), 0); /* that task's */
  /* the next run starts again at the first epoch */
  rc = run(n, again_orch, x, &err);
  if (rc) fail_msg("the next run: %s: %s", pto_status_name(rc), err.details);
  assert_int_equal(seen(x, 1), 1);
  assert_int_equal(epoch_of(x, 1), 1);
}

/* ---- tasks started in another order than submitted ---- */

static int slow_gate(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms(300);
  int32_t *g = (int32_t *)a->tensors[0].buf;
  g[0] = g[1] = 1;
  return 0;
}

static void reorder_orch(pto_node_orch *no, void *p) {
  io *x = p;
  make_domain(no, x);
  x->commute = true;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &x->gate[0]);
  note(x, pto_node_submit_host(no, -1, slow_gate, NULL, &a, NULL));
  sig_task(no, x, M_ADD, 0, 0); /* waits for the gate: starts second */
  sig_task(no, x, M_ADD, 0, 1); /* submitted second, starts first */
}

static void test_commute_tasks_out_of_order(void **s) {
  (void)s;
  pto_node *n = make_node();
  io *x = new_io(n);
  pto_error_info err;
  int rc = run(n, reorder_orch, x, &err);
  if (rc) /* before: the task that started second had the lower epoch: its add was dropped */
    fail_msg("run: %s: %s", pto_status_name(rc), err.details);
  assert_int_equal(seen(x, 0), 1);
  assert_int_equal(seen(x, 1), 1);
  /* the earlier submitted task started second: its epoch is the later */
  assert_true(epoch_of(x, 0) > epoch_of(x, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_fresh_cell_after_2_31_node_tasks, destroy_node),
      cmocka_unit_test_teardown(test_cell_idle_2_31_tasks, destroy_node),
      cmocka_unit_test_teardown(test_cell_left_2_32_tasks_ago, destroy_node),
      cmocka_unit_test_teardown(test_last_epochs_of_a_run, destroy_node),
      cmocka_unit_test_teardown(test_commute_tasks_out_of_order, destroy_node),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
