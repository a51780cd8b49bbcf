/* explore.h — the depth-first state-space explorer the protocol tests share
 * (every tests/unit/test_*_explorer.c, and test_wait_model.c;
 * docs/architecture.md: protocols are step functions explored exhaustively
 * by tests).
 *
 * A model is a fixed-size state and a set of actors; an actor's action
 * steps a copy of the state. The search visits every reachable state once
 * (a visited set over the states' keys), depth first, keeping the path of
 * actions that led to the current state so that a failure can be replayed
 * and printed. What differs between the tests is the model, given as
 * callbacks; what they share is here:
 *   - xp_set: the visited set, open addressing over fixed-size byte keys,
 *     with a colour per state (on the current path / explored) for cycle
 *     detection;
 *   - xp_run: the search, counting states, steps (edges) and final states
 *     (states in which no action steps), stopping at the first failure a
 *     callback reports, at a cycle (when asked: a livelock) or past the
 *     depth bound.
 * Header-only, test tree only. */
#ifndef PTO_TEST_EXPLORE_H
#define PTO_TEST_EXPLORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the visited set ---- */

typedef struct xp_set {
  size_t key_size;
  uint8_t *keys;  /* key_size bytes per state, by state index */
  uint8_t *color; /* per state: 1 on the current path, 2 explored */
  size_t n, cap;
  uint32_t *table; /* state index + 1; 0 empty */
  size_t size;     /* a power of two */
} xp_set;

/* FNV-1a over the key, a word at a time (with a shift to mix the high
 * bits down), then its last bytes. */
