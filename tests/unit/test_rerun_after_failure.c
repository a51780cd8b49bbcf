/* test_rerun_after_failure.c — a failed run leaves nothing of the chip's
 * newer features behind (docs/chip.md, "Run lifecycle"), white box.
 *
 * Each test makes run N fail while a feature's state is live, in each way
 * that can happen to it: a kernel error, pto_orch_fatal, a watchdog
 * timeout, a heap ring deadlock, a bad submit, and in checking mode a
 * contract breach; then it runs a correct run N+1 on the same chip and
 * checks that the feature's state was empty when run N+1 began and that
 * its results are exactly the sequential ones:
 *
 *  - COMMUTE: run N fails while one COMMUTE task holds the bytes (a
 *    blocker kernel on them) and three others wait for them;
 *  - hand-off: run N fails in the middle of a chain whose links the
 *    finishing cores keep and run themselves;
 *  - PTO_REDUX: run N fails between contributions and their combine task
 *    (the group's slab taken from the heap ring); run N+1 first needs the
 *    whole heap ring at once, then reduces again;
 *  - priorities: run N fails with tasks queued at levels 1-3 behind a
 *    blocker on a 1-core chip; run N+1 runs only its own tasks, in
 *    priority order;
 *  - checking mode: a checked run N fails (contract breach, kernel error,
 *    fatal, bad submit) with COMMUTE waiters and an open REDUX group; the
 *    next checked run is right;
 *  - controlled schedules: a failed controlled run, then an uncontrolled
 *    one, and the other way round; a replay that diverges (PTO_EREPLAY),
 *    then an uncontrolled run, then the same replay of the right program;
 *  - captured graphs: a launch that fails (kernel error, watchdog), then a
 *    good launch of the same graph and a dynamic run; a failed dynamic run
 *    (heap deadlock), then a launch;
 *  - scopes left open by the orchestration: run N fails (a kernel error)
 *    while its end closes them, between two of their scope_ends.
 *
 * Nothing depends on timing: the blocker waits for the orchestrator's word
 * or the run's cancellation; the watchdog cases wait for the watchdog. */
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
#include "chip/priority.h"   /* white box: the run's queues, tables and rings */
#include "hang_alarm.h"
#include "pto/pto.h"

#define N          8           /* elements of the test buffers */
#define HEAP_BYTES (64u << 10) /* every chip's heap ring */
#define NLOG       64

/* ---- kernels ---- */

static int k_add_id, k_contrib_id, k_block_id, k_log_id, k_fill_id, k_stray_id;

/* The blocker's word: 0 wait, 1 return, 2 fail. */
static _Atomic int release;
static _Atomic int blocking; /* a blocker waits for `release` */

/* tensor 0 (INOUT or COMMUTE, i64): x[i] += scalar 0; scalar 1 != 0: fails */
static int k_add(const pto_kctx *c) {
  if (c->scalars[1]) return pto_kctx_fail(c, PTO_EKERNEL, "k_add fails on purpose");
  int64_t *x = c->tensors[0].buf;
  for (int i = 0; i < N; i++)
    x[i] += (int64_t)c->scalars[0];
  return 0;
}

/* tensor 0 (REDUX sum, i64, its private copy): as k_add */
static int k_contrib(const pto_kctx *c) { return k_add(c); }

/* scalar 0 == 0: returns at once; else waits for `release` (or the run's
 * cancellation). Its tensors, if any, it leaves alone. */
static int k_block(const pto_kctx *c) {
  if (c->scalars[0] == 0) return 0;
  atomic_store(&blocking, 1);
  for (;;) {
    int v = atomic_load(&release);
    if (v == 1) return 0;
    if (v == 2) return pto_kctx_fail(c, PTO_EKERNEL, "the blocker fails on purpose");
    if (pto_kctx_cancelled(c)) return 0;
    usleep(200);
  }
}

/* appends scalar 0 to the log */
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

/* tensor 0 (OUTPUT_EXISTING, i64): the first half of its buffer, declared;
 * it writes the buffer's last element as well (a contract breach) */
static int k_stray(const pto_kctx *c) {
  int64_t *w = c->tensors[0].buf;
  w[0] = 1;
  w[N - 1] = 1;
  return 0;
}

/* ---- chips ---- */

