/* test_node_limits.c — the node runtime at its limits and under bad input:
 * checked size arithmetic of host memory, every public function of
 * pto/node.h and pto/comm.h called with NULL or invalid arguments (a
 * status, never a crash), the default deadline of a host sub-worker task,
 * a parent that sleeps (not spins) while its children start, and the node
 * TensorMap's back-pressure (more live tasks than entries) without
 * quadratic scans.
 *
 * The nodes lease device ids of their own (TEST_DEV0, TEST_DEV0 + 1). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../unit/resident.h"
#include "node_create.h"

#include "pto/coll.h"
#include "pto/comm.h"
#include "pto/node.h"

#define TEST_DEV0 52

enum { K_AUDIT = 0 };

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Page faults of the calling thread so far. */
static long thread_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the comm audit kernel (runs in chip rank 0) ----
 *
 * Calls every pto/comm.h function with NULL or invalid arguments and
 * records each return value in tensor 0 (int32, AUDIT_CALLS elements);
 * scalar 0 is a valid domain over chips 0 and 1, tensor 1 its "sig". */
#define AUDIT_CALLS 40

static int audit_kernel(const pto_kctx *ctx) {
  int32_t *rec = (int32_t *)ctx->tensors[0].buf;
  const pto_tensor *sig = &ctx->tensors[1];
  pto_domain dom = (pto_domain)ctx->scalars[0], bad = dom + 1000;
  pto_comm *c = pto_kctx_comm(ctx);
  int64_t one = 1, neg = -1;
  pto_tensor out, empty;
  memset(&empty, 0, sizeof empty);
  int32_t v = 0;
  int k = 0;
  pto_xfer_opts bad_opts = {.chunk_rows = -1, .chunk_cols = -1};
  /* 999 marks the call in progress: a crash leaves it there */
#define AUDIT(call) (rec[k] = 999, rec[k] = (call), k++)
  AUDIT(pto_comm_rank(NULL, dom));
  AUDIT(pto_comm_rank(c, bad));
  AUDIT(pto_comm_size(NULL, dom));
  AUDIT(pto_comm_size(c, bad));
  AUDIT(pto_comm_window_tensor(NULL, dom, 0, "sig", PTO_I64, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, bad, 0, "sig", PTO_I64, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, NULL, PTO_I64, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "nope", PTO_I64, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "sig", PTO_I64, 1, NULL, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "sig", PTO_I64, 1, &one, NULL));
  AUDIT(pto_comm_window_tensor(c, dom, 9, "sig", PTO_I64, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "sig", (pto_dtype)99, 1, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "sig", PTO_I64, 0, &one, &out));
  AUDIT(pto_comm_window_tensor(c, dom, 0, "sig", PTO_I64, 1, &neg, &out));
  AUDIT(pto_remote_store(ctx, dom, 1, NULL, sig));
  AUDIT(pto_remote_store(ctx, dom, 1, sig, NULL));
  AUDIT(pto_remote_store(ctx, dom, 7, sig, sig));
  AUDIT(pto_remote_store(ctx, bad, 1, sig, sig));
  AUDIT(pto_remote_store(ctx, dom, 1, &empty, &empty));
  AUDIT(pto_remote_store_add(ctx, dom, 1, NULL, NULL));
  AUDIT(pto_remote_store_add(ctx, dom, -1, sig, sig));
  AUDIT(pto_remote_load(ctx, dom, 1, NULL, NULL));
  AUDIT(pto_remote_load(ctx, dom, 1, &empty, sig));
  AUDIT(pto_put(ctx, dom, 1, NULL, NULL, NULL));
  AUDIT(pto_put(ctx, dom, 1, sig, sig, &bad_opts));
  AUDIT(pto_get(ctx, dom, 1, NULL, NULL, NULL));
  AUDIT(pto_get(ctx, dom, 9, sig, sig, NULL));
  AUDIT(pto_notify(ctx, dom, 1, NULL, PTO_SIGNAL_ADD, 1));
  AUDIT(pto_notify(ctx, dom, 1, sig, (pto_signal_op)42, 1));
  AUDIT(pto_notify(ctx, dom, 5, sig, PTO_SIGNAL_ADD, 1));
  AUDIT(pto_signal_wait(ctx, dom, NULL, PTO_CMP_GE, 1, 10));
  AUDIT(pto_signal_wait(ctx, dom, sig, (pto_cmp)42, 1, 10));
  AUDIT(pto_signal_wait(ctx, bad, sig, PTO_CMP_GE, 1, 10));
  AUDIT(pto_signal_read(ctx, dom, NULL, &v));
  AUDIT(pto_signal_read(ctx, dom, sig, NULL));
  AUDIT(pto_quiet(ctx, bad));
  AUDIT(pto_barrier(ctx, bad));
  AUDIT(pto_comm_chip(NULL) == -1 ? -1 : 1);
  rec[k++] = pto_comm_rank(c, dom) == 0 ? -1 : 1; /* the valid call still works */
  AUDIT(pto_signal_read(ctx, dom, sig, &v) == 0 ? -1 : 1);
#undef AUDIT
  return k == AUDIT_CALLS ? 0 : PTO_EFATAL;
}

