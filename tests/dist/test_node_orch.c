/* test_node_orch.c — the node runtime's orchestration semantics, tested
 * directly rather than through the communication scenes: dependency
 * inference between host sub-worker and chip tasks (read-after-write,
 * write-after-read, write-after-write, with slow producers so that a
 * missing edge shows up as wrong data), poisoning (a failed chip or host
 * task is the run's root error; its dependents are skipped and read back
 * as PTO_EPOISONED; independent tasks still run), group tasks whose ranks
 * wait on each other, independent single-chip tasks, and a node that runs
 * again after a failed run (state reset, leases kept, nothing left over),
 * calls from a thread other than the orchestration's, refused
 * (pto_node_skip_read_check among them), and a run cancelled by
 * pto_node_cancel (also while chip kernels poll pto_kctx_cancelled).
 *
 * The nodes lease device ids of their own (TEST_DEV0, TEST_DEV0 + 1) so
 * that this file never queues behind the other dist tests' leases. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "node/node_internal.h" /* the run-start window test waits for it */
#include "node_create.h"

#include "scenes/dist_scene.h"

#define N         64 /* elements of every test tensor */
#define TEST_DEV0 40
#define SENTINEL  (-7.0f)
#define FAIL_CODE (-1234) /* what the failing kernel returns (not a pto status) */

/* Kernel ids: registration order, the same on every chip (chip_init checks). */
enum { K_ADD = 0, K_FAIL = 1, K_PING = 2, K_POLL = 3 };

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- kernels (run in the chip processes) ---- */

/* out = in + scalar 0, after sleeping scalar 1 ms: a slow reader reads late. */
static int add_kernel(const pto_kctx *ctx) {
  sleep_ms((int64_t)DIST_SCALAR(ctx, 1));
  const float *in = pto_tensor_f32(&ctx->tensors[0]);
  float *out = pto_tensor_f32(&ctx->tensors[1]);
  float add = (float)(int64_t)DIST_SCALAR(ctx, 0);
  for (int i = 0; i < N; i++)
    out[i] = in[i] + add;
  return 0;
}

/* Sleeps scalar 0 ms, then fails without writing its output. */
static int fail_kernel(const pto_kctx *ctx) {
  sleep_ms((int64_t)DIST_SCALAR(ctx, 0));
  return FAIL_CODE;
}

/* Group kernel over a 2-rank domain: rank 1 waits for rank 0's signal
 * before answering it, and rank 0 waits for the answer, so neither ends
 * unless both run at once. Each writes 100 * rank + the value it saw. */
static int ping_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  const pto_tensor *sig = &ctx->tensors[0];
  int rank = pto_comm_rank(pto_kctx_comm(ctx), dom), rc = 0;
  if (rank < 0) return rank;
  if (rank == 0) {
    sleep_ms(20); /* rank 1 is already waiting */
    rc = pto_notify(ctx, dom, 1, sig, PTO_SIGNAL_ADD, 1);
    if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  } else {
    rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
    if (!rc) rc = pto_notify(ctx, dom, 0, sig, PTO_SIGNAL_ADD, 1);
  }
  int32_t seen = 0;
  if (!rc) rc = pto_signal_read(ctx, dom, sig, &seen);
  if (rc) return rc;
  float *out = pto_tensor_f32(&ctx->tensors[1]);
  for (int i = 0; i < N; i++)
    out[i] = (float)(100 * rank + seen);
  return 0;
}

/* What a polling block writes at tensors[0][block_idx]. */
#define POLL_CANCELLED 1.0f /* it saw pto_kctx_cancelled */
#define POLL_BOUND     2.0f /* it reached its deadline uncancelled */

/* Computes (sleeps 1 ms at a time) until pto_kctx_cancelled, or until the
 * absolute time scalar 0 (pto_now_ns: the chips share the host's clock),
 * then writes which at tensors[0][block_idx] and returns 0, as a kernel
 * that ends early when its run is cancelled does. */
static int poll_kernel(const pto_kctx *ctx) {
  uint64_t deadline = DIST_SCALAR(ctx, 0);
  float *out = pto_tensor_f32(&ctx->tensors[0]);
  while (!pto_kctx_cancelled(ctx)) {
    if (pto_now_ns() >= deadline) {
      out[ctx->block_idx] = POLL_BOUND;
      return 0;
    }
    sleep_ms(1);
  }
  out[ctx->block_idx] = POLL_CANCELLED;
  return 0;
}

static int orch_init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  int add = -1, fail = -1, ping = -1, poll = -1;
  if (pto_kernel_register_aiv(chip, "add", add_kernel, &add) ||
      pto_kernel_register_aiv(chip, "fail", fail_kernel, &fail) ||
      pto_kernel_register_aiv(chip, "ping", ping_kernel, &ping) ||
      pto_kernel_register_aiv(chip, "poll", poll_kernel, &poll))
    return PTO_EFATAL;
  return add == K_ADD && fail == K_FAIL && ping == K_PING && poll == K_POLL ? 0 : PTO_EFATAL;
}

/* ---- host sub-worker callbacks (run in the worker processes) ---- */

/* tensor 0 = scalar 0 + i, after sleeping scalar 1 ms. */
static int host_fill(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms((int64_t)a->scalars[1]);
  float *out = pto_tensor_f32(&a->tensors[0]);
  for (int i = 0; i < N; i++)
    out[i] = (float)((int64_t)a->scalars[0] + i);
  return 0;
}

/* tensor 1 = tensor 0 + scalar 0, after sleeping scalar 1 ms. */
static int host_add(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms((int64_t)a->scalars[1]);
  const float *in = pto_tensor_f32(&a->tensors[0]);
  float *out = pto_tensor_f32(&a->tensors[1]);
  for (int i = 0; i < N; i++)
    out[i] = in[i] + (float)(int64_t)a->scalars[0];
  return 0;
}

/* Sleeps scalar 1 ms, then returns scalar 0 (a pto status), writing nothing. */
static int host_fail(const pto_args *a, void *arg) {
  (void)arg;
  sleep_ms((int64_t)a->scalars[1]);
  return (int)(int64_t)a->scalars[0];
}

/* ---- helpers (parent side) ---- */

/* tensormap_entries: 0 for the default; task_timeout_ms: the node fails
 * (PTO_ECONTROL_TIMEOUT) when a node task outlives it */
static pto_node *make_node_cfg(uint32_t tensormap_entries, int64_t task_timeout_ms) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  dist_config(&o, 2, orch_init, &cfg);
  cfg.device_ids = devs;
  cfg.nworkers = 2;
  cfg.chip.clusters = 1;
  cfg.chip.task_slots = 64;
  cfg.chip.watchdog_ms = 5000;
  cfg.host_bytes = 1u << 20;
  cfg.window_space = 16u << 20;
  cfg.startup_timeout_ms = 20000;
  cfg.control_timeout_ms = 5000;
  cfg.task_timeout_ms = task_timeout_ms;
  cfg.wait_timeout_ms = 3000;
  cfg.quiet = true;
  if (tensormap_entries) cfg.tensormap_entries = tensormap_entries;
  return node_create_ok(&cfg);
}

/* a lost dependency edge fails fast (5 s) instead of hanging */
static pto_node *make_node_tm(uint32_t tensormap_entries) {
  return make_node_cfg(tensormap_entries, 5000);
}

static pto_node *make_node(void) { return make_node_tm(0); }

static pto_tensor vec(pto_node *n, float fill) {
  int64_t sh = N;
  pto_tensor t;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &sh, &t), 0);
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&t)[i] = fill;
  return t;
}

/* Chip task on `chip`: out = in + add (kernel sleeps sleep ms first). */
static int sub_add(pto_node_orch *no, int chip, const pto_tensor *in, const pto_tensor *out,
                   int add, int sleep, pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output_existing(&a, out);
  dist_scalars(&a, K_ADD, 2, 1);
  pto_args_scalar(&a, (uint64_t)(int64_t)add);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit(no, chip, dist_chip_orch, &a, id);
}

/* Chip task on `chip` that fails after sleep ms, declaring `out` as output. */
static int sub_fail(pto_node_orch *no, int chip, const pto_tensor *out, int sleep,
                    pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, out);
  dist_scalars(&a, K_FAIL, 1, 1);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit(no, chip, dist_chip_orch, &a, id);
}

static int sub_host_fill(pto_node_orch *no, int worker, const pto_tensor *out, int base, int sleep,
                         pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, out);
  pto_args_scalar(&a, (uint64_t)(int64_t)base);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit_host(no, worker, host_fill, NULL, &a, id);
}

static int sub_host_add(pto_node_orch *no, int worker, const pto_tensor *in, const pto_tensor *out,
                        int add, int sleep, pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, in);
  pto_args_output_existing(&a, out);
  pto_args_scalar(&a, (uint64_t)(int64_t)add);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit_host(no, worker, host_add, NULL, &a, id);
}