/* task_slots 0: the default */
static pto_chip *make_chip_slots(int clusters, int aiv, int check, uint32_t task_slots) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.aic_per_cluster = 0;
  cfg.aiv_per_cluster = aiv;
  cfg.schedulers = 1;
  if (task_slots) cfg.task_slots = task_slots;
  cfg.heap_bytes = HEAP_BYTES;
  cfg.watchdog_ms = 1000;       /* the watchdog cases wait for it; no correct run comes near it */
  cfg.alloc_timeout_ms = 60000; /* never: a ring deadlock here fails at once */
  cfg.check = check;
  cfg.check_seed = check ? 7 : 0;
  cfg.schedule_seed = 0;
  cfg.record_path = cfg.replay_path = NULL;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "add", k_add, &k_add_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "contrib", k_contrib, &k_contrib_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "block", k_block, &k_block_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "log", k_log, &k_log_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", k_fill, &k_fill_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "stray", k_stray, &k_stray_id), PTO_OK);
  return chip;
}

static pto_chip *make_chip(int clusters, int aiv, int check) {
  return make_chip_slots(clusters, aiv, check, 0);
}

/* ---- submits ---- */

static pto_tensor vec(int64_t *p) {
  pto_tensor t;
  int64_t n = N;
  pto_tensor_init(&t, p, sizeof(int64_t) * N, PTO_I64, 1, &n);
  return t;
}

static void add(pto_orch *o, int64_t *x, pto_access mode, int64_t v, bool fail) {
  pto_tensor t = vec(x);
  pto_args a;
  pto_args_init(&a);
  pto_args_add(&a, mode, &t);
  pto_args_scalar(&a, (uint64_t)v);
  pto_args_scalar(&a, fail);
  pto_submit(o, k_add_id, &a, NULL, NULL);
}

static void contrib(pto_orch *o, int64_t *y, int64_t v, bool fail) {
  pto_tensor t = vec(y);
  pto_args a;
  pto_args_init(&a);
  pto_args_redux(&a, &t, PTO_REDUX_SUM);
  pto_args_scalar(&a, (uint64_t)v);
  pto_args_scalar(&a, fail);
  pto_submit(o, k_contrib_id, &a, NULL, NULL);
}

/* A blocker holding `x` with `mode` (x NULL: no argument). */
static void blocker_on(pto_orch *o, int64_t *x, pto_access mode) {
  pto_args a;
  pto_args_init(&a);
  pto_tensor t;
  if (x) {
    t = vec(x);
    pto_args_add(&a, mode, &t);
  }
  pto_args_scalar(&a, 1);
  pto_submit(o, k_block_id, &a, NULL, NULL);
}

/* A blocker holding `x` as COMMUTE (x NULL: no argument). */
static void blocker(pto_orch *o, int64_t *x) { blocker_on(o, x, PTO_COMMUTE); }

static void log_task(pto_orch *o, int64_t v, int priority) {
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, (uint64_t)v);
  pto_submit_opts so = {.priority = priority};
  pto_submit(o, k_log_id, &a, &so, NULL);
}

/* An OUTPUT of `bytes` from the heap ring, filled by a task. */
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

/* ---- how run N fails ---- */

enum {
  FAIL_KERNEL,   /* the blocker returns an error */
  FAIL_FATAL,    /* pto_orch_fatal while the blocker runs */
  FAIL_WATCHDOG, /* the blocker never returns: the watchdog stops the run */
  FAIL_RING,     /* OUTPUT buffers held by a scope, then one larger than the ring */
  FAIL_SUBMIT,   /* a submit of an unknown kernel */
  FAIL_CONTRACT, /* checking mode: a kernel writes outside its views */
  FAIL_MODES
};

static const char *const mode_names[FAIL_MODES] = {"kernel error", "pto_orch_fatal",
                                                   "watchdog",     "heap ring deadlock",
                                                   "bad submit",   "contract breach"};

static bool code_of(int mode, int rc) {
  switch (mode) {
  case FAIL_KERNEL: return rc == PTO_EKERNEL;
  case FAIL_FATAL: return rc == PTO_EFATAL;
  case FAIL_WATCHDOG: return rc == PTO_ESCHED_TIMEOUT;
  case FAIL_RING: return rc == PTO_EHEAP_DEADLOCK;
  case FAIL_SUBMIT: return rc == PTO_EINVAL;
  default: return rc == PTO_ECONTRACT;
  }
}

static int64_t stray_buf[N];

