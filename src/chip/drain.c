/* drain.c — the drain protocol's step functions: claim, tree acknowledgement,
 * coordinator decision (retry or GO with per-scheduler ranges), staging,
 * reports and launch. Owns every word of drain_state; the scheduler owns
 * the cores behind drain_ops. See drain.h for the calling contract and
 * docs/drain.md for the protocol, its invariants and the ABA story.
 *
 * Each step performs at most one store to a word another scheduler reads,
 * and every such word is tagged with the attempt it belongs to, so a step
 * that read attempt A and is overtaken before its store can only publish a
 * word tagged A, which nobody working on another attempt accepts. */
#include "chip/drain.h"

#include <stddef.h>
#include <string.h>

/* ---- tagged words: attempt in the high 32 bits, payload in the low 32 ---- */

static inline uint64_t pack(uint32_t att, uint32_t payload) {
  return (uint64_t)att << 32 | payload;
}
static inline uint32_t tag_of(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint32_t val_of(uint64_t w) { return (uint32_t)w; }

static inline int clamp_cap(int cap, int need) { return cap < 0 ? 0 : cap > need ? need : cap; }

static const char *const phase_names[DRAIN_PH_COUNT] = {
    "IDLE", "ACK", "WAIT_GO", "DECIDE", "SHORT", "STAGE", "STAGED", "COLLECT",
};

const char *drain_phase_name(int phase) {
  return phase >= 0 && phase < DRAIN_PH_COUNT ? phase_names[phase] : "?";
}

const char *drain_result_name(int result) {
  switch (result) {
  case DRAIN_NONE: return "NONE";
  case DRAIN_WAITING: return "WAITING";
  case DRAIN_PROGRESS: return "PROGRESS";
  case DRAIN_STAGED: return "STAGED";
  case DRAIN_LAUNCHED: return "LAUNCHED";
  default: return "?";
  }
}

void drain_init(drain_state *s, int nsched) {
  memset(s, 0, sizeof *s);
  s->nsched = nsched < 1 ? 1 : nsched > DRAIN_MAX_SCHED ? DRAIN_MAX_SCHED : nsched;
  atomic_init(&s->attempt, 0);
  atomic_init(&s->ended, 0);
  atomic_init(&s->busy, 0);
  atomic_init(&s->task_id, -1);
  atomic_init(&s->block_num, 0);
  atomic_init(&s->requester, -1);
  atomic_init(&s->first_attempt, 0);
  atomic_init(&s->go, 0);
  atomic_init(&s->drains, 0);
  atomic_init(&s->attempts, 0);
  atomic_init(&s->max_attempts, 0);
  for (int i = 0; i < DRAIN_MAX_SCHED; i++) {
    atomic_init(&s->slot[i].token, 0);
    atomic_init(&s->slot[i].hint, 0);
    atomic_init(&s->slot[i].quota, 0);
    atomic_init(&s->slot[i].staged, 0);
  }
}

void drain_part_init(drain_part *p, int sched) {
  memset(p, 0, sizeof *p);
  p->sched = sched;
  p->phase = DRAIN_PH_IDLE;
  p->task_id = -1;
}

bool drain_request(drain_state *s, int sched, int64_t task_id, int block_num) {
  if (block_num < 1 || block_num > DRAIN_MAX_BLOCKS) return false;
  int expect = 0;
  /* acquire: pairs with the release store of busy = 0 that ended the
   * previous drain, so its final attempt number is visible below. */
  if (!atomic_compare_exchange_strong_explicit(&s->busy, &expect, 1, memory_order_acquire,
                                               memory_order_relaxed))
    return false;
  /* relaxed: only the holder of the claim writes attempt (the coordinator
   * retries only inside a claimed drain), and the CAS ordered us after it. */
  uint32_t att = atomic_load_explicit(&s->attempt, memory_order_relaxed) + 1;
  if (att == 0) att = 1; /* tag 0 means "never"; skip it on wrap-around */
  /* relaxed: these are published by the release store of attempt below. */
  atomic_store_explicit(&s->task_id, task_id, memory_order_relaxed);
  atomic_store_explicit(&s->block_num, block_num, memory_order_relaxed);
  atomic_store_explicit(&s->requester, sched, memory_order_relaxed);
  atomic_store_explicit(&s->first_attempt, att, memory_order_relaxed);
  /* release: pairs with the acquire load of attempt at the top of
   * drain_step, which then reads the task fields written above. */
  atomic_store_explicit(&s->attempt, att, memory_order_release);
  return true;
}

int64_t drain_task(const drain_state *s) {
  /* relaxed: a diagnostic snapshot for the watchdog, not a decision. */
  if (!atomic_load_explicit(&s->busy, memory_order_relaxed)) return -1;
  return atomic_load_explicit(&s->task_id, memory_order_relaxed);
}

void drain_get_stats(const drain_state *s, drain_stats *out) {
  /* relaxed: single writer (the coordinator); callers read after joining it. */
  out->drains = atomic_load_explicit(&s->drains, memory_order_relaxed);
  out->attempts = atomic_load_explicit(&s->attempts, memory_order_relaxed);
  out->max_attempts = atomic_load_explicit(&s->max_attempts, memory_order_relaxed);
}

/* ---- steps; each returns a drain_step result ---- */

/* Step 2: acknowledge once both children's subtrees acknowledged this
 * attempt. Leaves acknowledge at once. */
static int step_ack(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int i = p->sched;
  for (int c = 2 * i + 1; c <= 2 * i + 2 && c < s->nsched; c++) {
    /* acquire: pairs with the child's release store of its token; it carries
     * the child's whole subtree, which the coordinator reads in DECIDE. */
    uint64_t t = atomic_load_explicit(&s->slot[c].token, memory_order_acquire);
    if (tag_of(t) != p->att) return DRAIN_WAITING;
  }
  int cap = clamp_cap(ops->capacity(env, i), p->need);
  p->cap = p->hint = cap;
  /* release: pairs with the parent's acquire above (or the coordinator's
   * reads in DECIDE); passes on the subtree's tokens acquired here. */
  atomic_store_explicit(&s->slot[i].token, pack(p->att, (uint32_t)cap), memory_order_release);
  p->phase = i == 0 ? DRAIN_PH_DECIDE : DRAIN_PH_WAIT_GO;
  return DRAIN_PROGRESS;
}

/* Step 4 for any scheduler: stage exactly the range the coordinator wrote
 * for this attempt, then report. */
static int step_stage(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int i = p->sched;
  /* relaxed: published by the go word this scheduler acquired (or, for the
   * coordinator, written by this very thread). */
  uint64_t q = atomic_load_explicit(&s->slot[i].quota, memory_order_relaxed);
  if (tag_of(q) != p->att) return DRAIN_WAITING; /* a range from another attempt is never staged */
  int first = (int)(val_of(q) >> 16), n = (int)(val_of(q) & 0xffff);
  if (n > 0 && ops->stage(env, i, first, n) != 0) {
    p->phase = DRAIN_PH_IDLE; /* no report: the caller latches an error */
    return DRAIN_WAITING;
  }
  /* release: pairs with the coordinator's acquire in COLLECT, so the staged
   * cores' payloads are written before launch() starts them. */
  atomic_store_explicit(&s->slot[i].staged, pack(p->att, (uint32_t)n), memory_order_release);
  p->phase = i == 0 ? DRAIN_PH_COLLECT : DRAIN_PH_STAGED;
  return DRAIN_STAGED;
}

/* Steps 3-4 for a non-root: wait for GO of this attempt; meanwhile advertise
 * capacity freed by completions so the coordinator knows when to retry. */
static int step_wait_go(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  /* acquire: pairs with the coordinator's release store of go (the quotas). */
  uint64_t g = atomic_load_explicit(&s->go, memory_order_acquire);
  if (g == pack(p->att, 1)) return step_stage(s, p, ops, env);
  int cap = clamp_cap(ops->capacity(env, p->sched), p->need);
  if (cap <= p->hint) return DRAIN_WAITING;
  p->hint = cap;
  /* relaxed: advisory only; it can trigger a retry but never feeds a range
   * (ranges come from the next attempt's tokens). */
  atomic_store_explicit(&s->slot[p->sched].hint, pack(p->att, (uint32_t)cap), memory_order_relaxed);
  return DRAIN_PROGRESS;
}

/* Step 3 on the coordinator: every token of this attempt is in. */
static int step_decide(drain_state *s, drain_part *p) {
  int n = s->nsched;
  uint32_t caps[DRAIN_MAX_SCHED];
  int sum = 0;
  for (int j = 0; j < n; j++) {
    /* relaxed: the tree's release/acquire chain ending in our children's
     * tokens already ordered every token of this attempt before us. */
    uint64_t t = atomic_load_explicit(&s->slot[j].token, memory_order_relaxed);
    if (tag_of(t) != p->att) return DRAIN_WAITING; /* unreachable: the tree guarantees all are in */
    caps[j] = val_of(t);
    sum += (int)caps[j];
  }
  if (sum < p->need) {
    p->phase = DRAIN_PH_SHORT;
    return DRAIN_PROGRESS;
  }
  int first = 0;
  for (int j = 0; j < n; j++) {
    int q = (int)caps[j] < p->need - first ? (int)caps[j] : p->need - first;
    /* relaxed: published by the release store of go below. */
    atomic_store_explicit(&s->slot[j].quota, pack(p->att, (uint32_t)(first << 16 | q)),
                          memory_order_relaxed);
    first += q;
  }
  /* release: pairs with the acquire of go in step_wait_go (the quotas). */
  atomic_store_explicit(&s->go, pack(p->att, 1), memory_order_release);
  p->phase = DRAIN_PH_STAGE;
  return DRAIN_PROGRESS;
}

/* Step 3, too little capacity: retry once the capacity the schedulers
 * advertise (a lower bound of what they will acknowledge next, since
 * capacity only grows during a drain) would be enough. So a retry never
 * comes up short, and a drain takes at most two attempts. */
static int step_short(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int sum = clamp_cap(ops->capacity(env, 0), p->need);
  for (int j = 1; j < s->nsched; j++) {
    /* relaxed: advisory lower bound, see step_wait_go. */
    uint64_t h = atomic_load_explicit(&s->slot[j].hint, memory_order_relaxed);
    if (tag_of(h) != p->att) /* nothing advertised yet: the acknowledged value */
      /* relaxed: this attempt's token, already ordered before DECIDE. */
      h = atomic_load_explicit(&s->slot[j].token, memory_order_relaxed);
    sum += (int)val_of(h);
  }
  if (sum < p->need) return DRAIN_WAITING;
  uint32_t next = p->att + 1;
  if (next == 0) next = 1;
  /* release: pairs with the acquire of attempt in drain_step; every waiter
   * of this attempt sees the change and abandons its wait. */
  atomic_store_explicit(&s->attempt, next, memory_order_release);
  return DRAIN_PROGRESS; /* the next step joins the new attempt */
}

/* Step 4 end: every scheduler reported; launch and end the drain. */
static int step_collect(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  for (int j = 0; j < s->nsched; j++) {
    /* acquire: pairs with j's release store of staged (its staged payloads). */
    uint64_t r = atomic_load_explicit(&s->slot[j].staged, memory_order_acquire);
    if (tag_of(r) != p->att) return DRAIN_WAITING;
  }
  ops->launch(env, p->task_id);
  /* relaxed: published with attempt by drain_request. */
  uint32_t first = atomic_load_explicit(&s->first_attempt, memory_order_relaxed);
  uint64_t n = (uint64_t)(uint32_t)(p->att - first) + 1;
  /* relaxed: statistics, single writer (the coordinator). */
  atomic_store_explicit(&s->drains, atomic_load_explicit(&s->drains, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&s->attempts, atomic_load_explicit(&s->attempts, memory_order_relaxed) + n,
                        memory_order_relaxed);
  if (n > atomic_load_explicit(&s->max_attempts, memory_order_relaxed))
    atomic_store_explicit(&s->max_attempts, n, memory_order_relaxed);
  /* release: pairs with the acquire of ended in drain_step; staged
   * schedulers leave the drain. */
  atomic_store_explicit(&s->ended, p->att, memory_order_release);
  /* release: pairs with drain_request's acquire CAS, so the next drain
   * starts after every word of this one. */
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  p->phase = DRAIN_PH_IDLE;
  return DRAIN_LAUNCHED;
}

int drain_step(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  if (ops->run_ended(env)) { /* step 5: the run is over; abandon every wait */
    p->phase = DRAIN_PH_IDLE;
    return DRAIN_NONE;
  }
  /* acquire: pairs with the release stores of attempt in drain_request (the
   * task fields) and in step_short. */
  uint32_t a = atomic_load_explicit(&s->attempt, memory_order_acquire);
  /* acquire: pairs with the release store of ended in step_collect. */
  uint32_t e = atomic_load_explicit(&s->ended, memory_order_acquire);
  if (a == e) { /* no drain in progress (or it just ended) */
    p->att = a;
    p->phase = DRAIN_PH_IDLE;
    return DRAIN_NONE;
  }
  if (a != p->att) {
    /* Step 5: a new drain or a retry. Whatever this scheduler was waiting
     * for belongs to another attempt; drop it and acknowledge this one. */
    p->att = a;
    p->phase = DRAIN_PH_ACK;
    /* relaxed: published by the release store of attempt acquired above;
     * they cannot change before this scheduler has staged in this drain. */
    p->need = atomic_load_explicit(&s->block_num, memory_order_relaxed);
    p->task_id = atomic_load_explicit(&s->task_id, memory_order_relaxed);
    p->cap = p->hint = 0;
  }
  switch (p->phase) {
  case DRAIN_PH_ACK: return step_ack(s, p, ops, env);
  case DRAIN_PH_WAIT_GO: return step_wait_go(s, p, ops, env);
  case DRAIN_PH_DECIDE: return step_decide(s, p);
  case DRAIN_PH_SHORT: return step_short(s, p, ops, env);
  case DRAIN_PH_STAGE: return step_stage(s, p, ops, env);
  case DRAIN_PH_COLLECT: return step_collect(s, p, ops, env);
  default: return DRAIN_WAITING; /* STAGED, or IDLE after a failed stage */
  }
}
