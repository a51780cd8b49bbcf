/* contract.c — checking mode: each block is checked against the regions
 * its task declared (contract.h; docs/contracts.md).
 *
 * Known buffers: the base buffer ([buf, buf + buf_bytes)) of every tensor
 * argument of every task submitted and not yet completed, runtime OUTPUT
 * allocations included; overlapping ones are merged into one range. Only
 * those are sure to be valid memory: once its last task has completed, the
 * program may free a buffer. Each range keeps a snapshot of its bytes.
 * After a unit (a block, or a gang) ran, each CHUNK of it is compared with
 * the snapshot (memcmp: exact, where a hash let paired bit flips cancel);
 * a changed byte outside the task's OUTPUT / INOUT views is a breach.
 *
 * Then the unit runs again on scratch copies of its arguments' buffers, in
 * which every byte outside its INPUT / INOUT / OUTPUT_EXISTING views (reads()
 * says why those) is flipped: where either
 * run changed a byte, both must have left the same value, or the kernel's
 * writes depend on memory it did not declare. Meanwhile the chunks the
 * first run changed hold their bytes from before it: a byte the second
 * run writes there was reached other than through its tensors (held_bytes).
 *
 * Everything here runs on the orchestrator's thread (the parts of a MIX
 * block or a gang on threads of their own, joined before the check). */
#include "chip/contract.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chip/kernel_why.h"
#include "common/clock.h"
#include "common/read_probe.h"
#include "common/tensor_check.h"
#include "common/tensor_walk.h"
#include "common/thread_start.h"

#define CHUNK 4096 /* bytes compared, and taken into the snapshot, at once */

typedef struct kbuf {
  uint8_t *lo;
  size_t len;
  uint8_t *snap;    /* its bytes as of the last check */
  int64_t refs;     /* arguments of live tasks in it */
  pto_task_id task; /* the first argument that named it */
  int arg;
} kbuf;

typedef struct brun {
  uintptr_t lo, hi;
} brun;

typedef struct runs {
  brun *v;
  size_t n, cap;
  bool oom;
} runs;

typedef struct changed {
  uint32_t buf, chunk;
} changed;

typedef struct scratch {
  uint8_t *lo; /* the real range */
  size_t len;
  uint8_t *mem; /* its copy, as given to the kernel's second run */
} scratch;

struct contract {
  uint64_t seed, rng;
  uint8_t (*access)[PTO_MAX_TENSOR_ARGS]; /* per task slot */
  kbuf *bufs;                             /* sorted by lo, disjoint */
  uint32_t nbufs, bufs_cap;
  task **ready;
  uint32_t nready, ready_cap;
  runs wr, rd;            /* the running task's write and read sets */
  runs sh;                /* of wr: the node task's shared writes (chip_set_node_task) */
  _Atomic bool unit_comm; /* the unit called a window operation (contract_note_comm) */
  changed *chg;
  size_t nchg, chg_cap;
  scratch scr[PTO_MAX_TENSOR_ARGS];
  int nscr;
  uint8_t *pool; /* the scratch copies' storage */
  size_t pool_cap;
  uint8_t *held; /* the changed chunks as the real run left them, during the second */
  size_t held_cap;
  int (*cl_cores)[3]; /* per cluster: its AIC, AIV 0, AIV 1 (-1: none) */
  bool *busy;         /* per core: given to a part of the unit */
};

/* ---- configuration ---- */

/* A decimal integer, digits only, as every PTO_* number (options.c):
 * strtoull alone skips leading spaces and takes a sign, so ' -5' read
 * as 2^64 - 5. */