/* Run N's failure, with the feature's state live. */
static void fail_now(pto_orch *o, int mode) {
  switch (mode) {
  case FAIL_KERNEL: atomic_store(&release, 2); break;
  case FAIL_FATAL: pto_orch_fatal(o, "run N stops here on purpose"); break;
  case FAIL_WATCHDOG: break;
  case FAIL_RING: /* buffers held by a scope, then one larger than the ring */
    pto_scope_begin(o, PTO_SCOPE_AUTO);
    heap_fill(o, HEAP_BYTES / 4);
    heap_fill(o, HEAP_BYTES / 4);
    heap_fill(o, 2 * HEAP_BYTES);
    pto_scope_end(o);
    break;
  case FAIL_SUBMIT: pto_submit(o, 99, NULL, NULL, NULL); break;
  case FAIL_CONTRACT: {
    pto_tensor w;
    int64_t half = N / 2;
    pto_tensor_init(&w, stray_buf, sizeof stray_buf, PTO_I64, 1, &half);
    pto_args a;
    pto_args_init(&a);
    pto_args_output_existing(&a, &w);
    pto_submit(o, k_stray_id, &a, NULL, NULL);
    break;
  }
  }
}

/* ---- what run N+1 finds at its start ---- */

static char dirty[300];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  if (dirty[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dirty, sizeof dirty, fmt, ap);
  va_end(ap);
}

/* Every structure of the features under test is empty (the run's first
 * call, on the orchestrator's thread, before any submit). */
static void check_clean(pto_orch *o) {
  pto_run *r = o->run;
  if (cm_busy(&r->cm)) note("COMMUTE: task slot %d still held", (int)cm_first_held(&r->cm));
  for (uint32_t i = 0; i < r->cm.n; i++)
    if (cm_link_held(&r->cm.links[i])) note("COMMUTE: slot %u flagged held (its inbox open)", i);
  if (r->rx.openm) note("REDUX: %d groups open", __builtin_popcount(r->rx.openm));
  for (int i = 0; i < REDUX_GROUPS; i++)
    if (r->rx.g[i].open) note("REDUX: group %d open", i);
  if (r->nheld) note("heap: %u ranges held", r->nheld);
  if (r->heap.head != r->heap.tail)
    note("heap: %llu bytes in use", (unsigned long long)(r->heap.head - r->heap.tail));
  for (int q = 0; q < SHAPE_COUNT; q++) {
    if (prio_up_used(&r->queues[q])) note("%s queue: up_used left set", shape_name(q));
    for (int l = 0; l < PRIO_LEVELS; l++)
      if ((l == 0 || r->queues[q].up_cells) && rq_size(prio_queue(&r->queues[q], l)))
        note("%s queue, priority %d: %llu positions queued", shape_name(q), l,
             (unsigned long long)rq_size(prio_queue(&r->queues[q], l)));
  }
  if (atomic_load(&r->submitted) || atomic_load(&r->completed)) note("task counters not zero");
}

/* ---- the runs ---- */

typedef struct fx {
  int mode;
  int64_t x[N], y[N];
  bool sorted_log; /* the 1-core chip: run N+1's log is in priority order */
  bool x_chain;    /* run N+1 adds to x as a chain of INOUT tasks (else COMMUTE) */
} fx;

/* Run N+1: a heap ring's worth of OUTPUT at once, 16 COMMUTE adds, 20
 * REDUX contributions, 6 tasks at priorities 1-3. */
static void good_data(pto_orch *o, fx *f) {
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  heap_fill(o, HEAP_BYTES);
  pto_scope_end(o);
  for (int i = 0; i < 16; i++)
    add(o, f->x, f->x_chain ? PTO_INOUT : PTO_COMMUTE, i + 1, false);
  for (int i = 0; i < 20; i++)
    contrib(o, f->y, i + 1, false);
}

static void good_logs(pto_orch *o) {
  for (int i = 0; i < 6; i++)
    log_task(o, i, i % 3 + 1);
}

static void good_orch(pto_orch *o, void *arg) {
  check_clean(o);
  good_data(o, arg);
  good_logs(o);
}

/* On the 1-core chip: the log tasks are submitted while a blocker runs on
 * the core, so that all of them are queued before the core takes one
 * (their levels are 1-3 only: a priority-0 task could go pending behind
 * the blocker). */
static void prio_good_orch(pto_orch *o, void *arg) {
  check_clean(o);
  good_data(o, arg);
  blocker(o, NULL);
  while (!atomic_load(&blocking) && !pto_orch_status(o))
    usleep(100);
  good_logs(o);
  atomic_store(&release, 1);
}

