/* commute.c — the exclusion table of COMMUTE tasks (see commute.h). The
 * step functions touch only the table; the run's wrappers around them
 * (lock, queueing of granted tasks) are in sched.c. */
#include "chip/commute.h"

#include <stdlib.h>
#include <string.h>

#include "pto/status.h"

int cm_init(cm_table *c, uint32_t nslots) {
  c->links = calloc(nslots, sizeof *c->links);
  if (!c->links) return PTO_ENOMEM;
  c->n = nslots;
  pthread_mutex_init(&c->lock, NULL);
  c->held_head = -1; /* nothing held yet: cm_reset walks the held set */
  cm_reset(c);
  return PTO_OK;
}

void cm_destroy(cm_table *c) {
  if (!c->links) return;
  pthread_mutex_destroy(&c->lock);
  free(c->links);
  c->links = NULL;
}

void cm_reset(cm_table *c) {
  /* a failed run may leave tasks held or waiting: their links are
   * rewritten when their slots are next acquired, but a held flag is read
   * through a hint before that, so the held ones are let go */
  for (int32_t h = c->held_head; h >= 0; h = c->links[h].held_next)
    c->links[h].held = 0;
  c->held_head = -1;
  for (int i = 0; i < CM_HINTS; i++)
    c->hint[i] = -1;
}

void cm_set_views(cm_link *l, region_view *views, const pto_tensor *ts, int nt, uint32_t mask) {
  /* padding too: cm_views_same compares bytes */
  memset(views, 0, sizeof *views * (size_t)__builtin_popcount(mask));
  l->views = views;
  l->nviews = 0;
  l->lo = UINT64_MAX;
  l->hi = 0;
  for (int i = 0; i < nt; i++)
    if (mask >> i & 1) {
      region_view *v = &views[l->nviews++];
      region_view_init(&ts[i], v);
      if (v->lo < l->lo) l->lo = v->lo;
      if (v->hi > l->hi) l->hi = v->hi;
    }
}

static uint32_t hint_of(const cm_link *l) {
  uint64_t h = (l->lo ^ (l->hi * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
  return (uint32_t)(h >> 56) & (CM_HINTS - 1);
}

bool cm_busy(const cm_table *c) { return c->held_head >= 0; }

static void held_add(cm_table *c, int32_t t) {
  cm_link *l = &c->links[t];
  l->held = 1;
  c->hint[hint_of(l)] = t;
  l->held_prev = -1;
  l->held_next = c->held_head;
  if (c->held_head >= 0) c->links[c->held_head].held_prev = t;
  c->held_head = t;
}

static void held_remove(cm_table *c, int32_t t) {
  cm_link *l = &c->links[t];
  l->held = 0;
  if (l->held_prev >= 0)
    c->links[l->held_prev].held_next = l->held_next;
  else
    c->held_head = l->held_next;
  if (l->held_next >= 0) c->links[l->held_next].held_prev = l->held_prev;
}

/* The first held task that conflicts with t, or -1. */
static int32_t first_conflict(cm_table *c, int32_t t, const cm_ops *ops) {
  const cm_link *l = &c->links[t];
  for (int32_t h = c->held_head; h >= 0; h = c->links[h].held_next) {
    const cm_link *x = &c->links[h];
    /* the spans first, inline: most held tasks are elsewhere */
    if (x->hi > l->lo && l->hi > x->lo && ops->conflict(ops->env, t, h)) return h;
  }
  return -1;
}

static void wait_on(cm_table *c, int32_t holder, int32_t t) {
  cm_link *h = &c->links[holder];
  c->links[t].wait_next = -1;
  if (h->wait_tail >= 0)
    c->links[h->wait_tail].wait_next = t;
  else
    h->wait_head = t;
  h->wait_tail = t;
}

bool cm_acquire(cm_table *c, int32_t t, const cm_ops *ops) {
  cm_link *l = &c->links[t];
  l->wait_head = l->wait_tail = -1; /* new in the table: nobody waits on it yet */
  l->held = 0;
  int32_t h = c->hint[hint_of(l)];
  if (h >= 0 && h != t && c->links[h].held && ops->same(ops->env, t, h)) {
    wait_on(c, h, t); /* the same bytes as a held task: no scan */
    return false;
  }
  h = first_conflict(c, t, ops);
  if (h >= 0) {
    wait_on(c, h, t);
    return false;
  }
  held_add(c, t);
  return true;
}

int32_t cm_release(cm_table *c, int32_t t, const cm_ops *ops) {
  held_remove(c, t);
  cm_link *l = &c->links[t];
  int32_t w = l->wait_head;
  if (w >= 0 && ops->same(ops->env, w, t)) { /* t's bytes, and t's waiters, pass to w */
    cm_link *x = &c->links[w];
    int32_t rest = x->wait_next;
    held_add(c, w);
    if (rest >= 0) {
      if (x->wait_tail >= 0)
        c->links[x->wait_tail].wait_next = rest;
      else
        x->wait_head = rest;
      x->wait_tail = l->wait_tail;
    }
    x->wait_next = -1;
    return w;
  }
  int32_t granted = -1, last = -1;
  while (w >= 0) {
    int32_t next = c->links[w].wait_next; /* w moves to another list */
    int32_t h = first_conflict(c, w, ops);
    if (h >= 0) {
      wait_on(c, h, w);
    } else {
      held_add(c, w);
      c->links[w].wait_next = -1;
      if (last >= 0)
        c->links[last].wait_next = w;
      else
        granted = w;
      last = w;
    }
    w = next;
  }
  return granted;
}

bool cm_views_conflict(void *env, int32_t a, int32_t b) {
  const cm_table *c = env;
  const cm_link *x = &c->links[a], *y = &c->links[b];
  for (int i = 0; i < x->nviews; i++)
    for (int j = 0; j < y->nviews; j++)
      if (x->views[i].lo < y->views[j].hi && y->views[j].lo < x->views[i].hi &&
          region_view_overlap(&x->views[i], &y->views[j]))
        return true;
  return false;
}

bool cm_views_same(void *env, int32_t a, int32_t b) {
  const cm_table *c = env;
  const cm_link *x = &c->links[a], *y = &c->links[b];
  return x->nviews == y->nviews &&
         memcmp(x->views, y->views, sizeof *x->views * (size_t)x->nviews) == 0;
}