typedef struct init_arg {
  int64_t sleep_ms; /* chip_init sleeps this long (start-up test) */
} init_arg;

static int limits_init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  const init_arg *ia = arg;
  if (ia && ia->sleep_ms > 0) sleep_ms(ia->sleep_ms);
  int id = -1;
  if (pto_kernel_register_aiv(chip, "audit", audit_kernel, &id)) return PTO_EFATAL;
  return id == K_AUDIT ? 0 : PTO_EFATAL;
}

static void base_config(pto_node_config *cfg) {
  static const int devs[2] = {TEST_DEV0, TEST_DEV0 + 1};
  pto_node_config_init(cfg);
  cfg->nchips = 2;
  cfg->device_ids = devs;
  cfg->nworkers = 2;
  cfg->chip.clusters = 1;
  cfg->chip.schedulers = 1;
  cfg->chip.task_slots = 64;
  cfg->chip.heap_bytes = 1u << 20;
  cfg->chip.watchdog_ms = 5000;
  cfg->chip_init = limits_init;
  cfg->host_bytes = 4u << 20;
  cfg->window_space = 16u << 20;
  cfg->startup_timeout_ms = 20000;
  cfg->control_timeout_ms = 5000;
  cfg->wait_timeout_ms = 3000;
  cfg->lease_wait_ms = 10000; /* another run of this file may hold them */
  cfg->quiet = true;
}

static pto_node *make_node_cfg(const pto_node_config *cfg) { return node_create_ok(cfg); }

/* ---- item: size arithmetic of host memory ---- */

static void test_host_alloc_size_overflow(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  pto_node *n = make_node_cfg(&cfg);
  unsigned char *a = pto_node_host_alloc(n, 100);
  assert_non_null(a);
  /* an end offset that wraps must not pass the bound check */
  void *huge = pto_node_host_alloc(n, SIZE_MAX - 32);
  if (huge) fprintf(stderr, "host_alloc(SIZE_MAX - 32) returned %p, want NULL\n", huge);
  assert_null(huge);
  assert_null(pto_node_host_alloc(n, SIZE_MAX));
  assert_null(pto_node_host_alloc(n, cfg.host_bytes + 1));
  /* and it must not have moved the allocator: the next block follows a */
  unsigned char *b = pto_node_host_alloc(n, 100);
  if (b != a + 128) fprintf(stderr, "next block at a + %td, want a + 128\n", b - a);
  assert_ptr_equal(b, a + 128);
  /* a host tensor whose byte size overflows size_t is refused, not
   * allocated with the wrapped size */
  pto_tensor t;
  const int64_t wrap[3] = {INT64_C(1) << 31, INT64_C(1) << 31, 8}; /* 2^65 f32 elements */
  int rc = pto_node_host_tensor(n, PTO_F32, 3, wrap, &t);
  if (rc != PTO_ENOMEM && rc != PTO_EINVAL)
    fprintf(stderr, "host_tensor(2^65 elements) returned %s, want ENOMEM or EINVAL\n",
            pto_status_name(rc));
  assert_true(rc == PTO_ENOMEM || rc == PTO_EINVAL);
  const int64_t big[2] = {INT64_C(1) << 40, INT64_C(1) << 20}; /* fits size_t, not the memory */
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 2, big, &t), PTO_ENOMEM);
  unsigned char *c = pto_node_host_alloc(n, 1);
  assert_ptr_equal(c, a + 256);
  pto_node_destroy(n);
}

/* Window buffer sizes whose sum wraps must not make a small window. */
static void huge_domain_orch(pto_node_orch *no, void *arg) {
  int *rc = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer one[] = {{"a", SIZE_MAX - 8}};
  const size_t q = (size_t)1 << 62;
  const pto_window_buffer four[] = {{"a", q}, {"b", q}, {"c", q}, {"d", q}};
  pto_domain dom;
  rc[0] = pto_node_domain_create(no, chips, 2, one, 1, &dom);
  rc[1] = pto_node_domain_create(no, chips, 2, four, 4, &dom);
}

static void test_domain_size_overflow(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  pto_node *n = make_node_cfg(&cfg);
  int rc[2] = {0, 0};
  pto_error_info err;
  pto_node_run(n, huge_domain_orch, rc, &err);
  pto_node_destroy(n);
  for (int i = 0; i < 2; i++)
    if (rc[i] != PTO_ENOMEM)
      fprintf(stderr, "domain %d of wrapping size: %s, want PTO_ENOMEM\n", i,
              pto_status_name(rc[i]));
  assert_int_equal(rc[0], PTO_ENOMEM);
  assert_int_equal(rc[1], PTO_ENOMEM);
}

/* Deadlines too far away to represent mean none; they must not wrap into
 * the past (a node that could never start). */
static void test_huge_timeouts(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  cfg.startup_timeout_ms = INT64_MAX;
  cfg.control_timeout_ms = INT64_MAX;
  cfg.host_task_timeout_ms = INT64_MAX;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rc)
    fprintf(stderr, "create with INT64_MAX timeouts: %s: %s\n", pto_status_name(rc), err.details);
  if (n) pto_node_destroy(n);
  assert_int_equal(rc, 0);
}

/* ---- item: NULL and invalid arguments of every public function ---- */

