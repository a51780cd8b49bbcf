/* test_fanin_hold_explorer.c — fan-in combining (src/chip/handoff.h): a
 * core that completes, in one chain, several predecessors of one task s
 * holds their drops of s's fanin and makes them at once, before it runs a
 * block that does not owe a drop to s too, or at the chain's end. Written
 * as steps and explored over every interleaving of two cores.
 *
 * The graph: c0, c1, c2 (roots) each have s as their only consumer; w (a
 * root too) waits inside its kernel until s has run, as a collective's
 * rank waits for another's; queued in the order c0, w, c1, c2. A core
 * takes the queue's head (head_take.h), runs it and completes it:
 *   its drop of s is held when the core holds s's drops already, or holds
 *   none and peeks s's fanin above 1; else made (fetch_sub 1; s ready at 0);
 *   then it takes its next block, the head (or none);
 *   held drops are made (one fetch_sub of their number; s ready at 0, kept
 *   by the core if it has no next block) unless the next block also owes s
 *   a drop; with no next block the chain ends (nothing held is left).
 * Checked in every final state (no step left): every task ran exactly once
 * and s after c0-c2, w after s (a deadlock leaves a task unrun: its
 * trace is printed). Broken variants, each caught:
 *   - held across any block: drops are made only at the chain's end, so a
 *     core that holds s's drops and runs w waits forever for s;
 *   - no drops at the end: s never becomes ready;
 *   - one drop for all: the held ones make a drop of 1, not their number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "explore.h"

enum { C0, C1, C2, S, W, NT };
#define CORES    2
#define NONE     (-1)
#define MAX_PATH 64
#define WHAT     96

static const char *tname[NT] = {"c0", "c1", "c2", "s", "w"};
static bool releases_s(int t) { return t == C0 || t == C1 || t == C2; }

typedef enum variant { RIGHT, HELD_ACROSS, NO_END_DROP, ONE_DROP } variant;
static const char *variant_name[] = {"as handoff.h", "held across any block",
                                     "no drops at the chain's end", "one drop for all held"};

typedef struct hstate {
  int8_t fanin_s;
  int8_t queue[NT]; /* FIFO of ready tasks */
  int8_t nq;
  int8_t ran[NT];
  int8_t cur[CORES];    /* task running, or NONE */
  int8_t step[CORES];   /* 0: run its kernel, 1: complete, 2: take the next, 3: drops */
  int8_t next[CORES];   /* the block it took next, or NONE */
  int8_t held_n[CORES]; /* drops of s held */
} hstate;

typedef struct hx {
  variant v;
  const char *why;
  char trace[MAX_PATH][WHAT];
} hx;

static void push(hstate *s, int t) { s->queue[s->nq++] = (int8_t)t; }

static int pop(hstate *s) {
  if (!s->nq) return NONE;
  int t = s->queue[0];
  memmove(s->queue, s->queue + 1, (size_t)(s->nq - 1));
  s->nq--;
  return t;
}

/* the held drops of core c: s ready at 0, kept when the core has no next */
static void drop_held(hx *e, hstate *s, int c, char *what, size_t n) {
  int k = e->v == ONE_DROP ? 1 : s->held_n[c];
  s->held_n[c] = 0;
  s->fanin_s = (int8_t)(s->fanin_s - k);
  int len = snprintf(what, n, "; drops %d held: s's fanin %d", k, s->fanin_s);
  if (s->fanin_s == 0) {
    if (s->next[c] == NONE) {
      s->next[c] = S;
      snprintf(what + len, n - (size_t)len, ", kept");
    } else {
      push(s, S);
      snprintf(what + len, n - (size_t)len, ", queued");
    }
  }
}

