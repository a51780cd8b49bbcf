/* trace_read.c — the schema check, the summary (utilisation, idle gaps,
 * critical path) and trace_merge(), all over documents parsed by
 * trace_json. Everything is sort-and-scan over flat arrays: a trace of a
 * large run holds hundreds of thousands of events. */
#include "trace_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rec_file.h"
#include "common/trace.h"
#include "pto/status.h"

/* A growable array of fixed-size elements. */
typedef struct vec {
  void *p;
  size_t n, cap, size;
} vec;

static void *vec_push(vec *v) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 64;
    void *p = realloc(v->p, cap * v->size);
    if (!p) return NULL;
    v->p = p;
    v->cap = cap;
  }
  return (char *)v->p + v->size * v->n++;
}

/* qsort and bsearch with n == 0 may get a NULL array, which they must not. */
static void sort(void *p, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1) qsort(p, n, size, cmp);
}

static void *find(const void *key, const void *p, size_t n, size_t size,
                  int (*cmp)(const void *, const void *)) {
  return n ? bsearch(key, p, n, size, cmp) : NULL;
}

static int verr(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return PTO_EINVAL;
}

static bool is_int(double x) {
  return isfinite(x) && x == floor(x) && fabs(x) < 9007199254740992.0;
}

/* A JSON value that is an integer (a pid, tid, id or task), or false: a
 * number that is no exact int64 (1e40, 0.5) names nothing, and casting it
 * would be undefined. Every integer the reader takes goes through here. */
static bool json_int(const trace_json *v, int64_t *out) {
  if (!v || v->type != TJ_NUM || !is_int(v->u.num)) return false;
  *out = (int64_t)v->u.num;
  return true;
}

/* An integer member of an object, or false. */
static bool obj_int(const trace_json *obj, const char *key, int64_t *out) {
  return json_int(trace_json_get(obj, key), out);
}

/* An integer member of the event's args, or false. */
static bool arg_int(const trace_json *ev, const char *key, int64_t *out) {
  return obj_int(trace_json_get(ev, "args"), key, out);
}

static const trace_json *event_array(const trace_json *root) {
  if (root && root->type == TJ_ARR) return root; /* the bare-array form of the format */
  const trace_json *e = trace_json_get(root, "traceEvents");
  return e && e->type == TJ_ARR ? e : NULL;
}

/* ---- schema check ---- */

typedef struct pair {
  int64_t a, b;
} pair;

static int pair_cmp(const void *x, const void *y) {
  const pair *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  return p->b < q->b ? -1 : p->b > q->b;
}

static bool pair_has(const vec *v, int64_t a, int64_t b) {
  pair k = {a, b};
  return find(&k, v->p, v->n, sizeof k, pair_cmp) != NULL;
}

static int pair_add(vec *v, int64_t a, int64_t b) {
  pair *p = vec_push(v);
  if (!p) return PTO_ENOMEM;
  p->a = a;
  p->b = b;
  return 0;
}