static bool seed_parse(const char *s, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

/* PTO_CHECK's value: 1 contracts, 0 off (or unset, empty), -1 not understood. */
static int mode_parse(const char *m) {
  if (!m || !*m || !strcmp(m, "off") || !strcmp(m, "0")) return 0;
  return !strcmp(m, "contracts") || !strcmp(m, "1") ? 1 : -1;
}

void contract_config_env(pto_chip_config *cfg) {
  const char *m = getenv("PTO_CHECK");
  if (m && *m) cfg->check = mode_parse(m);
  const char *s = getenv("PTO_CHECK_SEED");
  if (s && !seed_parse(s, &cfg->check_seed)) cfg->check = -1;
}

const char *contract_config_problem(const pto_chip_config *cfg) {
  static _Thread_local char why[200];
  if (cfg->check == 0 || cfg->check == 1) return NULL;
  const char *m = getenv("PTO_CHECK"), *s = getenv("PTO_CHECK_SEED");
  uint64_t seed;
  if (s && !seed_parse(s, &seed))
    snprintf(why, sizeof why,
             "PTO_CHECK_SEED = '%.40s', must be a decimal integer (0: a seed from the clock)", s);
  else if (mode_parse(m) < 0)
    snprintf(why, sizeof why, "PTO_CHECK = '%.40s', must be 'contracts' or 'off'", m);
  else
    snprintf(why, sizeof why, "check = %d, must be 0 (off) or 1 (contracts)", cfg->check);
  return why;
}

/* ---- small helpers ---- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static size_t nchunks(size_t len) { return (len + CHUNK - 1) / CHUNK; }

static void kbuf_free(kbuf *b) { free(b->snap); }

/* The index of the known range holding address p, or -1. */
static int64_t kbuf_find(const struct contract *c, uintptr_t p) {
  uint32_t lo = 0, hi = c->nbufs;
  while (lo < hi) {
    uint32_t m = (lo + hi) / 2;
    if ((uintptr_t)c->bufs[m].lo + c->bufs[m].len <= p)
      lo = m + 1;
    else
      hi = m;
  }
  return lo < c->nbufs && (uintptr_t)c->bufs[lo].lo <= p ? (int64_t)lo : -1;
}

/* Adds one reference to [lo, lo + len), merging the ranges it overlaps. */
static bool kbuf_ref(struct contract *c, uint8_t *lo, size_t len, pto_task_id task, int arg) {
  uintptr_t a = (uintptr_t)lo, z = a + len;
  uint32_t first = 0;
  while (first < c->nbufs && (uintptr_t)c->bufs[first].lo + c->bufs[first].len <= a)
    first++;
  uint32_t last = first; /* one past the overlapping ones */
  while (last < c->nbufs && (uintptr_t)c->bufs[last].lo < z)
    last++;
  if (last == first + 1 && (uintptr_t)c->bufs[first].lo <= a &&
      (uintptr_t)c->bufs[first].lo + c->bufs[first].len >= z) {
    c->bufs[first].refs++;
    return true;
  }
  kbuf nb = {.refs = 1, .task = task, .arg = arg};
  for (uint32_t i = first; i < last; i++) {
    kbuf *b = &c->bufs[i];
    if ((uintptr_t)b->lo < a) a = (uintptr_t)b->lo;
    if ((uintptr_t)b->lo + b->len > z) z = (uintptr_t)b->lo + b->len;
    nb.refs += b->refs;
    if (b->task < nb.task) nb.task = b->task, nb.arg = b->arg;
  }
  nb.lo = (uint8_t *)a;
  nb.len = z - a;
  nb.snap = malloc(nb.len);
  if (!nb.snap) return false;
  /* the program's bytes as they are now (those of merged ranges cannot have
   * moved since their last check: no block ran in between, and what the
   * orchestrator wrote is taken at the next drain anyway) */
  memcpy(nb.snap, nb.lo, nb.len);
  if (last == first && c->nbufs == c->bufs_cap) {
    uint32_t cap = c->bufs_cap ? c->bufs_cap * 2 : 64;
    kbuf *nv = realloc(c->bufs, sizeof *nv * cap);
    if (!nv) {
      kbuf_free(&nb);
      return false;
    }
    c->bufs = nv;
    c->bufs_cap = cap;
  }
  for (uint32_t i = first; i < last; i++)
    kbuf_free(&c->bufs[i]);
  uint32_t gone = last - first; /* replaced by one (or none: insert) */
  if (gone == 0) {
    memmove(&c->bufs[first + 1], &c->bufs[first], sizeof *c->bufs * (c->nbufs - first));
    c->nbufs++;
  } else {
    memmove(&c->bufs[first + 1], &c->bufs[last], sizeof *c->bufs * (c->nbufs - last));
    c->nbufs -= gone - 1;
  }
  c->bufs[first] = nb;
  return true;
}

static void kbuf_unref(struct contract *c, const void *lo) {
  int64_t i = kbuf_find(c, (uintptr_t)lo);
  if (i < 0 || --c->bufs[i].refs > 0) return;
  kbuf_free(&c->bufs[i]);
  memmove(&c->bufs[i], &c->bufs[i + 1], sizeof *c->bufs * (c->nbufs - (uint32_t)i - 1));
  c->nbufs--;
}

/* ---- byte runs of views ---- */

typedef struct run_add {
  runs *rs;
  uintptr_t base;
  size_t esz;
} run_add;

static int runs_push(void *p, int64_t off, int64_t b_off, int64_t n) {
  (void)b_off;
  run_add *ra = p;
  runs *rs = ra->rs;
  uintptr_t lo = ra->base + (uintptr_t)off * ra->esz, hi = lo + (uintptr_t)n * ra->esz;
  if (rs->n && rs->v[rs->n - 1].hi == lo) { /* the common case: row after row */
    rs->v[rs->n - 1].hi = hi;
    return 0;
  }
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 64;
    brun *nv = realloc(rs->v, sizeof *nv * cap);
    if (!nv) {
      rs->oom = true;
      return 1;
    }
    rs->v = nv;
    rs->cap = cap;
  }
  rs->v[rs->n++] = (brun){lo, hi};
  return 0;
}

static void runs_add_view(runs *rs, const pto_tensor *t) {
  run_add ra = {rs, (uintptr_t)t->buf, pto_dtype_size((pto_dtype)t->dtype)};
  tensor_lockstep(t, t, runs_push, &ra);
}

static int brun_cmp(const void *a, const void *b) {
  uintptr_t x = ((const brun *)a)->lo, y = ((const brun *)b)->lo;
  return x < y ? -1 : x > y;
}

/* Sorted, overlapping runs merged, and adjacent ones too when `touching`
 * (scratch spans must not join two known ranges: their snapshots are apart). */
static void runs_finish(runs *rs, bool touching) {
  if (rs->n < 2) return;
  qsort(rs->v, rs->n, sizeof *rs->v, brun_cmp);
  size_t w = 0;
  for (size_t i = 1; i < rs->n; i++) {
    if (rs->v[i].lo < rs->v[w].hi || (touching && rs->v[i].lo == rs->v[w].hi)) {
      if (rs->v[i].hi > rs->v[w].hi) rs->v[w].hi = rs->v[i].hi;
    } else {
      rs->v[++w] = rs->v[i];
    }
  }
  rs->n = w + 1;
}

/* The first run that ends after x. */
static size_t runs_from(const runs *rs, uintptr_t x) {
  size_t lo = 0, hi = rs->n;
  while (lo < hi) {
    size_t m = (lo + hi) / 2;
    if (rs->v[m].hi <= x)
      lo = m + 1;
    else
      hi = m;
  }
  return lo;
}

static bool runs_has(const runs *rs, uintptr_t x) {
  size_t k = runs_from(rs, x);
  return k < rs->n && rs->v[k].lo <= x;
}

/* Whether view t touches byte x. */
static bool view_has(const pto_tensor *t, uintptr_t x) {
  runs rs = {0};
  runs_add_view(&rs, t);
  runs_finish(&rs, true);
  bool in = runs_has(&rs, x);
  free(rs.v);
  return in;
}