static int sub_host_fail(pto_node_orch *no, int worker, const pto_tensor *out, int code, int sleep,
                         pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, out);
  pto_args_scalar(&a, (uint64_t)(int64_t)code);
  pto_args_scalar(&a, (uint64_t)sleep);
  return pto_node_submit_host(no, worker, host_fail, NULL, &a, id);
}

/* t[i] == base + step * i for every i (exact: small integers). */
static bool ramp_is(const pto_tensor *t, float base, float step) {
  for (int i = 0; i < N; i++)
    if (pto_tensor_f32(t)[i] != base + step * (float)i) {
      fprintf(stderr, "element %d: %g, want %g\n", i, (double)pto_tensor_f32(t)[i],
              (double)(base + step * (float)i));
      return false;
    }
  return true;
}

static bool all_is(const pto_tensor *t, float v) { return ramp_is(t, v, 0.0f); }

static bool read_is(pto_node_orch *no, const pto_tensor *t, float base, float step) {
  float buf[N];
  if (pto_node_read(no, t, buf) != 0) return false;
  for (int i = 0; i < N; i++)
    if (buf[i] != base + step * (float)i) return false;
  return true;
}

static int count_objects(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  int k = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) k++;
  if (d) closedir(d);
  return k;
}

/* Orchestration functions record what they saw here and the test asserts
 * it after the run (cmocka asserts must not fire inside a run). */
typedef struct probe {
  pto_tensor t[12];
  pto_task_id id[8];
  int rc[12];
  bool ok[12];
  void *extra;
} probe;

/* ---- 1. dependency inference ---- */

/* host fill X (slow) -> chip 1: Y = X + 1000 (slow) -> host: Z = Y + 5. */
static void raw_chain(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_host_fill(no, -1, &p->t[0], 0, 30, NULL);
  p->rc[1] = sub_add(no, 1, &p->t[0], &p->t[1], 1000, 20, NULL);
  p->rc[2] = sub_host_add(no, -1, &p->t[1], &p->t[2], 5, 0, NULL);
  p->ok[0] = read_is(no, &p->t[2], 1005.0f, 1.0f); /* waits for its writer only */
  p->rc[3] = pto_node_wait_all(no);
}

static void test_raw_host_chip_host(void **state) {
  (void)state;
  pto_node *n = make_node();
  probe p = {0};
  p.t[0] = vec(n, SENTINEL);
  p.t[1] = vec(n, SENTINEL);
  p.t[2] = vec(n, SENTINEL);
  pto_error_info err;
  int rc = pto_node_run(n, raw_chain, &p, &err);
  assert_int_equal(rc, 0);
  assert_int_equal(err.code, 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(p.rc[i], 0);
  assert_true(p.ok[0]);
  assert_true(ramp_is(&p.t[0], 0.0f, 1.0f));
  assert_true(ramp_is(&p.t[1], 1000.0f, 1.0f));
  assert_true(ramp_is(&p.t[2], 1005.0f, 1.0f));
  /* the run's statistics: 3 node tasks, 2 on host workers, 1 on chip 1
   * (one chip task, one block, of at least the kernel's 20 ms sleep) */
  pto_node_stats st;
  assert_int_equal(pto_node_stats_get(n, &st), 0);
  fprintf(stderr,
          "stats: nchips %d, node tasks %llu (host %llu), run %.1f us; chip 0: %llu/%llu/%llu; "
          "chip 1: %llu node tasks, %llu tasks, %llu blocks, host %.1f us\n",
          st.nchips, (unsigned long long)st.node_tasks, (unsigned long long)st.host_tasks,
          st.run_us, (unsigned long long)st.chip[0].node_tasks,
          (unsigned long long)st.chip[0].tasks, (unsigned long long)st.chip[0].blocks,
          (unsigned long long)st.chip[1].node_tasks, (unsigned long long)st.chip[1].tasks,
          (unsigned long long)st.chip[1].blocks, st.chip[1].host_us);
  assert_int_equal(st.nchips, 2);
  assert_int_equal(st.node_tasks, 3);
  assert_int_equal(st.host_tasks, 2);
  assert_int_equal(st.chip[0].node_tasks, 0);
  assert_int_equal(st.chip[0].blocks, 0);
  assert_int_equal(st.chip[1].node_tasks, 1);
  assert_int_equal(st.chip[1].tasks, 1);
  assert_int_equal(st.chip[1].blocks, 1);
  assert_true(st.chip[1].host_us >= 20000.0);
  assert_true(st.run_us >= st.chip[1].host_us);
  assert_int_equal(pto_node_stats_get(NULL, &st), PTO_EINVAL);
  assert_int_equal(pto_node_stats_get(n, NULL), PTO_EINVAL);
  pto_node_destroy(n);
}

/* X holds 0..63. chip 0 reads X slowly (Y = X + 1); worker 0 then
 * overwrites X (500 + i, slowly); worker 1 then overwrites X again
 * (900 + i). The reader must see the old X and the last writer must win. */
static void war_waw(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_add(no, 0, &p->t[0], &p->t[1], 1, 40, NULL);
  p->rc[1] = sub_host_fill(no, 0, &p->t[0], 500, 20, NULL);
  p->rc[2] = sub_host_fill(no, 1, &p->t[0], 900, 0, NULL);
  /* read-after-write on the chip side: a chip task reads the final X */
  p->rc[3] = sub_add(no, 1, &p->t[0], &p->t[2], 10, 0, NULL);
  p->rc[4] = pto_node_wait_all(no);
}

static void test_war_waw_host_over_chip_reader(void **state) {
  (void)state;
  pto_node *n = make_node();
  probe p = {0};
  p.t[0] = vec(n, 0.0f);
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&p.t[0])[i] = (float)i;
  p.t[1] = vec(n, SENTINEL);
  p.t[2] = vec(n, SENTINEL);
  pto_error_info err;
  int rc = pto_node_run(n, war_waw, &p, &err);
  assert_int_equal(rc, 0);
  for (int i = 0; i < 5; i++)
    assert_int_equal(p.rc[i], 0);
  assert_true(ramp_is(&p.t[1], 1.0f, 1.0f));   /* the reader saw the old X */
  assert_true(ramp_is(&p.t[0], 900.0f, 1.0f)); /* the later writer won */
  assert_true(ramp_is(&p.t[2], 910.0f, 1.0f));
  pto_node_destroy(n);
}

/* ---- 2. poisoning ---- */

/* t: 0 A (failed task's output), 1 B = A + 1, 2 C = B + 1 (host), 3 P input,
 * 4 Q = P + 7 (independent chip), 5 R (independent host fill), 6 D3 output
 * (dependent submitted after the failure is known), 7 S (independent,
 * submitted after it). `extra` != NULL: the root is a host task. */
static void poison_orch(pto_node_orch *no, void *arg) {
  probe *p = arg;
  if (p->extra)
    p->rc[0] = sub_host_fail(no, 0, &p->t[0], PTO_EFATAL, 30, &p->id[0]);
  else
    p->rc[0] = sub_fail(no, 1, &p->t[0], 30, &p->id[0]);
  /* submitted while the root still runs: poisoned when it fails */
  p->rc[1] = sub_add(no, 0, &p->t[0], &p->t[1], 1, 0, &p->id[1]);
  p->rc[2] = sub_host_add(no, 1, &p->t[1], &p->t[2], 1, 0, &p->id[2]);
  p->rc[3] = sub_add(no, 0, &p->t[3], &p->t[4], 7, 0, &p->id[3]);
  p->rc[4] = sub_host_fill(no, 1, &p->t[5], 300, 0, &p->id[4]);
  p->rc[5] = pto_node_wait_all(no);
  /* submitted after the failure is known: poisoned at submission */
  p->rc[6] = sub_add(no, 1, &p->t[0], &p->t[6], 1, 0, &p->id[5]);
  /* an independent task still runs after the failure */
  p->rc[7] = sub_add(no, 1, &p->t[3], &p->t[7], 9, 0, &p->id[6]);
  float buf[N];
  p->rc[8] = pto_node_read(no, &p->t[1], buf);
  p->rc[9] = pto_node_read(no, &p->t[2], buf);
  p->rc[10] = pto_node_read(no, &p->t[6], buf);
  p->ok[0] = read_is(no, &p->t[4], 7.0f, 1.0f);
  p->ok[1] = read_is(no, &p->t[5], 300.0f, 1.0f);
  p->ok[2] = read_is(no, &p->t[7], 9.0f, 1.0f);
  p->rc[11] = pto_node_wait_all(no);
}

