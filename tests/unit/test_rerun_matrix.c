/* test_rerun_matrix.c — a failed run leaves nothing behind (docs/chip.md,
 * "Run lifecycle"), across the pairs of how a run fails and what the next
 * run uses that test_rerun_after_failure.c, test_reuse_differential.c,
 * test_chip_reuse.c and test_graph_warm.c leave out.
 *
 * Run N fails with every feature's state live at once: a gate task holds
 * an AIV core with COMMUTE on x while three COMMUTE adds wait for x, three
 * REDUX contributions to y are open, a sync_start gang as wide as the chip
 * waits for the gate's core, and async_slots blocks went asynchronous
 * (every async slot busy). It fails by a kernel error (the gate), by
 * pto_orch_fatal, by the watchdog (the gate never returns), by a heap
 * ring deadlock, by a refused submit (an unknown kernel), by async
 * completions that never come (the gate returns, the gang runs, the
 * watchdog ends the run), or it is a captured graph's launch that fails
 * (a kernel error, the watchdog) with the gate, the gang and COMMUTE and
 * REDUX tasks in flight; with tracing on when the next run traces.
 *
 * Run N+1, on the same chip, is one of: a dynamic run of gangs, COMMUTE,
 * REDUX and priorities; a run whose blocks go asynchronous (every slot)
 * and are completed by the orchestrator; a cold launch of a graph of
 * gangs, COMMUTE and REDUX, then a cold and a warm launch of a chain; a
 * traced run; a run under a controlled schedule that records its choices;
 * a replay of a record made on a fresh chip. Each is compared with the same
 * run on a fresh chip of the same shape: its data, its stats (tasks,
 * blocks, gangs), the launches' warm count, the trace's block slices and
 * submits, the record's bytes.
 *
 * In checking mode (a chip of its own): run N fails by a contract breach,
 * a kernel error, pto_orch_fatal, a refused submit or a heap ring deadlock
 * with COMMUTE, REDUX and a gang submitted; run N+1 is the dynamic run
 * above or the graph launches, compared with a fresh checked chip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "chip/node_hooks.h" /* chip_set_schedule: controlled or not, run by run */
#include "chip/run.h"        /* white box: the watchdog, between runs */
#include "hang_alarm.h"
#include "pto/pto.h"

#define N          8 /* elements of the test buffers */
#define CLUSTERS   2 /* of 2 AIV cores: 4 cores, the gang's width */
#define GANG       (2 * CLUSTERS)
#define ASYNC      4 /* the chip's async_slots */
#define HEAP_BYTES (64u << 10)
#define WATCHDOG   400 /* ms: the runs that fail by it; the others run under 20 s */

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* ---- kernels ---- */

static int k_add_id, k_contrib_id, k_gate_id, k_gang_id, k_async_id, k_log_id, k_fill_id, k_sum_id,
    k_stray_id;

/* the gate's word: 0 wait, 1 return, 2 fail */
static _Atomic int release, gate_in;

/* tensor 0 (INOUT or COMMUTE, i64): x[i] += scalar 0; scalar 1 != 0: fails */
static int k_add(const pto_kctx *c) {
  if (c->scalars[1]) return pto_kctx_fail(c, PTO_EKERNEL, "k_add fails on purpose");
  int64_t *x = c->tensors[0].buf;
  for (int i = 0; i < N; i++)
    x[i] += (int64_t)c->scalars[0];
  return 0;
}
static int k_contrib(const pto_kctx *c) { return k_add(c); }

/* scalar 0: 0 returns at once; 1 waits for `release` (or the run's
 * cancellation); 2 holds its core 20 ms, then fails. Its tensor it leaves
 * alone. */
static int k_gate(const pto_kctx *c) {
  if (c->scalars[0] == 0) return 0;
  atomic_store(&gate_in, 1);
  if (c->scalars[0] == 2) {
    for (int i = 0; i < 100 && !pto_kctx_cancelled(c); i++)
      sleep_us(200);
    return pto_kctx_fail(c, PTO_EKERNEL, "the gate fails on purpose");
  }
  for (;;) {
    int v = atomic_load(&release);
    if (v == 1) return 0;
    if (v == 2) return pto_kctx_fail(c, PTO_EKERNEL, "the gate fails on purpose");
    if (pto_kctx_cancelled(c)) return 0;
    sleep_us(200);
  }
}

/* sync_start gang, tensor 0 (INOUT, i64 [GANG + 1]): every block counts
 * itself in element 0 and waits until all are in, then writes element
 * 1 + block = scalar 0 + block */
