/* test_trace.c — trace recording (concurrent, one thread per track), the
 * JSON it writes (schema), the reader, merging, and the summary numbers of
 * `pto trace` on a hand-built trace whose answers are known. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/trace.h"
#include "pto/status.h"
#include "trace_json.h"
#include "trace_read.h"

#define NTHREADS 4
#define NTASKS   300 /* per thread */
#define NBLOCKS  3   /* per task */

static void tmp_path(char *buf, size_t n, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/pto_test_trace_%s_%d.json", dir && *dir ? dir : "/tmp", tag, (int)getpid());
}

static trace_json_doc *load(const char *path) {
  char err[256] = "";
  trace_json_doc *d = NULL;
  int rc = trace_json_load(path, &d, err, sizeof err);
  if (rc) fprintf(stderr, "load %s: %s\n", path, err);
  assert_int_equal(rc, 0);
  return d;
}

static void assert_valid(const trace_json *root) {
  char err[256] = "";
  int rc = trace_validate(root, err, sizeof err);
  if (rc) fprintf(stderr, "schema: %s\n", err);
  assert_int_equal(rc, 0);
}

static int64_t arg(const trace_json *ev, const char *key) {
  double x = -1;
  if (!trace_json_num(trace_json_get(ev, "args"), key, &x)) return -1;
  return (int64_t)x;
}

/* ---- concurrent recording ---- */

typedef struct rec_arg {
  pto_trace *t;
  int track;
  int id;
} rec_arg;

static void *recorder(void *p) {
  rec_arg *a = p;
  uint64_t now = 1000000000ull + (uint64_t)a->id * 7;
  for (int k = 0; k < NTASKS; k++) {
    int64_t task = (int64_t)a->id * NTASKS + k;
    for (int b = 0; b < NBLOCKS; b++) {
      if (b == 0 && k > 0) {
        int64_t deps[2] = {task - 1, task - 1}; /* a repeated edge is harmless */
        trace_slice_deps(a->t, a->track, "kern\"el", "block", now, now + 500, task, b, deps, 2);
      } else {
        trace_slice(a->t, a->track, "kern\"el", "block", now, now + 500, task, b);
      }
      now += 600;
    }
    trace_instant(a->t, a->track, "drain_attempt", "sched", now, k);
    trace_slice_arg(a->t, a->track, "remote_store", "comm", now, now + 10, task, -1, "peer", a->id);
    now += 20;
  }
  return NULL;
}

