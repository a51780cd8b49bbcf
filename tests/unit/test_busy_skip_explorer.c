/* test_busy_skip_explorer.c — the orchestrator leaves the pass to busy
 * cores (src/chip/sched.c cores_all_busy, kick_others), explored over
 * every interleaving of the orchestrator and two cores, with broken
 * variants caught.
 *
 * Model: the orchestrator O pushes one single-core block (LATE), then
 * looks at each core of its type: its `finished`, then its `dispatched`
 * (two loads each). If some core has nothing in flight, O requests a pass
 * and runs the role loop (role.h, as sched_request without a puller);
 * if every core has a block in flight, O is done: their block ends bring
 * the pass. A core C0, C1 loops: RUN its next dispatched block, END
 * (store `finished`), then its kick enters the role first
 * (role_enter_first: PEEK0 XCHG0, else REQ and the role loop), then WAIT
 * (parked until a pass dispatches to it). A core starts busy (a block
 * dispatched) or idle. The pass (PASS, whoever holds the role) places
 * LATE on a core with nothing in flight, else on a core with one block in
 * flight (its pending slot), as a dispatch pass does. Each step is one
 * atomic operation of the real inline functions of role.h on role words
 * loaded from and stored back to the explored state; interleavings are
 * sequentially consistent, as the fences of cores_all_busy and
 * sched_kick make them.
 *
 * Option WAITS: C0's first block ends only after LATE has run (a kernel
 * waiting in its body for a later task, which pto allows while a core of
 * the type is free to run it).
 * Checks, in every final state (O done, each core done or parked with
 * nothing dispatched): LATE ran exactly once and nothing is queued; at
 * most one thread in a pass.
 * Broken variants, each caught with the interleaving printed:
 *  - LOOK_FIRST: O looks before its push: both cores end and pass before
 *    LATE is queued, and O, having seen them busy, requests no pass;
 *  - ANY_BUSY: O leaves the pass when any core is busy: with WAITS, C0
 *    waits for LATE while C1 sits idle and nobody places it.
 * Runs N and N+1 (test_busy_skip_run_n_plus_1): a core's `dispatched`
 * and `finished` outlive a run. Run N ends at any step (a failed run: a
 * block may be left unfinished), chip.c's reset (both words to 0 for
 * every core, the role to role_init, the queue discarded), and run N+1
 * starts with both cores idle and O pushing LATE: O's look sees run N+1's
 * words only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip/role.h"

#include "explore.h"
#include "role_loop_model.h"

enum { V_GOOD = 0, V_LOOK_FIRST, V_ANY_BUSY };
enum { R_NONE = 0, R_REAL };
static const char *reset_name[] = {"one run", "the reset"};

enum {
  PC_START,
  /* O */
  PC_PUSH,
  PC_LOOKF0,
  PC_LOOKD0,
  PC_LOOKF1,
  PC_LOOKD1,
  PC_OREQ,
  /* cores */
  PC_RUN,
  PC_END,
  PC_PEEK0,
  PC_XCHG0,
  PC_CREQ,
  PC_WAIT,
  /* the role loop (all) */
  PC_PEEK,
  PC_XCHG,
  PC_SNAP,
  PC_PASS,
  PC_MORE,
  PC_REL,
  PC_CHECK,
  PC_DONE
};
static const char *pc_name[] = {"START", "PUSH", "LOOKF0", "LOOKD0", "LOOKF1", "LOOKD1", "OREQ",
                                "RUN",   "END",  "PEEK0",  "XCHG0",  "CREQ",   "WAIT",   "PEEK",
                                "XCHG",  "SNAP", "PASS",   "MORE",   "REL",    "CHECK",  "DONE"};

enum { T_O = 0, T_C0 = 1, T_C1 = 2, K = 3 };

typedef struct mstate {
  uint8_t req, held, queued, late_ran;
  uint8_t dispatched[2], finished[2], late_at[2]; /* by core; late_at: LATE's dispatch id */
  uint8_t pc[K], ret[K], rseen[K], did[K];
  uint8_t seenf; /* O's load of the core's finished (LOOKF) */
  uint8_t skip;  /* LOOK_FIRST: O's look, made before its push, saw every core busy */
  uint8_t run;   /* 0: run N; 1: run N+1 */
} mstate;

#define MAX_PATH 256

typedef struct explorer {
  int variant, reset;
  bool c1_busy; /* C1 starts with a block in flight (C0 always does) */
  bool waits;   /* C0's first block ends only after LATE ran */
  uint64_t states, finals;
  bool failed;
  char why[200];
  const int *path_t;
  int path_pc[MAX_PATH];
  int depth;
} explorer;

static void load_role(role *r, const mstate *s) {
  role_init(r);
  atomic_store(&r->req, s->req);
  atomic_store(&r->held, s->held);
}
static void store_role(const role *r, mstate *s) {
  s->req = (uint8_t)atomic_load(&r->req);
  s->held = (uint8_t)atomic_load(&r->held);
}