static int k_gang(const pto_kctx *c) {
  int64_t *t = c->tensors[0].buf;
  _Atomic int64_t *n = (_Atomic int64_t *)t;
  atomic_fetch_add(n, 1);
  while (atomic_load(n) < c->block_num)
    if (pto_kctx_cancelled(c)) return 0;
  t[1 + c->block_idx] = (int64_t)c->scalars[0] + c->block_idx;
  return 0;
}

/* tensor 0 (OUTPUT_EXISTING, i64 [1]) = scalar 0, then the block goes
 * asynchronous; its token in tokens[scalar 1] */
static _Atomic uint64_t tokens[ASYNC];
static int k_async(const pto_kctx *c) {
  *(int64_t *)c->tensors[0].buf = (int64_t)c->scalars[0];
  uint64_t t;
  int rc = pto_kctx_async_begin(c, &t);
  if (!rc) atomic_store(&tokens[c->scalars[1] % ASYNC], t);
  return rc;
}

/* appends scalar 0 to the log */
#define NLOG 64
static _Atomic int nlog;
static int64_t logv[NLOG];
static int k_log(const pto_kctx *c) {
  int i = atomic_fetch_add(&nlog, 1);
  if (i < NLOG) logv[i] = (int64_t)c->scalars[0];
  return 0;
}

/* tensor 0 (OUTPUT, u8): every byte = scalar 0 */
static int k_fill(const pto_kctx *c) {
  memset(c->tensors[0].buf, (int)c->scalars[0], (size_t)pto_tensor_numel(&c->tensors[0]));
  return 0;
}

/* tensor 1 (OUTPUT_EXISTING, i64 [1]) = the sum of tensor 0 (INPUT, i64) */
static int k_sum(const pto_kctx *c) {
  int64_t s = 0;
  const int64_t *in = c->tensors[0].buf;
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    s += in[i];
  *(int64_t *)c->tensors[1].buf = s;
  return 0;
}

/* tensor 0 (OUTPUT_EXISTING, i64, the first half of its buffer declared):
 * writes the buffer's last element as well (a contract breach) */
static int k_stray(const pto_kctx *c) {
  int64_t *w = c->tensors[0].buf;
  w[0] = 1;
  w[N - 1] = 1;
  return 0;
}

/* ---- chips ---- */

static int sched_threads; /* the chips' scheduling: the role (0) or threads (1) */

static pto_chip *make_chip(int check) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = CLUSTERS;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = 2;
  cfg.schedulers = 2;
  cfg.sched_threads = sched_threads;
  cfg.heap_bytes = HEAP_BYTES;
  cfg.async_slots = ASYNC;
  cfg.watchdog_ms = 20000;
  cfg.alloc_timeout_ms = 60000; /* never: a ring deadlock here fails at once */
  cfg.check = check;
  cfg.check_seed = check ? 5 : 0;
  cfg.schedule_seed = 0;
  cfg.record_path = cfg.replay_path = NULL;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "add", k_add, &k_add_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "contrib", k_contrib, &k_contrib_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gate", k_gate, &k_gate_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gang", k_gang, &k_gang_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "async", k_async, &k_async_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "log", k_log, &k_log_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", k_fill, &k_fill_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "sum", k_sum, &k_sum_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "stray", k_stray, &k_stray_id), PTO_OK);
  return chip;
}

/* ---- submits ---- */

static pto_tensor vec_n(int64_t *p, int64_t n) {
  pto_tensor t;
  pto_tensor_init(&t, p, sizeof(int64_t) * (size_t)n, PTO_I64, 1, &n);
  return t;
}
static pto_tensor vec(int64_t *p) { return vec_n(p, N); }

static void add(pto_orch *o, int64_t *x, pto_access mode, int64_t v, bool fail) {
  pto_tensor t = vec(x);
  pto_args a;
  pto_args_init(&a);
  pto_args_add(&a, mode, &t);
  pto_args_scalar(&a, (uint64_t)v);
  pto_args_scalar(&a, fail);
  pto_submit(o, k_add_id, &a, NULL, NULL);
}

static void contrib(pto_orch *o, int64_t *y, int64_t v) {
  pto_tensor t = vec(y);
  pto_args a;
  pto_args_init(&a);
  pto_args_redux(&a, &t, PTO_REDUX_SUM);
  pto_args_scalar(&a, (uint64_t)v);
  pto_args_scalar(&a, 0);
  pto_submit(o, k_contrib_id, &a, NULL, NULL);
}

/* the gate, holding x (NULL: nothing) as COMMUTE */
static void gate(pto_orch *o, int64_t *x, uint64_t how) {
  pto_args a;
  pto_args_init(&a);
  pto_tensor t;
  if (x) {
    t = vec(x);
    pto_args_commute(&a, &t);
  }
  pto_args_scalar(&a, how);
  pto_submit(o, k_gate_id, &a, NULL, NULL);
}