int trace_validate(const trace_json *root, char *err, size_t errlen) {
  if (!root || root->type != TJ_OBJ) return verr(err, errlen, "the trace is not a JSON object");
  const trace_json *evs = trace_json_get(root, "traceEvents");
  if (!evs || evs->type != TJ_ARR) return verr(err, errlen, "the trace has no traceEvents array");
  vec threads = {.size = sizeof(pair)}, procs = {.size = sizeof(pair)},
      used = {.size = sizeof(pair)};
  int rc = 0;
  for (uint32_t i = 0; i < evs->n && rc == 0; i++) {
    const trace_json *e = &evs->u.items[i];
    double ts, dur;
    int64_t pid, tid;
    const char *ph = trace_json_str(e, "ph"), *name = trace_json_str(e, "name");
    if (e->type != TJ_OBJ) {
      rc = verr(err, errlen, "event %u is not an object", i);
    } else if (!ph || strlen(ph) != 1) {
      rc = verr(err, errlen, "event %u has no one-letter ph", i);
    } else if (!obj_int(e, "pid", &pid) || !obj_int(e, "tid", &tid)) {
      rc = verr(err, errlen, "event %u (ph %s) lacks an integer pid or tid", i, ph);
    } else if (!trace_json_num(e, "ts", &ts) || !isfinite(ts) || ts < 0) {
      rc = verr(err, errlen, "event %u (ph %s) lacks a ts >= 0", i, ph);
    } else if (!name) {
      rc = verr(err, errlen, "event %u (ph %s) has no name", i, ph);
    } else if (ph[0] == 'M') {
      const trace_json *args = trace_json_get(e, "args");
      if (!args || args->type != TJ_OBJ) {
        rc = verr(err, errlen, "metadata event %u (%s) has no args object", i, name);
      } else if (strcmp(name, "thread_name") == 0 || strcmp(name, "process_name") == 0) {
        if (!trace_json_str(args, "name"))
          rc = verr(err, errlen, "metadata event %u (%s) has no args.name", i, name);
        else if (name[0] == 't')
          rc = pair_add(&threads, pid, tid);
        else
          rc = pair_add(&procs, pid, 0);
      }
    } else if (ph[0] == 'X' || ph[0] == 'i' || ph[0] == 'I' || ph[0] == 'B' || ph[0] == 'E' ||
               ph[0] == 's' || ph[0] == 'f') {
      if (ph[0] == 'X' && (!trace_json_num(e, "dur", &dur) || !isfinite(dur) || dur < 0)) {
        rc = verr(err, errlen, "slice %u (%s) lacks a dur >= 0", i, name);
      } else if (ph[0] == 'X' && trace_json_str(e, "cat") &&
                 strcmp(trace_json_str(e, "cat"), "block") == 0) {
        int64_t task, block;
        if (!arg_int(e, "task", &task) || task < 0 || !arg_int(e, "block", &block) || block < 0)
          rc = verr(err, errlen, "block slice %u (%s) lacks integer args task and block", i, name);
      } else if (ph[0] == 'X' && trace_json_str(e, "cat") &&
                 strcmp(trace_json_str(e, "cat"), "sched") == 0 && strcmp(name, "drain") == 0) {
        int64_t task; /* a drain step is always a gang's */
        if (!arg_int(e, "task", &task) || task < 0)
          rc = verr(err, errlen, "drain slice %u lacks an integer arg task (the gang's)", i);
      }
      if (rc == 0) rc = pair_add(&used, pid, tid);
    }
  }
  if (rc == 0) {
    sort(threads.p, threads.n, sizeof(pair), pair_cmp);
    sort(procs.p, procs.n, sizeof(pair), pair_cmp);
    for (size_t i = 0; i < used.n && rc == 0; i++) {
      const pair *u = (const pair *)used.p + i;
      if (!pair_has(&threads, u->a, u->b))
        rc = verr(err, errlen, "track pid %" PRId64 " tid %" PRId64 " has no thread_name", u->a,
                  u->b);
      else if (!pair_has(&procs, u->a, 0))
        rc = verr(err, errlen, "pid %" PRId64 " has no process_name", u->a);
    }
  }
  if (rc == PTO_ENOMEM) verr(err, errlen, "out of memory");
  free(threads.p);
  free(procs.p);
  free(used.p);
  return rc ? rc : trace_check_flows(root, NULL, err, errlen);
}

/* ---- flows: dependency and signal arrows ---- */

typedef struct flow_end {
  int64_t id, pid, tid, from, to; /* from, to: a "dep" flow's tasks, else -1 */
  double ts;
  uint32_t idx; /* its event, for messages */
  char ph;
  bool dep;
} flow_end;

static int flow_cmp(const void *x, const void *y) {
  const flow_end *p = x, *q = y;
  if (p->id != q->id) return p->id < q->id ? -1 : 1;
  if (p->ph != q->ph) return p->ph == 's' ? -1 : 1;
  return p->idx < q->idx ? -1 : p->idx > q->idx;
}

/* An edge (pid, from, to), from the flows or from args.deps. */
static int edge3_cmp(const void *x, const void *y) {
  const flow_end *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->from != q->from) return p->from < q->from ? -1 : 1;
  return p->to < q->to ? -1 : p->to > q->to;
}

/* An X slice, keyed by (pid, key): key is its task (by_task) or its tid
 * (by_track). */
typedef struct xs {
  int64_t pid, key, tid;
  double ts, end;
  const char *name;
} xs;

static int xs_cmp(const void *x, const void *y) {
  const xs *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->key != q->key) return p->key < q->key ? -1 : 1;
  return p->ts < q->ts ? -1 : p->ts > q->ts;
}

#define FLOW_EPS 0.0015 /* us: timestamps have 3 decimals */

static bool encloses(const xs *x, double ts) {
  return x->ts - FLOW_EPS <= ts && ts <= x->end + FLOW_EPS;
}

/* A flow end lies inside a slice on its own track: of its task (dep), or
 * named notify (a signal's start) or wait (its finish). For a dep end, the
 * task's slices that start by the flow's ts are searched, latest first; for
 * a signal's, the track's: the notify or wait is the last slice to start
 * before it (nothing runs on a core inside them), so a few suffice. */
#define FLOW_LOOKBACK 8

