/* test_role_explorer.c — the hand-offs between cores when scheduling is a
 * role (src/chip/role.h, src/chip/sched.c), explored over every
 * interleaving of 2 and 3 cores, and two broken variants caught.
 *
 * Model: K cores each finish one producer block of a shared consumer C
 * (fan-in K). Each core then runs the completion step itself:
 *   DEC    release its fan-out: fetch_sub(C.fanin) == 1 -> C is ready (push)
 *   REQ    role_request              (after publishing the completion)
 *   PEEK   role_peek_free            (no: the holder serves us -> done)
 *   XCHG   role_exchange             (no: done)
 *   SNAP   seen = role_snapshot
 *   PASS   claim every ready task and run it on this core (the single
 *          ready successor runs on the core that released it)
 *   MORE   did work or role_more(seen) -> SNAP
 *   REL    role_release
 *   CHECK  role_recheck(seen) -> PEEK, else done (park)
 * A core's block end enters first (role_enter_first, sched.c sched_kick)
 * in the models `enter_first`: before REQ,
 *   PEEK0  role_peek_free            (no: -> REQ)
 *   XCHG0  role_exchange             (yes: -> SNAP, no request; no: -> REQ)
 * The role steps are the real inline functions, one atomic operation per
 * step, on a role word loaded from and stored back to the explored state;
 * interleavings are sequentially consistent, which the seq_cst operations
 * of role.h guarantee. A depth-first search with a visited set checks:
 *  - at most one core between XCHG and REL (mutual exclusion of passes);
 *  - in every final state C became ready exactly once, ran exactly once,
 *    and nothing is left in the ready queue (no request lost: a ready
 *    successor never waits for a wake-up nobody sends).
 * With the hand-off (src/chip/handoff.h), each producer releases two
 * consumers C0 and C1 (DEC0, DEC1), and a core whose decrement makes one
 * ready keeps the first such one instead of pushing it (the second is
 * pushed) and runs it (RUN) before its block's end requests the pass it
 * asks for anyway (REQ): each consumer must still become ready once (a
 * push or a keep), run once, and nothing may be left queued.
 * Broken variants, each must be caught with the interleaving printed:
 *  - LEAVE_NO_RECHECK: the holder leaves without re-checking the requests
 *    (a park without re-check): C stays ready, nobody runs it;
 *  - GUARD_BY_LOAD: readiness decided by a load after the decrement
 *    instead of by the decrement's result: C becomes ready twice;
 *  - HANDOFF_NO_REQUEST: a core that kept a consumer skips the request
 *    after its chain (it ran what it kept): the consumer it pushed beside
 *    it stays queued;
 *  - ENTER_FIRST_NO_REQUEST: a core whose first entry failed leaves
 *    without the request (the holder it met may be past its last look):
 *    the consumer it pushed stays queued.
 * Runs N and N+1 (test_role_run_n_plus_1): the role word outlives a run.
 * Run N ends at every step, chip.c run_reset's role_init runs, and run
 * N+1 (the same cores, consumers of its own) is explored under the same
 * checks. Caught, with the interleaving printed: KEEPS_HELD, a reset that
 * leaves the role held (every core of run N+1 leaves its request to a
 * holder that is gone, and the consumer stays queued). A reset that keeps
 * the request count passes: every snapshot compared with it is taken
 * inside the run. */
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

enum {
  V_GOOD = 0,
  V_LEAVE_NO_RECHECK,
  V_GUARD_BY_LOAD,
  V_HANDOFF_NO_REQUEST,
  V_ENTER_FIRST_NO_REQUEST
};
enum {
  PC_DEC,
  PC_DEC1, /* hand-off: the second consumer's decrement */
  PC_RUN,  /* hand-off: run the consumer kept */
  PC_DEC_CHECK,
  PC_REQ,
  PC_PEEK,
  PC_XCHG,
  PC_SNAP,
  PC_PASS,
  PC_MORE,
  PC_REL,
  PC_CHECK,
  PC_PEEK0, /* enter first: the role looks free? */
  PC_XCHG0, /* enter first: take it, no request */
  PC_DONE
};
static const char *pc_name[] = {"DEC",  "DEC1",  "RUN",   "DEC_CHECK", "REQ",
                                "PEEK", "XCHG",  "SNAP",  "PASS",      "MORE",
                                "REL",  "CHECK", "PEEK0", "XCHG0",     "DONE"};

