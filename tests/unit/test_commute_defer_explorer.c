/* test_commute_defer_explorer.c — the COMMUTE table's lock and its
 * pending stack (src/chip/commute.c: cm_ready, cm_done and their steps)
 * over every interleaving of three tasks. Each task has two actors: the
 * thread that makes it ready (cm_ready: if the hint names a held task with
 * its views, join it lock-free, a compare-and-swap on that task's inbox
 * that fails once its release closed it; else if the lock is free, take it, let
 * the pending tasks and then this one acquire, unlock; else push it; then,
 * while tasks are pending and the lock is free, take the lock, let every
 * pending task acquire, unlock), and the thread that runs it once queued and completes
 * it (cm_done: take the lock, which it waits for, release, let the pending
 * tasks acquire, unlock, then the same check as cm_ready's). Each actor
 * then queues the tasks its steps granted, one at a time, as sched.c does.
 * The steps are the real functions on the table's real words, kept in the
 * state; each step is one atomic action (the push's retry loop, a lock
 * word's exchange, a critical section).
 *
 * Checks: no two tasks whose bytes overlap run at once; every state where
 * nothing can move has every task completed, every actor finished and the
 * table empty (no task left pending: the lost wake-up this protocol could
 * have); two tasks on disjoint bytes run at once in some interleaving.
 *
 * Caught, with the interleaving printed: an actor that does not check the
 * pending stack after it unlocks (a push that found the lock taken is
 * then never drained); a join that checks the inbox open, then pushes in
 * a second step (a release between them closes it, and the task pushed
 * into the closed inbox is never granted).
 *
 * Runs N and N+1 (test_run_n_plus_1): the table outlives a run, and a
 * failed or cancelled run ends with tasks held (inboxes open, hints
 * naming them), waiting and joined. Run N may end wherever every thread
 * is between its calls of cm_ready / cm_done; then orch_reset's real
 * cm_reset, and run N+1 with two tasks in slots 0 and 1, whose links keep
 * what run N wrote (slot 2 keeps all of it). Checked besides the above:
 * no actor queues a task that its run did not grant (a stale grant of run
 * N). Caught: a reset without cm_reset, and one that empties the held set
 * and the pending stack only: a task of run N+1 joins, by a stale hint,
 * the open inbox of a slot run N left held; that slot's own acquire in
 * run N+1 opens its inbox afresh, and the joined task waits for good.
 * Either half of cm_reset for that (closing the held inboxes, clearing
 * the hints) is enough alone (test_either_half_suffices). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "chip/commute.h"
#include "explore.h"

#define NT       3
#define MAX_PATH 160
#define A_END    (2 * NT) /* the action: run N ends (explorer.rerun only) */
#define NT2      2        /* run N+1's tasks: slots 0 and 1 (the space stays small) */

/* a task's state */
enum { T_NEW, T_PENDING, T_WAIT, T_GRANTED, T_QUEUED, T_RUN, T_DONE };
static const char *const ts_name[] = {"new",    "pending", "waiting", "granted",
                                      "queued", "running", "done"};
/* an actor's step: the readying thread's and the running thread's. The
 * lock and the drain's exchange of the stack are one step (a push between
 * them is drained all the same), as are settle()'s test and its try of the
 * lock; the unlock is a step of its own, so a push may come between a
 * drain and the unlock: the window the check after the unlock is for. */
enum {
  S_START,  /* readying: the hint (cm_hinted), then join or try; running:
             * start it once queued */
  S_JOIN,   /* readying: join the hinted task (cm_join), else go try */
  S_JOIN2,  /* readying, V_SPLIT_JOIN only: the push after the check */
  S_TRY,    /* readying: if the lock is free, take it, drain, acquire the
             * task, else go push it */
  S_PUSH,   /* readying: push the task */
  S_DONE,   /* running: lock, release it, drain */
  S_UNLOCK, /* unlock */
  S_SETTLE, /* if tasks are pending and the lock is free: lock, drain */
  S_QUEUE,  /* queue the granted tasks, one a step */
  S_END
};
static const char *const step_name[] = {"start",   "join",   "join-push", "try",   "push",
                                        "release", "unlock", "settle",    "queue", "end"};