static void loop_then(mstate *s, int i, int ret) {
  s->ret[i] = (uint8_t)ret;
  s->pc[i] = PC_PEEK;
}

static int inflight(const mstate *s, int c) { return s->dispatched[c] - s->finished[c]; }

/* A dispatch pass: LATE on a core with nothing in flight, else in the
 * pending slot of one with one block in flight. */
static bool pass(mstate *s) {
  if (!s->queued) return false;
  for (int level = 0; level < 2; level++)
    for (int c = 0; c < 2; c++)
      if (inflight(s, c) == level) {
        s->late_at[c] = ++s->dispatched[c];
        s->queued = 0;
        return true;
      }
  return false;
}

/* O's look at core c's dispatched, after its finished (seenf): a busy
 * core sends it on to the next one; the last busy one (ANY_BUSY: the
 * first) makes it leave the pass, an idle one request it. LOOK_FIRST
 * keeps the decision for after its push. */
static void look_done(const explorer *e, mstate *s, int c) {
  bool busy = s->seenf < s->dispatched[c];
  if (busy && c == 0 && e->variant != V_ANY_BUSY) {
    s->pc[T_O] = PC_LOOKF1;
  } else if (e->variant == V_LOOK_FIRST) {
    s->skip = busy;
    s->pc[T_O] = PC_PUSH;
  } else {
    s->pc[T_O] = busy ? PC_DONE : PC_OREQ;
  }
}

static void step(const explorer *e, mstate *s, int i) {
  role r;
  load_role(&r, s);
  int c = i - T_C0;
  switch (s->pc[i]) {
  case PC_START:
    s->pc[i] = i == T_O ? (e->variant == V_LOOK_FIRST ? PC_LOOKF0 : PC_PUSH) : PC_WAIT;
    break;
  case PC_PUSH:
    s->queued = 1;
    /* LOOK_FIRST pushes after its look: then the pass or nothing */
    s->pc[i] = e->variant != V_LOOK_FIRST ? PC_LOOKF0 : s->skip ? PC_DONE : PC_OREQ;
    break;
  case PC_LOOKF0:
  case PC_LOOKF1:
    s->seenf = s->finished[s->pc[i] == PC_LOOKF0 ? 0 : 1];
    s->pc[i] = s->pc[i] == PC_LOOKF0 ? PC_LOOKD0 : PC_LOOKD1;
    break;
  case PC_LOOKD0:
  case PC_LOOKD1: look_done(e, s, s->pc[i] == PC_LOOKD0 ? 0 : 1); break;
  case PC_OREQ: /* sched_request: the request, then the role loop */
    role_request(&r);
    loop_then(s, i, PC_DONE);
    break;
  case PC_WAIT: /* parked until a pass dispatches here */
    if (inflight(s, c) > 0) s->pc[i] = PC_RUN;
    break;
  case PC_RUN:
    if (s->late_at[c] == s->finished[c] + 1) s->late_ran++;
    s->pc[i] = PC_END;
    break;
  case PC_END: /* store finished, then its kick */
    s->finished[c]++;
    s->pc[i] = PC_PEEK0;
    break;
  case PC_PEEK0: s->pc[i] = role_peek_free(&r) ? PC_XCHG0 : PC_CREQ; break;
  case PC_XCHG0:
    if (role_exchange(&r)) {
      s->ret[i] = PC_WAIT;
      s->pc[i] = PC_SNAP;
    } else {
      s->pc[i] = PC_CREQ;
    }
    break;
  case PC_CREQ:
    role_request(&r);
    loop_then(s, i, PC_WAIT);
    break;
  case PC_PASS:
    s->did[i] = pass(s);
    s->pc[i] = PC_MORE;
    break;
  default:
    if (role_loop_at(s->pc[i], PC_PEEK))
      s->pc[i] = (uint8_t)role_loop_step(&r, s->pc[i], PC_PEEK, s->ret[i], &s->rseen[i], s->did[i]);
    break;
  }
  store_role(&r, s);
}

/* Whether thread i can step: a parked core waits for a dispatch; C0's
 * first block, with WAITS, ends only after LATE ran. */
static bool enabled(const explorer *e, const mstate *s, int i) {
  if (s->pc[i] == PC_DONE) return false;
  if (i == T_O) return true;
  int c = i - T_C0;
  if (s->pc[i] == PC_WAIT) return inflight(s, c) > 0;
  if (s->pc[i] == PC_END && c == 0 && e->waits && !s->run && s->finished[0] == 0 &&
      s->late_at[0] != 1)
    return s->late_ran > 0;
  return true;
}

/* Run N ends here, wherever its threads are (a failed run: a block may be
 * left unfinished), chip.c's reset, and run N+1: both cores idle, O
 * pushes LATE. */
