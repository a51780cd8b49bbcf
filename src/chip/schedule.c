/* schedule.c — the controller of a controlled schedule (schedule.h): its
 * set of enabled actions, their execution on the cores, the choice of the
 * next one (from a seed: schedule_pct.h; from a record: replay), and the
 * record it writes. Runs on the orchestrator's thread only, but for
 * schedule_async_arrived (any thread). */
#include "chip/schedule.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chip/run.h"
#include "chip/schedule_pct.h"
#include "chip/schedule_record.h"
#include "common/clock.h"

enum { ACT_START, ACT_DONE, ACT_ASYNC };
static const char *const act_names[] = {"start", "completion", "async completion"};

/* An enabled action. START of a gang starts all its blocks (block -1). */
typedef struct action {
  uint8_t kind;
  task *t;
  pto_task_id id;
  int32_t block;
  int32_t units; /* DONE: the block's units that completed on their core */
  uint64_t prio; /* PCT: the highest goes first */
} action;

typedef struct sched_ctl {
  pto_run *r;
  bool replay, record;
  const char *replay_path;
  pct pct;
  action *acts;
  uint32_t nacts, cap;
  /* async completions presented and not yet processed (any thread) */
  pthread_mutex_t lock;
  pto_task_id *arrived;
  uint32_t narrived, cap_arrived;
  /* a start's placement: nb blocks, block i on cores[first[i] .. first[i+1]) */
  int32_t *blocks;
  int *first, *cores;
  int *units; /* scratch: the clusters or cores a placement draws from */
  /* the record being made */
  rec_buf body;
  char point;         /* 'O' or 'W': the hook that runs actions now */
  bool point_written; /* its marker is in the record being made */
  bool marked;        /* replay: this invocation's marker was consumed */
  int64_t blocks_run;
  /* replay */
  rec_reader rd;
  rec_item next; /* the next item of the record, read ahead */
  bool stopped;  /* diverged (latched): no more actions */
} sched_ctl;

/* ---- the action set ---- */

/* The enabled actions are a binary max-heap by priority (PCT runs the
 * highest first): a choice among thousands of ready blocks costs
 * O(log n). A replay finds its recorded action by a scan instead. */
static void act_swap(action *h, uint32_t i, uint32_t j) {
  action a = h[i];
  h[i] = h[j];
  h[j] = a;
}

static void sift_up(action *h, uint32_t i) {
  for (uint32_t p; i > 0 && h[i].prio > h[p = (i - 1) / 2].prio; i = p)
    act_swap(h, i, p);
}

static void sift_down(action *h, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, m = i;
    if (l < n && h[l].prio > h[m].prio) m = l;
    if (l + 1 < n && h[l + 1].prio > h[m].prio) m = l + 1;
    if (m == i) return;
    act_swap(h, i, m);
    i = m;
  }
}

static void act_add(sched_ctl *x, int kind, task *t, int32_t block, int32_t units, uint64_t prio) {
  if (x->nacts == x->cap) {
    uint32_t cap = x->cap ? x->cap * 2 : 256;
    action *a = realloc(x->acts, sizeof *a * cap);
    if (!a) {
      run_fail(x->r, PTO_ENOMEM, t->id, -1, "controlled schedule: out of memory for %u actions",
               cap);
      return;
    }
    x->acts = a;
    x->cap = cap;
  }
  x->acts[x->nacts] = (action){(uint8_t)kind, t, t->id, block, units, prio};
  sift_up(x->acts, x->nacts++);
}

static action act_take(sched_ctl *x, uint32_t i) {
  action a = x->acts[i];
  x->acts[i] = x->acts[--x->nacts];
  if (i < x->nacts) {
    sift_down(x->acts, x->nacts, i);
    sift_up(x->acts, i);
  }
  return a;
}

/* r->ctl_ready: a task became ready. */
static void schedule_ready(pto_run *r, task *t) {
  sched_ctl *x = r->ctl;
  atomic_store_explicit(&t->state, TASK_READY, memory_order_relaxed);
  if (t->sync_start) {
    act_add(x, ACT_START, t, -1, 0, pct_prio(&x->pct));
    return;
  }
  for (int32_t b = 0; b < t->block_num; b++)
    act_add(x, ACT_START, t, b, 0, pct_prio(&x->pct));
}