enum {
  V_REAL,
  V_NO_RECHECK,
  V_SPLIT_JOIN,
  /* run N+1 (explorer.rerun): the reset between the runs */
  V_NO_RESET,       /* orch_reset without cm_reset */
  V_RESET_SETS,     /* cm_reset that empties the held set and the pending
                     * stack only: held inboxes stay open, hints stay */
  V_RESET_NO_CLOSE, /* cm_reset without closing the held inboxes */
  V_RESET_NO_HINTS  /* cm_reset that leaves the hints */
};

typedef struct mstate {
  cm_link links[NT]; /* zeroed first: their padding stays zero */
  cm_held held[NT];  /* the held set: nheld entries, the rest zero */
  int32_t nheld;
  int32_t lock, pending;
  int32_t hint[NT]; /* the table's hint entries at hint_at[] (the only ones written) */
  uint8_t ts[NT];
  uint8_t pc[2 * NT];                  /* actor a < NT: task a's readying thread; else its runner */
  int8_t ghead[2 * NT], gtail[2 * NT]; /* each actor's granted tasks (cm_grants) */
  int8_t cand[NT]; /* the task a readying actor's hint named (S_JOIN); states are
                    * hashed and compared bytewise: no implicit padding */
  uint8_t run;     /* 0: run N; 1: run N+1, after run N ended and the reset */
  uint8_t pad[7];  /* zero */
} mstate;
_Static_assert(sizeof(mstate) ==
                   NT * (sizeof(cm_link) + sizeof(cm_held)) + 12 + 4 * NT + 7 * NT + 3 + 8,
               "no implicit padding");

typedef struct explorer {
  const uint8_t *mask;
  int variant;
  bool rerun; /* run N may end at every step, then the reset and run N+1 */
  int disjoint_a, disjoint_b;
  bool together;
  uint64_t states;
  bool failed;
  char why[240];
  const int *path;
  uint8_t path_pc[MAX_PATH];
} explorer;

static const explorer *g_e;

static bool mask_conflict(void *env, int32_t a, int32_t b) {
  (void)env;
  return (g_e->mask[a] & g_e->mask[b]) != 0;
}

static bool mask_same(void *env, int32_t a, int32_t b) {
  (void)env;
  return g_e->mask[a] == g_e->mask[b];
}

static const cm_ops OPS = {mask_conflict, mask_same, NULL};

static void violation(explorer *e, int d, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("commute defer explorer (variant %d%s): %s\n  interleaving:", e->variant,
         e->rerun ? ", runs N and N+1" : "", e->why);
  for (int i = 0; i < d && i < MAX_PATH; i++)
    if (e->path[i] == A_END)
      printf(" END-RUN-N+RESET");
    else
      printf(" %c%d:%s", e->path[i] < NT ? 'A' : 'R', e->path[i] % NT, step_name[e->path_pc[i]]);
  printf("\n");
}

/* The table the steps run on: its hint array stays -1 but at the
 * entries the tasks' spans hash to (hint_at, found by init_hints), which
 * get and put move to and from the state: a 1 KiB array in every state
 * made the search 4 times slower (minutes under TSan). */
static cm_table g_tab;
static int hint_at[NT]; /* task t's hint entry */

static void get(mstate *s) {
  cm_table *c = &g_tab;
  c->links = s->links;
  c->n = NT;
  c->held = s->held;
  c->nheld = s->nheld;
  atomic_store(&c->lock, s->lock);
  atomic_store(&c->pending, s->pending);
  for (int t = 0; t < NT; t++)
    c->hint[hint_at[t]] = s->hint[t];
}

static void put(mstate *s) {
  cm_table *c = &g_tab;
  s->nheld = c->nheld;
  memset(&s->held[s->nheld], 0, sizeof s->held[0] * (size_t)(NT - s->nheld));
  s->lock = atomic_load(&c->lock);
  s->pending = atomic_load(&c->pending);
  for (int t = 0; t < NT; t++)
    s->hint[t] = c->hint[hint_at[t]];
  for (int t = 0; t < NT; t++)
    c->hint[hint_at[t]] = -1;
}

