/* test_link_explorer.c — how a submitted task is linked to its producers
 * and published (src/chip/orch.c, submit, step 5; src/chip/sched.c,
 * fanout_take and the consumers' drops), explored over every
 * interleaving of the orchestrator and two cores, with broken variants
 * caught.
 *
 * The graph: p0 and p1 run on cores 0 and 1 from the start; the
 * orchestrator submits t (after p0 and p1), then u (after t and p1: p1's
 * list may hold two consumers, and u's edges may fail or link apart from
 * t's). Every word of the protocol is the slot's, written at its submit
 * (FILL), so a later run's task in the slot starts as this one. Steps, one
 * atomic (sequentially consistent) operation each:
 *   orchestrator, per task x:
 *     FILL    x's slot written, fanin = its number of producers (no guard)
 *     LINK i  producer i's list: closed (its completion came first): the
 *             edge failed; else x's node pushed (the CAS)
 *     UNDO    no edge linked: x is ready (the orchestrator pushes it);
 *             else the failed edges dropped in one fetch_sub, x ready
 *             if that made fanin 0; nothing when every edge linked
 *   core c, per task it runs (taken from the ready set, any of them):
 *     RUN     its kernel (its producers' kernels must have run, its slot
 *             must be filled)
 *     CLOSE   its list taken and closed (the exchange)
 *     DROP    one listed consumer's fanin dropped; ready at 0
 * Checked: no task is made ready twice, nor before its slot is filled;
 * in every final state every task ran once. Broken variants, each caught
 * with the interleaving printed:
 *   - LATE_FIELDS: fields of the slot written after the links (the order
 *     submit had while a guard on fanin kept the task unpublished until
 *     its end): the last producer's drop makes it ready unfilled;
 *   - NO_UNDO: the failed edges are not dropped: x is never ready;
 *   - COUNT_AFTER: fanin stored after the links: a producer's drop made
 *     in between is overwritten, and x is never ready. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "explore.h"

enum { P0, P1, T, U, NT };
#define CORES    2
#define NONE     (-1)
#define MAX_PATH 64
#define WHAT     112

static const char *tname[NT] = {"p0", "p1", "t", "u"};

/* the tasks the orchestrator submits, in order, and their producers */
static const int8_t submits[] = {T, U};
#define NSUB ((int)sizeof submits)
static const int8_t producers[NT][2] = {
    [P0] = {NONE, NONE}, [P1] = {NONE, NONE}, [T] = {P0, P1}, [U] = {T, P1}};
static int nprod(int x) { return (producers[x][0] != NONE) + (producers[x][1] != NONE); }

typedef enum variant { RIGHT, LATE_FIELDS, NO_UNDO, COUNT_AFTER } variant;
static const char *variant_name[] = {"as orch.c", "slot fields written after the links",
                                     "failed edges not dropped", "fanin stored after the links"};

/* orchestrator steps for one task (LINK once per producer) */
enum { O_FILL, O_LINK, O_LATE, O_UNDO };

typedef struct lstate {
  int8_t list[NT];   /* consumers linked: a bit per task */
  int8_t closed[NT]; /* its completion took the list */
  int8_t fanin[NT];
  int8_t filled[NT]; /* the orchestrator wrote its whole slot */
  int8_t ready[NT];  /* times made ready */
  int8_t queued;     /* made ready, not taken: a bit per task */
  int8_t ran[NT];
  int8_t cur[CORES];  /* the task it runs, or NONE */
  int8_t step[CORES]; /* 0: RUN, 1: CLOSE, 2: DROPs */
  int8_t drops[CORES];
  int8_t sub, opc, link; /* the orchestrator: which submit, step, link */
  int8_t linked, failed;
} lstate;

typedef struct lx {
  variant v;
  const char *why;
  char trace[MAX_PATH][WHAT];
} lx;

/* x made ready by whoever dropped its fanin to zero (or the orchestrator) */
static int make_ready(lx *e, lstate *s, int x, char *what, size_t n, int len) {
  s->ready[x]++;
  s->queued = (int8_t)(s->queued | 1 << x);
  snprintf(what + len, n - (size_t)len, ", %s ready", tname[x]);
  if (s->ready[x] > 1) {
    e->why = "a task was made ready twice";
    return XP_STOP;
  }
  if (!s->filled[x]) {
    e->why = "a task was made ready before its slot was filled";
    return XP_STOP;
  }
  return XP_STEP;
}