/* Past the last slice of (pid, key) in the sorted v that starts by ts. */
static size_t xs_upto(const vec *v, int64_t pid, int64_t key, double ts) {
  size_t lo = 0, hi = v->n;
  const xs *a = v->p;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    bool before = a[mid].pid < pid ||
                  (a[mid].pid == pid &&
                   (a[mid].key < key || (a[mid].key == key && a[mid].ts - FLOW_EPS <= ts)));
    if (before)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The first slice of (pid, key) in the sorted v, or where it would be. */
static size_t xs_first(const vec *v, int64_t pid, int64_t key) {
  return xs_upto(v, pid, key, -INFINITY);
}

static bool flow_bound(const vec *by_task, const vec *by_track, const flow_end *f) {
  const vec *v = f->dep ? by_task : by_track;
  int64_t key = f->dep ? (f->ph == 's' ? f->from : f->to) : f->tid;
  const char *want = f->ph == 's' ? "notify" : "wait";
  const xs *a = v->p;
  size_t lo = xs_first(v, f->pid, key), hi = xs_upto(v, f->pid, key, f->ts);
  for (size_t k = hi, seen = 0; k > lo && (f->dep || seen < FLOW_LOOKBACK); k--, seen++) {
    const xs *x = &a[k - 1];
    if (x->tid == f->tid && encloses(x, f->ts) &&
        (f->dep || (x->name && strcmp(x->name, want) == 0)))
      return true;
  }
  return false;
}

static int xs_add(vec *v, int64_t pid, int64_t key, int64_t tid, double ts, double end,
                  const char *name) {
  xs *x = vec_push(v);
  if (!x) return PTO_ENOMEM;
  *x = (xs){pid, key, tid, ts, end, name};
  return 0;
}

/* The events' flows and slices into the vectors. */
static int flows_collect(const trace_json *evs, vec *ends, vec *by_task, vec *by_track, vec *edges,
                         char *err, size_t errlen) {
  for (uint32_t i = 0; i < evs->n; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *ph = trace_json_str(e, "ph"), *name = trace_json_str(e, "name");
    double ts, dur;
    int64_t pid, tid, id;
    int64_t task = 0; /* read only when arg_int found it (gcc -O3 cannot tell) */
    if (!ph || !obj_int(e, "pid", &pid) || !obj_int(e, "tid", &tid) ||
        !trace_json_num(e, "ts", &ts))
      continue;
    if (ph[0] == 'X' && trace_json_num(e, "dur", &dur)) {
      bool has_task = arg_int(e, "task", &task);
      if (xs_add(by_track, pid, tid, tid, ts, ts + dur, name) ||
          (has_task && xs_add(by_task, pid, task, tid, ts, ts + dur, name)))
        return PTO_ENOMEM;
      const trace_json *deps = trace_json_get(trace_json_get(e, "args"), "deps");
      for (uint32_t d = 0; has_task && deps && deps->type == TJ_ARR && d < deps->n; d++) {
        int64_t from;
        if (!json_int(&deps->u.items[d], &from)) continue;
        flow_end *g = vec_push(edges);
        if (!g) return PTO_ENOMEM;
        *g = (flow_end){.pid = pid, .from = from, .to = task};
      }
      continue;
    }
    if (ph[0] != 's' && ph[0] != 'f') continue;
    if (!obj_int(e, "id", &id) || !name)
      return verr(err, errlen, "flow event %u lacks an integer id or a name", i);
    flow_end *f = vec_push(ends);
    if (!f) return PTO_ENOMEM;
    *f = (flow_end){id, pid, tid, -1, -1, ts, i, ph[0], false};
    if (strcmp(name, "dep") == 0) {
      f->dep = true;
      if (!arg_int(e, "from", &f->from) || !arg_int(e, "to", &f->to))
        return verr(err, errlen, "dep flow event %u lacks integer args from and to", i);
    }
  }
  return 0;
}

/* Sorts and removes repeats (by cmp) from v. */
static void uniq(vec *v, int (*cmp)(const void *, const void *)) {
  sort(v->p, v->n, v->size, cmp);
  size_t k = 0;
  for (size_t i = 0; i < v->n; i++)
    if (!k || cmp((char *)v->p + (k - 1) * v->size, (char *)v->p + i * v->size) != 0)
      memmove((char *)v->p + k++ * v->size, (char *)v->p + i * v->size, v->size);
  v->n = k;
}

static int flows_check(vec *ends, vec *by_task, vec *by_track, vec *edges, trace_flow_counts *c,
                       char *err, size_t errlen) {
  sort(ends->p, ends->n, sizeof(flow_end), flow_cmp);
  sort(by_task->p, by_task->n, sizeof(xs), xs_cmp);
  sort(by_track->p, by_track->n, sizeof(xs), xs_cmp);
  const flow_end *f = ends->p;
  vec drawn = {.size = sizeof(flow_end)};
  int rc = 0;
  for (size_t i = 0; i < ends->n && rc == 0;) {
    size_t j = i, ns = 0, nf = 0;
    for (; j < ends->n && f[j].id == f[i].id; j++) {
      ns += f[j].ph == 's';
      nf += f[j].ph == 'f';
      if (f[j].dep != f[i].dep || f[j].from != f[i].from || f[j].to != f[i].to)
        rc = verr(err, errlen, "flow id %" PRId64 ": events %u and %u disagree on what it joins",
                  f[i].id, f[i].idx, f[j].idx);
      else if (!flow_bound(by_task, by_track, &f[j]))
        rc = verr(err, errlen,
                  "flow event %u (id %" PRId64 ", ph %c) lies in no %s slice on its track",
                  f[j].idx, f[j].id, f[j].ph,
                  f[j].dep         ? "of its task's"
                  : f[j].ph == 's' ? "notify"
                                   : "wait");
    }
    if (rc == 0 && f[i].dep && (ns != 1 || nf != 1))
      rc = verr(err, errlen,
                "dep flow id %" PRId64 " (task %" PRId64 " -> %" PRId64
                ") has %zu starts and %zu finishes, not one each",
                f[i].id, f[i].from, f[i].to, ns, nf);
    if (rc == 0 && f[i].dep) {
      flow_end *g = vec_push(&drawn);
      if (!g)
        rc = PTO_ENOMEM;
      else
        *g = f[i];
      c->deps++;
    } else if (rc == 0) {
      c->signals += ns && nf;
      c->unmatched += ns && nf ? 0 : ns + nf;
    }
    i = j;
  }
  /* Every edge recorded between two tasks of the file has its arrow, and
   * every arrow is such an edge. */
  uniq(edges, edge3_cmp);
  size_t k = 0;
  flow_end *e = edges->p;
  const xs *t = by_task->p;
  for (size_t i = 0; i < edges->n; i++) {
    size_t at = xs_first(by_task, e[i].pid, e[i].from);
    if (at < by_task->n && t[at].pid == e[i].pid && t[at].key == e[i].from) e[k++] = e[i];
  }
  edges->n = k;
  c->edges = k;
  uniq(&drawn, edge3_cmp);
  if (rc == 0 && drawn.n != c->deps)
    rc = verr(err, errlen, "%" PRIu64 " dep flows draw only %zu distinct edges", c->deps, drawn.n);
  for (size_t i = 0; rc == 0 && i < edges->n; i++) {
    const flow_end *x = (const flow_end *)edges->p + i;
    if (!find(x, drawn.p, drawn.n, sizeof *x, edge3_cmp))
      rc = verr(err, errlen, "edge %" PRId64 " -> %" PRId64 " of pid %" PRId64 " has no dep flow",
                x->from, x->to, x->pid);
  }
  for (size_t i = 0; rc == 0 && i < drawn.n; i++) {
    const flow_end *x = (const flow_end *)drawn.p + i;
    if (!find(x, edges->p, edges->n, sizeof *x, edge3_cmp))
      rc = verr(err, errlen,
                "dep flow %" PRId64 " -> %" PRId64 " of pid %" PRId64 " is no edge in args.deps",
                x->from, x->to, x->pid);
  }
  free(drawn.p);
  return rc;
}

int trace_check_flows(const trace_json *root, trace_flow_counts *out, char *err, size_t errlen) {
  trace_flow_counts c = {0};
  const trace_json *evs = event_array(root);
  if (!evs) return verr(err, errlen, "the trace has no traceEvents array");
  vec ends = {.size = sizeof(flow_end)}, by_task = {.size = sizeof(xs)},
      by_track = {.size = sizeof(xs)}, edges = {.size = sizeof(flow_end)};
  int rc = flows_collect(evs, &ends, &by_task, &by_track, &edges, err, errlen);
  if (rc == 0) rc = flows_check(&ends, &by_task, &by_track, &edges, &c, err, errlen);
  if (rc == PTO_ENOMEM) verr(err, errlen, "out of memory");
  free(ends.p);
  free(by_task.p);
  free(by_track.p);
  free(edges.p);
  if (out) *out = c;
  return rc;
}

/* ---- summary ---- */

typedef struct slice {
  int64_t pid, tid;
  double ts, end;
  const trace_json *ev; /* the event holding name, cat and args (the B of a B/E pair) */
  bool block;
} slice;

static int slice_cmp(const void *x, const void *y) {
  const slice *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->tid != q->tid) return p->tid < q->tid ? -1 : 1;
  return p->ts < q->ts ? -1 : p->ts > q->ts;
}