static void poison_check(bool host_root) {
  pto_node *n = make_node();
  probe p = {0};
  for (int i = 0; i < 8; i++)
    p.t[i] = vec(n, SENTINEL);
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&p.t[3])[i] = (float)i;
  p.extra = host_root ? (void *)1 : NULL;
  pto_error_info err;
  int rc = pto_node_run(n, poison_orch, &p, &err);
  int want = host_root ? PTO_EFATAL : PTO_EKERNEL;
  fprintf(stderr, "%s: %s\n", pto_status_name(rc), err.details);
  /* the run reports the root error, not a poisoned dependent's */
  assert_int_equal(rc, want);
  assert_int_equal(err.code, want);
  char who[64];
  snprintf(who, sizeof who, "%s, node task %lld", host_root ? "host worker 0" : "chip rank 1",
           (long long)p.id[0]);
  assert_non_null(strstr(err.details, who));
  assert_non_null(strstr(err.details, host_root ? "returned -9" : "returned -1234"));
  for (int i = 0; i < 8; i++)
    assert_int_equal(p.rc[i], i == 5 ? want : 0); /* submissions are accepted */
  for (int i = 0; i < 7; i++)
    assert_int_not_equal(p.id[i], PTO_TASK_NONE);
  assert_int_equal(p.rc[11], want);
  /* the dependents report PTO_EPOISONED and never ran */
  assert_int_equal(p.rc[8], PTO_EPOISONED);
  assert_int_equal(p.rc[9], PTO_EPOISONED);
  assert_int_equal(p.rc[10], PTO_EPOISONED);
  assert_true(all_is(&p.t[0], SENTINEL));
  assert_true(all_is(&p.t[1], SENTINEL));
  assert_true(all_is(&p.t[2], SENTINEL));
  assert_true(all_is(&p.t[6], SENTINEL));
  /* the independent tasks ran */
  assert_true(p.ok[0]);
  assert_true(p.ok[1]);
  assert_true(p.ok[2]);
  assert_true(ramp_is(&p.t[4], 7.0f, 1.0f));
  assert_true(ramp_is(&p.t[5], 300.0f, 1.0f));
  assert_true(ramp_is(&p.t[7], 9.0f, 1.0f));
  pto_node_destroy(n);
}

static void test_poison_chip_failure(void **state) {
  (void)state;
  poison_check(false);
}

static void test_poison_host_failure(void **state) {
  (void)state;
  poison_check(true);
}

/* Two root failures: the run reports the one that failed first, even
 * though it was submitted second. */
static void two_roots(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_host_fail(no, 0, &p->t[0], PTO_EFATAL, 300, &p->id[0]);
  p->rc[1] = sub_fail(no, 0, &p->t[1], 0, &p->id[1]);
}

static void test_first_root_error_wins(void **state) {
  (void)state;
  pto_node *n = make_node();
  probe p = {0};
  p.t[0] = vec(n, SENTINEL);
  p.t[1] = vec(n, SENTINEL);
  pto_error_info err;
  int rc = pto_node_run(n, two_roots, &p, &err);
  assert_int_equal(rc, PTO_EKERNEL);
  char who[64];
  snprintf(who, sizeof who, "chip rank 0, node task %lld", (long long)p.id[1]);
  assert_non_null(strstr(err.details, who));
  pto_node_destroy(n);
}

/* A host task that fails with a code of its own, not a pto status (a C
 * `return 1`, or -1234): the run fails with PTO_EKERNEL, the details
 * naming the code, as a kernel's own code fails a chip run; a pto status
 * stays itself. Before, pto_node_run returned the callback's 1 (not an
 * error to `rc < 0`, and no PTO_E* code) or -1234 (PTO_E?). */
typedef struct host_code {
  int code;
  probe p;
} host_code;

static void host_code_run(pto_node_orch *no, void *arg) {
  host_code *h = arg;
  h->p.rc[0] = sub_host_fail(no, 0, &h->p.t[0], h->code, 0, &h->p.id[0]);
  h->p.rc[1] = sub_host_add(no, 1, &h->p.t[0], &h->p.t[1], 1, 0, NULL); /* poisoned */
}

static void host_code_good(pto_node_orch *no, void *arg) {
  probe *p = arg;
  assert_int_equal(sub_host_fill(no, 0, &p->t[1], 4, 0, NULL), 0);
}

static void test_host_task_own_code(void **state) {
  (void)state;
  pto_node *n = make_node();
  const int codes[] = {1, 7, -1234, PTO_EINVAL, PTO_EFATAL};
  for (int i = 0; i < 5; i++) {
    host_code h;
    memset(&h, 0, sizeof h);
    h.code = codes[i];
    h.p.t[0] = vec(n, SENTINEL);
    h.p.t[1] = vec(n, SENTINEL);
    pto_error_info err;
    int rc = pto_node_run(n, host_code_run, &h, &err);
    printf("host task returned %d: the run %s (%d): %s\n", codes[i], pto_status_name(rc), rc,
           err.details);
    int want = codes[i] < 0 && codes[i] != -1234 ? codes[i] : PTO_EKERNEL;
    assert_int_equal(rc, want);
    assert_int_equal(err.code, want);
    char said[48];
    snprintf(said, sizeof said, "host task returned %d", codes[i]);
    assert_non_null(strstr(err.details, said));
    assert_true(all_is(&h.p.t[1], SENTINEL)); /* its dependent was poisoned */
    assert_int_equal(pto_node_run(n, host_code_good, &h.p, &err), 0); /* the next run */
    assert_true(ramp_is(&h.p.t[1], 4.0f, 1.0f));
  }
  pto_node_destroy(n);
}

/* A host function says why it failed with pto_host_fail, as a kernel does
 * with pto_kctx_fail: the run's details end with its reason. Before, a
 * host function had no way to give one ("host task returned -1" was all
 * the run said; a Python host function's exception text stayed on the
 * worker's stderr). A later failure without a reason does not inherit it. */
static int host_fail_why(const pto_args *a, void *arg) {
  (void)arg;
  if (a->scalars[0]) return pto_host_fail(a, (int)(int64_t)a->scalars[1], "row %d is empty", 3);
  return (int)(int64_t)a->scalars[1];
}

static void host_why_run(pto_node_orch *no, void *arg) {
  probe *p = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &p->t[0]);
  pto_args_scalar(&a, (uint64_t)p->rc[1]);          /* say why */
  pto_args_scalar(&a, (uint64_t)(int64_t)p->rc[2]); /* the code */
  p->rc[0] = pto_node_submit_host(no, 0, host_fail_why, NULL, &a, &p->id[0]);
}

static void test_host_task_says_why(void **state) {
  (void)state;
  pto_node *n = make_node();
  const struct {
    int why, code, want;
    const char *said;
  } cases[] = {{1, PTO_EINVAL, PTO_EINVAL, "host task returned -1: row 3 is empty"},
               {1, 0, PTO_EKERNEL, "host task returned -15: row 3 is empty"},
               {0, PTO_EINVAL, PTO_EINVAL, "host task returned -1"},
               {1, 5, PTO_EKERNEL, "host task returned -15: row 3 is empty"}};
  for (int i = 0; i < 4; i++) {
    probe p;
    memset(&p, 0, sizeof p);
    p.t[0] = vec(n, SENTINEL);
    p.rc[1] = cases[i].why;
    p.rc[2] = cases[i].code;
    pto_error_info err;
    int rc = pto_node_run(n, host_why_run, &p, &err);
    printf("case %d: %s (%d): %s\n", i, pto_status_name(rc), rc, err.details);
    assert_int_equal(p.rc[0], 0);
    assert_int_equal(rc, cases[i].want);
    assert_non_null(strstr(err.details, cases[i].said));
    if (!cases[i].why) assert_null(strstr(err.details, "row 3")); /* not the earlier reason */
  }
  pto_node_destroy(n);
}

/* pto_node_host_keep: the node's host memory outlives pto_node_destroy
 * (this process's own, holding what a task wrote there) until the caller
 * unmaps it; the devices are free for the next node. */
static void test_host_memory_kept_past_destroy(void **state) {
  (void)state;
  size_t bytes = 0;
  assert_null(pto_node_host_keep(NULL, &bytes));
  pto_node *n = make_node();
  assert_null(pto_node_host_keep(n, NULL));
  probe p;
  memset(&p, 0, sizeof p);
  p.t[1] = vec(n, SENTINEL);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, host_code_good, &p, &err), 0); /* t[1] = 4, 5, ... */
  unsigned char *base = pto_node_host_keep(n, &bytes);
  assert_non_null(base);
  assert_int_equal(bytes, 1u << 20); /* make_node's host_bytes */
  float *v = pto_tensor_f32(&p.t[1]);
  assert_true((unsigned char *)v >= base && (unsigned char *)v < base + bytes);
  pto_node_destroy(n);
  assert_true(ramp_is(&p.t[1], 4.0f, 1.0f)); /* still mapped, as the task left it */
  v[0] = 9.0f;                               /* and writable */
  assert_true(v[0] == 9.0f);
  pto_node *again = make_node(); /* the same devices: released by the destroy */
  pto_node_destroy(again);
  assert_int_equal(munmap(base, bytes), 0);
}