static void test_concurrent_record_write_read(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "concurrent");
  pto_trace *t = trace_create(0, "chip \"0\"");
  assert_non_null(t);
  rec_arg args[NTHREADS];
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    char name[32];
    snprintf(name, sizeof name, "core %d", i);
    args[i] = (rec_arg){t, trace_track(t, name), i};
    assert_int_equal(args[i].track, i);
  }
  int orch = trace_track(t, "orchestrator"); /* a named track with no events */
  assert_int_equal(orch, NTHREADS);
  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, recorder, &args[i]), 0);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(trace_dropped(t), 0);
  assert_int_equal(trace_write(t, path), 0);
  trace_destroy(t);

  trace_json_doc *d = load(path);
  const trace_json *root = trace_json_root(d);
  assert_valid(root);
  const char *unit = trace_json_str(root, "displayTimeUnit");
  assert_non_null(unit);
  assert_string_equal(unit, "ns");

  /* Every block exactly once, on the track of the thread that ran it. */
  const trace_json *evs = trace_json_get(root, "traceEvents");
  static uint8_t seen[NTHREADS * NTASKS][NBLOCKS];
  memset(seen, 0, sizeof seen);
  int threads_named = 0, deps_seen = 0, instants = 0, comm = 0, flow_ends = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *ph = trace_json_str(e, "ph"), *name = trace_json_str(e, "name");
    double pid = 0, tid = 0;
    assert_true(trace_json_num(e, "pid", &pid));
    assert_true(trace_json_num(e, "tid", &tid));
    assert_true(pid == 1.0); /* rank 0 shows as pid 1 */
    if (ph[0] == 'M') {
      if (strcmp(name, "thread_name") == 0) threads_named++;
      if (strcmp(name, "process_name") == 0)
        assert_string_equal(trace_json_str(trace_json_get(e, "args"), "name"), "chip \"0\"");
      continue;
    }
    if (ph[0] == 'i') {
      instants++;
      continue;
    }
    if (ph[0] == 's' || ph[0] == 'f') { /* the arrow of task - 1 -> task, once */
      flow_ends++;
      assert_string_equal(name, "dep");
      assert_int_equal(arg(e, "from") + 1, arg(e, "to"));
      assert_int_equal(arg(e, "to") / NTASKS, (int64_t)tid - 1);
      continue;
    }
    const char *cat = trace_json_str(e, "cat");
    if (strcmp(cat, "comm") == 0) {
      comm++;
      assert_int_equal(arg(e, "peer"), (int64_t)tid - 1);
      continue;
    }
    assert_string_equal(cat, "block");
    assert_string_equal(name, "kern\"el");
    int64_t task = arg(e, "task"), block = arg(e, "block");
    assert_in_range(task, 0, NTHREADS * NTASKS - 1);
    assert_in_range(block, 0, NBLOCKS - 1);
    assert_int_equal(task / NTASKS, (int64_t)tid - 1);
    assert_int_equal(seen[task][block], 0);
    seen[task][block] = 1;
    double dur = 0;
    assert_true(trace_json_num(e, "dur", &dur));
    assert_true(fabs(dur - 0.5) < 1e-9); /* 500 ns in microseconds */
    const trace_json *deps = trace_json_get(trace_json_get(e, "args"), "deps");
    if (deps) {
      deps_seen++;
      assert_int_equal(deps->n, 2);
      assert_true(deps->u.items[0].u.num == (double)(task - 1));
    }
  }
  for (int k = 0; k < NTHREADS * NTASKS; k++)
    for (int b = 0; b < NBLOCKS; b++)
      assert_int_equal(seen[k][b], 1);
  assert_int_equal(threads_named, NTHREADS + 1);
  assert_int_equal(deps_seen, NTHREADS * (NTASKS - 1));
  assert_int_equal(instants, NTHREADS * NTASKS);
  assert_int_equal(comm, NTHREADS * NTASKS);
  assert_int_equal(flow_ends, 2 * NTHREADS * (NTASKS - 1));
  trace_flow_counts fc;
  char ferr[256] = "";
  if (trace_check_flows(root, &fc, ferr, sizeof ferr)) fail_msg("flows: %s", ferr);
  assert_int_equal(fc.deps, NTHREADS * (NTASKS - 1));
  assert_int_equal(fc.edges, NTHREADS * (NTASKS - 1));

  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(root, &s, err, sizeof err), 0);
  assert_int_equal(s.blocks, NTHREADS * NTASKS * NBLOCKS);
  assert_int_equal(s.dup_blocks, 0);
  assert_int_equal(s.tasks, NTHREADS * NTASKS);
  assert_int_equal(s.ntracks, NTHREADS);
  assert_int_equal(s.edges, 2 * NTHREADS * (NTASKS - 1));
  assert_int_equal(s.missing_deps, 0);
  /* Each chain is NTASKS tasks of 3 blocks 600 ns apart: span 1.7 us each. */
  assert_true(fabs(s.critical_us - NTASKS * 1.7) < 1e-6);
  assert_int_equal(s.critical_tasks, NTASKS);
  trace_summary_free(&s);
  trace_json_free(d);
  unlink(path);
}

/* ---- the summary on a trace with known answers ---- */

#define US   1000ull
#define BASE 5000000000ull /* arbitrary clock reading: the file starts at 0 */

static void build_known(const char *path) {
  pto_trace *t = trace_create(0, "chip");
  int sched = trace_track(t, "sched 0");
  int c0 = trace_track(t, "core 0");
  int c1 = trace_track(t, "core 1");
  int orch = trace_track(t, "orchestrator");
  /* core 0: task 0 [0,100], task 1 [150,250] after 0, task 3 [300,400] after 1, 2 */
  int64_t d1[] = {0}, d3[] = {1, 2};
  trace_slice_deps(t, c0, "k", "block", BASE, BASE + 100 * US, 0, 0, NULL, 0);
  trace_slice_deps(t, c0, "k", "block", BASE + 150 * US, BASE + 250 * US, 1, 0, d1, 1);
  trace_slice_deps(t, c0, "k", "block", BASE + 300 * US, BASE + 400 * US, 3, 0, d3, 2);
  /* core 1: task 2, two blocks [0,50] and [60,120] */
  trace_slice_deps(t, c1, "k2", "block", BASE, BASE + 50 * US, 2, 0, NULL, 0);
  trace_slice(t, c1, "k2", "block", BASE + 60 * US, BASE + 120 * US, 2, 1);
  /* scheduler: overlapping phases count once; not a core, so no gaps */
  trace_slice(t, sched, "dispatch", "sched", BASE, BASE + 10 * US, 0, -1);
  trace_slice(t, sched, "drain", "sched", BASE + 200 * US, BASE + 300 * US, 2, -1);
  trace_slice(t, sched, "drain_attempt", "sched", BASE + 210 * US, BASE + 220 * US, -1, -1);
  trace_instant(t, sched, "drain_attempt", "sched", BASE + 250 * US, 2);
  trace_slice(t, orch, "submit", "orch", BASE, BASE + 40 * US, 0, -1);
  assert_int_equal(trace_write(t, path), 0);
  trace_destroy(t);
}