static void run_good_fn(pto_chip *chip, pto_orch_fn fn, fx *f, const char *after) {
  char what[160];
  snprintf(what, sizeof what, "the run after a failed one (%s)", after);
  for (int i = 0; i < N; i++)
    f->x[i] = f->y[i] = 100 + i;
  dirty[0] = 0;
  atomic_store(&nlog, 0);
  atomic_store(&release, 0);
  atomic_store(&blocking, 0);
  pto_error_info err;
  hang_alarm_arm(what, 60);
  int rc = pto_chip_run(chip, fn, f, NULL, &err);
  hang_alarm_disarm();
  if (rc || dirty[0])
    fail_msg("%s: %s %s; at its start: %s", what, pto_status_name(rc), err.details,
             dirty[0] ? dirty : "clean");
  for (int i = 0; i < N; i++) {
    if (f->x[i] != 100 + i + 136 || f->y[i] != 100 + i + 210)
      fail_msg("%s: element %d: COMMUTE sum %lld (want %lld), REDUX sum %lld (want %lld)", what, i,
               (long long)f->x[i], (long long)(100 + i + 136), (long long)f->y[i],
               (long long)(100 + i + 210));
  }
  int n = atomic_load(&nlog);
  if (n != 6) fail_msg("%s: %d log tasks ran, 6 submitted", what, n);
  bool seen[6] = {false};
  for (int i = 0; i < n; i++) {
    if (logv[i] < 0 || logv[i] >= 6 || seen[logv[i]])
      fail_msg("%s: log entry %d is %lld: not one of this run's tasks", what, i,
               (long long)logv[i]);
    seen[logv[i]] = true;
  }
  /* one core: priority 3 first (values 2, 5), then 2 (1, 4), then 1 (0, 3) */
  static const int64_t by_priority[6] = {2, 5, 1, 4, 0, 3};
  for (int i = 0; f->sorted_log && i < n; i++)
    if (logv[i] != by_priority[i])
      fail_msg("%s: log entry %d is task %lld, task %lld in priority order", what, i,
               (long long)logv[i], (long long)by_priority[i]);
}

static void run_good(pto_chip *chip, fx *f, const char *after) {
  run_good_fn(chip, good_orch, f, after);
}

static void run_failing(pto_chip *chip, pto_orch_fn fn, fx *f, const char *feature) {
  char what[160];
  snprintf(what, sizeof what, "%s: run N failing by %s", feature, mode_names[f->mode]);
  atomic_store(&nlog, 0);
  atomic_store(&release, 0);
  atomic_store(&blocking, 0);
  pto_error_info err;
  hang_alarm_arm(what, 60);
  int rc = pto_chip_run(chip, fn, f, NULL, &err);
  hang_alarm_disarm();
  if (!code_of(f->mode, rc))
    fail_msg("%s: returned %s: %s", what, pto_status_name(rc), err.details);
}

/* Run N failing by each way from kernel error to bad submit, each
 * followed by run N+1 (good_fn) on the same chip. */
static void each_failure(pto_chip *chip, fx *f, pto_orch_fn fail_fn, pto_orch_fn good_fn,
                         const char *feature) {
  for (int m = FAIL_KERNEL; m <= FAIL_SUBMIT; m++) {
    f->mode = m;
    run_failing(chip, fail_fn, f, feature);
    run_good_fn(chip, good_fn, f, mode_names[m]);
  }
}

/* ---- COMMUTE ---- */

/* A blocker holds x's bytes as COMMUTE, three adds wait for them. */
static void commute_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  blocker(o, f->x);
  for (int i = 0; i < 3; i++)
    add(o, f->x, PTO_COMMUTE, 1000, false);
  fail_now(o, f->mode);
}

static void test_commute(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  fx f = {0};
  each_failure(chip, &f, commute_fail_orch, good_orch, "COMMUTE");
  pto_chip_destroy(chip);
}

/* ---- PTO_REDUX ---- */

/* Three contributions to y (its group open, its slab taken), a fourth that
 * fails in the kernel-error case, a blocker; no combine yet. */
static void redux_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  for (int i = 0; i < 3; i++)
    contrib(o, f->y, 1000, false);
  if (f->mode == FAIL_KERNEL) contrib(o, f->y, 1000, true);
  blocker(o, NULL);
  fail_now(o, f->mode);
}

static void test_redux(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  fx f = {0};
  each_failure(chip, &f, redux_fail_orch, good_orch, "REDUX");
  pto_chip_destroy(chip);
}