static void noop_orch(pto_node_orch *no, void *arg) {
  (void)no;
  (void)arg;
}
static void noop_chip(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}
static int noop_host(const pto_args *a, void *arg) {
  (void)a;
  (void)arg;
  return 0;
}

typedef struct audit_run {
  pto_node *n;
  int rc[40];
  int nrc;
  pto_tensor rec, sig;
  pto_node *orch_node;
} audit_run;

static void audit_orch(pto_node_orch *no, void *arg) {
  audit_run *a = arg;
  int k = 0;
  float buf[64];
  int64_t one = 1, four = 4;
  pto_tensor t, out;
  a->orch_node = pto_node_orch_node(no);
  assert_int_equal(pto_node_host_tensor(a->n, PTO_F32, 1, &four, &t), 0);
  /* orchestration-side calls with a NULL handle */
  a->rc[k++] = pto_node_submit(NULL, 0, noop_chip, NULL, NULL);
  a->rc[k++] = pto_node_submit_group(NULL, (const int[]){0}, 1, noop_chip, NULL, NULL);
  a->rc[k++] = pto_node_submit_host(NULL, 0, noop_host, NULL, NULL, NULL);
  a->rc[k++] = pto_node_wait_all(NULL);
  a->rc[k++] = pto_node_read(NULL, &t, buf);
  a->rc[k++] = pto_node_orch_node(NULL) == NULL ? PTO_EINVAL : 0;
  a->rc[k++] = pto_node_domain_create(NULL, (const int[]){0}, 1, NULL, 0, NULL);
  a->rc[k++] = pto_node_window_tensor(NULL, 1, 0, "sig", PTO_I64, 1, &one, &out);
  /* invalid arguments with a valid handle */
  a->rc[k++] = pto_node_read(no, NULL, buf);
  a->rc[k++] = pto_node_read(no, &t, NULL);
  pto_tensor bogus = t;
  bogus.ndims = 0;
  a->rc[k++] = pto_node_read(no, &bogus, buf);
  a->rc[k++] = pto_node_window_tensor(no, 1234, 0, "sig", PTO_I64, 1, &one, &out);
  a->rc[k++] = pto_node_submit(no, 0, NULL, NULL, NULL);
  a->rc[k++] = pto_node_submit(no, -1, noop_chip, NULL, NULL);
  a->rc[k++] = pto_node_submit_group(no, NULL, 1, noop_chip, NULL, NULL);
  a->rc[k++] = pto_node_submit_group(no, (const int[]){0, 0}, 2, noop_chip, NULL, NULL);
  a->rc[k++] = pto_node_submit_host(no, 5, noop_host, NULL, NULL, NULL);
  a->rc[k++] = pto_node_submit_host(no, 0, NULL, NULL, NULL, NULL);
  pto_args args;
  pto_args_init(&args);
  pto_args_input(&args, &bogus); /* an invalid view as a task argument */
  a->rc[k++] = pto_node_submit_host(no, 0, noop_host, NULL, &args, NULL);
  static float private_mem[4]; /* not node memory: the children never see it */
  pto_tensor priv;
  assert_int_equal(pto_tensor_init(&priv, private_mem, sizeof private_mem, PTO_F32, 1, &four), 0);
  pto_args_init(&args);
  pto_args_input(&args, &priv);
  a->rc[k++] = pto_node_submit(no, 0, noop_chip, &args, NULL);
  a->rc[k++] = pto_node_domain_create(no, (const int[]){0}, 1, NULL, 0, NULL);
  a->rc[k++] = pto_node_domain_create(no, (const int[]){5}, 1, NULL, 0, &(pto_domain){0});
  a->nrc = k;
}

/* Chip orchestration of the comm audit: one block of K_AUDIT. */
static void audit_chip(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t->args->tensors[0]);
  pto_args_inout(&a, &t->args->tensors[1]);
  pto_args_scalar(&a, t->args->scalars[0]);
  pto_submit(o, K_AUDIT, &a, NULL, NULL);
}

static void audit_comm_orch(pto_node_orch *no, void *arg) {
  audit_run *a = arg;
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom = 0;
  a->rc[0] = pto_node_domain_create(no, (const int[]){0, 1}, 2, bufs, 1, &dom);
  int64_t one = 1;
  a->rc[1] = pto_node_window_tensor(no, dom, 0, "sig", PTO_I64, 1, &one, &a->sig);
  pto_args args;
  pto_args_init(&args);
  pto_args_output_existing(&args, &a->rec);
  pto_args_inout(&args, &a->sig);
  pto_args_scalar(&args, (uint64_t)dom);
  a->rc[2] = pto_node_submit(no, 0, audit_chip, &args, NULL);
  a->rc[3] = pto_node_wait_all(no);
}

/* Host memory or window space larger than the address space: the create
 * fails naming the field, its size and the system's reason (before: "node:
 * cannot map shared memory: Cannot allocate memory", either way). */
