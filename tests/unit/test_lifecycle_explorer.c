/* test_lifecycle_explorer.c — the protocol by which a chip's threads take
 * part in run after run (src/chip/run.c: run_enter, run_leave; src/chip/
 * chip.c: pto_chip_run's reset, publish and run_end), explored over every
 * interleaving of the orchestrator and 1-2 core threads over 2 runs, and
 * two broken variants caught.
 *
 * Model, one atomic (sequentially consistent) step each, as the seq_cst
 * operations of run.c and chip.c guarantee:
 *   main, for g = 1, 2:
 *     RESET     the run state becomes run g's (no thread may be inside:
 *               checked), dispatched[] = 0, ran = 0, the ready queue
 *               emptied (rq_discard)
 *     PUBLISH   phase = g << 1 | 1
 *     DISPATCH  one block to core 0, to core 1, none, or one left queued
 *               undispatched (every choice; a queued one fails the run)
 *     WAITDONE  until the block ran (the orchestrator waits for the task),
 *               or at once (the run failed: its blocks are abandoned)
 *     END       stop and phase = g << 1 (one store: stop is set first)
 *     SCAN i    read entered[i]; == g -> WAITLEFT i
 *     WAITLEFT  until entered[i] != g
 *   core i, forever:
 *     WAIT      parked until phase is running, gen != last and
 *               dispatched[i] (run_to_enter; its waker signals: lost
 *               wake-ups are test_wait_model.c's subject)
 *     READ      ph = phase; not running, gen == last or nothing
 *               dispatched -> WAIT
 *     ENTER     last = gen(ph); entered = gen(ph)
 *     RECHECK   phase == ph -> INSIDE, else entered = 0 -> WAIT
 *     INSIDE    touches the run's state (must be run gen(ph)'s: checked),
 *               claims from the ready queue (a block there must be run
 *               gen(ph)'s: checked) and runs its block
 *     STOPWAIT  until phase != ph (the run ended)
 *     LEAVE     entered = 0 -> WAIT
 * A depth-first search with a visited set checks: no RESET while a core
 * is between ENTER and LEAVE of the run before; no core touches state of
 * another run; every final state has both runs done with every dispatched
 * block run (no deadlock). Broken variants, each must be caught with the
 * interleaving printed:
 *  - ENTER_NO_RECHECK: a core enters without re-reading phase after its
 *    store of entered (the end misses it and resets under it);
 *  - END_SCANS_FIRST: the end reads entered[] before it stores the ended
 *    phase (a core that enters in between is missed);
 *  - OLD_RESET: the reset leaves the ready queue as the failed run left
 *    it (chip.c before rq_discard): run 2's core claims run 1's block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "explore.h"

enum { V_GOOD = 0, V_ENTER_NO_RECHECK, V_END_SCANS_FIRST, V_OLD_RESET };
static const char *variant_name[] = {"good", "enter without re-check",
                                     "end scans before the ended phase",
                                     "reset keeps the ready queue"};

enum { M_RESET, M_PUBLISH, M_DISPATCH, M_WAITDONE, M_END, M_SCAN, M_WAITLEFT, M_DONE };
static const char *m_name[] = {"RESET", "PUBLISH", "DISPATCH", "WAITDONE",
                               "END",   "SCAN",    "WAITLEFT", "DONE"};
enum { W_WAIT, W_READ, W_ENTER, W_RECHECK, W_INSIDE, W_STOPWAIT, W_LEAVE };
static const char *w_name[] = {"WAIT", "READ", "ENTER", "RECHECK", "INSIDE", "STOPWAIT", "LEAVE"};

#define MAXW 2
#define RUNS 2

typedef struct mstate {
  uint8_t phase;      /* gen << 1 | running */
  uint8_t owner;      /* the run the state belongs to (RESET) */
  uint8_t mpc, gen;   /* main's step and run */
  uint8_t target;     /* dispatched core + 1, 0: none */
  uint8_t scan;       /* SCAN / WAITLEFT: which core; END_SCANS_FIRST: scanned all */
  uint8_t ran;        /* the run's block ran */
  uint8_t queued;     /* the run whose block waits in the ready queue, 0: none */
  uint8_t must[MAXW]; /* END_SCANS_FIRST: main saw core i inside */
  uint8_t dispatched[MAXW];
  uint8_t pc[MAXW], last[MAXW], entered[MAXW], ph[MAXW];
} mstate;

static uint64_t encode(const mstate *s, int k) {
  uint64_t v = 0;
  v = v * 8 + s->phase;
  v = v * 4 + s->owner;
  v = v * 8 + s->mpc;
  v = v * 4 + s->gen;
  v = v * 4 + s->target;
  v = v * 4 + s->scan;
  v = v * 2 + s->ran;
  v = v * 4 + s->queued;
  for (int i = 0; i < k; i++) {
    v = v * 2 + s->must[i];
    v = v * 2 + s->dispatched[i];
    v = v * 8 + s->pc[i];
    v = v * 4 + s->last[i];
    v = v * 4 + s->entered[i];
    v = v * 8 + s->ph[i];
  }
  return v;
}

