/* fuzz_trace_json.c — libFuzzer target for reading traces (tools/trace_json.c,
 * tools/trace_read.c) and for the writer/reader round trip (common/trace.c).
 *
 * Every input is parsed as JSON. A failed parse must name what was wrong; a
 * document that parses is written back with trace_json_write and must parse
 * to the same values (the writer turns non-finite numbers into null, JSON
 * having none), and is then summarised and schema-checked, which may fail
 * but must not crash, leak or hit UB.
 *
 * The same bytes also drive a recorded trace: tracks and events (slices,
 * slices with deps or an argument, instants) whose names come from a table
 * of awkward strings. trace_write() writes it to a memory file; the file
 * must pass the strict schema check and read back to the recorded events,
 * in order, with their names, categories, times and arguments. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/trace.h"
#include "trace_json.h"
#include "trace_read.h"

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "fuzz_trace_json: check failed at line %d: %s\n", __LINE__, #c);             \
      __builtin_trap();                                                                            \
    }                                                                                              \
  } while (0)

/* ---- reader: any bytes ---- */

static bool same_value(const trace_json *a, const trace_json *b) {
  bool anull = a->type == TJ_NULL || (a->type == TJ_NUM && !isfinite(a->u.num));
  if (anull) return b->type == TJ_NULL;
  if (a->type != b->type || a->n != b->n) return false;
  switch (a->type) {
  case TJ_BOOL: return a->u.b == b->u.b;
  case TJ_NUM: return a->u.num == b->u.num;
  case TJ_STR: return strcmp(a->u.str, b->u.str) == 0;
  case TJ_ARR:
  case TJ_OBJ:
    for (uint32_t i = 0; i < a->n; i++) {
      const trace_json *x = &a->u.items[i], *y = &b->u.items[i];
      if (a->type == TJ_OBJ && strcmp(x->key, y->key) != 0) return false;
      if (!same_value(x, y)) return false;
    }
    return true;
  }
  return true;
}

static void fuzz_reader(const uint8_t *data, size_t size) {
  char err[256] = "";
  trace_json_doc *doc = NULL;
  int rc = trace_json_parse((const char *)data, size, &doc, err, sizeof err);
  if (rc) {
    CHECK(doc == NULL);
    CHECK(err[0] != '\0'); /* a failure names what was wrong */
    return;
  }
  CHECK(doc != NULL);
  const trace_json *root = trace_json_root(doc);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK(f != NULL);
  trace_json_write(f, root);
  CHECK(fclose(f) == 0);
  trace_json_doc *again = NULL;
  rc = trace_json_parse(text, len, &again, err, sizeof err);
  if (rc) fprintf(stderr, "written back: %.*s\nreparse failed: %s\n", (int)len, text, err);
  CHECK(rc == 0);
  CHECK(same_value(root, trace_json_root(again)));
  trace_json_free(again);
  free(text);

  trace_summary s;
  if (trace_summarize(root, &s, err, sizeof err) == 0) trace_summary_free(&s);
  (void)trace_validate(root, err, sizeof err);
  trace_json_free(doc);
}

/* ---- writer -> reader round trip ---- */

static const char *const names[] = {
    "block", "sched", "a\"b\\c", "tab\there\nnewline", "\x01\x1f ctl", "ü€😀", "", "orch",
};
#define NNAMES (sizeof names / sizeof names[0])

typedef struct rec {
  int track;
  char ph;
  const char *name, *cat, *key;
  uint64_t t0, t1;
  int64_t task, val;
  int32_t block;
  int64_t deps[4];
  int ndeps;
} rec;

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static uint64_t take(reader *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++)
    v = v << 8 | (r->p < r->end ? *r->p++ : 0);
  return v;
}

static double num_member(const trace_json *o, const char *key) {
  double d = NAN;
  CHECK(trace_json_num(o, key, &d));
  return d;
}