/* ---- 3. group tasks and independent single-chip tasks ---- */

/* A 2-rank domain; a group task whose ranks wait on each other writes
 * rows of t[0]; a host task then reads that output. */
static void group_orch(pto_node_orch *no, void *arg) {
  probe *p = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom;
  p->rc[0] = pto_node_domain_create(no, chips, 2, bufs, 1, &dom);
  if (p->rc[0]) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t one = 1;
    pto_tensor sig;
    p->rc[1] |= pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &p->t[r]);
  }
  dist_scalars(&a, K_PING, 2, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  p->rc[2] = pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
  p->rc[3] = sub_host_add(no, -1, &p->t[1], &p->t[2], 1, 0, NULL); /* after the group */
  p->rc[4] = pto_node_wait_all(no);
}

static void test_group_ranks_wait_on_each_other(void **state) {
  (void)state;
  pto_node *n = make_node();
  probe p = {0};
  for (int i = 0; i < 3; i++)
    p.t[i] = vec(n, SENTINEL);
  pto_error_info err;
  int rc = pto_node_run(n, group_orch, &p, &err);
  if (rc) fprintf(stderr, "%s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  for (int i = 0; i < 5; i++)
    assert_int_equal(p.rc[i], 0);
  assert_true(all_is(&p.t[0], 1.0f));   /* rank 0 saw rank 1's answer */
  assert_true(all_is(&p.t[1], 101.0f)); /* rank 1 saw rank 0's signal */
  assert_true(all_is(&p.t[2], 102.0f));
  pto_node_destroy(n);
}

/* Chip 0 and chip 1 each run an independent task from the same input. */
static void two_singles(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_add(no, 0, &p->t[0], &p->t[1], 1, 20, NULL);
  p->rc[1] = sub_add(no, 1, &p->t[0], &p->t[2], 2, 20, NULL);
  p->rc[2] = pto_node_wait_all(no);
}

static void test_independent_tasks_on_two_chips(void **state) {
  (void)state;
  pto_node *n = make_node();
  probe p = {0};
  p.t[0] = vec(n, 0.0f);
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&p.t[0])[i] = (float)i;
  p.t[1] = vec(n, SENTINEL);
  p.t[2] = vec(n, SENTINEL);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, two_singles, &p, &err), 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(p.rc[i], 0);
  assert_true(ramp_is(&p.t[0], 0.0f, 1.0f)); /* read-only input untouched */
  assert_true(ramp_is(&p.t[1], 1.0f, 1.0f));
  assert_true(ramp_is(&p.t[2], 2.0f, 1.0f));
  pto_node_destroy(n);
}

/* ---- 4. a run after a failed run ---- */

/* A domain, a failing chip task writing t[0] and a dependent (t[1]). */
static void failing_run(pto_node_orch *no, void *arg) {
  probe *p = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom;
  p->rc[0] = pto_node_domain_create(no, chips, 2, bufs, 1, &dom);
  p->rc[1] = sub_fail(no, 0, &p->t[0], 0, &p->id[0]);
  p->rc[2] = sub_add(no, 1, &p->t[0], &p->t[1], 1, 0, NULL);
}

static void bad_submit_run(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_add(no, 7, &p->t[3], &p->t[4], 1, 0, NULL); /* no chip 7 */
}

/* The same tensors again: t[0] (the failed task's output) is read and
 * written, a group task runs over a new domain. */
static void good_run(pto_node_orch *no, void *arg) {
  probe *p = arg;
  p->rc[0] = sub_add(no, 1, &p->t[0], &p->t[1], 1, 0, NULL);
  p->rc[1] = sub_host_fill(no, -1, &p->t[0], 50, 0, NULL);
  group_orch(no, p->extra);
  probe *g = p->extra;
  for (int i = 0; i < 5; i++)
    p->rc[2] |= g->rc[i];
}

/* ---- a second thread on one node orchestrator ---- */

typedef struct foreign {
  pto_node_orch *no;
  pto_tensor in, out, mine;
  int rc_submit, rc_host, rc_read, rc_wait, rc_domain;
} foreign;

/* A fresh fixture: in 1.0, out and mine the sentinel. */
static void foreign_init(pto_node *n, foreign *f) {
  memset(f, 0, sizeof *f);
  f->in = vec(n, 1.0f);
  f->out = vec(n, SENTINEL);
  f->mine = vec(n, SENTINEL);
}

/* Every kind of call on f->no, each return code kept (a thread's body). */
static void *foreign_calls(void *arg) {
  foreign *f = arg;
  f->rc_submit = sub_add(f->no, 0, &f->in, &f->out, 1, 0, NULL);
  f->rc_host = sub_host_fill(f->no, 0, &f->out, 5, 0, NULL);
  float buf[N];
  f->rc_read = pto_node_read(f->no, &f->in, buf);
  f->rc_wait = pto_node_wait_all(f->no);
  int chips[2] = {0, 1};
  pto_domain d;
  f->rc_domain = pto_node_domain_create(f->no, chips, 2, NULL, 0, &d);
  return NULL;
}

/* The orchestration submits one task of its own, then lets another thread
 * make every kind of call; each is refused and changes nothing. */
static void foreign_run(pto_node_orch *no, void *arg) {
  foreign *f = arg;
  f->no = no;
  assert_int_equal(sub_host_fill(no, 1, &f->mine, 7, 0, NULL), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, foreign_calls, f), 0);
  pthread_join(th, NULL);
}

static void own_only_run(pto_node_orch *no, void *arg) {
  foreign *f = arg;
  assert_int_equal(sub_host_fill(no, 0, &f->mine, 3, 0, NULL), 0);
}

static void test_calls_from_another_thread_refused(void **state) {
  (void)state;
  pto_node *n = make_node();
  foreign f;
  foreign_init(n, &f);
  pto_error_info err;
  int rc = pto_node_run(n, foreign_run, &f, &err);
  printf("a second thread's calls: submit %s, submit_host %s, read %s, wait_all %s, "
         "domain_create %s; the run %s: %s\n",
         pto_status_name(f.rc_submit), pto_status_name(f.rc_host), pto_status_name(f.rc_read),
         pto_status_name(f.rc_wait), pto_status_name(f.rc_domain), pto_status_name(rc),
         err.details);
  assert_int_equal(f.rc_submit, PTO_EINVAL);
  assert_int_equal(f.rc_host, PTO_EINVAL);
  assert_int_equal(f.rc_read, PTO_EINVAL);
  assert_int_equal(f.rc_wait, PTO_EINVAL);
  assert_int_equal(f.rc_domain, PTO_EINVAL);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "from a thread other than the one running"));
  assert_true(all_is(&f.out, SENTINEL));     /* nothing of theirs ran */
  assert_true(ramp_is(&f.mine, 7.0f, 1.0f)); /* the owner's task did */
  /* and the node runs again */
  memset(&f, 0, sizeof f);
  f.mine = vec(n, SENTINEL);
  assert_int_equal(pto_node_run(n, own_only_run, &f, &err), 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  pto_node_destroy(n);
}

/* A node orchestrator handle kept past its run: every call on it does
 * nothing and returns PTO_EINVAL, and the node's next run is not touched.
 * Before, the handle lived on pto_node_run's stack and a submit through
 * it crashed (a misuse audit). */
static pto_node_orch *kept_no;
static void keep_run(pto_node_orch *no, void *arg) {
  kept_no = no;
  own_only_run(no, arg);
}

static void test_orch_used_after_its_run(void **state) {
  (void)state;
  pto_node *n = make_node();
  foreign f;
  foreign_init(n, &f);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, keep_run, &f, &err), 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  f.no = kept_no;
  foreign_calls(&f); /* the same calls, on this thread, after the run */
  assert_int_equal(f.rc_submit, PTO_EINVAL);
  assert_int_equal(f.rc_host, PTO_EINVAL);
  assert_int_equal(f.rc_read, PTO_EINVAL);
  assert_int_equal(f.rc_wait, PTO_EINVAL);
  assert_int_equal(f.rc_domain, PTO_EINVAL);
  assert_true(all_is(&f.out, SENTINEL)); /* nothing ran */
  /* the next run is its own */
  f.mine = vec(n, SENTINEL);
  int rc = pto_node_run(n, own_only_run, &f, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  assert_true(all_is(&f.out, SENTINEL));
  pto_node_destroy(n);
}

/* A handle kept from one run and used during the next, on the thread
 * running it: refused as after the run, naming why, and the run is its
 * own. Before, it was the same pointer (the node's one handle), so its
 * calls went into the next run. */
static void stale_in_next_run(pto_node_orch *no, void *arg) {
  foreign *f = arg;
  assert_true(no != kept_no);
  assert_null(pto_node_orch_node(kept_no));
  assert_true(pto_node_orch_node(no) != NULL);
  f->no = kept_no;
  foreign_calls(f);
  assert_non_null(
      strstr(pto_last_error(), "pto_node_domain_create: this pto_node_orch's run has ended"));
  own_only_run(no, arg);
}

