/* test_commute_explorer.c — the exclusion of COMMUTE tasks (src/chip/
 * commute.c: cm_acquire, cm_release) over every interleaving of three
 * tasks, each of which becomes ready, acquires its bytes (or waits on a
 * holder), starts, ends and releases them, then queues the waiters it
 * granted one at a time, as sched.c does once the table's lock is dropped
 * (other tasks move in between). Acquire and release are single steps (the
 * lock); the table's words are the real ones, kept in the state.
 *
 * Checks: no two tasks whose bytes overlap run at once; every state where
 * nothing can move has every task done (no lost wake-up, no deadlock); and
 * two tasks on disjoint bytes do run at once in some interleaving. Bytes
 * are bit masks: a chain (0-1 and 1-2 overlap, 0 and 2 do not), three on
 * one byte (each release hands the bytes and the other waiters on whole),
 * two disjoint ones with a third over both, and two with the same bytes
 * and a third over more.
 *
 * Caught, with the interleaving printed: a split acquire (the conflict
 * check, then the lock dropped and taken again to wait or hold: the holder
 * it saw may release in between, or another may take the bytes), and a
 * release whose caller queues only the first granted task, and a hand-on
 * of the bytes to a waiter whose bytes merely meet the releaser's. */
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
#define MAX_PATH 64

enum { P_NEW, P_CHECKED, P_WAIT, P_GRANTED, P_QUEUED, P_RUN, P_QUEUEING, P_DONE };
static const char *const pc_name[] = {"ready",  "checked", "wait",  "granted",
                                      "queued", "run",     "queue", "done"};
enum { V_REAL, V_SPLIT_ACQUIRE, V_FIRST_GRANT_ONLY, V_SAME_BY_OVERLAP };

typedef struct mstate {
  cm_link links[NT]; /* zeroed first: their padding stays zero */
  cm_held held[NT];  /* the held set: nheld entries, the rest zero */
  int32_t hint[CM_HINTS];
  int32_t nheld;
  uint8_t pc[NT];
  int8_t cursor[NT]; /* the releaser's next granted task to queue, -1 none */
  int8_t seen[NT];   /* split acquire: the holder its check found, -1 none */
  uint8_t pad[3];    /* states are hashed and compared bytewise */
} mstate;
_Static_assert(sizeof(mstate) == NT * (sizeof(cm_link) + sizeof(cm_held)) + CM_HINTS * 4 + 16,
               "no implicit padding");

typedef struct explorer {
  const uint8_t *mask;
  int variant;
  int disjoint_a, disjoint_b; /* two tasks on disjoint bytes, -1 none */
  bool together;              /* they ran at once in some state */
  uint64_t states;
  bool failed;
  char why[200];
  const int *path;
  int path_pc[MAX_PATH];
  int depth;
} explorer;

static const explorer *g_e; /* for the conflict callback */

static bool mask_conflict(void *env, int32_t a, int32_t b) {
  (void)env;
  return (g_e->mask[a] & g_e->mask[b]) != 0;
}

static bool mask_same(void *env, int32_t a, int32_t b) {
  (void)env;
  return g_e->mask[a] == g_e->mask[b];
}

static const cm_ops OPS = {mask_conflict, mask_same, NULL};
/* broken: "same" when the bytes merely meet */
static const cm_ops OPS_OVERLAP = {mask_conflict, mask_conflict, NULL};

static void violation(explorer *e, int d, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("commute explorer (variant %d): %s\n  interleaving:", e->variant, e->why);
  for (int i = 0; i < d; i++)
    printf(" t%d:%s", e->path[i], pc_name[e->path_pc[i]]);
  printf("\n");
}

/* The broken split acquire's second half, with the answer of the first:
 * holds when it saw no holder, else waits on the holder it saw (which may
 * have released since). The list operations as commute.c's. */
static void split_commit(mstate *s, int t) {
  cm_link *l = &s->links[t];
  int h = s->seen[t];
  l->wait_head = l->wait_tail = -1;
  if (h < 0) {
    l->held_pos = s->nheld;
    s->held[s->nheld++] = (cm_held){l->lo, l->hi, t, 0};
    atomic_store(&l->inbox, CM_INBOX_EMPTY); /* held: its inbox open */
    s->pc[t] = P_QUEUED;
    return;
  }
  l->wait_next = -1;
  if (s->links[h].wait_tail >= 0)
    s->links[s->links[h].wait_tail].wait_next = t;
  else
    s->links[h].wait_head = t;
  s->links[h].wait_tail = t;
  s->pc[t] = P_WAIT;
}

