/* redux.c — PTO_REDUX: the ops, the groups of contributions with their
 * private copies, and the combine task (redux.h has the model). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/run.h"
#include "common/half.h"
#include "common/last_error.h"
#include "common/reg_name.h"
#include "common/tensor_check.h"

/* ---- ops ---- */

static const char *const builtin_names[PTO_REDUX_BUILTINS] = {"sum", "prod", "max", "min"};

static const redux_user_op *user_op(const pto_chip *chip, int op) {
  int i = op - PTO_REDUX_USER;
  return i >= 0 && i < chip->nredux_ops ? &chip->redux_ops[i] : NULL;
}

/* Refusals say why through pto_last_error, as a kernel registration's. */
#define REG_FAIL(code, ...) last_error_set(code, "pto_redux_register: " __VA_ARGS__)

int pto_redux_register(pto_chip *chip, const pto_redux_op_desc *d, int *op) {
  if (!chip || !d || !op)
    return REG_FAIL(PTO_EINVAL, "%s is NULL", !chip ? "chip" : !d ? "desc" : "op");
  if (!d->name || !d->init || !d->combine)
    return REG_FAIL(PTO_EINVAL, "desc.%s is NULL",
                    !d->name   ? "name"
                    : !d->init ? "init"
                               : "combine");
  char why[200];
  if (reg_name_check(d->name, PTO_REDUX_MAX_NAME, why, sizeof why))
    return REG_FAIL(PTO_EINVAL, "%s", why);
  if (d->dtype < 0 || d->dtype >= PTO_DTYPE_COUNT)
    return REG_FAIL(PTO_EINVAL, "'%s': dtype %d is not a pto_dtype", d->name, (int)d->dtype);
  /* the cores read the table during a run: it is held as a run is */
  int idle = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &idle, 1))
    return REG_FAIL(PTO_EBUSY, "'%s': the chip is running; register ops between runs", d->name);
  int rc = PTO_OK;
  if (chip->nredux_ops >= PTO_MAX_REDUX_OPS) {
    rc = REG_FAIL(PTO_EINVAL, "'%s': at most %d ops per chip", d->name, PTO_MAX_REDUX_OPS);
  } else {
    redux_user_op *u = &chip->redux_ops[chip->nredux_ops];
    snprintf(u->name, sizeof u->name, "%s", d->name);
    u->dtype = d->dtype;
    u->init = d->init;
    u->combine = d->combine;
    *op = PTO_REDUX_USER + chip->nredux_ops++;
  }
  atomic_store(&chip->running, 0);
  return rc;
}
#undef REG_FAIL

const char *pto_redux_op_name(const pto_chip *chip, int op) {
  if (op >= 0 && op < PTO_REDUX_BUILTINS) return builtin_names[op];
  const redux_user_op *u = chip ? user_op(chip, op) : NULL;
  return u ? u->name : NULL;
}

/* acc[i] = acc[i] op src[i], i in [0, n), for a built-in op. Integers
 * wrap (unsigned arithmetic: signed overflow would be undefined); f16 and
 * bf16 go through f32 and are rounded at each step, as one would in a
 * sequential loop over them. */
#define FOLD(T, U, N, ACC, SRC, OP)                                                                \
  do {                                                                                             \
    T *a_ = (T *)(ACC);                                                                            \
    const T *s_ = (const T *)(SRC);                                                                \
    for (int64_t i_ = 0; i_ < (N); i_++) {                                                         \
      T x_ = a_[i_], y_ = s_[i_];                                                                  \
      switch (OP) {                                                                                \
      case PTO_REDUX_SUM: a_[i_] = (T)((U)x_ + (U)y_); break;                                      \
      case PTO_REDUX_PROD: a_[i_] = (T)((U)x_ * (U)y_); break;                                     \
      case PTO_REDUX_MAX: a_[i_] = y_ > x_ ? y_ : x_; break;                                       \
      default: a_[i_] = y_ < x_ ? y_ : x_; break;                                                  \
      }                                                                                            \
    }                                                                                              \
  } while (0)

static float fold_f32(float x, float y, int op) {
  switch (op) {
  case PTO_REDUX_SUM: return x + y;
  case PTO_REDUX_PROD: return x * y;
  case PTO_REDUX_MAX: return y > x ? y : x;
  default: return y < x ? y : x;
  }
}

