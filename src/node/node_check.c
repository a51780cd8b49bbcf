/* node_check.c — checking mode on a node (docs/contracts.md, "Node runs"):
 * the writes of node tasks to node host memory.
 *
 * In checking mode the node runs one task at a time (node_task.c waits for
 * each task it launches before it launches another or returns to the
 * orchestration), so every byte of node host memory that changes while a
 * task runs is that task's (its ranks', for a group task). Before the
 * launch the memory handed out so far is copied; after the last reply a
 * changed byte outside the task's written views fails the task with
 * PTO_ECONTRACT, naming the argument, the byte and its old and new values.
 * A chip task's units were checked on its chip already, with their blocks
 * and kernels named; this catches host tasks, and what no chip task
 * declared (a chip's view of host memory it was not passed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/region.h"
#include "common/tensor_walk.h"
#include "node/node_internal.h"

bool node_check_on(const pto_node *n) { return n->cfg.chip.check == 1; }

bool node_check_before(pto_node *n, node_task *t, int slot) {
  n->check_slot = slot;
  if (!node_check_on(n) || !n->host_used) return true;
  if (n->check_cap < n->host_used) {
    unsigned char *p = realloc(n->check_snap, n->host_used);
    if (!p) {
      t->status = PTO_ENOMEM;
      t->err.code = PTO_ENOMEM;
      snprintf(t->err.details, sizeof t->err.details,
               "node task %" PRId64 ": checking mode: no memory for a copy of %zu bytes of node "
               "host memory",
               t->id, n->host_used);
      return false;
    }
    n->check_snap = p;
    n->check_cap = n->host_used;
  }
  memcpy(n->check_snap, n->host, n->host_used);
  return true;
}

static bool writes(int access) { return access != PTO_INPUT; }

/* Whether view v touches byte x. */
static bool view_has(const pto_tensor *v, const unsigned char *x) {
  pto_tensor b;
  int64_t one = 1;
  return pto_tensor_init(&b, (void *)x, 1, PTO_U8, 1, &one) == 0 && region_covers(v, &b);
}

/* Byte runs [lo, hi) of host memory offsets, sorted and merged. */
typedef struct span {
  size_t lo, hi;
} span;

typedef struct spans {
  span *v;
  size_t n, cap;
  const pto_node *node;
  uintptr_t buf; /* of the view being added */
  size_t es;
} spans;

static int spans_push(void *arg, int64_t off, int64_t b_off, int64_t k) {
  (void)b_off;
  spans *s = arg;
  uintptr_t lo = s->buf + (uintptr_t)off * s->es, hi = lo + (uintptr_t)k * s->es;
  uintptr_t h0 = (uintptr_t)s->node->host, h1 = h0 + s->node->host_used;
  if (hi <= h0 || lo >= h1) return 0; /* a window view: not node host memory */
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    span *nv = realloc(s->v, sizeof *nv * cap);
    if (!nv) return 1;
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = (span){(lo > h0 ? lo : h0) - h0, (hi < h1 ? hi : h1) - h0};
  return 0;
}

static int span_cmp(const void *a, const void *b) {
  size_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
  return x < y ? -1 : x > y;
}

/* The first byte (offset in host memory) that changed outside t's written
 * views, -1 if none, -2 when out of memory for the views' runs. */
static int64_t first_stray(const pto_node *n, const node_task *t) {
  spans s = {.node = n};
  for (int a = 0; a < t->args.ntensors; a++) {
    const pto_tensor *v = &t->args.tensors[a];
    if (!writes(t->args.access[a])) continue;
    s.buf = (uintptr_t)v->buf;
    s.es = pto_dtype_size((pto_dtype)v->dtype);
    if (tensor_lockstep(v, v, spans_push, &s)) {
      free(s.v);
      return -2;
    }
  }
  if (s.n > 1) qsort(s.v, s.n, sizeof *s.v, span_cmp);
  const unsigned char *now = n->host, *old = n->check_snap;
  int64_t bad = -1;
  size_t i = 0, k = 0;
  while (i < n->host_used && bad < 0) {
    while (k < s.n && s.v[k].hi <= i)
      k++;
    if (k < s.n && s.v[k].lo <= i) { /* written: skip to the run's end */
      i = s.v[k].hi;
      continue;
    }
    size_t end = k < s.n ? s.v[k].lo : n->host_used;
    if (memcmp(now + i, old + i, end - i))
      for (; i < end; i++)
        if (now[i] != old[i]) {
          bad = (int64_t)i;
          break;
        }
    i = end;
  }
  free(s.v);
  return bad;
}

static const char *access_name(int a) {
  static const char *const n[] = {"INPUT", "OUTPUT", "OUTPUT_EXISTING",
                                  "INOUT", "NO_DEP", "COMMUTE"};
  return a >= 0 && a <= PTO_COMMUTE ? n[a] : "?";
}

void node_check_after(pto_node *n, node_task *t) {
  if (!node_check_on(n) || t->status || !n->host_used) return;
  int64_t stray = first_stray(n, t);
  if (stray == -1) return;
  if (stray == -2) {
    t->status = PTO_ENOMEM;
    t->err.code = PTO_ENOMEM;
    snprintf(t->err.details, sizeof t->err.details,
             "node task %" PRId64 ": checking mode: out of memory", t->id);
    return;
  }
  size_t at = (size_t)stray;
  const unsigned char *x = n->host + at;
  unsigned old = n->check_snap[at], now = *x;
  char who[64];
  if (t->kind == TASK_HOST)
    snprintf(who, sizeof who, "host task on worker %d", n->check_slot - n->cfg.nchips);
  else if (t->nchildren == 1)
    snprintf(who, sizeof who, "chip task on chip %d", n->check_slot);
  else
    snprintf(who, sizeof who, "group task on %d chips", t->nchildren);
  int arg = -1; /* the argument whose buffer holds x, one whose view touches it first */
  for (int a = 0; a < t->args.ntensors; a++) {
    const pto_tensor *v = &t->args.tensors[a];
    if (x < (const unsigned char *)v->buf || x >= (const unsigned char *)v->buf + v->buf_bytes)
      continue;
    if (arg < 0 || view_has(v, x)) arg = a;
    if (view_has(v, x)) break;
  }
  t->status = PTO_ECONTRACT;
  memset(&t->err, 0, sizeof t->err);
  t->err.code = PTO_ECONTRACT;
  t->err.task_id = t->id;
  t->err.arg = arg;
  if (arg >= 0) {
    const pto_tensor *v = &t->args.tensors[arg];
    bool input = t->args.access[arg] == PTO_INPUT && view_has(v, x);
    snprintf(t->err.details, sizeof t->err.details,
             "node task %" PRId64 " (%s) wrote outside its declared writes: argument %d (%s, "
             "node host buffer %p of %zu bytes) byte %zu changed 0x%02x -> 0x%02x, %s "
             "[checking mode: node tasks run one at a time]",
             t->id, who, arg, access_name(t->args.access[arg]), v->buf, v->buf_bytes,
             (size_t)(x - (const unsigned char *)v->buf), old, now,
             input ? "inside its INPUT view" : "outside its OUTPUT_EXISTING/INOUT views");
  } else {
    snprintf(t->err.details, sizeof t->err.details,
             "node task %" PRId64 " (%s) wrote node host memory it was not passed: byte %zu of "
             "node host memory (%p) changed 0x%02x -> 0x%02x [checking mode: node tasks run one "
             "at a time]",
             t->id, who, at, (const void *)x, old, now);
  }
}

void node_check_free(pto_node *n) {
  free(n->check_snap);
  n->check_snap = NULL;
  n->check_cap = 0;
}
