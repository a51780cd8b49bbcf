/* test_pull_explorer.c — "an idle core pulls" (src/chip/role.h, the
 * puller; src/chip/core.c core_wait_work; src/chip/sched.c sched_request),
 * explored over every interleaving of 2 and 3 threads, with broken
 * variants caught.
 *
 * Model: the orchestrator O makes one task ready and requests a pass of
 * the scheduler (or, CORE_REQ, O is a core whose completion pushed the
 * task and kept a successor, which it runs next: it leaves the pass to
 * the puller as the orchestrator does, sched.c handoff_announce, and its
 * kept block's end then enters the role first, as H's does; a kept block
 * may also run for good, which is O done after LOADP, the orchestrator's
 * model); an idle core P stands in as the scheduler's puller for a
 * while; optionally a core H that finished a block runs the scheduler's
 * role at any moment (role_request, then the role loop; or, as a core's
 * block end does, role_enter_first: PEEK0 XCHG0, then the request only
 * when that entry failed; its broken variant, an entry that fails and
 * leaves without the request, is test_role_explorer's, where the core
 * has work of its own). Each step is one
 * atomic operation of the real inline functions of role.h on a role word
 * loaded from and stored back to the explored state (interleavings are
 * sequentially consistent, as the seq_cst operations of role.h make them):
 *   O:  PUSH  REQ  LOADP -> puller seen: done (the puller polls requests)
 *                        -> none: the role loop (as test_role_explorer)
 *       CORE_REQ: then its kept block's end: PEEK0 XCHG0 (EREQ when that
 *       entry failed) and the role loop, done
 *   P:  SNAP0 (seen = role_snapshot)  BEGIN (role_pull_begin; lost: done)
 *       QCHK  (anything queued -> serve)  POLL (role_more(seen) -> serve)
 *       END   (role_pull_end)  RECHECK (role_more(seen) -> serve) done
 *   serve: seen = role_snapshot, then the role loop (no new request)
 *   role loop: PEEK XCHG SNAP PASS MORE REL CHECK (role.h); PASS runs every
 *       queued task
 * Checks: at most one thread in a pass; in every final state the task ran
 * exactly once and nothing is queued (no request lost).
 * Broken variants, each caught with the interleaving printed:
 *  - END_NO_RECHECK: the puller stops without the re-check;
 *  - SNAP_LATE: the puller's first snapshot after role_pull_begin and no
 *    queue check: a request between them is never served;
 *  - NO_LOADP: a requester that leaves the pass to a puller without
 *    looking for one (REQ, then done): with no puller named, its request
 *    is never served (a core that kept a successor, running it for good,
 *    would leave the task it pushed queued).
 * Runs N and N+1 (test_pull_run_n_plus_1): the role word (requests,
 * holder, puller) outlives a run. Run N ends at every step, chip.c
 * run_reset's role_init runs, and run N+1 (the same threads, a task of
 * its own) is explored under the same checks. Broken resets, each caught
 * with the interleaving printed:
 *  - KEEPS_PULLER: run N's puller still named: run N+1's orchestrator
 *    leaves the pass to it, run N+1's idle core cannot become the puller
 *    (role_pull_begin fails), and the task stays queued;
 *  - KEEPS_HELD: the role still held: every requester of run N+1 leaves
 *    its request to a holder that is gone.
 * A reset that keeps the request count passes: every snapshot compared
 * with it is taken inside the run. */
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

enum { V_GOOD = 0, V_END_NO_RECHECK, V_SNAP_LATE, V_NO_LOADP };
/* The reset between run N and run N+1: none (one run), chip.c
 * run_reset's role_init (R_REAL), or one that keeps a word of run N. */
enum { R_NONE = 0, R_REAL, R_KEEPS_PULLER, R_KEEPS_HELD, R_KEEPS_REQ, R_COUNT };
static const char *reset_name[R_COUNT] = {"one run", "role_init", "KEEPS_PULLER", "KEEPS_HELD",
                                          "KEEPS_REQ"};
enum {
  PC_START,
  /* O */
  PC_PUSH,
  PC_REQ,
  PC_LOADP,
  /* P */
  PC_SNAP0,
  PC_BEGIN,
  PC_QCHK,
  PC_POLL,
  PC_END,
  PC_RECHECK,
  PC_SERVE,
  /* the role loop (all) */
  PC_PEEK,
  PC_XCHG,
  PC_SNAP,
  PC_PASS,
  PC_MORE,
  PC_REL,
  PC_CHECK,
  /* H entering first (role_enter_first) */
  PC_PEEK0,
  PC_XCHG0,
  /* O as a core (CORE_REQ): its kept block's end, when that entry failed */
  PC_EREQ,
  PC_DONE
};
static const char *pc_name[] = {"START", "PUSH",  "REQ",  "LOADP",   "SNAP0", "BEGIN",
                                "QCHK",  "POLL",  "END",  "RECHECK", "SERVE", "PEEK",
                                "XCHG",  "SNAP",  "PASS", "MORE",    "REL",   "CHECK",
                                "PEEK0", "XCHG0", "EREQ", "DONE"};