typedef struct be_ev {
  int64_t pid, tid;
  uint32_t idx;
  const trace_json *ev;
} be_ev;

static int be_cmp(const void *x, const void *y) {
  const be_ev *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->tid != q->tid) return p->tid < q->tid ? -1 : 1;
  return p->idx < q->idx ? -1 : p->idx > q->idx; /* file order within a thread */
}

typedef struct meta {
  int64_t pid, tid;
  const char *name;
  int64_t sort;
  bool has_sort;
} meta;

static int meta_cmp(const void *x, const void *y) {
  const meta *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  return p->tid < q->tid ? -1 : p->tid > q->tid;
}

typedef struct task_rec {
  int64_t pid, task;
  double ts, end;
  bool block;
} task_rec;

static int task_cmp(const void *x, const void *y) {
  const task_rec *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  return p->task < q->task ? -1 : p->task > q->task;
}

typedef struct edge {
  int64_t pid, task, dep;
} edge;

static int edge_cmp(const void *x, const void *y) {
  const edge *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  return p->task < q->task ? -1 : p->task > q->task;
}

typedef struct block_key {
  int64_t pid, task, block, part;
} block_key;

static int block_cmp(const void *x, const void *y) {
  const block_key *p = x, *q = y;
  const int64_t a[4] = {p->pid, p->task, p->block, p->part};
  const int64_t b[4] = {q->pid, q->task, q->block, q->part};
  for (int i = 0; i < 4; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

static int track_cmp(const void *x, const void *y) {
  const trace_track_stat *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->sort != q->sort) return p->sort < q->sort ? -1 : 1;
  return p->tid < q->tid ? -1 : p->tid > q->tid;
}

/* Keeps the TRACE_TOP_GAPS longest gaps, longest first. */
static void gap_offer(trace_summary *s, size_t track, double start, double dur) {
  if (dur <= 0) return;
  int i;
  if (s->ngaps < TRACE_TOP_GAPS)
    i = s->ngaps++;
  else if (s->gaps[TRACE_TOP_GAPS - 1].dur_us >= dur)
    return;
  else
    i = TRACE_TOP_GAPS - 1;
  for (; i > 0 && s->gaps[i - 1].dur_us < dur; i--)
    s->gaps[i] = s->gaps[i - 1];
  s->gaps[i] = (trace_gap){track, start - s->t0_us, dur};
}

/* Collects complete slices (X, and B/E pairs matched per thread) and the
 * tracks' names. */
static int collect(const trace_json *evs, trace_summary *s, vec *slices, vec *metas) {
  vec be = {.size = sizeof(be_ev)};
  int rc = 0;
  for (uint32_t i = 0; i < evs->n && rc == 0; i++) {
    const trace_json *e = &evs->u.items[i];
    const char *ph = trace_json_str(e, "ph"), *name = trace_json_str(e, "name");
    double ts = 0, dur = 0;
    int64_t pid = 0, tid = 0;
    s->events++;
    if (!ph || !obj_int(e, "pid", &pid) || !obj_int(e, "tid", &tid))
      continue; /* not an event this summary can place */
    if (ph[0] == 'M' && name) {
      bool tname = strcmp(name, "thread_name") == 0;
      bool tsort = strcmp(name, "thread_sort_index") == 0;
      if (!tname && !tsort) continue;
      meta *m = vec_push(metas);
      if (!m) {
        rc = PTO_ENOMEM;
        break;
      }
      int64_t sort = 0;
      *m = (meta){pid, tid, NULL, 0, false};
      if (tname)
        m->name = trace_json_str(trace_json_get(e, "args"), "name");
      else if (arg_int(e, "sort_index", &sort))
        m->sort = sort, m->has_sort = true;
      continue;
    }
    if (!trace_json_num(e, "ts", &ts) || !isfinite(ts)) continue;
    if (ph[0] == 'X') {
      if (!trace_json_num(e, "dur", &dur) || !isfinite(dur) || dur < 0) dur = 0;
      slice *sl = vec_push(slices);
      if (!sl) {
        rc = PTO_ENOMEM;
        break;
      }
      *sl = (slice){pid, tid, ts, ts + dur, e, false};
    } else if (ph[0] == 'B' || ph[0] == 'E') {
      be_ev *b = vec_push(&be);
      if (!b) {
        rc = PTO_ENOMEM;
        break;
      }
      *b = (be_ev){pid, tid, i, e};
    }
  }
  /* B/E: a stack per thread, in file order. */
  if (rc == 0 && be.n) {
    sort(be.p, be.n, sizeof(be_ev), be_cmp);
    const be_ev *b = be.p;
    vec stack = {.size = sizeof(size_t)};
    for (size_t i = 0; i < be.n && rc == 0; i++) {
      if (i && (b[i].pid != b[i - 1].pid || b[i].tid != b[i - 1].tid)) stack.n = 0;
      const char *ph = trace_json_str(b[i].ev, "ph");
      if (ph[0] == 'B') {
        size_t *top = vec_push(&stack);
        if (!top)
          rc = PTO_ENOMEM;
        else
          *top = i;
      } else if (stack.n) {
        const be_ev *open = &b[((size_t *)stack.p)[--stack.n]];
        double t0 = 0, t1 = 0;
        trace_json_num(open->ev, "ts", &t0);
        trace_json_num(b[i].ev, "ts", &t1);
        slice *sl = vec_push(slices);
        if (!sl)
          rc = PTO_ENOMEM;
        else
          *sl = (slice){open->pid, open->tid, t0, t1 > t0 ? t1 : t0, open->ev, false};
      }
    }
    free(stack.p);
  }
  free(be.p);
  return rc;
}

/* Critical path over args.deps; task ids grow in submission order, so an
 * edge to a task that is not earlier is not a dependency and is ignored. */
static int critical_path(trace_summary *s, const slice *sl, size_t n) {
  vec recs = {.size = sizeof(task_rec)}, edges = {.size = sizeof(edge)};
  double *len = NULL;
  size_t *cnt = NULL;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    int64_t task;
    if (!arg_int(sl[i].ev, "task", &task)) continue;
    const trace_json *deps = trace_json_get(trace_json_get(sl[i].ev, "args"), "deps");
    bool has_deps = deps && deps->type == TJ_ARR;
    if (!sl[i].block && !has_deps) continue;
    task_rec *r = vec_push(&recs);
    if (!r) {
      rc = PTO_ENOMEM;
      break;
    }
    *r = (task_rec){sl[i].pid, task, sl[i].ts, sl[i].end, sl[i].block};
    for (uint32_t j = 0; has_deps && j < deps->n && rc == 0; j++) {
      int64_t from;
      if (!json_int(&deps->u.items[j], &from)) continue;
      edge *e = vec_push(&edges);
      if (!e)
        rc = PTO_ENOMEM;
      else
        *e = (edge){sl[i].pid, task, from};
    }
  }
  if (rc) goto out;
  /* Group the records into tasks: span over block slices only. */
  sort(recs.p, recs.n, sizeof(task_rec), task_cmp);
  task_rec *r = recs.p;
  size_t nt = 0;
  for (size_t i = 0; i < recs.n; i++) {
    if (nt && r[nt - 1].pid == r[i].pid && r[nt - 1].task == r[i].task) {
      task_rec *t = &r[nt - 1];
      if (r[i].block && (!t->block || r[i].ts < t->ts)) t->ts = r[i].ts;
      if (r[i].block && (!t->block || r[i].end > t->end)) t->end = r[i].end;
      t->block |= r[i].block;
    } else {
      r[nt++] = r[i];
    }
  }
  for (size_t i = 0; i < nt; i++)
    s->tasks += r[i].block;
  sort(edges.p, edges.n, sizeof(edge), edge_cmp);
  s->edges = edges.n;
  len = calloc(nt ? nt : 1, sizeof *len);
  cnt = calloc(nt ? nt : 1, sizeof *cnt);
  if (!len || !cnt) {
    rc = PTO_ENOMEM;
    goto out;
  }
  const edge *e = edges.p;
  size_t ei = 0;
  for (size_t i = 0; i < nt; i++) {
    double best = 0;
    size_t best_cnt = 0;
    while (ei < edges.n && edge_cmp(&e[ei], &(edge){r[i].pid, r[i].task, 0}) < 0)
      ei++; /* edges of tasks that have no record cannot happen; stay robust */
    for (; ei < edges.n && e[ei].pid == r[i].pid && e[ei].task == r[i].task; ei++) {
      task_rec key = {.pid = r[i].pid, .task = e[ei].dep};
      const task_rec *d = find(&key, r, nt, sizeof *r, task_cmp);
      if (!d || d >= &r[i]) {
        s->missing_deps++;
        continue;
      }
      size_t di = (size_t)(d - r);
      if (len[di] > best || (len[di] == best && cnt[di] > best_cnt)) {
        best = len[di];
        best_cnt = cnt[di];
      }
    }
    len[i] = best + (r[i].block ? r[i].end - r[i].ts : 0);
    cnt[i] = best_cnt + 1;
    if (len[i] > s->critical_us || s->critical_tasks == 0) {
      s->critical_us = len[i];
      s->critical_tasks = cnt[i];
      s->critical_pid = r[i].pid;
      s->critical_last = r[i].task;
    }
  }
out:
  free(len);
  free(cnt);
  free(recs.p);
  free(edges.p);
  return rc;
}