static void test_huge_maps_named(void **state) {
  (void)state;
  for (int i = 0; i < 2; i++) {
    pto_node_config cfg;
    base_config(&cfg);
    const char *field = i ? "window_space" : "host_bytes";
    if (i)
      cfg.window_space = 1ull << 60;
    else
      cfg.host_bytes = 1ull << 60;
    pto_node *n = NULL;
    pto_error_info err;
    int rc = pto_node_create(&cfg, &n, &err);
    if (rc == 0) pto_node_destroy(n);
    const char *want[] = {field, "1152921504606846976 bytes", "mmap", "Cannot allocate memory"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
      if (rc != PTO_ESYSTEM || !strstr(err.details, want[k]))
        fail_msg("%s 2^60: %s \"%s\", want PTO_ESYSTEM naming \"%s\"", field, pto_status_name(rc),
                 err.details, want[k]);
  }
}

static void test_null_and_invalid_arguments(void **state) {
  (void)state;
  pto_node_config cfg;
  pto_node *n = NULL;
  pto_error_info err;
  /* outside a node: nothing to crash on */
  pto_node_config_init(NULL);
  pto_node_destroy(NULL);
  assert_null(pto_node_host_alloc(NULL, 64));
  assert_null(pto_node_shm_prefix(NULL));
  int pids[4];
  assert_int_equal(pto_node_child_pids(NULL, pids, 4), PTO_EINVAL);
  int64_t four = 4;
  pto_tensor t;
  assert_int_equal(pto_node_host_tensor(NULL, PTO_F32, 1, &four, &t), PTO_EINVAL);
  assert_int_equal(pto_node_run(NULL, noop_orch, NULL, &err), PTO_EINVAL);
  assert_int_equal(pto_node_create(NULL, &n, &err), PTO_EINVAL);
  base_config(&cfg);
  assert_int_equal(pto_node_create(&cfg, NULL, &err), PTO_EINVAL);
  /* invalid configs: each is refused at once with details naming what was wrong */
  static const int neg_dev[2] = {TEST_DEV0, -3};
  int rc;
  for (int i = 0; i < 8; i++) {
    base_config(&cfg);
    const char *want = "";
    switch (i) {
    case 0: cfg.nchips = 0, want = "nchips"; break;
    case 1: cfg.nchips = PTO_NODE_MAX_CHIPS + 1, want = "nchips"; break;
    case 2: cfg.nworkers = -1, want = "nworkers"; break;
    case 3: cfg.nworkers = PTO_NODE_MAX_WORKERS + 1, want = "nworkers"; break;
    case 4: cfg.device_ids = neg_dev, want = "device id -3"; break;
    case 5: cfg.host_bytes = 0, want = "host_bytes"; break;
    /* before: accepted, then 0 timed out at once on shared windows and meant the default on
     * MPI's records; a negative value meant none on one path and the default on the other */
    case 6: cfg.wait_timeout_ms = 0, want = "wait_timeout_ms is 0"; break;
    case 7: cfg.wait_timeout_ms = -1, want = "wait_timeout_ms is -1"; break;
    }
    n = NULL;
    rc = pto_node_create(&cfg, &n, &err);
    if (rc != PTO_EINVAL || !strstr(err.details, want))
      fprintf(stderr, "bad config %d: %s \"%s\", want PTO_EINVAL naming \"%s\"\n", i,
              pto_status_name(rc), err.details, want);
    if (rc == 0) pto_node_destroy(n);
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, want));
  }
  /* a live node: NULL and invalid arguments during a run */
  base_config(&cfg);
  n = make_node_cfg(&cfg);
  assert_int_equal(pto_node_child_pids(n, NULL, 4), PTO_EINVAL);
  assert_int_equal(pto_node_child_pids(n, pids, -1), PTO_EINVAL);
  assert_int_equal(pto_node_child_pids(n, pids, 4), 4);
  assert_null(pto_node_host_alloc(n, 0));
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &four, NULL), PTO_EINVAL);
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, NULL, &t), PTO_EINVAL);
  assert_int_equal(pto_node_host_tensor(n, (pto_dtype)77, 1, &four, &t), PTO_EINVAL);
  assert_int_equal(pto_node_run(n, NULL, NULL, &err), PTO_EINVAL);
  audit_run a;
  memset(&a, 0, sizeof a);
  a.n = n;
  rc = pto_node_run(n, audit_orch, &a, &err);
  assert_int_equal(rc, PTO_EINVAL); /* the first refused call fails the run */
  assert_ptr_equal(a.orch_node, n);
  assert_int_equal(a.nrc, 22);
  for (int i = 0; i < a.nrc; i++) {
    if (a.rc[i] >= 0)
      fprintf(stderr, "node call %d returned %d, want a PTO_E* status\n", i, a.rc[i]);
    assert_true(a.rc[i] < 0);
  }
  /* every pto/comm.h function, outside a kernel (no context) */
  int64_t one = 1;
  pto_tensor out;
  int32_t v;
  assert_null(pto_kctx_comm(NULL));
  assert_int_equal(pto_comm_chip(NULL), -1);
  assert_true(pto_comm_rank(NULL, 1) < 0);
  assert_true(pto_comm_size(NULL, 1) < 0);
  assert_true(pto_comm_window_tensor(NULL, 1, 0, "sig", PTO_I64, 1, &one, &out) < 0);
  assert_true(pto_remote_store(NULL, 1, 0, &t, &t) < 0);
  assert_true(pto_remote_store_add(NULL, 1, 0, &t, &t) < 0);
  assert_true(pto_remote_load(NULL, 1, 0, &t, &t) < 0);
  assert_true(pto_put(NULL, 1, 0, &t, &t, NULL) < 0);
  assert_true(pto_get(NULL, 1, 0, &t, &t, NULL) < 0);
  assert_true(pto_notify(NULL, 1, 0, &t, PTO_SIGNAL_ADD, 1) < 0);
  assert_true(pto_signal_wait(NULL, 1, &t, PTO_CMP_GE, 1, 10) < 0);
  assert_true(pto_signal_read(NULL, 1, &t, &v) < 0);
  assert_true(pto_quiet(NULL, 1) < 0);
  assert_true(pto_barrier(NULL, 1) < 0);
  /* ... and inside one, with a real context but bad arguments */
  memset(&a, 0, sizeof a);
  a.n = n;
  int64_t calls = AUDIT_CALLS;
  assert_int_equal(pto_node_host_tensor(n, PTO_I32, 1, &calls, &a.rec), 0);
  for (int i = 0; i < AUDIT_CALLS; i++)
    ((int32_t *)a.rec.buf)[i] = 12345;
  rc = pto_node_run(n, audit_comm_orch, &a, &err);
  fprintf(stderr, "comm audit run: %s: %s\n", pto_status_name(rc), err.details);
  /* the first refused operation's details, in the kernel's own call */
  assert_non_null(strstr(err.details, "window_tensor: no domain"));
  assert_int_equal(a.rc[0], 0);
  assert_int_equal(a.rc[1], 0);
  assert_int_equal(a.rc[2], 0);
  bool all_refused = true;
  for (int i = 0; i < AUDIT_CALLS; i++) {
    int32_t r = ((const int32_t *)a.rec.buf)[i];
    if (r >= 0) fprintf(stderr, "comm call %d returned %d, want a PTO_E* status\n", i, r);
    all_refused = all_refused && r < 0;
  }
  pto_node_destroy(n);
  assert_true(rc < 0 && rc != PTO_ECHIP_DIED); /* the ops failed; the chip lives */
  assert_true(all_refused);
}

