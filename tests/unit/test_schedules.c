/* test_schedules.c — controlled schedules (docs/schedules.md) where the
 * scenes do not reach:
 *
 *  - asynchronous completions: blocks hand their tokens to a completer
 *    thread that presents them in whatever order it has them (newest
 *    first); under every seed the results are right, and a replay of the
 *    record gives the same results and the same record;
 *  - which cores run what: a MIX kernel and a gang (sync_start) record
 *    the cores each part ran on; the replay puts every part on the same
 *    core (and re-records the same record);
 *  - the trace of a replay shows the recorded run's blocks in the same
 *    order on the same tracks;
 *  - a replay the program departs from, or on another chip shape, fails
 *    with PTO_EREPLAY naming what differs. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"
#include "trace_read.h"

static void temp_path(char *path, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, n, "%s/pto_sched_%s_XXXXXX", dir && dir[0] ? dir : "/tmp", what);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
}

static bool same_file(const char *a, const char *b) {
  FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
  assert_non_null(f);
  assert_non_null(g);
  int x, y;
  do {
    x = fgetc(f);
    y = fgetc(g);
  } while (x == y && x != EOF);
  fclose(f);
  fclose(g);
  return x == y;
}

/* ---- asynchronous completions ---- */

#define NT 12 /* tasks: even ones async, each reads the one before */

typedef struct pending {
  uint64_t token;
  int64_t *dst;
  int64_t value;
} pending;

static struct {
  pthread_mutex_t lock;
  pending q[64];
  int n;
  _Atomic int stop;
  pto_chip *chip;
} completer = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* out[i] = in * 3 + i (scalar 0: i); an even task's value is written by
 * the completer, just before it presents the token. */
static int k_step(const pto_kctx *c) {
  const int64_t *in = pto_tensor_at_linear(&c->tensors[0], 0);
  int64_t *out = pto_tensor_at_linear(&c->tensors[1], 0);
  int64_t v = *in * 3 + (int64_t)c->scalars[0];
  if (c->scalars[0] % 2) {
    *out = v;
    return 0;
  }
  uint64_t tok;
  int rc = pto_kctx_async_begin(c, &tok);
  if (rc) return rc;
  pthread_mutex_lock(&completer.lock);
  completer.q[completer.n++] = (pending){tok, out, v};
  pthread_mutex_unlock(&completer.lock);
  return 0;
}

static void *completer_main(void *arg) {
  (void)arg;
  while (!atomic_load(&completer.stop)) {
    pthread_mutex_lock(&completer.lock);
    pending p = {0};
    bool have = completer.n > 0;
    if (have) p = completer.q[--completer.n]; /* newest first */
    pthread_mutex_unlock(&completer.lock);
    if (!have) {
      usleep(50);
      continue;
    }
    *p.dst = p.value;
    assert_int_equal(pto_chip_async_complete(completer.chip, p.token), PTO_OK);
  }
  return NULL;
}

typedef struct chain {
  int k;
  int64_t v[NT + 1];
  pto_tensor t[NT + 1];
} chain;

static void chain_orch(pto_orch *o, void *arg) {
  chain *ch = arg;
  for (int i = 0; i < NT; i++) {
    pto_args a;
    pto_args_init(&a);
    /* tasks 2j and 2j+1 both read v[2j]: two branches, then they join */
    pto_args_input(&a, &ch->t[i - i % 2]);
    pto_args_output_existing(&a, &ch->t[i + 1]);
    pto_args_scalar(&a, (uint64_t)i);
    assert_int_equal(pto_submit(o, ch->k, &a, NULL, NULL), PTO_OK);
  }
}