/* A MIX block runs on several cores at once: each core records a "block"
 * slice, the first without args.part (or part 0), the others with part 1,
 * 2. A block is counted once, by its part-0 slice; (task, block, part)
 * must be unique. */
static int count_blocks(trace_summary *s, slice *sl, size_t n) {
  block_key *k = malloc((n ? n : 1) * sizeof *k);
  if (!k) return PTO_ENOMEM;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!sl[i].block) continue;
    block_key b = {sl[i].pid, -1, -1, 0};
    arg_int(sl[i].ev, "task", &b.task);
    arg_int(sl[i].ev, "block", &b.block);
    arg_int(sl[i].ev, "part", &b.part);
    s->blocks += b.part == 0;
    k[m++] = b;
  }
  sort(k, m, sizeof *k, block_cmp);
  for (size_t i = 1; i < m; i++)
    s->dup_blocks += block_cmp(&k[i], &k[i - 1]) == 0;
  free(k);
  return 0;
}

/* Per track: busy time (union of slices), then idle gaps against the span
 * of the track's process. Slices are sorted by (pid, tid, ts). */
static int track_stats(trace_summary *s, const slice *sl, size_t n, const vec *metas) {
  vec tracks = {.size = sizeof(trace_track_stat)};
  vec spans = {.size = sizeof(slice)}; /* per pid: [ts, end] over its slices */
  for (size_t i = 0; i < n; i++) {
    slice *sp = spans.n ? (slice *)spans.p + spans.n - 1 : NULL;
    if (!sp || sp->pid != sl[i].pid) {
      if (!(sp = vec_push(&spans))) goto oom;
      *sp = sl[i];
    }
    if (sl[i].ts < sp->ts) sp->ts = sl[i].ts;
    if (sl[i].end > sp->end) sp->end = sl[i].end;
  }
  bool cores_only = s->blocks > 0;
  s->gaps_on_cores = cores_only;
  const slice *span = spans.p;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (span->pid != sl[i].pid)
      span++;
    trace_track_stat *t = vec_push(&tracks);
    if (!t) goto oom;
    *t = (trace_track_stat){
        .pid = sl[i].pid, .tid = sl[i].tid, .sort = sl[i].tid, .span_us = span->end - span->ts};
    meta key = {.pid = t->pid, .tid = t->tid};
    const meta *m = find(&key, metas->p, metas->n, sizeof key, meta_cmp);
    /* Several metadata events may name one thread: look at all of them. */
    while (m && m > (const meta *)metas->p && meta_cmp(m - 1, &key) == 0)
      m--;
    for (; m && m < (const meta *)metas->p + metas->n && meta_cmp(m, &key) == 0; m++) {
      if (m->name) t->name = m->name;
      if (m->has_sort) t->sort = m->sort;
    }
    for (; j < n && sl[j].pid == sl[i].pid && sl[j].tid == sl[i].tid; j++) {
      t->slices++;
      t->blocks += sl[j].block;
    }
    bool gaps = !cores_only || t->blocks > 0;
    double cur = span->ts; /* end of the busy time so far */
    for (size_t k = i; k < j; k++) {
      if (sl[k].ts > cur) {
        if (gaps) gap_offer(s, tracks.n - 1, cur, sl[k].ts - cur);
        cur = sl[k].ts;
      }
      if (sl[k].end > cur) {
        t->busy_us += sl[k].end - cur;
        cur = sl[k].end;
      }
    }
    if (gaps) gap_offer(s, tracks.n - 1, cur, span->end - cur);
    i = j;
  }
  /* Display order is (pid, sort index, tid); the gaps name their tracks
   * by index, so look each one up again in the sorted copy ((pid, tid) is
   * unique, so the key is too). */
  trace_track_stat *tr = malloc((tracks.n ? tracks.n : 1) * sizeof *tr);
  if (!tr) goto oom;
  if (tracks.n) memcpy(tr, tracks.p, tracks.n * sizeof *tr);
  sort(tr, tracks.n, sizeof *tr, track_cmp);
  for (int g = 0; g < s->ngaps; g++) {
    const trace_track_stat *o = (const trace_track_stat *)tracks.p + s->gaps[g].track;
    const trace_track_stat *nw = find(o, tr, tracks.n, sizeof *tr, track_cmp);
    s->gaps[g].track = (size_t)(nw - tr);
  }
  free(tracks.p);
  s->tracks = tr;
  s->ntracks = tracks.n;
  free(spans.p);
  return 0;