/* ---- one step ---- */
typedef struct ctx {
  int k, variant;
  char why[200];
  int bad_depth;
  int bad_trail[256]; /* who stepped: core i, or -1 - choice for main */
  uint64_t states;
} ctx;

/* Thread t (-1: main) takes one step with choice c; false if not enabled. */
static bool step(const ctx *x, mstate *s, int t, int c, char *why) {
  why[0] = '\0';
  if (t < 0) {
    switch (s->mpc) {
    case M_RESET:
      if (c) return false;
      for (int i = 0; i < x->k; i++)
        if (s->pc[i] >= W_INSIDE && s->pc[i] <= W_LEAVE) {
          snprintf(why, 200, "RESET for run %d while core %d is inside run %d (%s)", s->gen, i,
                   s->entered[i], w_name[s->pc[i]]);
          return true;
        }
      s->owner = s->gen;
      s->ran = 0;
      if (x->variant != V_OLD_RESET) s->queued = 0;
      for (int i = 0; i < x->k; i++)
        s->dispatched[i] = 0;
      s->mpc = M_PUBLISH;
      return true;
    case M_PUBLISH:
      if (c) return false;
      s->phase = (uint8_t)(s->gen << 1 | 1);
      s->mpc = M_DISPATCH;
      return true;
    case M_DISPATCH:
      if (c > x->k + 1) return false;
      if (c == x->k + 1) { /* queued, never dispatched: the run fails */
        s->queued = s->gen;
        c = 0;
      }
      s->target = (uint8_t)c;
      if (c) s->dispatched[c - 1] = 1;
      s->mpc = M_WAITDONE;
      return true;
    case M_WAITDONE: /* c = 1: the run failed, nobody waits for the block */
      if (c > 1 || (c == 0 && ((s->target && !s->ran) || s->queued == s->gen))) return false;
      s->scan = 0;
      if (x->variant == V_END_SCANS_FIRST) { /* reads entered[] first */
        for (int i = 0; i < x->k; i++)
          s->must[i] = s->entered[i] == s->gen;
        s->scan = 3;
      }
      s->mpc = M_END;
      return true;
    case M_END:
      if (c) return false;
      s->phase = (uint8_t)(s->gen << 1);
      s->mpc = x->variant == V_END_SCANS_FIRST ? M_WAITLEFT : M_SCAN;
      if (x->variant == V_END_SCANS_FIRST) s->scan = 0;
      return true;
    case M_SCAN:
      if (c) return false;
      if (s->scan == x->k) {
        s->gen++;
        s->mpc = s->gen > RUNS ? M_DONE : M_RESET;
        return true;
      }
      if (s->entered[s->scan] == s->gen)
        s->mpc = M_WAITLEFT;
      else
        s->scan++;
      return true;
    case M_WAITLEFT:
      if (c) return false;
      if (x->variant == V_END_SCANS_FIRST) {
        if (s->scan == x->k) {
          s->gen++;
          s->mpc = s->gen > RUNS ? M_DONE : M_RESET;
          return true;
        }
        if (s->must[s->scan] && s->entered[s->scan] == s->gen) return false;
        s->must[s->scan] = 0;
        s->scan++;
        return true;
      }
      if (s->entered[s->scan] == s->gen) return false;
      s->scan++;
      s->mpc = M_SCAN;
      return true;
    default: return false;
    }
  }
  if (c) return false;
  int i = t;
  uint8_t ph = s->phase;
  switch (s->pc[i]) {
  case W_WAIT:
    if (!((ph & 1) && (ph >> 1) != s->last[i] && s->dispatched[i])) return false;
    s->pc[i] = W_READ;
    return true;
  case W_READ:
    if (!(ph & 1) || (ph >> 1) == s->last[i] || !s->dispatched[i]) {
      s->pc[i] = W_WAIT;
      return true;
    }
    s->ph[i] = ph;
    s->pc[i] = W_ENTER;
    return true;
  case W_ENTER:
    s->last[i] = (uint8_t)(s->ph[i] >> 1);
    s->entered[i] = (uint8_t)(s->ph[i] >> 1);
    s->pc[i] = x->variant == V_ENTER_NO_RECHECK ? W_INSIDE : W_RECHECK;
    return true;
  case W_RECHECK:
    if (ph == s->ph[i]) {
      s->pc[i] = W_INSIDE;
    } else {
      s->entered[i] = 0;
      s->pc[i] = W_WAIT;
    }
    return true;
  case W_INSIDE:
    if (s->owner != s->entered[i] || s->phase >> 1 != s->entered[i]) {
      snprintf(why, 200, "core %d touches run %d's state, which now belongs to run %d (phase %d)",
               i, s->entered[i], s->owner, s->phase);
      return true;
    }
    if (s->queued && s->queued != s->entered[i]) {
      snprintf(why, 200, "core %d claims a block that the failed run %d left queued, in run %d", i,
               s->queued, s->entered[i]);
      return true;
    }
    if (s->dispatched[i]) s->ran = 1;
    s->pc[i] = W_STOPWAIT;
    return true;
  case W_STOPWAIT:
    if (ph == s->ph[i]) return false;
    s->pc[i] = W_LEAVE;
    return true;
  case W_LEAVE:
    s->entered[i] = 0;
    s->pc[i] = W_WAIT;
    return true;
  }
  return false;
}