#define MAXK 3

/* per consumer j: fanin[j], ready[j] (pushes and keeps), ran[j]; queued:
 * a bit per consumer in the ready queue; kept[i]: 1 + the consumer core i
 * keeps, 0: none */
typedef struct mstate {
  uint8_t fanin[2], req, held, queued, ready[2], ran[2];
  uint8_t pc[MAXK], seen[MAXK], did[MAXK], kept[MAXK];
  uint8_t run; /* 0: run N; 1: run N+1, after run N ended and the reset */
} mstate;

/* The reset between run N and run N+1: none (one run), chip.c
 * run_reset's role_init (R_REAL), or one that keeps a word of run N. */
enum { R_NONE = 0, R_REAL, R_KEEPS_HELD, R_KEEPS_REQ, R_COUNT };
static const char *reset_name[R_COUNT] = {"one run", "role_init", "KEEPS_HELD", "KEEPS_REQ"};

static uint64_t encode(const mstate *s, int k) {
  uint64_t v = 0;
  for (int j = 0; j < 2; j++) {
    v = v * 4 + s->fanin[j];
    v = v * 4 + s->ready[j];
    v = v * 4 + s->ran[j];
  }
  v = v * 16 + s->req; /* below 16: one request a core a run at most, 2 runs */
  v = v * 2 + s->held;
  v = v * 4 + s->queued;
  v = v * 2 + s->run;
  for (int i = 0; i < k; i++) {
    v = v * 16 + s->pc[i];
    v = v * 16 + s->seen[i];
    v = v * 2 + s->did[i];
    v = v * 4 + s->kept[i];
  }
  return v;
}

#define MAX_PATH 256

typedef struct explorer {
  int k, variant;
  bool handoff;     /* two consumers, the first ready one kept (handoff.h) */
  bool enter_first; /* a block's end enters before it requests (role_enter_first) */
  int reset;        /* R_NONE, or run N ends anywhere, this reset, then run N+1 */
  uint64_t states, finals;
  bool failed;
  char why[160];
  const int *path_t;     /* the search's path: the core of each step */
  int path_pc[MAX_PATH]; /* and the pc it stepped from */
  int depth;
} explorer;

static void load_role(role *r, const mstate *s) {
  atomic_store(&r->req, s->req);
  atomic_store(&r->held, s->held);
}
static void store_role(const role *r, mstate *s) {
  s->req = (uint8_t)atomic_load(&r->req);
  s->held = (uint8_t)atomic_load(&r->held);
}

/* Where a block's end goes: the request, or first the entry. */
static int block_end(const explorer *e) { return e->enter_first ? PC_PEEK0 : PC_REQ; }
/* After a failed first entry: the request (broken: none). */
static int entry_failed(const explorer *e) {
  return e->variant == V_ENTER_FIRST_NO_REQUEST ? PC_DONE : PC_REQ;
}

/* One step of core i. */
static void step(const explorer *e, mstate *s, int i) {
  role r;
  role_init(&r);
  load_role(&r, s);
  switch (s->pc[i]) {
  case PC_DEC:
  case PC_DEC1: {
    int j = s->pc[i] == PC_DEC1;
    if (e->variant == V_GUARD_BY_LOAD) {
      s->fanin[j]--;
      s->pc[i] = PC_DEC_CHECK;
      break;
    }
    if (s->fanin[j]-- == 1) {
      s->ready[j]++;
      if (e->handoff && !s->kept[i])
        s->kept[i] = (uint8_t)(1 + j); /* kept: no push */
      else
        s->queued |= (uint8_t)(1u << j);
    }
    s->pc[i] = e->handoff && j == 0 ? PC_DEC1 : s->kept[i] ? PC_RUN : block_end(e);
    break;
  }
  case PC_RUN: /* the kept consumer, on this core, then the block's end */
    s->ran[s->kept[i] - 1]++;
    s->kept[i] = 0;
    s->pc[i] = e->variant == V_HANDOFF_NO_REQUEST ? PC_DONE : block_end(e);
    break;
  case PC_DEC_CHECK: /* broken: another core's decrement may be seen too */
    if (s->fanin[0] == 0) {
      s->ready[0]++;
      s->queued |= 1;
    }
    s->pc[i] = block_end(e);
    break;
  case PC_REQ:
    role_request(&r);
    s->pc[i] = PC_PEEK;
    break;
  case PC_PASS: /* claim the ready queue, run what it held on this core */
    s->did[i] = s->queued > 0;
    for (int j = 0; j < 2; j++)
      s->ran[j] += (s->queued >> j) & 1;
    s->queued = 0;
    s->pc[i] = PC_MORE;
    break;
  case PC_REL: /* the loop's, but for the broken variant's leave */
    role_release(&r);
    s->pc[i] = e->variant == V_LEAVE_NO_RECHECK ? PC_DONE : PC_CHECK;
    break;
  case PC_PEEK0: s->pc[i] = role_peek_free(&r) ? PC_XCHG0 : entry_failed(e); break;
  case PC_XCHG0: s->pc[i] = role_exchange(&r) ? PC_SNAP : entry_failed(e); break;
  default:
    if (role_loop_at(s->pc[i], PC_PEEK))
      s->pc[i] = (uint8_t)role_loop_step(&r, s->pc[i], PC_PEEK, PC_DONE, &s->seen[i], s->did[i]);
    break;
  }
  store_role(&r, s);
}

