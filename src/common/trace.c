/* trace.c — recording trace events into per-track buffers and writing them
 * as Chrome trace-event JSON (the format ui.perfetto.dev and
 * chrome://tracing open).
 *
 * Each track is appended to by one thread only, so an append is a plain
 * store into that track's buffer; the buffers are read by trace_write()
 * after the recording threads have been joined (the join orders them). */
#include "common/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto/status.h"

#define TRACE_FIRST_CAP 1024

typedef struct trace_event {
  uint64_t t0, t1;
  const char *name;
  const char *cat;
  const char *key; /* trace_slice_arg's argument name, or NULL */
  int64_t task;    /* < 0: none */
  int64_t val;     /* trace_slice_arg's value, or the instant's arg */
  uint32_t deps_off, ndeps;
  int32_t block; /* < 0: none */
  char ph;       /* 'X', 'i', or a flow end: 's', 'f' (val: the flow id) */
} trace_event;

typedef struct trace_trk {
  char *name;
  trace_event *ev;
  size_t n, cap;
  int64_t *deps; /* the deps of this track's events, back to back */
  size_t ndeps, deps_cap;
  uint64_t dropped;
} trace_trk;

struct pto_trace {
  int pid;
  char *process_name;
  trace_trk *tracks;
  int ntracks, cap;
  uint64_t origin;   /* 0: none set */
  int64_t task_base; /* added to every task id written */
};

pto_trace *trace_create(int pid, const char *process_name) {
  pto_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->pid = pid;
  t->process_name = strdup(process_name ? process_name : "pto");
  if (!t->process_name) {
    free(t);
    return NULL;
  }
  return t;
}

int trace_track(pto_trace *t, const char *name) {
  if (!t) return -1;
  if (t->ntracks == t->cap) {
    int cap = t->cap ? 2 * t->cap : 16;
    trace_trk *tr = realloc(t->tracks, (size_t)cap * sizeof *tr);
    if (!tr) return -1;
    t->tracks = tr;
    t->cap = cap;
  }
  trace_trk *k = &t->tracks[t->ntracks];
  memset(k, 0, sizeof *k);
  k->name = strdup(name ? name : "track");
  if (!k->name) return -1;
  return t->ntracks++;
}

/* Next free event of a track, or NULL (counted as dropped) when the buffer
 * cannot grow: a trace must never fail the run it observes. */
static trace_event *trk_push(pto_trace *t, int track) {
  if (!t || track < 0 || track >= t->ntracks) return NULL;
  trace_trk *k = &t->tracks[track];
  if (k->n == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : TRACE_FIRST_CAP;
    trace_event *ev = realloc(k->ev, cap * sizeof *ev);
    if (!ev) {
      k->dropped++;
      return NULL;
    }
    k->ev = ev;
    k->cap = cap;
  }
  trace_event *e = &k->ev[k->n++];
  e->key = NULL;
  e->val = 0;
  e->deps_off = 0;
  e->ndeps = 0;
  return e;
}

static void fill_slice(trace_event *e, const char *name, const char *cat, uint64_t t0, uint64_t t1,
                       int64_t task, int32_t block) {
  e->ph = 'X';
  e->name = name;
  e->cat = cat;
  e->t0 = t0;
  e->t1 = t1 < t0 ? t0 : t1;
  e->task = task;
  e->block = block;
}

void trace_slice(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                 uint64_t t1_ns, int64_t task, int32_t block) {
  trace_event *e = trk_push(t, track);
  if (e) fill_slice(e, name, cat, t0_ns, t1_ns, task, block);
}

void trace_slice_deps(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                      uint64_t t1_ns, int64_t task, int32_t block, const int64_t *deps, int ndeps) {
  trace_event *e = trk_push(t, track);
  if (!e) return;
  fill_slice(e, name, cat, t0_ns, t1_ns, task, block);
  if (ndeps <= 0 || !deps) return;
  trace_trk *k = &t->tracks[track];
  if (k->ndeps + (size_t)ndeps > UINT32_MAX) { /* deps_off is 32-bit */
    k->dropped++;
    return;
  }
  if (k->ndeps + (size_t)ndeps > k->deps_cap) {
    size_t cap = k->deps_cap ? 2 * k->deps_cap : 4 * TRACE_FIRST_CAP;
    while (cap < k->ndeps + (size_t)ndeps)
      cap *= 2;
    int64_t *d = realloc(k->deps, cap * sizeof *d);
    if (!d) {
      /* Keep the slice (blocks must all appear) but lose its edges. */
      k->dropped++;
      return;
    }
    k->deps = d;
    k->deps_cap = cap;
  }
  memcpy(k->deps + k->ndeps, deps, (size_t)ndeps * sizeof *deps);
  e->deps_off = (uint32_t)k->ndeps;
  e->ndeps = (uint32_t)ndeps;
  k->ndeps += (size_t)ndeps;
}