/* a gang as wide as the chip on g[GANG + 1] */
static void gang(pto_orch *o, int64_t *g, int64_t v) {
  pto_tensor t = vec_n(g, GANG + 1);
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &t);
  pto_args_scalar(&a, (uint64_t)v);
  pto_submit_opts so = {.block_num = GANG, .sync_start = true};
  pto_submit(o, k_gang_id, &a, &so, NULL);
}

static void async_task(pto_orch *o, int64_t *out, int64_t v, int i) {
  pto_tensor t = vec_n(out, 1);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_args_scalar(&a, (uint64_t)v);
  pto_args_scalar(&a, (uint64_t)i);
  pto_submit(o, k_async_id, &a, NULL, NULL);
}

static void log_task(pto_orch *o, int64_t v, int priority) {
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, (uint64_t)v);
  pto_submit_opts so = {.priority = priority};
  pto_submit(o, k_log_id, &a, &so, NULL);
}

static void heap_fill(pto_orch *o, uint64_t bytes) {
  pto_tensor t;
  int64_t n = (int64_t)bytes;
  pto_tensor_desc(&t, PTO_U8, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  pto_args_scalar(&a, 0x5a);
  pto_submit(o, k_fill_id, &a, NULL, NULL);
}

/* ---- the data of a run ---- */

typedef struct data {
  int64_t x[N], y[N];        /* COMMUTE, REDUX */
  int64_t g[3][GANG + 1];    /* gangs */
  int64_t as[ASYNC], sum[1]; /* async outputs, their sum */
  int64_t c[N];              /* the chain of the warm graph */
  int64_t stray[N];
} data;

static void data_init(data *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < N; i++)
    d->x[i] = d->y[i] = d->c[i] = 100 + i;
}

/* ---- how run N fails ---- */

enum {
  FAIL_KERNEL,   /* the gate returns an error */
  FAIL_FATAL,    /* pto_orch_fatal */
  FAIL_WATCHDOG, /* the gate never returns */
  FAIL_RING,     /* a heap ring deadlock */
  FAIL_SUBMIT,   /* a submit of an unknown kernel */
  FAIL_ASYNC,    /* async completions never come: the watchdog */
  FAIL_LAUNCH_KERNEL,
  FAIL_LAUNCH_WATCHDOG,
  FAIL_CONTRACT,       /* checking mode */
  FAIL_GANG_WIDTH,     /* a gang wider than the chip */
  FAIL_SCOPE_OVERFLOW, /* scopes nested past PTO_MAX_SCOPE_DEPTH */
  FAIL_ASYNC_OVERFLOW, /* one more async block than async_slots */
  FAIL_MODES
};
static const char *const fail_name[FAIL_MODES] = {"kernel error",
                                                  "pto_orch_fatal",
                                                  "watchdog",
                                                  "heap ring deadlock",
                                                  "bad submit",
                                                  "async completions never come",
                                                  "a launch failing by a kernel error",
                                                  "a launch failing by the watchdog",
                                                  "contract breach",
                                                  "a gang wider than the chip",
                                                  "scopes nested too deep",
                                                  "more async blocks than async_slots"};
static const int fail_code[FAIL_MODES] = {
    PTO_EKERNEL,   PTO_EFATAL,         PTO_ESCHED_TIMEOUT,  PTO_EHEAP_DEADLOCK,
    PTO_EINVAL,    PTO_ESCHED_TIMEOUT, PTO_EKERNEL,         PTO_ESCHED_TIMEOUT,
    PTO_ECONTRACT, PTO_ESYNC_WIDTH,    PTO_ESCOPE_OVERFLOW, PTO_EASYNC_OVERFLOW};

static bool by_watchdog(int mode) {
  return mode == FAIL_WATCHDOG || mode == FAIL_ASYNC || mode == FAIL_LAUNCH_WATCHDOG;
}