/* Run N ends here, failed or cancelled, wherever its cores are: the role
 * held by a pass cut short, requests pending, a consumer queued. The
 * model ends it at every step, which is more than the real end allows
 * (a holder leaves the role before its thread leaves the run, sched.c
 * sched_role_hold; test_lifecycle_explorer proves none is inside at the
 * reset), so the reset is checked against any state. Then chip.c
 * run_reset's role_init, the ready queue discarded, and run N+1: the
 * same cores finish the producers of run N+1's consumers (submit fills
 * their slots: fan-in K again). */
static void end_and_reset(const explorer *e, mstate *s) {
  role r;
  role_init(&r);
  load_role(&r, s);
  role_init(&r); /* run_reset */
  if (e->reset == R_KEEPS_HELD) atomic_store(&r.held, s->held);
  if (e->reset == R_KEEPS_REQ) atomic_store(&r.req, s->req);
  store_role(&r, s);
  s->fanin[0] = (uint8_t)e->k;
  s->fanin[1] = e->handoff ? (uint8_t)e->k : 0;
  s->queued = 0; /* rq_discard */
  for (int j = 0; j < 2; j++)
    s->ready[j] = s->ran[j] = 0;
  for (int i = 0; i < MAXK; i++)
    s->pc[i] = s->seen[i] = s->did[i] = s->kept[i] = 0; /* PC_DEC */
  s->run = 1;
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("role explorer (%d cores, variant %d): %s\n  interleaving:", e->k, e->variant, e->why);
  for (int d = 0; d < e->depth; d++)
    if (e->path_t[d] == e->k)
      printf(" END-RUN-N+RESET");
    else
      printf(" c%d:%s", e->path_t[d], pc_name[e->path_pc[d]]);
  printf("\n");
}

static void check(explorer *e, const mstate *s, int d) {
  e->depth = d;
  int in_pass = 0, done = 0;
  for (int i = 0; i < e->k; i++) {
    in_pass += s->pc[i] >= PC_SNAP && s->pc[i] <= PC_REL;
    done += s->pc[i] == PC_DONE;
  }
  if (in_pass > 1) violation(e, "%d cores run the scheduler's pass at once", in_pass);
  if (done < e->k) return;
  e->finals++;
  const char *of = s->run ? " of run N+1" : "";
  for (int j = 0; j < (e->handoff ? 2 : 1); j++)
    if (s->ready[j] != 1)
      violation(e, "consumer %d%s became ready %u times (expected 1)", j, of, s->ready[j]);
    else if (s->queued != 0)
      violation(e, "every core parked with ready task(s)%s 0x%x left in the queue (lost request)",
                of, s->queued);
    else if (s->ran[j] != 1)
      violation(e, "consumer %d%s ran %u times (expected 1)", j, of, s->ran[j]);
  if (s->held) violation(e, "every core parked with the role still held%s", of);
}

/* ---- search (explore.h) ---- */

static void em_key(xp_search *x, const void *state, void *key) {
  uint64_t v = encode(state, ((explorer *)x->ctx)->k);
  memcpy(key, &v, sizeof v);
}
static int em_nact(xp_search *x) {
  const explorer *e = x->ctx;
  return e->k + (e->reset != R_NONE); /* the cores, and the end of run N */
}