/* Each task's hint entry: the one its acquire alone writes. */
static void init_hints(const mstate *s0) {
  cm_table *c = &g_tab;
  for (int i = 0; i < CM_HINTS; i++)
    c->hint[i] = -1;
  for (int t = 0; t < NT; t++) {
    mstate s = *s0;
    c->links = s.links;
    c->n = NT;
    c->held = s.held;
    c->nheld = 0;
    assert_true(cm_acquire(c, t, &OPS));
    hint_at[t] = -1;
    for (int i = 0; i < CM_HINTS; i++)
      if (c->hint[i] >= 0) {
        assert_int_equal(hint_at[t], -1); /* one entry */
        hint_at[t] = i;
        c->hint[i] = -1;
      }
    assert_true(hint_at[t] >= 0);
  }
}

/* After a drain: every task that was pending acquired (granted) or waits. */
static void drained(mstate *s) {
  for (int t = 0; t < NT; t++)
    if (s->ts[t] == T_PENDING) s->ts[t] = cm_link_held(&s->links[t]) ? T_GRANTED : T_WAIT;
}

/* Run N ends here, failed or cancelled (a kernel error, pto_orch_fatal,
 * the watchdog): its threads leave wherever they are, with tasks held,
 * waiting on a holder, joined to an inbox, pending or granted and not yet
 * queued (no thread leaves inside the table's lock: its critical sections
 * never wait). Then orch_reset's cm_reset on the table as run N left it,
 * and run N+1: tasks in slots 0 and 1, whose links keep what run N wrote
 * in them but their views (a submit rewrites those, here the same), each
 * new with its actors at their start; slot 2 keeps what run N left in it
 * (a slot run N+1 does not reach, or not yet). test_lifecycle_explorer proves no
 * thread is inside at the reset. */
static void end_and_reset(const explorer *e, mstate *s) {
  cm_table *c = &g_tab;
  get(s);
  switch (e->variant) {
  case V_NO_RESET: break;
  case V_RESET_SETS:
    c->nheld = 0;
    atomic_store(&c->pending, -1);
    break;
  case V_RESET_NO_CLOSE:
    c->nheld = 0; /* the held inboxes left open */
    cm_reset(c);
    break;
  case V_RESET_NO_HINTS: {
    int32_t keep[NT];
    for (int t = 0; t < NT; t++)
      keep[t] = c->hint[hint_at[t]];
    cm_reset(c);
    for (int t = 0; t < NT; t++)
      c->hint[hint_at[t]] = keep[t];
    break;
  }
  default: cm_reset(c);
  }
  put(s);
  for (int t = 0; t < NT; t++) {
    s->ts[t] = t < NT2 ? T_NEW : T_DONE; /* the last slot: run N's alone */
    s->cand[t] = -1;
  }
  for (int a = 0; a < 2 * NT; a++) {
    s->pc[a] = a % NT < NT2 ? S_START : S_END;
    s->ghead[a] = s->gtail[a] = -1;
  }
  s->run = 1;
}