enum { T_O = 0, T_P = 1, T_H = 2 };
#define MAXK 3

typedef struct mstate {
  uint8_t req, held, puller, queued, ran;
  uint8_t pc[MAXK], ret[MAXK], pseen[MAXK], rseen[MAXK], did[MAXK];
  uint8_t run; /* 0: run N; 1: run N+1, after run N ended and the reset */
} mstate;

#define MAX_PATH 256

typedef struct explorer {
  int k, variant;
  bool enter_first; /* H enters before it requests (role_enter_first) */
  bool core_req;    /* O is a core that kept a successor: its block then ends */
  int reset;        /* R_NONE, or run N ends anywhere, this reset, then run N+1 */
  uint64_t states, finals;
  bool failed;
  char why[160];
  const int *path_t;     /* the search's path: the thread of each step */
  int path_pc[MAX_PATH]; /* and the pc it stepped from */
  int depth;
} explorer;

static void load_role(role *r, const mstate *s) {
  role_init(r);
  atomic_store(&r->req, s->req);
  atomic_store(&r->held, s->held);
  atomic_store(&r->puller, s->puller);
}
static void store_role(const role *r, mstate *s) {
  s->req = (uint8_t)atomic_load(&r->req);
  s->held = (uint8_t)atomic_load(&r->held);
  s->puller = (uint8_t)atomic_load(&r->puller);
}

/* Enters the role loop, coming back to `ret` when it is done. */
static void loop_then(mstate *s, int i, int ret) {
  s->ret[i] = (uint8_t)ret;
  s->pc[i] = PC_PEEK;
}

static void step(const explorer *e, mstate *s, int i) {
  role r;
  load_role(&r, s);
  switch (s->pc[i]) {
  case PC_START:
    s->pc[i] = i == T_O   ? PC_PUSH
               : i == T_P ? (e->variant == V_SNAP_LATE ? PC_BEGIN : PC_SNAP0)
                          : (e->enter_first ? PC_PEEK0 : PC_REQ);
    break;
  case PC_PUSH:
    s->queued++;
    s->pc[i] = PC_REQ;
    break;
  case PC_REQ: /* O after its push; H after its block's completion */
    role_request(&r);
    if (i == T_O)
      s->pc[i] = e->variant == V_NO_LOADP ? (e->core_req ? PC_PEEK0 : PC_DONE) : PC_LOADP;
    else
      loop_then(s, i, PC_DONE);
    break;
  case PC_LOADP: {
    /* a core's kept block runs next, then its end enters the role first */
    int next = e->core_req ? PC_PEEK0 : PC_DONE;
    if (role_puller(&r) >= 0)
      s->pc[i] = (uint8_t)next; /* left to the puller (it polls) */
    else
      loop_then(s, i, next);
    break;
  }
  case PC_EREQ: /* O's block end after a failed entry */
    role_request(&r);
    loop_then(s, i, PC_DONE);
    break;
  case PC_SNAP0:
    s->pseen[i] = (uint8_t)role_snapshot(&r);
    s->pc[i] = PC_BEGIN;
    break;
  case PC_BEGIN:
    if (!role_pull_begin(&r, 0)) {
      s->pc[i] = PC_DONE;
    } else if (e->variant == V_SNAP_LATE) {
      s->pseen[i] = (uint8_t)role_snapshot(&r); /* broken: counted as served */
      s->pc[i] = PC_POLL;
    } else {
      s->pc[i] = PC_QCHK;
    }
    break;
  case PC_QCHK:
    if (s->queued) {
      s->ret[i] = PC_POLL;
      s->pc[i] = PC_SERVE;
    } else {
      s->pc[i] = PC_POLL;
    }
    break;
  case PC_POLL: /* one look while waiting; giving up is the END step */
    if (role_more(&r, s->pseen[i])) {
      s->ret[i] = PC_POLL;
      s->pc[i] = PC_SERVE;
    } else {
      s->pc[i] = PC_END;
    }
    break;
  case PC_END:
    role_pull_end(&r);
    s->pc[i] = e->variant == V_END_NO_RECHECK ? PC_DONE : PC_RECHECK;
    break;
  case PC_RECHECK:
    if (role_more(&r, s->pseen[i])) {
      s->ret[i] = PC_DONE;
      s->pc[i] = PC_SERVE;
    } else {
      s->pc[i] = PC_DONE;
    }
    break;
  case PC_SERVE: /* pull_serve: snapshot, then the role loop */
    s->pseen[i] = (uint8_t)role_snapshot(&r);
    s->pc[i] = PC_PEEK;
    break;
  case PC_PASS:
    s->did[i] = s->queued > 0;
    s->ran += s->queued;
    s->queued = 0;
    s->pc[i] = PC_MORE;
    break;
  case PC_PEEK0: s->pc[i] = role_peek_free(&r) ? PC_XCHG0 : i == T_O ? PC_EREQ : PC_REQ; break;
  case PC_XCHG0:
    if (role_exchange(&r)) { /* held, with no request: the loop from SNAP */
      s->ret[i] = PC_DONE;
      s->pc[i] = PC_SNAP;
    } else {
      s->pc[i] = i == T_O ? PC_EREQ : PC_REQ;
    }
    break;
  default:
    if (role_loop_at(s->pc[i], PC_PEEK))
      s->pc[i] = (uint8_t)role_loop_step(&r, s->pc[i], PC_PEEK, s->ret[i], &s->rseen[i], s->did[i]);
    break;
  }
  store_role(&r, s);
}