/* ---- hand-off (a finishing core runs its one ready successor) ---- */

/* A chain on x: 8 adds, the blocker (INOUT: the chain's next link, which
 * a core may keep), 8 adds after it; the blocker fails in the
 * kernel-error case. */
static void handoff_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  for (int i = 0; i < 8; i++)
    add(o, f->x, PTO_INOUT, 1000, false);
  blocker_on(o, f->x, PTO_INOUT);
  for (int i = 0; i < 8; i++)
    add(o, f->x, PTO_INOUT, 1000, false);
  fail_now(o, f->mode);
}

static void test_handoff(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  fx f = {0};
  f.x_chain = true; /* run N+1's x: a chain whose links the cores keep */
  each_failure(chip, &f, handoff_fail_orch, good_orch, "hand-off");
  pto_chip_destroy(chip);
}

/* ---- priorities ---- */

/* One core: the blocker runs on it; twelve tasks of levels 1-3 queue. */
static void prio_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  blocker(o, NULL);
  for (int i = 0; i < 12; i++)
    log_task(o, 1000 + i, i % 3 + 1);
  fail_now(o, f->mode);
}

static void test_priority(void **state) {
  (void)state;
  pto_chip *chip = make_chip(1, 1, 0);
  fx f = {.sorted_log = true};
  each_failure(chip, &f, prio_fail_orch, prio_good_orch, "priorities");
  pto_chip_destroy(chip);
}

/* ---- checking mode ---- */

/* COMMUTE adds and REDUX contributions submitted (checking mode runs them
 * when the orchestrator waits: at the end), then the failure. */
static void checked_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  for (int i = 0; i < 3; i++) {
    add(o, f->x, PTO_COMMUTE, 1000, f->mode == FAIL_KERNEL && i == 1);
    contrib(o, f->y, 1000, false);
  }
  if (f->mode != FAIL_KERNEL) fail_now(o, f->mode);
}

static void test_checked(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 1);
  fx f = {0};
  static const int modes[] = {FAIL_CONTRACT, FAIL_KERNEL, FAIL_FATAL, FAIL_SUBMIT, FAIL_RING};
  for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
    f.mode = modes[k];
    run_failing(chip, checked_fail_orch, &f, "checking mode");
    run_good(chip, &f, mode_names[f.mode]);
  }
  pto_chip_destroy(chip);
}

/* ---- controlled schedules ---- */

/* A run N that a controller can run: no blocker (the controller runs
 * each block to its end before it goes on). */
static void ctl_fail_orch(pto_orch *o, void *arg) {
  fx *f = arg;
  for (int i = 0; i < 3; i++) {
    add(o, f->x, PTO_COMMUTE, 1000, f->mode == FAIL_KERNEL && i == 2);
    contrib(o, f->y, 1000, false);
    log_task(o, 1000 + i, 3);
  }
  if (f->mode != FAIL_KERNEL) fail_now(o, f->mode);
}

static void test_controlled(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  fx f = {0};
  static const int modes[] = {FAIL_KERNEL, FAIL_FATAL, FAIL_SUBMIT, FAIL_RING};
  for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
    f.mode = modes[k];
    /* a failed controlled run, then an uncontrolled one */
    assert_int_equal(chip_set_schedule(chip, 11 + k, NULL, NULL), PTO_OK);
    run_failing(chip, ctl_fail_orch, &f, "controlled schedule");
    assert_int_equal(chip_set_schedule(chip, 0, NULL, NULL), PTO_OK);
    run_good(chip, &f, mode_names[f.mode]);
    /* a failed uncontrolled run, then a controlled one */
    run_failing(chip, commute_fail_orch, &f, "uncontrolled");
    assert_int_equal(chip_set_schedule(chip, 11 + k, NULL, NULL), PTO_OK);
    run_good(chip, &f, mode_names[f.mode]);
    assert_int_equal(chip_set_schedule(chip, 0, NULL, NULL), PTO_OK);
  }
  pto_chip_destroy(chip);
}

/* good_orch with one more task: it departs from a record of good_orch */
static void longer_orch(pto_orch *o, void *arg) {
  good_orch(o, arg);
  log_task(o, 1000, 1);
}