static void test_orch_of_an_earlier_run_in_the_next(void **state) {
  (void)state;
  pto_node *n = make_node();
  foreign f;
  foreign_init(n, &f);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, keep_run, &f, &err), 0);
  f.mine = vec(n, SENTINEL);
  int rc = pto_node_run(n, stale_in_next_run, &f, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  assert_int_equal(f.rc_submit, PTO_EINVAL);
  assert_int_equal(f.rc_host, PTO_EINVAL);
  assert_int_equal(f.rc_read, PTO_EINVAL);
  assert_int_equal(f.rc_wait, PTO_EINVAL);
  assert_int_equal(f.rc_domain, PTO_EINVAL);
  assert_true(all_is(&f.out, SENTINEL)); /* none of the kept handle's tasks ran */
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  pto_node_destroy(n);
}

/* A thread of the orchestration that calls after the orchestration
 * function returned, while pto_node_run still waits for the run's tasks
 * (here a 600 ms host task): its calls are refused, and the run fails
 * naming them, as during the orchestration. Before, a call refused then
 * was never latched: the run returned PTO_OK, and a pto_node_destroy from
 * that thread did nothing without a word to the run. */
typedef struct late_caller {
  foreign f;
  pthread_t th;
  bool destroy;
  pto_node *n;
} late_caller;

static void *late_calls(void *arg) {
  late_caller *l = arg;
  sleep_ms(200); /* the orchestration has returned; the host task runs on */
  if (l->destroy)
    pto_node_destroy(l->n);
  else
    foreign_calls(&l->f);
  return NULL;
}

static void late_caller_run(pto_node_orch *no, void *arg) {
  late_caller *l = arg;
  l->f.no = no;
  assert_int_equal(sub_host_fill(no, 1, &l->f.mine, 7, 600, NULL), 0);
  assert_int_equal(pthread_create(&l->th, NULL, late_calls, l), 0);
}

static void test_calls_from_another_thread_after_the_orchestration(void **state) {
  (void)state;
  pto_node *n = make_node();
  for (int destroy = 0; destroy < 2; destroy++) {
    late_caller l;
    memset(&l, 0, sizeof l);
    foreign_init(n, &l.f);
    l.destroy = destroy;
    l.n = n;
    pto_error_info err;
    int rc = pto_node_run(n, late_caller_run, &l, &err);
    pthread_join(l.th, NULL);
    printf("%s from another thread in the run's last wait: the run %s: %s\n",
           destroy ? "pto_node_destroy" : "every call", pto_status_name(rc), err.details);
    if (!destroy) {
      assert_int_equal(l.f.rc_submit, PTO_EINVAL);
      assert_int_equal(l.f.rc_wait, PTO_EINVAL);
    }
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, destroy ? "pto_node_destroy" : "pto_node_"));
    assert_non_null(strstr(err.details, "from a thread other than the one running"));
    assert_true(all_is(&l.f.out, SENTINEL));     /* nothing of theirs ran */
    assert_true(ramp_is(&l.f.mine, 7.0f, 1.0f)); /* the owner's task did */
  }
  /* and the node runs again, its own */
  foreign f;
  foreign_init(n, &f);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, own_only_run, &f, &err), 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  pto_node_destroy(n);
}

/* pto_node_destroy from another thread after pto_node_run claimed the node
 * and before its orchestration began (the run makes its TensorMap there:
 * 4M entries, milliseconds): refused, named, and the run goes on. Before,
 * the destroy looked only for a live orchestration, found none, and freed
 * the node under the run (ASan: heap-use-after-free in the TensorMap's
 * clear). White-box: the thread waits for that window (node_internal.h). */
typedef struct window_destroyer {
  pto_node *n;
  _Atomic bool run_returned; /* the spinner missed the run: it destroys nothing */
  bool tried, in_window;
  char said[300];
} window_destroyer;

static void *destroy_at_run_start(void *arg) {
  window_destroyer *w = arg;
  pto_node *n = w->n;
  while (!atomic_load(&n->running))
    if (atomic_load(&w->run_returned)) return NULL;
  w->in_window = atomic_load(&n->orch_live) == NULL;
  w->tried = true;
  pto_node_destroy(n);
  snprintf(w->said, sizeof w->said, "%s", pto_last_error());
  return NULL;
}

static void test_destroy_at_run_start(void **state) {
  (void)state;
  pto_node *n = make_node_tm(1u << 22);
  foreign f;
  foreign_init(n, &f);
  window_destroyer w = {.n = n};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, destroy_at_run_start, &w), 0);
  pto_error_info err;
  int rc = pto_node_run(n, own_only_run, &f, &err);
  atomic_store(&w.run_returned, true);
  pthread_join(th, NULL);
  printf("pto_node_destroy at the run's start (%s): the run %s: %s; the destroy said: %s\n",
         !w.tried      ? "missed the run"
         : w.in_window ? "in the window"
                       : "past the window",
         pto_status_name(rc), err.details, w.said);
  if (w.tried) assert_non_null(strstr(w.said, "pto_node_destroy: called during the node's run"));
  /* refused without failing the run in the window; once the orchestration
   * had begun (the thread was slow to call) the run fails, naming it */
  if (rc != 0) {
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, "pto_node_destroy"));
  }
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  /* the node is whole: it runs again */
  f.mine = vec(n, SENTINEL);
  assert_int_equal(pto_node_run(n, own_only_run, &f, &err), 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  pto_node_destroy(n);
}

/* Two threads call pto_node_run on one node at once: one runs, the other
 * is refused with PTO_EBUSY naming why, and neither run's tasks go astray.
 * Before, both could pass the `running` check (a plain bool, set only
 * after the run's bookkeeping was made) and run over one TensorMap and one
 * task array. */
typedef struct racer {
  pto_node *n;
  pthread_barrier_t *go;
  pto_tensor out;
  int base, rc;
  pto_error_info err;
} racer;

static _Atomic int racers_inside, racers_overlapped;

static void racer_run(pto_node_orch *no, void *arg) {
  racer *r = arg;
  if (atomic_fetch_add(&racers_inside, 1)) atomic_fetch_add(&racers_overlapped, 1);
  sleep_ms(2); /* two orchestrations at once would meet here */
  if (sub_host_fill(no, -1, &r->out, r->base, 0, NULL)) r->base = -1;
  atomic_fetch_sub(&racers_inside, 1);
}

static void *racer_main(void *arg) {
  racer *r = arg;
  pthread_barrier_wait(r->go);
  r->rc = pto_node_run(r->n, racer_run, r, &r->err);
  return NULL;
}

static void test_two_threads_run_at_once(void **state) {
  (void)state;
  pto_node *n = make_node();
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  int both = 0, busy = 0;
  for (int round = 0; round < 300; round++) {
    racer r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
      memset(&r[i], 0, sizeof r[i]);
      r[i] = (racer){.n = n, .go = &go, .out = vec(n, SENTINEL), .base = 10 * i + 1};
      assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
      pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
      if (r[i].rc == 0) {
        assert_true(ramp_is(&r[i].out, (float)r[i].base, 1.0f));
      } else {
        assert_int_equal(r[i].rc, PTO_EBUSY);
        assert_non_null(strstr(r[i].err.details, "already running"));
        assert_true(all_is(&r[i].out, SENTINEL));
        busy++;
      }
    }
    both += r[0].rc == 0 && r[1].rc == 0;
  }
  printf("300 rounds of two threads running the node at once: %d refused, %d with both runs "
         "(one after the other), %d with two orchestrations at once\n",
         busy, both, atomic_load(&racers_overlapped));
  assert_int_equal(atomic_load(&racers_overlapped), 0);
  pthread_barrier_destroy(&go);
  pto_node_destroy(n);
}