static void fail_now(pto_orch *o, data *d, int mode) {
  switch (mode) {
  case FAIL_KERNEL: atomic_store(&release, 2); break;
  case FAIL_FATAL: pto_orch_fatal(o, "run N stops here on purpose"); break;
  case FAIL_RING:
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    heap_fill(o, HEAP_BYTES / 4);
    heap_fill(o, HEAP_BYTES / 4);
    heap_fill(o, 2 * HEAP_BYTES);
    pto_scope_end(o);
    break;
  case FAIL_SUBMIT: pto_submit(o, 99, NULL, NULL, NULL); break;
  case FAIL_ASYNC: atomic_store(&release, 1); break;
  case FAIL_CONTRACT: {
    pto_tensor w;
    int64_t half = N / 2;
    pto_tensor_init(&w, d->stray, sizeof d->stray, PTO_I64, 1, &half);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &w);
    pto_submit(o, k_stray_id, &a, NULL, NULL);
    break;
  }
  case FAIL_GANG_WIDTH: {
    pto_tensor t = vec_n(d->g[1], GANG + 1);
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    pto_args_scalar(&a, 0);
    pto_submit_opts so = {.block_num = GANG + 1, .sync_start = true};
    pto_submit(o, k_gang_id, &a, &so, NULL);
    break;
  }
  case FAIL_SCOPE_OVERFLOW:
    for (int i = 0; i <= PTO_MAX_SCOPE_DEPTH && !pto_orch_status(o); i++) {
      pto_scope_begin(o, PTO_SCOPE_AUTO);
      heap_fill(o, 64);
    }
    break;
  case FAIL_ASYNC_OVERFLOW: /* once every slot is taken (the gate lets the gang run first) */
    atomic_store(&release, 1);
    for (int i = 0; i < ASYNC; i++)
      for (int k = 0; k < 20000 && !atomic_load(&tokens[i]) && !pto_orch_status(o); k++)
        sleep_us(200);
    async_task(o, &d->stray[0], 1, 0);
    break;
  default: break; /* the watchdog */
  }
}

typedef struct failing {
  data d;
  int mode;
} failing;

/* Every feature's state live, then the failure. */
static void live_fail_orch(pto_orch *o, void *arg) {
  failing *f = arg;
  data *d = &f->d;
  for (int i = 0; i < ASYNC; i++)
    atomic_store(&tokens[i], 0);
  for (int i = 0; i < ASYNC; i++)
    async_task(o, &d->as[i], 1000 + i, i);
  gate(o, d->x, 1);
  for (int i = 0; i < 3; i++) {
    add(o, d->x, PTO_COMMUTE, 1000, false);
    contrib(o, d->y, 1000);
  }
  /* the gate holds its core: the gang waits for it */
  for (int i = 0; i < 2000 && !atomic_load(&gate_in) && !pto_orch_status(o); i++)
    sleep_us(500);
  gang(o, d->g[0], 1000);
  for (int i = 0; i < 6; i++)
    log_task(o, 1000 + i, i % 3 + 1);
  fail_now(o, d, f->mode);
}

/* In checking mode (the blocks run when the orchestrator waits): COMMUTE
 * adds, contributions and a gang submitted, then the failure (a kernel
 * error: the second add fails). */
static void checked_fail_orch(pto_orch *o, void *arg) {
  failing *f = arg;
  data *d = &f->d;
  for (int i = 0; i < 3; i++) {
    add(o, d->x, PTO_COMMUTE, 1000, f->mode == FAIL_KERNEL && i == 1);
    contrib(o, d->y, 1000);
  }
  gang(o, d->g[0], 1000);
  if (f->mode != FAIL_KERNEL) fail_now(o, d, f->mode);
}

/* The captured program whose launch fails: the gate (its scalar from the
 * launch: 0 at the capture), three COMMUTE adds on x, three contributions
 * to y, a gang. */
static void fail_graph_orch(pto_orch *o, void *arg) {
  data *d = arg;
  gate(o, d->x, 0);
  for (int i = 0; i < 3; i++) {
    add(o, d->x, PTO_COMMUTE, 1000, false);
    contrib(o, d->y, 1000);
  }
  gang(o, d->g[0], 1000);
}
#define FAIL_GRAPH_SCALARS (1 + 3 * 4 + 1)

/* ---- what run N+1 uses ---- */

enum { NX_DYNAMIC, NX_ASYNC, NX_GRAPH, NX_TRACE, NX_RECORD, NX_REPLAY, NX_COUNT };
static const char *const nx_name[NX_COUNT] = {
    "a dynamic run of gangs, COMMUTE, REDUX and priorities",
    "a run whose blocks go asynchronous",
    "graph launches (gangs, COMMUTE and REDUX; a chain cold, then warm)",
    "a traced run",
    "a recorded controlled run",
    "a replay"};

/* gangs, COMMUTE, REDUX, scoped OUTPUT, priorities */
static void dynamic_orch(pto_orch *o, void *arg) {
  data *d = arg;
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  heap_fill(o, HEAP_BYTES / 2);
  pto_scope_end(o);
  for (int i = 0; i < 16; i++) {
    add(o, d->x, PTO_COMMUTE, i + 1, false);
    if (i % 6 == 0) gang(o, d->g[i / 6], 10 * i);
  }
  for (int i = 0; i < 20; i++)
    contrib(o, d->y, i + 1);
  for (int i = 0; i < 6; i++)
    log_task(o, i, i % 3 + 1);
}