static void test_replay_diverged(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  char rec[] = "/tmp/pto_rerun_recXXXXXX";
  int fd = mkstemp(rec);
  assert_true(fd >= 0);
  close(fd);
  fx f = {0};
  assert_int_equal(chip_set_schedule(chip, 5, rec, NULL), PTO_OK);
  run_good(chip, &f, "nothing (recorded)");
  assert_int_equal(chip_set_schedule(chip, 0, NULL, rec), PTO_OK);
  for (int i = 0; i < N; i++)
    f.x[i] = f.y[i] = 100 + i;
  atomic_store(&nlog, 0);
  pto_error_info err;
  hang_alarm_arm("a replay that diverges", 60);
  int rc = pto_chip_run(chip, longer_orch, &f, NULL, &err);
  hang_alarm_disarm();
  if (rc != PTO_EREPLAY) fail_msg("the diverging replay: %s %s", pto_status_name(rc), err.details);
  assert_int_equal(chip_set_schedule(chip, 0, NULL, NULL), PTO_OK);
  run_good(chip, &f, "a diverged replay");
  assert_int_equal(chip_set_schedule(chip, 0, NULL, rec), PTO_OK);
  run_good(chip, &f, "a diverged replay, then an uncontrolled run (replayed)");
  pto_chip_destroy(chip);
  unlink(rec);
}

/* ---- captured graphs ---- */

typedef struct gfx {
  int64_t x[N];
} gfx;

/* A blocker (scalar 0) and a chain of 8 INOUT adds on x (scalars 1 + 2i:
 * the value, 2 + 2i: fail). */
static void graph_orch(pto_orch *o, void *arg) {
  gfx *g = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, 0);
  pto_submit(o, k_block_id, &a, NULL, NULL);
  for (int i = 0; i < 8; i++)
    add(o, g->x, PTO_INOUT, i + 1, false);
}

static void launch(pto_chip *chip, pto_graph *g, int64_t *x, int fail, int expect,
                   const char *what) {
  pto_tensor buf = vec(x);
  uint64_t sc[17] = {0};
  for (int i = 0; i < 8; i++)
    sc[1 + 2 * i] = (uint64_t)(i + 1);
  if (fail == FAIL_KERNEL) sc[2 + 2 * 3] = 1; /* the 4th add fails */
  if (fail == FAIL_WATCHDOG) sc[0] = 1;       /* the blocker waits for ever */
  pto_graph_bindings b = {&buf, 1, 17, sc};
  for (int i = 0; i < N; i++)
    x[i] = i;
  atomic_store(&release, 0);
  pto_error_info err;
  hang_alarm_arm(what, 60);
  int rc = pto_graph_launch(chip, g, &b, NULL, &err);
  hang_alarm_disarm();
  if (rc != expect) fail_msg("%s: %s %s", what, pto_status_name(rc), err.details);
  for (int i = 0; !expect && i < N; i++)
    if (x[i] != i + 36)
      fail_msg("%s: element %d is %lld, want %d", what, i, (long long)x[i], i + 36);
}

static void test_graph(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  gfx cap = {{0}};
  pto_graph *g = NULL;
  pto_error_info err;
  assert_int_equal(pto_graph_capture(chip, graph_orch, &cap, &g, NULL, &err), PTO_OK);
  int64_t x[N];
  fx f = {0};
  launch(chip, g, x, FAIL_KERNEL, PTO_EKERNEL, "launch failing by a kernel error");
  launch(chip, g, x, -1, PTO_OK, "launch after a failed launch (kernel error)");
  launch(chip, g, x, FAIL_WATCHDOG, PTO_ESCHED_TIMEOUT, "launch failing by the watchdog");
  run_good(chip, &f, "a failed launch (watchdog)");
  launch(chip, g, x, -1, PTO_OK, "launch after a failed launch and a dynamic run");
  f.mode = FAIL_RING;
  run_failing(chip, commute_fail_orch, &f, "dynamic run before a launch");
  launch(chip, g, x, -1, PTO_OK, "launch after a failed dynamic run (heap deadlock)");
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* ---- a launch after dynamic runs: what a slot kept from them ----
 * A replay fills the task slots from the record, not by submits: every
 * field a submit sets must be set from the record too, or a launch runs
 * with what the slot's task of an earlier run left (a REDUX argument's
 * copies, COMMUTE exclusion or its absence, a priority). */

static int k_blocks_id, k_meet_id;

/* tensor 0 (OUTPUT_EXISTING, i64): element [block] = block + 1 */
static int k_blocks(const pto_kctx *c) {
  ((int64_t *)c->tensors[0].buf)[c->block_idx] = c->block_idx + 1;
  return 0;
}

