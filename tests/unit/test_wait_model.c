/* test_wait_model.c — the two wake-up protocols of pto's waits, written as
 * step functions and explored over every interleaving under a store-buffer
 * memory model, with and without the seq_cst fences.
 *
 *  - eventcount (common/wait.c): the waiter reads seq, increments waiters,
 *    sets armed, [fence], re-checks its condition, parks on seq, and once
 *    woken (or seq moved) takes back its increment and starts again; the
 *    waker changes the state, fences, reads waiters and, if nonzero,
 *    clears armed (an exchange) and, if it was set, bumps seq and wakes.
 *    Only the first signal after an announcement wakes: a waiter slow to
 *    leave its park costs the signals after it no futex call. Explored
 *    with two signals, the waiter waiting for the second's state, so that
 *    a signal that finds armed cleared by the one before is covered; and
 *    with a second waiter on the same event waiting for the first signal
 *    (woken and still counted while the other announces itself again).
 *  - completion threshold (chip/orch.c orch_wait_completions against
 *    sched.c complete_task): the orchestrator stores wake_at, [fence], then
 *    waits on the eventcount for the task's DONE; the completer stores DONE,
 *    increments completed, [fence], reads wake_at and signals if reached.
 *
 * Memory model: each thread has a FIFO store buffer. A store, or the store
 * half of a read-modify-write, enters the buffer; the buffer drains to
 * memory one entry at a time, at any moment (a scheduling choice); a load
 * reads the thread's own newest buffered value, else memory; a fence and a
 * futex syscall wait until the thread's buffer is empty. This is
 * StoreLoad reordering, which C11 allows between any store and a later
 * load that is not seq_cst on both sides (pto's condition loads are relaxed
 * or acquire), and which weakly ordered CPUs (Arm) perform even after a
 * seq_cst RMW. It does not model other reorderings (LoadLoad, StoreStore)
 * or non-multi-copy-atomic stores: what it proves is that the fences close
 * the StoreLoad window, the only one these protocols depend on. It checks
 * the protocols, not the compiled code: x86 executes a locked RMW as a full
 * barrier, so no test on x86 can show the missing fence.
 *
 * On an event shared between processes (wait.c, asym) the waker makes no
 * fence and the waiter's is membarrier(2): one step that drains every
 * thread's buffer (the other threads run a full barrier during the call,
 * and the waiter does nothing else meanwhile, so one step covers every
 * timing).
 *
 * A lost wake-up is a final state (no step enabled) where the waiter is
 * parked although the waker has finished. Expected: found without the
 * waiter-side fence (its trace is printed), and without the waker's when
 * the waiter's is a plain fence; none with the fences, or with
 * membarrier on the waiter's side alone. */
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

/* `waiters` is one count per waiter (V_WAITERS + its slot), which the
 * waker sums: each waiter's increment and decrement is then a plain store
 * of its own, buffered like the others, and two waiters lose no update. */
enum { V_STATE, V_WAITERS, V_WAITERS_2, V_SEQ, V_WAKE_AT, V_COMPLETED, V_ARMED, NVARS };
static const char *var_name[NVARS] = {"state",   "waiters",   "waiters(2nd)", "seq",
                                      "wake_at", "completed", "armed"};
#define INF  99
#define BUF  6
#define DONE 100 /* pc of a finished thread */
#define NTH  3   /* thread 0: the waiter, 1: the waker, 2: a second waiter */

typedef struct mstate {
  int8_t mem[NVARS];
  int8_t bvar[NTH][BUF], bval[NTH][BUF], nbuf[NTH];
  int8_t pc[NTH], reg[NTH][2];
  int8_t asleep[NTH];
} mstate;

typedef struct model {
  bool threshold;     /* protocol: false eventcount, true completion threshold */
  bool waiter_fence;  /* fence after waiters++ (the fix in wait.c) */
  bool orch_fence;    /* fence after storing wake_at (the fix in orch.c) */
  bool done_fence;    /* fence before loading wake_at (the fix in sched.c) */
  bool armed;         /* a signal wakes only if armed was set (wait.c) */
  bool arm_late;      /* broken: the waiter sets armed after its re-check */
  int rounds;         /* the waker's signals (state 1, 2, ...); the waiter
                       * waits for state == rounds; 0 means 1 */
  bool second;        /* a second waiter, waiting for state 1 on the same event */
  bool membarrier;    /* the waiter's fence is membarrier(2): every thread's buffer drains */
  bool waker_nofence; /* the waker's fence is a compiler barrier only (wait.c, asym events) */
} model;