void schedule_async_arrived(pto_run *r, task *t) {
  sched_ctl *x = r->ctl;
  pthread_mutex_lock(&x->lock);
  if (x->narrived == x->cap_arrived) {
    uint32_t cap = x->cap_arrived ? x->cap_arrived * 2 : 16;
    pto_task_id *a = realloc(x->arrived, sizeof *a * cap);
    if (a) {
      x->arrived = a;
      x->cap_arrived = cap;
    }
  }
  bool ok = x->narrived < x->cap_arrived;
  if (ok) x->arrived[x->narrived++] = t->id;
  pthread_mutex_unlock(&x->lock);
  if (!ok)
    run_fail(r, PTO_ENOMEM, t->id, -1, "controlled schedule: out of memory for async completions");
  pto_event_signal(&r->orch_ev);
}

/* ---- divergence ---- */

static void diverge(sched_ctl *x, pto_task_id task, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void diverge(sched_ctl *x, pto_task_id task, int line, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  x->stopped = true;
  run_fail(x->r, PTO_EREPLAY, task, -1, "replay of %s diverged at line %d: %s", x->replay_path,
           line, msg);
}

static void read_next(sched_ctl *x) {
  char why[200];
  if (rec_next(&x->rd, &x->next, why, sizeof why)) {
    x->stopped = true;
    run_fail(x->r, PTO_EREPLAY, PTO_TASK_NONE, -1, "replay of %s: %s", x->replay_path, why);
  }
}

/* ---- execution ---- */

typedef struct fin_wait {
  pto_run *r;
  const int *cores;
  int n;
} fin_wait;

static bool all_finished(void *p) {
  fin_wait *w = p;
  if (run_stopping(w->r)) return true;
  for (int i = 0; i < w->n; i++) {
    core *c = &w->r->cores[w->cores[i]];
    /* acquire pairs with the core's release of `finished`: its writes */
    if (atomic_load_explicit(&c->finished, memory_order_acquire) < c->issued) return false;
  }
  return true;
}

static void record_point(sched_ctl *x) {
  if (!x->record || x->point_written) return;
  rec_item it = {.kind = REC_ORCH, .task = x->r->next_id, .kernel = x->point == 'W'};
  rec_buf_item(&x->body, &it);
  x->point_written = true;
}

/* Dispatches nb blocks of t on the placement, runs them to their ends
 * (a gang's blocks start together), and enables their completions. */
static void exec_start(sched_ctl *x, const action *a, int nb) {
  pto_run *r = x->r;
  task *t = a->t;
  if (x->record) {
    rec_item it = {.kind = REC_START,
                   .task = t->id,
                   .kernel = t->kernel,
                   .nblocks = nb,
                   .blocks = x->blocks,
                   .first = x->first,
                   .cores = x->cores};
    rec_buf_item(&x->body, &it);
  }
  for (int i = 0; i < nb; i++) {
    int sub = 0;
    for (int j = x->first[i]; j < x->first[i + 1]; j++) {
      core *c = &r->cores[x->cores[j]];
      uint64_t d = ++c->issued;
      payload_set(&c->slot[d & 1], t, x->blocks[i], c->type == PTO_CORE_AIV ? sub++ : 0);
      atomic_store_explicit(&c->slot[d & 1].movable, false, memory_order_relaxed);
      /* release: the payload before the core sees the new id */
      atomic_store_explicit(&c->dispatched, d, memory_order_release);
      pto_event_signal(&c->ev);
    }
  }
  if (t->sync_start) {
    /* the whole gang on idle cores at once: the fast path's launch */
    atomic_fetch_add_explicit(&r->sync_fast, 1, memory_order_relaxed);
    /* release: every block's payload before any of them starts */
    atomic_store_explicit(&t->cohort_go, 1, memory_order_release);
    for (int j = 0; j < x->first[nb]; j++)
      pto_event_signal(&r->cores[x->cores[j]].ev);
  }
  fin_wait w = {r, x->cores, x->first[nb]};
  pto_wait(&r->orch_ev, all_finished, &w, UINT64_MAX);
  if (run_stopping(r)) return;
  x->blocks_run += nb;
  for (int i = 0; i < nb; i++) {
    int units = 0;
    for (int j = x->first[i]; j < x->first[i + 1]; j++) {
      core *c = &r->cores[x->cores[j]];
      r->scheds[c->sched].blocks += j == x->first[i];
      c->seen = c->issued;
      if (c->slot[c->issued & 1].deferred) /* it completes when its token comes */
        act_add(x, ACT_ASYNC, t, x->blocks[i], 0, pct_prio_last(&x->pct));
      else
        units++;
    }
    if (units) act_add(x, ACT_DONE, t, x->blocks[i], units, a->prio);
  }
}

static bool arrived_take(sched_ctl *x, pto_task_id id) {
  pthread_mutex_lock(&x->lock);
  bool found = false;
  for (uint32_t i = 0; i < x->narrived && !found; i++)
    if (x->arrived[i] == id) {
      x->arrived[i] = x->arrived[--x->narrived];
      found = true;
    }
  pthread_mutex_unlock(&x->lock);
  return found;
}

typedef struct arrival_wait {
  sched_ctl *x;
  pto_task_id id;
  bool got;
} arrival_wait;

static bool arrival(void *p) {
  arrival_wait *w = p;
  w->got = arrived_take(w->x, w->id);
  return w->got || run_stopping(w->x->r);
}

static void exec_action(sched_ctl *x, action a, int nb) {
  pto_run *r = x->r;
  record_point(x);
  switch (a.kind) {
  case ACT_START: exec_start(x, &a, nb); break;
  case ACT_DONE:
    if (x->record) {
      rec_item it = {.kind = REC_DONE, .task = a.id, .block = a.block, .units = a.units};
      rec_buf_item(&x->body, &it);
    }
    sched_task_done_unit(r, a.t, a.units);
    break;
  case ACT_ASYNC: {
    if (x->record) rec_buf_item(&x->body, &(rec_item){.kind = REC_ASYNC, .task = a.id});
    /* its token may not have come yet: waited for here (the watchdog
     * names one that never comes) */
    arrival_wait w = {x, a.id, false};
    pto_wait(&r->orch_ev, arrival, &w, UINT64_MAX);
    if (w.got) sched_task_done_unit(r, a.t, 1);
    break;
  }
  }
}

/* ---- choices from the seed ---- */

/* A placement for start action a: random cores of the block's shape (a
 * MIX block: a random cluster), distinct for a gang's blocks. */
static int place_random(sched_ctl *x, const action *a) {
  pto_run *r = x->r;
  task *t = a->t;
  const pto_chip_config *c = r->cfg;
  int pc = c->aic_per_cluster + c->aiv_per_cluster;
  int naic = shape_aic(t->shape), naiv = shape_aiv(t->shape), per = naic + naiv;
  int nb = t->sync_start ? t->block_num : 1;
  /* a MIX block (or a gang's) takes cores of one cluster; single-core
   * blocks any core of their type: units are clusters or cores */
  bool by_cluster = per > 1;
  int nunits = by_cluster ? c->clusters : r->ncores;
  int *units = x->units, n = 0;
  for (int u = 0; u < nunits; u++)
    if (by_cluster || (r->cores[u].type == PTO_CORE_AIC) == (naic == 1)) units[n++] = u;
  if (n < nb) { /* validate() admits only blocks the chip can hold */
    run_fail(r, PTO_EINTERNAL, t->id, -1,
             "controlled schedule: no room for %d blocks of shape %s on this chip", nb,
             shape_name(t->shape));
    return 0;
  }
  int nc = 0;
  for (int i = 0; i < nb; i++) {
    int k = i + (int)pct_below(&x->pct, (uint64_t)(n - i)); /* a partial shuffle */
    int u = units[k];
    units[k] = units[i];
    units[i] = u;
    x->blocks[i] = t->sync_start ? i : a->block;
    x->first[i] = nc;
    if (!by_cluster) {
      x->cores[nc++] = u;
      continue;
    }
    if (naic) x->cores[nc++] = u * pc;
    /* its AIV cores: with one of two needed, a random one */
    int skip = naiv == 1 && c->aiv_per_cluster == 2 ? (int)pct_below(&x->pct, 2) : -1;
    for (int k2 = 0; k2 < c->aiv_per_cluster; k2++)
      if (k2 != skip && nc - x->first[i] < per) x->cores[nc++] = u * pc + c->aic_per_cluster + k2;
  }
  x->first[nb] = nc;
  return nb;
}

static bool step_seeded(sched_ctl *x) {
  uint64_t low;
  /* a change point: the first in line goes last (an async completion is
   * last already) */
  if (pct_step(&x->pct, &low) && x->acts[0].kind != ACT_ASYNC) {
    x->acts[0].prio = low;
    sift_down(x->acts, x->nacts, 0);
  }
  action a = act_take(x, 0);
  int nb = a.kind == ACT_START ? place_random(x, &a) : 0;
  if (a.kind == ACT_START && !nb) return false;
  exec_action(x, a, nb);
  return true;
}

/* ---- choices from the record ---- */

/* Checks the recorded placement of start action a (cores of the right
 * types, one cluster per MIX block, none twice) into x's placement. */
static bool place_recorded(sched_ctl *x, const action *a, const rec_item *it) {
  pto_run *r = x->r;
  task *t = a->t;
  int naic = shape_aic(t->shape), per = naic + shape_aiv(t->shape);
  int nb = t->sync_start ? t->block_num : 1;
  if (it->nblocks != nb) {
    diverge(x, t->id, it->line, "task %lld starts %d blocks at once here, the record %d",
            (long long)t->id, nb, it->nblocks);
    return false;
  }
  for (int i = 0; i < nb; i++) {
    int32_t want = t->sync_start ? i : a->block;
    int n = it->first[i + 1] - it->first[i];
    if (it->blocks[i] != want || n != per) {
      diverge(x, t->id, it->line, "block %d of task %lld (shape %s) does not match the record",
              want, (long long)t->id, shape_name(t->shape));
      return false;
    }
    x->blocks[i] = want;
    x->first[i] = it->first[i];
    for (int j = it->first[i]; j < it->first[i + 1]; j++) {
      int cid = it->cores[j];
      bool aic_slot = naic && j == it->first[i];
      bool bad = cid < 0 || cid >= r->ncores || (r->cores[cid].type == PTO_CORE_AIC) != aic_slot ||
                 r->cores[cid].cluster != r->cores[it->cores[it->first[i]]].cluster;
      for (int k = it->first[0]; k < j && !bad; k++)
        bad = it->cores[k] == cid;
      if (bad) {
        diverge(x, t->id, it->line,
                "core %d cannot run block %d of task %lld (shape %s) on this chip as recorded", cid,
                want, (long long)t->id, shape_name(t->shape));
        return false;
      }
      x->cores[j] = cid;
    }
  }
  x->first[nb] = it->first[nb];
  return true;
}

static bool step_recorded(sched_ctl *x) {
  pto_run *r = x->r;
  rec_item *it = &x->next;
  int kind = it->kind == REC_START ? ACT_START : it->kind == REC_DONE ? ACT_DONE : ACT_ASYNC;
  uint32_t i = 0;
  for (; i < x->nacts; i++) {
    const action *a = &x->acts[i];
    if (a->kind != kind || a->id != it->task) continue;
    if (kind == ACT_START && !a->t->sync_start && (it->nblocks < 1 || a->block != it->blocks[0]))
      continue;
    if (kind == ACT_DONE && (a->block != it->block || a->units != it->units)) continue;
    break;
  }
  if (i == x->nacts) {
    diverge(x, it->task >= 0 && it->task < r->next_id ? it->task : PTO_TASK_NONE, it->line,
            "the record's %s of task %lld%s is not possible here (%s)", act_names[kind],
            (long long)it->task, kind == ACT_ASYNC ? "" : " (that block)",
            it->task >= r->next_id ? "the program has not submitted that task"
                                   : "that task or block is not in that state");
    return false;
  }
  action a = x->acts[i];
  int nb = 0;
  if (kind == ACT_START) {
    if (a.t->kernel != it->kernel) {
      const kernel_rec *k = &r->chip->kernels[a.t->kernel];
      diverge(x, a.id, it->line, "task %lld runs kernel %d '%s', the record kernel %d",
              (long long)a.id, a.t->kernel, k->name, it->kernel);
      return false;
    }
    if (!place_recorded(x, &a, it)) return false;
    nb = it->nblocks;
  }
  act_take(x, i);
  exec_action(x, a, nb);
  read_next(x);
  return true;
}

/* Whether the record's next item is an action for this hook invocation
 * (`point`: 'O' after a submit, 'W' at a wait): each invocation that ran
 * actions begins with its marker, consumed here. A marker this point has
 * passed, or actions left over from an earlier point, are a divergence;
 * a marker of a later point means none here. */
static bool recorded_here(sched_ctl *x, char point) {
  pto_run *r = x->r;
  for (;;) {
    if (x->stopped) return false;
    rec_item *it = &x->next;
    if (it->kind == REC_END) return false;
    if (it->kind != REC_ORCH) {
      if (x->marked) return true;
      diverge(x, PTO_TASK_NONE, it->line,
              "the record has more actions at the orchestrator's previous point (%lld tasks "
              "submitted), where the program went on",
              (long long)r->next_id);
      return false;
    }
    char want = it->kernel ? 'W' : 'O';
    if (!x->marked && want == point && it->task == r->next_id) {
      x->marked = true;
      if (x->record) {
        x->point_written = false;
        record_point(x);
      }
      read_next(x);
      continue;
    }
    if (x->marked) return false; /* a later point's actions */
    bool later = point == 'O' && (it->task > r->next_id || (want == 'W' && it->task == r->next_id));
    if (!later && point == 'O')
      diverge(x, PTO_TASK_NONE, it->line,
              "the record runs actions %s with %lld tasks submitted; the program has submitted "
              "%lld",
              want == 'W' ? "at a wait" : "after a submit", (long long)it->task,
              (long long)r->next_id);
    return false;
  }
}

/* ---- hooks ---- */

void schedule_after_submit(pto_run *r) {
  sched_ctl *x = r->ctl;
  x->point = 'O';
  x->point_written = x->marked = false;
  if (x->replay) {
    if (!x->stopped && r->next_id > x->rd.h.tasks)
      diverge(x, r->next_id - 1, x->next.line,
              "the program submitted task %lld; the record has %lld tasks",
              (long long)(r->next_id - 1), (long long)x->rd.h.tasks);
    while (!run_stopping(r) && recorded_here(x, 'O'))
      if (!step_recorded(x)) return;
    return;
  }
  /* PCT: the orchestrator is one more thread; actions of a higher
   * priority than its own run before it submits on */
  while (!run_stopping(r) && x->nacts && x->acts[0].prio > x->pct.orch_prio)
    if (!step_seeded(x)) return;
}

bool schedule_wait(pto_run *r, pto_cond_fn cond, void *arg, uint64_t deadline) {
  sched_ctl *x = r->ctl;
  x->point = 'W';
  x->point_written = x->marked = false;
  while (!cond(arg)) {
    if (run_stopping(r)) return cond(arg);
    if (pto_now_ns() >= deadline) return false;
    bool stepped;
    if (x->replay) {
      stepped = recorded_here(x, 'W') && step_recorded(x);
      if (!stepped && !x->stopped && !run_stopping(r)) {
        const rec_item *it = &x->next;
        diverge(x, PTO_TASK_NONE, it->line,
                "the program waits (%lld tasks submitted, %lld completed) where the record %s",
                (long long)r->next_id, (long long)atomic_load(&r->completed),
                it->kind == REC_END    ? "ends"
                : it->kind == REC_ORCH ? "has no action for it"
                                       : "has none of its actions left");
      }
    } else {
      stepped = x->nacts && step_seeded(x);
    }
    /* nothing to run: only the deadline or the watchdog ends this wait */
    if (!stepped) return pto_wait(&r->orch_ev, cond, arg, deadline);
  }
  return true;
}

/* ---- a run's beginning and end ---- */

static void ctl_free(sched_ctl *x) {
  if (!x) return;
  free(x->acts);
  free(x->arrived);
  free(x->blocks);
  free(x->first);
  free(x->cores);
  free(x->units);
  rec_buf_free(&x->body);
  rec_close(&x->rd);
  pthread_mutex_destroy(&x->lock);
  free(x);
}

int schedule_begin(pto_run *r) {
  const pto_chip_config *c = r->cfg;
  ctl_free(r->ctl);
  r->ctl = NULL;
  if (!c->schedule_seed && !c->record_path && !c->replay_path) return PTO_OK;
  sched_ctl *x = calloc(1, sizeof *x);
  int max = r->ncores + 1;
  if (x) {
    x->blocks = malloc(sizeof *x->blocks * (size_t)max);
    x->first = malloc(sizeof *x->first * (size_t)(max + 1));
    x->cores = malloc(sizeof *x->cores * (size_t)max);
    x->units = malloc(sizeof *x->units * (size_t)max);
  }
  if (!x || !x->blocks || !x->first || !x->cores || !x->units) {
    if (x) free(x->blocks), free(x->first), free(x->cores), free(x->units);
    free(x);
    run_fail(r, PTO_ENOMEM, PTO_TASK_NONE, -1, "controlled schedule: out of memory");
    return PTO_ENOMEM;
  }
  pthread_mutex_init(&x->lock, NULL);
  x->r = r;
  r->ctl_ready = schedule_ready;
  x->record = c->record_path != NULL;
  x->replay = c->replay_path != NULL;
  x->replay_path = c->replay_path;
  uint64_t seed = c->schedule_seed;
  r->ctl = x;
  if (x->replay) {
    char why[300];
    if (rec_open(&x->rd, c->replay_path, why, sizeof why)) {
      x->stopped = true;
      run_fail(r, PTO_EREPLAY, PTO_TASK_NONE, -1, "%s", why);
      return PTO_EREPLAY;
    }
    const rec_header *h = &x->rd.h;
    if (h->clusters != c->clusters || h->aic != c->aic_per_cluster ||
        h->aiv != c->aiv_per_cluster) {
      diverge(x, PTO_TASK_NONE, 3,
              "recorded on %d clusters of %d AIC + %d AIV, this chip has %d of %d + %d",
              h->clusters, h->aic, h->aiv, c->clusters, c->aic_per_cluster, c->aiv_per_cluster);
      return PTO_EREPLAY;
    }
    for (int k = 0; k < h->nkernels; k++)
      if (k >= r->chip->nkernels || strcmp(x->rd.names[k], r->chip->kernels[k].name) != 0) {
        diverge(x, PTO_TASK_NONE, 4 + k, "kernel %d is '%s' in the record, %s%s%s here", k,
                x->rd.names[k], k < r->chip->nkernels ? "'" : "not registered",
                k < r->chip->nkernels ? r->chip->kernels[k].name : "",
                k < r->chip->nkernels ? "'" : "");
        return PTO_EREPLAY;
      }
    seed = h->seed;
    read_next(x);
  } else if (!seed) {
    /* a record without a seed: one drawn now, kept in the record */
    seed = (pto_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
  }
  pct_init(&x->pct, seed);
  return atomic_load(&r->status);
}

void schedule_end(pto_run *r, bool stuck) {
  sched_ctl *x = r->ctl;
  if (!x) return;
  const pto_chip_config *c = r->cfg;
  int64_t tasks = atomic_load(&r->submitted);
  if (x->replay && !x->stopped && !atomic_load(&r->status)) {
    if (x->next.kind != REC_END)
      diverge(x, PTO_TASK_NONE, x->next.line,
              "the run ended with the record's actions from this line on not made");
    else if (tasks != x->rd.h.tasks)
      diverge(x, PTO_TASK_NONE, x->next.line, "the run submitted %lld tasks, the record %lld",
              (long long)tasks, (long long)x->rd.h.tasks);
  }
  if (x->record) {
    const char *names[PTO_MAX_KERNELS];
    for (int k = 0; k < r->chip->nkernels; k++)
      names[k] = r->chip->kernels[k].name;
    rec_header h = {
        x->pct.seed, c->clusters, c->aic_per_cluster, c->aiv_per_cluster, r->chip->nkernels,
        names,       tasks,       x->blocks_run};
    char why[300];
    if (rec_write(c->record_path, &h, &x->body, why, sizeof why))
      run_fail(r, PTO_ESYSTEM, PTO_TASK_NONE, -1, "%s", why);
  }
  if (!stuck) {
    ctl_free(x);
    r->ctl = NULL;
  }
}