static bool writes(int access) { return access != PTO_INPUT; }
/* OUTPUT_EXISTING is ordered as INOUT is (after every earlier reader and
 * writer of its bytes), so what a kernel reads there is no race: only a
 * fresh OUTPUT's bytes (left over from the heap) are not to be read. */
static bool reads(int access) { return access != PTO_OUTPUT; }

/* ---- run state ---- */

int contract_begin(pto_run *r) {
  struct contract *c = calloc(1, sizeof *c);
  if (c) {
    c->access = calloc((size_t)r->slot_mask + 1, sizeof *c->access);
    c->cl_cores = malloc(sizeof *c->cl_cores * (size_t)r->cfg->clusters);
    c->busy = calloc((size_t)r->ncores, sizeof *c->busy);
  }
  if (!c || !c->access || !c->cl_cores || !c->busy) {
    if (c) {
      free(c->access);
      free(c->cl_cores);
      free(c->busy);
    }
    free(c);
    run_fail(r, PTO_ENOMEM, PTO_TASK_NONE, -1, "checking mode: out of memory for its state");
    return PTO_ENOMEM;
  }
  for (int k = 0; k < r->cfg->clusters; k++)
    c->cl_cores[k][0] = c->cl_cores[k][1] = c->cl_cores[k][2] = -1;
  for (int i = 0; i < r->ncores; i++) {
    const core *co = &r->cores[i];
    int *cl = c->cl_cores[co->cluster];
    if (co->type == PTO_CORE_AIC)
      cl[0] = i;
    else
      cl[cl[1] < 0 ? 1 : 2] = i;
  }
  c->seed = r->cfg->check_seed;
  if (!c->seed) c->seed = (pto_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
  c->rng = c->seed;
  r->contract = c;
  r->contract_blocks = 0;
  return PTO_OK;
}

void contract_end(pto_run *r) {
  struct contract *c = r->contract;
  if (!c) return;
  if (r->err.code) {
    size_t len = strlen(r->err.details);
    snprintf(r->err.details + len, sizeof r->err.details - len,
             " [checking mode, seed %llu: PTO_CHECK_SEED=%llu repeats this order]",
             (unsigned long long)c->seed, (unsigned long long)c->seed);
  }
  for (uint32_t i = 0; i < c->nbufs; i++)
    kbuf_free(&c->bufs[i]);
  free(c->bufs);
  free(c->ready);
  free(c->wr.v);
  free(c->rd.v);
  free(c->sh.v);
  free(c->chg);
  free(c->pool);
  free(c->held);
  free(c->access);
  free(c->cl_cores);
  free(c->busy);
  free(c);
  r->contract = NULL;
}

void contract_submit(pto_run *r, task *t, const pto_args *a) {
  struct contract *c = r->contract;
  if (t->kernel < 0) return; /* a dummy runs nothing */
  uint8_t *acc = c->access[(uint64_t)t->id & r->slot_mask];
  for (int i = 0; i < t->ntensors; i++) {
    acc[i] = a->access[i];
    const pto_tensor *v = &t->tensors[i];
    if (v->buf && v->buf_bytes && !kbuf_ref(c, v->buf, v->buf_bytes, t->id, i)) {
      run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory for a buffer's snapshot");
      return;
    }
  }
}

void contract_ready(pto_run *r, task *t) {
  struct contract *c = r->contract;
  task_set_state(r, t, TASK_READY, memory_order_relaxed);
  if (c->nready == c->ready_cap) {
    uint32_t cap = c->ready_cap ? c->ready_cap * 2 : 256;
    task **nv = realloc(c->ready, sizeof *nv * cap);
    if (!nv) {
      run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory for the ready list");
      return;
    }
    c->ready = nv;
    c->ready_cap = cap;
  }
  c->ready[c->nready++] = t;
}

int pto_kernel_skip_read_check(pto_chip *chip, int kernel_id) {
  if (!chip || kernel_id < 0 || kernel_id >= chip->nkernels) return PTO_EINVAL;
  chip->kernels[kernel_id].skip_read_check = true;
  return PTO_OK;
}

int contract_async_refused(pto_run *r, const pto_kctx *ctx) {
  task *t = run_slot(r, ctx->task_id);
  run_fail(r, PTO_ECONTRACT, ctx->task_id, ctx->core_id,
           "kernel '%s' block %d asked for asynchronous completion (pto_kctx_async_begin), "
           "which checking mode cannot check: run this program without PTO_CHECK",
           run_kernel_name(r, t), ctx->block_idx);
  return PTO_ECONTRACT;
}

void contract_note_comm(const pto_kctx *ctx) {
  const pto_run *r = ctx ? ctx->run : NULL;
  /* relaxed: read after the unit's parts were joined */
  if (r && r->contract) atomic_store_explicit(&r->contract->unit_comm, true, memory_order_relaxed);
}

const char *contract_kernel_name(const pto_kctx *ctx) {
  pto_run *r = ctx ? (pto_run *)ctx->run : NULL;
  return r ? run_kernel_name(r, run_slot(r, ctx->task_id)) : "?";
}

void chip_set_node_task(pto_chip *chip, bool in_task, const pto_tensor *views, int n) {
  chip->in_node_task = in_task;
  chip->nshared_writes = !in_task || n < 0 ? 0 : n > PTO_MAX_TENSOR_ARGS ? PTO_MAX_TENSOR_ARGS : n;
  for (int i = 0; i < chip->nshared_writes; i++)
    chip->shared_writes[i] = views[i];
}

/* Fails the run with PTO_ECONTRACT for task t, naming argument `arg` (-1:
 * none) in the error's arg field. */
static void contract_fail(pto_run *r, const task *t, int arg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void contract_fail(pto_run *r, const task *t, int arg, const char *fmt, ...) {
  char msg[sizeof r->err.details];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  run_fail(r, PTO_ECONTRACT, t->id, -1, "%s", msg);
  pthread_mutex_lock(&r->err_lock);
  if (r->err.code == PTO_ECONTRACT && r->err.task_id == t->id) r->err.arg = arg;
  pthread_mutex_unlock(&r->err_lock);
}

/* ---- running a unit ---- */

typedef struct part {
  pto_kctx ctx;
  pto_kernel_fn fn;
  int rc;
  char why[320];
  pthread_t th;
  const char *name; /* the kernel's, for its trace slice */
  int index;        /* in its block: 0 the first core (trace_block's part) */
  bool traced;      /* the unit's real run, not the read check's second */
} part;

static void part_run(part *p) {
  /* the core the part stands for shows the task running, as a core thread
   * does around a block: a unit that never returns is named by the
   * watchdog as a task stuck on that core, not as a dependency deadlock */
  pto_run *r = (pto_run *)p->ctx.run;
  _Atomic int64_t *cur = &r->cores[p->ctx.core_id].cur_task;
  /* on the core's track, as that core's thread would record it: while a
   * unit runs, no other thread records there (the core threads run no
   * block in checking mode, and the unit's parts are on other cores) */
  const bool traced = p->traced && r->trace;
  const uint64_t t0 = traced ? pto_now_ns() : 0;
  atomic_store_explicit(cur, p->ctx.task_id, memory_order_relaxed); /* watchdog, advisory */
  p->rc = p->fn(&p->ctx);
  atomic_store_explicit(cur, PTO_TASK_NONE, memory_order_relaxed);
  if (traced) {
    const task *t = run_slot(r, p->ctx.task_id);
    trace_block(r->trace, r->cores[p->ctx.core_id].trace_track, p->name, p->ctx.task_id,
                p->ctx.block_idx, p->index, trace_block_mark(t), t->priority, t0, pto_now_ns());
  }
  const char *w = kernel_why_take(&p->ctx); /* taken when it succeeds too */
  snprintf(p->why, sizeof p->why, "%s", p->rc ? w : "");
}

static void *part_main(void *arg) {
  part_run(arg);
  return NULL;
}

/* Places the blocks' parts on cores, a MIX block's in one cluster; the
 * real run's (traced) record trace slices. */
static int unit_parts(pto_run *r, task *t, const int32_t *blocks, int nb, const pto_tensor *tensors,
                      bool traced, part *parts) {
  struct contract *c = r->contract;
  const kernel_rec *k = &r->chip->kernels[t->kernel];
  int naic = k->aic ? 1 : 0, naiv = k->aiv ? k->aiv_count : 0, np = 0;
  memset(c->busy, 0, sizeof *c->busy * (size_t)r->ncores);
  for (int b = 0; b < nb; b++) {
    int cl = 0, aiv[2] = {-1, -1}, aic = -1;
    for (; cl < r->cfg->clusters; cl++) {
      const int *cc = c->cl_cores[cl];
      aic = naic && cc[0] >= 0 && !c->busy[cc[0]] ? cc[0] : -1;
      int got = 0;
      for (int j = 1; j < 3 && got < naiv; j++)
        if (cc[j] >= 0 && !c->busy[cc[j]]) aiv[got++] = cc[j];
      if ((!naic || aic >= 0) && got == naiv) break;
    }
    if (cl == r->cfg->clusters) return -1; /* cannot happen: submit checked the width */
    for (int j = 0; j < naic + naiv; j++) {
      int core_id = j < naic ? aic : aiv[j - naic];
      c->busy[core_id] = true;
      const core *co = &r->cores[core_id];
      parts[np++] = (part){
          .ctx = {.block_idx = blocks[b],
                  .block_num = t->block_num,
                  .sub_block_id = j < naic ? 0 : j - naic,
                  .core_id = core_id,
                  .cluster_id = co->cluster,
                  .core_type = co->type,
                  .task_id = t->id,
                  .ntensors = t->ntensors,
                  .nscalars = t->nscalars,
                  .tensors = tensors,
                  .scalars = t->scalars,
                  .env = r->cfg->env,
                  .run = r},
          .fn = co->type == PTO_CORE_AIC ? k->aic : k->aiv,
          .name = k->name,
          .index = j,
          .traced = traced,
      };
    }
  }
  return np;
}

/* Runs the parts, together when there are several (a MIX block, a gang:
 * they may wait for each other). Returns the first failing part or -1. */
static int unit_run(pto_run *r, part *parts, int np) {
  if (np == 1) {
    part_run(&parts[0]);
  } else {
    int started = 0;
    char why[400];
    for (; started < np; started++) {
      const part *p = &parts[started];
      if (thread_start(&parts[started].th, part_main, &parts[started], why, sizeof why,
                       "the thread of part %d of %d of kernel '%s' block %d/%d", started, np,
                       p->name, p->ctx.block_idx, p->ctx.block_num))
        break;
    }
    if (started < np) run_fail(r, PTO_ESYSTEM, parts[0].ctx.task_id, -1, "checking mode: %s", why);
    for (int i = 0; i < started; i++)
      pthread_join(parts[i].th, NULL);
    if (started < np) return -2;
  }
  for (int i = 0; i < np; i++)
    if (parts[i].rc) return i;
  return -1;
}

/* A kernel's failure, named as core.c names it. */
static void unit_failed(pto_run *r, task *t, const part *p, const char *when) {
  int rc = p->rc;
  run_fail(r, kernel_fail_code(rc), t->id, p->ctx.core_id,
           "kernel '%s' block %d/%d on core %d returned %d%s%s%s%s", run_kernel_name(r, t),
           p->ctx.block_idx, t->block_num, p->ctx.core_id, rc, kernel_rc_note(rc, p->why), when,
           p->why[0] ? ": " : "", p->why);
}

static void blocks_name(char *s, size_t n, const int32_t *blocks, int nb, const task *t) {
  if (nb == 1)
    snprintf(s, n, "block %d/%d", blocks[0], t->block_num);
  else
    snprintf(s, n, "gang of %d blocks", nb);
}

/* The argument of t whose buffer holds byte x, preferring one whose view
 * touches it in a mode `pref` accepts; -1 if none. */
static int arg_of(const struct contract *c, pto_run *r, const task *t, uintptr_t x,
                  bool (*pref)(int)) {
  const uint8_t *acc = c->access[(uint64_t)t->id & r->slot_mask];
  int any = -1;
  for (int i = 0; i < t->ntensors; i++) {
    const pto_tensor *v = &t->tensors[i];
    if (x < (uintptr_t)v->buf || x >= (uintptr_t)v->buf + v->buf_bytes) continue;
    if (pref && pref(acc[i]) && view_has(v, x)) return i;
    if (any < 0) any = i;
  }
  return any;
}

static bool is_input(int a) { return a == PTO_INPUT; }

/* The first byte of [mem, mem + n) (at address base) that differs from old
 * outside the write set, or -1. */
static int64_t first_stray(const runs *wr, const uint8_t *mem, const uint8_t *old, uintptr_t base,
                           size_t n) {
  size_t i = 0;
  while (i < n) {
    uintptr_t x = base + i;
    size_t k = runs_from(wr, x);
    if (k < wr->n && wr->v[k].lo <= x) { /* allowed up to the run's end */
      i = wr->v[k].hi - base;
      continue;
    }
    size_t gap = k < wr->n && wr->v[k].lo - base < n ? wr->v[k].lo - base : n;
    if (memcmp(mem + i, old + i, gap - i))
      for (; i < gap; i++)
        if (mem[i] != old[i]) return (int64_t)i;
    i = gap;
  }
  return -1;
}

/* Finds the chunks the unit changed (c->chg) and fails the run on a byte
 * changed outside the write set. */
static bool check_writes(pto_run *r, task *t, const char *unit) {
  struct contract *c = r->contract;
  c->nchg = 0;
  for (uint32_t bi = 0; bi < c->nbufs; bi++) {
    kbuf *b = &c->bufs[bi];
    for (size_t k = 0; k < nchunks(b->len); k++) {
      size_t off = k * CHUNK, n = b->len - off < CHUNK ? b->len - off : CHUNK;
      if (memcmp(b->lo + off, b->snap + off, n) == 0) continue;
      if (c->nchg == c->chg_cap) {
        size_t cap = c->chg_cap ? c->chg_cap * 2 : 256;
        changed *nv = realloc(c->chg, sizeof *nv * cap);
        if (!nv) {
          run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory");
          return false;
        }
        c->chg = nv;
        c->chg_cap = cap;
      }
      c->chg[c->nchg++] = (changed){bi, (uint32_t)k};
      int64_t at = first_stray(&c->wr, b->lo + off, b->snap + off, (uintptr_t)b->lo + off, n);
      if (at < 0) continue;
      uintptr_t x = (uintptr_t)b->lo + off + (uint64_t)at;
      unsigned old = b->snap[off + (uint64_t)at], now = b->lo[off + (uint64_t)at];
      const uint8_t *acc = c->access[(uint64_t)t->id & r->slot_mask];
      int arg = arg_of(c, r, t, x, is_input);
      if (arg >= 0) {
        const pto_tensor *v = &t->tensors[arg];
        contract_fail(
            r, t, arg,
            "task %lld (kernel '%s') %s wrote outside its declared writes: argument %d (%s, "
            "buffer %p of %zu bytes) byte %llu changed 0x%02x -> 0x%02x, %s",
            (long long)t->id, run_kernel_name(r, t), unit, arg, tensor_access_name(acc[arg]),
            v->buf, v->buf_bytes, (unsigned long long)(x - (uintptr_t)v->buf), old, now,
            acc[arg] == PTO_INPUT && view_has(v, x)
                ? "inside its INPUT view"
                : "outside its OUTPUT/INOUT views (declare the bytes it writes)");
      } else {
        contract_fail(
            r, t, arg,
            "task %lld (kernel '%s') %s wrote a buffer it was not passed: buffer %p of %zu "
            "bytes (argument %d of task %lld) byte %llu changed 0x%02x -> 0x%02x",
            (long long)t->id, run_kernel_name(r, t), unit, (void *)b->lo, b->len, b->arg,
            (long long)b->task, (unsigned long long)(x - (uintptr_t)b->lo), old, now);
      }
      return false;
    }
  }
  return true;
}

/* The snapshot takes the unit's writes. */
static void commit_writes(struct contract *c) {
  for (size_t i = 0; i < c->nchg; i++) {
    kbuf *b = &c->bufs[c->chg[i].buf];
    size_t off = (size_t)c->chg[i].chunk * CHUNK, n = b->len - off < CHUNK ? b->len - off : CHUNK;
    memcpy(b->snap + off, b->lo + off, n);
  }
  c->nchg = 0;
}

/* The bytes of [p, p + n) as they were before the unit (the snapshot). */
static const uint8_t *before_of(const struct contract *c, const uint8_t *p) {
  int64_t i = kbuf_find(c, (uintptr_t)p);
  return i < 0 ? NULL : c->bufs[i].snap + (p - c->bufs[i].lo);
}

/* Scratch copies of t's argument buffers (in c->pool, kept from unit to
 * unit), every byte outside the read set flipped; tensors[] get t's views
 * moved onto them. */
static bool scratch_make(pto_run *r, task *t, pto_tensor *tensors) {
  struct contract *c = r->contract;
  brun spans[PTO_MAX_TENSOR_ARGS];
  int ns = 0;
  for (int i = 0; i < t->ntensors; i++)
    if (t->tensors[i].buf && t->tensors[i].buf_bytes)
      spans[ns++] = (brun){(uintptr_t)t->tensors[i].buf,
                           (uintptr_t)t->tensors[i].buf + t->tensors[i].buf_bytes};
  runs rs = {spans, (size_t)ns, (size_t)ns, false};
  runs_finish(&rs, false);
  size_t total = 0;
  for (size_t j = 0; j < rs.n; j++)
    total += spans[j].hi - spans[j].lo;
  if (total > c->pool_cap) {
    free(c->pool);
    c->pool_cap = 0;
    c->pool = malloc(total);
    if (!c->pool) return false;
    c->pool_cap = total;
  }
  c->nscr = 0;
  uint8_t *at = c->pool;
  for (size_t j = 0; j < rs.n; j++) {
    scratch *sc = &c->scr[c->nscr++];
    sc->lo = (uint8_t *)spans[j].lo;
    sc->len = spans[j].hi - spans[j].lo;
    sc->mem = at;
    at += sc->len;
    const uint8_t *pre = before_of(c, sc->lo);
    if (!pre) return false;
    probe_flip_copy(sc->mem, pre, sc->len);
    for (size_t k = runs_from(&c->rd, spans[j].lo); k < c->rd.n && c->rd.v[k].lo < spans[j].hi;
         k++) {
      uintptr_t a = c->rd.v[k].lo > spans[j].lo ? c->rd.v[k].lo : spans[j].lo;
      uintptr_t z = c->rd.v[k].hi < spans[j].hi ? c->rd.v[k].hi : spans[j].hi;
      memcpy(sc->mem + (a - spans[j].lo), pre + (a - spans[j].lo), z - a);
    }
  }
  for (int i = 0; i < t->ntensors; i++) {
    tensors[i] = t->tensors[i];
    for (int j = 0; j < c->nscr; j++) {
      uint8_t *b = tensors[i].buf;
      if (b >= c->scr[j].lo && b < c->scr[j].lo + c->scr[j].len) {
        tensors[i].buf = c->scr[j].mem + (b - c->scr[j].lo);
        break;
      }
    }
  }
  return true;
}

/* Byte x lies in the node task's shared writes and in no view t writes:
 * another rank may have changed it while the unit ran. */
static bool shared_only(const struct contract *c, pto_run *r, const task *t, uintptr_t x) {
  if (!runs_has(&c->sh, x)) return false;
  const uint8_t *acc = c->access[(uint64_t)t->id & r->slot_mask];
  for (int i = 0; i < t->ntensors; i++)
    if (writes(acc[i]) && view_has(&t->tensors[i], x)) return false;
  return true;
}

/* Where either run changed a byte, both must have left the same value
 * (except where other ranks of a node task may write: shared_only). */
static bool check_reads(pto_run *r, task *t, const char *unit) {
  struct contract *c = r->contract;
  for (int j = 0; j < c->nscr; j++) {
    const scratch *sc = &c->scr[j];
    const uint8_t *pre = before_of(c, sc->lo), *real = sc->lo;
    /* segments of the span: flipped ones, and the read runs kept as they were */
    uintptr_t lo = (uintptr_t)sc->lo, hi = lo + sc->len, x = lo;
    size_t k = runs_from(&c->rd, lo);
    int64_t bad = -1;
    while (x < hi && bad < 0) {
      bool in = k < c->rd.n && c->rd.v[k].lo <= x;
      uintptr_t end = in ? c->rd.v[k].hi : k < c->rd.n ? c->rd.v[k].lo : hi;
      if (end > hi) end = hi;
      for (uintptr_t y = x; y < end && bad < 0;) {
        size_t off = y - lo;
        int64_t at = probe_first_disagreement(real + off, pre + off, sc->mem + off, end - y, !in);
        if (at < 0) break;
        if (!shared_only(c, r, t, y + (uint64_t)at)) bad = (int64_t)off + at;
        y += (uint64_t)at + 1;
      }
      if (in) k++;
      x = end;
    }
    if (bad < 0) continue;
    uintptr_t b = lo + (uint64_t)bad;
    int arg = arg_of(c, r, t, b, writes);
    const pto_tensor *v = &t->tensors[arg];
    contract_fail(r, t, arg,
                  "task %lld (kernel '%s') %s reads memory it did not declare: argument %d's byte "
                  "%llu came out 0x%02x, but 0x%02x when every byte outside its INPUT/INOUT views "
                  "was flipped (declare what it reads as INPUT or INOUT; a kernel that is not "
                  "deterministic opts out with pto_kernel_skip_read_check)",
                  (long long)t->id, run_kernel_name(r, t), unit, arg,
                  (unsigned long long)(b - (uintptr_t)v->buf), real[bad], sc->mem[bad]);
    return false;
  }
  return true;
}

/* ---- the program's bytes around the second run ----
 * The second run gets scratch copies through ctx->tensors; a kernel that
 * reaches its buffers another way (a global pointer) writes the program's
 * memory a second time (an accumulation twice), and check_reads would
 * blame a read. So while it runs, the chunks the real run changed hold
 * their bytes from before it (its writes show again, even of the same
 * value), and are then put back as the real run left them. Bytes of the
 * node task's shared writes (c->sh) are left alone: other ranks may write
 * them meanwhile. */

typedef enum held_op { HELD_KEEP, HELD_FIND, HELD_RESTORE } held_op;

/* On the bytes outside c->sh of every chunk the unit changed: HELD_KEEP
 * copies them to c->held and puts the snapshot's back; HELD_FIND returns
 * the address of the first that is no longer the snapshot's (0: none);
 * HELD_RESTORE puts c->held's back. */
static uintptr_t held_bytes(struct contract *c, held_op op) {
  for (size_t i = 0; i < c->nchg; i++) {
    kbuf *b = &c->bufs[c->chg[i].buf];
    size_t off = (size_t)c->chg[i].chunk * CHUNK, n = b->len - off < CHUNK ? b->len - off : CHUNK;
    uint8_t *real = b->lo + off, *snap = b->snap + off, *keep = c->held + i * CHUNK;
    uintptr_t lo = (uintptr_t)real, hi = lo + n, x = lo;
    for (size_t k = runs_from(&c->sh, lo); x < hi; k++) {
      bool shared = k < c->sh.n && c->sh.v[k].lo < hi;
      uintptr_t end = !shared ? hi : c->sh.v[k].lo > x ? c->sh.v[k].lo : x;
      size_t at = x - lo, len = end - x;
      if (op == HELD_KEEP) {
        memcpy(keep + at, real + at, len);
        memcpy(real + at, snap + at, len);
      } else if (op == HELD_RESTORE) {
        memcpy(real + at, keep + at, len);
      } else if (len && memcmp(real + at, snap + at, len) != 0) {
        while (real[at] == snap[at])
          at++;
        return lo + at;
      }
      if (!shared) break;
      x = c->sh.v[k].hi;
    }
  }
  return 0;
}

/* HELD_KEEP with room for it; false (the run failed) when out of memory. */
static bool held_keep(pto_run *r, task *t) {
  struct contract *c = r->contract;
  if (c->nchg * CHUNK > c->held_cap) {
    free(c->held);
    c->held_cap = 0;
    c->held = malloc(c->nchg * CHUNK);
    if (!c->held) {
      run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory");
      return false;
    }
    c->held_cap = c->nchg * CHUNK;
  }
  held_bytes(c, HELD_KEEP);
  return true;
}

/* Fails the run for byte x, which the second run wrote other than through
 * its tensors. */
static void wrote_around(pto_run *r, task *t, const char *unit, uintptr_t x) {
  struct contract *c = r->contract;
  int arg = arg_of(c, r, t, x, writes);
  int64_t bi = kbuf_find(c, x);
  const uint8_t *buf = arg >= 0 ? t->tensors[arg].buf : bi >= 0 ? c->bufs[bi].lo : (uint8_t *)x;
  char what[48];
  if (arg >= 0)
    snprintf(what, sizeof what, "argument %d's", arg);
  else
    snprintf(what, sizeof what, "buffer %p's", (const void *)buf);
  contract_fail(r, t, arg,
                "task %lld (kernel '%s') %s wrote %s bytes other than through its tensors "
                "(ctx->tensors): its byte %llu was written again by the read check's second run, "
                "whose tensors were scratch copies (reach the buffers only through ctx->tensors, "
                "or opt out with pto_kernel_skip_read_check; the bytes are as the first run left "
                "them)",
                (long long)t->id, run_kernel_name(r, t), unit, what,
                (unsigned long long)(x - (uintptr_t)buf));
}

/* A task of several cores with REDUX arguments: each part gets its own
 * copy (redux.h), as core.c gives it. */
static void parts_redux_views(const task *t, const kernel_rec *k, part *parts, int np,
                              pto_tensor *own) {
  for (int i = 0; i < np; i++) {
    const pto_kctx *x = &parts[i].ctx;
    int unit = task_unit(t, x->block_idx, block_part(k, x->core_type, x->sub_block_id));
    pto_tensor *mine = own + (size_t)i * (size_t)t->ntensors;
    redux_unit_tensors(x->tensors, t->ntensors, t->redux_args, unit, mine);
    parts[i].ctx.tensors = mine;
  }
}

/* Runs one unit of t (a block, or the gang) and checks it. */
static bool check_unit(pto_run *r, task *t, const int32_t *blocks, int nb, bool read_check) {
  struct contract *c = r->contract;
  const kernel_rec *k = &r->chip->kernels[t->kernel];
  int per = (k->aic ? 1 : 0) + (k->aiv ? k->aiv_count : 0);
  part *parts = malloc(sizeof *parts * (size_t)nb * (size_t)per);
  bool own_views = t->redux_args && t->units_total > 1;
  pto_tensor *own =
      own_views ? malloc(sizeof *own * (size_t)nb * (size_t)per * (size_t)t->ntensors) : NULL;
  if (!parts || (own_views && !own)) {
    free(parts);
    run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory");
    return false;
  }
  char unit[48];
  blocks_name(unit, sizeof unit, blocks, nb, t);
  bool ok = false;
  atomic_store_explicit(&c->unit_comm, false, memory_order_relaxed);
  int np = unit_parts(r, t, blocks, nb, t->tensors, true, parts);
  if (own_views && np > 0) parts_redux_views(t, k, parts, np, own);
  int bad = np < 0 ? -2 : unit_run(r, parts, np);
  /* blocks that ran, whether they then failed or not, as core.c counts
   * them (stats.blocks); the read check's second run is no block */
  if (bad != -2) r->contract_blocks += (uint64_t)nb;
  if (np < 0)
    run_fail(r, PTO_EINTERNAL, t->id, -1, "checking mode: no cores for a %s", unit);
  else if (bad >= 0)
    unit_failed(r, t, &parts[bad], "");
  if (bad != -1 || run_stopping(r) || !check_writes(r, t, unit)) goto out;
  /* a second run would repeat the unit's remote stores and signals */
  if (read_check && !atomic_load_explicit(&c->unit_comm, memory_order_relaxed)) {
    pto_tensor tensors[PTO_MAX_TENSOR_ARGS];
    if (!scratch_make(r, t, tensors)) {
      run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory for scratch copies");
      goto out;
    }
    if (!held_keep(r, t)) goto out;
    np = unit_parts(r, t, blocks, nb, tensors, false, parts);
    if (own_views && np > 0) parts_redux_views(t, k, parts, np, own);
    bad = unit_run(r, parts, np);
    uintptr_t again = held_bytes(c, HELD_FIND);
    held_bytes(c, HELD_RESTORE);
    if (again) {
      wrote_around(r, t, unit, again);
      goto out;
    }
    if (bad >= 0) {
      const part *p = &parts[bad];
      contract_fail(r, t, -1,
                    "task %lld (kernel '%s') %s reads memory it did not declare: it returned %d "
                    "only when every byte outside its INPUT/INOUT views was flipped%s%s (declare "
                    "what it reads as INPUT or INOUT; a kernel that is not deterministic opts out "
                    "with pto_kernel_skip_read_check)",
                    (long long)t->id, run_kernel_name(r, t), unit, p->rc, p->why[0] ? ": " : "",
                    p->why);
      goto out;
    }
    if (bad == -2 || run_stopping(r) || !check_reads(r, t, unit)) goto out;
  }
  commit_writes(c);
  ok = true;
out:
  c->nscr = 0;
  free(parts);
  free(own);
  return ok;
}

/* Whether every block of t can have its cores at once (as a gang's). */
static bool fits_at_once(const pto_run *r, const task *t) {
  const kernel_rec *k = &r->chip->kernels[t->kernel];
  int naic = k->aic ? 1 : 0, naiv = k->aiv ? k->aiv_count : 0;
  int64_t room = 0;
  for (int cl = 0; cl < r->cfg->clusters; cl++) {
    const int *cc = r->contract->cl_cores[cl];
    int aivs = (cc[1] >= 0) + (cc[2] >= 0), n = naiv ? aivs / naiv : 2;
    if (naic && cc[0] < 0) n = 0;
    if (naic && n > 1) n = 1;
    room += n;
  }
  return t->block_num <= room;
}

/* Runs t's blocks one at a time in a random order (a gang at once, and on
 * a chip of a node every task's blocks that fit: chip_set_node_task);
 * true when all passed. */
static bool run_task(pto_run *r, task *t) {
  struct contract *c = r->contract;
  const uint8_t *acc = c->access[(uint64_t)t->id & r->slot_mask];
  c->wr.n = c->rd.n = 0;
  c->wr.oom = c->rd.oom = c->sh.oom = false;
  bool any_write = false;
  for (int i = 0; i < t->ntensors; i++) {
    /* a REDUX argument: every core's copy (redux.h) */
    int copies = t->redux_args >> i & 1 ? t->units_total : 1;
    for (int u = 0; u < copies; u++) {
      pto_tensor v = t->tensors[i];
      if (u) v.offset += u * redux_slot_elems(&v);
      if (writes(acc[i])) runs_add_view(&c->wr, &v), any_write = true;
      if (reads(acc[i])) runs_add_view(&c->rd, &v);
    }
  }
  c->sh.n = 0;
  for (int i = 0; i < r->chip->nshared_writes; i++) { /* other ranks may write these */
    runs_add_view(&c->wr, &r->chip->shared_writes[i]);
    runs_add_view(&c->sh, &r->chip->shared_writes[i]);
  }
  if (c->wr.oom || c->rd.oom || c->sh.oom) {
    run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory");
    return false;
  }
  runs_finish(&c->sh, true);
  runs_finish(&c->wr, true);
  runs_finish(&c->rd, true);
  bool read_check = any_write && !r->chip->kernels[t->kernel].skip_read_check;
  int32_t nb = t->block_num;
  int32_t *order = malloc(sizeof *order * (size_t)nb);
  if (!order) {
    run_fail(r, PTO_ENOMEM, t->id, -1, "checking mode: out of memory");
    return false;
  }
  for (int32_t i = 0; i < nb; i++)
    order[i] = i;
  for (int32_t i = nb - 1; i > 0; i--) { /* Fisher-Yates */
    int32_t j = (int32_t)(splitmix(&c->rng) % (uint64_t)(i + 1));
    int32_t x = order[i];
    order[i] = order[j];
    order[j] = x;
  }
  bool ok = true;
  if (t->sync_start || (nb > 1 && r->chip->in_node_task && fits_at_once(r, t))) {
    ok = check_unit(r, t, order, nb, read_check);
    /* launched whole at once, without a drain: the fast path's count */
    if (t->sync_start) atomic_fetch_add_explicit(&r->sync_fast, 1, memory_order_relaxed);
  } else
    for (int32_t i = 0; i < nb && ok; i++)
      ok = check_unit(r, t, &order[i], 1, read_check);
  free(order);
  if (!ok) return false;
  for (int i = 0; i < t->ntensors; i++)
    if (t->tensors[i].buf && t->tensors[i].buf_bytes) kbuf_unref(c, t->tensors[i].buf);
  return true;
}

/* What the orchestrator wrote since the last drain becomes the snapshot. */
static void refresh(struct contract *c) {
  for (uint32_t i = 0; i < c->nbufs; i++) {
    kbuf *b = &c->bufs[i];
    for (size_t k = 0; k < nchunks(b->len); k++) {
      size_t off = k * CHUNK, n = b->len - off < CHUNK ? b->len - off : CHUNK;
      if (memcmp(b->lo + off, b->snap + off, n) != 0) memcpy(b->snap + off, b->lo + off, n);
    }
  }
}

bool contract_drain(pto_run *r, pto_cond_fn cond, void *arg, contract_complete_fn complete) {
  struct contract *c = r->contract;
  bool refreshed = false;
  while (!cond(arg) && c->nready && !run_stopping(r)) {
    if (!refreshed) refresh(c), refreshed = true;
    uint32_t i = (uint32_t)(splitmix(&c->rng) % c->nready);
    task *t = c->ready[i];
    c->ready[i] = c->ready[--c->nready];
    if (!run_task(r, t)) break;
    complete(r, t, t->units_total);
  }
  return cond(arg);
}