static int load(const mstate *s, int th, int v) {
  for (int i = s->nbuf[th] - 1; i >= 0; i--)
    if (s->bvar[th][i] == v) return s->bval[th][i];
  return s->mem[v];
}
static void store(mstate *s, int th, int v, int val) {
  assert_true(s->nbuf[th] < BUF);
  s->bvar[th][s->nbuf[th]] = (int8_t)v;
  s->bval[th][s->nbuf[th]++] = (int8_t)val;
}
static void drain_one(mstate *s, int th) {
  s->mem[s->bvar[th][0]] = s->bval[th][0];
  memmove(s->bvar[th], s->bvar[th] + 1, BUF - 1);
  memmove(s->bval[th], s->bval[th] + 1, BUF - 1);
  s->nbuf[th]--;
}

static int rounds(const model *m) { return m->rounds ? m->rounds : 1; }

/* Waiter th (thread 0, or the second waiter, 2): pcs 10.. are the
 * eventcount wait for state == rounds (the second: state 1). */
static bool step_waiter(const model *m, mstate *s, int th, char *what) {
  int *pc = &(int){s->pc[th]};
  const int vw = th ? V_WAITERS_2 : V_WAITERS, goal = th ? 1 : rounds(m);
  const char *who = th ? "2nd waiter" : "waiter";
  bool ok = true;
  switch (*pc) {
  case 0: /* orch: store wake_at = 1 (threshold protocol only) */
    store(s, th, V_WAKE_AT, 1);
    *pc = m->orch_fence ? 1 : 10;
    sprintf(what, "orch: store wake_at=1");
    break;
  case 1:
    if (s->nbuf[th]) return false;
    *pc = 10;
    sprintf(what, "orch: fence");
    break;
  case 10:
    s->reg[th][0] = (int8_t)load(s, th, V_SEQ);
    *pc = 11;
    sprintf(what, "%s: seen = seq (%d)", who, s->reg[th][0]);
    break;
  case 11:
    store(s, th, vw, 1);
    *pc = m->armed && !m->arm_late ? 17 : m->waiter_fence ? 12 : 13;
    sprintf(what, "%s: waiters++ (buffered)", who);
    break;
  case 17:
    store(s, th, V_ARMED, 1);
    *pc = m->waiter_fence ? 12 : 13;
    sprintf(what, "%s: armed = 1 (buffered)", who);
    break;
  case 12:
    if (m->membarrier) {
      /* every thread runs a full barrier before the call returns: each
       * buffer drains at some point of it, and this thread does nothing
       * meanwhile, so one step draining them all covers every timing */
      for (int t = 0; t < NTH; t++)
        while (s->nbuf[t])
          drain_one(s, t);
      sprintf(what, "%s: membarrier (every thread's buffer drains)", who);
    } else {
      if (s->nbuf[th]) return false;
      sprintf(what, "%s: fence", who);
    }
    *pc = 13;
    break;
  case 13: {
    int c = load(s, th, V_STATE);
    bool done = c >= goal;
    *pc = done ? DONE : m->armed && m->arm_late ? 18 : 14;
    sprintf(what, "%s: re-check state (%d)%s", who, c, done ? ": done" : "");
    break;
  }
  case 18:
    store(s, th, V_ARMED, 1);
    *pc = 14;
    sprintf(what, "%s: armed = 1, after the re-check (buffered)", who);
    break;
  case 14: /* futex wait: the syscall drains; compares seq in memory */
    if (s->nbuf[th]) return false;
    if (s->mem[V_SEQ] != s->reg[th][0]) {
      *pc = 16;
      sprintf(what, "%s: futex_wait returns (seq moved)", who);
    } else {
      s->asleep[th] = 1;
      *pc = 15;
      sprintf(what, "%s: futex_wait parks", who);
    }
    break;
  case 16: /* retreat, then wait again */
    store(s, th, vw, 0);
    *pc = 10;
    sprintf(what, "%s: waiters-- (buffered)", who);
    break;
  default: ok = false; /* 15: parked, woken by the waker; DONE */
  }
  s->pc[th] = (int8_t)*pc;
  return ok;
}

/* The waker's next signal, or DONE after the last (reg[1][0] counts
 * them). */
static int next_round(const model *m, mstate *s) { return ++s->reg[1][0] < rounds(m) ? 0 : DONE; }