static void fold_builtin(int op, int dtype, void *acc, const void *src, int64_t n) {
  switch (dtype) {
  case PTO_F32: FOLD(float, float, n, acc, src, op); break;
  case PTO_F64: FOLD(double, double, n, acc, src, op); break;
  case PTO_I32: FOLD(int32_t, uint32_t, n, acc, src, op); break;
  case PTO_I16: FOLD(int16_t, uint16_t, n, acc, src, op); break;
  case PTO_I8: FOLD(int8_t, uint8_t, n, acc, src, op); break;
  case PTO_U8: FOLD(uint8_t, uint32_t, n, acc, src, op); break;
  case PTO_I64: FOLD(int64_t, uint64_t, n, acc, src, op); break;
  case PTO_F16:
  case PTO_BF16: {
    uint16_t *a = acc;
    const uint16_t *s = src;
    bool h = dtype == PTO_F16;
    for (int64_t i = 0; i < n; i++) {
      float x = h ? half_to_f32(a[i]) : bf16_to_f32(a[i]);
      float y = h ? half_to_f32(s[i]) : bf16_to_f32(s[i]);
      float z = fold_f32(x, y, op);
      a[i] = h ? f32_to_half(z) : f32_to_bf16(z);
    }
    break;
  }
  }
}

/* n elements of dtype set to a built-in op's identity. */
static void identity_builtin(int op, int dtype, void *dst, int64_t n) {
  size_t es = pto_dtype_size((pto_dtype)dtype);
  if (op == PTO_REDUX_SUM) { /* 0 is all zero bits in every dtype */
    memset(dst, 0, (size_t)n * es);
    return;
  }
  bool lowest = op == PTO_REDUX_MAX;
  union {
    float f;
    double d;
    int32_t i32;
    int16_t i16;
    int8_t i8;
    uint8_t u8;
    int64_t i64;
    uint16_t h;
  } v;
  switch (dtype) {
  case PTO_F32:
    v.f = op == PTO_REDUX_PROD ? 1.0f : lowest ? -__builtin_inff() : __builtin_inff();
    break;
  case PTO_F64:
    v.d = op == PTO_REDUX_PROD ? 1.0 : lowest ? -__builtin_inf() : __builtin_inf();
    break;
  case PTO_F16: v.h = op == PTO_REDUX_PROD ? 0x3c00 : lowest ? 0xfc00 : 0x7c00; break;
  case PTO_BF16: v.h = op == PTO_REDUX_PROD ? 0x3f80 : lowest ? 0xff80 : 0x7f80; break;
  case PTO_I32: v.i32 = op == PTO_REDUX_PROD ? 1 : lowest ? INT32_MIN : INT32_MAX; break;
  case PTO_I16: v.i16 = op == PTO_REDUX_PROD ? 1 : lowest ? INT16_MIN : INT16_MAX; break;
  case PTO_I8: v.i8 = op == PTO_REDUX_PROD ? 1 : lowest ? INT8_MIN : INT8_MAX; break;
  case PTO_U8: v.u8 = op == PTO_REDUX_PROD ? 1 : lowest ? 0 : UINT8_MAX; break;
  default: v.i64 = op == PTO_REDUX_PROD ? 1 : lowest ? INT64_MIN : INT64_MAX; break;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy((char *)dst + (size_t)i * es, &v, es);
}

static void identity(const pto_chip *chip, int op, int dtype, void *dst, int64_t n) {
  const redux_user_op *u = user_op(chip, op);
  if (u)
    u->init(dst, n);
  else
    identity_builtin(op, dtype, dst, n);
}

static void fold(const pto_chip *chip, int op, int dtype, void *acc, const void *src, int64_t n) {
  const redux_user_op *u = user_op(chip, op);
  if (u)
    u->combine(acc, src, n);
  else
    fold_builtin(op, dtype, acc, src, n);
}

/* Slots the combine task asks for ahead of the one it folds. */
#define COMBINE_AHEAD 8

/* ---- the combine task ----
 * tensors: [0] the reduced view (INOUT), [1] the slab (INPUT);
 * scalars: [0] op, [1] slots used, [2] slot stride in elements. Folds slot
 * by slot, in slot (= submission) order, so each element is
 * ((tensor op s0) op s1) op ... */
static int combine_kernel(const pto_kctx *c) {
  const pto_run *r = c->run;
  const pto_tensor *dst = &c->tensors[0];
  const char *slab = c->tensors[1].buf;
  int op = (int)c->scalars[0];
  int64_t used = (int64_t)c->scalars[1], stride = (int64_t)c->scalars[2];
  int64_t n = pto_tensor_numel(dst);
  size_t es = pto_dtype_size((pto_dtype)dst->dtype);
  size_t step = (size_t)stride * es; /* bytes from a slot to the next */
  void *acc = pto_tensor_is_contiguous(dst) ? pto_tensor_at_linear(dst, 0) : NULL;
  for (int64_t s = 0; s < used; s++) {
    const char *src = slab + (size_t)s * step;
    /* each slot was written by the core that ran its contribution: ask
     * for the lines a few slots ahead, so the misses overlap instead of
     * coming one after the other (a prefetch never faults) */
    __builtin_prefetch(src + COMBINE_AHEAD * step);
    if (acc) {
      fold(r->chip, op, dst->dtype, acc, src, n);
      continue;
    }
    for (int64_t i = 0; i < n; i++) /* a strided view: element by element */
      fold(r->chip, op, dst->dtype, pto_tensor_at_linear(dst, i), src + (size_t)i * es, 1);
  }
  return 0;
}

void redux_kernel_init(kernel_rec *k, int aiv_per_cluster) {
  memset(k, 0, sizeof *k);
  snprintf(k->name, sizeof k->name, "redux_combine");
  /* a vector core's work; a chip without AIV has the cube core do it */
  if (aiv_per_cluster > 0) {
    k->aiv = combine_kernel;
    k->aiv_count = 1;
    k->shape = SHAPE_AIV;
  } else {
    k->aic = combine_kernel;
    k->shape = SHAPE_AIC;
  }
}

/* ---- groups ---- */

int redux_init(redux_table *x, const redux_orch *orch) {
  memset(x, 0, sizeof *x);
  x->orch = *orch;
  for (int i = 0; i < REDUX_GROUPS; i++)
    if (!(x->g[i].contrib = malloc(sizeof(pto_task_id) * REDUX_SLOTS_MAX))) return PTO_ENOMEM;
  return PTO_OK;
}

/* The slabs' heap holds go with the orchestrator's reset. */
void redux_reset(redux_table *x) {
  for (int i = 0; i < REDUX_GROUPS; i++)
    x->g[i].open = false;
  x->openm = 0;
}

void redux_destroy(redux_table *x) {
  for (int i = 0; i < REDUX_GROUPS; i++) {
    free(x->g[i].contrib);
    x->g[i].contrib = NULL;
  }
}

static int redux_fail(pto_run *r, int arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int redux_fail(pto_run *r, int arg, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  run_fail(r, PTO_EINVAL, PTO_TASK_NONE, -1, "submit #%lld: tensor argument %d (REDUX): %s",
           (long long)r->next_id, arg, msg);
  return run_latched(r);
}

/* Submits g's combine task and closes g. */
static int flush(pto_run *r, redux_group *g) {
  redux_table *x = &r->rx;
  if (!g->open) return PTO_OK;
  g->open = false;
  x->openm &= ~(1u << (g - x->g));
  if (g->ntasks == 0) { /* reserved by a submit that failed: nothing to fold */
    x->orch.heap_free_after(r, g->slab, r->next_id - 1);
    return run_latched(r);
  }
  pto_args a;
  /* filled directly, not through orch.c's builder: orch.c calls this
   * file, so this file calls orch.c only through redux_orch */
  int64_t n = g->used * g->slot_elems;
  a.ntensors = 2;
  a.nscalars = 3;
  a.error = 0;
  a.error_arg = -1;
  a.error_rule = 0;
  a.access[0] = PTO_INOUT;
  a.tensors[0] = g->target;
  a.access[1] = PTO_INPUT; /* declared: checking mode sees what it reads */
  pto_tensor_init(&a.tensors[1], g->slab, (size_t)n * pto_dtype_size((pto_dtype)g->target.dtype),
                  (pto_dtype)g->target.dtype, 1, &n);
  a.outputs[0] = a.outputs[1] = NULL;
  a.scalars[0] = (uint64_t)g->op;
  a.scalars[1] = (uint64_t)g->used;
  a.scalars[2] = (uint64_t)g->slot_elems;
  /* the contributions by explicit edges: their slots are in no TensorMap */
  pto_submit_opts o = {.deps = g->contrib, .ndeps = g->ntasks, .priority = g->priority};
  pto_task_id id = PTO_TASK_NONE;
  int rc = x->orch.submit(r, KERNEL_REDUX_COMBINE, &a, &o, &id);
  x->orch.heap_free_after(r, g->slab, id == PTO_TASK_NONE ? r->next_id - 1 : id);
  return rc;
}

int redux_flush_all(pto_run *r) {
  int rc = PTO_OK;
  for (int i = 0; i < REDUX_GROUPS && !rc; i++)
    rc = flush(r, &r->rx.g[i]);
  return rc;
}

static int flush_overlapping_view(pto_run *r, const region_view *v) {
  int rc = PTO_OK;
  for (uint32_t m = r->rx.openm; m && !rc; m &= m - 1) {
    redux_group *g = &r->rx.g[__builtin_ctz(m)];
    if (region_view_overlap(&g->rv, v)) rc = flush(r, g);
  }
  return rc;
}

int redux_flush_overlapping(pto_run *r, const pto_tensor *t) {
  if (!r->rx.openm) return PTO_OK;
  region_view v;
  region_view_init(t, &v);
  return flush_overlapping_view(r, &v);
}

/* The same view: same first byte (rv, normalised by submit's validation),
 * dtype, shape and strides. */
static bool same_view(const redux_group *g, const pto_tensor *t, const region_view *rv) {
  if (!g->rv.known || !rv->known || g->rv.lo != rv->lo || g->target.dtype != t->dtype ||
      g->target.ndims != t->ndims)
    return false;
  for (int d = 0; d < t->ndims; d++)
    if (g->target.shape[d] != t->shape[d] || g->target.stride[d] != t->stride[d]) return false;
  return true;
}

/* Opens a group for view t with op. Its slab has up to REDUX_SLOTS_MAX
 * slots, at most a quarter of the heap ring and of the dependency pool,
 * and never fewer than the task's `units` copies: the largest such slab
 * (halving down to `units` slots) that the ring has room for now with the
 * OUTPUT buffers of the task (`a`) after it; without room for even
 * `units` slots it waits for those alone. The larger slab is never waited
 * for: a scope's held OUTPUT can keep it from ever coming while the
 * task's own copies fit (it was refused as a scope deadlock). A smaller
 * slab only folds sooner (redux_prepare, redux_submitted). `busy` marks
 * the groups this submit already uses. */
static int open_group(pto_run *r, const pto_tensor *t, const region_view *rv, int op, int arg,
                      int units, const pto_args *a, const bool *busy, int *gi) {
  redux_table *x = &r->rx;
  size_t es = pto_dtype_size((pto_dtype)t->dtype);
  /* a view's bytes fit a size_t, its copies for up to INT32_MAX units
   * may not: a product that wraps must not pass for small */
  uint64_t slot = (uint64_t)redux_slot_elems(t) * es, need;
  bool wraps = __builtin_mul_overflow(slot, (uint64_t)units, &need);
  if (wraps || need > r->heap.cap) {
    char bytes[32] = "2^64 or more";
    if (!wraps) snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)need);
    run_fail(r, PTO_EHEAP_DEADLOCK, PTO_TASK_NONE, -1,
             "submit #%lld: tensor argument %d (REDUX): its private copies, one per core of the "
             "task (%d), need %s bytes but heap_bytes is %llu",
             (long long)r->next_id, arg, units, bytes, (unsigned long long)r->heap.cap);
    return run_latched(r);
  }
  uint64_t nslots = REDUX_SLOTS_MAX;
  if (nslots > r->heap.cap / 4 / slot) nslots = r->heap.cap / 4 / slot;
  if (nslots > r->ndeps / 4) nslots = r->ndeps / 4;
  if (nslots < (uint64_t)units) nslots = (uint64_t)units;
  int free_g = -1, oldest = -1;
  for (int i = 0; i < REDUX_GROUPS; i++) {
    if (!x->g[i].open && free_g < 0) free_g = i;
    if (x->g[i].open && !busy[i] && (oldest < 0 || x->g[i].seq < x->g[oldest].seq)) oldest = i;
  }
  int rc;
  if (free_g < 0) { /* all open: the oldest one not in this submit goes */
    if ((rc = flush(r, &x->g[oldest]))) return rc;
    free_g = oldest;
  }
  void *slab = NULL;
  for (;;) {
    rc = x->orch.heap_take(r, nslots * slot, a, false, &slab);
    if (rc <= 0 || nslots == (uint64_t)units) break;
    nslots = nslots / 2 > (uint64_t)units ? nslots / 2 : (uint64_t)units;
  }
  if (rc > 0) { /* no room now: free what the other open groups hold, then wait */
    for (int i = 0; i < REDUX_GROUPS; i++)
      if (!busy[i] && (rc = flush(r, &x->g[i]))) return rc;
    rc = x->orch.heap_take(r, nslots * slot, NULL, true, &slab);
  }
  if (rc) return rc;
  redux_group *g = &x->g[free_g];
  g->open = true;
  g->op = op;
  g->priority = 0;
  g->seq = ++x->seq;
  g->target = *t;
  g->rv = *rv;
  g->slab = slab;
  g->slot_elems = redux_slot_elems(t);
  g->es = (int64_t)es;
  g->numel = pto_tensor_numel(t);
  pto_tensor copy = *t; /* a copy's layout: contiguous */
  tensor_set_packed_strides(&copy);
  memcpy(g->stride, copy.stride, sizeof g->stride);
  g->nslots = (int)nslots;
  g->used = 0;
  g->ntasks = 0;
  g->maxtasks = r->ndeps / 4 < REDUX_SLOTS_MAX ? (int)(r->ndeps / 4) : REDUX_SLOTS_MAX;
  if (g->maxtasks < 1) g->maxtasks = 1;
  x->openm |= 1u << free_g;
  *gi = free_g;
  return PTO_OK;
}

