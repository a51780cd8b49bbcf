/* test_gather_explorer.c — the orchestrator's gather (src/chip/gather.h,
 * sched.c gather_add, core.c holds), explored over every interleaving of
 * the orchestrator and two cores, with broken variants caught.
 *
 * Model: the orchestrator O gathers NT tasks ready at their submit, one
 * after the other: it loads the word, stores the task into the cell the
 * word names, then moves the word on (a compare-and-swap, stored again
 * into the new cell after a take moved it). After an epoch's first
 * append it looks: at the holders, then at each core's `finished` and
 * `dispatched` (cores_all_busy); covered when a core holds or every core
 * has a block in flight, else it takes the epoch back and pushes it.
 * Then O leaves, as for the caller's own code, with no further call into
 * pto: whatever it gathered is the cores' to take.
 * A core C0, C1 runs its block in flight (END stores `finished`), then
 * falls idle (core_wait_work): it tries to become its scheduler's puller;
 * a puller whose blocks are short (option HOLD) holds: it counts itself
 * in the holders, looks at the gather (takes what it holds) any number of
 * times, then ends the hold (decrement) and takes once more; a puller
 * whose blocks are long, and a core that is not the puller, takes unless
 * a core holds (sched_gather_idle). Then it parks until a pass places a
 * queued task on it (DISPATCH), which it runs and falls idle again.
 * A take: load the word, read the cells it counts, then the CAS to the
 * next epoch, empty (reading them again after a failed CAS); what it got
 * goes to the ready queue. A load and the cell accesses after it (O's
 * store of its cell, a take's reads) are one step: a step of another
 * thread between them that moves the word makes the CAS after them fail,
 * and one that does not touches no cell they access (O writes only the
 * cell past the count). Each step is one call of gather.h's functions
 * on a gather loaded from and stored back to the explored state;
 * interleavings are sequentially consistent, as the seq_cst operations
 * and the fences of the real code make them.
 * Checks: in every state, no task ran twice; in every final state (O done,
 * each core parked with nothing queued), nothing gathered, every task ran
 * once, nobody holding and no puller.
 * Broken variants, each caught with the interleaving printed:
 *  - LOOK_FIRST: O looks before its append: both cores fall idle and find
 *    nothing between the look and the append, so the task stays gathered;
 *  - TAKE_FIRST: a hold ends with the take before the decrement: O's
 *    append after that take still sees the holder;
 *  - NO_END_TAKE: a hold ends without the take: O's append after its last
 *    look saw the holder;
 *  - IDLE_NO_TAKE: a core falling idle without a hold takes nothing: the
 *    task O gathered seeing it busy stays;
 *  - PLAIN_EMPTY: a take empties the word with a plain store: an append
 *    between its load and its store is lost (the task never runs).
 * Runs N and N+1 (test_gather_run_n_plus_1): the gather outlives a run.
 * Run N ends at any step (a failed run), the reset (orch_reset's
 * gather_init, the role's puller, the cores' words, the queue), then run
 * N+1: both cores idle, O gathers its own tasks. A reset that keeps the
 * word (KEEP_WORD) runs a task of run N in run N+1; one that keeps the
 * holders (KEEP_HOLDERS) leaves run N+1's task gathered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip/gather.h"

#include "explore.h"

enum { V_GOOD = 0, V_LOOK_FIRST, V_TAKE_FIRST, V_NO_END_TAKE, V_IDLE_NO_TAKE, V_PLAIN_EMPTY };
static const char *variant_name[] = {"good",
                                     "look first",
                                     "take first",
                                     "no take at a hold's end",
                                     "idle core takes nothing",
                                     "plain store empties"};
enum { R_NONE = 0, R_REAL, R_KEEP_WORD, R_KEEP_HOLDERS };
static const char *reset_name[] = {"one run", "the reset", "a reset keeping the word",
                                   "a reset keeping the holders"};

enum {
  PC_START,
  /* O */
  PC_LOADW,
  PC_CELL,
  PC_COMMIT,
  PC_LOOKH,
  PC_LOOKF0,
  PC_LOOKD0,
  PC_LOOKF1,
  PC_LOOKD1,
  PC_NEXT, /* on to the next task (O) */
  /* cores */
  PC_RUN,
  PC_END,
  PC_PULLB,
  PC_HB,
  PC_LOOK,
  PC_HE,
  PC_HEDEC,
  PC_IDLE, /* sched_gather_idle: the look at the holders */
  PC_PE,
  PC_WAIT,
  /* a take (all): then back to ret */
  PC_TLOAD,
  PC_TREAD,
  PC_TCAS,
  PC_DONE
};
static const char *pc_name[] = {"START",  "LOADW",  "CELL",   "COMMIT", "LOOKH", "LOOKF0",
                                "LOOKD0", "LOOKF1", "LOOKD1", "NEXT",   "RUN",   "END",
                                "PULLB",  "HB",     "LOOK",   "HE",     "HEDEC", "IDLE",
                                "PE",     "WAIT",   "TLOAD",  "TREAD",  "TCAS",  "DONE"};