/* ---- item: a refused orchestration-side call fails the run, named ----
 * Before, pto_node_window_tensor and the node collectives returned a code
 * and left the run to succeed with nothing named (a misuse audit): a
 * caller that skipped the code got PTO_OK with its outputs unwritten. */

typedef struct refused_call {
  int which, rc;
  pto_tensor v[2];
} refused_call;

static void refused_orch(pto_node_orch *no, void *arg) {
  refused_call *c = arg;
  const pto_window_buffer bufs[] = {{"sig", 8}};
  pto_domain dom = 0;
  assert_int_equal(pto_node_domain_create(no, (const int[]){0, 1}, 2, bufs, 1, &dom), 0);
  int64_t four = 4;
  pto_tensor w;
  switch (c->which) {
  case 0:
    c->rc = pto_node_allreduce(no, dom, "nope", c->v, c->v, PTO_RED_SUM, PTO_COLL_AUTO);
    break;
  case 1: c->rc = pto_node_window_tensor(no, dom, 0, "sig", PTO_I64, 1, &four, &w); break;
  case 2: c->rc = pto_node_broadcast(no, dom, "sig", c->v, c->v, 5); break;
  case 3: c->rc = pto_node_window_tensor(no, dom, 2, "sig", PTO_I64, 1, &four, &w); break;
  case 4: c->rc = pto_node_submit(no, 2, audit_chip, NULL, NULL); break;
  case 5: c->rc = pto_node_domain_create(no, (const int[]){0, 0}, 2, bufs, 1, &dom); break;
  case 6: {
    const pto_window_buffer twice[] = {{"a", 8}, {"a", 16}};
    c->rc = pto_node_domain_create(no, (const int[]){0, 1}, 2, twice, 2, &dom);
    break;
  }
  }
}

static void test_refused_calls_fail_the_run_named(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  pto_node *n = make_node_cfg(&cfg);
  static const char *const want[] = {"has no window buffer named 'nope'",
                                     "window_tensor: a view of window buffer 'sig' of domain",
                                     "node broadcast: root 5 is outside domain",
                                     "window_tensor: rank 2 is outside domain",
                                     "submit: chip 2: the node's chips are 0..1",
                                     "domain_create: chip 0 is named twice (chips[0], chips[1])",
                                     "domain_create: window buffers 0 and 1 are both named 'a'"};
  for (int k = 0; k < 7; k++) {
    refused_call c;
    memset(&c, 0, sizeof c);
    c.which = k;
    int64_t four = 4;
    for (int r = 0; r < 2; r++)
      assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &four, &c.v[r]), 0);
    pto_error_info err;
    int rc = pto_node_run(n, refused_orch, &c, &err);
    if (rc >= 0 || !strstr(err.details, want[k]))
      fprintf(stderr, "refused call %d: call %s, run %s: \"%s\", want \"%s\"\n", k,
              pto_status_name(c.rc), pto_status_name(rc), err.details, want[k]);
    assert_true(c.rc < 0);
    assert_int_equal(rc, c.rc);
    assert_non_null(strstr(err.details, want[k]));
    if (k == 1)
      assert_non_null(strstr(err.details, "it reaches byte 32 but the buffer has 8 bytes"));
    assert_int_equal(pto_node_run(n, noop_orch, NULL, &err), 0); /* and the node runs on */
  }
  pto_node_destroy(n);
}