/* The accesses tracked against a group's bytes (OUTPUT is a fresh
 * buffer, NO_DEP is never tracked), a bit per access mode. */
#define TOUCHES_GROUPS                                                                             \
  (1u << PTO_INPUT | 1u << PTO_OUTPUT_EXISTING | 1u << PTO_INOUT | 1u << PTO_COMMUTE)

/* The checks of one REDUX argument that need no group. */
static int check_arg(pto_run *r, const pto_args *a, const region_view *rv, int i) {
  int op = a->redux_op[i];
  const pto_tensor *t = &a->tensors[i];
  const redux_user_op *u = user_op(r->chip, op);
  if (!u && (op < 0 || op >= PTO_REDUX_BUILTINS))
    return redux_fail(r, i,
                      "unknown op %d (the built-ins are 0..%d: sum, prod, max, min; %d op%s "
                      "registered from %d)",
                      op, PTO_REDUX_BUILTINS - 1, r->chip->nredux_ops,
                      r->chip->nredux_ops == 1 ? "" : "s", PTO_REDUX_USER);
  if (u && u->dtype != t->dtype)
    return redux_fail(r, i, "op '%s' reduces %s but the view is %s", u->name,
                      pto_dtype_name((pto_dtype)u->dtype), pto_dtype_name((pto_dtype)t->dtype));
  for (int j = 0; j < a->ntensors; j++)
    if (j != i && a->access[j] != PTO_OUTPUT && region_view_overlap(&rv[i], &rv[j]))
      return redux_fail(r, i,
                        "its bytes overlap tensor argument %d (%s): the kernel sees only a "
                        "private copy of a REDUX view, so the task may not access those bytes "
                        "otherwise",
                        j, tensor_access_name(a->access[j]));
  return PTO_OK;
}