static int run_chain(const pto_chip_config *cfg, chain *ch, pto_error_info *err) {
  pto_chip *chip;
  assert_int_equal(pto_chip_create(cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "step", k_step, &ch->k), PTO_OK);
  memset(ch->v, 0, sizeof ch->v);
  ch->v[0] = 1;
  for (int i = 0; i <= NT; i++) {
    int64_t shape[1] = {1};
    assert_int_equal(pto_tensor_init(&ch->t[i], &ch->v[i], sizeof ch->v[i], PTO_I64, 1, shape),
                     PTO_OK);
  }
  completer.chip = chip;
  completer.n = 0;
  atomic_store(&completer.stop, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, completer_main, NULL), 0);
  int rc = pto_chip_run(chip, chain_orch, ch, NULL, err);
  atomic_store(&completer.stop, 1);
  pthread_join(th, NULL);
  pto_chip_destroy(chip);
  return rc;
}

static void test_async_completions(void **state) {
  (void)state;
  int64_t want[NT + 1] = {1};
  for (int i = 0; i < NT; i++)
    want[i + 1] = want[i - i % 2] * 3 + i;
  char rec[256], rerec[256];
  temp_path(rec, sizeof rec, "async");
  temp_path(rerec, sizeof rerec, "async2");
  for (uint64_t seed = 1; seed <= 8; seed++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 2;
    cfg.schedule_seed = seed;
    cfg.record_path = rec;
    chain ch, again;
    pto_error_info err;
    int rc = run_chain(&cfg, &ch, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    assert_memory_equal(ch.v, want, sizeof want);
    cfg.schedule_seed = 0;
    cfg.replay_path = rec;
    cfg.record_path = rerec;
    rc = run_chain(&cfg, &again, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    assert_memory_equal(again.v, want, sizeof want);
    assert_true(same_file(rec, rerec));
  }
  FILE *f = fopen(rec, "r");
  char line[128];
  int asyncs = 0;
  while (fgets(line, sizeof line, f))
    asyncs += line[0] == 'A';
  fclose(f);
  assert_int_equal(asyncs, NT / 2); /* every async completion is a recorded choice */
  remove(rec);
  remove(rerec);
}

/* ---- cores ---- */

#define MIX_BLOCKS  3
#define GANG_BLOCKS 4

/* where[task][block][part] = the core that ran that part (+ 1) */
static int32_t where[2][GANG_BLOCKS][3];

static int k_where(const pto_kctx *c) {
  int task = (int)c->scalars[0];
  int part = c->core_type == PTO_CORE_AIC ? 0 : 1 + c->sub_block_id;
  where[task][c->block_idx][part] = c->core_id + 1;
  return 0;
}

typedef struct kids {
  int mix, gang;
} kids;

static void where_orch(pto_orch *o, void *arg) {
  kids *k = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, 0);
  pto_submit_opts mix = {.block_num = MIX_BLOCKS};
  assert_int_equal(pto_submit(o, k->mix, &a, &mix, NULL), PTO_OK);
  pto_args_init(&a);
  pto_args_scalar(&a, 1);
  pto_submit_opts gang = {.block_num = GANG_BLOCKS, .sync_start = true};
  assert_int_equal(pto_submit(o, k->gang, &a, &gang, NULL), PTO_OK);
}

static int run_where_traced(const pto_chip_config *cfg, const char *trace, pto_error_info *err) {
  pto_chip *chip;
  assert_int_equal(pto_chip_create(cfg, &chip), PTO_OK);
  if (trace) assert_int_equal(pto_chip_set_trace(chip, trace), PTO_OK);
  kids k;
  pto_kernel_desc mix = {.name = "mix", .aic = k_where, .aiv = k_where, .aiv_count = 2};
  assert_int_equal(pto_kernel_register(chip, &mix, &k.mix), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "gang", k_where, &k.gang), PTO_OK);
  memset(where, 0, sizeof where);
  int rc = pto_chip_run(chip, where_orch, &k, NULL, err);
  pto_chip_destroy(chip);
  return rc;
}

static int run_where(const pto_chip_config *cfg, pto_error_info *err) {
  return run_where_traced(cfg, NULL, err);
}