void trace_slice_arg(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                     uint64_t t1_ns, int64_t task, int32_t block, const char *key, int64_t val) {
  trace_event *e = trk_push(t, track);
  if (!e) return;
  fill_slice(e, name, cat, t0_ns, t1_ns, task, block);
  e->key = key;
  e->val = val;
}

void trace_instant(pto_trace *t, int track, const char *name, const char *cat, uint64_t ts_ns,
                   int64_t arg) {
  trace_event *e = trk_push(t, track);
  if (!e) return;
  fill_slice(e, name, cat, ts_ns, ts_ns, -1, -1);
  e->ph = 'i';
  e->val = arg;
}

void trace_flow(pto_trace *t, int track, char ph, uint64_t ts_ns, uint64_t id) {
  if (ph != 's' && ph != 'f') return;
  trace_event *e = trk_push(t, track);
  if (!e) return;
  fill_slice(e, "signal", "flow", ts_ns, ts_ns, -1, -1);
  e->ph = ph;
  e->val = (int64_t)id;
}

uint64_t trace_flow_id(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f) {
  const uint64_t v[6] = {a, b, c, d, e, f};
  uint64_t h = 14695981039346656037ull; /* FNV-1a, byte by byte */
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 8; k++) {
      h ^= (v[i] >> (8 * k)) & 0xff;
      h *= 1099511628211ull;
    }
  h &= (1ull << 52) - 1;
  return h ? h : 1;
}

void trace_set_task_base(pto_trace *t, int64_t base) {
  if (t) t->task_base = base;
}

int64_t trace_task_end(const pto_trace *t) {
  if (!t) return 0;
  int64_t hi = -1;
  for (int i = 0; i < t->ntracks; i++)
    for (size_t j = 0; j < t->tracks[i].n; j++)
      if (t->tracks[i].ev[j].task > hi) hi = t->tracks[i].ev[j].task;
  return t->task_base + hi + 1;
}

void trace_set_origin(pto_trace *t, uint64_t origin_ns) {
  if (t) t->origin = origin_ns;
}

uint64_t trace_dropped(const pto_trace *t) {
  uint64_t d = 0;
  for (int i = 0; t && i < t->ntracks; i++)
    d += t->tracks[i].dropped;
  return d;
}

void trace_json_write_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ns -> "us.nnn": integer arithmetic keeps ns precision for any span. */
static void put_us(FILE *f, uint64_t ns) {
  fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* Every event after the first is preceded by ",\n", so the list never ends
 * in a comma whatever is empty. */
static void put_sep(FILE *f, bool *first) {
  if (!*first) fputs(",\n", f);
  *first = false;
}

static void put_meta(FILE *f, bool *first, int pid, int tid, const char *what, const char *key,
                     const char *sval, int ival) {
  put_sep(f, first);
  fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"args\":{\"%s\":", what,
          pid, tid, key);
  if (sval)
    trace_json_write_str(f, sval);
  else
    fprintf(f, "%d", ival);
  fputs("}}", f);
}

static void put_flow_end(FILE *f, const char *name, char ph, uint64_t id, int pid, int tid,
                         uint64_t ts_rel) {
  fprintf(f,
          "{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"%c\",%s\"id\":%" PRIu64
          ",\"pid\":%d,\"tid\":%d,\"ts\":",
          name, ph, ph == 'f' ? "\"bp\":\"e\"," : "", id, pid, tid);
  put_us(f, ts_rel);
}