enum { T_O = 0, T_C0 = 1, T_C1 = 2, K = 3 };
#define NT    2        /* tasks O gathers in a run */
#define NTASK (2 * NT) /* run N's ids 1..NT, run N+1's NT+1..2NT */

typedef struct mstate {
  uint64_t word;
  uint64_t w[K];         /* each actor's copy of the word (its load, its failed CAS) */
  uint8_t cell[NTASK];   /* task ids (a reset that keeps the word: run N's, then run N+1's) */
  uint8_t got[K][NTASK]; /* a take's reads of the cells */
  uint8_t ngot[K];
  uint8_t queued[NTASK + 1]; /* in the ready queue, by task id */
  uint8_t ran[NTASK + 1];
  uint8_t block[2]; /* the task of a core's block in flight (0: a task of no interest) */
  int8_t holders;
  uint8_t puller; /* 1 + core, 0: none */
  uint8_t dispatched[2], finished[2];
  uint8_t pc[K], ret[K];
  uint8_t appended; /* O: tasks appended this run */
  uint8_t covered;  /* O: its look (LOOK_FIRST: made before the append) */
  uint8_t seenf;    /* O: its load of a core's finished */
  uint8_t run;      /* 0: run N; 1: run N+1 */
  uint8_t stale;    /* a task of run N ran in run N+1 */
} mstate;

#define MAX_PATH 200

typedef struct explorer {
  int variant, reset;
  bool c0_busy, c1_busy, hold;
  uint64_t states, finals;
  bool failed;
  char why[240];
  const int *path_t;
  int path_pc[MAX_PATH];
  int depth;
} explorer;

/* The real gather, loaded from and stored back to the state. */
static gather g_scratch;

static gather *load_g(const mstate *s) {
  gather *g = &g_scratch;
  atomic_store(&g->word, s->word);
  for (int i = 0; i < NTASK; i++)
    atomic_store(&g->cell[i], s->cell[i]);
  atomic_store(&g->holders, s->holders);
  return g;
}
static void store_g(const gather *g, mstate *s) {
  s->word = atomic_load(&g->word);
  for (int i = 0; i < NTASK; i++)
    s->cell[i] = (uint8_t)atomic_load(&g->cell[i]);
  s->holders = (int8_t)atomic_load(&g->holders);
}

static void take_then(mstate *s, int i, int ret) {
  s->ret[i] = (uint8_t)ret;
  s->pc[i] = PC_TLOAD;
}

static int task_base(const mstate *s) { return s->run ? NT : 0; }

/* O's next task, or its leaving (LOOK_FIRST looks before each append). */
static void o_next(const explorer *e, mstate *s) {
  if (s->appended == NT)
    s->pc[T_O] = PC_DONE;
  else
    s->pc[T_O] = e->variant == V_LOOK_FIRST ? PC_LOOKH : PC_LOADW;
}

/* O's look decided: after the append, a first one not covered is taken
 * back; LOOK_FIRST appends now. */
static void o_looked(const explorer *e, mstate *s, bool covered) {
  s->seenf = 0;
  s->covered = e->variant == V_LOOK_FIRST && covered; /* kept only where used */
  if (e->variant == V_LOOK_FIRST)
    s->pc[T_O] = PC_LOADW;
  else if (covered)
    o_next(e, s);
  else
    take_then(s, T_O, PC_NEXT);
}