/* Waker (thread 1): pcs 20.. are pto_event_signal. */
static bool step_waker(const model *m, mstate *s, char *what) {
  int pc = s->pc[1];
  switch (pc) {
  case 0:
    store(s, 1, V_STATE, s->reg[1][0] + 1);
    pc = m->threshold ? 1 : 20;
    sprintf(what, "waker: store state=%d", s->reg[1][0] + 1);
    break;
  case 1: /* completer: completed++ */
    store(s, 1, V_COMPLETED, load(s, 1, V_COMPLETED) + 1);
    pc = m->done_fence ? 2 : 3;
    sprintf(what, "completer: completed++ (buffered)");
    break;
  case 2:
    if (s->nbuf[1]) return false;
    pc = 3;
    sprintf(what, "completer: fence");
    break;
  case 3: {
    int w = load(s, 1, V_WAKE_AT), d = load(s, 1, V_COMPLETED);
    pc = d >= w ? 20 : DONE;
    sprintf(what, "completer: wake_at is %d, completed %d: %s", w, d,
            d >= w ? "signal" : "no signal");
    break;
  }
  case 20: /* pto_event_signal: fence (a compiler barrier only on an asym event) */
    if (!m->waker_nofence && s->nbuf[1]) return false;
    pc = 21;
    sprintf(what, m->waker_nofence ? "waker: no fence" : "waker: fence");
    break;
  case 21: {
    int w = load(s, 1, V_WAITERS) + load(s, 1, V_WAITERS_2);
    pc = !w ? next_round(m, s) : m->armed ? 24 : 22;
    sprintf(what, "waker: waiters is %d%s", w, w ? "" : ": no wake");
    break;
  }
  case 24: { /* exchange: a read-modify-write on memory (the fence drained) */
    if (s->nbuf[1]) return false;
    int a = s->mem[V_ARMED];
    s->mem[V_ARMED] = 0;
    pc = a ? 22 : next_round(m, s);
    sprintf(what, "waker: exchange armed (was %d)%s", a, a ? "" : ": no wake");
    break;
  }
  case 22:
    store(s, 1, V_SEQ, load(s, 1, V_SEQ) + 1);
    pc = 23;
    sprintf(what, "waker: seq++");
    break;
  case 23: /* futex wake: the syscall drains */
    if (s->nbuf[1]) return false;
    for (int th = 0; th < NTH; th += 2) /* every parked waiter */
      if (s->asleep[th]) {
        s->asleep[th] = 0;
        s->pc[th] = 16;
      }
    pc = next_round(m, s);
    sprintf(what, "waker: futex_wake");
    break;
  default: return false;
  }
  s->pc[1] = (int8_t)pc;
  return true;
}

/* ---- exhaustive exploration (explore.h) ---- */

#define MAX_PATH 64

typedef struct explorer {
  const model *m;
  long lost;
  char trace[MAX_PATH + 1][96]; /* trace[d]: what the step at depth d did */
  bool printed;
} explorer;

/* Actions: the waiter's step, the waker's, the second waiter's, and each
 * thread's store buffer draining its oldest store. */
static int em_nact(xp_search *x) {
  (void)x;
  return 2 * NTH;
}

static int em_apply(xp_search *x, void *state, int choice, int d) {
  explorer *e = x->ctx;
  mstate *n = state;
  char *what = e->trace[d];
  bool ok;
  if (choice == 0 || choice == 2)
    ok = step_waiter(e->m, n, choice, what);
  else if (choice == 1)
    ok = step_waker(e->m, n, what);
  else {
    int th = choice - NTH;
    static const char *name[NTH] = {"waiter", "waker", "2nd waiter"};
    ok = n->nbuf[th] > 0;
    if (ok) {
      sprintf(what, "%s's buffer drains %s=%d", name[th], var_name[n->bvar[th][0]], n->bval[th][0]);
      drain_one(n, th);
    }
  }
  return ok ? XP_STEP : XP_SKIP;
}

/* A final state: lost wake-up if the waker is done and a waiter sleeps. */
static int em_final(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  if (s->pc[1] == DONE && (s->asleep[0] || s->asleep[2])) {
    e->lost++;
    if (!e->printed) {
      e->printed = true;
      printf("  lost wake-up after %d steps:\n", d);
      for (int i = 0; i < d; i++)
        printf("    %2d. %s\n", i + 1, e->trace[i]);
    }
  }
  return XP_STEP;
}

static long run_model(const char *name, model m) {
  mstate s;
  memset(&s, 0, sizeof s);
  s.mem[V_WAKE_AT] = INF;
  s.pc[0] = m.threshold ? 0 : 10;
  s.pc[2] = m.second ? 10 : DONE;
  explorer e = {.m = &m};
  printf("%s:\n", name);
  const xp_model xm = {.state_size = sizeof(mstate),
                       .key_size = sizeof(mstate),
                       .max_depth = MAX_PATH,
                       .nact = em_nact,
                       .apply = em_apply,
                       .on_final = em_final};
  xp_search x;
  int why = xp_run(&x, &xm, &e, &s);
  printf("  %ld states, %ld final states, %ld with a lost wake-up\n", x.states, x.finals, e.lost);
  long finals = x.finals;
  xp_free(&x);
  assert_int_equal(why, XP_DONE); /* no path reached MAX_PATH steps */
  assert_true(finals > 0);
  return e.lost;
}