static int orch_step(lx *e, lstate *s, char *what) {
  if (s->sub == NSUB) return XP_SKIP;
  int x = submits[s->sub];
  int len;
  switch (s->opc) {
  case O_FILL:
    s->filled[x] = e->v != LATE_FIELDS;
    if (e->v != COUNT_AFTER) s->fanin[x] = (int8_t)nprod(x);
    s->linked = s->failed = 0;
    s->link = 0;
    s->opc = O_LINK;
    snprintf(what, WHAT, "orch: fills %s%s", tname[x],
             e->v == LATE_FIELDS   ? " (its last fields later)"
             : e->v == COUNT_AFTER ? " (its fanin later)"
                                   : "");
    return XP_STEP;
  case O_LINK: {
    int p = producers[x][s->link];
    if (s->closed[p]) {
      s->failed++;
      snprintf(what, WHAT, "orch: %s's list is closed: the edge %s->%s failed", tname[p], tname[p],
               tname[x]);
    } else {
      s->list[p] = (int8_t)(s->list[p] | 1 << x);
      s->linked++;
      snprintf(what, WHAT, "orch: links %s into %s's list", tname[x], tname[p]);
    }
    if (++s->link == nprod(x)) s->opc = e->v == RIGHT || e->v == NO_UNDO ? O_UNDO : O_LATE;
    return XP_STEP;
  }
  case O_LATE:
    if (e->v == LATE_FIELDS) {
      s->filled[x] = 1;
      snprintf(what, WHAT, "orch: writes %s's last fields", tname[x]);
    } else {
      s->fanin[x] = (int8_t)nprod(x);
      snprintf(what, WHAT, "orch: stores %s's fanin %d", tname[x], nprod(x));
    }
    s->opc = O_UNDO;
    return XP_STEP;
  default: {
    int rc = XP_STEP;
    len = snprintf(what, WHAT, "orch: %s: %d linked, %d failed", tname[x], s->linked, s->failed);
    if (s->linked == 0) {
      rc = make_ready(e, s, x, what, WHAT, len);
    } else if (s->failed && e->v != NO_UNDO) {
      s->fanin[x] = (int8_t)(s->fanin[x] - s->failed);
      len +=
          snprintf(what + len, WHAT - (size_t)len, ", drops %d: fanin %d", s->failed, s->fanin[x]);
      if (s->fanin[x] == 0) rc = make_ready(e, s, x, what, WHAT, len);
    }
    s->sub++;
    s->opc = O_FILL;
    return rc;
  }
  }
}

static int core_step(lx *e, lstate *s, int c, int k, char *what) {
  int x = s->cur[c];
  if (x == NONE) { /* idle: takes ready task k */
    if (!(s->queued & 1 << k)) return XP_SKIP;
    s->queued = (int8_t)(s->queued & ~(1 << k));
    s->cur[c] = (int8_t)k;
    s->step[c] = 0;
    snprintf(what, WHAT, "core %d: takes %s", c, tname[k]);
    return XP_STEP;
  }
  if (k) return XP_SKIP; /* a busy core's step is action k = 0 alone */
  switch (s->step[c]) {
  case 0:
    snprintf(what, WHAT, "core %d: runs %s", c, tname[x]);
    for (int i = 0; i < 2; i++) {
      int p = producers[x][i];
      if (p != NONE && !s->ran[p]) {
        e->why = "a task ran before one of its producers";
        return XP_STOP;
      }
    }
    if (!s->filled[x]) {
      e->why = "a core ran a task whose slot was not filled";
      return XP_STOP;
    }
    s->ran[x]++;
    s->step[c] = 1;
    return XP_STEP;
  case 1:
    s->drops[c] = s->list[x];
    s->list[x] = 0;
    s->closed[x] = 1;
    int n = __builtin_popcount((unsigned)s->drops[c]);
    snprintf(what, WHAT, "core %d: closes %s's list (%d consumer%s)", c, tname[x], n,
             n == 1 ? "" : "s");
    s->step[c] = 2;
    return XP_STEP;
  default: {
    if (!s->drops[c]) { /* its completion is over */
      s->cur[c] = NONE;
      snprintf(what, WHAT, "core %d: done with %s", c, tname[x]);
      return XP_STEP;
    }
    int y = __builtin_ctz((unsigned)s->drops[c]);
    s->drops[c] = (int8_t)(s->drops[c] & (s->drops[c] - 1));
    s->fanin[y]--;
    int len = snprintf(what, WHAT, "core %d: drops %s's fanin to %d", c, tname[y], s->fanin[y]);
    return s->fanin[y] == 0 ? make_ready(e, s, y, what, WHAT, len) : XP_STEP;
  }
  }
}

/* action 0: the orchestrator; 1 + c * NT + k: core c (k: the ready task
 * an idle core takes; a busy core steps on k = 0) */
static int lx_nact(xp_search *x) {
  (void)x;
  return 1 + CORES * NT;
}

static int lx_apply(xp_search *x, void *state, int a, int d) {
  lx *e = x->ctx;
  if (a == 0) return orch_step(e, state, e->trace[d]);
  a--;
  return core_step(e, state, a / NT, a % NT, e->trace[d]);
}

static int lx_final(xp_search *x, const void *state, int d) {
  lx *e = x->ctx;
  const lstate *s = state;
  (void)d;
  for (int t = 0; t < NT; t++)
    if (s->ran[t] != 1) {
      e->why = "a run ended with a task not run";
      return XP_STOP;
    }
  return XP_STEP;
}

static const char *explore(variant v) {
  lx e = {.v = v};
  lstate init;
  memset(&init, 0, sizeof init);
  for (int c = 0; c < CORES; c++) {
    init.cur[c] = (int8_t)(c == 0 ? P0 : P1);
    init.filled[init.cur[c]] = init.ready[init.cur[c]] = 1;
  }
  const xp_model m = {.state_size = sizeof(lstate),
                      .key_size = sizeof(lstate),
                      .max_depth = MAX_PATH,
                      .nact = lx_nact,
                      .apply = lx_apply,
                      .on_final = lx_final};
  int why = xp_explore_traced(&m, &e, &init, variant_name[v], &e.why, e.trace[0], WHAT);
  assert_int_not_equal(why, XP_DEPTH);
  assert_int_equal(why == XP_FAILED, e.why != NULL);
  return e.why;
}

static void test_link_publish(void **state) {
  (void)state;
  assert_null(explore(RIGHT));
}

static void test_broken_links_caught(void **state) {
  (void)state;
  assert_non_null(explore(LATE_FIELDS));
  assert_non_null(explore(NO_UNDO));
  assert_non_null(explore(COUNT_AFTER));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_link_publish),
      cmocka_unit_test(test_broken_links_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