static int em_apply(xp_search *x, void *state, int i, int d) {
  explorer *e = x->ctx;
  mstate *n = state;
  if (i == e->k) {
    if (n->run) return XP_SKIP;
    e->path_pc[d] = 0;
    end_and_reset(e, n);
    return XP_STEP;
  }
  if (n->pc[i] == PC_DONE) return XP_SKIP;
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

static explorer explore2(int k, int variant, bool handoff, bool enter_first, int reset) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.k = k;
  e.variant = variant;
  e.handoff = handoff;
  e.enter_first = enter_first;
  e.reset = reset;
  mstate s;
  memset(&s, 0, sizeof s);
  s.fanin[0] = (uint8_t)k;
  s.fanin[1] = handoff ? (uint8_t)k : 0;
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(uint64_t),
                      .max_depth = MAX_PATH - 1,
                      .key = em_key,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_state = em_state};
  xp_explore(&m, &e, &s, &e.states, &e.failed, e.why, sizeof e.why);
  e.path_t = NULL;
  return e;
}

static explorer explore(int k, int variant, bool handoff, bool enter_first) {
  return explore2(k, variant, handoff, enter_first, R_NONE);
}

static void test_role_all_interleavings(void **st) {
  (void)st;
  for (int first = 0; first < 2; first++)
    for (int handoff = 0; handoff < 2; handoff++)
      for (int k = 2; k <= MAXK; k++) {
        explorer e = explore(k, V_GOOD, handoff, first);
        printf("role explorer%s%s: %d cores, %llu states, %llu final: %s\n",
               handoff ? " with hand-off" : "", first ? ", entering first" : "", k,
               (unsigned long long)e.states, (unsigned long long)e.finals, e.failed ? e.why : "ok");
        assert_false(e.failed);
        assert_true(e.finals > 0);
      }
}

static void test_role_broken_leave_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_LEAVE_NO_RECHECK, false, false);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "lost request"));
}

static void test_role_broken_guard_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_GUARD_BY_LOAD, false, false);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "ready 2 times"));
}

static void test_handoff_broken_no_request_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_HANDOFF_NO_REQUEST, true, false);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "lost request"));
}

static void test_enter_first_broken_no_request_caught(void **st) {
  (void)st;
  for (int handoff = 0; handoff < 2; handoff++) {
    explorer e = explore(2, V_ENTER_FIRST_NO_REQUEST, handoff, true);
    assert_true(e.failed);
    assert_non_null(strstr(e.why, "lost request"));
  }
}

/* Run N ends at every step, role_init, run N+1: each consumer of run N+1
 * ready once and run once, nothing queued, the role free. A reset that
 * keeps the request count passes too: every snapshot compared with it is
 * taken inside the run. */
static void test_role_run_n_plus_1(void **st) {
  (void)st;
  static const int good[] = {R_REAL, R_KEEPS_REQ};
  for (size_t g = 0; g < sizeof good / sizeof good[0]; g++)
    for (int first = 0; first < 2; first++)
      for (int handoff = 0; handoff < 2; handoff++)
        for (int k = 2; k <= MAXK; k++) {
          explorer e = explore2(k, V_GOOD, handoff, first, good[g]);
          printf("role explorer%s%s: %d cores, run N ends anywhere, %s, run N+1: %llu states, "
                 "%llu final: %s\n",
                 handoff ? " with hand-off" : "", first ? ", entering first" : "", k,
                 reset_name[good[g]], (unsigned long long)e.states, (unsigned long long)e.finals,
                 e.failed ? e.why : "ok");
          assert_false(e.failed);
          assert_true(e.finals > 0);
        }
}

/* The role still held by a pass that run N's end cut short: every core of
 * run N+1 leaves its request to a holder that is gone. */
static void test_role_broken_kept_held_caught(void **st) {
  (void)st;
  for (int first = 0; first < 2; first++) {
    explorer e = explore2(2, V_GOOD, false, first, R_KEEPS_HELD);
    assert_true(e.failed); /* printed above with its interleaving */
    assert_non_null(strstr(e.why, "of run N+1 0x1 left in the queue (lost request)"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_role_all_interleavings),
      cmocka_unit_test(test_role_broken_leave_caught),
      cmocka_unit_test(test_role_broken_guard_caught),
      cmocka_unit_test(test_handoff_broken_no_request_caught),
      cmocka_unit_test(test_enter_first_broken_no_request_caught),
      cmocka_unit_test(test_role_run_n_plus_1),
      cmocka_unit_test(test_role_broken_kept_held_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