static void test_run_after_failed_run(void **state) {
  (void)state;
  pto_node *n = make_node();
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s", pto_node_shm_prefix(n));
  int pids[8], np = pto_node_child_pids(n, pids, 8);
  assert_int_equal(np, 4);
  probe p = {0}, g = {0};
  for (int i = 0; i < 5; i++)
    p.t[i] = vec(n, SENTINEL);
  for (int i = 0; i < 3; i++)
    g.t[i] = vec(n, SENTINEL);
  pto_error_info err;
  int rc = pto_node_run(n, failing_run, &p, &err);
  assert_int_equal(rc, PTO_EKERNEL);
  assert_int_equal(p.rc[0], 0);
  assert_non_null(strstr(err.details, "chip rank 0"));
  assert_true(all_is(&p.t[1], SENTINEL));
  /* nothing of the run is left; the children live on */
  assert_int_equal(count_objects(prefix), 0);
  for (int i = 0; i < np; i++)
    assert_int_equal(kill(pids[i], 0), 0);
  /* this node still holds its leases */
  pto_node_config cfg;
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  pto_node_config_init(&cfg);
  cfg.device_ids = devs;
  cfg.quiet = true;
  /* at once, though it may wait: a lease of this very process is never
   * given back by waiting (before: the whole wait, then "leased by pid P",
   * P its own) */
  cfg.lease_wait_ms = 30000;
  pto_node *other = NULL;
  pto_error_info oerr;
  uint64_t t0 = pto_now_ns();
  rc = pto_node_create(&cfg, &other, &oerr);
  uint64_t took_ms = (pto_now_ns() - t0) / 1000000;
  pto_node_destroy(other); /* NULL unless the lease was lost */
  assert_int_equal(rc, PTO_EDEVICE_BUSY);
  char holder[96];
  snprintf(holder, sizeof holder, "is leased by this process (pid %d)", (int)getpid());
  if (!strstr(oerr.details, holder)) fprintf(stderr, "details: %s\n", oerr.details);
  assert_non_null(strstr(oerr.details, holder));
  assert_true(took_ms < 5000);
  /* an orchestration-side failure, then a good run again */
  memset(p.rc, 0, sizeof p.rc);
  assert_int_equal(pto_node_run(n, bad_submit_run, &p, &err), PTO_EINVAL);
  assert_int_equal(p.rc[0], PTO_EINVAL);
  assert_true(all_is(&p.t[4], SENTINEL));
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&p.t[0])[i] = (float)(2 * i);
  memset(p.rc, 0, sizeof p.rc);
  p.extra = &g;
  rc = pto_node_run(n, good_run, &p, &err);
  if (rc) fprintf(stderr, "%s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  assert_int_equal(err.code, 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(p.rc[i], 0);
  assert_true(ramp_is(&p.t[1], 1.0f, 2.0f)); /* not poisoned by the old run */
  assert_true(ramp_is(&p.t[0], 50.0f, 1.0f));
  assert_true(all_is(&g.t[0], 1.0f));
  assert_true(all_is(&g.t[1], 101.0f));
  assert_true(all_is(&g.t[2], 102.0f));
  assert_int_equal(count_objects(prefix), 0);
  int pids2[8];
  assert_int_equal(pto_node_child_pids(n, pids2, 8), np);
  assert_memory_equal(pids, pids2, sizeof(int) * (size_t)np);
  pto_node_destroy(n);
  for (int i = 0; i < np; i++) {
    errno = 0;
    assert_int_equal(kill(pids[i], 0), -1);
    assert_int_equal(errno, ESRCH);
  }
}

/* ---- node host memory handed out from every process and thread ----
 * A host task on one host runs in a worker process forked when the node
 * was created, and under mpirun on a thread of rank 0; both may call
 * pto_node_host_alloc with the node pointer they were passed. Every
 * allocation comes from the one count the node's processes share: a
 * worker's copy of the node began where the count stood at the fork and
 * handed out bytes the parent had given away since (the same address
 * twice, with no error). */

#define ALLOC_BYTES   64
#define ALLOC_THREADS 2
#define ALLOC_EACH    200

/* Allocates ALLOC_BYTES, fills them with 0x5a, and writes their address
 * to its INOUT tensor (one int64). */
static int alloc_host(const pto_args *a, void *arg) {
  unsigned char *p = pto_node_host_alloc(arg, ALLOC_BYTES);
  if (!p) return 1;
  memset(p, 0x5a, ALLOC_BYTES);
  *(int64_t *)a->tensors[0].buf = (int64_t)(intptr_t)p;
  return 0;
}

typedef struct alloc_probe {
  pto_node *n;
  pto_tensor where[2];
  unsigned char *got[ALLOC_THREADS][ALLOC_EACH];
} alloc_probe;

typedef struct alloc_thread {
  alloc_probe *p;
  int i;
} alloc_thread;

static void *alloc_many(void *arg) {
  alloc_thread *a = arg;
  for (int k = 0; k < ALLOC_EACH; k++)
    a->p->got[a->i][k] = pto_node_host_alloc(a->p->n, 8);
  return NULL;
}

/* Two host tasks (one per worker) allocate while two threads of the
 * orchestration's process do. */
static void alloc_run(pto_node_orch *no, void *arg) {
  alloc_probe *p = arg;
  for (int w = 0; w < 2; w++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &p->where[w]);
    assert_int_equal(pto_node_submit_host(no, w, alloc_host, p->n, &a, NULL), 0);
  }
  pthread_t th[ALLOC_THREADS];
  alloc_thread at[ALLOC_THREADS];
  for (int i = 0; i < ALLOC_THREADS; i++) {
    at[i] = (alloc_thread){p, i};
    assert_int_equal(pthread_create(&th[i], NULL, alloc_many, &at[i]), 0);
  }
  for (int i = 0; i < ALLOC_THREADS; i++)
    pthread_join(th[i], NULL);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void test_host_alloc_shared_by_processes_and_threads(void **state) {
  (void)state;
  pto_node *n = make_node();
  alloc_probe *p = calloc(1, sizeof *p);
  assert_non_null(p);
  p->n = n;
  unsigned char *mine = pto_node_host_alloc(n, ALLOC_BYTES); /* after the workers were forked */
  assert_non_null(mine);
  memset(mine, 0x11, ALLOC_BYTES);
  int64_t one[1] = {1};
  for (int w = 0; w < 2; w++) {
    assert_int_equal(pto_node_host_tensor(n, PTO_I64, 1, one, &p->where[w]), 0);
    *(int64_t *)p->where[w].buf = 0;
  }
  pto_error_info err;
  int rc = pto_node_run(n, alloc_run, p, &err);
  if (rc) fprintf(stderr, "%s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  unsigned char *after = pto_node_host_alloc(n, ALLOC_BYTES);
  assert_non_null(after);
  /* every allocation: its start, and bytes; none may overlap another */
  enum { NALL = 4 + ALLOC_THREADS * ALLOC_EACH };
  uintptr_t lo[NALL];
  int k = 0;
  lo[k++] = (uintptr_t)mine;
  lo[k++] = (uintptr_t)after;
  for (int w = 0; w < 2; w++) {
    unsigned char *q = (unsigned char *)(intptr_t) * (int64_t *)p->where[w].buf;
    printf("worker %d's host task got node host memory at offset %td (the parent's: 0 before the "
           "run, %td after)\n",
           w, q - mine, after - mine);
    assert_non_null(q);
    lo[k++] = (uintptr_t)q;
    for (int b = 0; b < ALLOC_BYTES; b++)
      assert_int_equal(q[b], 0x5a);
  }
  for (int i = 0; i < ALLOC_THREADS; i++)
    for (int j = 0; j < ALLOC_EACH; j++) {
      assert_non_null(p->got[i][j]);
      lo[k++] = (uintptr_t)p->got[i][j];
    }
  for (int b = 0; b < ALLOC_BYTES; b++) /* no host task wrote over the parent's */
    assert_int_equal(mine[b], 0x11);
  qsort(lo, NALL, sizeof lo[0], cmp_ptr);
  for (int i = 1; i < NALL; i++) /* 64-byte aligned, so distinct starts do not overlap */
    if (lo[i] == lo[i - 1])
      fail_msg("two allocations at offset %td", (unsigned char *)lo[i] - mine);
  free(p);
  pto_node_destroy(n);
}

/* ---- pto_node_skip_read_check: the orchestration's thread only ---- */

typedef struct skipper {
  pto_node *n;
  foreign f;
  int rc_own, rc_other;
  bool late; /* the other thread calls after the orchestration returned */
  pthread_t th;
} skipper;

static void *skip_from_thread(void *arg) {
  skipper *s = arg;
  if (s->late) sleep_ms(200); /* the orchestration has returned; the host task runs on */
  s->rc_other = pto_node_skip_read_check(s->n, host_add);
  return NULL;
}

static void skip_run(pto_node_orch *no, void *arg) {
  skipper *s = arg;
  s->rc_own = pto_node_skip_read_check(s->n, host_fill); /* its own thread: taken */
  assert_int_equal(sub_host_fill(no, 1, &s->f.mine, 7, s->late ? 600 : 0, NULL), 0);
  assert_int_equal(pthread_create(&s->th, NULL, skip_from_thread, s), 0);
  if (!s->late) pthread_join(s->th, NULL);
}

/* pto_node_skip_read_check changes what the run reads as it dispatches:
 * from a thread other than the orchestration's, during the run (its
 * orchestration, or its last wait), it is refused and fails the run,
 * naming the rule, as the other calls; on the orchestration's thread, and
 * between runs on any thread, it is taken. Before, it changed the list
 * (a realloc the dispatch may read meanwhile) from any thread, and the run
 * succeeded. */
static void test_skip_read_check_from_another_thread(void **state) {
  (void)state;
  pto_node *n = make_node();
  for (int late = 0; late < 2; late++) {
    skipper s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.late = late;
    foreign_init(n, &s.f);
    pto_error_info err;
    int rc = pto_node_run(n, skip_run, &s, &err);
    if (late) pthread_join(s.th, NULL);
    printf("pto_node_skip_read_check from another thread (%s): %s; the run %s: %s\n",
           late ? "in the run's last wait" : "during the orchestration",
           pto_status_name(s.rc_other), pto_status_name(rc), err.details);
    assert_int_equal(s.rc_own, 0);
    assert_int_equal(s.rc_other, PTO_EINVAL);
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, "pto_node_skip_read_check"));
    assert_non_null(strstr(err.details, "from a thread other than the one running"));
    assert_true(ramp_is(&s.f.mine, 7.0f, 1.0f)); /* the owner's task ran */
  }
  /* between runs, from any thread: taken; and the node runs again */
  skipper s;
  memset(&s, 0, sizeof s);
  s.n = n;
  assert_int_equal(pthread_create(&s.th, NULL, skip_from_thread, &s), 0);
  pthread_join(s.th, NULL);
  assert_int_equal(s.rc_other, 0);
  foreign f;
  foreign_init(n, &f);
  pto_error_info err;
  assert_int_equal(pto_node_run(n, own_only_run, &f, &err), 0);
  assert_true(ramp_is(&f.mine, 3.0f, 1.0f));
  pto_node_destroy(n);
}