static int step(explorer *e, mstate *s, int a) {
  int t = a % NT;
  bool runner = a >= NT;
  cm_table *c = &g_tab;
  get(s);
  cm_grants g = {s->ghead[a], s->gtail[a]};
  uint8_t *pc = &s->pc[a];
  int r = XP_STEP;
  switch (*pc) {
  case S_START:
    if (!runner) {
      s->cand[t] = (int8_t)cm_hinted(c, t, &OPS);
      *pc = s->cand[t] >= 0 ? S_JOIN : S_TRY;
    } else if (s->ts[t] == T_QUEUED) {
      s->ts[t] = T_RUN;
      *pc = S_DONE;
    } else {
      r = XP_SKIP;
    }
    break;
  case S_JOIN:
    if (e->variant == V_SPLIT_JOIN) { /* broken: checked open here, pushed next step */
      *pc = atomic_load(&c->links[s->cand[t]].inbox) ? S_JOIN2 : S_TRY;
    } else if (cm_join(c, s->cand[t], t)) {
      s->ts[t] = T_WAIT;
      *pc = S_QUEUE;
    } else {
      *pc = S_TRY;
    }
    s->cand[t] = e->variant == V_SPLIT_JOIN && *pc == S_JOIN2 ? s->cand[t] : -1;
    break;
  case S_JOIN2: { /* V_SPLIT_JOIN: the push, whatever the inbox is now */
    _Atomic int32_t *in = &c->links[s->cand[t]].inbox;
    int32_t old = atomic_load(in);
    s->links[t].wait_head = s->links[t].wait_tail = -1;
    s->links[t].wsame = 1;
    s->links[t].same = 1;
    s->links[t].wait_next = old <= 1 ? -1 : old - 2;
    if (old <= 1) s->links[s->cand[t]].inbox_first = t;
    atomic_store(in, t + 2);
    s->ts[t] = T_WAIT;
    s->cand[t] = -1;
    *pc = S_QUEUE;
    break;
  }
  case S_TRY:
    if (cm_trylock(c)) { /* cm_ready's own critical section */
      cm_drain(c, &OPS, &g);
      drained(s);
      if (cm_acquire(c, t, &OPS)) {
        cm_grant(c, &g, t);
        s->ts[t] = T_GRANTED;
      } else {
        s->ts[t] = T_WAIT;
      }
      *pc = S_UNLOCK;
    } else {
      *pc = S_PUSH;
    }
    break;
  case S_PUSH: /* the lock was taken */
    cm_pend_push(c, t);
    s->ts[t] = T_PENDING;
    *pc = S_SETTLE;
    break;
  case S_DONE: { /* cm_lock (it waits), then the critical section */
    if (!cm_trylock(c)) {
      r = XP_SKIP;
      break;
    }
    cm_release(c, t, &OPS, &g); /* a runner's first grants: g was empty */
    for (int32_t w = g.head; w >= 0; w = s->links[w].wait_next)
      s->ts[w] = T_GRANTED;
    s->ts[t] = T_DONE;
    cm_drain(c, &OPS, &g);
    drained(s);
    *pc = S_UNLOCK;
    break;
  }
  case S_UNLOCK:
    cm_unlock(c);
    *pc = e->variant == V_NO_RECHECK ? S_QUEUE : S_SETTLE;
    break;
  case S_SETTLE: /* settle()'s test, then its critical section */
    if (!cm_pend_none(c) && cm_trylock(c)) {
      cm_drain(c, &OPS, &g);
      drained(s);
      *pc = S_UNLOCK;
    } else {
      *pc = S_QUEUE;
    }
    break;
  case S_QUEUE:
    if (g.head < 0) {
      *pc = S_END;
      break;
    }
    {
      int32_t w = g.head; /* the next read before queueing, as sched.c */
      g.head = s->links[w].wait_next;
      if (g.head < 0) g.tail = -1;
      if (s->ts[w] != T_GRANTED) { /* a task of run N, or one run N+1 has not made ready */
        put(s);
        return -1 - w;
      }
      s->ts[w] = T_QUEUED;
    }
    break;
  default: r = XP_SKIP;
  }
  s->ghead[a] = (int8_t)g.head;
  s->gtail[a] = (int8_t)g.tail;
  put(s);
  return r;
}

/* Where a thread may be when its run ends: between its calls of
 * cm_ready / cm_done (at its start, queueing what a call granted, done, or
 * a runner before cm_done: its task ran, or never will), not inside one
 * (cm_ready and cm_done never wait for the run's end, and cm_lock's
 * waiter only for the lock's holder). */
static bool between_calls(uint8_t pc) {
  return pc == S_START || pc == S_DONE || pc == S_QUEUE || pc == S_END;
}

static int em_nact(xp_search *x) {
  (void)x;
  return 2 * NT + 1;
}