/* ---- search (explore.h) ---- */

/* Actions: 0 .. k + 1, main with that choice; k + 2 .. 2k + 1, core
 * a - k - 2. */
static int who(const ctx *x, int a) { return a <= x->k + 1 ? -1 - a : a - x->k - 2; }

/* Keeps the path to the violation (its last step at depth - 1) and why. */
static int bad(xp_search *xs, int depth, const char *why) {
  ctx *x = xs->ctx;
  snprintf(x->why, sizeof x->why, "%s", why);
  x->bad_depth = depth;
  for (int d = 0; d < depth; d++)
    x->bad_trail[d] = who(x, xs->path[d]);
  return XP_STOP;
}

static void em_key(xp_search *xs, const void *state, void *key) {
  uint64_t v = encode(state, ((ctx *)xs->ctx)->k);
  memcpy(key, &v, sizeof v);
}
static int em_nact(xp_search *xs) { return 2 * ((ctx *)xs->ctx)->k + 2; }

static int em_apply(xp_search *xs, void *state, int a, int d) {
  const ctx *x = xs->ctx;
  int t = a <= x->k + 1 ? -1 : a - x->k - 2;
  char why[200];
  if (!step(x, state, t, t < 0 ? a : 0, why)) return XP_SKIP;
  return why[0] ? bad(xs, d + 1, why) : XP_STEP;
}

/* A state in which nothing can move is a deadlock unless main is done. */
static int em_final(xp_search *xs, const void *state, int d) {
  const mstate *s = state;
  if (s->mpc == M_DONE) return XP_STEP;
  char why[200];
  snprintf(why, sizeof why, "deadlock: main at %s of run %d, nothing can move", m_name[s->mpc],
           s->gen);
  return bad(xs, d, why);
}

static void print_trail(const ctx *x) {
  mstate s = {0};
  s.gen = 1;
  printf("  interleaving (%d steps):\n", x->bad_depth);
  for (int d = 0; d < x->bad_depth; d++) {
    int t = x->bad_trail[d] < 0 ? -1 : x->bad_trail[d];
    int c = x->bad_trail[d] < 0 ? -1 - x->bad_trail[d] : 0;
    const char *what = t < 0 ? m_name[s.mpc] : w_name[s.pc[t]];
    char why[200];
    step(x, &s, t, c, why);
    if (t < 0)
      printf("    main   %-9s%s -> phase %d\n", what,
             !c                    ? ""
             : s.mpc == M_WAITDONE ? (s.queued == s.gen && !s.target ? " (a block left queued)"
                                                                     : " (a block to a core)")
                                   : " (the run failed)",
             s.phase);
    else
      printf("    core %d %-9s -> entered %d\n", t, what, s.entered[t]);
  }
}

static bool run_variant(int variant, int k, ctx *x) {
  memset(x, 0, sizeof *x);
  x->k = k;
  x->variant = variant;
  mstate s = {0};
  s.gen = 1;
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(uint64_t),
                      .max_depth = 255,
                      .key = em_key,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_final = em_final};
  xp_search xs;
  int why = xp_run(&xs, &m, x, &s);
  x->states = (uint64_t)xs.states;
  xp_free(&xs);
  assert_true(why != XP_DEPTH);
  bool ok = why == XP_DONE;
  printf("%s, %d core%s, %d runs: %llu states, %s\n", variant_name[variant], k, k > 1 ? "s" : "",
         RUNS, (unsigned long long)x->states, ok ? "no violation" : x->why);
  return ok;
}

static void test_lifecycle_protocol(void **state) {
  (void)state;
  ctx x;
  for (int k = 1; k <= MAXW; k++)
    if (!run_variant(V_GOOD, k, &x)) {
      print_trail(&x);
      fail_msg("the lifecycle protocol fails with %d cores: %s", k, x.why);
    }
  for (int v = V_ENTER_NO_RECHECK; v <= V_OLD_RESET; v++) {
    if (run_variant(v, MAXW, &x)) fail_msg("broken variant '%s' was not caught", variant_name[v]);
    print_trail(&x);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lifecycle_protocol),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