static void put_event(FILE *f, const pto_trace *t, const trace_trk *k, const trace_event *e,
                      int pid, int tid, uint64_t origin) {
  if (e->ph == 's' || e->ph == 'f') {
    put_flow_end(f, e->name, e->ph, (uint64_t)e->val, pid, tid, e->t0 - origin);
    fputc('}', f);
    return;
  }
  fputs("{\"name\":", f);
  trace_json_write_str(f, e->name);
  fputs(",\"cat\":", f);
  trace_json_write_str(f, e->cat ? e->cat : "pto");
  fprintf(f, ",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":", e->ph, pid, tid);
  put_us(f, e->t0 - origin);
  if (e->ph == 'X') {
    fputs(",\"dur\":", f);
    put_us(f, e->t1 - e->t0);
  } else {
    fputs(",\"s\":\"t\"", f);
  }
  fputs(",\"args\":{", f);
  const char *sep = "";
  if (e->ph == 'i') {
    fprintf(f, "\"arg\":%" PRId64, e->val);
    sep = ",";
  }
  if (e->task >= 0) {
    fprintf(f, "%s\"task\":%" PRId64, sep, e->task + t->task_base);
    sep = ",";
  }
  if (e->block >= 0) {
    fprintf(f, "%s\"block\":%" PRId32, sep, e->block);
    sep = ",";
  }
  if (e->key) {
    fputs(sep, f);
    trace_json_write_str(f, e->key);
    fprintf(f, ":%" PRId64, e->val);
    sep = ",";
  }
  if (e->ndeps) {
    fprintf(f, "%s\"deps\":[", sep);
    for (uint32_t i = 0; i < e->ndeps; i++)
      fprintf(f, "%s%" PRId64, i ? "," : "", k->deps[e->deps_off + i] + t->task_base);
    fputc(']', f);
  }
  fputs("}}", f);
}

/* ---- dependency arrows ----
 * Each edge the file records (a task's args.deps) is drawn as a flow from
 * the producer to the consumer: a "dep" flow start inside the producer's
 * last-ending block slice, its finish ("bp":"e": bound to the enclosing
 * slice) inside the consumer's first-starting one. A task without blocks
 * (a dummy task) is anchored on its other slice (its "submit"). They are
 * derived when the file is written, from events recorded anyway, so
 * recording costs nothing more. */

typedef struct anchor {
  uint64_t t0, t1;
  int track; /* -1: none */
  bool block;
} anchor;

typedef struct task_anchors {
  int64_t task;
  anchor first, last; /* block slices: earliest start, latest end */
} task_anchors;

/* Offers slice x of the task: block slices win over others (a dummy task
 * has none: its submit slice is taken). */
static void anchor_offer(task_anchors *a, anchor x) {
  if (a->first.track >= 0 && a->first.block && !x.block) return;
  if (a->first.track < 0 || (x.block && !a->first.block)) {
    a->first = a->last = x;
    return;
  }
  if (x.t0 < a->first.t0) a->first = x;
  if (x.t1 > a->last.t1) a->last = x;
}

static uint64_t anchor_ts(const anchor *a) { return a->t0 + (a->t1 - a->t0) / 2; }

static int ta_cmp(const void *x, const void *y) {
  const task_anchors *p = x, *q = y;
  return p->task < q->task ? -1 : p->task > q->task;
}

typedef struct edge {
  int64_t from, to;
} edge;

static int edge_cmp(const void *x, const void *y) {
  const edge *p = x, *q = y;
  if (p->from != q->from) return p->from < q->from ? -1 : 1;
  return p->to < q->to ? -1 : p->to > q->to;
}

/* Every task's anchors, sorted by task id, into *out (*n of them); edges
 * into *edges (*nedges, sorted, repeats next to each other). */
static bool collect_anchors(const pto_trace *t, task_anchors **out, size_t *n, edge **edges,
                            size_t *nedges) {
  size_t nx = 0, ne = 0;
  for (int i = 0; i < t->ntracks; i++)
    for (size_t j = 0; j < t->tracks[i].n; j++) {
      const trace_event *e = &t->tracks[i].ev[j];
      if (e->ph != 'X' || e->task < 0) continue;
      nx++;
      ne += e->ndeps;
    }
  *out = NULL;
  *edges = NULL;
  *n = *nedges = 0;
  if (!ne) return true;
  task_anchors *a = malloc(nx * sizeof *a);
  edge *ed = malloc(ne * sizeof *ed);
  if (!a || !ed) {
    free(a);
    free(ed);
    return false;
  }
  size_t k = 0, m = 0;
  for (int i = 0; i < t->ntracks; i++)
    for (size_t j = 0; j < t->tracks[i].n; j++) {
      const trace_trk *tr = &t->tracks[i];
      const trace_event *e = &tr->ev[j];
      if (e->ph != 'X' || e->task < 0) continue;
      anchor x = {e->t0, e->t1, i, e->cat && strcmp(e->cat, "block") == 0};
      a[k++] = (task_anchors){e->task, x, x};
      for (uint32_t d = 0; d < e->ndeps; d++)
        ed[m++] = (edge){tr->deps[e->deps_off + d], e->task};
    }
  qsort(a, nx, sizeof *a, ta_cmp);
  qsort(ed, ne, sizeof *ed, edge_cmp);
  /* one entry per task: its slices' anchors combined */
  size_t w = 0;
  for (size_t i = 0; i < nx; i++) {
    if (w && a[w - 1].task == a[i].task)
      anchor_offer(&a[w - 1], a[i].first);
    else
      a[w++] = a[i]; /* {task, x, x}: as x offered to no anchor */
  }
  *out = a;
  *n = w;
  *edges = ed;
  *nedges = ne;
  return true;
}

/* The edges' flows, each distinct edge whose producer has a slice once;
 * returns how many could not be written (out of memory). */
static uint64_t put_dep_flows(FILE *f, const pto_trace *t, int pid, uint64_t origin, bool *first) {
  task_anchors *a;
  edge *ed;
  size_t na, ne;
  if (!collect_anchors(t, &a, &na, &ed, &ne)) return 1;
  for (size_t i = 0; i < ne; i++) {
    if (i && edge_cmp(&ed[i - 1], &ed[i]) == 0) continue;
    task_anchors kp = {.task = ed[i].from}, kc = {.task = ed[i].to};
    const task_anchors *p = bsearch(&kp, a, na, sizeof *a, ta_cmp);
    const task_anchors *c = bsearch(&kc, a, na, sizeof *a, ta_cmp);
    if (!p || !c) continue; /* a producer the file does not show */
    int64_t fp = p->task + t->task_base, fc = c->task + t->task_base;
    uint64_t id = trace_flow_id(1, (uint64_t)pid, (uint64_t)fp, (uint64_t)fc, 0, 0);
    put_sep(f, first);
    put_flow_end(f, "dep", 's', id, pid, p->last.track + 1, anchor_ts(&p->last) - origin);
    fprintf(f, ",\"args\":{\"from\":%" PRId64 ",\"to\":%" PRId64 "}}", fp, fc);
    put_sep(f, first);
    put_flow_end(f, "dep", 'f', id, pid, c->first.track + 1, anchor_ts(&c->first) - origin);
    fprintf(f, ",\"args\":{\"from\":%" PRId64 ",\"to\":%" PRId64 "}}", fp, fc);
  }
  free(ed);
  free(a);
  return 0;
}

/* "trace file PATH: WHAT: errno text" into why[0..n), when asked for. */
static int write_fail(char *why, size_t n, const char *path, const char *what, int err) {
  if (why && n) snprintf(why, n, "trace file %s: %s: %s", path, what, strerror(err ? err : EIO));
  return PTO_ESYSTEM;
}

int trace_write_ex(const pto_trace *t, const char *path, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  if (!t || !path) {
    if (why && whylen) snprintf(why, whylen, "trace_write: %s is NULL", t ? "path" : "trace");
    return PTO_EINVAL;
  }
  uint64_t origin = UINT64_MAX;
  for (int i = 0; i < t->ntracks; i++)
    for (size_t j = 0; j < t->tracks[i].n; j++)
      if (t->tracks[i].ev[j].t0 < origin) origin = t->tracks[i].ev[j].t0;
  if (origin == UINT64_MAX)
    origin = t->origin;
  else if (t->origin && t->origin <= origin)
    origin = t->origin;

  FILE *f = fopen(path, "w");
  if (!f) return write_fail(why, whylen, path, "cannot open for writing", errno);
  setvbuf(f, NULL, _IOFBF, 1 << 16);
  int pid = t->pid + 1;
  bool first = true;
  fputs(TRACE_FILE_HEAD, f);
  put_meta(f, &first, pid, 0, "process_name", "name", t->process_name, 0);
  put_meta(f, &first, pid, 0, "process_sort_index", "sort_index", NULL, t->pid);
  for (int i = 0; i < t->ntracks; i++) {
    put_meta(f, &first, pid, i + 1, "thread_name", "name", t->tracks[i].name, 0);
    put_meta(f, &first, pid, i + 1, "thread_sort_index", "sort_index", NULL, i);
  }
  for (int i = 0; i < t->ntracks; i++) {
    const trace_trk *k = &t->tracks[i];
    for (size_t j = 0; j < k->n; j++) {
      put_sep(f, &first);
      put_event(f, t, k, &k->ev[j], pid, i + 1, origin);
    }
  }
  uint64_t dropped = trace_dropped(t) + put_dep_flows(f, t, pid, origin, &first);
  fprintf(f, TRACE_FILE_TAIL "%" PRIu64 "\",\"dropped_events\":%" PRIu64 "}}\n", origin, dropped);
  /* A full disk may only show at the flush in fclose: check both, keep the
   * first errno. */
  int rc = 0;
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) rc = write_fail(why, whylen, path, "write failed", errno);
  if (fclose(f) != 0 && rc == 0) rc = write_fail(why, whylen, path, "close failed", errno);
  if (rc == 0 && dropped) {
    if (why && whylen)
      snprintf(why, whylen,
               "trace file %s: %" PRIu64 " events were dropped (out of memory); the file "
               "says how many",
               path, dropped);
    rc = PTO_ENOMEM;
  }
  return rc;
}

int trace_write(const pto_trace *t, const char *path) { return trace_write_ex(t, path, NULL, 0); }

void trace_destroy(pto_trace *t) {
  if (!t) return;
  for (int i = 0; i < t->ntracks; i++) {
    free(t->tracks[i].name);
    free(t->tracks[i].ev);
    free(t->tracks[i].deps);
  }
  free(t->tracks);
  free(t->process_name);
  free(t);
}
