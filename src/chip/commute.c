/* commute.c — the exclusion table of COMMUTE tasks (see commute.h): its
 * step functions, and cm_ready / cm_done, which take its lock around them
 * (or leave a task to the lock's holder). They touch only the table; the
 * queueing of the granted tasks is the run's (sched.c). */
#include "chip/commute.h"

#include <stdlib.h>

#include "common/spinlock.h"
#include "pto/status.h"

int cm_init(cm_table *c, uint32_t nslots) {
  _Static_assert(sizeof(cm_link) == PTO_CACHELINE, "a link is one line");
  /* line-aligned: a link, read and written under the lock by the
   * orchestrator and the cores in turn, moves as one line, not two */
  c->links = cacheline_calloc(nslots, sizeof *c->links);
  c->held = calloc(nslots, sizeof *c->held);
  if (!c->links || !c->held) {
    free(c->links);
    free(c->held);
    c->links = NULL;
    c->held = NULL;
    return PTO_ENOMEM;
  }
  c->n = nslots;
  atomic_init(&c->lock, 0);
  atomic_init(&c->pending, -1);
  c->nheld = 0; /* nothing held yet: cm_reset walks the held set */
  cm_reset(c);
  return PTO_OK;
}

void cm_destroy(cm_table *c) {
  if (!c->links) return;
  free(c->links);
  free(c->held);
  c->links = NULL;
  c->held = NULL;
}

void cm_reset(cm_table *c) {
  /* a failed run may leave tasks held or waiting: their links are
   * rewritten when their slots are next acquired, but an inbox is read
   * through a hint before that, so the held ones are let go */
  for (int32_t i = 0; i < c->nheld; i++)
    atomic_store_explicit(&c->links[c->held[i].slot].inbox, CM_INBOX_CLOSED, memory_order_relaxed);
  c->nheld = 0;
  for (int i = 0; i < CM_HINTS; i++)
    atomic_store_explicit(&c->hint[i], -1, memory_order_relaxed);
  atomic_store_explicit(&c->pending, -1, memory_order_relaxed);
}

void cm_lock(cm_table *c) {
  for (unsigned i = 0; !cm_trylock(c); i++)
    pto_spin_backoff(i);
}

/* The lock word and the pending head are accessed seq_cst where the
 * Dekker pair needs it (a push, then a read of the lock; an unlock, then
 * a read of the head): in the single order of those accesses, one side
 * sees the other's write. (Not fences: TSan does not model them.) */
bool cm_trylock(cm_table *c) {
  return !atomic_load_explicit(&c->lock, memory_order_seq_cst) &&
         !atomic_exchange_explicit(&c->lock, 1, memory_order_seq_cst);
}

void cm_unlock(cm_table *c) { atomic_store_explicit(&c->lock, 0, memory_order_seq_cst); }

void cm_pend_push(cm_table *c, int32_t t) {
  int32_t h = atomic_load_explicit(&c->pending, memory_order_relaxed);
  do /* release (in seq_cst): the drainer reads t's link after its acquire of the head */
    c->links[t].pend_next = h;
  while (!atomic_compare_exchange_weak_explicit(&c->pending, &h, t, memory_order_seq_cst,
                                                memory_order_relaxed));
}

bool cm_pend_none(cm_table *c) {
  return atomic_load_explicit(&c->pending, memory_order_seq_cst) < 0;
}

void cm_grant(cm_table *c, cm_grants *g, int32_t t) {
  c->links[t].wait_next = -1;
  if (g->tail >= 0)
    c->links[g->tail].wait_next = t;
  else
    g->head = t;
  g->tail = t;
}

void cm_drain(cm_table *c, const cm_ops *ops, cm_grants *g) {
  /* nothing pending: no write to the head's line (a push that this load
   * misses is seen by the check after the unlock) */
  if (atomic_load_explicit(&c->pending, memory_order_relaxed) < 0) return;
  int32_t p = atomic_exchange_explicit(&c->pending, -1, memory_order_acquire);
  int32_t fifo = -1; /* the stack is newest first: reversed, oldest first */
  while (p >= 0) {
    int32_t next = c->links[p].pend_next;
    c->links[p].pend_next = fifo;
    fifo = p;
    p = next;
  }
  for (; fifo >= 0; fifo = c->links[fifo].pend_next)
    if (cm_acquire(c, fifo, ops)) cm_grant(c, g, fifo);
}

/* Drains while tasks are pending and the lock is free (the check after a
 * push, and after an unlock). */
static void settle(cm_table *c, const cm_ops *ops, cm_grants *g) {
  while (!cm_pend_none(c) && cm_trylock(c)) {
    cm_drain(c, ops, g);
    cm_unlock(c);
  }
}

void cm_ready(cm_table *c, int32_t t, bool join, const cm_ops *ops, cm_grants *g) {
  if (join) {
    int32_t h = cm_hinted(c, t, ops);
    if (h >= 0 && cm_join(c, h, t)) return; /* waits on h: no lock */
  }
  if (cm_trylock(c)) { /* free: t acquires at once, after the older pending ones */
    cm_drain(c, ops, g);
    if (cm_acquire(c, t, ops)) cm_grant(c, g, t);
    cm_unlock(c);
  } else {
    cm_pend_push(c, t);
  }
  settle(c, ops, g);
}