/* every async slot, completed by the orchestrator; their sum after them */
static void async_orch(pto_orch *o, void *arg) {
  data *d = arg;
  for (int i = 0; i < ASYNC; i++)
    atomic_store(&tokens[i], 0);
  for (int i = 0; i < ASYNC; i++)
    async_task(o, &d->as[i], 10 + i, i);
  pto_tensor in = vec_n(d->as, ASYNC), out = vec_n(d->sum, 1);
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &in);
  pto_args_output_existing(&a, &out);
  pto_submit(o, k_sum_id, &a, NULL, NULL);
  gang(o, d->g[0], 7);
  for (int i = 0; i < ASYNC; i++) {
    uint64_t t = 0;
    for (int k = 0; k < 20000 && !(t = atomic_load(&tokens[i])) && !pto_orch_status(o); k++)
      sleep_us(200);
    if (!t) {
      pto_orch_fatal(o, "async block %d never began", i);
      return;
    }
    int rc = pto_chip_async_complete(pto_orch_chip(o), t);
    if (rc) {
      pto_orch_fatal(o, "completing async block %d: %s", i, pto_status_name(rc));
      return;
    }
  }
}

/* the graph of gangs, COMMUTE and REDUX (never warm) */
static void rich_graph_orch(pto_orch *o, void *arg) {
  data *d = arg;
  for (int i = 0; i < 6; i++) {
    add(o, d->x, PTO_COMMUTE, i + 1, false);
    contrib(o, d->y, i + 1);
    if (i % 2 == 0) gang(o, d->g[i / 2], 10 * i);
  }
}

/* a chain (launched warm after a launch of its own) */
static void chain_graph_orch(pto_orch *o, void *arg) {
  data *d = arg;
  for (int i = 0; i < 12; i++)
    add(o, d->c, PTO_INOUT, i + 1, false);
}

/* ---- a run's result, to compare with a fresh chip's ---- */

#define SIG_MAX 4096

typedef struct result {
  int rc;
  data d;
  int64_t log[NLOG];
  int nlog;
  pto_run_stats st[3];
  int64_t warm; /* the chain graph's warm launches */
  char sig[SIG_MAX];
  size_t nsig;
} result;

typedef struct chip_fx {
  pto_chip *chip;
  pto_graph *rich, *chain, *fail;
  data cap; /* the captures' buffers */
  char trace[64], rec[64], ref_rec[64];
} chip_fx;

static void fx_make(chip_fx *f, int check, const char *tag) {
  memset(f, 0, sizeof *f);
  f->chip = make_chip(check);
  data_init(&f->cap);
  pto_error_info err;
  assert_int_equal(pto_graph_capture(f->chip, rich_graph_orch, &f->cap, &f->rich, NULL, &err),
                   PTO_OK);
  assert_int_equal(pto_graph_capture(f->chip, chain_graph_orch, &f->cap, &f->chain, NULL, &err),
                   PTO_OK);
  if (!check)
    assert_int_equal(pto_graph_capture(f->chip, fail_graph_orch, &f->cap, &f->fail, NULL, &err),
                     PTO_OK);
  snprintf(f->trace, sizeof f->trace, "/tmp/pto_rmx_%d_%s.json", (int)getpid(), tag);
  snprintf(f->rec, sizeof f->rec, "/tmp/pto_rmx_%d_%s.rec", (int)getpid(), tag);
}

static void fx_free(chip_fx *f) {
  pto_graph_destroy(f->rich);
  pto_graph_destroy(f->chain);
  pto_graph_destroy(f->fail);
  pto_chip_destroy(f->chip);
  unlink(f->trace);
  unlink(f->rec);
}

/* ---- signatures: a trace's block slices and submits, a record's bytes ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "name task block" of every block slice and "task deps" of every slice
 * with deps, sorted: what a run's trace says whatever the timing */