static void test_summary_known_numbers(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "known");
  build_known(path);
  trace_json_doc *d = load(path);
  assert_valid(trace_json_root(d));
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_true(fabs(s.t0_us) < 1e-9);
  assert_true(fabs(s.span_us - 400.0) < 1e-9);
  assert_int_equal(s.blocks, 5);
  assert_int_equal(s.tasks, 4);
  assert_int_equal(s.slices, 9);
  assert_int_equal(s.ntracks, 4);
  /* Display order = declaration order (thread_sort_index). */
  const char *names[] = {"sched 0", "core 0", "core 1", "orchestrator"};
  const double busy[] = {110, 300, 110, 40};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(s.tracks[i].name, names[i]);
    assert_true(fabs(s.tracks[i].busy_us - busy[i]) < 1e-9);
    assert_true(fabs(s.tracks[i].span_us - 400.0) < 1e-9);
  }
  /* Gaps on cores only, longest first; ties keep track then time order. */
  assert_true(s.gaps_on_cores);
  assert_int_equal(s.ngaps, 4);
  const struct {
    const char *track;
    double start, dur;
  } gaps[] = {{"core 1", 120, 280}, {"core 0", 100, 50}, {"core 0", 250, 50}, {"core 1", 50, 10}};
  for (int g = 0; g < 4; g++) {
    assert_string_equal(s.tracks[s.gaps[g].track].name, gaps[g].track);
    assert_true(fabs(s.gaps[g].start_us - gaps[g].start) < 1e-9);
    assert_true(fabs(s.gaps[g].dur_us - gaps[g].dur) < 1e-9);
  }
  /* 0 -> 1 -> 3: 100 + 100 + 100 beats 2 -> 3 (120 + 100). */
  assert_true(fabs(s.critical_us - 300.0) < 1e-9);
  assert_int_equal(s.critical_tasks, 3);
  assert_int_equal(s.critical_last, 3);
  assert_int_equal(s.edges, 3);
  assert_int_equal(s.missing_deps, 0);
  trace_summary_free(&s);
  trace_json_free(d);
  unlink(path);
}

/* Task 2's span makes the other chain critical once it is longer. */
static void test_critical_path_through_span(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "span");
  pto_trace *t = trace_create(3, "chip");
  int c = trace_track(t, "core");
  int64_t d[] = {1, 0};
  trace_slice(t, c, "k", "block", 0 * US + BASE, 10 * US + BASE, 0, 0);
  trace_slice(t, c, "k", "block", 20 * US + BASE, 30 * US + BASE, 1, 0);
  trace_slice(t, c, "k", "block", 40 * US + BASE, 90 * US + BASE, 1, 1); /* span 70 */
  trace_slice_deps(t, c, "k", "block", 100 * US + BASE, 101 * US + BASE, 2, 0, d, 2);
  /* a dummy task (no blocks) relays the edge 2 -> 4 */
  int64_t d3[] = {2}, d4[] = {3};
  trace_slice_deps(t, c, "dummy", "sched", 101 * US + BASE, 101 * US + BASE, 3, -1, d3, 1);
  trace_slice_deps(t, c, "k", "block", 110 * US + BASE, 111 * US + BASE, 4, 0, d4, 1);
  assert_int_equal(trace_write(t, path), 0);
  trace_destroy(t);
  trace_json_doc *doc = load(path);
  assert_valid(trace_json_root(doc));
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(doc), &s, err, sizeof err), 0);
  assert_int_equal(s.tasks, 4);                   /* the dummy task has no blocks */
  assert_true(fabs(s.critical_us - 72.0) < 1e-9); /* 70 (task 1) + 1 + 0 + 1 */
  assert_int_equal(s.critical_tasks, 4);
  assert_int_equal(s.critical_last, 4);
  assert_int_equal(s.critical_pid, 4); /* rank 3 shows as pid 4 */
  trace_summary_free(&s);
  trace_json_free(doc);
  unlink(path);
}

/* ---- schema check rejects what viewers would misread ---- */

static int validate_text(const char *text) {
  trace_json_doc *d;
  char err[256];
  assert_int_equal(trace_json_parse(text, strlen(text), &d, err, sizeof err), 0);
  int rc = trace_validate(trace_json_root(d), err, sizeof err);
  trace_json_free(d);
  return rc;
}