/* ---- item: pto_node_destroy during the node's run is refused, named ----
 * Before, the orchestration's call freed the node under pto_node_run,
 * which then went on with it (a use after free: a crash, or a run ending
 * on freed memory). Now the call does nothing but fail the run, naming
 * it; the node runs on and is destroyed after the run. */

static void destroy_orch(pto_node_orch *no, void *arg) {
  (void)arg;
  pto_node_destroy(pto_node_orch_node(no));
}

static void test_destroy_during_run_refused(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  pto_node *n = make_node_cfg(&cfg);
  pto_error_info err;
  int rc = pto_node_run(n, destroy_orch, NULL, &err);
  fprintf(stderr, "destroy during the run: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "pto_node_destroy was called during the node's run"));
  assert_int_equal(pto_node_run(n, noop_orch, NULL, &err), 0); /* and the node runs on */
  pto_node_destroy(n);
}

/* ---- item: host sub-worker tasks have a deadline by default ---- */

static int host_forever(const pto_args *a, void *arg) {
  (void)a;
  (void)arg;
  for (;;)
    sleep_ms(1000);
  return 0;
}

static void forever_orch(pto_node_orch *no, void *arg) {
  *(int *)arg = pto_node_submit_host(no, 0, host_forever, NULL, NULL, NULL);
}

static void test_host_task_deadline(void **state) {
  (void)state;
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  if (cfg.host_task_timeout_ms < 0)
    fprintf(stderr, "default host_task_timeout_ms is %lld: no deadline\n",
            (long long)cfg.host_task_timeout_ms);
  assert_true(cfg.host_task_timeout_ms > 0 && cfg.host_task_timeout_ms <= 600000);
  base_config(&cfg);
  cfg.host_task_timeout_ms = 300;
  pto_node *n = make_node_cfg(&cfg);
  int sub = -1;
  pto_error_info err;
  double w0 = wall_s();
  int rc = pto_node_run(n, forever_orch, &sub, &err);
  double took = wall_s() - w0;
  fprintf(stderr, "%s after %.3f s: %s\n", pto_status_name(rc), took, err.details);
  pto_node_destroy(n);
  assert_int_equal(sub, 0);
  assert_int_equal(rc, PTO_ECONTROL_TIMEOUT);
  assert_non_null(strstr(err.details, "host worker 0"));
  assert_non_null(strstr(err.details, "host_task_timeout_ms"));
  assert_true(took >= 0.3 && took < 5.0);
}

/* ---- item: start-up sleeps ---- */

/* While the children take 0.5 s to start, the parent must sleep: its own
 * CPU time stays a small fraction of the wall time. */
static void test_startup_does_not_spin(void **state) {
  (void)state;
  static init_arg slow = {500};
  pto_node_config cfg;
  base_config(&cfg);
  cfg.chip_init_arg = &slow;
  double w0 = wall_s(), c0 = thread_cpu_s();
  pto_node *n = make_node_cfg(&cfg);
  double cpu = thread_cpu_s() - c0, wall = wall_s() - w0;
  fprintf(stderr, "start-up: %.3f s wall, %.3f s CPU in the parent thread\n", wall, cpu);
  pto_node_destroy(n);
  assert_true(wall >= 0.5);
  assert_true(cpu < 0.1 && cpu < 0.2 * wall);
}

/* ---- item: node TensorMap back-pressure, no quadratic scans ---- */

#define BP_COLS 1024

/* The writer: waits until the orchestrator sets *go (at most scalar 1
 * ms), then fills tensor 0 with scalar 0. */
static int bp_writer(const pto_args *a, void *arg) {
  _Atomic int *go = arg;
  for (int64_t i = 0; i < (int64_t)a->scalars[1] && !atomic_load(go); i++)
    sleep_ms(1);
  const pto_tensor *x = &a->tensors[0];
  for (int64_t i = 0; i < pto_tensor_numel(x); i++)
    pto_tensor_f32(x)[i] = (float)(int64_t)a->scalars[0];
  return 0;
}

/* A reader of one row: fails unless it sees the writer's value. */
static int bp_reader(const pto_args *a, void *arg) {
  (void)arg;
  const pto_tensor *row = &a->tensors[0];
  const float *p = pto_tensor_f32(row);
  float want = (float)(int64_t)a->scalars[0];
  return p[0] == want && p[row->shape[0] - 1] == want ? 0 : PTO_EFATAL;
}

typedef struct bp_run {
  pto_tensor x; /* [rows, BP_COLS] f32 */
  _Atomic int *go;
  int nreaders;
  int value;
  int64_t writer_ms; /* the writer runs after *go is set or this long */
  int fail_at;       /* first refused submit, -1 = none */
  int fail_rc;
  int wait_rc;
  double submit_cpu;  /* CPU time of the parent thread submitting the readers */
  long submit_faults; /* and its page faults meanwhile */
} bp_run;

static void bp_orch(pto_node_orch *no, void *arg) {
  bp_run *r = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &r->x);
  pto_args_scalar(&a, (uint64_t)r->value);
  pto_args_scalar(&a, (uint64_t)r->writer_ms);
  atomic_store(r->go, 0);
  r->fail_at = -1;
  int rc = pto_node_submit_host(no, 0, bp_writer, (void *)r->go, &a, NULL);
  if (rc) {
    r->fail_at = 0, r->fail_rc = rc;
    return;
  }
  long f0 = thread_faults();
  double c0 = thread_cpu_s();
  for (int i = 0; i < r->nreaders; i++) {
    int64_t st[2] = {i % r->x.shape[0], 0}, sh[2] = {1, BP_COLS}, cols = BP_COLS;
    pto_tensor v, row;
    pto_tensor_slice(&r->x, st, sh, &v);
    pto_tensor_reshape(&v, 1, &cols, &row);
    pto_args_init(&a);
    pto_args_input(&a, &row);
    pto_args_scalar(&a, (uint64_t)r->value);
    rc = pto_node_submit_host(no, -1, bp_reader, NULL, &a, NULL);
    if (rc) {
      r->fail_at = 1 + i, r->fail_rc = rc;
      break;
    }
  }
  r->submit_cpu = thread_cpu_s() - c0;
  r->submit_faults = thread_faults() - f0;
  atomic_store(r->go, 1);
  r->wait_rc = pto_node_wait_all(no);
}