oom:
  free(tracks.p);
  free(spans.p);
  return PTO_ENOMEM;
}

int trace_summarize(const trace_json *root, trace_summary *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->critical_pid = s->critical_last = -1;
  const trace_json *evs = event_array(root);
  if (!evs) return verr(err, errlen, "the file holds no traceEvents array");
  vec slices = {.size = sizeof(slice)}, metas = {.size = sizeof(meta)};
  int rc = collect(evs, s, &slices, &metas);
  slice *sl = slices.p;
  for (size_t i = 0; rc == 0 && i < slices.n; i++) {
    const char *cat = trace_json_str(sl[i].ev, "cat");
    sl[i].block = cat && strcmp(cat, "block") == 0;
    if (i == 0 || sl[i].ts < s->t0_us) s->t0_us = sl[i].ts;
    if (i == 0 || sl[i].end > s->t1_us) s->t1_us = sl[i].end;
  }
  s->slices = slices.n;
  s->span_us = s->t1_us - s->t0_us;
  if (rc == 0) {
    sort(sl, slices.n, sizeof *sl, slice_cmp);
    sort(metas.p, metas.n, sizeof(meta), meta_cmp);
    rc = count_blocks(s, sl, slices.n);
  }
  if (rc == 0) rc = track_stats(s, sl, slices.n, &metas);
  if (rc == 0) rc = critical_path(s, sl, slices.n);
  free(slices.p);
  free(metas.p);
  if (rc) {
    trace_summary_free(s);
    verr(err, errlen, "out of memory");
  }
  return rc;
}