static void test_cores_replayed(void **state) {
  (void)state;
  char rec[256], rerec[256];
  temp_path(rec, sizeof rec, "where");
  temp_path(rerec, sizeof rerec, "where2");
  int32_t first[2][GANG_BLOCKS][3];
  bool moved = false;
  for (uint64_t seed = 1; seed <= 6; seed++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 4;
    cfg.schedule_seed = seed;
    cfg.record_path = rec;
    pto_error_info err;
    assert_int_equal(run_where(&cfg, &err), PTO_OK);
    int32_t got[2][GANG_BLOCKS][3];
    memcpy(got, where, sizeof got);
    for (int b = 0; b < MIX_BLOCKS; b++) /* a MIX block: one cluster, AIC first */
      assert_true(got[0][b][0] && (got[0][b][1] - 1) / 3 == (got[0][b][0] - 1) / 3 &&
                  (got[0][b][2] - 1) / 3 == (got[0][b][0] - 1) / 3);
    if (seed == 1)
      memcpy(first, got, sizeof got);
    else
      moved |= memcmp(first, got, sizeof got) != 0;
    cfg.schedule_seed = 0;
    cfg.replay_path = rec;
    cfg.record_path = rerec;
    assert_int_equal(run_where(&cfg, &err), PTO_OK);
    assert_memory_equal(where, got, sizeof got);
    assert_true(same_file(rec, rerec));
  }
  assert_true(moved); /* the seeds chose cores, not one fixed placement */
  remove(rec);
  remove(rerec);
}

/* ---- traces ---- */

typedef struct slice {
  double ts;
  int64_t task, block, part, tid;
} slice;

static int64_t arg_of(const trace_json *ev, const char *key) {
  double x = 0; /* a block's first part has no args.part */
  trace_json_num(trace_json_get(ev, "args"), key, &x);
  return (int64_t)x;
}

static int by_time(const void *a, const void *b) {
  const slice *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int by_place(const void *a, const void *b) {
  const slice *x = a, *y = b;
  if (x->block != y->block) return x->block < y->block ? -1 : 1;
  return (x->part > y->part) - (x->part < y->part);
}

/* The block slices of a trace in start order, but for what one action of
 * the schedule started together (the parts of a MIX block; every block of
 * gang task `gang`), whose clocks may read either way: in block and part
 * order. Returns how many. */
static int block_order(const char *path, int64_t gang, slice *out, int max) {
  char err[256] = "";
  trace_json_doc *d = NULL;
  assert_int_equal(trace_json_load(path, &d, err, sizeof err), 0);
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  assert_non_null(evs);
  int n = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *cat = trace_json_str(e, "cat"), *ph = trace_json_str(e, "ph");
    if (!cat || !ph || ph[0] != 'X' || strcmp(cat, "block") != 0) continue;
    double ts = 0, tid = 0;
    trace_json_num(e, "ts", &ts);
    trace_json_num(e, "tid", &tid);
    assert_true(n < max);
    out[n++] = (slice){ts, arg_of(e, "task"), arg_of(e, "block"), arg_of(e, "part"), (int64_t)tid};
  }
  trace_json_free(d);
  qsort(out, (size_t)n, sizeof *out, by_time);
  for (int i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && out[j].task == out[i].task &&
                    (out[i].task == gang || out[j].block == out[i].block);
         j++) {
    }
    qsort(out + i, (size_t)(j - i), sizeof *out, by_place);
  }
  return n;
}

static void test_trace_order_replayed(void **state) {
  (void)state;
  char rec[256], t1[256], t2[256];
  temp_path(rec, sizeof rec, "trace");
  temp_path(t1, sizeof t1, "trace1");
  temp_path(t2, sizeof t2, "trace2");
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 4;
  cfg.schedule_seed = 5;
  cfg.record_path = rec;
  pto_error_info err;
  assert_int_equal(run_where_traced(&cfg, t1, &err), PTO_OK);
  cfg.schedule_seed = 0;
  cfg.record_path = NULL;
  cfg.replay_path = rec;
  assert_int_equal(run_where_traced(&cfg, t2, &err), PTO_OK);
  static slice a[64], b[64];
  int na = block_order(t1, 1, a, 64), nb = block_order(t2, 1, b, 64);
  /* every part of 3 MIX blocks (AIC + 2 AIV) and of a 4-block gang */
  assert_int_equal(na, MIX_BLOCKS * 3 + GANG_BLOCKS);
  assert_int_equal(nb, na);
  for (int i = 0; i < na; i++) {
    assert_int_equal(a[i].task, b[i].task);
    assert_int_equal(a[i].block, b[i].block);
    assert_int_equal(a[i].part, b[i].part);
    assert_int_equal(a[i].tid, b[i].tid); /* the same core's track */
  }
  remove(rec);
  remove(t1);
  remove(t2);
}

