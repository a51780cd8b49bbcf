/* test_wake_explorer.c — the run's wake budget (src/chip/wake_budget.h,
 * sched.c, core.c), explored over every interleaving, and two broken
 * variants caught.
 *
 * Model: a budget of L wakes, L cores woken for earlier blocks and not yet
 * running (counted, flagged), B blocks queued, parked idle cores enough
 * for all of them. One scheduler pass (restarted by every kick, as the
 * role guarantees a pass after each request) and the woken cores step:
 *   pass  ALLOW   wb_room: room -> COUNTED, else MARK (none queued: DONE)
 *         COUNTED wb_counted on a fresh parked core (false)
 *         COUNT   wb_count
 *         FLAG    wb_flag
 *         PLACE   the block's dispatch published: the core will run
 *                 (-> ALLOW for the next queued block)
 *         STEAL   nothing queued: idle cores look for blocks pending
 *                 behind busy ones, which another scheduler's stale hint
 *                 shows, and take none (-> DONE)
 *         MARK    wb_mark_starved
 *         ROOM    wb_room: room -> ALLOW (pass again), else DONE
 *         DONE    a kick left a request: -> ALLOW
 *   core  CHECK   wb_counted (no: RUN)
 *         UNFLAG  wb_unflag
 *         SUB     wb_give_back
 *         SEEN    wb_starved_seen (no: RUN)
 *         TAKE    wb_starved_take (yes: a kick, a request for a pass)
 *         RUN     its block runs; the core is done
 * The steps are the real inline functions, one atomic operation each, on a
 * budget loaded from and stored back to the explored state; interleavings
 * are sequentially consistent, which the seq_cst operations of the Dekker
 * pair guarantee. In every final state every block was placed (no block
 * left queued while idle cores park and no wake is coming), and the budget
 * is whole again (waking 0, no core flagged).
 * Runs N and N+1 (test_wake_run_n_plus_1): the budget and the cores'
 * flags outlive a run, and a failed or cancelled run ends wherever it is
 * (cores flagged and never run, `waking` spent, `starved` set). So run N
 * may end at every step (END), then chip.c run_reset's part (wb_reset,
 * each core's woken = 0) and run N+1 on the same cores, whose final
 * states must meet the same checks.
 * Broken variants, each caught with the interleaving printed:
 *  - PEEK_BEFORE_SUB: the core reads `starved` before giving its place
 *    back: a pass that saw no room and a core that saw no starved pass
 *    both stop, and the block stays queued;
 *  - FLAG_AFTER_DISPATCH: the pass flags the core after publishing its
 *    dispatch: the core may look before the flag is set, so the count is
 *    never given back and the budget shrinks for good;
 *  - STEAL_STARVES: a steal that found a stale pending hint, was short of
 *    budget and took nothing marks the budget starved, as a pass that
 *    left blocks queued does: with room, the pass repeats forever (a
 *    cycle of the search: the livelock that kept a core from leaving a
 *    failed run, unit.test_reuse_differential's "core 13 is still running
 *    task -1 of an earlier run", about 1 run in 10 on a loaded machine);
 *  - NO_WB_RESET: run_reset without wb_reset: run N+1 starts with run N's
 *    `waking`, its pass finds no room and no core of its own gives one
 *    back: its block stays queued;
 *  - KEEPS_FLAGS: run_reset without the cores' woken = 0: run N+1's pass
 *    takes a core flagged in run N as counted already, the core gives back
 *    a place never counted, and the budget ends at waking -1 (one wake
 *    more per such run, for good). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip/wake_budget.h"
#include "explore.h"

enum {
  V_GOOD = 0,
  V_PEEK_BEFORE_SUB,
  V_FLAG_AFTER_DISPATCH,
  V_STEAL_STARVES,
  V_NO_WB_RESET, /* run N+1: run_reset without wb_reset */
  V_KEEPS_FLAGS  /* run N+1: run_reset without the cores' woken = 0 */
};
enum { P_ALLOW, P_COUNTED, P_COUNT, P_FLAG, P_PLACE, P_STEAL, P_MARK, P_ROOM, P_DONE };
static const char *p_name[] = {"ALLOW", "COUNTED", "COUNT", "FLAG", "PLACE",
                               "STEAL", "MARK",    "ROOM",  "DONE"};