#define META                                                                                       \
  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"ts\":0,\"args\":{\"name\":"       \
  "\"p\"}},{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":{"         \
  "\"name\":\"t\"}}"

static void test_validate_rejects(void **state) {
  (void)state;
  assert_int_equal(validate_text("{\"traceEvents\":[" META
                                 ",{\"name\":\"k\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,"
                                 "\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"task\":0,"
                                 "\"block\":0}}]}"),
                   0);
  /* negative duration */
  assert_int_equal(validate_text("{\"traceEvents\":[" META
                                 ",{\"name\":\"k\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1,"
                                 "\"dur\":-2}]}"),
                   PTO_EINVAL);
  /* no ts */
  assert_int_equal(validate_text("{\"traceEvents\":[" META
                                 ",{\"name\":\"k\",\"ph\":\"i\",\"pid\":1,\"tid\":1}]}"),
                   PTO_EINVAL);
  /* a track nobody named */
  assert_int_equal(validate_text("{\"traceEvents\":[" META
                                 ",{\"name\":\"k\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":1,"
                                 "\"dur\":2}]}"),
                   PTO_EINVAL);
  /* a block slice without its block index */
  assert_int_equal(validate_text("{\"traceEvents\":[" META
                                 ",{\"name\":\"k\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,"
                                 "\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"task\":0}}]}"),
                   PTO_EINVAL);
  /* not a trace at all */
  assert_int_equal(validate_text("[1,2]"), PTO_EINVAL);
  assert_int_equal(validate_text("{\"traceEvents\":{}}"), PTO_EINVAL);
}

/* The flow checks: a file whose arrows are wrong fails the schema check,
 * naming what is wrong. Two tasks on one track: 0 in [1, 3], 1 in [5, 7]
 * with deps [0]; the good arrow starts at 2 (in task 0), finishes at 6. */
static int validate_flows(const char *flows, char *err, size_t errlen) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"traceEvents\":[" META
           ",{\"name\":\"k\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1,"
           "\"dur\":2,\"args\":{\"task\":0,\"block\":0}}"
           ",{\"name\":\"k\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":5,"
           "\"dur\":2,\"args\":{\"task\":1,\"block\":0,\"deps\":[0]}}%s]}",
           flows);
  trace_json_doc *d;
  assert_int_equal(trace_json_parse(text, strlen(text), &d, err, errlen), 0);
  int rc = trace_validate(trace_json_root(d), err, errlen);
  trace_json_free(d);
  return rc;
}

#define FLOW(ph, id, ts, from, to)                                                                 \
  ",{\"name\":\"dep\",\"cat\":\"flow\",\"ph\":\"" ph "\",\"id\":" id ",\"pid\":1,\"tid\":1,"       \
  "\"ts\":" ts ",\"args\":{\"from\":" from ",\"to\":" to "}}"

static void test_validate_checks_flows(void **state) {
  (void)state;
  static const struct {
    const char *flows, *want; /* want: NULL = valid, else in the error */
  } cases[] = {
      {FLOW("s", "7", "2", "0", "1") FLOW("f", "7", "6", "0", "1"), NULL},
      {"", "edge 0 -> 1 of pid 1 has no dep flow"},
      {FLOW("s", "7", "4", "0", "1") FLOW("f", "7", "6", "0", "1"), "lies in no"},
      {FLOW("s", "7", "2", "0", "1") FLOW("f", "7", "2", "0", "1"), "lies in no"},
      {FLOW("s", "7", "2", "0", "1") FLOW("s", "7", "2", "0", "1") FLOW("f", "7", "6", "0", "1"),
       "2 starts and 1 finishes"},
      {FLOW("s", "7", "2", "0", "1") FLOW("f", "7", "6", "0", "1") FLOW("s", "8", "6", "1", "0")
           FLOW("f", "8", "2", "1", "0"),
       "dep flow 1 -> 0 of pid 1 is no edge"},
      {FLOW("s", "7", "2", "0", "1") FLOW("f", "7", "6", "0", "0"), "disagree"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char err[256] = "";
    int rc = validate_flows(cases[i].flows, err, sizeof err);
    if (cases[i].want ? rc != PTO_EINVAL || !strstr(err, cases[i].want) : rc != 0)
      fail_msg("case %zu: %s '%s'; expected %s '%s'", i, pto_status_name(rc), err,
               cases[i].want ? "PTO_EINVAL naming" : "valid", cases[i].want ? cases[i].want : "");
  }
}

/* An edge recorded twice for one task (its deps on two of its slices, with
 * another consumer of the producer between them in the file) is drawn
 * once: found by fuzz_trace_json (corpus crash-dep-recorded-twice). */
static void test_edge_recorded_twice_drawn_once(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "edge_twice");
  pto_trace *t = trace_create(0, "p");
  int a = trace_track(t, "core 0"), b = trace_track(t, "core 1"), c = trace_track(t, "core 2");
  const int64_t dep0[] = {0};
  trace_slice(t, a, "k", "block", 100, 200, 0, 0);
  trace_slice_deps(t, a, "k", "block", 300, 400, 1, 0, dep0, 1);
  trace_slice_deps(t, b, "k", "block", 300, 400, 2, 0, dep0, 1);
  trace_slice_deps(t, c, "k", "block", 300, 400, 1, 1, dep0, 1);
  assert_int_equal(trace_write(t, path), 0);
  trace_destroy(t);
  trace_json_doc *d = load(path);
  trace_flow_counts fc;
  char err[256] = "";
  if (trace_check_flows(trace_json_root(d), &fc, err, sizeof err)) fail_msg("flows: %s", err);
  if (fc.deps != 2 || fc.edges != 2)
    fail_msg("%" PRIu64 " dep flows for %" PRIu64 " edges; expected 2 and 2", fc.deps, fc.edges);
  trace_json_free(d);
  unlink(path);
}

