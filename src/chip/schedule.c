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

/* A core's block that may wait for another chip (a single-core block of
 * its own: not a MIX block's part, not a gang's), and its waits' hand-over
 * with the controller (docs/schedules.md, "Blocks that wait"). At a
 * signal wait the block asks (ASK, with whether its condition held); the
 * controller answers GO (wait here) or YIELD (the block is parked, its core
 * kept, and the controller runs other actions); a parked block whose
 * condition came says READY and waits for GO, which the controller gives
 * when nothing else is enabled (a resume). */
enum { PK_IDLE, PK_ASK, PK_GO, PK_YIELD, PK_READY };
typedef struct park_slot {
  _Atomic int state; /* release/acquire: the hand-over of the fields below */
  bool may_yield;    /* set before the dispatch that publishes it */
  bool cond_now;     /* ASK: the block's condition when it asked */
  /* the controller's */
  bool parked;
  task *t;
  pto_task_id id;
  int32_t block;
  int32_t waits; /* the block's waits so far */
  uint64_t prio;
} park_slot;

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
  /* blocks that wait (park_slot), by core; how many are parked */
  park_slot *park;
  int nparked;
  action *held; /* scratch: start actions with no free cores now (step_seeded) */
  uint32_t held_cap;
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
  task_set_state(r, t, TASK_READY, memory_order_relaxed);
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
  park_slot *p; /* a block that may wait: its asks end the wait too */
} fin_wait;

static bool all_finished(const fin_wait *w) {
  for (int i = 0; i < w->n; i++) {
    core *c = &w->r->cores[w->cores[i]];
    /* acquire pairs with the core's release of `finished`: its writes */
    if (atomic_load_explicit(&c->finished, memory_order_acquire) < c->issued) return false;
  }
  return true;
}

static bool settled(void *p) {
  fin_wait *w = p;
  /* acquire pairs with the block's release of ASK: cond_now */
  return run_stopping(w->r) || all_finished(w) ||
         (w->p && atomic_load_explicit(&w->p->state, memory_order_acquire) == PK_ASK);
}

static void record_point(sched_ctl *x) {
  if (!x->record || x->point_written) return;
  rec_item it = {.kind = REC_ORCH, .task = x->r->next_id, .kernel = x->point == 'W'};
  rec_buf_item(&x->body, &it);
  x->point_written = true;
}

/* Whether a block asking at a wait yields: from the seed's run, when its
 * condition does not hold and the controller has something else to do (an
 * enabled action, a parked block to resume later, or, after a submit, the
 * orchestration to go on with: the signal may need a task it has yet to
 * submit); from the record, at the wait it yielded at. */
static bool yields(sched_ctl *x, park_slot *p) {
  if (!x->replay) return !p->cond_now && (x->nacts > 0 || x->nparked > 0 || x->point == 'O');
  const rec_item *it = &x->next;
  if (x->stopped || it->kind != REC_YIELD || it->task != p->id || it->block != p->block)
    return false;
  if (it->units < p->waits) {
    diverge(x, p->id, it->line, "block %d of task %lld waited %d times without yielding", p->block,
            (long long)p->id, p->waits);
    return false;
  }
  if (it->units > p->waits) return false;
  read_next(x);
  return true;
}

/* Waits until the blocks on cores[0..n) finished, answering the waits of
 * a block that may wait (p); false when it yielded (it is parked). */
static bool run_to_end(sched_ctl *x, const int *cores, int n, park_slot *p) {
  pto_run *r = x->r;
  fin_wait w = {r, cores, n, p};
  for (;;) {
    pto_wait(&r->orch_ev, settled, &w, UINT64_MAX);
    if (run_stopping(r) || all_finished(&w)) return true;
    p->waits++;
    bool y = yields(x, p);
    if (y && x->record) {
      rec_item it = {.kind = REC_YIELD, .task = p->id, .block = p->block, .units = p->waits};
      rec_buf_item(&x->body, &it);
    }
    /* release: the answer after what the controller did; the core's
     * event wakes the block */
    atomic_store_explicit(&p->state, y ? PK_YIELD : PK_GO, memory_order_release);
    pto_event_signal(&r->cores[cores[0]].ev);
    if (y) {
      p->parked = true;
      x->nparked++;
      return false;
    }
  }
}