/* Run N ends here, failed or cancelled, wherever its threads are: a
 * puller named, the role held, requests pending. The model ends it at
 * every step, which is more than the real end allows (a puller ends its
 * pull and a holder leaves the role before its thread leaves the run:
 * core.c core_wait_work, sched.c sched_role_hold; test_lifecycle_explorer
 * proves none is inside at the reset), so the reset is checked against
 * any state. Then chip.c run_reset's role_init, the ready queue
 * discarded, and run N+1: the same threads, from their start, the
 * orchestrator pushing a task of run N+1. */
static void end_and_reset(const explorer *e, mstate *s) {
  role r;
  load_role(&r, s);
  role_init(&r); /* run_reset */
  if (e->reset == R_KEEPS_PULLER) atomic_store(&r.puller, s->puller);
  if (e->reset == R_KEEPS_HELD) atomic_store(&r.held, s->held);
  if (e->reset == R_KEEPS_REQ) atomic_store(&r.req, s->req);
  store_role(&r, s);
  for (int i = 0; i < MAXK; i++)
    s->pc[i] = s->ret[i] = s->pseen[i] = s->rseen[i] = s->did[i] = 0;
  s->queued = 0; /* rq_discard: run N's task is not run N+1's */
  s->ran = 0;
  s->run = 1;
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("pull explorer (%d threads, variant %d): %s\n  interleaving:", e->k, e->variant, e->why);
  for (int d = 0; d < e->depth; d++)
    if (e->path_t[d] == e->k)
      printf(" END-RUN-N+RESET");
    else
      printf(" %c:%s", "OPH"[e->path_t[d]], pc_name[e->path_pc[d]]);
  printf("\n");
}

static void check(explorer *e, const mstate *s, int d) {
  e->depth = d;
  int in_pass = 0, done = 0;
  for (int i = 0; i < e->k; i++) {
    in_pass += s->pc[i] >= PC_SNAP && s->pc[i] <= PC_REL;
    done += s->pc[i] == PC_DONE;
  }
  if (in_pass > 1) violation(e, "%d threads run the scheduler's pass at once", in_pass);
  if (done < e->k) return;
  e->finals++;
  const char *of = s->run ? " of run N+1" : "";
  if (s->queued != 0)
    violation(e, "every thread is done with the task%s still queued (request lost)", of);
  else if (s->ran != 1)
    violation(e, "the task%s ran %u times (expected 1)", of, s->ran);
  if (s->held) violation(e, "every thread%s is done with the role still held", of);
  if (s->puller) violation(e, "every thread%s is done with a puller still named", of);
}

/* ---- search (explore.h) ---- */