static void test_eventcount(void **state) {
  (void)state;
  long before = run_model("eventcount without the waiter's fence (old wait.c)",
                          (model){.threshold = false, .waiter_fence = false});
  long after = run_model("eventcount with the waiter's fence (wait.c)",
                         (model){.threshold = false, .waiter_fence = true});
  assert_true(before > 0); /* the model can see the bug it is meant to exclude */
  assert_int_equal(after, 0);
}

/* Only the first signal after an announcement wakes (wait.c's armed):
 * with two signals, a waiter woken by the first that waits again must be
 * woken by the second, which finds armed set again only if the waiter
 * sets it before its re-check. */
static void test_eventcount_armed(void **state) {
  (void)state;
  long late =
      run_model("eventcount, armed set after the re-check, two signals",
                (model){.waiter_fence = true, .armed = true, .arm_late = true, .rounds = 2});
  long nofence = run_model("eventcount, armed, no waiter's fence, two signals",
                           (model){.armed = true, .rounds = 2});
  long after = run_model("eventcount with armed (wait.c), two signals",
                         (model){.waiter_fence = true, .armed = true, .rounds = 2});
  long plain = run_model("eventcount without armed, two signals",
                         (model){.waiter_fence = true, .rounds = 2});
  /* two waiters on one event, one waiting for each signal: one woken by
   * the first, still counted while the other announces itself again */
  long two = run_model("eventcount with armed (wait.c), two signals, two waiters",
                       (model){.waiter_fence = true, .armed = true, .rounds = 2, .second = true});
  long two_late = run_model(
      "eventcount, armed set after the re-check, two signals, two waiters",
      (model){.waiter_fence = true, .armed = true, .arm_late = true, .rounds = 2, .second = true});
  assert_true(late > 0);
  assert_true(nofence > 0);
  assert_int_equal(after, 0);
  assert_int_equal(plain, 0);
  assert_int_equal(two, 0);
  assert_true(two_late > 0);
}

/* An event shared between processes, where membarrier(2) serves (wait.c,
 * asym): the waiter's fence drains every thread's store buffer and the
 * waker makes none. Without membarrier the waker's fence is needed. */
static void test_eventcount_membarrier(void **state) {
  (void)state;
  long nofence =
      run_model("eventcount, armed, the waker without its fence, two signals",
                (model){.waiter_fence = true, .armed = true, .rounds = 2, .waker_nofence = true});
  long asym = run_model("eventcount, armed, membarrier, the waker without its fence, two signals "
                        "(wait.c, asym)",
                        (model){.waiter_fence = true,
                                .armed = true,
                                .rounds = 2,
                                .membarrier = true,
                                .waker_nofence = true});
  long asym_two = run_model("eventcount, armed, membarrier, the waker without its fence, two "
                            "signals, two waiters (wait.c, asym)",
                            (model){.waiter_fence = true,
                                    .armed = true,
                                    .rounds = 2,
                                    .second = true,
                                    .membarrier = true,
                                    .waker_nofence = true});
  long asym_late = run_model("eventcount, armed set after the re-check, membarrier, the waker "
                             "without its fence, two signals",
                             (model){.waiter_fence = true,
                                     .armed = true,
                                     .arm_late = true,
                                     .rounds = 2,
                                     .membarrier = true,
                                     .waker_nofence = true});
  assert_true(nofence > 0); /* the waker's fence is what membarrier replaces */
  assert_int_equal(asym, 0);
  assert_int_equal(asym_two, 0);
  assert_true(asym_late > 0); /* armed's rule still holds */
}

static void test_completion_threshold(void **state) {
  (void)state;
  long before = run_model("completion threshold without fences (old orch.c, sched.c, wait.c)",
                          (model){.threshold = true});
  long orch_only = run_model("completion threshold, fences on the orchestrator side only",
                             (model){.threshold = true, .waiter_fence = true, .orch_fence = true});
  long after = run_model("completion threshold with all fences and armed (orch.c, sched.c, wait.c)",
                         (model){.threshold = true,
                                 .waiter_fence = true,
                                 .orch_fence = true,
                                 .done_fence = true,
                                 .armed = true});
  assert_true(before > 0);
  assert_true(orch_only > 0); /* the completer's fence is needed too */
  assert_int_equal(after, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eventcount),
      cmocka_unit_test(test_eventcount_armed),
      cmocka_unit_test(test_eventcount_membarrier),
      cmocka_unit_test(test_completion_threshold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