static inline uint64_t xp_hash(const void *key, size_t len) {
  const unsigned char *p = key;
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    h = (h ^ v) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < len; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static inline void xp_oom(void) {
  fprintf(stderr, "explore.h: out of memory\n");
  abort();
}

/* The visited set a finished search leaves, emptied, to the next one in
 * this process (searches run one at a time): the larger searches store
 * hundreds of MiB of keys, and giving them back to the system only to
 * fault them in again for the next search cost more than the search
 * itself under the sanitizers, whose shadow memory faults in too. Its
 * key_size is the one its keys buffer was sized by (cap keys of it). */
static xp_set xp_spare;

/* An empty set takes the spare buffers, the table cleared: as many keys
 * of its own size as the keys buffer holds, at most one per colour. */
static inline void xp_set_adopt(xp_set *s) {
  size_t cap = xp_spare.cap * xp_spare.key_size / s->key_size;
  s->cap = cap < xp_spare.cap ? cap : xp_spare.cap;
  s->keys = xp_spare.keys;
  s->color = xp_spare.color;
  s->table = xp_spare.table;
  s->size = xp_spare.size;
  memset(s->table, 0, s->size * sizeof *s->table);
  memset(&xp_spare, 0, sizeof xp_spare);
}

static inline void xp_set_grow(xp_set *s) {
  if (!s->table && xp_spare.table) {
    xp_set_adopt(s);
    return;
  }
  size_t ns = s->size ? s->size * 2 : 1 << 14;
  uint32_t *t = calloc(ns, sizeof *t);
  if (!t) xp_oom();
  for (size_t id = 0; id < s->n; id++) {
    size_t h = (size_t)xp_hash(s->keys + id * s->key_size, s->key_size) & (ns - 1);
    while (t[h])
      h = (h + 1) & (ns - 1);
    t[h] = (uint32_t)id + 1;
  }
  free(s->table);
  s->table = t;
  s->size = ns;
}

/* The index of the state with this key; *found says whether it was there
 * already (else it is added, colour 0). */
static inline size_t xp_visit(xp_set *s, const void *key, bool *found) {
  if ((s->n + 1) * 2 > s->size) xp_set_grow(s);
  size_t h = (size_t)xp_hash(key, s->key_size) & (s->size - 1);
  while (s->table[h]) {
    size_t id = s->table[h] - 1;
    if (memcmp(s->keys + id * s->key_size, key, s->key_size) == 0) {
      *found = true;
      return id;
    }
    h = (h + 1) & (s->size - 1);
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 1 << 12;
    uint8_t *k = realloc(s->keys, s->cap * s->key_size), *c = realloc(s->color, s->cap);
    if (k) s->keys = k;
    if (c) s->color = c;
    if (!k || !c) xp_oom();
  }
  size_t id = s->n++;
  memcpy(s->keys + id * s->key_size, key, s->key_size);
  s->color[id] = 0;
  s->table[h] = (uint32_t)id + 1;
  *found = false;
  return id;
}

/* Keeps the larger of this set's buffers and the spare ones as the spare
 * (xp_spare), frees the others. */
static inline void xp_set_free(xp_set *s) {
  if (s->cap * s->key_size > xp_spare.cap * xp_spare.key_size) { /* s becomes the spare */
    xp_set old = xp_spare;
    xp_spare = *s;
    xp_spare.n = 0;
    *s = old; /* freed below */
  }
  free(s->keys);
  free(s->color);
  free(s->table);
  memset(s, 0, sizeof *s);
}

/* ---- the search ---- */

/* What an action or a check returns. */
enum { XP_STEP = 0, XP_SKIP, XP_STOP };
/* Why the search stopped. */
enum { XP_DONE = 0, XP_FAILED, XP_CYCLE, XP_DEPTH };

typedef struct xp_search xp_search;
typedef struct xp_model {
  size_t state_size; /* bytes of a state */
  size_t key_size;   /* bytes of its key (<= state_size when key is NULL) */
  /* Bytes a step copies (0: state_size): a model whose states end in
   * bytes no step writes (zero from the start) may copy less. */
  size_t copy_size;
  int max_depth; /* a path this long stops the search (XP_DEPTH) */
  /* The key of a state; NULL: its first key_size bytes. */
  void (*key)(xp_search *x, const void *state, void *key);
  /* Actions: 0 .. nact - 1. */
  int (*nact)(xp_search *x);
  /* Steps the state (a copy) by action a, at depth d: XP_STEP, XP_SKIP (the
   * actor cannot move), XP_STOP (a failure: the path to the stepped state
   * is x->path[0 .. d]). */
  int (*apply)(xp_search *x, void *state, int a, int d);
  /* Called once per new state (may be NULL): XP_STOP on a violated invariant. */
  int (*on_state)(xp_search *x, const void *state, int d);
  /* Called for each final state, none of whose actions step (may be NULL). */
  int (*on_final)(xp_search *x, const void *state, int d);
  /* An action that leaves the key as it was is a wait, not a step. */
  bool unchanged_is_wait;
  /* A step back to a state on the current path stops the search (XP_CYCLE). */
  bool detect_cycles;
} xp_model;

struct xp_search {
  const xp_model *m;
  void *ctx; /* the model's own context */
  xp_set seen;
  uint8_t *stack;  /* (max_depth + 2) states */
  uint8_t *kstack; /* their keys */
  int *path;       /* path[d]: the action taken at depth d */
  int stopped;     /* XP_DONE, or why it stopped */
  int stop_depth;  /* length of the path that led to the stop */
  long states, edges, finals;
  int deepest;
};

static inline void *xp_state(xp_search *x, int d) {
  return x->stack + (size_t)d * x->m->state_size;
}
static inline uint8_t *xp_key_at(xp_search *x, int d) {
  return x->kstack + (size_t)d * x->m->key_size;
}

static inline void xp_key_of(xp_search *x, const void *state, void *key) {
  if (x->m->key)
    x->m->key(x, state, key);
  else
    memcpy(key, state, x->m->key_size);
}

static inline void xp_stop(xp_search *x, int why, int depth) {
  if (x->stopped) return;
  x->stopped = why;
  x->stop_depth = depth;
}

/* have_key: the caller already put the state's key at xp_key_at(x, d). */
static inline void xp_dfs(xp_search *x, int d, bool have_key) {
  const xp_model *m = x->m;
  void *w = xp_state(x, d);
  uint8_t *k = xp_key_at(x, d);
  if (!have_key) xp_key_of(x, w, k);
  bool found;
  size_t id = xp_visit(&x->seen, k, &found);
  if (found) {
    if (m->detect_cycles && x->seen.color[id] == 1) xp_stop(x, XP_CYCLE, d);
    return;
  }
  x->seen.color[id] = 1;
  x->states++;
  if (d > x->deepest) x->deepest = d;
  if (m->on_state && m->on_state(x, w, d) == XP_STOP) {
    xp_stop(x, XP_FAILED, d);
    return;
  }
  if (d >= m->max_depth) {
    xp_stop(x, XP_DEPTH, d);
    return;
  }
  bool any = false;
  int n = m->nact(x);
  for (int a = 0; a < n; a++) {
    void *nw = xp_state(x, d + 1);
    memcpy(nw, w, m->copy_size ? m->copy_size : m->state_size);
    x->path[d] = a;
    int r = m->apply(x, nw, a, d);
    if (r == XP_STOP) {
      xp_stop(x, XP_FAILED, d + 1);
      return;
    }
    if (r == XP_SKIP) continue;
    if (m->unchanged_is_wait) {
      uint8_t *nk = xp_key_at(x, d + 1);
      xp_key_of(x, nw, nk);
      if (memcmp(k, nk, m->key_size) == 0) continue;
    }
    any = true;
    x->edges++;
    xp_dfs(x, d + 1, m->unchanged_is_wait);
    if (x->stopped) return;
  }
  if (!any) {
    x->finals++;
    if (m->on_final && m->on_final(x, w, d) == XP_STOP) {
      xp_stop(x, XP_FAILED, d);
      return;
    }
  }
  x->seen.color[id] = 2;
}

/* Explores every state reachable from init. Returns x->stopped: XP_DONE when
 * the whole space was explored without a stop. Call xp_free after. */
static inline int xp_run(xp_search *x, const xp_model *m, void *ctx, const void *init) {
  memset(x, 0, sizeof *x);
  x->m = m;
  x->ctx = ctx;
  x->seen.key_size = m->key_size;
  x->stack = calloc((size_t)m->max_depth + 2, m->state_size);
  x->kstack = calloc((size_t)m->max_depth + 2, m->key_size);
  x->path = calloc((size_t)m->max_depth + 2, sizeof *x->path);
  if (!x->stack || !x->kstack || !x->path) xp_oom();
  memcpy(xp_state(x, 0), init, m->state_size);
  xp_dfs(x, 0, false);
  return x->stopped;
}

static inline void xp_free(xp_search *x) {
  xp_set_free(&x->seen);
  free(x->stack);
  free(x->kstack);
  free(x->path);
  x->stack = x->kstack = NULL;
  x->path = NULL;
}

/* The whole search for a model whose failures the callbacks record: runs
 * it, frees it, counts the states seen, and reports a path that reached
 * max_depth as a failure (when none was recorded) with that said in why. */
static inline void xp_explore(const xp_model *m, void *ctx, const void *init, uint64_t *states,
                              bool *failed, char *why, size_t why_len) {
  xp_search x;
  int stop = xp_run(&x, m, ctx, init);
  *states = (uint64_t)x.states;
  xp_free(&x);
  if (stop == XP_DEPTH && !*failed) {
    *failed = true;
    snprintf(why, why_len, "a path longer than %d steps", m->max_depth);
  }
}

/* The whole search for a model whose callbacks record why it failed
 * (*why; NULL: it did not) and a line per step of the current path
 * (trace: max_depth lines of `line` bytes each): runs it, prints its
 * states, its result and, after a failure, the path, and frees it.
 * Returns the search's stop (XP_DEPTH: a path past max_depth). */
static inline int xp_explore_traced(const xp_model *m, void *ctx, const void *init,
                                    const char *name, const char *const *why, const char *trace,
                                    size_t line) {
  xp_search x;
  int stop = xp_run(&x, m, ctx, init);
  printf("%s: %ld states, %ld final states: %s\n", name, x.states, x.finals,
         *why ? *why : "no failure");
  if (*why)
    for (int i = 0; i < x.stop_depth; i++)
      printf("    %2d. %s\n", i + 1, trace + (size_t)i * line);
  xp_free(&x);
  return stop;
}

#endif