static void trace_sig(const char *path, result *res) {
  FILE *fp = fopen(path, "r");
  if (!fp) fail_msg("no trace at %s", path);
  static char line[8192];
  char *items[1024];
  int n = 0;
  while (fgets(line, sizeof line, fp) && n < 1024) {
    const char *cat = strstr(line, "\"cat\":\"block\"");
    const char *deps = strstr(line, "\"deps\":[");
    if (!cat && !deps) continue;
    const char *nm = strstr(line, "{\"name\":\"");
    const char *task = strstr(line, "\"task\":");
    const char *blk = strstr(line, "\"block\":");
    char item[512];
    int len = 0;
    if (cat && nm) {
      nm += 9;
      const char *e = strchr(nm, '"');
      len = snprintf(item, sizeof item, "%.*s t%lld b%lld", (int)(e - nm), nm,
                     task ? atoll(task + 7) : -1, blk ? atoll(blk + 8) : -1);
    } else {
      const char *e = strchr(deps, ']');
      len = snprintf(item, sizeof item, "deps t%lld %.*s", task ? atoll(task + 7) : -1,
                     (int)(e - deps), deps);
    }
    items[n] = malloc((size_t)len + 1);
    memcpy(items[n++], item, (size_t)len + 1);
  }
  fclose(fp);
  qsort(items, (size_t)n, sizeof *items, cmp_str);
  res->nsig = 0;
  for (int i = 0; i < n; i++) {
    int w = snprintf(res->sig + res->nsig, SIG_MAX - res->nsig, "%s\n", items[i]);
    if (w > 0 && res->nsig + (size_t)w < SIG_MAX) res->nsig += (size_t)w;
    free(items[i]);
  }
  if (n == 0) fail_msg("the trace %s has no block slice", path);
}

static void file_sig(const char *path, result *res) {
  FILE *fp = fopen(path, "rb");
  if (!fp) fail_msg("no record at %s", path);
  res->nsig = fread(res->sig, 1, SIG_MAX - 1, fp);
  res->sig[res->nsig] = 0;
  fclose(fp);
}

/* ---- run N+1 ---- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int run_timed(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *st,
                     pto_error_info *err, const char *what) {
  hang_alarm_arm(what, 60);
  int rc = pto_chip_run(chip, fn, arg, st, err);
  hang_alarm_disarm();
  return rc;
}

static int launch_timed(pto_chip *chip, pto_graph *g, const pto_graph_bindings *b,
                        pto_run_stats *st, pto_error_info *err, const char *what) {
  hang_alarm_arm(what, 60);
  int rc = pto_graph_launch(chip, g, b, st, err);
  hang_alarm_disarm();
  return rc;
}

static int64_t warm_count(const pto_graph *g) {
  pto_graph_info gi;
  assert_int_equal(pto_graph_get_info(g, &gi), PTO_OK);
  return gi.warm_launches;
}

/* Runs run N+1 of kind nx on f's chip into *res; `ref_rec`: the record
 * a replay replays. Fails the test when a run fails. */
static void run_next(chip_fx *f, int nx, result *res, const char *ref_rec, const char *what) {
  memset(res, 0, sizeof *res);
  data_init(&res->d);
  atomic_store(&nlog, 0);
  atomic_store(&release, 0);
  atomic_store(&gate_in, 0);
  pto_error_info err = {0};
  pto_chip *chip = f->chip;
  int rc = PTO_OK;
  switch (nx) {
  case NX_DYNAMIC: rc = run_timed(chip, dynamic_orch, &res->d, &res->st[0], &err, what); break;
  case NX_ASYNC: rc = run_timed(chip, async_orch, &res->d, &res->st[0], &err, what); break;
  case NX_GRAPH: {
    data_init(&f->cap);
    rc = launch_timed(chip, f->rich, NULL, &res->st[0], &err, what);
    int64_t w0 = warm_count(f->chain);
    for (int k = 0; !rc && k < 2; k++)
      rc = launch_timed(chip, f->chain, NULL, &res->st[1 + k], &err, what);
    res->warm = warm_count(f->chain) - w0;
    res->d = f->cap;
    break;
  }
  case NX_TRACE:
    assert_int_equal(pto_chip_set_trace(chip, f->trace), PTO_OK);
    rc = run_timed(chip, dynamic_orch, &res->d, &res->st[0], &err, what);
    assert_int_equal(pto_chip_set_trace(chip, NULL), PTO_OK);
    if (!rc) trace_sig(f->trace, res);
    break;
  case NX_RECORD:
    assert_int_equal(chip_set_schedule(chip, 77, f->rec, NULL), PTO_OK);
    rc = run_timed(chip, dynamic_orch, &res->d, &res->st[0], &err, what);
    assert_int_equal(chip_set_schedule(chip, 0, NULL, NULL), PTO_OK);
    if (!rc) file_sig(f->rec, res);
    break;
  case NX_REPLAY:
    assert_int_equal(chip_set_schedule(chip, 0, NULL, ref_rec), PTO_OK);
    rc = run_timed(chip, dynamic_orch, &res->d, &res->st[0], &err, what);
    assert_int_equal(chip_set_schedule(chip, 0, NULL, NULL), PTO_OK);
    break;
  }
  res->rc = rc;
  if (rc) fail_msg("%s: %s: %s", what, pto_status_name(rc), err.details);
  res->nlog = atomic_load(&nlog);
  for (int i = 0; i < res->nlog && i < NLOG; i++)
    res->log[i] = logv[i];
  if (nx != NX_RECORD && nx != NX_REPLAY) /* controlled: the order is the schedule's */
    qsort(res->log, (size_t)res->nlog, sizeof *res->log, cmp_i64);
}