/* ---- the JSON reader ---- */

static void test_json_reader(void **state) {
  (void)state;
  const char *text =
      " {\"a\" : [1, -2.5e3, true, false, null, {}, [], \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\"],"
      "\"u\":\"\\u00e9\\u20ac\\ud83d\\ude00\", \"n\": {\"m\": {\"k\": 0.001}}}\n";
  trace_json_doc *d;
  char err[256];
  assert_int_equal(trace_json_parse(text, strlen(text), &d, err, sizeof err), 0);
  const trace_json *r = trace_json_root(d);
  const trace_json *a = trace_json_get(r, "a");
  assert_non_null(a);
  assert_int_equal(a->type, TJ_ARR);
  assert_int_equal(a->n, 8);
  assert_true(a->u.items[0].u.num == 1.0);
  assert_true(a->u.items[1].u.num == -2500.0);
  assert_true(a->u.items[2].type == TJ_BOOL && a->u.items[2].u.b);
  assert_true(a->u.items[3].type == TJ_BOOL && !a->u.items[3].u.b);
  assert_int_equal(a->u.items[4].type, TJ_NULL);
  assert_true(a->u.items[5].type == TJ_OBJ && a->u.items[5].n == 0);
  assert_true(a->u.items[6].type == TJ_ARR && a->u.items[6].n == 0);
  assert_string_equal(a->u.items[7].u.str, "x\"\\/\b\f\n\r\t");
  assert_string_equal(trace_json_str(r, "u"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  double k = 0;
  assert_true(trace_json_num(trace_json_get(trace_json_get(r, "n"), "m"), "k", &k));
  assert_true(k == 0.001);
  assert_null(trace_json_get(r, "missing"));
  assert_null(trace_json_get(a, "a")); /* not an object */
  /* Round trip through the writer. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  trace_json_write(f, r);
  fclose(f);
  trace_json_doc *d2;
  assert_int_equal(trace_json_parse(buf, len, &d2, err, sizeof err), 0);
  assert_string_equal(trace_json_str(trace_json_root(d2), "u"), trace_json_str(r, "u"));
  assert_int_equal(trace_json_get(trace_json_root(d2), "a")->n, 8);
  trace_json_free(d2);
  free(buf);
  trace_json_free(d);

  const char *bad[] = {"",      "{",     "[1,]",      "{\"a\":}",    "{\"a\" 1}",
                       "[1 2]", "\"abc", "\"\\x\"",   "\"\\ud800\"", "tru",
                       "[1] x", "{1:2}", "\"\\u12\"", "-",           "[\"a\nb\"]"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    assert_int_equal(trace_json_parse(bad[i], strlen(bad[i]), &d, err, sizeof err), PTO_EINVAL);
    assert_null(d);
    assert_true(err[0] != '\0');
  }
  /* Nesting is bounded instead of overflowing the stack. */
  char deep[1024];
  memset(deep, '[', sizeof deep);
  assert_int_equal(trace_json_parse(deep, sizeof deep, &d, err, sizeof err), PTO_EINVAL);
  assert_non_null(strstr(err, "nesting"));
}

/* ---- other tools' traces: B/E pairs, the bare-array form ---- */

static void test_summary_generic_chrome(void **state) {
  (void)state;
  const char *text = "[{\"name\":\"a\",\"ph\":\"B\",\"pid\":7,\"tid\":1,\"ts\":10},"
                     "{\"name\":\"b\",\"ph\":\"B\",\"pid\":7,\"tid\":1,\"ts\":12},"
                     "{\"name\":\"b\",\"ph\":\"E\",\"pid\":7,\"tid\":1,\"ts\":14},"
                     "{\"name\":\"a\",\"ph\":\"E\",\"pid\":7,\"tid\":1,\"ts\":20},"
                     "{\"name\":\"c\",\"ph\":\"X\",\"pid\":7,\"tid\":2,\"ts\":30,\"dur\":10},"
                     "{\"name\":\"counter\",\"ph\":\"C\",\"pid\":7,\"ts\":5,\"args\":{\"v\":1}}]";
  trace_json_doc *d;
  char err[256];
  assert_int_equal(trace_json_parse(text, strlen(text), &d, err, sizeof err), 0);
  trace_summary s;
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.slices, 3);
  assert_true(fabs(s.span_us - 30.0) < 1e-9);
  assert_int_equal(s.ntracks, 2);
  assert_null(s.tracks[0].name);
  assert_true(fabs(s.tracks[0].busy_us - 10.0) < 1e-9);
  assert_true(fabs(s.tracks[1].busy_us - 10.0) < 1e-9);
  assert_false(s.gaps_on_cores);
  assert_int_equal(s.ngaps, 2); /* tid 1 idle [20,40), tid 2 idle [10,30) */
  assert_true(fabs(s.gaps[0].dur_us - 20.0) < 1e-9);
  assert_int_equal(s.gaps[0].track, 0);
  assert_int_equal(s.critical_tasks, 0);
  trace_summary_free(&s);
  trace_json_free(d);
}

/* A pid or tid that is no exact int64 (beyond its range, or a fraction)
 * names no track: the summary skips the event. It cast it before, which is
 * undefined for 1e40 (UBSan aborted: found by fuzz_trace_json, corpus
 * crash-summary-tid-beyond-int64) and placed it on a made-up track. */
static void test_summary_skips_ids_that_are_no_integers(void **state) {
  (void)state;
  const char *text = "[{\"name\":\"a\",\"ph\":\"X\",\"pid\":1,\"tid\":1e40,\"ts\":1,\"dur\":1},"
                     "{\"name\":\"b\",\"ph\":\"X\",\"pid\":-1e300,\"tid\":1,\"ts\":1,\"dur\":1},"
                     "{\"name\":\"c\",\"ph\":\"X\",\"pid\":1,\"tid\":0.5,\"ts\":1,\"dur\":1},"
                     "{\"name\":\"d\",\"ph\":\"B\",\"pid\":1,\"tid\":1e40,\"ts\":1},"
                     "{\"name\":\"e\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":4,\"dur\":2}]";
  trace_json_doc *d;
  char err[256];
  assert_int_equal(trace_json_parse(text, strlen(text), &d, err, sizeof err), 0);
  trace_summary s;
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  if (s.slices != 1 || s.ntracks != 1)
    fail_msg("%" PRIu64 " slices on %d tracks; expected 1 on 1 (only e has integer ids)",
             (uint64_t)s.slices, (int)s.ntracks);
  trace_summary_free(&s);
  trace_json_free(d);
}

/* ---- multi-chip: one file per rank, merged ---- */

static void test_merge_ranks(void **state) {
  (void)state;
  char p0[256], p1[256], p2[256], out[256];
  tmp_path(p0, sizeof p0, "rank0");
  tmp_path(p1, sizeof p1, "rank1");
  tmp_path(p2, sizeof p2, "rank2");
  tmp_path(out, sizeof out, "merged");
  for (int r = 0; r < 3; r++) {
    pto_trace *t = trace_create(r, "rank");
    int c = trace_track(t, "core 0");
    int q = trace_track(t, "comm");
    /* rank r starts r ms later; rank 2 shares rank 0's origin explicitly */
    uint64_t t0 = BASE + (uint64_t)r * 1000 * US;
    if (r == 2) trace_set_origin(t, BASE);
    trace_slice(t, c, "k", "block", t0, t0 + 5 * US, 0, 0);
    trace_slice_arg(t, q, "wait_signal", "comm", t0 + 1 * US, t0 + 3 * US, -1, -1, "peer",
                    (r + 1) % 3);
    assert_int_equal(trace_write(t, r == 0 ? p0 : r == 1 ? p1 : p2), 0);
    trace_destroy(t);
  }
  const char *const paths[] = {p0, p1, p2};
  assert_int_equal(trace_merge(paths, 3, out), 0);
  trace_json_doc *d = load(out);
  assert_valid(trace_json_root(d));
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  int blocks = 0;
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *cat = trace_json_str(e, "cat");
    if (!cat || strcmp(cat, "block") != 0) continue;
    double pid = 0, ts = -1;
    trace_json_num(e, "pid", &pid);
    trace_json_num(e, "ts", &ts);
    assert_true(fabs(ts - (pid - 1) * 1000.0) < 1e-6); /* ranks line up in time */
    blocks++;
  }
  assert_int_equal(blocks, 3);
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.ntracks, 6);
  assert_int_equal(s.tasks, 3); /* task 0 of each rank */
  assert_true(fabs(s.span_us - 2005.0) < 1e-6);
  trace_summary_free(&s);
  trace_json_free(d);
  const char *const missing[] = {p0, "/nonexistent/pto/trace.json"};
  assert_int_equal(trace_merge(missing, 2, out), PTO_ESYSTEM);
  const char *const same_rank[] = {p0, p1, p0};
  assert_int_equal(trace_merge(same_rank, 3, out), PTO_EINVAL);
  unlink(p0);
  unlink(p1);
  unlink(p2);
  unlink(out);
}