enum { C_IDLE, C_CHECK, C_UNFLAG, C_SUB, C_SEEN, C_TAKE, C_RUN };
static const char *c_name[] = {"IDLE", "CHECK", "UNFLAG", "SUB", "SEEN", "TAKE", "RUN"};

#define MAXC  5          /* L woken cores + B placed ones */
#define A_END (1 + MAXC) /* the action: run N ends (only with blocks2) */

typedef struct mstate {
  int8_t waking; /* signed: a give-back without its count shows as -1 */
  uint8_t starved, queued, requests;
  uint8_t pc, target;   /* the pass, and the core it places on */
  uint8_t ncores;       /* cores in play: the woken ones, then placed ones */
  uint8_t cpc[MAXC];    /* each core's step */
  uint8_t woken[MAXC];  /* its flag */
  uint8_t placed[MAXC]; /* its dispatch is published */
  uint8_t saw[MAXC];    /* PEEK_BEFORE_SUB: what its early load of starved saw */
  uint8_t run;          /* 0: run N; 1: run N+1, after run N ended and the reset */
} mstate;

#define MAX_PATH 128

typedef struct explorer {
  int limit, blocks, variant;
  int blocks2; /* > 0: run N may end at any step, then run N+1 with blocks2 blocks */
  uint64_t states;
  bool failed;
  char why[200];
  const int *path_t;     /* the search's path: actor 0 the pass, 1 + i core i */
  int path_pc[MAX_PATH]; /* and the step it took */
  int depth;
} explorer;

static void load_budget(wake_budget *b, const mstate *s, int limit) {
  atomic_store(&b->waking, s->waking);
  atomic_store(&b->starved, s->starved);
  b->limit = limit;
}
static void store_budget(const wake_budget *b, mstate *s) {
  s->waking = (int8_t)atomic_load(&b->waking);
  s->starved = (uint8_t)atomic_load(&b->starved);
}

static void pass_step(const explorer *e, mstate *s, wake_budget *b) {
  _Atomic uint32_t flag;
  switch (s->pc) {
  case P_ALLOW:
    if (!s->queued)
      s->pc = P_STEAL;
    else if (wb_room(b)) {
      s->target = s->ncores++; /* a fresh parked core */
      s->pc = e->variant == V_FLAG_AFTER_DISPATCH ? P_PLACE : P_COUNTED;
    } else
      s->pc = P_MARK;
    break;
  case P_COUNTED:
    atomic_store(&flag, s->woken[s->target]);
    if (wb_counted(&flag))
      s->pc = e->variant == V_FLAG_AFTER_DISPATCH ? P_ALLOW : P_PLACE;
    else
      s->pc = P_COUNT;
    break;
  case P_COUNT:
    wb_count(b);
    s->pc = P_FLAG;
    break;
  case P_FLAG:
    atomic_store(&flag, s->woken[s->target]);
    wb_flag(&flag);
    s->woken[s->target] = (uint8_t)atomic_load(&flag);
    s->pc = e->variant == V_FLAG_AFTER_DISPATCH ? P_ALLOW : P_PLACE;
    break;
  case P_PLACE:
    s->queued--;
    s->placed[s->target] = 1;
    s->cpc[s->target] = C_CHECK;
    s->pc = e->variant == V_FLAG_AFTER_DISPATCH ? P_COUNTED : P_ALLOW;
    break;
  case P_STEAL: /* broken: a steal short of budget taken as blocks left queued */
    s->pc = e->variant == V_STEAL_STARVES && wb_room(b) ? P_MARK : P_DONE;
    break;
  case P_MARK:
    wb_mark_starved(b);
    s->pc = P_ROOM;
    break;
  case P_ROOM: s->pc = wb_room(b) ? P_ALLOW : P_DONE; break;
  case P_DONE: /* a request left by a kick: the role runs a pass after it */
    s->requests--;
    s->pc = P_ALLOW;
    break;
  default: break;
  }
}