static int step(explorer *e, mstate *s, int t) {
  cm_table c;
  c.links = s->links;
  c.n = NT;
  c.held = s->held;
  c.nheld = s->nheld;
  memcpy(c.hint, s->hint, sizeof c.hint);
  switch (s->pc[t]) {
  case P_NEW:
    if (e->variant == V_SPLIT_ACQUIRE) {
      s->seen[t] = -1;
      for (int32_t i = 0; i < c.nheld; i++)
        if (mask_conflict(NULL, t, c.held[i].slot)) {
          s->seen[t] = (int8_t)c.held[i].slot;
          break;
        }
      s->pc[t] = P_CHECKED;
      break;
    }
    s->pc[t] = cm_acquire(&c, t, &OPS) ? P_QUEUED : P_WAIT;
    break;
  case P_CHECKED: split_commit(s, t); return XP_STEP;
  case P_QUEUED: s->pc[t] = P_RUN; break;
  case P_RUN: {
    cm_grants g = {-1, -1};
    cm_release(&c, t, e->variant == V_SAME_BY_OVERLAP ? &OPS_OVERLAP : &OPS, &g);
    for (int32_t w = g.head; w >= 0; w = c.links[w].wait_next)
      s->pc[w] = P_GRANTED;
    s->cursor[t] = (int8_t)g.head;
    s->pc[t] = P_QUEUEING;
    break;
  }
  case P_QUEUEING: {
    int g = s->cursor[t];
    if (g < 0) {
      s->pc[t] = P_DONE;
      break;
    }
    /* read the next before queueing, as sched.c's commute_release */
    int32_t next = c.links[g].wait_next;
    s->pc[g] = P_QUEUED;
    s->cursor[t] = (int8_t)(e->variant == V_FIRST_GRANT_ONLY ? -1 : next);
    break;
  }
  default: return XP_SKIP; /* waiting, granted, done: another task moves it */
  }
  s->nheld = c.nheld;
  /* a removed entry's place is left as the set's room is: zero (states
   * compare bytewise) */
  memset(&s->held[s->nheld], 0, sizeof s->held[0] * (size_t)(NT - s->nheld));
  memcpy(s->hint, c.hint, sizeof c.hint);
  return XP_STEP;
}

static int em_nact(xp_search *x) {
  (void)x;
  return NT;
}

static int em_apply(xp_search *x, void *state, int t, int d) {
  explorer *e = x->ctx;
  mstate *s = state;
  if (d < MAX_PATH) e->path_pc[d] = s->pc[t];
  return step(e, s, t);
}

static int em_state(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  e->path = x->path;
  for (int a = 0; a < NT; a++)
    for (int b = a + 1; b < NT; b++)
      if (s->pc[a] == P_RUN && s->pc[b] == P_RUN) {
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
    if (s->pc[t] != P_DONE) {
      violation(e, d, "nothing can move and task %d is left in '%s' (lost wake-up)", t,
                pc_name[s->pc[t]]);
      return XP_STOP;
    }
  return XP_STEP;
}

static explorer explore(const uint8_t *mask, int variant, int da, int db) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.mask = mask;
  e.variant = variant;
  e.disjoint_a = da;
  e.disjoint_b = db;
  g_e = &e;
  mstate s;
  memset(&s, 0, sizeof s);
  s.nheld = 0;
  for (int i = 0; i < CM_HINTS; i++)
    s.hint[i] = -1;
  for (int t = 0; t < NT; t++) {
    /* the span of its byte mask, as the orchestrator's lo/hi */
    s.links[t].lo = (uint64_t)__builtin_ctz(mask[t]);
    s.links[t].hi = 32u - (uint64_t)__builtin_clz(mask[t]);
    s.cursor[t] = s.seen[t] = -1;
    s.links[t].wait_head = s.links[t].wait_tail = s.links[t].wait_next = -1;
  }
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

static const uint8_t CHAIN[NT] = {0x3, 0x6, 0x4};    /* 0-1, 1-2 overlap; 0, 2 disjoint */
static const uint8_t ONE_BYTE[NT] = {0x1, 0x1, 0x1}; /* all on one byte */
static const uint8_t OVER_TWO[NT] = {0x1, 0x2, 0x3}; /* 0, 1 disjoint; 2 over both */
static const uint8_t TWO_SAME[NT] = {0x1, 0x1, 0x3}; /* 0, 1 the same bytes; 2 over more */

static void test_every_interleaving(void **st) {
  (void)st;
  struct {
    const char *name;
    const uint8_t *mask;
    int da, db;
  } cases[] = {{"chain", CHAIN, 0, 2},
               {"one byte", ONE_BYTE, -1, -1},
               {"over two", OVER_TWO, 0, 1},
               {"two the same", TWO_SAME, -1, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    explorer e = explore(cases[i].mask, V_REAL, cases[i].da, cases[i].db);
    printf("commute explorer: %s, %llu states: %s%s\n", cases[i].name, (unsigned long long)e.states,
           e.failed ? e.why : "ok",
           cases[i].da >= 0 ? (e.together ? ", disjoint tasks ran at once" : ", NEVER at once")
                            : "");
    assert_false(e.failed);
    if (cases[i].da >= 0) assert_true(e.together);
  }
}

static void test_split_acquire_caught(void **st) {
  (void)st;
  explorer e = explore(ONE_BYTE, V_SPLIT_ACQUIRE, -1, -1);
  assert_true(e.failed); /* printed with its interleaving */
  assert_true(strstr(e.why, "at once") || strstr(e.why, "lost wake-up"));
}

static void test_first_grant_only_caught(void **st) {
  (void)st;
  explorer e = explore(OVER_TWO, V_FIRST_GRANT_ONLY, -1, -1);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "lost wake-up"));
}

static void test_same_by_overlap_caught(void **st) {
  (void)st;
  explorer e = explore(OVER_TWO, V_SAME_BY_OVERLAP, -1, -1);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "run at once on shared bytes"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_interleaving),
      cmocka_unit_test(test_split_acquire_caught),
      cmocka_unit_test(test_first_grant_only_caught),
      cmocka_unit_test(test_same_by_overlap_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