static int bp_once(pto_node *n, bp_run *r, pto_error_info *err) {
  for (int64_t i = 0; i < pto_tensor_numel(&r->x); i++)
    pto_tensor_f32(&r->x)[i] = -1.0f;
  r->value++;
  int rc = pto_node_run(n, bp_orch, r, err);
  if (rc || r->fail_at >= 0)
    fprintf(stderr, "%d readers: run %s (%s); submit #%d refused with %s\n", r->nreaders,
            pto_status_name(rc), err->details, r->fail_at, pto_status_name(r->fail_rc));
  return rc;
}

static pto_node *bp_node(pto_node_config *cfg, int rows, bp_run *r) {
  cfg->nworkers = 2;
  cfg->host_bytes = 16u << 20;
  pto_node *n = make_node_cfg(cfg);
  memset(r, 0, sizeof *r);
  int64_t sh[2] = {rows, BP_COLS};
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 2, sh, &r->x), 0);
  r->go = pto_node_host_alloc(n, sizeof *r->go);
  assert_non_null(r->go);
  return n;
}

/* One slow writer, then 9000 readers of its output with the default
 * config: more live tasks than TensorMap entries (8192). Submission waits
 * for room instead of failing, and every reader sees the written data. */
static void test_tensormap_back_pressure_default(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  bp_run r;
  pto_node *n = bp_node(&cfg, 1024, &r);
  r.nreaders = 9000;
  r.writer_ms = 300; /* a slow writer: every reader is submitted behind it */
  pto_error_info err;
  double w0 = wall_s();
  int rc = bp_once(n, &r, &err);
  fprintf(stderr, "9000 readers behind one writer: %.3f s\n", wall_s() - w0);
  assert_int_equal(r.fail_at, -1);
  assert_int_equal(rc, 0);
  assert_int_equal(r.wait_rc, 0);
  pto_node_destroy(n);
}

/* The same with a small configured TensorMap: 64 entries, 600 readers. */
static void test_tensormap_back_pressure_configured(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  cfg.tensormap_entries = PTO_MAX_TENSOR_ARGS - 1;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "tensormap_entries"));
  cfg.tensormap_entries = 64;
  bp_run r;
  n = bp_node(&cfg, 64, &r);
  r.nreaders = 600;
  r.writer_ms = 100;
  rc = bp_once(n, &r, &err);
  pto_node_destroy(n);
  assert_int_equal(r.fail_at, -1);
  assert_int_equal(rc, 0);
  assert_int_equal(r.wait_rc, 0);
}

/* After a failure the TensorMap keeps the entries of every later task (so
 * that readers of the failed task's outputs are poisoned): once those fill
 * it, a submit is refused with the reason, never left waiting. */
static int host_fail_now(const pto_args *a, void *arg) {
  (void)a;
  (void)arg;
  return PTO_EFATAL;
}

typedef struct pin_run {
  pto_tensor x;
  int failed_rc, refused_at, refused_rc;
} pin_run;

static void pin_orch(pto_node_orch *no, void *arg) {
  pin_run *p = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &p->x);
  pto_node_submit_host(no, 0, host_fail_now, NULL, &a, NULL);
  p->failed_rc = pto_node_wait_all(no);
  p->refused_at = -1;
  for (int i = 0; i < 1000; i++) {
    pto_args_init(&a);
    pto_args_input(&a, &p->x);
    int rc = pto_node_submit_host(no, -1, noop_host, NULL, &a, NULL);
    if (rc) {
      p->refused_at = i, p->refused_rc = rc;
      break;
    }
  }
}