/* tensor 0 (COMMUTE, i64): adds 1 to element 0, and notes whether another
 * k_meet was inside at the same time (it waits up to 200 ms for one, so
 * that two unexcluded ones meet; excluded ones never do, whatever the
 * timing; 200 ms keeps it far from the watchdog's 1000) */
static _Atomic int inside, met;
static int k_meet(const pto_kctx *c) {
  if (atomic_fetch_add(&inside, 1) != 0) atomic_store(&met, 1);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    if (atomic_load(&inside) > 1) atomic_store(&met, 1);
    usleep(200);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (!atomic_load(&met) && !pto_kctx_cancelled(c) &&
           (now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 200000000L);
  ((int64_t *)c->tensors[0].buf)[0] += 1;
  atomic_fetch_sub(&inside, 1);
  return 0;
}

typedef struct slot_fx {
  int64_t x[8];
  int64_t pad[40]; /* a shifted block lands here */
  int64_t c[N];
  int64_t y[N];
} slot_fx;

/* task 0: 4 blocks write x, at priority 2 */
static void blocks_orch(pto_orch *o, void *arg) {
  slot_fx *s = arg;
  pto_tensor t;
  int64_t n = 8;
  pto_tensor_init(&t, s->x, sizeof s->x, PTO_I64, 1, &n);
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t);
  pto_submit_opts so = {.block_num = 4, .priority = 2};
  pto_submit(o, k_blocks_id, &a, &so, NULL);
}

/* tasks 0 and 1: two COMMUTE tasks on c */
static void meet_orch(pto_orch *o, void *arg) {
  slot_fx *s = arg;
  for (int k = 0; k < 2; k++) {
    pto_tensor t = vec(s->c);
    pto_args a;
    pto_args_init(&a);
    pto_args_commute(&a, &t);
    pto_submit(o, k_meet_id, &a, NULL, NULL);
  }
}

/* A failed dynamic run whose tasks 0 and 1 are a REDUX contribution and a
 * plain add, at priority 0. */
static void slot_fill_orch(pto_orch *o, void *arg) {
  slot_fx *s = arg;
  contrib(o, s->y, 1, false);
  add(o, s->c, PTO_INOUT, 1, false);
  pto_orch_fatal(o, "run N stops here on purpose");
}

static void test_graph_after_dynamic_runs(void **state) {
  (void)state;
  pto_chip *chip = make_chip(2, 2, 0);
  assert_int_equal(pto_kernel_register_aiv(chip, "blocks", k_blocks, &k_blocks_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "meet", k_meet, &k_meet_id), PTO_OK);
  static slot_fx s;
  memset(&s, 0, sizeof s);
  pto_graph *gb = NULL, *gm = NULL;
  pto_error_info err;
  atomic_store(&met, 0);
  assert_int_equal(pto_graph_capture(chip, blocks_orch, &s, &gb, NULL, &err), PTO_OK);
  assert_int_equal(pto_graph_capture(chip, meet_orch, &s, &gm, NULL, &err), PTO_OK);
  assert_int_equal(atomic_load(&met), 0); /* the capture run excludes them */
  for (int round = 0; round < 2; round++) {
    assert_int_equal(pto_chip_run(chip, slot_fill_orch, &s, NULL, &err), PTO_EFATAL);
    memset(&s, 0, sizeof s);
    hang_alarm_arm("a launch after a failed dynamic run", 60);
    int rc = pto_graph_launch(chip, gb, NULL, NULL, &err);
    hang_alarm_disarm();
    if (rc) fail_msg("the blocks graph: %s: %s", pto_status_name(rc), err.details);
    for (int b = 0; b < 4; b++)
      if (s.x[b] != b + 1)
        fail_msg("round %d: block %d wrote x[%d] = %lld, want %d (it saw a REDUX copy left in "
                 "its slot by the run before)",
                 round, b, b, (long long)s.x[b], b + 1);
    for (int i = 0; i < 40; i++)
      if (s.pad[i]) fail_msg("round %d: a block wrote past x, at pad[%d]", round, i);
    int prio = chip->run->slots[0].priority;
    if (prio != 2)
      fail_msg("round %d: the replayed task 0 has priority %d, captured 2", round, prio);
    assert_int_equal(pto_chip_run(chip, slot_fill_orch, &s, NULL, &err), PTO_EFATAL);
    s.c[0] = 0;
    atomic_store(&met, 0);
    hang_alarm_arm("a launch after a failed dynamic run", 60);
    rc = pto_graph_launch(chip, gm, NULL, NULL, &err);
    hang_alarm_disarm();
    if (rc) fail_msg("the COMMUTE graph: %s: %s", pto_status_name(rc), err.details);
    if (atomic_load(&met))
      fail_msg("round %d: the replay's two COMMUTE tasks on the same bytes ran at once", round);
    assert_int_equal(s.c[0], 2);
  }
  pto_graph_destroy(gb);
  pto_graph_destroy(gm);
  pto_chip_destroy(chip);
}