void trace_summary_free(trace_summary *s) {
  free(s->tracks);
  s->tracks = NULL;
  s->ntracks = 0;
}

/* ---- merge ---- */

static uint64_t file_origin(const trace_json *root) {
  const char *o = trace_json_str(trace_json_get(root, "otherData"), "pto_origin_ns");
  return o ? strtoull(o, NULL, 10) : 0;
}

/* The processes seen so far, and the file that named each. */
typedef struct proc_seen {
  int64_t pid, first_file;
} proc_seen;

static proc_seen *proc_find(vec *procs, int64_t pid) {
  for (size_t k = 0; k < procs->n; k++)
    if (((proc_seen *)procs->p)[k].pid == pid) return (proc_seen *)procs->p + k;
  return NULL;
}

/* One event with its ts moved by shift_ns (metadata keeps ts 0). */
static void put_shifted(FILE *f, const trace_json *e, uint64_t shift_ns) {
  const char *ph = trace_json_str(e, "ph");
  if (e->type != TJ_OBJ || !shift_ns || (ph && ph[0] == 'M')) {
    trace_json_write(f, e);
    return;
  }
  fputc('{', f);
  for (uint32_t i = 0; i < e->n; i++) {
    const trace_json *m = &e->u.items[i];
    if (i) fputc(',', f);
    trace_json_write_str(f, m->key);
    fputc(':', f);
    if (strcmp(m->key, "ts") == 0 && m->type == TJ_NUM)
      fprintf(f, "%.3f", m->u.num + (double)shift_ns / 1000.0);
    else
      trace_json_write(f, m);
  }
  fputc('}', f);
}

