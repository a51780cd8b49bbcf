/* drain_broken.c — a deliberately broken drain protocol, kept only in the
 * test tree so that the interleaving explorer can show that it finds the
 * reference's ABA failure. It is src/chip/drain.c with one change, the one
 * the reference fixed: the acknowledgement token carries no attempt tag,
 * only a flag and the capacity. A token left over from attempt 1 then
 * passes for an acknowledgement of attempt 2, and the coordinator combines
 * capacities from two attempts. Included by test_drain_explorer.c (the
 * test glob builds only test_*.c); every symbol is static and prefixed
 * broken_. */
#include "chip/drain.h"

#define BROKEN_ACK_FLAG 0x80000000u

static inline uint64_t broken_pack(uint32_t att, uint32_t payload) {
  return (uint64_t)att << 32 | payload;
}
static inline uint32_t broken_tag(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint32_t broken_val(uint64_t w) { return (uint32_t)w; }
static inline int broken_clamp(int cap, int need) { return cap < 0 ? 0 : cap > need ? need : cap; }

/* THE BUG: the token says "acknowledged", not "acknowledged attempt A". */
static inline bool broken_token_ok(uint64_t t, uint32_t att) {
  (void)att;
  return (broken_val(t) & BROKEN_ACK_FLAG) != 0;
}
static inline uint32_t broken_token_cap(uint64_t t) { return broken_val(t) & ~BROKEN_ACK_FLAG; }

static int broken_ack(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int i = p->sched;
  for (int c = 2 * i + 1; c <= 2 * i + 2 && c < s->nsched; c++) {
    uint64_t t = atomic_load_explicit(&s->slot[c].token, memory_order_acquire);
    if (!broken_token_ok(t, p->att)) return DRAIN_WAITING;
  }
  int cap = broken_clamp(ops->capacity(env, i), p->need);
  p->cap = p->hint = cap;
  atomic_store_explicit(&s->slot[i].token, (uint64_t)(BROKEN_ACK_FLAG | (uint32_t)cap),
                        memory_order_release);
  p->phase = i == 0 ? DRAIN_PH_DECIDE : DRAIN_PH_WAIT_GO;
  return DRAIN_PROGRESS;
}

static int broken_stage(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int i = p->sched;
  uint64_t q = atomic_load_explicit(&s->slot[i].quota, memory_order_relaxed);
  if (broken_tag(q) != p->att) return DRAIN_WAITING;
  int first = (int)(broken_val(q) >> 16), n = (int)(broken_val(q) & 0xffff);
  if (n > 0 && ops->stage(env, i, first, n) != 0) {
    p->phase = DRAIN_PH_IDLE;
    return DRAIN_WAITING;
  }
  atomic_store_explicit(&s->slot[i].staged, broken_pack(p->att, (uint32_t)n), memory_order_release);
  p->phase = i == 0 ? DRAIN_PH_COLLECT : DRAIN_PH_STAGED;
  return DRAIN_STAGED;
}

static int broken_wait_go(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  uint64_t g = atomic_load_explicit(&s->go, memory_order_acquire);
  if (g == broken_pack(p->att, 1)) return broken_stage(s, p, ops, env);
  int cap = broken_clamp(ops->capacity(env, p->sched), p->need);
  if (cap <= p->hint) return DRAIN_WAITING;
  p->hint = cap;
  atomic_store_explicit(&s->slot[p->sched].hint, broken_pack(p->att, (uint32_t)cap),
                        memory_order_relaxed);
  return DRAIN_PROGRESS;
}

static int broken_decide(drain_state *s, drain_part *p) {
  uint32_t caps[DRAIN_MAX_SCHED];
  int sum = 0;
  for (int j = 0; j < s->nsched; j++) {
    uint64_t t = atomic_load_explicit(&s->slot[j].token, memory_order_relaxed);
    if (!broken_token_ok(t, p->att)) return DRAIN_WAITING;
    caps[j] = broken_token_cap(t);
    sum += (int)caps[j];
  }
  if (sum < p->need) {
    p->phase = DRAIN_PH_SHORT;
    return DRAIN_PROGRESS;
  }
  int first = 0;
  for (int j = 0; j < s->nsched; j++) {
    int q = (int)caps[j] < p->need - first ? (int)caps[j] : p->need - first;
    atomic_store_explicit(&s->slot[j].quota, broken_pack(p->att, (uint32_t)(first << 16 | q)),
                          memory_order_relaxed);
    first += q;
  }
  atomic_store_explicit(&s->go, broken_pack(p->att, 1), memory_order_release);
  p->phase = DRAIN_PH_STAGE;
  return DRAIN_PROGRESS;
}

static int broken_short(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  int sum = broken_clamp(ops->capacity(env, 0), p->need);
  for (int j = 1; j < s->nsched; j++) {
    uint64_t h = atomic_load_explicit(&s->slot[j].hint, memory_order_relaxed);
    if (broken_tag(h) == p->att)
      sum += (int)broken_val(h);
    else
      sum += (int)broken_token_cap(atomic_load_explicit(&s->slot[j].token, memory_order_relaxed));
  }
  if (sum < p->need) return DRAIN_WAITING;
  uint32_t next = p->att + 1 == 0 ? 1 : p->att + 1;
  atomic_store_explicit(&s->attempt, next, memory_order_release);
  return DRAIN_PROGRESS;
}

static int broken_collect(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  for (int j = 0; j < s->nsched; j++) {
    uint64_t r = atomic_load_explicit(&s->slot[j].staged, memory_order_acquire);
    if (broken_tag(r) != p->att) return DRAIN_WAITING;
  }
  ops->launch(env, p->task_id);
  uint32_t first = atomic_load_explicit(&s->first_attempt, memory_order_relaxed);
  uint64_t n = (uint64_t)(uint32_t)(p->att - first) + 1;
  atomic_store_explicit(&s->drains, atomic_load_explicit(&s->drains, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&s->attempts, atomic_load_explicit(&s->attempts, memory_order_relaxed) + n,
                        memory_order_relaxed);
  if (n > atomic_load_explicit(&s->max_attempts, memory_order_relaxed))
    atomic_store_explicit(&s->max_attempts, n, memory_order_relaxed);
  atomic_store_explicit(&s->ended, p->att, memory_order_release);
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  p->phase = DRAIN_PH_IDLE;
  return DRAIN_LAUNCHED;
}

/* Same entry shape as drain_step(). */
static int broken_drain_step(drain_state *s, drain_part *p, const drain_ops *ops, void *env) {
  if (ops->run_ended(env)) {
    p->phase = DRAIN_PH_IDLE;
    return DRAIN_NONE;
  }
  uint32_t a = atomic_load_explicit(&s->attempt, memory_order_acquire);
  uint32_t e = atomic_load_explicit(&s->ended, memory_order_acquire);
  if (a == e) {
    p->att = a;
    p->phase = DRAIN_PH_IDLE;
    return DRAIN_NONE;
  }
  if (a != p->att) {
    p->att = a;
    p->phase = DRAIN_PH_ACK;
    p->need = atomic_load_explicit(&s->block_num, memory_order_relaxed);
    p->task_id = atomic_load_explicit(&s->task_id, memory_order_relaxed);
    p->cap = p->hint = 0;
  }
  switch (p->phase) {
  case DRAIN_PH_ACK: return broken_ack(s, p, ops, env);
  case DRAIN_PH_WAIT_GO: return broken_wait_go(s, p, ops, env);
  case DRAIN_PH_DECIDE: return broken_decide(s, p);
  case DRAIN_PH_SHORT: return broken_short(s, p, ops, env);
  case DRAIN_PH_STAGE: return broken_stage(s, p, ops, env);
  case DRAIN_PH_COLLECT: return broken_collect(s, p, ops, env);
  default: return DRAIN_WAITING;
  }
}
