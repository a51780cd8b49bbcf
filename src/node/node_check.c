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
 * declared (a chip's view of host memory it was not passed). Under mpirun
 * a host task's window arguments' buffers (mapped here) are copied and
 * compared with node host memory.
 *
 * A host task's reads are checked where it runs, in its sub-worker
 * (node_check_host_run): it runs a second time with every byte of node
 * host memory handed out so far (and of its arguments' buffers) outside
 * its views flipped, in place: one task runs at a time, so no other reads
 * that memory meanwhile. The two runs' writes are compared as a chip
 * compares a block's (common/read_probe.h), and the memory is left as the
 * first run left it, for the write check above. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/read_probe.h"
#include "common/region.h"
#include "common/tensor_check.h"
#include "common/tensor_walk.h"
#include "node/node_internal.h"

bool node_check_on(const pto_node *n) { return n->cfg.chip.check == 1; }

static bool writes(int access) { return access != PTO_INPUT; }

/* Whether view v touches byte x. */
static bool view_has(const pto_tensor *v, const unsigned char *x) {
  pto_tensor b;
  int64_t one = 1;
  return pto_tensor_init(&b, (void *)x, 1, PTO_U8, 1, &one) == 0 && region_covers(v, &b);
}

/* Byte runs of addresses, sorted and merged. */
typedef node_span span;

typedef struct spans {
  span *v;
  size_t n, cap;
  uintptr_t buf; /* of the view being added */
  size_t es;
} spans;

static int spans_push(void *arg, int64_t off, int64_t b_off, int64_t k) {
  (void)b_off;
  spans *s = arg;
  uintptr_t lo = s->buf + (uintptr_t)off * s->es, hi = lo + (uintptr_t)k * s->es;
  if (s->n && s->v[s->n - 1].hi == lo) { /* the common case: row after row */
    s->v[s->n - 1].hi = hi;
    return 0;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    span *nv = realloc(s->v, sizeof *nv * cap);
    if (!nv) return 1;
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = (span){lo, hi};
  return 0;
}

static int span_cmp(const void *a, const void *b) {
  uintptr_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
  return x < y ? -1 : x > y;
}

static void spans_merge(spans *s) {
  if (s->n < 2) return;
  qsort(s->v, s->n, sizeof *s->v, span_cmp);
  size_t w = 0;
  for (size_t i = 1; i < s->n; i++) {
    if (s->v[i].lo <= s->v[w].hi) {
      if (s->v[i].hi > s->v[w].hi) s->v[w].hi = s->v[i].hi;
    } else {
      s->v[++w] = s->v[i];
    }
  }
  s->n = w + 1;
}

/* The byte runs of a's views whose access pick() takes, sorted and merged
 * into s (s->v freed by the caller); false when out of memory. */
static bool arg_spans(const pto_args *a, bool (*pick)(int), spans *s) {
  for (int i = 0; i < a->ntensors; i++) {
    const pto_tensor *v = &a->tensors[i];
    if (!pick(a->access[i])) continue;
    s->buf = (uintptr_t)v->buf;
    s->es = pto_dtype_size((pto_dtype)v->dtype);
    if (tensor_lockstep(v, v, spans_push, s)) return false;
  }
  spans_merge(s);
  return true;
}

/* The window buffers a task's write check covers besides node host
 * memory: under mpirun a host task runs on a thread of this process, which
 * maps the windows it may be passed (node_task.c refuses another rank's
 * MPI RMA window), so the base buffers of its arguments that lie outside
 * node host memory are copied and compared as node host memory is. Sorted and
 * merged into reg (PTO_MAX_TENSOR_ARGS); returns their bytes in all. A
 * forked host worker (one host) maps no window, and a chip task's window
 * writes are its chip's to check. */
static size_t window_regions(const pto_node *n, const node_task *t, span *reg, int *nreg) {
  spans s = {reg, 0, PTO_MAX_TENSOR_ARGS, 0, 0};
  const uintptr_t h0 = (uintptr_t)n->host, h1 = h0 + node_host_used(n);
  for (int i = 0; n->mpi && t->kind == TASK_HOST && i < t->args.ntensors; i++) {
    const pto_tensor *v = &t->args.tensors[i];
    const uintptr_t lo = (uintptr_t)v->buf;
    if (v->buf && v->buf_bytes && (lo < h0 || lo >= h1)) reg[s.n++] = (span){lo, lo + v->buf_bytes};
  }
  spans_merge(&s);
  *nreg = (int)s.n;
  size_t bytes = 0;
  for (size_t k = 0; k < s.n; k++)
    bytes += reg[k].hi - reg[k].lo;
  return bytes;
}

bool node_check_before(pto_node *n, node_task *t, int slot) {
  n->check_slot = slot;
  if (!node_check_on(n)) return true;
  /* the layout of the copy, which node_check_after compares as it is */
  n->check_host = node_host_used(n);
  const size_t need = n->check_host + window_regions(n, t, n->check_reg, &n->check_nreg);
  if (!need) return true;
  if (n->check_cap < need) {
    unsigned char *p = realloc(n->check_snap, need);
    if (!p) {
      t->status = PTO_ENOMEM;
      t->err.code = PTO_ENOMEM;
      snprintf(t->err.details, sizeof t->err.details,
               "node task %" PRId64 ": checking mode: no memory for a copy of %zu bytes of node "
               "host memory and window buffers",
               t->id, need);
      return false;
    }
    n->check_snap = p;
    n->check_cap = need;
  }
  /* node host memory, then each window region */
  if (n->check_host) memcpy(n->check_snap, n->host, n->check_host);
  size_t at = n->check_host;
  for (int k = 0; k < n->check_nreg; k++) {
    const span *r = &n->check_reg[k];
    memcpy(n->check_snap + at, (const void *)r->lo, r->hi - r->lo);
    at += r->hi - r->lo;
  }
  return true;
}

/* The first byte of [base, base + len) that differs from its copy old
 * outside the written runs w, as an offset; -1 if none. */
static int64_t first_change(const unsigned char *base, const unsigned char *old, size_t len,
                            const spans *w) {
  const uintptr_t h0 = (uintptr_t)base;
  size_t i = 0, k = 0;
  while (i < len) {
    while (k < w->n && w->v[k].hi <= h0 + i)
      k++;
    if (k < w->n && w->v[k].lo <= h0 + i) { /* written: skip to the run's end */
      i = w->v[k].hi - h0 < len ? w->v[k].hi - h0 : len;
      continue;
    }
    size_t end = k < w->n && w->v[k].lo - h0 < len ? w->v[k].lo - h0 : len;
    if (memcmp(base + i, old + i, end - i))
      for (; i < end; i++)
        if (base[i] != old[i]) return (int64_t)i;
    i = end;
  }
  return -1;
}

/* The first byte that changed outside t's written views, in node host
 * memory and then in t's window regions, as node_check_before copied them
 * (node host memory handed out since is no one's write); NULL if none,
 * with *old its value before. False when out of memory. */
static bool first_stray(const pto_node *n, const node_task *t, const unsigned char **x,
                        unsigned *old) {
  *x = NULL;
  if (!n->check_host && !n->check_nreg) return true;
  spans w = {0};
  if (!arg_spans(&t->args, writes, &w)) {
    free(w.v);
    return false;
  }
  int64_t at = n->check_host ? first_change(n->host, n->check_snap, n->check_host, &w) : -1;
  if (at >= 0) {
    *x = n->host + at;
    *old = n->check_snap[at];
  }
  size_t off = n->check_host; /* of the window regions' copies, after node host memory's */
  for (int k = 0; !*x && k < n->check_nreg; k++) {
    const span *r = &n->check_reg[k];
    const size_t len = r->hi - r->lo;
    at = first_change((const unsigned char *)r->lo, n->check_snap + off, len, &w);
    if (at >= 0) {
      *x = (const unsigned char *)r->lo + at;
      *old = n->check_snap[off + (size_t)at];
    }
    off += len;
  }
  free(w.v);
  return true;
}

void node_check_after(pto_node *n, node_task *t) {
  if (!node_check_on(n) || t->status) return;
  const unsigned char *x;
  unsigned old = 0;
  if (!first_stray(n, t, &x, &old)) {
    t->status = PTO_ENOMEM;
    t->err.code = PTO_ENOMEM;
    snprintf(t->err.details, sizeof t->err.details,
             "node task %" PRId64 ": checking mode: out of memory", t->id);
    return;
  }
  if (!x) return;
  unsigned now = *x;
  const bool in_host = x >= n->host && x < n->host + n->check_host;
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
             "%s buffer %p of %zu bytes) byte %zu changed 0x%02x -> 0x%02x, %s "
             "[checking mode: node tasks run one at a time]",
             t->id, who, arg, tensor_access_name(t->args.access[arg]),
             in_host ? "node host" : "window", v->buf, v->buf_bytes,
             (size_t)(x - (const unsigned char *)v->buf), old, now,
             input ? "inside its INPUT view" : "outside its OUTPUT_EXISTING/INOUT views");
  } else {
    snprintf(t->err.details, sizeof t->err.details,
             "node task %" PRId64 " (%s) wrote node host memory it was not passed: byte %zu of "
             "node host memory (%p) changed 0x%02x -> 0x%02x [checking mode: node tasks run one "
             "at a time]",
             t->id, who, (size_t)(x - n->host), (const void *)x, old, now);
  }
}

/* ---- host tasks' reads (in the sub-worker that runs the task) ---- */

static bool any_access(int access) {
  (void)access;
  return true; /* node tasks have no fresh OUTPUT: every view may be read */
}

#define SKIP_REFUSED                                                                               \
  "pto_node_skip_read_check: called during the node's run from a thread other than the one "       \
  "running its orchestration; it did nothing (call it before the run, or from the "                \
  "orchestration)"

/* The list is read by the run's dispatch (node_check_frame), on the
 * orchestration's thread: it takes calls from that thread during the run,
 * from any thread between runs. From another thread during the run it is
 * refused as a pto_node_orch call is (node_orch_foreign): it fails the
 * run, naming the rule; while the run is not orchestrating (making its
 * TensorMap, or at its very end) it is refused without failing it, as
 * pto_node_destroy is. Before, any thread changed the list (a realloc)
 * while the dispatch might read it. Between runs it claims the node as a
 * run does, for the few instructions it takes. */
int pto_node_skip_read_check(pto_node *n, pto_host_fn fn) {
  if (!n || !fn) return PTO_EINVAL;
  pto_node_orch *live = atomic_load_explicit(&n->orch_live, memory_order_acquire);
  bool claimed = false;
  if (live && pthread_equal(pthread_self(), n->orch_owner)) {
    /* the orchestration's thread: the dispatch's own */
  } else if (live && node_foreign_leave(n, live, "skip_read_check")) {
    last_error_set(PTO_EINVAL, "%s", SKIP_REFUSED); /* the owner fails the run */
    return PTO_EINVAL;
  } else {
    if (!node_claim(n)) {
      last_error_set(PTO_EINVAL, "%s", SKIP_REFUSED);
      return PTO_EINVAL;
    }
    claimed = true;
  }
  int rc = 0;
  bool listed = false;
  for (int i = 0; i < n->nskip_read; i++)
    listed = listed || n->skip_read[i] == fn;
  if (!listed) {
    pto_host_fn *v = realloc(n->skip_read, sizeof *v * (size_t)(n->nskip_read + 1));
    if (v) {
      v[n->nskip_read++] = fn;
      n->skip_read = v;
    } else {
      rc = PTO_ENOMEM;
    }
  }
  if (claimed) atomic_store_explicit(&n->running, false, memory_order_release);
  return rc;
}

void node_check_frame(const pto_node *n, const node_task *t, node_frame *f) {
  f->read_check = 0;
  f->host_used = node_host_used(n);
  if (!node_check_on(n) || t->kind != TASK_HOST) return;
  for (int i = 0; i < n->nskip_read; i++)
    if (n->skip_read[i] == t->host_fn) return;
  f->read_check = 1;
}

/* "'name'" when the dynamic symbol table has fn, else its address. */
static void fn_name(pto_host_fn fn, char *s, size_t n) {
  Dl_info di;
  void *p;
  memcpy(&p, &fn, sizeof p);
  if (dladdr(p, &di) && di.dli_sname && di.dli_saddr == p)
    snprintf(s, n, "'%s'", di.dli_sname);
  else
    snprintf(s, n, "at %p", p);
}

/* The memory a host task may reach: node host memory handed out so far,
 * and under mpirun its arguments' base buffers (window buffers of chip 0,
 * which its threads map: check_here in node_task.c), sorted and merged. A
 * forked sub-worker maps no window: it cannot touch one. */
static int known_memory(const pto_node *n, const node_frame *f, span *reg) {
  spans s = {reg, 0, 1 + PTO_MAX_TENSOR_ARGS, 0, 0};
  if (f->host_used) reg[s.n++] = (span){(uintptr_t)n->host, (uintptr_t)n->host + f->host_used};
  for (int i = 0; n->mpi && i < f->args.ntensors; i++) {
    const pto_tensor *v = &f->args.tensors[i];
    if (v->buf && v->buf_bytes)
      reg[s.n++] = (span){(uintptr_t)v->buf, (uintptr_t)v->buf + v->buf_bytes};
  }
  spans_merge(&s);
  return (int)s.n;
}

/* The first byte of [lo, hi) where the real run (out) and the run on the
 * flipped memory (now at lo) disagree while either changed it, or 0;
 * pre: the bytes before both runs. */
static uintptr_t first_disagreement(uintptr_t lo, uintptr_t hi, const uint8_t *pre,
                                    const uint8_t *out, const spans *rd) {
  size_t k = 0;
  for (uintptr_t x = lo; x < hi;) {
    while (k < rd->n && rd->v[k].hi <= x)
      k++;
    bool in = k < rd->n && rd->v[k].lo <= x;
    uintptr_t end = in ? rd->v[k].hi : k < rd->n ? rd->v[k].lo : hi;
    if (end > hi) end = hi;
    int64_t at =
        probe_first_disagreement(out + (x - lo), pre + (x - lo), (const uint8_t *)x, end - x, !in);
    if (at >= 0) return x + (uint64_t)at;
    x = end;
  }
  return 0;
}

/* The argument whose written view holds byte x, else one whose buffer
 * holds it, else -1. */
static int arg_at(const pto_args *a, uintptr_t x) {
  int arg = -1;
  for (int i = 0; i < a->ntensors; i++) {
    const pto_tensor *v = &a->tensors[i];
    if (x < (uintptr_t)v->buf || x >= (uintptr_t)v->buf + v->buf_bytes) continue;
    if (writes(a->access[i]) && view_has(v, (const unsigned char *)x)) return i;
    if (arg < 0) arg = i;
  }
  return arg;
}

/* The sub-worker's copies (before both runs, after the real one), kept
 * from task to task: fresh pages for every task cost more than the copies
 * (a thread's: under mpirun host workers are threads of one process). */
static _Thread_local uint8_t *copies;
static _Thread_local size_t copies_cap;

void node_check_host_end(void) {
  free(copies);
  copies = NULL;
  copies_cap = 0;
}

/* Before the real run: the regions' bytes into pre. */
static void regions_save(const span *reg, int nreg, uint8_t *pre) {
  for (int j = 0; j < nreg; j++) {
    memcpy(pre, (void *)reg[j].lo, reg[j].hi - reg[j].lo);
    pre += reg[j].hi - reg[j].lo;
  }
}

/* After the real run: its bytes into out, and the regions back as they
 * were before it (pre), every byte outside the views rd flipped. */
static void regions_flip(const span *reg, int nreg, const uint8_t *pre, uint8_t *out,
                         const spans *rd) {
  for (int j = 0; j < nreg; j++) {
    uint8_t *m = (uint8_t *)reg[j].lo;
    size_t len = reg[j].hi - reg[j].lo;
    memcpy(out, m, len);
    probe_flip_copy(m, pre, len);
    for (size_t k = 0; k < rd->n; k++) {
      uintptr_t a = rd->v[k].lo > reg[j].lo ? rd->v[k].lo : reg[j].lo;
      uintptr_t z = rd->v[k].hi < reg[j].hi ? rd->v[k].hi : reg[j].hi;
      if (a < z) memcpy((void *)a, pre + (a - reg[j].lo), z - a);
    }
    pre += len;
    out += len;
  }
}

/* After the second run (when `compare`): the first byte where the two runs
 * disagree (0: none), *real and *flipped its two values; then the regions
 * as the real run left them (out). */
static uintptr_t regions_restore(const span *reg, int nreg, const uint8_t *pre, const uint8_t *out,
                                 const spans *rd, bool compare, unsigned *real, unsigned *flipped) {
  uintptr_t bad = 0;
  for (int j = 0; j < nreg; j++) {
    size_t len = reg[j].hi - reg[j].lo;
    if (compare && !bad && (bad = first_disagreement(reg[j].lo, reg[j].hi, pre, out, rd))) {
      *real = out[bad - reg[j].lo];
      *flipped = *(const uint8_t *)bad;
    }
    memcpy((void *)reg[j].lo, out, len);
    pre += len;
    out += len;
  }
  return bad;
}

/* err's details for a read breach: the second run returned rc2, or byte
 * `bad` came out `real` in the real run and `flipped` in the second. */
static void read_breach(const pto_node *n, const node_frame *f, int rc2, uintptr_t bad,
                        unsigned real, unsigned flipped, pto_error_info *err) {
  char fn[96];
  fn_name(f->host_fn, fn, sizeof fn);
  const char *how = "(declare what it reads as INPUT or INOUT; a host function that is not "
                    "deterministic opts out with pto_node_skip_read_check)";
  int arg = rc2 ? -1 : arg_at(&f->args, bad);
  err->task_id = f->task_id;
  err->arg = arg;
  if (rc2)
    snprintf(err->details, sizeof err->details,
             "host function %s reads memory it did not declare: it returned %d "
             "only when every byte of node host memory outside its views was flipped %s",
             fn, rc2, how);
  else if (arg >= 0)
    snprintf(err->details, sizeof err->details,
             "host function %s reads memory it did not declare: argument %d's byte "
             "%zu came out 0x%02x, but 0x%02x when every byte of node host memory outside its "
             "views was flipped %s",
             fn, arg, (size_t)(bad - (uintptr_t)f->args.tensors[arg].buf), real, flipped, how);
  else
    snprintf(err->details, sizeof err->details,
             "host function %s reads memory it did not declare: byte %zu of node "
             "host memory came out 0x%02x, but 0x%02x when every byte outside its views was "
             "flipped %s",
             fn, (size_t)(bad - (uintptr_t)n->host), real, flipped, how);
}

int node_check_host_run(pto_node *n, const node_frame *f, pto_error_info *err) {
  span reg[1 + PTO_MAX_TENSOR_ARGS];
  int nreg = known_memory(n, f, reg);
  size_t total = 0;
  for (int j = 0; j < nreg; j++)
    total += reg[j].hi - reg[j].lo;
  spans rd = {0};
  if (!copies || copies_cap < 2 * total) {
    free(copies);
    copies_cap = 0;
    copies = malloc(2 * total + 1); /* never 0 bytes: NULL means no memory */
    if (copies) copies_cap = 2 * total;
  }
  if (!copies || !arg_spans(&f->args, any_access, &rd)) {
    free(rd.v);
    snprintf(err->details, sizeof err->details,
             "checking mode: no memory for two copies of the %zu bytes the host task may reach",
             total);
    return PTO_ENOMEM;
  }
  uint8_t *pre = copies, *out = copies + total;
  regions_save(reg, nreg, pre);
  int rc = f->host_fn(&f->args, f->host_arg); /* the real run */
  if (rc) {
    free(rd.v);
    return rc;
  }
  regions_flip(reg, nreg, pre, out, &rd);
  int rc2 = f->host_fn(&f->args, f->host_arg);
  unsigned real = 0, flipped = 0;
  uintptr_t bad = regions_restore(reg, nreg, pre, out, &rd, rc2 == 0, &real, &flipped);
  free(rd.v);
  if (!rc2 && !bad) return 0;
  read_breach(n, f, rc2, bad, real, flipped, err);
  return PTO_ECONTRACT;
}

void node_check_free(pto_node *n) {
  free(n->skip_read);
  n->skip_read = NULL;
  n->nskip_read = 0;
  free(n->check_snap);
  n->check_snap = NULL;
  n->check_cap = 0;
}