/* Block `block` of t ended on cores[0..n): its completion is enabled
 * (or its async one) with priority prio. */
static void block_ended(sched_ctl *x, task *t, int32_t block, const int *cores, int n,
                        uint64_t prio) {
  pto_run *r = x->r;
  int units = 0;
  for (int j = 0; j < n; j++) {
    core *c = &r->cores[cores[j]];
    c->seen = c->issued;
    if (c->slot[c->issued & 1].deferred) /* it completes when its token comes */
      act_add(x, ACT_ASYNC, t, block, 0, pct_prio_last(&x->pct));
    else
      units++;
  }
  if (units) act_add(x, ACT_DONE, t, block, units, prio);
}

/* Dispatches nb blocks of t on the placement, runs them to their ends
 * (a gang's blocks start together) or, for a single-core block, until it
 * yields at a wait, and enables their completions. */
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
  /* a block alone on its core may wait for other chips without holding
   * the chip up (docs/schedules.md, "Blocks that wait") */
  park_slot *p = nb == 1 && !t->sync_start && x->first[1] == 1 ? &x->park[x->cores[0]] : NULL;
  for (int j = 0; j < x->first[nb]; j++) {
    park_slot *q = &x->park[x->cores[j]];
    q->may_yield = q == p;
    atomic_store_explicit(&q->state, PK_IDLE, memory_order_relaxed); /* dispatch publishes */
  }
  if (p) {
    p->t = t;
    p->id = t->id;
    p->block = x->blocks[0];
    p->prio = a->prio;
    p->waits = 0;
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
  x->blocks_run += nb;
  if (!run_to_end(x, x->cores, x->first[nb], p) || run_stopping(r)) return;
  for (int i = 0; i < nb; i++)
    block_ended(x, t, x->blocks[i], x->cores + x->first[i], x->first[i + 1] - x->first[i], a->prio);
}

/* Resumes the block parked on core `cid` (its condition came, or its wait
 * ended: it finished) and runs it to its end or its next yield. */
static void exec_resume(sched_ctl *x, int cid) {
  park_slot *p = &x->park[cid];
  if (x->record) {
    rec_item it = {.kind = REC_RESUME, .task = p->id, .block = p->block};
    rec_buf_item(&x->body, &it);
  }
  p->parked = false;
  x->nparked--;
  /* acquire pairs with the block's release of READY */
  if (atomic_load_explicit(&p->state, memory_order_acquire) == PK_READY) {
    atomic_store_explicit(&p->state, PK_GO, memory_order_release);
    pto_event_signal(&x->r->cores[cid].ev);
  }
  if (run_to_end(x, &cid, 1, p) && !run_stopping(x->r))
    block_ended(x, p->t, p->block, &cid, 1, p->prio);
}

typedef struct resume_wait {
  sched_ctl *x;
  pto_cond_fn cond; /* the orchestrator's, or NULL */
  void *arg;
  int want; /* a core, or -1: any parked block */
  int got;  /* the core whose block can resume */
} resume_wait;

static bool parked_settled(sched_ctl *x, int cid) {
  core *c = &x->r->cores[cid];
  /* acquire: as settled() */
  return atomic_load_explicit(&x->park[cid].state, memory_order_acquire) == PK_READY ||
         atomic_load_explicit(&c->finished, memory_order_acquire) >= c->issued;
}

/* Until a parked block can resume (the wanted one; else, from the seed's
 * run, the one first in PCT's order among those that can), the
 * orchestrator's condition holds, or the run stops. */