static int core_step(hx *e, hstate *s, int c, char *what) {
  int t = s->cur[c];
  if (t == NONE) { /* idle: the queue's head */
    int h = pop(s);
    if (h == NONE) return XP_SKIP;
    s->cur[c] = (int8_t)h;
    s->step[c] = 0;
    snprintf(what, WHAT, "core %d: takes %s", c, tname[h]);
    return XP_STEP;
  }
  switch (s->step[c]) {
  case 0: /* its kernel: w's waits for s */
    if (t == W && !s->ran[S]) return XP_SKIP;
    for (int p = C0; t == S && p <= C2; p++)
      if (!s->ran[p]) {
        e->why = "s ran before one of its predecessors";
        snprintf(what, WHAT, "core %d: runs s before %s", c, tname[p]);
        return XP_STOP;
      }
    s->ran[t]++;
    s->step[c] = 1;
    snprintf(what, WHAT, "core %d: runs %s", c, tname[t]);
    return XP_STEP;
  case 1: /* its completion: the drop of s held or made */
    if (releases_s(t)) {
      if (s->held_n[c] || s->fanin_s > 1) {
        s->held_n[c]++;
        snprintf(what, WHAT, "core %d: completes %s, holds its drop (%d held)", c, tname[t],
                 s->held_n[c]);
      } else {
        s->fanin_s--;
        snprintf(what, WHAT, "core %d: completes %s, drops s's fanin to %d%s", c, tname[t],
                 s->fanin_s, s->fanin_s ? "" : ", s queued");
        if (!s->fanin_s) push(s, S);
      }
    } else {
      snprintf(what, WHAT, "core %d: completes %s", c, tname[t]);
    }
    s->step[c] = 2;
    return XP_STEP;
  case 2: /* its next block: the queue's head */
    s->next[c] = (int8_t)pop(s);
    snprintf(what, WHAT, "core %d: next %s", c, s->next[c] == NONE ? "none" : tname[s->next[c]]);
    s->step[c] = 3;
    return XP_STEP;
  default: { /* the held drops, unless the next block owes s one too */
    int b = s->next[c];
    int len = snprintf(what, WHAT, "core %d: before %s", c, b == NONE ? "the end" : tname[b]);
    bool keep = b != NONE && (releases_s(b) || e->v == HELD_ACROSS);
    if (b == NONE && e->v == NO_END_DROP) keep = true;
    if (s->held_n[c] && !keep) drop_held(e, s, c, what + len, WHAT - (size_t)len);
    s->cur[c] = s->next[c];
    s->next[c] = NONE;
    s->step[c] = 0;
    return XP_STEP;
  }
  }
}

static int hx_nact(xp_search *x) {
  (void)x;
  return CORES;
}

static int hx_apply(xp_search *x, void *state, int a, int d) {
  hx *e = x->ctx;
  return core_step(e, state, a, e->trace[d]);
}

static int hx_final(xp_search *x, const void *state, int d) {
  hx *e = x->ctx;
  const hstate *s = state;
  (void)d;
  for (int t = 0; t < NT; t++)
    if (s->ran[t] != 1) {
      e->why = "a run ended with a task not run (s's drops held or lost)";
      return XP_STOP;
    }
  return XP_STEP;
}

static const char *explore(variant v) {
  hx e = {.v = v};
  hstate init;
  memset(&init, 0, sizeof init);
  init.fanin_s = 3;
  static const int8_t order[] = {C0, W, C1, C2};
  memcpy(init.queue, order, sizeof order);
  init.nq = (int8_t)sizeof order;
  for (int c = 0; c < CORES; c++)
    init.cur[c] = init.next[c] = NONE;
  const xp_model m = {.state_size = sizeof(hstate),
                      .key_size = sizeof(hstate),
                      .max_depth = MAX_PATH,
                      .nact = hx_nact,
                      .apply = hx_apply,
                      .on_final = hx_final};
  int why = xp_explore_traced(&m, &e, &init, variant_name[v], &e.why, e.trace[0], WHAT);
  assert_int_not_equal(why, XP_DEPTH);
  assert_int_equal(why == XP_FAILED, e.why != NULL);
  return e.why;
}

static void test_fanin_hold(void **state) {
  (void)state;
  assert_null(explore(RIGHT));
}

static void test_broken_holds_caught(void **state) {
  (void)state;
  assert_non_null(explore(HELD_ACROSS));
  assert_non_null(explore(NO_END_DROP));
  assert_non_null(explore(ONE_DROP));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fanin_hold),
      cmocka_unit_test(test_broken_holds_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