static int em_apply(xp_search *x, void *state, int a, int d) {
  explorer *e = x->ctx;
  mstate *s = state;
  e->path = x->path;
  if (a == A_END) {
    if (!e->rerun || s->run) return XP_SKIP;
    for (int b = 0; b < 2 * NT; b++)
      if (!between_calls(s->pc[b])) return XP_SKIP;
    end_and_reset(e, s);
    return XP_STEP;
  }
  if (d < MAX_PATH) e->path_pc[d] = s->pc[a];
  int r = step(e, s, a);
  if (r < 0) {
    int w = -1 - r;
    violation(e, d + 1, "an actor of run %d queues task %d, which is %s there (not granted: %s)",
              s->run ? 2 : 1, w, ts_name[s->ts[w]],
              s->run ? "a stale grant of run N" : "granted twice");
    return XP_STOP;
  }
  return r;
}

static int em_state(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  e->path = x->path;
  for (int a = 0; a < NT; a++)
    for (int b = a + 1; b < NT; b++)
      if (s->ts[a] == T_RUN && s->ts[b] == T_RUN) {
        if (e->mask[a] & e->mask[b]) {
          violation(e, d, "tasks %d and %d run at once on shared bytes", a, b);
          return XP_STOP;
        }
        if (a == e->disjoint_a && b == e->disjoint_b) e->together = true;
      }
  return XP_STEP;
}

static int em_final(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  for (int t = 0; t < NT; t++)
    if (s->ts[t] != T_DONE) {
      violation(e, d, "nothing can move and task %d is left %s (lost wake-up)", t,
                ts_name[s->ts[t]]);
      return XP_STOP;
    }
  for (int a = 0; a < 2 * NT; a++)
    if (s->pc[a] != S_END) {
      violation(e, d, "nothing can move and actor %d is left at '%s'", a, step_name[s->pc[a]]);
      return XP_STOP;
    }
  if (s->nheld || s->pending >= 0 || s->lock) {
    violation(e, d, "every task done, yet the table holds %d, pending %d, lock %d", s->nheld,
              s->pending, s->lock);
    return XP_STOP;
  }
  for (int t = 0; t < (s->run ? NT2 : NT); t++) /* run N+1's tasks */
    if (atomic_load(&s->links[t].inbox)) {
      violation(e, d, "every task done, yet task %d's inbox is open", t);
      return XP_STOP;
    }
  return XP_STEP;
}

static explorer explore2(const uint8_t *mask, int variant, bool rerun, int da, int db) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.mask = mask;
  e.variant = variant;
  e.rerun = rerun;
  e.disjoint_a = da;
  e.disjoint_b = db;
  g_e = &e;
  mstate s;
  memset(&s, 0, sizeof s);
  s.pending = -1;
  for (int t = 0; t < NT; t++) {
    s.links[t].lo = (uint64_t)__builtin_ctz(mask[t]);
    s.links[t].hi = 32u - (uint64_t)__builtin_clz(mask[t]);
    s.links[t].wait_head = s.links[t].wait_tail = s.links[t].wait_next = -1;
    s.links[t].pend_next = -1;
  }
  for (int a = 0; a < 2 * NT; a++)
    s.ghead[a] = s.gtail[a] = -1;
  for (int t = 0; t < NT; t++)
    s.hint[t] = s.cand[t] = -1;
  init_hints(&s);
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_state = em_state,
                      .on_final = em_final,
                      .detect_cycles = true};
  xp_explore(&m, &e, &s, &e.states, &e.failed, e.why, sizeof e.why);
  e.path = NULL;
  g_e = NULL;
  return e;
}

static explorer explore(const uint8_t *mask, int variant, int da, int db) {
  return explore2(mask, variant, false, da, db);
}

static const uint8_t CHAIN[NT] = {0x3, 0x6, 0x4};    /* 0-1, 1-2 overlap; 0, 2 disjoint */
static const uint8_t ONE_BYTE[NT] = {0x1, 0x1, 0x1}; /* all on one byte */
static const uint8_t TWO_SAME[NT] = {0x1, 0x1, 0x3}; /* 0, 1 the same bytes; 2 over more */