/* ---- scopes the orchestration left open, closed at the run's end ----
 * pto_chip_run closes them after the orchestration returns, one
 * pto_scope_end each; a run that fails meanwhile (a kernel, the watchdog,
 * pto_orch_fatal from another thread) has every later scope_end refused
 * at its gate, the scope left open. Before, that loop went on until the
 * depth reached 0: the orchestrator spun forever, the run never returned. */

#define DONE_TASKS 100000 /* completed, not yet retired when the scopes close */

static int k_watch_id;

/* Fails as soon as the run's end closes the innermost open scope (its one
 * held range is marked ended). That scope_end then retires DONE_TASKS
 * completed tasks, which takes far longer than the failure takes to latch
 * (about 1 ms against 30 us), so the next scope_end meets the failure
 * (white box: run.h). */
/* Its reads of the orchestrator's own fields race with the orchestrator's
 * plain writes by design (they only time the failure); ThreadSanitizer is
 * told to leave them out, as it cannot tell a probe from a defect. */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define PROBE_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define PROBE_READS_END()   AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define PROBE_READS_BEGIN() ((void)0)
#define PROBE_READS_END()   ((void)0)
#endif
static int k_watch(const pto_kctx *c) {
  const pto_run *r = c->run;
  for (;;) {
    PROBE_READS_BEGIN();
    uint32_t n = __atomic_load_n(&r->nheld, __ATOMIC_RELAXED);
    bool ended = n && __atomic_load_n(&r->held_until[n - 1], __ATOMIC_RELAXED) != INT64_MAX;
    PROBE_READS_END();
    if (ended) return pto_kctx_fail(c, PTO_EKERNEL, "fails while the run's end closes the scopes");
    if (pto_kctx_cancelled(c)) return 0;
  }
}

/* A blocker first (no task retires after it until it returns), three
 * scopes with one OUTPUT held in the innermost, DONE_TASKS tasks, the
 * watcher; then the blocker returns, and the orchestration once every
 * task but the watcher has completed, with the three scopes open. */
static void scopes_left_open_orch(pto_orch *o, void *arg) {
  (void)arg;
  blocker_on(o, NULL, PTO_INPUT);
  for (int i = 0; i < 3; i++)
    if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  heap_fill(o, 1);
  for (int i = 0; i < DONE_TASKS; i++)
    log_task(o, -1, 0);
  pto_args a;
  pto_args_init(&a);
  if (pto_submit(o, k_watch_id, &a, NULL, NULL)) return;
  atomic_store(&release, 1);
  pto_run *r = o->run;
  while (atomic_load(&r->completed) < r->next_id - 1 && !pto_orch_status(o))
    usleep(100);
}

static void test_fail_while_scopes_close(void **state) {
  (void)state;
  pto_chip *chip = make_chip_slots(2, 2, 0, 2 * DONE_TASKS);
  assert_int_equal(pto_kernel_register_aiv(chip, "watch", k_watch, &k_watch_id), PTO_OK);
  fx f = {0};
  for (int k = 0; k < 3; k++) {
    atomic_store(&nlog, 0);
    atomic_store(&release, 0);
    pto_error_info err;
    hang_alarm_arm("a run failing while its end closes the scopes left open", 60);
    int rc = pto_chip_run(chip, scopes_left_open_orch, NULL, NULL, &err);
    hang_alarm_disarm();
    if (rc != PTO_EKERNEL) fail_msg("run N: %s: %s", pto_status_name(rc), err.details);
    run_good(chip, &f, "a run that failed while its end closed the scopes");
  }
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commute),
      cmocka_unit_test(test_redux),
      cmocka_unit_test(test_handoff),
      cmocka_unit_test(test_priority),
      cmocka_unit_test(test_checked),
      cmocka_unit_test(test_controlled),
      cmocka_unit_test(test_replay_diverged),
      cmocka_unit_test(test_graph),
      cmocka_unit_test(test_graph_after_dynamic_runs),
      cmocka_unit_test(test_fail_while_scopes_close),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