static void step(const explorer *e, mstate *s, int i) {
  gather *g = load_g(s);
  int c = i - T_C0;
  switch (s->pc[i]) {
  case PC_START:
    if (i == T_O)
      o_next(e, s);
    else
      s->pc[i] = s->finished[c] < s->dispatched[c] ? PC_RUN : PC_PULLB;
    break;
  /* ---- O ---- */
  case PC_LOADW: /* the load and the first cell store: one step (above) */
    s->w[i] = gather_load(g);
    gather_put_cell(g, s->w[i], (uint8_t)(task_base(s) + s->appended + 1));
    s->pc[i] = PC_COMMIT;
    break;
  case PC_CELL:
    gather_put_cell(g, s->w[i], (uint8_t)(task_base(s) + s->appended + 1));
    s->pc[i] = PC_COMMIT;
    break;
  case PC_COMMIT:
    if (!gather_try_commit(g, &s->w[i])) {
      s->pc[i] = PC_CELL; /* into the new epoch's cell */
      break;
    }
    s->appended++;
    bool first = gather_count(s->w[i]) == 0;
    s->w[i] = 0; /* dead from here: not kept in the state */
    if (!first)  /* not the epoch's first: covered */
      o_next(e, s);
    else if (e->variant == V_LOOK_FIRST)
      s->covered ? o_next(e, s) : take_then(s, i, PC_NEXT);
    else
      s->pc[i] = PC_LOOKH;
    break;
  case PC_LOOKH:
    if (gather_held(g))
      o_looked(e, s, true);
    else
      s->pc[i] = PC_LOOKF0;
    break;
  case PC_LOOKF0:
  case PC_LOOKF1:
    s->seenf = s->finished[s->pc[i] == PC_LOOKF0 ? 0 : 1];
    s->pc[i] = s->pc[i] == PC_LOOKF0 ? PC_LOOKD0 : PC_LOOKD1;
    break;
  case PC_LOOKD0:
  case PC_LOOKD1: {
    int k = s->pc[i] == PC_LOOKD0 ? 0 : 1;
    bool busy = s->seenf < s->dispatched[k];
    if (busy && k == 0)
      s->pc[i] = PC_LOOKF1;
    else
      o_looked(e, s, busy);
    break;
  }
  case PC_NEXT: o_next(e, s); break;
  /* ---- a core ---- */
  case PC_RUN:
    if (s->block[c]) s->ran[s->block[c]]++;
    if (s->run && s->block[c] && s->block[c] <= NT) s->stale = 1;
    s->pc[i] = PC_END;
    break;
  case PC_END:
    s->finished[c] = s->dispatched[c];
    s->pc[i] = PC_PULLB;
    break;
  case PC_PULLB:
    if (s->puller == 0) {
      s->puller = (uint8_t)(c + 1);
      s->pc[i] = e->hold ? PC_HB : PC_IDLE;
    } else {
      s->pc[i] = PC_IDLE;
    }
    break;
  case PC_HB:
    gather_hold_begin(g);
    s->pc[i] = PC_LOOK;
    break;
  case PC_LOOK: /* a look that finds tasks (one that finds none changes nothing) */
    take_then(s, i, PC_LOOK);
    break;
  case PC_HE:
    if (e->variant == V_TAKE_FIRST) { /* the take, then the decrement */
      take_then(s, i, PC_HEDEC);
      break;
    }
    gather_hold_end(g);
    if (e->variant == V_NO_END_TAKE)
      s->pc[i] = PC_PE;
    else
      take_then(s, i, PC_PE);
    break;
  case PC_HEDEC:
    gather_hold_end(g);
    s->pc[i] = PC_PE;
    break;
  case PC_IDLE:
    if (e->variant == V_IDLE_NO_TAKE || gather_held(g))
      s->pc[i] = s->puller == c + 1 ? PC_PE : PC_WAIT;
    else
      take_then(s, i, s->puller == c + 1 ? PC_PE : PC_WAIT);
    break;
  case PC_PE:
    s->puller = 0;
    s->pc[i] = PC_WAIT;
    break;
  case PC_WAIT: /* a pass places the oldest queued task here */
    for (int t = 1; t <= NTASK; t++)
      if (s->queued[t]) {
        s->queued[t]--;
        s->block[c] = (uint8_t)t;
        s->dispatched[c]++;
        s->pc[i] = PC_RUN;
        break;
      }
    break;
  /* ---- a take ---- */
  case PC_TLOAD: /* the load and the first read of the cells: one step (above) */
    s->w[i] = gather_load(g);
    /* fall through */
  case PC_TREAD: {
    uint32_t out[GATHER_MAX];
    uint32_t n = gather_read_cells(g, s->w[i], out);
    assert_true(n <= NTASK);
    s->ngot[i] = (uint8_t)n;
    for (uint32_t k = 0; k < n; k++)
      s->got[i][k] = (uint8_t)out[k];
    if (!n) s->w[i] = 0;
    s->pc[i] = n ? PC_TCAS : s->ret[i];
    break;
  }
  case PC_TCAS: {
    bool took;
    if (e->variant == V_PLAIN_EMPTY) { /* no compare: the word as read, moved on */
      uint64_t next = ((s->w[i] >> GATHER_COUNT_BITS) + 1) << GATHER_COUNT_BITS;
      atomic_store(&g->word, next);
      took = true;
    } else {
      took = gather_try_empty(g, &s->w[i]);
    }
    if (took) {
      for (int k = 0; k < s->ngot[i]; k++)
        s->queued[s->got[i][k]]++;
      memset(s->got[i], 0, sizeof s->got[i]);
      s->ngot[i] = 0;
      s->w[i] = 0;
      s->pc[i] = s->ret[i];
    } else {
      s->pc[i] = PC_TREAD;
    }
    break;
  }
  default: break;
  }
  store_g(g, s);
}