/* A rank that ran two chip tasks in one node run: two files of the same
 * process; the second run's trace starts its task ids where the first's
 * ended (trace_set_task_base, trace_task_end), so trace_concat joins them
 * as they are and names the process once. */
static int64_t write_run(const char *path, int pid, uint64_t t0, int64_t base) {
  pto_trace *t = trace_create(pid, "rank");
  int o = trace_track(t, "orchestrator");
  int c = trace_track(t, "core 0");
  trace_set_origin(t, BASE);
  trace_set_task_base(t, base);
  const int64_t dep0[] = {0};
  trace_slice_deps(t, o, "submit", "orch", t0, t0 + 1 * US, 0, -1, NULL, 0);
  trace_slice_deps(t, o, "submit", "orch", t0 + 1 * US, t0 + 2 * US, 1, -1, dep0, 1);
  trace_slice(t, c, "k", "block", t0 + 2 * US, t0 + 12 * US, 0, 0);
  trace_slice(t, c, "k", "block", t0 + 12 * US, t0 + 22 * US + (uint64_t)pid * US, 1, 0);
  assert_int_equal(trace_write(t, path), 0);
  int64_t end = trace_task_end(t);
  trace_destroy(t);
  return end;
}

static void test_concat_runs(void **state) {
  (void)state;
  char a[256], b[256], c[256], out[256];
  tmp_path(a, sizeof a, "run_a");
  tmp_path(b, sizeof b, "run_b");
  tmp_path(c, sizeof c, "run_c");
  tmp_path(out, sizeof out, "runs");
  int64_t next = write_run(a, 0, BASE, 0);
  assert_int_equal(next, 2);
  assert_int_equal(write_run(c, 1, BASE, 0), 2);
  assert_int_equal(write_run(b, 0, BASE + 100 * US, next), 4);
  const char *const paths[] = {a, c, b};
  assert_int_equal(trace_merge(paths, 3, out), PTO_EINVAL); /* the tool's merge refuses */
  char why[256] = "";
  if (trace_concat(paths, 3, out, why, sizeof why)) fail_msg("concat: %s", why);
  trace_json_doc *d = load(out);
  assert_valid(trace_json_root(d));
  const trace_json *evs = trace_json_get(trace_json_root(d), "traceEvents");
  int names[3] = {0}, threads[3] = {0}, blocks[3] = {0};
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *name = trace_json_str(e, "name"), *cat = trace_json_str(e, "cat");
    double pid = 0, ts = 0;
    trace_json_num(e, "pid", &pid);
    trace_json_num(e, "ts", &ts);
    assert_true(pid >= 1 && pid <= 2);
    names[(int)pid] += !strcmp(name, "process_name");
    threads[(int)pid] += !strcmp(name, "thread_name");
    if (!cat || !strcmp(cat, "flow")) continue;
    int64_t task = arg(e, "task");
    const trace_json *deps = trace_json_get(trace_json_get(e, "args"), "deps");
    bool later = ts >= 100.0; /* the second chip run of rank 0 */
    if (later) assert_true(pid == 1);
    /* within a run: task 0 is submitted at 0 and runs at 2, task 1 at 1 and 12 */
    double local = later ? ts - 100.0 : ts;
    int64_t want = (later ? 2 : 0) + (fabs(local - 1.0) < 1e-6 || fabs(local - 12.0) < 1e-6);
    assert_int_equal(task, want);
    if (deps) {
      assert_int_equal(deps->n, 1);
      assert_int_equal((int64_t)deps->u.items[0].u.num, later ? 2 : 0);
    }
    blocks[(int)pid] += !strcmp(cat, "block");
  }
  assert_int_equal(names[1], 1); /* rank 0 named once */
  assert_int_equal(names[2], 1);
  assert_int_equal(threads[1], 2); /* its tracks too */
  assert_int_equal(threads[2], 2);
  assert_int_equal(blocks[1], 4);
  assert_int_equal(blocks[2], 2);
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.tasks, 6); /* rank 0: 0..3, rank 1: 0, 1 */
  assert_int_equal(s.blocks, 6);
  assert_int_equal(s.dup_blocks, 0);
  assert_int_equal(s.edges, 3);
  assert_int_equal(s.missing_deps, 0);
  /* rank 1's chain (21 us) beats each of rank 0's (20 us): runs do not chain */
  assert_int_equal(s.critical_tasks, 2);
  assert_int_equal(s.critical_pid, 2);
  assert_int_equal(s.critical_last, 1);
  assert_true(fabs(s.critical_us - 21.0) < 1e-6);
  trace_summary_free(&s);
  trace_json_free(d);
  unlink(a);
  unlink(b);
  unlink(c);
  unlink(out);
}