/* ---- pto_node_cancel ---- */

#define CANCEL_CHAIN   5
#define CANCEL_STEP_MS 400

typedef struct canceller {
  pto_node *n;
  pto_tensor x[CANCEL_CHAIN + 1], out;
  int rc[4];
  uint64_t cancel_ns;
  bool from_orch; /* the orchestration cancels its own run, then submits */
} canceller;

static void *cancel_later(void *arg) {
  canceller *c = arg;
  sleep_ms(200); /* the chain's first task and the waiting kernel run */
  c->cancel_ns = pto_now_ns();
  c->rc[3] = pto_node_cancel(c->n);
  return NULL;
}

/* Chip 1 waits for a signal no one sends (until the domain's deadline,
 * 3 s); chip 0 runs a chain of CANCEL_CHAIN tasks of CANCEL_STEP_MS each. */
static void cancel_run(pto_node_orch *no, void *arg) {
  canceller *c = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom;
  c->rc[0] = pto_node_domain_create(no, chips, 2, bufs, 1, &dom);
  if (c->rc[0]) return;
  int64_t one = 1;
  pto_tensor sig;
  c->rc[1] = pto_node_window_tensor(no, dom, 1, "sig", PTO_I64, 1, &one, &sig);
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &sig);
  pto_args_output_existing(&a, &c->out);
  dist_scalars(&a, K_PING, 2, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  c->rc[1] |= pto_node_submit(no, 1, dist_chip_orch, &a, NULL);
  if (c->from_orch) {
    assert_int_equal(pto_node_cancel(pto_node_orch_node(no)), 0);
    c->rc[2] = sub_add(no, 0, &c->x[0], &c->x[1], 1, 0, NULL);
    return;
  }
  for (int i = 0; i < CANCEL_CHAIN; i++)
    c->rc[2] |= sub_add(no, 0, &c->x[i], &c->x[i + 1], 1, CANCEL_STEP_MS, NULL);
}

static void chain_run(pto_node_orch *no, void *arg) {
  canceller *c = arg;
  for (int i = 0; i < 2; i++)
    c->rc[2] |= sub_add(no, 0, &c->x[i], &c->x[i + 1], 1, 0, NULL);
}

/* pto_node_cancel from another thread (as from a signal handler): the run
 * starts no task after it, the kernel waiting for a signal that will not
 * come ends its wait, and pto_node_run returns PTO_ECANCELLED once the
 * chain's running task has returned, not after the whole chain (2 s) nor
 * at the wait's deadline (3 s). A cancel without a run does nothing, and
 * the next run is whole. From the orchestration itself: its next submit
 * is refused. */
static void test_cancel_a_run(void **state) {
  (void)state;
  pto_node *n = make_node();
  canceller c;
  memset(&c, 0, sizeof c);
  c.n = n;
  for (int i = 0; i <= CANCEL_CHAIN; i++)
    c.x[i] = vec(n, i ? SENTINEL : 0.0f);
  c.out = vec(n, SENTINEL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
  pto_error_info err;
  int rc = pto_node_run(n, cancel_run, &c, &err);
  uint64_t end = pto_now_ns();
  pthread_join(th, NULL);
  double after_ms = (double)(end - c.cancel_ns) / 1e6;
  printf("cancelled %.0f ms into the run: it returned %.0f ms later: %s: %s\n", 200.0, after_ms,
         pto_status_name(rc), err.details);
  assert_int_equal(c.rc[0], 0);
  assert_int_equal(c.rc[1], 0);
  assert_int_equal(c.rc[2], 0);
  assert_int_equal(c.rc[3], 0);
  assert_int_equal(rc, PTO_ECANCELLED);
  assert_non_null(strstr(err.details, "cancelled"));
  assert_true(after_ms < 1500.0);     /* the running task's 400 ms, and slack */
  assert_true(all_is(&c.x[1], 1.0f)); /* the running task finished */
  for (int i = 2; i <= CANCEL_CHAIN; i++)
    assert_true(all_is(&c.x[i], SENTINEL)); /* none started after the cancel */
  assert_true(all_is(&c.out, SENTINEL));    /* the waiting kernel gave up */
  /* no run: nothing to cancel, the next run is its own */
  assert_int_equal(pto_node_cancel(n), 0);
  assert_int_equal(pto_node_cancel(NULL), PTO_EINVAL);
  memset(c.rc, 0, sizeof c.rc);
  for (int i = 0; i <= CANCEL_CHAIN; i++)
    for (int j = 0; j < N; j++)
      pto_tensor_f32(&c.x[i])[j] = i ? SENTINEL : 5.0f;
  rc = pto_node_run(n, chain_run, &c, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  assert_int_equal(c.rc[2], 0);
  assert_true(all_is(&c.x[2], 7.0f));
  /* the orchestration cancels its own run: its next submit is refused */
  memset(c.rc, 0, sizeof c.rc);
  c.from_orch = true;
  c.x[1] = vec(n, SENTINEL);
  rc = pto_node_run(n, cancel_run, &c, &err);
  printf("cancelled by its orchestration: submit %s; the run %s: %s\n", pto_status_name(c.rc[2]),
         pto_status_name(rc), err.details);
  assert_int_equal(c.rc[2], PTO_ECANCELLED);
  assert_int_equal(rc, PTO_ECANCELLED);
  assert_true(all_is(&c.x[1], SENTINEL));
  pto_node_destroy(n);
}

/* A cancel while chip kernels compute and poll pto_kctx_cancelled: on each
 * chip a task of POLL_BLOCKS blocks (two run at once, on the chip's two
 * AIV cores) computes until the absolute time POLL_BOUND_MS after the
 * run's start unless cancelled. */
#define POLL_BOUND_MS 4000
#define POLL_BLOCKS   6

typedef struct poller {
  pto_node *n;
  pto_tensor out[2], x, y; /* out[c]: chip c's blocks; y = x + 1 on chip 0 */
  int rc[3];
  int blocks;
  uint64_t deadline_ns, cancel_ns;
  bool add; /* also the add task (the run after the cancel) */
} poller;

static int sub_poll(pto_node_orch *no, int chip, const pto_tensor *out, int blocks,
                    uint64_t deadline_ns) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, out);
  dist_scalars(&a, K_POLL, 1, blocks);
  pto_args_scalar(&a, deadline_ns);
  return pto_node_submit(no, chip, dist_chip_orch, &a, NULL);
}

static void poll_run(pto_node_orch *no, void *arg) {
  poller *p = arg;
  for (int c = 0; c < 2; c++)
    p->rc[c] = sub_poll(no, c, &p->out[c], p->blocks, p->deadline_ns);
  if (p->add) p->rc[2] = sub_add(no, 0, &p->x, &p->y, 1, 0, NULL);
}

static void *cancel_polling(void *arg) {
  poller *p = arg;
  sleep_ms(200); /* the first blocks of both chips compute */
  p->cancel_ns = pto_now_ns();
  p->rc[2] = pto_node_cancel(p->n);
  return NULL;
}

/* How many of out's first `blocks` elements are v. */
static int count_is(const pto_tensor *t, int blocks, float v) {
  int k = 0;
  for (int b = 0; b < blocks; b++)
    k += pto_tensor_f32(t)[b] == v;
  return k;
}

/* p for a run of `blocks` polling blocks per chip on n, every output
 * SENTINEL, the kernels' bound bound_ms from now; returns now. */
static uint64_t poll_setup(poller *p, pto_node *n, int blocks, uint64_t bound_ms) {
  memset(p, 0, sizeof *p);
  p->n = n;
  for (int c = 0; c < 2; c++)
    p->out[c] = vec(n, SENTINEL);
  p->blocks = blocks;
  uint64_t t0 = pto_now_ns();
  p->deadline_ns = t0 + bound_ms * 1000000u;
  return t0;
}