/* The open group of view t (rv) with op, or -1. The previous
 * contribution's group is looked at first: a reduction loop's. */
static int find_group(redux_table *x, const pto_tensor *t, const region_view *rv, int op) {
  if (x->openm >> x->last & 1 && x->g[x->last].op == op && same_view(&x->g[x->last], t, rv))
    return x->last;
  for (uint32_t m = x->openm & ~(1u << x->last); m; m &= m - 1) {
    int k = __builtin_ctz(m);
    if (x->g[k].op == op && same_view(&x->g[k], t, rv)) return k;
  }
  return -1;
}

int redux_prepare(pto_run *r, const pto_args *a, const region_view *rv, uint32_t redux, int units,
                  redux_plan *p) {
  redux_table *x = &r->rx;
  p->mask = 0;
  p->units = units < 1 ? 1 : units; /* a dummy's copy stays the identity */
  if (!redux && !x->openm) return PTO_OK;
  int nt = a ? a->ntensors : 0;
  uint32_t touch = 0;                                     /* the arguments tracked against groups */
  for (int i = 0; i < nt && i < PTO_MAX_TENSOR_ARGS; i++) /* (nt is: the bound is gcc's) */
    touch |= (TOUCHES_GROUPS >> a->access[i] & 1) << i;
  p->orch_init = units < 1 || r->contract;
  int rc;
  uint32_t ninth = redux; /* the arguments past the first REDUX_GROUPS (no libgcc popcount) */
  for (int k = 0; k < REDUX_GROUPS && ninth; k++)
    ninth &= ninth - 1;
  if (ninth)
    return redux_fail(r, __builtin_ctz(ninth), "a task has at most %d REDUX arguments",
                      REDUX_GROUPS);
  if (redux && r->scope_depth > 0 && r->scopes[r->scope_depth].mode == PTO_SCOPE_MANUAL)
    return redux_fail(r, __builtin_ctz(redux),
                      "not inside a manual scope: the combine task is ordered by inferred "
                      "dependencies");
  for (uint32_t m = redux; m; m &= m - 1)
    if ((rc = check_arg(r, a, rv, __builtin_ctz(m)))) return rc;
  /* the task's other accesses come after the contributions so far */
  for (uint32_t m = touch; m && x->openm; m &= m - 1)
    if ((rc = flush_overlapping_view(r, &rv[__builtin_ctz(m)]))) return rc;
  bool busy[REDUX_GROUPS] = {false};
  for (int k = 0; redux; redux &= redux - 1, k++) {
    int i = __builtin_ctz(redux);
    const pto_tensor *t = &a->tensors[i];
    int gi = find_group(x, t, &rv[i], a->redux_op[i]);
    if (gi >= 0 && x->g[gi].used + p->units > x->g[gi].nslots) { /* its copies do not fit */
      if ((rc = flush(r, &x->g[gi]))) return rc;
      gi = -1;
    }
    if (gi < 0) { /* a new view or op: what it overlaps is folded first */
      if ((rc = flush_overlapping_view(r, &rv[i]))) return rc;
      if ((rc = open_group(r, t, &rv[i], a->redux_op[i], i, p->units, a, busy, &gi))) return rc;
    }
    busy[gi] = true;
    x->last = gi;
    p->group[i] = (int8_t)gi;
    p->op[k] = (uint8_t)a->redux_op[i];
    p->mask |= 1u << i;
  }
  return PTO_OK;
}