/* Off means a NULL trace: every record call is a no-op. */
static void test_null_trace_is_noop(void **state) {
  (void)state;
  int64_t d[] = {1};
  trace_slice(NULL, 0, "k", "block", 0, 1, 0, 0);
  trace_slice_deps(NULL, 0, "k", "block", 0, 1, 0, 0, d, 1);
  trace_slice_arg(NULL, 0, "k", "comm", 0, 1, -1, -1, "peer", 1);
  trace_instant(NULL, 0, "k", "sched", 0, 1);
  trace_set_origin(NULL, 1);
  assert_int_equal(trace_track(NULL, "x"), -1);
  assert_int_equal(trace_dropped(NULL), 0);
  assert_int_equal(trace_write(NULL, "x"), PTO_EINVAL);
  trace_destroy(NULL);
  /* Recording on an undeclared track is dropped silently, not a crash. */
  pto_trace *t = trace_create(0, "p");
  trace_track(t, "core 0");
  trace_slice(t, 5, "k", "block", 0, 1, 0, 0);
  trace_slice(t, -1, "k", "block", 0, 1, 0, 0);
  /* A run that recorded nothing still writes a valid, summarisable file. */
  char path[256];
  tmp_path(path, sizeof path, "empty");
  assert_int_equal(trace_write(t, path), 0);
  trace_destroy(t);
  trace_json_doc *doc = load(path);
  assert_valid(trace_json_root(doc));
  trace_summary s;
  char err[256];
  assert_int_equal(trace_summarize(trace_json_root(doc), &s, err, sizeof err), 0);
  assert_int_equal(s.slices, 0);
  assert_int_equal(s.ntracks, 0);
  assert_int_equal(s.ngaps, 0);
  assert_int_equal(s.critical_tasks, 0);
  trace_summary_free(&s);
  trace_json_free(doc);
  unlink(path);
}