/* ---- divergence ---- */

/* Records a seeded run_where (4 clusters, seed 3) in a new temporary file
 * rec[n] (named after `what`), then sets *cfg to replay it: no seed, no
 * record. */
static void record_where(char *rec, size_t n, const char *what, pto_chip_config *cfg) {
  temp_path(rec, n, what);
  pto_chip_config_init(cfg);
  cfg->clusters = 4;
  cfg->schedule_seed = 3;
  cfg->record_path = rec;
  pto_error_info err;
  assert_int_equal(run_where(cfg, &err), PTO_OK);
  cfg->schedule_seed = 0;
  cfg->record_path = NULL;
  cfg->replay_path = rec;
}

static void test_divergence_named(void **state) {
  (void)state;
  char rec[256];
  pto_chip_config cfg;
  record_where(rec, sizeof rec, "div", &cfg);
  pto_error_info err;
  /* another chip shape */
  cfg.clusters = 5;
  assert_int_equal(run_where(&cfg, &err), PTO_EREPLAY);
  assert_non_null(strstr(err.details, "recorded on 4 clusters of 1 AIC + 2 AIV, this chip has 5"));
  /* another program: the async chain's kernel is "step", not "mix" */
  cfg.clusters = 4;
  chain ch;
  assert_int_equal(run_chain(&cfg, &ch, &err), PTO_EREPLAY);
  assert_non_null(strstr(err.details, "kernel 0 is 'mix' in the record, 'step' here"));
  remove(rec);
}

/* ---- records refused before they could do harm ---- */

/* A seed above INT64_MAX would be recorded as no replay can read it. */
static void test_seed_above_int64_max_refused(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.schedule_seed = (uint64_t)INT64_MAX + 1;
  pto_chip *chip;
  pto_error_info err;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_EINVAL);
  assert_non_null(strstr(err.details, "schedule_seed = 9223372036854775808, must be "
                                      "0..9223372036854775807"));
  cfg.schedule_seed = INT64_MAX;
  assert_int_equal(pto_chip_create_ex(&cfg, &chip, &err), PTO_OK);
  pto_chip_destroy(chip);
}

/* A replay makes the record's choices, from the seed the record holds: a
 * seed given with it would be silently ignored (pto run --fuzz-schedules
 * under PTO_REPLAY reported every "seed" failing, each run the one
 * record's replay). Refused at create, from the config and from the
 * environment, naming both. */
static void test_seed_with_replay_refused(void **state) {
  (void)state;
  char rec[256];
  pto_chip_config cfg;
  record_where(rec, sizeof rec, "seedrep", &cfg);
  pto_error_info err;
  cfg.schedule_seed = 5;
  pto_chip *chip = NULL;
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc == PTO_OK) pto_chip_destroy(chip);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "schedule_seed = 5 (PTO_SCHEDULE_SEED) with replay_path"));
  assert_non_null(strstr(err.details, "a replay makes the record's choices"));
  /* the same from the environment */
  setenv("PTO_SCHEDULE_SEED", "5", 1);
  setenv("PTO_REPLAY", rec, 1);
  pto_chip_config_init(&cfg);
  chip = NULL;
  rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc == PTO_OK) pto_chip_destroy(chip);
  unsetenv("PTO_SCHEDULE_SEED");
  unsetenv("PTO_REPLAY");
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(err.details, "schedule_seed = 5 (PTO_SCHEDULE_SEED) with replay_path"));
  /* the replay alone is taken */
  pto_chip_config_init(&cfg);
  cfg.clusters = 4;
  cfg.replay_path = rec;
  assert_int_equal(run_where(&cfg, &err), PTO_OK);
  remove(rec);
}