static void core_step(const explorer *e, mstate *s, wake_budget *b, int i) {
  _Atomic uint32_t flag;
  atomic_store(&flag, s->woken[i]);
  switch (s->cpc[i]) {
  case C_CHECK: s->cpc[i] = wb_counted(&flag) ? C_UNFLAG : C_RUN; break;
  case C_UNFLAG:
    wb_unflag(&flag);
    s->cpc[i] = e->variant == V_PEEK_BEFORE_SUB ? C_SEEN : C_SUB;
    break;
  case C_SUB:
    wb_give_back(b);
    if (e->variant == V_PEEK_BEFORE_SUB)
      s->cpc[i] = s->saw[i] ? C_TAKE : C_RUN;
    else
      s->cpc[i] = C_SEEN;
    break;
  case C_SEEN:
    if (e->variant == V_PEEK_BEFORE_SUB) { /* broken: gives its place back after */
      s->saw[i] = wb_starved_seen(b);
      s->cpc[i] = C_SUB;
    } else {
      s->cpc[i] = wb_starved_seen(b) ? C_TAKE : C_RUN;
    }
    break;
  case C_TAKE:
    if (wb_starved_take(b)) s->requests++; /* kicks every scheduler */
    s->cpc[i] = C_RUN;
    break;
  default: break;
  }
  s->woken[i] = (uint8_t)atomic_load(&flag);
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("wake explorer (budget %d, %d blocks, then %d, variant %d): %s\n  interleaving:", e->limit,
         e->blocks, e->blocks2, e->variant, e->why);
  for (int d = 0; d < e->depth; d++) {
    int a = e->path_t[d];
    if (a == A_END)
      printf(" END-RUN-N+RESET");
    else if (a == 0)
      printf(" pass:%s", p_name[e->path_pc[d]]);
    else
      printf(" c%d:%s", a - 1, c_name[e->path_pc[d]]);
  }
  printf("\n");
}

/* Run N ends here, failed or cancelled (a kernel error, pto_orch_fatal,
 * the watchdog): its threads leave wherever they are, cores woken and
 * never run, the budget spent, `starved` set; test_lifecycle_explorer
 * proves none of them is inside at the reset. Then chip.c run_reset's
 * part of the budget (wb_reset, each core's woken = 0) and run N+1 on the
 * same cores, all parked idle, with blocks2 blocks queued. */
static void end_and_reset(const explorer *e, mstate *s, wake_budget *b) {
  if (e->variant != V_NO_WB_RESET) wb_reset(b, e->limit);
  for (int i = 0; i < MAXC; i++) {
    if (e->variant != V_KEEPS_FLAGS) s->woken[i] = 0;
    s->cpc[i] = C_IDLE;
    s->placed[i] = 0;
    s->saw[i] = 0;
  }
  s->pc = P_ALLOW;
  s->target = 0;
  s->ncores = 0; /* run N+1 places on cores 0, 1, ...: run N's */
  s->queued = (uint8_t)e->blocks2;
  s->requests = 0;
  s->run = 1;
}

/* ---- search (explore.h) ---- */

static int em_nact(xp_search *x) {
  (void)x;
  return 2 + MAXC;
}

static int em_apply(xp_search *x, void *state, int a, int d) {
  explorer *e = x->ctx;
  mstate *s = state;
  wake_budget b;
  load_budget(&b, s, e->limit);
  if (a == A_END) {
    if (!e->blocks2 || s->run) return XP_SKIP;
    e->path_pc[d] = 0;
    end_and_reset(e, s, &b);
  } else if (a == 0) {
    if (s->pc == P_DONE && !s->requests) return XP_SKIP;
    e->path_pc[d] = s->pc;
    pass_step(e, s, &b);
  } else {
    int i = a - 1;
    if (i >= s->ncores || s->cpc[i] == C_IDLE || s->cpc[i] == C_RUN) return XP_SKIP;
    e->path_pc[d] = s->cpc[i];
    core_step(e, s, &b, i);
  }
  store_budget(&b, s);
  return XP_STEP;
}

static int em_state(xp_search *x, const void *state, int d) {
  (void)state;
  explorer *e = x->ctx;
  e->path_t = x->path;
  e->depth = d;
  return e->failed ? XP_STOP : XP_STEP;
}

static int em_final(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  e->path_t = x->path;
  e->depth = d;
  int flagged = 0;
  for (int i = 0; i < s->ncores; i++)
    flagged += s->woken[i];
  const char *of = s->run ? " of run N+1" : "";
  if (s->queued)
    violation(e, "%u block(s)%s left queued with idle cores parked and no wake coming", s->queued,
              of);
  else if (s->waking || flagged)
    violation(e, "the budget is not whole at the end%s: waking %d, %d core(s) flagged", of,
              s->waking, flagged);
  return e->failed ? XP_STOP : XP_STEP;
}