void cm_done(cm_table *c, int32_t t, const cm_ops *ops, cm_grants *g) {
  cm_lock(c);
  cm_release(c, t, ops, g);
  cm_drain(c, ops, g);
  cm_unlock(c);
  settle(c, ops, g);
}

static uint32_t hint_of(const cm_link *l) {
  uint64_t h = (l->lo ^ (l->hi * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
  return (uint32_t)(h >> 56) & (CM_HINTS - 1);
}

bool cm_busy(const cm_table *c) {
  return c->nheld > 0 || atomic_load_explicit(&c->pending, memory_order_relaxed) >= 0;
}

int32_t cm_first_held(const cm_table *c) { return c->nheld > 0 ? c->held[0].slot : -1; }

/* t is held, at position pos of the held set, with the views of `as`
 * (t's own link, or that of a releaser whose views t has: then t's span
 * is not read). */
static void held_put(cm_table *c, int32_t t, int32_t pos, const cm_link *as) {
  cm_link *l = &c->links[t];
  /* held now; release: a join that sees it open reads t's link after (cm_join) */
  atomic_store_explicit(&l->inbox, CM_INBOX_EMPTY, memory_order_release);
  atomic_store_explicit(&c->hint[hint_of(as)], t, memory_order_relaxed);
  l->held_pos = pos;
  c->held[pos] = (cm_held){as->lo, as->hi, t, 0};
}

static void held_add(cm_table *c, int32_t t) { held_put(c, t, c->nheld++, &c->links[t]); }

/* The last entry fills t's place: the set has no order. (t's inbox is
 * closed already: cm_release.) */
static void held_remove(cm_table *c, int32_t t) {
  cm_link *l = &c->links[t];
  int32_t last = --c->nheld;
  if (l->held_pos != last) {
    c->held[l->held_pos] = c->held[last];
    c->links[c->held[last].slot].held_pos = l->held_pos;
  }
}

/* A held task that conflicts with t, or -1. */
static int32_t first_conflict(cm_table *c, int32_t t, const cm_ops *ops) {
  const cm_link *l = &c->links[t];
  uint64_t lo = l->lo, hi = l->hi;
  for (int32_t i = 0; i < c->nheld; i++) {
    const cm_held *x = &c->held[i];
    /* the spans first, from the dense array: most held tasks are elsewhere */
    if (x->hi > lo && hi > x->lo && ops->conflict(ops->env, t, x->slot)) return x->slot;
  }
  return -1;
}

/* t waits on holder; `same`: t's views are known to be holder's (then
 * the release need not compare them: cm_link.same). */
static void wait_on(cm_table *c, int32_t holder, int32_t t, bool same) {
  cm_link *h = &c->links[holder];
  c->links[t].wait_next = -1;
  c->links[t].same = same;
  h->wsame &= same;
  if (h->wait_tail >= 0)
    c->links[h->wait_tail].wait_next = t;
  else
    h->wait_head = t;
  h->wait_tail = t;
}

int32_t cm_hinted(cm_table *c, int32_t t, const cm_ops *ops) {
  const cm_link *l = &c->links[t];
  int32_t h = atomic_load_explicit(&c->hint[hint_of(l)], memory_order_relaxed);
  /* h's views are its orchestrator's writes, fixed while h may be held
   * (its slot is reused only after it retires); a stale h fails the join */
  if (h < 0 || h == t || !cm_link_held(&c->links[h]) || !ops->same(ops->env, t, h)) return -1;
  return h;
}

bool cm_join(cm_table *c, int32_t h, int32_t t) {
  cm_link *l = &c->links[t], *x = &c->links[h];
  l->wait_head = l->wait_tail = -1; /* as cm_acquire's: nobody waits on t yet */
  l->wsame = 1;
  l->same = 1;
  int32_t in = atomic_load_explicit(&x->inbox, memory_order_relaxed);
  do {
    if (in == CM_INBOX_CLOSED) return false;
    l->wait_next = in == CM_INBOX_EMPTY ? -1 : in - 2;
    if (in == CM_INBOX_EMPTY) x->inbox_first = t;
    /* release: the releaser reads t's link and inbox_first after its
     * exchange */
  } while (!atomic_compare_exchange_weak_explicit(&x->inbox, &in, t + 2, memory_order_release,
                                                  memory_order_relaxed));
  return true;
}

bool cm_acquire(cm_table *c, int32_t t, const cm_ops *ops) {
  cm_link *l = &c->links[t];
  l->wait_head = l->wait_tail = -1; /* new in the table: nobody waits on it yet */
  l->wsame = 1;
  int32_t h = atomic_load_explicit(&c->hint[hint_of(l)], memory_order_relaxed);
  if (h >= 0 && h != t && cm_link_held(&c->links[h]) && ops->same(ops->env, t, h)) {
    wait_on(c, h, t, true); /* the same bytes as a held task: no scan */
    return false;
  }
  h = first_conflict(c, t, ops);
  if (h >= 0) {
    wait_on(c, h, t, false);
    return false;
  }
  held_add(c, t);
  return true;
}

/* Closes t's inbox; the tasks that joined t lock-free join its waiters,
 * after those that waited under the lock, as they are: one list, newest
 * first, spliced on by its two ends (none of their links is read or
 * written: they are lines the orchestrator wrote; their `same` is their
 * join's, and t's `wsame` stays as it was). */
static void inbox_close(cm_table *c, int32_t t) {
  cm_link *l = &c->links[t];
  int32_t in = atomic_exchange_explicit(&l->inbox, CM_INBOX_CLOSED, memory_order_acquire);
  if (in < 2) return;
  if (l->wait_tail >= 0)
    c->links[l->wait_tail].wait_next = in - 2;
  else
    l->wait_head = in - 2;
  l->wait_tail = l->inbox_first;
}

void cm_release(cm_table *c, int32_t t, const cm_ops *ops, cm_grants *g) {
  inbox_close(c, t); /* t is not held from here */
  cm_link *l = &c->links[t];
  int32_t w = l->wait_head;
  /* t's bytes, and t's waiters, pass to w: w's views compared only when
   * no wait did already (they are in the argument storage, lines the
   * orchestrator wrote: a miss on the core); known from t's own link
   * when every waiter's was (wsame) */
  if (w >= 0 && (l->wsame || c->links[w].same || ops->same(ops->env, w, t))) {
    cm_link *x = &c->links[w];
    int32_t rest = x->wait_next;
    /* w's link is a line written long before (its join); the next
     * release reads rest's the same way, so it is fetched now, a whole
     * hand-over ahead */
    if (rest >= 0) __builtin_prefetch(&c->links[rest], 1);
    /* w takes t's place in the held set, with t's span (w has t's
     * views): no other entry moves (a move writes the moved task's link,
     * another line) and w's span is not read */
    held_put(c, w, l->held_pos, l);
    /* a waiter has no waiters: t's others become w's, all of them with
     * w's views when they had t's */
    x->wait_head = rest;
    x->wait_tail = rest >= 0 ? l->wait_tail : -1;
    x->wsame = l->wsame;
    cm_grant(c, g, w);
    return;
  }
  held_remove(c, t);
  while (w >= 0) {
    int32_t next = c->links[w].wait_next; /* w moves to another list */
    int32_t h = first_conflict(c, w, ops);
    if (h >= 0) {
      wait_on(c, h, w, false);
    } else {
      held_add(c, w);
      cm_grant(c, g, w);
    }
    w = next;
  }
}

bool cm_views_conflict(void *env, int32_t a, int32_t b) {
  const cm_table *c = env;
  const cm_link *x = &c->links[a], *y = &c->links[b];
  if (x->exact && y->exact) return x->lo < y->hi && y->lo < x->hi;
  for (int i = 0; i < x->nviews; i++)
    for (int j = 0; j < y->nviews; j++)
      if (x->views[i].lo < y->views[j].hi && y->views[j].lo < x->views[i].hi &&
          region_view_overlap(&x->views[i], &y->views[j]))
        return true;
  return false;
}

/* One view as another, field by field up to its last level (a whole
 * region_view is about three lines, most of them unused levels; and no
 * zeroing of its padding at every submit). */
static bool view_same(const region_view *a, const region_view *b) {
  if (a->base != b->base || a->lo != b->lo || a->hi != b->hi || a->n != b->n ||
      a->known != b->known || a->dense != b->dense)
    return false;
  for (int32_t i = 0; i < a->n; i++)
    if (a->lv[i].stride != b->lv[i].stride || a->lv[i].extent != b->lv[i].extent) return false;
  return true;
}

bool cm_views_same(void *env, int32_t a, int32_t b) {
  const cm_table *c = env;
  const cm_link *x = &c->links[a], *y = &c->links[b];
  /* the spans first: the same views have the same span */
  if (x->lo != y->lo || x->hi != y->hi || x->nviews != y->nviews) return false;
  /* both all of [lo, hi): the same bytes, whatever the levels that tile them */
  if (x->exact && y->exact) return true;
  for (int i = 0; i < x->nviews; i++)
    if (!view_same(&x->views[i], &y->views[i])) return false;
  return true;
}

void cm_link_views(cm_link *l, region_view *views, const pto_tensor *tensors,
                   const region_view *pre, int nt, uint32_t mask) {
  l->views = views;
  l->nviews = 0;
  /* not held: a join on it (through a stale hint) fails */
  atomic_store_explicit(&l->inbox, CM_INBOX_CLOSED, memory_order_relaxed);
  l->lo = UINT64_MAX;
  l->hi = 0;
  for (int i = 0; i < nt; i++)
    if (mask >> i & 1) {
      region_view *v = &views[l->nviews++];
      if (pre)
        *v = pre[i];
      else
        region_view_init(&tensors[i], v);
      if (v->lo < l->lo) l->lo = v->lo;
      if (v->hi > l->hi) l->hi = v->hi;
    }
  l->exact = l->nviews == 1 && views[0].known && views[0].dense;
}