static char *slurp(const char *file, size_t *len) {
  FILE *f = fopen(file, "rb");
  assert_non_null(f);
  char *s = calloc(1, 1 << 16);
  *len = fread(s, 1, (1 << 16) - 1, f);
  fclose(f);
  return s;
}

static void spit(const char *file, const char *s, size_t len) {
  FILE *f = fopen(file, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(s, 1, len, f), len);
  fclose(f);
}

/* Recording over the record being replayed would lose it when the replay
 * departs: refused at create, by the file (another spelling, a hard link)
 * and not only by the string. */
static void test_record_over_its_replay_refused(void **state) {
  (void)state;
  char rec[256], dot[300], link_path[300];
  temp_path(rec, sizeof rec, "same");
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 4;
  cfg.schedule_seed = 3;
  cfg.record_path = rec;
  pto_error_info err;
  assert_int_equal(run_where(&cfg, &err), PTO_OK);
  size_t len;
  char *before = slurp(rec, &len);
  char *slash = strrchr(rec, '/');
  snprintf(dot, sizeof dot, "%.*s/.%s", (int)(slash - rec), rec, slash);
  snprintf(link_path, sizeof link_path, "%s.link", rec);
  assert_int_equal(link(rec, link_path), 0);
  const char *other[] = {rec, dot, link_path};
  for (int i = 0; i < 3; i++) {
    cfg.schedule_seed = 0;
    cfg.clusters = 5; /* a replay that departs at once */
    cfg.replay_path = rec;
    cfg.record_path = other[i];
    pto_chip *chip = NULL;
    int rc = pto_chip_create_ex(&cfg, &chip, &err);
    if (rc == PTO_OK) { /* what refusing prevents: the departed replay's record */
      pto_chip_destroy(chip);
      run_where(&cfg, &err);
    }
    assert_int_equal(rc, PTO_EINVAL);
    assert_non_null(strstr(err.details, "are the same file: the record would overwrite the one "
                                        "being replayed"));
  }
  size_t len2;
  char *after = slurp(rec, &len2);
  assert_int_equal(len2, len);
  assert_memory_equal(after, before, len);
  free(before);
  free(after);
  remove(link_path);
  remove(rec);
}

/* A record is text: a NUL byte in it is refused, naming the line (its
 * lines were read as C strings, so what followed the NUL went unseen). */
static void test_record_with_nul_refused(void **state) {
  (void)state;
  char rec[256];
  temp_path(rec, sizeof rec, "nul");
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 4;
  cfg.schedule_seed = 3;
  cfg.record_path = rec;
  pto_error_info err;
  assert_int_equal(run_where(&cfg, &err), PTO_OK);
  size_t len;
  char *text = slurp(rec, &len);
  char *seed_end = strchr(strstr(text, "\nseed 3") + 1, '\n'); /* line 2, "seed 3" */
  memmove(seed_end + 2, seed_end, len - (size_t)(seed_end - text));
  memcpy(seed_end, "\0x", 2);
  spit(rec, text, len + 2);
  free(text);
  cfg.schedule_seed = 0;
  cfg.record_path = NULL;
  cfg.replay_path = rec;
  assert_int_equal(run_where(&cfg, &err), PTO_EREPLAY);
  assert_non_null(strstr(err.details, "line 2: a NUL byte (a record is text)"));
  remove(rec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_async_completions),
      cmocka_unit_test(test_cores_replayed),
      cmocka_unit_test(test_trace_order_replayed),
      cmocka_unit_test(test_divergence_named),
      cmocka_unit_test(test_seed_above_int64_max_refused),
      cmocka_unit_test(test_seed_with_replay_refused),
      cmocka_unit_test(test_record_over_its_replay_refused),
      cmocka_unit_test(test_record_with_nul_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