static explorer explore2(int limit, int blocks, int blocks2, int variant) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.limit = limit;
  e.blocks = blocks;
  e.blocks2 = blocks2;
  e.variant = variant;
  mstate s;
  memset(&s, 0, sizeof s);
  s.waking = (uint8_t)limit; /* the budget is spent: the pass must wait for it */
  s.queued = (uint8_t)blocks;
  s.ncores = (uint8_t)limit;
  for (int i = 0; i < limit; i++) {
    s.cpc[i] = C_CHECK;
    s.woken[i] = 1;
    s.placed[i] = 1;
  }
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_state = em_state,
                      .on_final = em_final,
                      .detect_cycles = true};
  xp_search x;
  int stop = xp_run(&x, &m, &e, &s);
  e.states = (uint64_t)x.states;
  if (stop == XP_CYCLE) {
    e.depth = x.stop_depth;
    e.path_t = x.path;
    violation(&e, "a livelock: the pass returns to a state on its own path (a cycle)");
  } else if (stop == XP_DEPTH && !e.failed) {
    e.failed = true;
    snprintf(e.why, sizeof e.why, "a path longer than %d steps", m.max_depth);
  }
  xp_free(&x);
  e.path_t = NULL;
  return e;
}

static explorer explore(int limit, int blocks, int variant) {
  return explore2(limit, blocks, 0, variant);
}

static void test_wake_all_interleavings(void **st) {
  (void)st;
  for (int limit = 1; limit <= 2; limit++)
    for (int blocks = 1; limit + blocks <= MAXC && blocks <= 3; blocks++) {
      explorer e = explore(limit, blocks, V_GOOD);
      printf("wake explorer: budget %d, %d blocks: %llu states: %s\n", limit, blocks,
             (unsigned long long)e.states, e.failed ? e.why : "ok");
      assert_false(e.failed);
    }
}

static void test_wake_broken_peek_caught(void **st) {
  (void)st;
  explorer e = explore(1, 1, V_PEEK_BEFORE_SUB);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "left queued"));
}

static void test_wake_broken_flag_caught(void **st) {
  (void)st;
  explorer e = explore(1, 1, V_FLAG_AFTER_DISPATCH);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "not whole"));
}

static void test_wake_broken_steal_caught(void **st) {
  (void)st;
  explorer e = explore(1, 1, V_STEAL_STARVES);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "livelock"));
}

/* Run N+1: run N ends at every step it can reach (a failed or cancelled
 * run: cores woken and never run, the budget spent, a pass starved),
 * chip.c run_reset's wb_reset and woken flags, then run N+1 over the same
 * cores: each of its blocks is placed and its budget whole again. */
static void test_wake_run_n_plus_1(void **st) {
  (void)st;
  for (int limit = 1; limit <= 2; limit++)
    for (int blocks = 1; limit + blocks <= MAXC && blocks <= 2; blocks++)
      for (int blocks2 = 1; blocks2 <= 2; blocks2++) {
        explorer e = explore2(limit, blocks, blocks2, V_GOOD);
        printf("wake explorer: budget %d, %d blocks, run N ends anywhere, then %d blocks: %llu "
               "states: %s\n",
               limit, blocks, blocks2, (unsigned long long)e.states, e.failed ? e.why : "ok");
        assert_false(e.failed);
      }
}

/* A reset that leaves run N's `waking`: run N+1's pass finds no room, and
 * no core of run N+1 will give one back. */
static void test_wake_broken_no_reset_caught(void **st) {
  (void)st;
  explorer e = explore2(1, 1, 1, V_NO_WB_RESET);
  assert_true(e.failed); /* printed with its interleaving */
  assert_non_null(strstr(e.why, "of run N+1 left queued"));
}

/* A reset that zeroes the budget but leaves a core's woken flag: run
 * N+1's pass takes the core as counted and does not count it, the core
 * gives back a place it never took, and the budget grows by one for good
 * (waking -1) at every such run. */
static void test_wake_broken_kept_flag_caught(void **st) {
  (void)st;
  explorer e = explore2(1, 1, 1, V_KEEPS_FLAGS);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "not whole at the end of run N+1: waking -1"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wake_all_interleavings),
      cmocka_unit_test(test_wake_run_n_plus_1),
      cmocka_unit_test(test_wake_broken_no_reset_caught),
      cmocka_unit_test(test_wake_broken_kept_flag_caught),
      cmocka_unit_test(test_wake_broken_peek_caught),
      cmocka_unit_test(test_wake_broken_flag_caught),
      cmocka_unit_test(test_wake_broken_steal_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