/* got must equal want (the same run on a fresh chip) */
static void expect_same(const result *got, const result *want, const char *what) {
  const int64_t *g = (const int64_t *)&got->d, *w = (const int64_t *)&want->d;
  for (size_t i = 0; i < sizeof got->d / sizeof(int64_t); i++)
    if (g[i] != w[i])
      fail_msg("%s: data word %zu is %lld, on a fresh chip %lld", what, i, (long long)g[i],
               (long long)w[i]);
  if (got->nlog != want->nlog)
    fail_msg("%s: %d log tasks ran, %d on a fresh chip", what, got->nlog, want->nlog);
  for (int i = 0; i < got->nlog; i++)
    if (got->log[i] != want->log[i])
      fail_msg("%s: log entry %d is %lld, on a fresh chip %lld", what, i, (long long)got->log[i],
               (long long)want->log[i]);
  for (int k = 0; k < 3; k++) {
    const pto_run_stats *a = &got->st[k], *b = &want->st[k];
    if (a->tasks != b->tasks || a->blocks != b->blocks || a->sync_tasks != b->sync_tasks)
      fail_msg("%s: run %d: %llu tasks, %llu blocks, %llu gangs; on a fresh chip %llu, %llu, %llu",
               what, k, (unsigned long long)a->tasks, (unsigned long long)a->blocks,
               (unsigned long long)a->sync_tasks, (unsigned long long)b->tasks,
               (unsigned long long)b->blocks, (unsigned long long)b->sync_tasks);
  }
  if (got->warm != want->warm)
    fail_msg("%s: %lld warm launches of the chain, on a fresh chip %lld", what,
             (long long)got->warm, (long long)want->warm);
  if (got->nsig != want->nsig || memcmp(got->sig, want->sig, got->nsig))
    fail_msg(
        "%s: the %s differs from a fresh chip's:\n--- here:\n%.1500s\n--- fresh chip:\n%.1500s",
        what, got->nsig && got->sig[0] == '{' ? "record" : "trace or record", got->sig, want->sig);
}

/* ---- run N ---- */

static void run_failing(chip_fx *f, int mode, const char *what) {
  static failing fl;
  data_init(&fl.d);
  fl.mode = mode;
  atomic_store(&nlog, 0);
  atomic_store(&release, 0);
  atomic_store(&gate_in, 0);
  pto_chip *chip = f->chip;
  if (by_watchdog(mode)) chip->cfg.watchdog_ms = WATCHDOG; /* white box, between runs */
  pto_error_info err = {0};
  int rc;
  if (mode == FAIL_LAUNCH_KERNEL || mode == FAIL_LAUNCH_WATCHDOG) {
    uint64_t sc[FAIL_GRAPH_SCALARS] = {0};
    sc[0] = mode == FAIL_LAUNCH_KERNEL ? 2 : 1;
    for (int i = 0; i < 3; i++) {
      sc[1 + 4 * i] = 1000; /* add: value, fail */
      sc[3 + 4 * i] = 1000; /* contrib: value, 0 */
    }
    sc[FAIL_GRAPH_SCALARS - 1] = 1000;
    pto_graph_info gi;
    assert_int_equal(pto_graph_get_info(f->fail, &gi), PTO_OK);
    assert_int_equal(gi.scalars, FAIL_GRAPH_SCALARS);
    pto_graph_bindings b = {NULL, 0, FAIL_GRAPH_SCALARS, sc};
    data_init(&f->cap);
    rc = launch_timed(chip, f->fail, &b, NULL, &err, what);
  } else {
    rc = run_timed(chip, f->chip->cfg.check ? checked_fail_orch : live_fail_orch, &fl, NULL, &err,
                   what);
  }
  chip->cfg.watchdog_ms = 20000;
  if (rc != fail_code[mode])
    fail_msg("%s: returned %s (%s), expected %s", what, pto_status_name(rc), err.details,
             pto_status_name(fail_code[mode]));
}

/* ---- the matrix ---- */