/* merge's failure: the code, and why[0..whylen) saying what went wrong. */
static int merge_fail(char *why, size_t whylen, int rc, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

int trace_merge_ex(const char *const *paths, int n, const char *out, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  if (!paths || n <= 0 || !out)
    return merge_fail(why, whylen, PTO_EINVAL, "trace merge: %s",
                      !out ? "no output file" : "no input files");
  trace_json_doc **docs = calloc((size_t)n, sizeof *docs);
  if (!docs) return merge_fail(why, whylen, PTO_ENOMEM, "trace merge: out of memory");
  int rc = 0;
  uint64_t origin = 0, dropped = 0;
  vec procs = {.size = sizeof(proc_seen)}; /* every process named by metadata */
  for (int i = 0; i < n && rc == 0; i++) {
    char lerr[200] = "";
    rc = trace_json_load(paths[i], &docs[i], lerr, sizeof lerr);
    if (rc)
      merge_fail(why, whylen, rc, "trace merge: input %s: %s", paths[i],
                 lerr[0] ? lerr : pto_strerror(rc));
    const trace_json *root = docs[i] ? trace_json_root(docs[i]) : NULL;
    const trace_json *evs = rc == 0 ? event_array(root) : NULL;
    if (rc == 0 && !evs)
      rc = merge_fail(why, whylen, PTO_EINVAL, "trace merge: input %s holds no trace events",
                      paths[i]);
    /* Two files showing the same process are two runs of one rank, not
     * ranks of one run: merging them would pile their tracks together. */
    for (uint32_t j = 0; rc == 0 && j < evs->n; j++) {
      const trace_json *e = &evs->u.items[j];
      const char *name = trace_json_str(e, "name");
      int64_t pid;
      if (!name || strcmp(name, "process_name") != 0 || !obj_int(e, "pid", &pid)) continue;
      const proc_seen *p = proc_find(&procs, pid);
      if (p && p->first_file != i)
        rc = merge_fail(why, whylen, PTO_EINVAL,
                        "trace merge: inputs %s and %s both show process %lld (the same rank)",
                        paths[p->first_file], paths[i], (long long)pid);
      if (p) continue;
      proc_seen *np = vec_push(&procs);
      if (!np)
        rc = merge_fail(why, whylen, PTO_ENOMEM, "trace merge: out of memory");
      else
        *np = (proc_seen){pid, i};
    }
    if (rc == 0) {
      uint64_t o = file_origin(root);
      if (o && (!origin || o < origin)) origin = o;
      double d;
      if (trace_json_num(trace_json_get(root, "otherData"), "dropped_events", &d) && d > 0)
        dropped += (uint64_t)d;
    }
  }
  /* written beside out and renamed over it: a failed write leaves the
   * file it would replace as it was */
  rec_file w = {0};
  if (rc == 0 && rec_file_open(&w, out) != 0)
    rc = merge_fail(why, whylen, PTO_ESYSTEM, "trace file %s: cannot open for writing: %s", out,
                    strerror(errno));
  if (rc == 0) {
    FILE *f = w.f;
    bool first = true;
    fputs("{\"traceEvents\":[\n", f);
    for (int i = 0; i < n; i++) {
      const trace_json *root = trace_json_root(docs[i]);
      const trace_json *evs = event_array(root);
      uint64_t o = file_origin(root);
      /* Files without an origin (other tools') are taken as they are. */
      uint64_t shift = o && origin ? o - origin : 0;
      for (uint32_t j = 0; j < evs->n; j++) {
        if (!first) fputs(",\n", f);
        first = false;
        put_shifted(f, &evs->u.items[j], shift);
      }
    }
    fprintf(f,
            "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"pto_origin_ns\":\"%" PRIu64
            "\",\"dropped_events\":%" PRIu64 ",\"merged_files\":%d}}\n",
            origin, dropped, n);
    if (rec_file_close(&w, out) != 0)
      rc = merge_fail(why, whylen, PTO_ESYSTEM, "trace file %s: write failed: %s", out,
                      strerror(errno));
  }
  for (int i = 0; i < n; i++)
    trace_json_free(docs[i]);
  free(docs);
  free(procs.p);
  return rc;
}

int trace_merge(const char *const *paths, int n, const char *out) {
  return trace_merge_ex(paths, n, out, NULL, 0);
}