/* Numbers beyond int64_t's range are written without converting them to an
 * integer first (that conversion is undefined: UBSan stops there), and read
 * back to the same double. Found by tests/fuzz/fuzz_trace_json.c. */
static void test_write_num_beyond_int64(void **state) {
  (void)state;
  const double xs[] = {4.44444e23, -1e300, 9.3e18, -9.3e18, 18446744073709551616.0, 0.5, -3};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    trace_json_write_num(f, xs[i]);
    assert_int_equal(fclose(f), 0);
    trace_json_doc *d = NULL;
    char err[128];
    assert_int_equal(trace_json_parse(text, len, &d, err, sizeof err), 0);
    const trace_json *v = trace_json_root(d);
    if (v->type != TJ_NUM || v->u.num != xs[i])
      fail_msg("%.17g written as '%s' reads back as %.17g", xs[i], text, v->u.num);
    trace_json_free(d);
    free(text);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_record_write_read),
      cmocka_unit_test(test_summary_known_numbers),
      cmocka_unit_test(test_critical_path_through_span),
      cmocka_unit_test(test_validate_rejects),
      cmocka_unit_test(test_validate_checks_flows),
      cmocka_unit_test(test_edge_recorded_twice_drawn_once),
      cmocka_unit_test(test_json_reader),
      cmocka_unit_test(test_summary_generic_chrome),
      cmocka_unit_test(test_summary_skips_ids_that_are_no_integers),
      cmocka_unit_test(test_merge_ranks),
      cmocka_unit_test(test_concat_runs),
      cmocka_unit_test(test_null_trace_is_noop),
      cmocka_unit_test(test_write_num_beyond_int64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