/* Whether thread i can step: a parked core waits for a queued task; a
 * holder's look that would find nothing changes nothing. */
static bool enabled(const mstate *s, int i) {
  if (s->pc[i] == PC_DONE) return false;
  if (i == T_O) return true;
  if (s->pc[i] == PC_WAIT) {
    for (int t = 1; t <= NTASK; t++)
      if (s->queued[t]) return true;
    return false;
  }
  return true;
}

/* A holder also ends its hold at any point (HE): the look and the end are
 * its two choices at LOOK. Returned: the extra action's enabling. */
static bool hold_can_look(const mstate *s, int i) {
  return s->pc[i] == PC_LOOK && gather_count(s->word) > 0;
}

/* Run N ends here, wherever its threads are, the reset (as `reset` does
 * it), and run N+1: both cores idle, O gathers its own tasks. */
static void end_and_reset(const explorer *e, mstate *s) {
  mstate n;
  memset(&n, 0, sizeof n);
  if (e->reset == R_KEEP_WORD) {
    n.word = s->word;
    memcpy(n.cell, s->cell, sizeof n.cell);
  }
  if (e->reset == R_KEEP_HOLDERS) n.holders = s->holders;
  n.run = 1; /* run N's tasks' counts are not carried: a run N+1 that runs one is `stale` */
  n.pc[T_O] = PC_START;
  n.pc[T_C0] = n.pc[T_C1] = PC_PULLB;
  *s = n;
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("gather explorer (%s, C0 %s, C1 %s, %s, %s): %s\n  interleaving:",
         variant_name[e->variant], e->c0_busy ? "busy" : "idle", e->c1_busy ? "busy" : "idle",
         e->hold ? "holds" : "no holds", reset_name[e->reset], e->why);
  for (int d = 0; d < e->depth; d++)
    if (e->path_t[d] == 2 * K)
      printf(" END-RUN-N+RESET");
    else
      printf(" %s:%s%s", (const char *[]){"O", "C0", "C1"}[e->path_t[d] % K],
             pc_name[e->path_pc[d]], e->path_t[d] >= K ? "(end hold)" : "");
  printf("\n");
}

static void check(explorer *e, const mstate *s, int d) {
  e->depth = d;
  int lo = s->run ? NT + 1 : 1, hi = s->run ? NTASK : NT;
  for (int t = 1; t <= NTASK; t++)
    if (s->ran[t] > 1) violation(e, "task %d ran %u times", t, s->ran[t]);
  if (s->stale) violation(e, "a task of run N ran in run N+1");
  bool any = false;
  for (int i = 0; i < K; i++)
    any |= enabled(s, i);
  if (any) return;
  e->finals++;
  const char *of = s->run ? " of run N+1" : "";
  if (gather_count(s->word))
    violation(e, "every thread is done or parked with %u task(s)%s still gathered",
              gather_count(s->word), of);
  for (int t = lo; t <= hi && !e->failed; t++)
    if (s->ran[t] != 1) violation(e, "task %d%s ran %u times (expected 1)", t, of, s->ran[t]);
  if (!e->failed && (s->holders || s->puller))
    violation(e, "every thread%s is parked with %d holder(s) and puller %d", of, s->holders,
              s->puller - 1);
}