void redux_identity_copies(const pto_chip *chip, int op, const pto_tensor *v, int units) {
  size_t es = pto_dtype_size((pto_dtype)v->dtype);
  for (int u = 0; u < units; u++)
    identity(chip, op, v->dtype, (uint8_t *)v->buf + (size_t)(u * redux_slot_elems(v)) * es,
             pto_tensor_numel(v));
}

void redux_unit_identity(const pto_chip *chip, const pto_tensor *ts, uint32_t mask,
                         const uint8_t *ops) {
  for (int k = 0; mask; mask &= mask - 1, k++) {
    const pto_tensor *v = &ts[__builtin_ctz(mask)];
    identity(chip, ops[k], v->dtype, v->buf, pto_tensor_numel(v)); /* contiguous, offset 0 */
  }
}

void redux_args(pto_run *r, const redux_plan *p, pto_tensor *tensors) {
  for (uint32_t m = p->mask; m; m &= m - 1) {
    int i = __builtin_ctz(m);
    const redux_group *g = &r->rx.g[p->group[i]];
    /* unit 0's copy, contiguous; the buffer holds every unit's (redux_unit_tensors) */
    pto_tensor *v = &tensors[i];
    v->buf = g->slab + (size_t)(g->used * g->slot_elems) * g->es;
    v->buf_bytes = (size_t)((p->units - 1) * g->slot_elems + g->numel) * g->es;
    v->offset = 0;
    v->alloc_tag = 0;
    memcpy(v->stride, g->stride, sizeof v->stride);
    if (p->orch_init) redux_identity_copies(r->chip, g->op, v, p->units);
  }
}

int redux_submitted(pto_run *r, const redux_plan *p, pto_task_id id, int priority) {
  int rc = PTO_OK;
  for (uint32_t m = p->mask; m; m &= m - 1) {
    redux_group *g = &r->rx.g[p->group[__builtin_ctz(m)]];
    g->contrib[g->ntasks++] = id;
    g->used += p->units;
    if (priority > g->priority) g->priority = priority;
  }
  for (uint32_t m = p->mask; m && !rc; m &= m - 1) { /* full: fold now, its slab comes back */
    redux_group *g = &r->rx.g[p->group[__builtin_ctz(m)]];
    if (g->used == g->nslots || g->ntasks == g->maxtasks) rc = flush(r, g);
  }
  return rc;
}