static void test_tensormap_full_after_failure(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  cfg.tensormap_entries = 64;
  pto_node *n = make_node_cfg(&cfg);
  pin_run p;
  memset(&p, 0, sizeof p);
  int64_t four = 4;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &four, &p.x), 0);
  pto_error_info err;
  int rc = pto_node_run(n, pin_orch, &p, &err);
  fprintf(stderr, "run: %s (%s); submit %d refused with %s\n", pto_status_name(rc), err.details,
          p.refused_at, pto_status_name(p.refused_rc));
  pto_node_destroy(n);
  assert_int_equal(p.failed_rc, PTO_EFATAL);
  assert_int_equal(rc, PTO_EFATAL); /* the root error stays the run's error */
  assert_true(p.refused_at > 0 && p.refused_at < 64);
  assert_int_equal(p.refused_rc, PTO_ETENSORMAP_OVERFLOW);
}

/* The task array holds about the live tasks, not every task of the run:
 * 12000 tasks (4.9 KiB of state each) behind a 64-entry TensorMap. */
static long rss_kib(void) {
  int64_t b = resident_bytes();
  return b < 0 ? 0 : (long)(b / 1024);
}

typedef struct mem_run {
  pto_tensor x;
  int ntasks, fail_at;
  long rss0, rss1;
} mem_run;

static void mem_orch(pto_node_orch *no, void *arg) {
  mem_run *m = arg;
  m->fail_at = -1;
  m->rss0 = rss_kib();
  for (int i = 0; i < m->ntasks; i++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &m->x);
    if (pto_node_submit_host(no, -1, noop_host, NULL, &a, NULL)) {
      m->fail_at = i;
      break;
    }
  }
  m->rss1 = rss_kib();
}

static void test_task_memory_bounded(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  cfg.tensormap_entries = 64;
  pto_node *n = make_node_cfg(&cfg);
  mem_run m;
  memset(&m, 0, sizeof m);
  int64_t four = 4;
  assert_int_equal(pto_node_host_tensor(n, PTO_F32, 1, &four, &m.x), 0);
  m.ntasks = 12000;
  pto_error_info err;
  int rc = pto_node_run(n, mem_orch, &m, &err);
  pto_node_destroy(n);
  fprintf(stderr, "%d tasks: resident memory grew by %ld KiB while submitting\n", m.ntasks,
          m.rss1 - m.rss0);
  assert_int_equal(rc, 0);
  assert_int_equal(m.fail_at, -1);
  assert_true(m.rss1 - m.rss0 < 20 * 1024);
}

/* Submission cost per task must not grow with the number of live tasks:
 * 1000 and then 8000 readers wait behind a writer that runs only after
 * all are submitted; every submit used to rescan every live task. Each
 * count runs 3 times, and the cheapest run of 8000 is held to the middle
 * one of 1000: a rescan makes every run of 8000 about 8 times as costly.
 * The runs after the first of each count reuse the task array and
 * TensorMap the first made (node_tasks_begin), so their submits take
 * (almost) no page faults: before, every run first-touched about 1.3
 * pages a task (3.3 under ASan), which were most of a submit's CPU time,
 * and an ASan run's faults sometimes cost 3-5 times their usual time in
 * the kernel (up to 33 us a task for 8000, against 6-7 in other runs),
 * which once failed this test's timing. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void test_submit_cost_is_linear(void **state) {
  (void)state;
  pto_node_config cfg;
  base_config(&cfg);
  bp_run r;
  pto_node *n = bp_node(&cfg, 1024, &r);
  pto_error_info err;
  double t[2][3], per[2];
  const int counts[2] = {1000, 8000};
  r.writer_ms = 10000; /* released by the orchestrator once all are submitted */
  for (int k = 0; k < 2; k++) {
    for (int rep = 0; rep < 3; rep++) {
      r.nreaders = counts[k];
      assert_int_equal(bp_once(n, &r, &err), 0);
      assert_int_equal(r.fail_at, -1);
      t[k][rep] = r.submit_cpu / counts[k];
      fprintf(stderr, "%d readers submitted: %.3f s CPU, %.2f us per task, %ld page faults\n",
              counts[k], r.submit_cpu, t[k][rep] * 1e6, r.submit_faults);
      /* the first run of 8000 grows what the runs of 1000 made */
      if (rep > 0) assert_true(r.submit_faults < counts[k] / 20);
    }
    qsort(t[k], 3, sizeof t[k][0], cmp_double);
  }
  per[0] = t[0][1]; /* the middle run of 1000 */
  per[1] = t[1][0]; /* the cheapest of 8000 */
  pto_node_destroy(n);
  /* linear: about the same per task; quadratic: 8 times as much */
  assert_true(per[1] < 3.0 * per[0] + 2e-6);
}

/* argv[1], if given, runs only the tests matching that pattern. */
int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_alloc_size_overflow),
      cmocka_unit_test(test_domain_size_overflow),
      cmocka_unit_test(test_huge_timeouts),
      cmocka_unit_test(test_null_and_invalid_arguments),
      cmocka_unit_test(test_huge_maps_named),
      cmocka_unit_test(test_refused_calls_fail_the_run_named),
      cmocka_unit_test(test_destroy_during_run_refused),
      cmocka_unit_test(test_host_task_deadline),
      cmocka_unit_test(test_startup_does_not_spin),
      cmocka_unit_test(test_tensormap_back_pressure_default),
      cmocka_unit_test(test_tensormap_back_pressure_configured),
      cmocka_unit_test(test_tensormap_full_after_failure),
      cmocka_unit_test(test_task_memory_bounded),
      cmocka_unit_test(test_submit_cost_is_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