static void fuzz_writer(const uint8_t *data, size_t size) {
  reader r = {data, data + size};
  int pid = (int)take(&r, 1) % 8;
  int ntracks = 1 + (int)take(&r, 1) % 4;
  pto_trace *t = trace_create(pid, names[take(&r, 1) % NNAMES]);
  CHECK(t != NULL);
  for (int i = 0; i < ntracks; i++)
    CHECK(trace_track(t, names[take(&r, 1) % NNAMES]) == i);
  enum { MAXREC = 64 };
  rec recs[MAXREC];
  int nrec = 0;
  uint64_t base = take(&r, 6);
  while (r.p < r.end && nrec < MAXREC) {
    rec *e = &recs[nrec];
    memset(e, 0, sizeof *e);
    unsigned op = (unsigned)take(&r, 1);
    e->track = (int)(op >> 2) % ntracks;
    e->name = names[take(&r, 1) % NNAMES];
    e->cat = names[take(&r, 1) % NNAMES];
    e->t0 = base + take(&r, 3);
    e->t1 = e->t0 + take(&r, 3);
    e->task = (int64_t)take(&r, 2) - 8;
    e->block = (int32_t)take(&r, 1) - 8;
    e->ph = 'X';
    if (!strcmp(e->cat, "block")) { /* the recorders' contract: block slices carry both */
      e->task = e->task < 0 ? -e->task : e->task;
      e->block = e->block < 0 ? -e->block : e->block;
    }
    switch (op & 3) {
    case 0: trace_slice(t, e->track, e->name, e->cat, e->t0, e->t1, e->task, e->block); break;
    case 1:
      e->ndeps = (int)take(&r, 1) % 5;
      for (int d = 0; d < e->ndeps; d++)
        e->deps[d] = (int64_t)take(&r, 2);
      trace_slice_deps(t, e->track, e->name, e->cat, e->t0, e->t1, e->task, e->block, e->deps,
                       e->ndeps);
      break;
    case 2:
      e->key = names[take(&r, 1) % NNAMES];
      if (!strcmp(e->key, "block")) e->key = "peer"; /* args.block is the block's */
      e->val = (int64_t)take(&r, 4) - (1 << 30);
      trace_slice_arg(t, e->track, e->name, e->cat, e->t0, e->t1, e->task, e->block, e->key,
                      e->val);
      break;
    case 3:
      e->ph = 'i';
      e->t1 = e->t0;
      e->task = -1;
      e->block = -1;
      e->val = (int64_t)take(&r, 4) - (1 << 30);
      trace_instant(t, e->track, e->name, e->cat, e->t0, e->val);
      break;
    }
    nrec++;
  }
  uint64_t origin = UINT64_MAX;
  for (int i = 0; i < nrec; i++)
    if (recs[i].t0 < origin) origin = recs[i].t0;
  if (nrec == 0) origin = 0;

  static int fd = -1; /* one memory file for the process, rewritten each time */
  if (fd < 0) fd = memfd_create("fuzz_trace", 0);
  CHECK(fd >= 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char why[256] = "";
  CHECK(trace_write_ex(t, path, why, sizeof why) == 0);
  trace_destroy(t);

  char err[256] = "";
  trace_json_doc *doc = NULL;
  int rc = trace_json_load(path, &doc, err, sizeof err);
  if (rc) fprintf(stderr, "reading the written trace: %s\n", err);
  CHECK(rc == 0);
  const trace_json *root = trace_json_root(doc);
  rc = trace_validate(root, err, sizeof err);
  if (rc) fprintf(stderr, "schema: %s\n", err);
  CHECK(rc == 0);
  const trace_json *evs = trace_json_get(root, "traceEvents");
  CHECK(evs && evs->type == TJ_ARR);
  /* Events come track by track, each track's in recording order. */
  uint32_t k = 0;
  for (int tr = 0; tr < ntracks; tr++)
    for (int i = 0; i < nrec; i++) {
      const rec *e = &recs[i];
      if (e->track != tr) continue;
      while (k < evs->n && !strcmp(trace_json_str(&evs->u.items[k], "ph"), "M"))
        k++;
      CHECK(k < evs->n);
      const trace_json *o = &evs->u.items[k++];
      CHECK(trace_json_str(o, "ph")[0] == e->ph);
      CHECK(!strcmp(trace_json_str(o, "name"), e->name));
      CHECK(!strcmp(trace_json_str(o, "cat"), e->cat));
      CHECK(num_member(o, "pid") == pid + 1);
      CHECK(num_member(o, "tid") == tr + 1);
      CHECK(fabs(num_member(o, "ts") - (double)(e->t0 - origin) / 1000.0) < 1e-3);
      const trace_json *args = trace_json_get(o, "args");
      CHECK(args && args->type == TJ_OBJ);
      if (e->ph == 'X') {
        CHECK(fabs(num_member(o, "dur") - (double)(e->t1 - e->t0) / 1000.0) < 1e-3);
      } else {
        CHECK(num_member(args, "arg") == (double)e->val);
      }
      double v;
      CHECK(trace_json_num(args, "task", &v) == (e->task >= 0));
      if (e->task >= 0) CHECK(v == (double)e->task);
      CHECK(trace_json_num(args, "block", &v) == (e->block >= 0));
      if (e->block >= 0) CHECK(v == (double)e->block);
      if (e->key) {
        CHECK(trace_json_num(args, e->key, &v));
        CHECK(v == (double)e->val);
      }
      const trace_json *deps = trace_json_get(args, "deps");
      CHECK((deps != NULL) == (e->ndeps > 0));
      if (deps) {
        CHECK(deps->type == TJ_ARR && deps->n == (uint32_t)e->ndeps);
        for (int d = 0; d < e->ndeps; d++)
          CHECK(deps->u.items[d].type == TJ_NUM && deps->u.items[d].u.num == (double)e->deps[d]);
      }
    }
  /* then only metadata and the dependency arrows (checked by trace_validate) */
  while (k < evs->n && strchr("Msf", trace_json_str(&evs->u.items[k], "ph")[0]))
    k++;
  CHECK(k == evs->n); /* nothing more than what was recorded */
  trace_json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_reader(data, size);
  fuzz_writer(data, size);
  return 0;
}