static bool resumable(void *arg) {
  resume_wait *w = arg;
  sched_ctl *x = w->x;
  w->got = -1;
  if (run_stopping(x->r)) return true;
  if (w->want >= 0) {
    if (parked_settled(x, w->want)) w->got = w->want;
  } else {
    for (int i = 0; i < x->r->ncores; i++)
      if (x->park[i].parked && parked_settled(x, i) &&
          (w->got < 0 || x->park[i].prio > x->park[w->got].prio))
        w->got = i;
  }
  return w->got >= 0 || (w->cond && w->cond(w->arg));
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

/* The units (clusters for a MIX block or a gang's, else cores of the
 * block's type) start action a may take now, into x->units: none holding
 * a parked block. *by_cluster says which. */
static int free_units(sched_ctl *x, const action *a, bool *by_cluster) {
  pto_run *r = x->r;
  task *t = a->t;
  const pto_chip_config *c = r->cfg;
  int pc = c->aic_per_cluster + c->aiv_per_cluster;
  int naic = shape_aic(t->shape), per = naic + shape_aiv(t->shape);
  /* a MIX block (or a gang's) takes cores of one cluster; single-core
   * blocks any core of their type: units are clusters or cores */
  *by_cluster = per > 1;
  int nunits = *by_cluster ? c->clusters : r->ncores, n = 0;
  for (int u = 0; u < nunits; u++) {
    bool busy = false;
    for (int k = 0; x->nparked && k < (*by_cluster ? pc : 1); k++)
      busy = busy || x->park[*by_cluster ? u * pc + k : u].parked;
    if (!busy && (*by_cluster || (r->cores[u].type == PTO_CORE_AIC) == (naic == 1)))
      x->units[n++] = u;
  }
  return n;
}

/* A placement for start action a: random cores of the block's shape (a
 * MIX block: a random cluster), distinct for a gang's blocks. */
static int place_random(sched_ctl *x, const action *a) {
  pto_run *r = x->r;
  task *t = a->t;
  const pto_chip_config *c = r->cfg;
  int pc = c->aic_per_cluster + c->aiv_per_cluster;
  int naic = shape_aic(t->shape), naiv = shape_aiv(t->shape), per = naic + naiv;
  int nb = t->sync_start ? t->block_num : 1;
  bool by_cluster;
  int *units = x->units, n = free_units(x, a, &by_cluster);
  if (n < nb) { /* validate() admits only blocks the chip can hold; step_seeded waits for parked */
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

/* Whether start action a has the cores it needs now (parked blocks hold
 * theirs); draws nothing from the seed. */
static bool placeable(sched_ctl *x, const action *a) {
  bool by_cluster;
  return a->kind != ACT_START || !x->nparked ||
         free_units(x, a, &by_cluster) >= (a->t->sync_start ? a->t->block_num : 1);
}

static bool step_seeded(sched_ctl *x) {
  uint64_t low;
  /* a change point: the first in line goes last (an async completion is
   * last already) */
  if (pct_step(&x->pct, &low) && x->acts[0].kind != ACT_ASYNC) {
    x->acts[0].prio = low;
    sift_down(x->acts, x->nacts, 0);
  }
  /* the first in line that can run now: starts without free cores wait
   * for a parked block to end */
  uint32_t nheld = 0;
  if (x->nparked && x->held_cap < x->nacts) {
    action *h = realloc(x->held, sizeof *h * x->nacts);
    if (!h) {
      run_fail(x->r, PTO_ENOMEM, PTO_TASK_NONE, -1, "controlled schedule: out of memory");
      return false;
    }
    x->held = h;
    x->held_cap = x->nacts;
  }
  while (x->nacts && !placeable(x, &x->acts[0]))
    x->held[nheld++] = act_take(x, 0);
  bool any = x->nacts > 0;
  action a = any ? act_take(x, 0) : (action){0};
  for (uint32_t i = 0; i < nheld; i++)
    act_add(x, x->held[i].kind, x->held[i].t, x->held[i].block, x->held[i].units, x->held[i].prio);
  if (!any) return false;
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
                 r->cores[cid].cluster != r->cores[it->cores[it->first[i]]].cluster ||
                 x->park[cid].parked;
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

/* A recorded resume: the block parked on the core the record names
 * resumes once it can (its condition came), as when it was recorded. */
static bool resume_recorded(sched_ctl *x) {
  const rec_item *it = &x->next;
  int cid = -1;
  for (int i = 0; i < x->r->ncores && cid < 0; i++)
    if (x->park[i].parked && x->park[i].id == it->task && x->park[i].block == it->block) cid = i;
  if (cid < 0) {
    diverge(x, PTO_TASK_NONE, it->line,
            "the record resumes block %d of task %lld, which is not "
            "parked at a wait here",
            it->block, (long long)it->task);
    return false;
  }
  resume_wait w = {x, NULL, NULL, cid, -1};
  pto_wait(&x->r->orch_ev, resumable, &w, UINT64_MAX);
  if (w.got < 0) return false; /* the run stops */
  read_next(x);
  record_point(x);
  exec_resume(x, cid);
  return true;
}

static bool step_recorded(sched_ctl *x) {
  pto_run *r = x->r;
  rec_item *it = &x->next;
  if (it->kind == REC_RESUME) return resume_recorded(x);
  if (it->kind == REC_YIELD) { /* yields are taken where the block waits */
    diverge(x, it->task >= 0 && it->task < r->next_id ? it->task : PTO_TASK_NONE, it->line,
            "block %d of task %lld does not wait here (the record has it yield at its wait %d)",
            it->block, (long long)it->task, it->units);
    return false;
  }
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
  /* the next item first: a yield of this block follows its start */
  read_next(x);
  if (x->stopped) return false;
  exec_action(x, a, nb);
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
      if (!stepped && x->nparked && !run_stopping(r)) {
        /* nothing else to run: a parked block resumes once it can */
        resume_wait w = {x, cond, arg, -1, -1};
        if (!pto_wait(&r->orch_ev, resumable, &w, deadline)) return false;
        if (w.got >= 0) {
          record_point(x);
          exec_resume(x, w.got);
        }
        continue;
      }
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
  free(x->park);
  free(x->held);
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
    x->park = calloc((size_t)max, sizeof *x->park);
  }
  if (!x || !x->blocks || !x->first || !x->cores || !x->units || !x->park) {
    if (x) free(x->blocks), free(x->first), free(x->cores), free(x->units), free(x->park);
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
    /* a record without a seed: one drawn now, kept in the record (which
     * reads back at most INT64_MAX) */
    seed = ((pto_now_ns() ^ ((uint64_t)getpid() << 32)) & INT64_MAX) | 1;
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

/* ---- blocks that wait (a core's thread; docs/schedules.md) ---- */

typedef struct park_wait {
  pto_run *r;
  park_slot *p;
  int from; /* the state waited out */
} park_wait;

static bool state_left(void *arg) {
  park_wait *w = arg;
  /* acquire pairs with the controller's release of its answer */
  return atomic_load_explicit(&w->p->state, memory_order_acquire) != w->from || run_stopping(w->r);
}

/* The block hands its state over and waits for the controller's answer. */
static int park_hand_over(pto_run *r, park_slot *p, int core_id, int state) {
  /* release: cond_now before the controller reads it */
  atomic_store_explicit(&p->state, state, memory_order_release);
  pto_event_signal(&r->orch_ev);
  park_wait w = {r, p, state};
  pto_wait(&r->cores[core_id].ev, state_left, &w, UINT64_MAX);
  return atomic_load_explicit(&p->state, memory_order_acquire);
}

bool schedule_block_wait(const pto_kctx *ctx, pto_cond_fn cond, void *arg) {
  pto_run *r = (pto_run *)ctx->run;
  sched_ctl *x = r ? r->ctl : NULL;
  if (!x || !x->park[ctx->core_id].may_yield || run_stopping(r)) return false;
  park_slot *p = &x->park[ctx->core_id];
  p->cond_now = cond(arg);
  return park_hand_over(r, p, ctx->core_id, PK_ASK) == PK_YIELD;
}

void schedule_block_resume(const pto_kctx *ctx) {
  pto_run *r = (pto_run *)ctx->run;
  if (!run_stopping(r)) park_hand_over(r, &r->ctl->park[ctx->core_id], ctx->core_id, PK_READY);
}