/* A run on n of two polling blocks per chip (100 ms each) and an add,
 * after a cancelled or failed one: nothing of that reaches it, its
 * kernels run to their bound uncancelled and its data is right. Destroys
 * n. */
static void run_whole_after(pto_node *n) {
  poller p;
  poll_setup(&p, n, 2, 100);
  p.x = vec(n, 5.0f);
  p.y = vec(n, SENTINEL);
  p.add = true;
  pto_error_info err;
  int rc = pto_node_run(n, poll_run, &p, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, 0);
  assert_int_equal(p.rc[0] | p.rc[1] | p.rc[2], 0);
  for (int c = 0; c < 2; c++)
    assert_int_equal(count_is(&p.out[c], 2, POLL_BOUND), 2);
  assert_true(all_is(&p.y, 6.0f));
  pto_node_destroy(n);
}

/* pto_node_cancel while both chips' kernels compute and poll
 * pto_kctx_cancelled: it turns true in them (the node's cancel word of
 * the task they run), so the run returns PTO_ECANCELLED at once, not when
 * the kernels reach their bound (POLL_BOUND_MS); each chip's run stops
 * then (its other blocks do not start). The next run is whole: its
 * kernels run to their bound uncancelled and its data is right. */
static void test_cancel_polling_kernels(void **state) {
  (void)state;
  pto_node *n = make_node();
  poller p;
  uint64_t t0 = poll_setup(&p, n, POLL_BLOCKS, POLL_BOUND_MS);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, cancel_polling, &p), 0);
  pto_error_info err;
  int rc = pto_node_run(n, poll_run, &p, &err);
  uint64_t end = pto_now_ns();
  pthread_join(th, NULL);
  double after_ms = (double)(end - p.cancel_ns) / 1e6;
  printf("cancelled %.0f ms into polling kernels (bound %d ms): the run returned %.0f ms later: "
         "%s: %s\n",
         (double)(p.cancel_ns - t0) / 1e6, POLL_BOUND_MS, after_ms, pto_status_name(rc),
         err.details);
  for (int c = 0; c < 2; c++)
    printf("chip %d: %d blocks saw the cancel, %d reached the bound, %d did not start\n", c,
           count_is(&p.out[c], POLL_BLOCKS, POLL_CANCELLED),
           count_is(&p.out[c], POLL_BLOCKS, POLL_BOUND),
           count_is(&p.out[c], POLL_BLOCKS, SENTINEL));
  assert_int_equal(p.rc[0], 0);
  assert_int_equal(p.rc[1], 0);
  assert_int_equal(p.rc[2], 0);
  assert_int_equal(rc, PTO_ECANCELLED);
  assert_non_null(strstr(err.details, "cancelled"));
  assert_true(after_ms < 1000.0); /* before: the bound's rest, about 3800 ms */
  for (int c = 0; c < 2; c++) {
    assert_int_equal(count_is(&p.out[c], POLL_BLOCKS, POLL_BOUND), 0);
    assert_true(count_is(&p.out[c], POLL_BLOCKS, POLL_CANCELLED) >= 1);
    /* the chip's run stopped: its blocks not started by then never did */
    assert_true(count_is(&p.out[c], POLL_BLOCKS, SENTINEL) >= 1);
  }
  /* the next run: nothing of the cancel reaches it */
  run_whole_after(n);
}

/* ---- the node stops its chips (it failed) ---- */

#define STOP_TASK_MS 300 /* task_timeout_ms: the polling tasks outlive it */

/* The node fails while both chips' kernels compute and poll
 * pto_kctx_cancelled (bound POLL_BOUND_MS): their tasks outlive
 * task_timeout_ms (PTO_ECONTROL_TIMEOUT). Without mpirun the chips are
 * processes, killed at once. Under mpirun chip 0 is a thread of rank 0,
 * which the failed node stops and joins before it goes on: its kernels
 * see pto_kctx_cancelled true (the stop, written as a cancel of the frame
 * the chip runs), so the run returns at once, chip 0's kernels having
 * ended and its blocks not started never started. The failed node's next
 * run is refused at once with its error; without mpirun a node made again
 * on the same devices runs whole, its kernels to their bound uncancelled.
 * Under mpirun the failed node's destroy ends the job (MPI_Abort): the
 * test says "verified" before it (tests/mpi/node.cmake, mpi.node_stop). */
static void test_stop_polling_kernels(void **state) {
  (void)state;
  pto_node *n = make_node_cfg(0, STOP_TASK_MS);
  bool mpi = n->mpi; /* chip 0 is a thread of this process */
  poller p;
  uint64_t t0 = poll_setup(&p, n, POLL_BLOCKS, POLL_BOUND_MS);
  pto_error_info err;
  int rc = pto_node_run(n, poll_run, &p, &err);
  uint64_t end = pto_now_ns();
  double after_ms = (double)(end - t0) / 1e6 - STOP_TASK_MS;
  printf("%s: the node failed %d ms into polling kernels (bound %d ms): the run returned %.0f "
         "ms later: %s: %s\n",
         mpi ? "under mpirun" : "forked chips", STOP_TASK_MS, POLL_BOUND_MS, after_ms,
         pto_status_name(rc), err.details);
  for (int c = 0; c < 2; c++)
    printf("chip %d: %d blocks saw the stop, %d reached the bound, %d not ended or not started\n",
           c, count_is(&p.out[c], POLL_BLOCKS, POLL_CANCELLED),
           count_is(&p.out[c], POLL_BLOCKS, POLL_BOUND),
           count_is(&p.out[c], POLL_BLOCKS, SENTINEL));
  assert_int_equal(p.rc[0] | p.rc[1], 0);
  assert_int_equal(rc, PTO_ECONTROL_TIMEOUT);
  assert_non_null(strstr(err.details, "did not finish node task"));
  assert_true(after_ms < 1000.0); /* before, under mpirun: 2000 ms (the failed node's wait) */
  for (int c = 0; c < 2; c++)
    assert_int_equal(count_is(&p.out[c], POLL_BLOCKS, POLL_BOUND), 0);
  if (mpi) { /* chip 0 ended its kernels; chip 1 is rank 1's, which the job's end ends */
    assert_true(count_is(&p.out[0], POLL_BLOCKS, POLL_CANCELLED) >= 1);
    assert_true(count_is(&p.out[0], POLL_BLOCKS, SENTINEL) >= 1);
  }
  /* the failed node's next run: refused at once with its error */
  uint64_t t1 = pto_now_ns();
  pto_error_info err2;
  rc = pto_node_run(n, poll_run, &p, &err2);
  double next_ms = (double)(pto_now_ns() - t1) / 1e6;
  printf("the next run: %s after %.1f ms: %s\n", pto_status_name(rc), next_ms, err2.details);
  assert_int_equal(rc, PTO_ECONTROL_TIMEOUT);
  assert_string_equal(err2.details, err.details);
  assert_true(next_ms < 100.0);
  if (mpi) {
    printf("node stop under mpirun: chip 0's polling kernels saw it: verified\n");
    fflush(stdout);
    pto_node_destroy(n); /* ends the job (MPI_Abort): the node failed */
    return;
  }
  pto_node_destroy(n);
  /* a node made again on the same devices runs whole */
  run_whole_after(make_node());
}

/* argv[1], if given, runs only the tests matching that pattern (the mpirun
 * variant, tests/mpi/node.cmake). */
int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raw_host_chip_host),
      cmocka_unit_test(test_war_waw_host_over_chip_reader),
      cmocka_unit_test(test_poison_chip_failure),
      cmocka_unit_test(test_poison_host_failure),
      cmocka_unit_test(test_first_root_error_wins),
      cmocka_unit_test(test_host_task_own_code),
      cmocka_unit_test(test_host_task_says_why),
      cmocka_unit_test(test_host_memory_kept_past_destroy),
      cmocka_unit_test(test_group_ranks_wait_on_each_other),
      cmocka_unit_test(test_independent_tasks_on_two_chips),
      cmocka_unit_test(test_run_after_failed_run),
      cmocka_unit_test(test_calls_from_another_thread_refused),
      cmocka_unit_test(test_orch_used_after_its_run),
      cmocka_unit_test(test_orch_of_an_earlier_run_in_the_next),
      cmocka_unit_test(test_two_threads_run_at_once),
      cmocka_unit_test(test_destroy_at_run_start),
      cmocka_unit_test(test_calls_from_another_thread_after_the_orchestration),
      cmocka_unit_test(test_host_alloc_shared_by_processes_and_threads),
      cmocka_unit_test(test_skip_read_check_from_another_thread),
      cmocka_unit_test(test_cancel_a_run),
      cmocka_unit_test(test_cancel_polling_kernels),
      cmocka_unit_test(test_stop_polling_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