static int em_nact(xp_search *x) {
  const explorer *e = x->ctx;
  return e->k + (e->reset != R_NONE); /* the threads, and the end of run N */
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

static explorer explore3(int k, int variant, bool enter_first, int reset, bool core_req) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.k = k;
  e.variant = variant;
  e.enter_first = enter_first;
  e.reset = reset;
  e.core_req = core_req;
  mstate s;
  memset(&s, 0, sizeof s);
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

static explorer explore2(int k, int variant, bool enter_first, int reset) {
  return explore3(k, variant, enter_first, reset, false);
}

static explorer explore(int k, int variant, bool enter_first) {
  return explore2(k, variant, enter_first, R_NONE);
}

static void test_pull_all_interleavings(void **st) {
  (void)st;
  for (int first = 0; first < 2; first++)
    for (int k = 2 + first; k <= MAXK; k++) { /* H is the third thread */
      explorer e = explore(k, V_GOOD, first);
      printf("pull explorer%s: %d threads, %llu states, %llu final: %s\n",
             first ? " (H enters first)" : "", k, (unsigned long long)e.states,
             (unsigned long long)e.finals, e.failed ? e.why : "ok");
      assert_false(e.failed);
      assert_true(e.finals > 0);
    }
}

/* O as a core that pushed a task and keeps a successor (sched.c
 * handoff_announce): it leaves the pass to the puller, then its kept
 * block's end enters the role first. Every interleaving, with H, and with
 * runs N and N+1. */
static void test_pull_core_requester(void **st) {
  (void)st;
  for (int first = 0; first < 2; first++)
    for (int k = 2 + first; k <= MAXK; k++)
      for (int reset = R_NONE; reset <= R_REAL; reset++) {
        explorer e = explore3(k, V_GOOD, first, reset, true);
        printf("pull explorer (O a core keeping a successor%s): %d threads, %s: %llu states, %llu "
               "final: %s\n",
               first ? ", H enters first" : "", k, reset_name[reset], (unsigned long long)e.states,
               (unsigned long long)e.finals, e.failed ? e.why : "ok");
        assert_false(e.failed);
        assert_true(e.finals > 0);
      }
}

/* A requester that leaves the pass to a puller without looking for one:
 * with none named, the task stays queued. (A core whose kept block ends
 * serves it at that end, later than the idle core would have: with the
 * block end modelled, nothing is lost; its kept block may run for good,
 * which is the orchestrator's model, where it is caught.) */
static void test_pull_broken_no_loadp_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_NO_LOADP, false);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "request lost"));
  explorer c = explore3(2, V_NO_LOADP, false, R_NONE, true);
  assert_false(c.failed);
}

static void test_pull_broken_end_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_END_NO_RECHECK, false);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "request lost"));
}

static void test_pull_broken_snap_caught(void **st) {
  (void)st;
  explorer e = explore(2, V_SNAP_LATE, false);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "request lost"));
}

/* Run N ends at every step, role_init, run N+1: its task runs once, no
 * request is lost, nothing is left held or named. The request count
 * needs no reset (every snapshot is taken inside the run that compares
 * with it): a reset that keeps it passes too. */
static void test_pull_run_n_plus_1(void **st) {
  (void)st;
  static const int good[] = {R_REAL, R_KEEPS_REQ};
  for (size_t g = 0; g < sizeof good / sizeof good[0]; g++)
    for (int first = 0; first < 2; first++)
      for (int k = 2 + first; k <= MAXK; k++) {
        explorer e = explore2(k, V_GOOD, first, good[g]);
        printf("pull explorer%s: %d threads, run N ends anywhere, %s, run N+1: %llu states, %llu "
               "final: %s\n",
               first ? " (H enters first)" : "", k, reset_name[good[g]],
               (unsigned long long)e.states, (unsigned long long)e.finals, e.failed ? e.why : "ok");
        assert_false(e.failed);
        assert_true(e.finals > 0);
      }
}

/* A puller of run N still named: run N+1's orchestrator leaves its pass
 * to it, and run N+1's idle core cannot become the puller. */
static void test_pull_broken_kept_puller_caught(void **st) {
  (void)st;
  explorer e = explore2(2, V_GOOD, false, R_KEEPS_PULLER);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "of run N+1 still queued (request lost)"));
}

/* The role still held by a pass run N's end cut short: run N+1's
 * requesters leave their requests to a holder that is gone. */
static void test_pull_broken_kept_held_caught(void **st) {
  (void)st;
  explorer e = explore2(2, V_GOOD, false, R_KEEPS_HELD);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "of run N+1 still queued (request lost)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pull_all_interleavings),
      cmocka_unit_test(test_pull_core_requester),
      cmocka_unit_test(test_pull_broken_no_loadp_caught),
      cmocka_unit_test(test_pull_broken_end_caught),
      cmocka_unit_test(test_pull_broken_snap_caught),
      cmocka_unit_test(test_pull_run_n_plus_1),
      cmocka_unit_test(test_pull_broken_kept_puller_caught),
      cmocka_unit_test(test_pull_broken_kept_held_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