static void matrix(int check, const int *modes, int nmodes, const int *nxs, int nnx) {
  chip_fx ref;
  fx_make(&ref, check, check ? "refc" : "ref");
  result want[NX_COUNT];
  char what[160];
  /* the reference runs, on a fresh chip (the graphs captured) each */
  for (int j = 0; j < nnx; j++) {
    int nx = nxs[j];
    if (nx == NX_REPLAY) continue;
    if (j) {
      fx_free(&ref);
      fx_make(&ref, check, check ? "refc" : "ref");
    }
    snprintf(what, sizeof what, "on a fresh chip: %s", nx_name[nx]);
    run_next(&ref, nx, &want[nx], NULL, what);
    if (nx == NX_RECORD) {
      /* the record a replay replays, kept */
      snprintf(ref.ref_rec, sizeof ref.ref_rec, "/tmp/pto_rmx_%d_keep.rec", (int)getpid());
      assert_int_equal(rename(ref.rec, ref.ref_rec), 0);
      want[NX_REPLAY] = want[NX_RECORD];
      want[NX_REPLAY].nsig = 0;
      /* the same seed on a second fresh chip: the same record */
      chip_fx again;
      fx_make(&again, check, "again");
      result r2;
      run_next(&again, nx, &r2, NULL, "on a second fresh chip: a recorded controlled run");
      expect_same(&r2, &want[nx], "a second fresh chip's recorded run");
      fx_free(&again);
    }
  }
  char keep[64];
  snprintf(keep, sizeof keep, "/tmp/pto_rmx_%d_keep.rec", (int)getpid());
  fx_free(&ref);
  int cells = 0;
  for (int j = 0; j < nnx; j++) {
    int nx = nxs[j];
    chip_fx f;
    fx_make(&f, check, check ? "usedc" : "used");
    for (int m = 0; m < nmodes; m++) {
      int mode = modes[m];
      snprintf(what, sizeof what, "run N failing by %s (before %s)", fail_name[mode], nx_name[nx]);
      if (nx == NX_TRACE) assert_int_equal(pto_chip_set_trace(f.chip, f.trace), PTO_OK);
      run_failing(&f, mode, what);
      if (nx == NX_TRACE) assert_int_equal(pto_chip_set_trace(f.chip, NULL), PTO_OK);
      snprintf(what, sizeof what, "%s%s after a run failed by %s", check ? "checking mode: " : "",
               nx_name[nx], fail_name[mode]);
      result got;
      run_next(&f, nx, &got, keep, what);
      result w = want[nx];
      if (nx == NX_REPLAY) w.nsig = 0;
      expect_same(&got, &w, what);
      cells++;
    }
    fx_free(&f);
  }
  unlink(keep);
  printf("%s%s%d cells: each run after a failed one equal to the same run on a fresh chip\n",
         check ? "checking mode: " : "", sched_threads ? "scheduler threads: " : "", cells);
}

static void test_matrix(void **state) {
  (void)state;
  static const int modes[] = {FAIL_KERNEL,         FAIL_FATAL,           FAIL_WATCHDOG,
                              FAIL_RING,           FAIL_SUBMIT,          FAIL_ASYNC,
                              FAIL_LAUNCH_KERNEL,  FAIL_LAUNCH_WATCHDOG, FAIL_GANG_WIDTH,
                              FAIL_SCOPE_OVERFLOW, FAIL_ASYNC_OVERFLOW};
  static const int nxs[] = {NX_DYNAMIC, NX_ASYNC, NX_GRAPH, NX_TRACE, NX_RECORD, NX_REPLAY};
  sched_threads = 0;
  matrix(0, modes, sizeof modes / sizeof *modes, nxs, sizeof nxs / sizeof *nxs);
}

/* The same with scheduler threads (cfg.sched_threads): their own parking,
 * kicks and pending wake-ups. */
static void test_matrix_sched_threads(void **state) {
  (void)state;
  static const int modes[] = {FAIL_KERNEL, FAIL_FATAL,      FAIL_WATCHDOG,
                              FAIL_RING,   FAIL_ASYNC,      FAIL_LAUNCH_KERNEL,
                              FAIL_SUBMIT, FAIL_GANG_WIDTH, FAIL_ASYNC_OVERFLOW};
  static const int nxs[] = {NX_DYNAMIC, NX_ASYNC, NX_GRAPH, NX_RECORD};
  sched_threads = 1;
  matrix(0, modes, sizeof modes / sizeof *modes, nxs, sizeof nxs / sizeof *nxs);
  sched_threads = 0;
}

static void test_matrix_checked(void **state) {
  (void)state;
  static const int modes[] = {FAIL_CONTRACT, FAIL_KERNEL,     FAIL_FATAL,         FAIL_SUBMIT,
                              FAIL_RING,     FAIL_GANG_WIDTH, FAIL_SCOPE_OVERFLOW};
  static const int nxs[] = {NX_DYNAMIC, NX_GRAPH};
  sched_threads = 0;
  matrix(1, modes, sizeof modes / sizeof *modes, nxs, sizeof nxs / sizeof *nxs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix),
      cmocka_unit_test(test_matrix_sched_threads),
      cmocka_unit_test(test_matrix_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