/* Actions: 0..K-1 a thread's step; K..2K-1 a holder's end of its hold
 * (at LOOK, instead of a look); 2K the end of run N and the reset. */
static int em_nact(xp_search *x) {
  const explorer *e = x->ctx;
  return 2 * K + (e->reset != R_NONE);
}

static int em_apply(xp_search *x, void *state, int a, int d) {
  explorer *e = x->ctx;
  mstate *n = state;
  if (a == 2 * K) {
    if (n->run) return XP_SKIP;
    e->path_pc[d] = 0;
    end_and_reset(e, n);
    return XP_STEP;
  }
  int i = a % K;
  if (a >= K) { /* the end of a hold */
    if (n->pc[i] != PC_LOOK) return XP_SKIP;
    e->path_pc[d] = PC_HE;
    n->pc[i] = PC_HE;
    step(e, n, i);
    return XP_STEP;
  }
  if (!enabled(n, i) || (n->pc[i] == PC_LOOK && !hold_can_look(n, i))) return XP_SKIP;
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

static explorer explore(int variant, bool c0_busy, bool c1_busy, bool hold, int reset) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.variant = variant;
  e.c0_busy = c0_busy;
  e.c1_busy = c1_busy;
  e.hold = hold;
  e.reset = reset;
  mstate s;
  memset(&s, 0, sizeof s);
  s.dispatched[0] = c0_busy;
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
  printf("gather explorer: C0 %s, C1 %s, %s, %s: %llu states: %s\n", e->c0_busy ? "busy" : "idle",
         e->c1_busy ? "busy" : "idle", e->hold ? "holds" : "no holds", reset_name[e->reset],
         (unsigned long long)e->states, e->failed ? e->why : "ok");
}

/* Every interleaving: each core busy or idle at the start, pullers that
 * hold or not. */
static void test_gather_all_interleavings(void **st) {
  (void)st;
  for (int b0 = 0; b0 < 2; b0++)
    for (int b1 = 0; b1 < 2; b1++)
      for (int hold = 0; hold < 2; hold++) {
        explorer e = explore(V_GOOD, b0, b1, hold, R_NONE);
        report(&e);
        assert_false(e.failed);
      }
}

/* Each broken variant is caught (printed above with its interleaving),
 * in the setting that shows it. */
static void test_gather_broken_variants_caught(void **st) {
  (void)st;
  struct {
    int variant;
    bool b0, b1, hold;
    const char *says;
  } cases[] = {
      {V_LOOK_FIRST, true, true, false, "still gathered"},
      {V_TAKE_FIRST, true, false, true, "still gathered"},
      {V_NO_END_TAKE, true, false, true, "still gathered"},
      {V_IDLE_NO_TAKE, true, true, false, "still gathered"},
      {V_PLAIN_EMPTY, false, false, true, " ran "},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    explorer e = explore(cases[k].variant, cases[k].b0, cases[k].b1, cases[k].hold, R_NONE);
    assert_true(e.failed);
    assert_non_null(strstr(e.why, cases[k].says));
  }
}

/* Run N ends anywhere, the reset, run N+1: its tasks run once, none of
 * run N's; a reset that keeps the word or the holders is caught. */
static void test_gather_run_n_plus_1(void **st) {
  (void)st;
  for (int hold = 0; hold < 2; hold++) {
    explorer e = explore(V_GOOD, true, false, hold, R_REAL);
    report(&e);
    assert_false(e.failed);
  }
  explorer kw = explore(V_GOOD, true, false, true, R_KEEP_WORD);
  assert_true(kw.failed);
  assert_non_null(strstr(kw.why, "run N ran in run N+1"));
  explorer kh = explore(V_GOOD, true, false, true, R_KEEP_HOLDERS);
  assert_true(kh.failed);
  assert_non_null(strstr(kh.why, "1 holder(s)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_all_interleavings),
      cmocka_unit_test(test_gather_broken_variants_caught),
      cmocka_unit_test(test_gather_run_n_plus_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