static void end_and_reset(mstate *s) {
  memset(s, 0, sizeof *s);
  s->run = 1;
  s->pc[T_O] = PC_PUSH;
  s->pc[T_C0] = s->pc[T_C1] = PC_WAIT;
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("busy-skip explorer (variant %d, C1 %s%s, %s): %s\n  interleaving:", e->variant,
         e->c1_busy ? "busy" : "idle", e->waits ? ", C0 waits for LATE" : "", reset_name[e->reset],
         e->why);
  for (int d = 0; d < e->depth; d++)
    if (e->path_t[d] == K)
      printf(" END-RUN-N+RESET");
    else
      printf(" %s:%s", (const char *[]){"O", "C0", "C1"}[e->path_t[d]], pc_name[e->path_pc[d]]);
  printf("\n");
}

static void check(explorer *e, const mstate *s, int d) {
  e->depth = d;
  int in_pass = 0;
  bool any = false;
  for (int i = 0; i < K; i++) {
    in_pass += s->pc[i] >= PC_SNAP && s->pc[i] <= PC_REL;
    any |= enabled(e, s, i);
  }
  if (in_pass > 1) violation(e, "%d threads run the scheduler's pass at once", in_pass);
  if (any) return;
  e->finals++;
  const char *of = s->run ? " of run N+1" : "";
  if (s->pc[T_O] != PC_DONE || s->queued)
    violation(e, "every thread is done or parked with LATE%s still queued (no pass placed it)", of);
  else if (s->late_ran != 1)
    violation(e, "LATE%s ran %u times (expected 1)", of, s->late_ran);
  else if (s->held)
    violation(e, "every thread%s is done with the role still held", of);
}

static int em_nact(xp_search *x) {
  const explorer *e = x->ctx;
  return K + (e->reset != R_NONE);
}

static int em_apply(xp_search *x, void *state, int i, int d) {
  explorer *e = x->ctx;
  mstate *n = state;
  if (i == K) {
    if (n->run) return XP_SKIP;
    e->path_pc[d] = 0;
    end_and_reset(n);
    return XP_STEP;
  }
  if (!enabled(e, n, i)) return XP_SKIP;
  e->path_pc[d] = n->pc[i];
  step(e, n, i);
  return XP_STEP;
}

static int em_state(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  e->path_t = x->path;
  check(e, state, d);
  return e->failed ? XP_STOP : XP_STEP;
}

static explorer explore(int variant, bool c1_busy, bool waits, int reset) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.variant = variant;
  e.c1_busy = c1_busy;
  e.waits = waits;
  e.reset = reset;
  mstate s;
  memset(&s, 0, sizeof s);
  s.dispatched[0] = 1; /* C0's block in flight */
  s.dispatched[1] = c1_busy;
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_state = em_state};
  xp_explore(&m, &e, &s, &e.states, &e.failed, e.why, sizeof e.why);
  e.path_t = NULL;
  return e;
}

static void report(const explorer *e) {
  printf("busy-skip explorer: C1 %s%s, %s: %llu states, %llu final: %s\n",
         e->c1_busy ? "busy" : "idle", e->waits ? ", C0 waits for LATE" : "", reset_name[e->reset],
         (unsigned long long)e->states, (unsigned long long)e->finals, e->failed ? e->why : "ok");
}

/* Every interleaving: C1 busy or idle, C0's block waiting for LATE or
 * not (with C1 busy too it cannot: LATE would need a free core). */
static void test_busy_skip_all_interleavings(void **st) {
  (void)st;
  for (int busy = 0; busy < 2; busy++)
    for (int waits = 0; waits < 2 - busy; waits++) {
      explorer e = explore(V_GOOD, busy, waits, R_NONE);
      report(&e);
      assert_false(e.failed);
      assert_true(e.finals > 0);
    }
}

/* The look before the push: both cores' passes may come before LATE is
 * queued, and O, having seen them busy, leaves it there. */
static void test_busy_skip_broken_look_first_caught(void **st) {
  (void)st;
  explorer e = explore(V_LOOK_FIRST, true, false, R_NONE);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "still queued"));
}

/* One busy core is not enough: C0 waits for LATE, C1 idles. */
static void test_busy_skip_broken_any_busy_caught(void **st) {
  (void)st;
  explorer e = explore(V_ANY_BUSY, false, true, R_NONE);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "still queued"));
}

/* Run N ends anywhere, the reset, run N+1: LATE of run N+1 runs once. */
static void test_busy_skip_run_n_plus_1(void **st) {
  (void)st;
  for (int busy = 0; busy < 2; busy++) {
    explorer e = explore(V_GOOD, busy, false, R_REAL);
    report(&e);
    assert_false(e.failed);
    assert_true(e.finals > 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_busy_skip_all_interleavings),
      cmocka_unit_test(test_busy_skip_broken_look_first_caught),
      cmocka_unit_test(test_busy_skip_broken_any_busy_caught),
      cmocka_unit_test(test_busy_skip_run_n_plus_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