static void test_every_interleaving(void **st) {
  (void)st;
  struct {
    const char *name;
    const uint8_t *mask;
    int da, db;
  } cases[] = {{"chain", CHAIN, 0, 2}, /* the bytes of test_commute_explorer.c but "over two" */
               {"one byte", ONE_BYTE, -1, -1},
               {"two the same", TWO_SAME, -1, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    explorer e = explore(cases[i].mask, V_REAL, cases[i].da, cases[i].db);
    printf("commute defer explorer: %s, %llu states: %s%s\n", cases[i].name,
           (unsigned long long)e.states, e.failed ? e.why : "ok",
           cases[i].da >= 0 ? (e.together ? ", disjoint tasks ran at once" : ", NEVER at once")
                            : "");
    assert_false(e.failed);
    if (cases[i].da >= 0) assert_true(e.together);
  }
}

static void test_no_recheck_caught(void **st) {
  (void)st;
  explorer e = explore(ONE_BYTE, V_NO_RECHECK, -1, -1);
  assert_true(e.failed); /* printed with its interleaving */
  assert_non_null(strstr(e.why, "left pending"));
}

static void test_split_join_caught(void **st) {
  (void)st;
  explorer e = explore(ONE_BYTE, V_SPLIT_JOIN, -1, -1);
  assert_true(e.failed); /* printed with its interleaving */
  assert_non_null(strstr(e.why, "left waiting"));
}

/* Run N ends at every step outside the lock, orch_reset's cm_reset, then
 * run N+1 over the same slots: the same checks, and no task queued that
 * run N+1 did not grant. */
static void test_run_n_plus_1(void **st) {
  (void)st;
  struct {
    const char *name;
    const uint8_t *mask;
  } cases[] = {{"chain", CHAIN}, {"one byte", ONE_BYTE}, {"two the same", TWO_SAME}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    explorer e = explore2(cases[i].mask, V_REAL, true, -1, -1);
    printf("commute defer explorer: %s, run N ends anywhere, then run N+1: %llu states: %s\n",
           cases[i].name, (unsigned long long)e.states, e.failed ? e.why : "ok");
    assert_false(e.failed);
  }
}

/* Without cm_reset, run N+1 finds run N's held set and pending stack. */
static void test_no_reset_caught(void **st) {
  (void)st;
  explorer e = explore2(ONE_BYTE, V_NO_RESET, true, -1, -1);
  assert_true(e.failed); /* printed with its interleaving */
}

/* A reset that empties the held set and the pending stack but leaves the
 * held inboxes open and the hints naming them: a task of run N+1 joins
 * the inbox of a slot run N left held, whose own acquire in run N+1 then
 * opens it afresh, and the joined task is never granted. */
static void test_reset_sets_only_caught(void **st) {
  (void)st;
  explorer e = explore2(ONE_BYTE, V_RESET_SETS, true, -1, -1);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "left waiting"));
}

/* cm_reset's two halves for the join are each enough alone: with the
 * hints cleared no join reaches a stale inbox before its slot's acquire
 * opens it afresh; with the inboxes closed a stale hint fails the join.
 * (Kept both: this proves neither is load-bearing alone, not that one may
 * go.) */
static void test_either_half_suffices(void **st) {
  (void)st;
  const int variants[] = {V_RESET_NO_CLOSE, V_RESET_NO_HINTS};
  for (int v = 0; v < 2; v++) {
    explorer e = explore2(ONE_BYTE, variants[v], true, -1, -1);
    printf("commute defer explorer: one byte, runs N and N+1, %s: %llu states: %s\n",
           v ? "hints kept" : "inboxes left open", (unsigned long long)e.states,
           e.failed ? e.why : "ok");
    assert_false(e.failed);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_interleaving),   cmocka_unit_test(test_run_n_plus_1),
      cmocka_unit_test(test_no_reset_caught),      cmocka_unit_test(test_reset_sets_only_caught),
      cmocka_unit_test(test_either_half_suffices), cmocka_unit_test(test_no_recheck_caught),
      cmocka_unit_test(test_split_join_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
