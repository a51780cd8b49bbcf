/* test_steal_explorer.c — "an idle core takes a pending block"
 * (src/chip/steal.h), explored over every interleaving, with broken
 * variants caught.
 *
 * Model: core C has two blocks in flight, ids 1 and 2, and either runs id
 * 1 (claimed) or is still waking (has claimed neither). The role holder H
 * may take the block C has not started (steal_target, then steal_take,
 * when its view says C has two in flight: issued - seen == 2) and place
 * it on the idle core X; once its completion poll has seen id 1 finished
 * (C then has one in flight) it may dispatch id 3 as pending too, and take
 * again. Steps, each one atomic operation of the real functions on a
 * claim word loaded from and stored back to the explored state:
 *   C: FIN1 (finished = 1; when it runs id 1), then for each n once
 *      dispatched: CLAIM n (steal_claim) -> RUN n, PUB n (finished = n);
 *      or lost -> LOST n (steal_lost) MARK n (slot deferred) PUB n
 *   H: POLL (seen moves to finished; a unit counted for each id not
 *      deferred), TAKE (two in flight: issued 2, seen 0), DISP3, TAKE
 *      again (issued 3, seen 1); X runs and completes what it took
 * Checks in every final state: every id C did not start before the
 * model began ran exactly once, and its unit was counted exactly once (by
 * the poll when C ran it, by X's completion when X did); C's claim word
 * reads 3, ready for id 4.
 * Broken variants, each caught with its interleaving printed:
 *  - TAKE_LOAD_STORE: the holder reads the claim, then stores the mark;
 *  - CLAIM_LOAD_STORE: the core reads the claim, then stores its id;
 *  - NO_MARK: a lost block is published without its slot deferred.
 * A second model (below) has the pending block taken by another
 * scheduler's role holder, which reads the core's words instead of the
 * owner's counts, with a broken variant that reads the slot too late; a
 * variant of it, a core's only block taken before the core claimed it
 * (steal_target_lone), by a core about to park. A
 * third checks liveness across two schedulers: no block left pending
 * behind a running one, or queued, while a core of its type idles.
 * Runs N and N+1 (test_run_n_plus_1): the claim words, dispatch registers
 * and the schedulers' published counts outlive a run, and dispatch ids
 * restart at 1 with each run. The liveness model's run N ends at every
 * step (a claim word marked taken, a block pending, a pass half done with
 * its news set), chip.c run_reset's part runs (steal_reset_claim,
 * steal_reset_counts, the cores' registers, the role word), and run N+1
 * is explored under the same checks, plus: no block of run N runs in run
 * N+1, and each of run N+1's runs once. `news` is left as run N left it,
 * as run_reset does, and nothing fails: a bit left only makes run N+1's
 * first pass publish and look. Broken resets, each caught and printed:
 *  - KEEPS_CLAIM: a claim word left at run N's id: run N+1's first block
 *    on that core fails its claim, is published as lost and never runs;
 *  - KEEPS_COUNTS, ZEROES_COUNTS: the published counts left as run N
 *    stored them, or zeroed like the run's other counters: the other
 *    scheduler shows no idle core, so a pass puts blocks behind its own
 *    busy core and kicks nobody, while that idle core waits;
 *  - KEEPS_DISPATCH: the dispatch registers and payload slots left: a
 *    core runs a block of run N. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "chip/steal.h"

#include "explore.h"

enum { V_GOOD, V_TAKE_LOAD_STORE, V_CLAIM_LOAD_STORE, V_NO_MARK, V_COUNT };
static const char *variant_name[V_COUNT] = {"good", "TAKE_LOAD_STORE", "CLAIM_LOAD_STORE",
                                            "NO_MARK"};

/* C's program counter */
enum { C_FIN1, C_CLAIM, C_CLAIM2ND, C_RUN, C_LOST, C_MARK, C_PUB, C_DONE };
static const char *c_name[] = {"FIN1", "CLAIM", "CLAIM(store)", "RUN",
                               "LOST", "MARK",  "PUB",          "DONE"};
/* H's actions */
enum { A_C, A_POLL, A_TAKE, A_TAKE2ND, A_DISP3, A_TAKE3, A_NACT };
static const char *a_name[] = {"C", "H POLL", "H TAKE", "H TAKE(store)", "H DISP3", "H TAKE3"};

/* Core C and its owner's counts, shared by both models. */
typedef struct cstate {
  uint64_t claim;
  uint8_t finished, dispatched, seen;
  uint8_t slot[2];            /* the block each payload slot holds (id & 1) */
  uint8_t deferred[5];        /* per dispatch id: published lost */
  uint8_t ran[5], units[5];   /* per block: runs (C or a taker), units counted */
  uint8_t cpc, cn, tmp, last; /* C: pc, the id it is on, a loaded value, its last id */
  uint8_t first;              /* the first id C had not started when the model began */
} cstate;

typedef struct mstate {
  cstate c;
  uint8_t took2, took3, htmp, hp, taking; /* H: takes done, a loaded value, the id it takes */
} mstate;

typedef struct ctx {
  int variant;
  bool failed;
  char why[200];
  int reset; /* liveness: 0, one run; else the reset between run N and run N+1 (R_...) */
} ctx;

static int nact(xp_search *x) {
  (void)x;
  return A_NACT;
}

/* C's next step (variant: V_GOOD or a broken claim or mark). It runs
 * the block its dispatch id's slot holds. */
static int step_c(int variant, cstate *s) {
  _Atomic uint64_t w;
  atomic_init(&w, s->claim);
  switch (s->cpc) {
  case C_FIN1:
    s->finished = 1;
    s->cn = 2;
    s->cpc = C_CLAIM;
    return XP_STEP;
  case C_CLAIM:
    if (s->cn > s->last || s->dispatched < s->cn) return XP_SKIP; /* waits for a dispatch */
    if (variant == V_CLAIM_LOAD_STORE) {
      s->tmp = (uint8_t)(atomic_load(&w) == (uint64_t)s->cn - 1); /* then stores, below */
      s->cpc = C_CLAIM2ND;
      return XP_STEP;
    }
    s->cpc = steal_claim(&w, s->cn) ? C_RUN : C_LOST;
    s->claim = atomic_load(&w);
    return XP_STEP;
  case C_CLAIM2ND:
    if (s->tmp) {
      s->claim = s->cn;
      s->cpc = C_RUN;
    } else {
      s->cpc = C_LOST;
    }
    return XP_STEP;
  case C_RUN:
    s->ran[s->slot[s->cn & 1]]++;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_LOST:
    steal_lost(&w, s->cn);
    s->claim = atomic_load(&w);
    s->cpc = variant == V_NO_MARK ? C_PUB : C_MARK;
    return XP_STEP;
  case C_MARK:
    s->deferred[s->cn] = 1;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_PUB:
    s->finished = s->cn;
    s->cn++;
    s->cpc = s->cn > s->last ? C_DONE : C_CLAIM;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

/* C has two blocks in flight, ids 1 and 2 (in slots 1 and 0), and runs
 * id 1 (claimed) or, `waking`, has claimed neither; ids up to `last` will
 * be dispatched. */
static void c_start(cstate *c, int last, bool waking) {
  c->claim = waking ? 0 : 1;
  c->dispatched = 2;
  c->slot[1] = 1;
  c->slot[0] = 2;
  c->last = (uint8_t)last;
  c->cpc = waking ? C_CLAIM : C_FIN1;
  c->cn = waking ? 1 : 0;
  c->first = waking ? 1 : 2;
}

/* The owner's completion poll: seen moves to finished, a unit counted
 * for each block that was not lost (deferred). */
static int poll_c(cstate *s) {
  if (s->seen >= s->finished) return XP_SKIP;
  while (s->seen < s->finished) {
    s->seen++;
    if (s->seen >= s->first && !s->deferred[s->seen]) s->units[s->slot[s->seen & 1]]++;
  }
  return XP_STEP;
}

/* X runs a block it was given and completes its unit. */
static void x_runs(mstate *s, int id) {
  s->c.ran[id]++;
  s->c.units[id]++;
}

/* H takes the block C has not started, if any (sched.c, take_from: the
 * target from C's words, its payload, the take); *took once it is done
 * (taken, or nothing to take). H wrote the payloads itself. */
static int h_take(int variant, mstate *s, uint8_t *took) {
  uint64_t p = steal_target(s->c.dispatched, s->c.claim, s->c.finished);
  if (!p) {
    *took = 1;
    return XP_STEP;
  }
  _Atomic uint64_t w;
  atomic_init(&w, s->c.claim);
  if (variant == V_TAKE_LOAD_STORE) { /* loads now, stores in TAKE(store) */
    s->htmp = (uint8_t)(atomic_load(&w) == p - 1);
    s->hp = (uint8_t)p;
    s->taking = 1;
    *took = 1;
    return XP_STEP;
  }
  if (steal_take(&w, p)) {
    x_runs(s, s->c.slot[p & 1]);
    *took = 1;
  }
  s->c.claim = atomic_load(&w);
  return XP_STEP;
}

static int apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  const ctx *e = x->ctx;
  mstate *s = state;
  switch (a) {
  case A_C: return step_c(e->variant, &s->c);
  case A_POLL: return poll_c(&s->c);
  case A_TAKE:
    /* the holder's view: issued 2, seen 0 */
    if (s->took2 || s->taking || s->c.seen != 0) return XP_SKIP;
    return h_take(e->variant, s, &s->took2);
  case A_TAKE2ND:
    if (!s->taking) return XP_SKIP;
    s->taking = 0;
    if (s->htmp) {
      s->c.claim = s->hp | STEAL_TAKEN;
      x_runs(s, s->c.slot[s->hp & 1]);
    }
    return XP_STEP;
  case A_DISP3:
    /* one in flight in the holder's view (issued 2, seen 1) */
    if (s->c.dispatched != 2 || s->c.seen != 1 || s->taking) return XP_SKIP;
    s->c.dispatched = 3;
    s->c.slot[1] = 3;
    return XP_STEP;
  case A_TAKE3:
    /* issued 3 - seen 1 */
    if (s->took3 || s->taking || s->c.dispatched != 3 || s->c.seen != 1) return XP_SKIP;
    return h_take(V_GOOD, s, &s->took3);
  default: return XP_SKIP;
  }
}

static int on_final(xp_search *x, const void *state, int d) {
  (void)d;
  ctx *e = x->ctx;
  const mstate *s = state;
  int last = s->c.dispatched;
  for (int id = s->c.first; id <= last; id++)
    if (s->c.ran[id] != 1 || s->c.units[id] != 1) {
      snprintf(e->why, sizeof e->why, "block %d ran %d times, its unit was counted %d times", id,
               s->c.ran[id], s->c.units[id]);
      e->failed = true;
      return XP_STOP;
    }
  if (last == 3 && (s->c.cpc != C_DONE || s->c.claim != 3)) {
    snprintf(e->why, sizeof e->why, "the core ended at %s with claim word %#llx", c_name[s->c.cpc],
             (unsigned long long)s->c.claim);
    e->failed = true;
    return XP_STOP;
  }
  return XP_DONE;
}

static void print_path(xp_search *xs, const void *init) {
  mstate s = *(const mstate *)init;
  for (int d = 0; d < xs->stop_depth; d++) {
    int a = xs->path[d];
    const char *what = a == A_C ? c_name[s.c.cpc] : a_name[a];
    apply(xs, &s, a, d);
    printf("    %-15s -> claim %#llx finished %d dispatched %d seen %d\n", what,
           (unsigned long long)s.c.claim, s.c.finished, s.c.dispatched, s.c.seen);
  }
}

/* Explores model m from `init`, prints the counts (and, on a violation,
 * the interleaving, replayed by `print`); true when nothing was violated. */
static bool explore(const xp_model *m, int variant, const char *label, const void *init,
                    void (*print)(xp_search *, const void *)) {
  ctx e = {variant, false, "", 0}; /* one run */
  xp_search xs;
  int why = xp_run(&xs, m, &e, init);
  assert_true(why != XP_DEPTH);
  bool ok = why == XP_DONE;
  printf("%s: %ld states, %ld final, %s\n", label, xs.states, xs.finals,
         ok ? "no violation" : e.why);
  if (!ok) print(&xs, init);
  xp_free(&xs);
  return ok;
}

/* Explores a variant from C running id 1, and from C still waking; true
 * when neither start violates anything. */
static bool run_variant(int variant) {
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = 64,
                      .nact = nact,
                      .apply = apply,
                      .on_final = on_final};
  bool ok = true;
  for (int waking = 0; waking < 2 && ok; waking++) {
    mstate s;
    memset(&s, 0, sizeof s);
    c_start(&s.c, 3, waking);
    char label[64];
    snprintf(label, sizeof label, "%s, core %s", variant_name[variant],
             waking ? "waking" : "running id 1");
    ok = explore(&m, variant, label, &s, print_path);
  }
  return ok;
}

static void test_steal_protocol(void **state) {
  (void)state;
  if (!run_variant(V_GOOD)) fail_msg("the steal protocol fails");
  for (int v = V_GOOD + 1; v < V_COUNT; v++)
    if (run_variant(v)) fail_msg("broken variant '%s' was not caught", variant_name[v]);
}

/* ---- another scheduler's role holder takes the pending block ----
 *
 * Model: core C as above (running id 1 or waking; ids 1 and 2 in flight),
 * its own role holder O, which polls and, as C's in-flight count allows
 * (issued - seen <= 1), dispatches ids 3 and 4 into the slots (id & 1:
 * id 4 reuses id 2's slot), and a thief F, the role holder of another
 * scheduler, which cannot read O's counts and reads C's words instead,
 * one step each (sched.c, core_pending, take_from and take_pending): D
 * (dispatched); CLAIM (the claim word); FIN (finished; then P =
 * steal_target, 0: it gives up); READ (the block in slot P & 1); TAKE
 * (steal_take(P): F's idle core runs the block it read and completes its
 * unit; a failed take reads the words again). F starts at any point. Each
 * slot holds a block id; C runs, and O's poll counts, the block in the
 * slot of the dispatch id. Checks in every final state: the blocks C had
 * not started, up to 4, each ran exactly once and their units were
 * counted once.
 * Broken variant, caught with its interleaving printed:
 *  - READ_AFTER_TAKE: F reads the slot after its take, when it may
 *    already hold block 4. */
enum { FV_GOOD, FV_READ_AFTER_TAKE, FV_COUNT };
static const char *fvariant_name[FV_COUNT] = {"good", "READ_AFTER_TAKE"};

enum { F_D, F_CLAIM, F_FIN, F_READ, F_TAKE, F_READ_AFTER, F_DONE };
static const char *f_name[] = {"F D",    "F CLAIM",      "F FIN", "F READ",
                               "F TAKE", "F READ(late)", "F -"};
enum { FA_C, FA_POLL, FA_DISP, FA_F, FA_NACT };
static const char *fa_name[] = {"C", "O POLL", "O DISP"};

typedef struct fstate {
  cstate c;                /* C (last id 4) and O's counts */
  uint64_t fk;             /* F: the claim word it read */
  uint8_t fpc, fd, fp, fb; /* F: pc, the id D it read, the id P it takes, the block it read */
  uint8_t lone;            /* F takes by steal_target_lone (the lone model, below) */
} fstate;

static int fnact(xp_search *x) {
  (void)x;
  return FA_NACT;
}

static int fstep_f(int variant, fstate *s) {
  _Atomic uint64_t w;
  atomic_init(&w, s->c.claim);
  switch (s->fpc) {
  case F_D:
    s->fd = s->c.dispatched;
    s->fpc = F_CLAIM;
    return XP_STEP;
  case F_CLAIM:
    s->fk = s->c.claim;
    s->fpc = F_FIN;
    return XP_STEP;
  case F_FIN:
    s->fp = (uint8_t)(s->lone ? steal_target_lone(s->fd, s->fk, s->c.finished)
                              : steal_target(s->fd, s->fk, s->c.finished));
    s->fpc = !s->fp ? F_DONE : variant == FV_READ_AFTER_TAKE ? F_TAKE : F_READ;
    return XP_STEP;
  case F_READ:
    s->fb = s->c.slot[s->fp & 1];
    s->fpc = F_TAKE;
    return XP_STEP;
  case F_TAKE: {
    bool took = steal_take(&w, s->fp);
    s->c.claim = atomic_load(&w);
    if (!took) {
      s->fpc = F_D; /* the word moved on: again */
    } else if (variant == FV_READ_AFTER_TAKE) {
      s->fpc = F_READ_AFTER;
    } else {
      s->c.ran[s->fb]++;
      s->c.units[s->fb]++;
      s->fpc = F_DONE;
    }
    return XP_STEP;
  }
  case F_READ_AFTER:
    s->fb = s->c.slot[s->fp & 1];
    s->c.ran[s->fb]++;
    s->c.units[s->fb]++;
    s->fpc = F_DONE;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static int fapply(xp_search *x, void *state, int a, int d) {
  (void)d;
  const ctx *e = x->ctx;
  fstate *s = state;
  switch (a) {
  case FA_C: return step_c(V_GOOD, &s->c);
  case FA_POLL: return poll_c(&s->c);
  case FA_DISP: /* O: the next id, when C has at most one in flight */
    if (s->c.dispatched >= 4 || s->c.dispatched - s->c.seen > 1) return XP_SKIP;
    s->c.dispatched++;
    s->c.slot[s->c.dispatched & 1] = s->c.dispatched;
    return XP_STEP;
  case FA_F: return fstep_f(e->variant, s);
  default: return XP_SKIP;
  }
}

static int fon_final(xp_search *x, const void *state, int d) {
  (void)d;
  ctx *e = x->ctx;
  const fstate *s = state;
  for (int b = s->c.first; b <= 4; b++)
    if (s->c.ran[b] != 1 || s->c.units[b] != 1) {
      snprintf(e->why, sizeof e->why, "block %d ran %d times, its unit was counted %d times", b,
               s->c.ran[b], s->c.units[b]);
      e->failed = true;
      return XP_STOP;
    }
  return XP_DONE;
}

static void fprint_path(xp_search *xs, const void *init) {
  fstate s = *(const fstate *)init;
  for (int d = 0; d < xs->stop_depth; d++) {
    int a = xs->path[d];
    const char *what = a == FA_C ? c_name[s.c.cpc] : a == FA_F ? f_name[s.fpc] : fa_name[a];
    fapply(xs, &s, a, d);
    printf("    %-15s -> claim %#llx finished %d dispatched %d seen %d slots %d %d\n", what,
           (unsigned long long)s.c.claim, s.c.finished, s.c.dispatched, s.c.seen, s.c.slot[0],
           s.c.slot[1]);
  }
}

static const xp_model fmodel = {.state_size = sizeof(fstate),
                                .key_size = sizeof(fstate),
                                .max_depth = 64,
                                .nact = fnact,
                                .apply = fapply,
                                .on_final = fon_final};

static bool run_foreign(int variant) {
  bool ok = true;
  for (int waking = 0; waking < 2 && ok; waking++) {
    fstate s;
    memset(&s, 0, sizeof s);
    c_start(&s.c, 4, waking);
    char label[80];
    snprintf(label, sizeof label, "another scheduler, %s, core %s", fvariant_name[variant],
             waking ? "waking" : "running id 1");
    ok = explore(&fmodel, variant, label, &s, fprint_path);
  }
  return ok;
}

static void test_steal_from_another_scheduler(void **state) {
  (void)state;
  if (!run_foreign(FV_GOOD)) fail_msg("taking from another scheduler's core fails");
  for (int v = FV_GOOD + 1; v < FV_COUNT; v++)
    if (run_foreign(v)) fail_msg("broken variant '%s' was not caught", fvariant_name[v]);
}

/* ---- a core about to park takes a lone block its owner has not started ----
 *
 * Model: core C has one block in flight, id 1 (slot 1), and has not
 * claimed it: still waking, or awake and left queued behind another
 * thread on its CPU. Its role holder O polls and, as C's in-flight count
 * allows, dispatches ids 2 to 4 (a pending one behind an unclaimed one,
 * too); the thief F, whose idle core is about to park (sched.c,
 * sched_lone_ask, take_lone), reads C's words as above and takes by
 * steal_target_lone: the block C has not claimed while it has nothing
 * else in flight. F starts at any point, as in the model above (F is O's
 * own holder in take_lone, one pass at a time: the model lets O dispatch
 * between F's steps too). Checks in every final state: blocks 1 to 4
 * each ran exactly once, and their units were counted once.
 * Broken variant, caught with its interleaving printed:
 *  - READ_AFTER_TAKE: F reads the slot after its take (id 3 may be in
 *    it by then). */
static bool run_lone(int variant) {
  fstate s;
  memset(&s, 0, sizeof s);
  s.lone = 1;
  s.c.dispatched = 1; /* id 1 in slot 1, unclaimed: claim 0, finished 0 */
  s.c.slot[1] = 1;
  s.c.last = 4;
  s.c.cpc = C_CLAIM;
  s.c.cn = 1;
  s.c.first = 1;
  char label[80];
  snprintf(label, sizeof label, "a lone block, %s", fvariant_name[variant]);
  return explore(&fmodel, variant, label, &s, fprint_path);
}

static void test_lone_block_taken_before_a_park(void **state) {
  (void)state;
  if (!run_lone(FV_GOOD)) fail_msg("taking a lone unstarted block fails");
  for (int v = FV_GOOD + 1; v < FV_COUNT; v++)
    if (run_lone(v)) fail_msg("broken variant '%s' was not caught", fvariant_name[v]);
}

/* ---- liveness: no block waits while a core of its type idles ----
 *
 * Model: two schedulers, A and B, of one core each (cores 0 and 1, one
 * type), the orchestrator O, and the ready queue. Each core runs the
 * claim protocol above (CLAIM, RUN/LOST, PUB: finished, then a request of
 * its scheduler's pass) and may PARK while it has nothing to run (a
 * dispatch wakes it). Blocks: X, which ends; Y, P1 and P2, which never
 * end (a core that runs one is busy for good). A scheduler's pass runs
 * when requested (a request is served by a pass that starts after it,
 * role.h), one step at a time (sched.c, sched_pass):
 *   POLL (seen moves to finished: news when its core fell idle)
 *   DISP0 (a queued block onto its idle core)
 *   HINT (queue not empty: read the other's idle count)
 *   DISP1 (it shows one: leave the block queued, news; else a queued
 *     block behind its busy core: news)
 *   with news: PUB (store its counts), then the fence (implicit here)
 *   LOOK (its core idle: read the other's pending count; shown: D, K, F
 *     read the other core's words, P = steal_target; READ its slot; TAKE,
 *     steal_take: onto its own core, or, failed, from D again; taken,
 *     with news: PUB again)
 *   with news: KICK (no idle core, a block pending or queued: read the
 *     other's idle count; shown: request the other's pass)
 *   END (store its counts)
 * O pushed P1 and P2 and requested A's pass (the orchestrator's push runs
 * the first scheduler's pass); once that pass has ended it requests B's
 * if the queue is not empty (sched_make_ready's loop).
 * Starts: REPRO, core 0 idle and parked, core 1 running X, both blocks
 * queued: A's pass puts both on core 0 when B shows no idle core, while X
 * ends; HANDOVER, core 0 running Y, core 1 idle and parked, P1 queued, and
 * only A's pass requested (an orchestrator that left the push to A's
 * puller while another thread held A's role).
 * Checks in every state where nothing can move: no block is pending on a
 * core behind the block it runs for good, or queued, while the other core
 * idles; every block ran at most once (in every state); no cycle (a pass
 * that kicks a pass that kicks it back for ever). Broken variants, each
 * caught and printed:
 *  - TAKE_NEEDS_CLAIM: a take only of d, once the core claimed d - 1
 *    (the take before steal_target);
 *  - LOOK_BEFORE_PUB: the look at the other's pending count before its
 *    own counts are stored, and no kick (counts published at the end of a
 *    pass only);
 *  - NO_QUEUE_KICK: a kick for a pending block but not for one left
 *    queued;
 *  - AWAKE_ONLY: only an idle core that has not parked takes. */
enum {
  LV_GOOD,
  LV_TAKE_NEEDS_CLAIM,
  LV_LOOK_BEFORE_PUB,
  LV_NO_QUEUE_KICK,
  LV_AWAKE_ONLY,
  LV_COUNT
};
static const char *lvariant_name[LV_COUNT] = {"good", "TAKE_NEEDS_CLAIM", "LOOK_BEFORE_PUB",
                                              "NO_QUEUE_KICK", "AWAKE_ONLY"};
/* X2, Q2 and Q3: run N+1's, pushed in that order (the queue hands out
 * consecutive blocks); X2 ends, Q2 and Q3 never do */
enum { B_NONE, B_X, B_Y, B_P1, B_P2, B_X2, B_Q2, B_Q3, B_COUNT };
static const char *block_name[B_COUNT] = {"-", "X", "Y", "P1", "P2", "X2", "Q2", "Q3"};

/* The reset between run N and run N+1: none (one run), chip.c
 * run_reset's (R_REAL), or one with a part left out. */
enum { R_NONE, R_REAL, R_KEEPS_CLAIM, R_KEEPS_COUNTS, R_ZEROES_COUNTS, R_KEEPS_DISPATCH, R_COUNT };
static const char *reset_name[R_COUNT] = {"one run",      "the real reset", "KEEPS_CLAIM",
                                          "KEEPS_COUNTS", "ZEROES_COUNTS",  "KEEPS_DISPATCH"};

/* a core's program counter */
enum { L_WAIT, L_RUN, L_LOST, L_PUB, L_FOREVER };
static const char *l_name[] = {"CLAIM", "END", "LOST", "PUB", "-"};
/* a pass's program counter */
enum {
  S_IDLE,
  S_POLL,
  S_DISP0,
  S_HINT,
  S_DISP1,
  S_PUB,
  S_LOOK,
  S_D,
  S_K,
  S_F,
  S_READ,
  S_TAKE,
  S_REPUB,
  S_KICK,
  S_END
};
static const char *s_name[] = {"start", "POLL", "DISP0", "HINT", "DISP1", "PUB",  "LOOK", "D",
                               "K",     "F",    "READ",  "TAKE", "PUB",   "KICK", "END"};

typedef struct lcore {
  uint64_t claim;
  uint8_t dispatched, finished, slot[2], cpc, cn, parked;
} lcore;

typedef struct lsched {
  uint8_t pc, req, issued, seen;     /* issued, seen: its counts of its core */
  uint8_t pub_idle, pub_pending;     /* its published counts */
  uint8_t news, tmp, fd, fp, fb, fk; /* the pass's news, a count read, the take's registers */
} lsched;

typedef struct lstate {
  lcore c[2];
  lsched s[2];
  uint8_t queued, qnext; /* blocks queued, the next one (P1, P2) */
  uint8_t opc;           /* O: 0 until it has looked at the queue after A's pass */
  uint8_t ran[B_COUNT];
  uint8_t run; /* 0: run N; 1: run N+1, after run N ended and the reset */
} lstate;

enum { LA_CORE0, LA_CORE1, LA_PARK0, LA_PARK1, LA_SCHED0, LA_SCHED1, LA_O, LA_END, LA_NACT };

static int lnact(xp_search *x) {
  (void)x;
  return LA_NACT;
}

static bool lforever(int b) { return b != B_X && b != B_X2; }

static int lcore_step(lstate *s, int i) {
  lcore *c = &s->c[i];
  _Atomic uint64_t w;
  atomic_init(&w, c->claim);
  switch (c->cpc) {
  case L_WAIT:
    if (c->dispatched < c->cn) return XP_SKIP;
    if (steal_claim(&w, c->cn)) {
      int b = c->slot[c->cn & 1];
      s->ran[b]++;
      c->cpc = lforever(b) ? L_FOREVER : L_RUN;
    } else {
      c->cpc = L_LOST;
    }
    c->claim = atomic_load(&w);
    return XP_STEP;
  case L_LOST:
    steal_lost(&w, c->cn);
    c->claim = atomic_load(&w);
    c->cpc = L_PUB;
    return XP_STEP;
  case L_RUN:
  case L_PUB:
    c->finished = c->cn++;
    s->s[i].req = 1; /* the core requests its scheduler's pass */
    c->cpc = L_WAIT;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static void ldispatch(lstate *s, int i, int block) {
  lsched *sc = &s->s[i];
  lcore *c = &s->c[i];
  if (sc->issued - sc->seen == 1) sc->news = 1; /* behind a busy core */
  sc->issued++;
  c->slot[sc->issued & 1] = (uint8_t)block;
  c->dispatched = sc->issued;
  c->parked = 0; /* the dispatch wakes it */
}

static void lpublish(lstate *s, int i) {
  lsched *sc = &s->s[i];
  sc->pub_idle = sc->issued == sc->seen;
  sc->pub_pending = sc->issued - sc->seen == 2;
}

/* The take's target: steal_target, or the take before it (d, once the
 * core claimed d - 1). */
static uint64_t ltarget(int variant, uint64_t d, uint64_t k, uint64_t f) {
  if (variant != LV_TAKE_NEEDS_CLAIM) return steal_target(d, k, f);
  return d >= 2 && k == d - 1 && f < d - 1 ? d : 0;
}

static int lsched_step(int variant, lstate *s, int i) {
  lsched *sc = &s->s[i], *o = &s->s[1 - i];
  lcore *oc = &s->c[1 - i];
  bool idle = sc->issued == sc->seen;
  bool order_old = variant == LV_LOOK_BEFORE_PUB;
  switch (sc->pc) {
  case S_IDLE:
    if (!sc->req) return XP_SKIP;
    sc->req = 0;
    sc->pc = S_POLL;
    return XP_STEP;
  case S_POLL:
    while (sc->seen < s->c[i].finished)
      if (++sc->seen == sc->issued) sc->news = 1; /* its core fell idle */
    sc->pc = S_DISP0;
    return XP_STEP;
  case S_DISP0:
    if (s->queued && idle) {
      s->queued--;
      ldispatch(s, i, s->qnext++);
    }
    sc->pc = S_HINT;
    return XP_STEP;
  case S_HINT:
    sc->tmp = o->pub_idle;
    sc->pc = s->queued ? S_DISP1 : order_old || !sc->news ? S_LOOK : S_PUB;
    return XP_STEP;
  case S_DISP1:
    if (sc->tmp) {
      sc->news = 1; /* left queued for the other scheduler */
    } else if (s->queued && sc->issued - sc->seen <= 1) {
      s->queued--;
      ldispatch(s, i, s->qnext++);
    }
    sc->pc = order_old || !sc->news ? S_LOOK : S_PUB;
    return XP_STEP;
  case S_PUB:
    lpublish(s, i);
    sc->pc = S_LOOK;
    return XP_STEP;
  case S_LOOK:
    sc->tmp = o->pub_pending;
    if (!idle || !sc->tmp || (variant == LV_AWAKE_ONLY && s->c[i].parked))
      sc->pc = order_old || !sc->news ? S_END : S_KICK;
    else
      sc->pc = S_D;
    return XP_STEP;
  case S_D:
    sc->fd = oc->dispatched;
    sc->pc = S_K;
    return XP_STEP;
  case S_K:
    sc->fk = (uint8_t)(oc->claim & 0xff);
    sc->fk |= (uint8_t)((oc->claim & STEAL_TAKEN) ? 0x80 : 0);
    sc->pc = S_F;
    return XP_STEP;
  case S_F: {
    uint64_t k = (sc->fk & 0x7f) | ((sc->fk & 0x80) ? STEAL_TAKEN : 0);
    sc->fp = (uint8_t)ltarget(variant, sc->fd, k, oc->finished);
    sc->pc = sc->fp ? S_READ : order_old || !sc->news ? S_END : S_KICK;
    return XP_STEP;
  }
  case S_READ:
    sc->fb = oc->slot[sc->fp & 1];
    sc->pc = S_TAKE;
    return XP_STEP;
  case S_TAKE: {
    _Atomic uint64_t w;
    atomic_init(&w, oc->claim);
    bool took = steal_take(&w, sc->fp);
    oc->claim = atomic_load(&w);
    if (!took) {
      sc->pc = S_D; /* the word moved on: again */
      return XP_STEP;
    }
    ldispatch(s, i, sc->fb);
    sc->pc = order_old || !sc->news ? S_END : S_REPUB;
    return XP_STEP;
  }
  case S_REPUB: /* its idle core took: counts stored again before a kick */
    lpublish(s, i);
    sc->pc = S_KICK;
    return XP_STEP;
  case S_KICK: {
    bool waiting = sc->issued - sc->seen == 2 || (s->queued && variant != LV_NO_QUEUE_KICK);
    if (!idle && waiting && o->pub_idle) o->req = 1;
    sc->pc = S_END;
    return XP_STEP;
  }
  case S_END:
    lpublish(s, i);
    sc->news = 0;
    sc->pc = S_IDLE;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

/* After a step: no block ran twice, and no block of run N ran in run
 * N+1 (a stale dispatch or slot). */
static int lran_checked(ctx *e, const lstate *s, int r) {
  for (int b = 0; b < B_COUNT && r == XP_STEP; b++)
    if (s->ran[b] > 1 || (s->run && b < B_X2 && s->ran[b])) {
      snprintf(e->why, sizeof e->why, "block %s%s ran %d time(s)%s", block_name[b],
               s->run && b < B_X2 ? " of run N" : "", s->ran[b], s->run ? " in run N+1" : "");
      e->failed = true;
      return XP_STOP;
    }
  return r;
}

/* Run N ends here, failed or cancelled, wherever its threads are (a pass
 * half done, news set, a block pending or taken, a claim word marked):
 * the model ends it at every step, which is more than the real end
 * allows (a pass runs to its end before its thread leaves the run,
 * test_lifecycle_explorer), so the reset is checked against any state.
 * Then chip.c run_reset's part: each core's claim word (steal_reset_claim),
 * dispatch registers and payload slots, every core idle to its role
 * (issued, seen) and its published counts (steal_reset_counts), the role
 * word (role_init: no request), the ready queue discarded; a scheduler's
 * `news` is left as run N left it, as run_reset leaves it (every pass
 * clears it at its end; a bit left would only make the first pass of run
 * N+1 publish its counts and look, which that pass may always do). The
 * threads are parked (pto_wait_idle). Run N+1: the orchestrator pushes X2,
 * which ends, then Q2 and Q3, which never do, and A's pass is requested,
 * as at REPRO's start; its block ends, passes, takes and hand-overs as in
 * run N. */
static void lreset(int reset, lstate *s) {
  for (int i = 0; i < 2; i++) {
    lcore *c = &s->c[i];
    lsched *sc = &s->s[i];
    _Atomic uint64_t w;
    atomic_init(&w, c->claim);
    if (reset != R_KEEPS_CLAIM) steal_reset_claim(&w);
    c->claim = atomic_load(&w);
    if (reset != R_KEEPS_DISPATCH) {
      c->dispatched = 0;
      c->slot[0] = c->slot[1] = B_NONE;
    }
    c->finished = 0;
    c->cpc = L_WAIT;
    c->cn = 1; /* dispatch ids restart at 1 (core_serve) */
    c->parked = 1;
    sc->pc = S_IDLE;
    sc->req = 0;
    sc->issued = sc->seen = 0;
    sc->tmp = sc->fd = sc->fp = sc->fb = sc->fk = 0; /* a pass's locals */
    _Atomic uint32_t idle, pending;
    atomic_init(&idle, sc->pub_idle);
    atomic_init(&pending, sc->pub_pending);
    if (reset == R_ZEROES_COUNTS) {
      atomic_store(&idle, 0);
      atomic_store(&pending, 0);
    } else if (reset != R_KEEPS_COUNTS) {
      steal_reset_counts(&idle, &pending, sc->issued == sc->seen); /* its one core idle */
    }
    sc->pub_idle = (uint8_t)atomic_load(&idle);
    sc->pub_pending = (uint8_t)atomic_load(&pending);
  }
  for (int b = 0; b < B_X2; b++)
    s->ran[b] = 0; /* run N's blocks: none may run again */
  s->queued = 3;
  s->qnext = B_X2;
  s->s[0].req = 1;
  s->opc = 0;
  s->run = 1;
}

static int lapply(xp_search *x, void *state, int a, int d) {
  (void)d;
  ctx *e = x->ctx;
  lstate *s = state;
  switch (a) {
  case LA_CORE0:
  case LA_CORE1: return lran_checked(e, s, lcore_step(s, a - LA_CORE0));
  case LA_PARK0:
  case LA_PARK1: {
    lcore *c = &s->c[a - LA_PARK0];
    if (c->cpc != L_WAIT || c->dispatched >= c->cn || c->parked) return XP_SKIP;
    c->parked = 1;
    return XP_STEP;
  }
  case LA_SCHED0:
  case LA_SCHED1: return lran_checked(e, s, lsched_step(e->variant, s, a - LA_SCHED0));
  case LA_END:
    if (!e->reset || s->run) return XP_SKIP;
    lreset(e->reset, s);
    return XP_STEP;
  case LA_O:
    /* after A's first pass (A requested, then served) */
    if (s->opc || s->s[0].req || s->s[0].pc != S_IDLE) return XP_SKIP;
    if (s->queued) s->s[1].req = 1;
    s->opc = 1;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static int lon_final(xp_search *x, const void *state, int d) {
  (void)d;
  ctx *e = x->ctx;
  const lstate *s = state;
  const char *of = s->run ? " of run N+1" : "";
  for (int i = 0; i < 2; i++) {
    const lcore *c = &s->c[i], *oc = &s->c[1 - i];
    bool other_idle = oc->cpc == L_WAIT && oc->dispatched < oc->cn;
    if (!other_idle) continue;
    /* a block dispatched after the one it runs for good, not taken */
    if (c->cpc == L_FOREVER && c->dispatched > c->cn && c->claim == c->cn) {
      snprintf(e->why, sizeof e->why,
               "block %s%s waits pending on core %d behind block %s while core %d idles",
               block_name[c->slot[(c->cn + 1) & 1]], of, i, block_name[c->slot[c->cn & 1]], 1 - i);
      e->failed = true;
      return XP_STOP;
    }
    if (s->queued) {
      snprintf(e->why, sizeof e->why, "block %s%s waits queued while core %d idles",
               block_name[s->qnext], of, 1 - i);
      e->failed = true;
      return XP_STOP;
    }
  }
  /* run N+1's blocks: X2 ran and ended, Q2 and Q3 run for good */
  for (int b = B_X2; b < B_COUNT && s->run; b++)
    if (s->ran[b] != 1) {
      snprintf(e->why, sizeof e->why, "block %s%s ran %d times", block_name[b], of, s->ran[b]);
      e->failed = true;
      return XP_STOP;
    }
  return XP_DONE;
}

static void lprint_path(xp_search *xs, const void *init) {
  lstate s = *(const lstate *)init;
  static const char *who[] = {"core 0", "core 1", "core 0", "core 1", "A", "B", "O", "chip"};
  for (int d = 0; d < xs->stop_depth; d++) {
    int a = xs->path[d];
    const char *what = a <= LA_CORE1   ? l_name[s.c[a].cpc]
                       : a <= LA_PARK1 ? "PARK"
                       : a == LA_O     ? "kicks B if queued"
                       : a == LA_END   ? "run N ends, reset"
                                       : s_name[s.s[a - LA_SCHED0].pc];
    lapply(xs, &s, a, d);
    printf("    %-6s %-17s -> run %d queued %d | core 0: claim %#llx dispatched %d finished %d%s | "
           "core 1: claim %#llx dispatched %d finished %d%s | shown idle/pending A %d/%d B "
           "%d/%d\n",
           who[a], what, s.run, s.queued, (unsigned long long)s.c[0].claim, s.c[0].dispatched,
           s.c[0].finished, s.c[0].parked ? " parked" : "", (unsigned long long)s.c[1].claim,
           s.c[1].dispatched, s.c[1].finished, s.c[1].parked ? " parked" : "", s.s[0].pub_idle,
           s.s[0].pub_pending, s.s[1].pub_idle, s.s[1].pub_pending);
  }
}

enum { START_REPRO, START_HANDOVER, START_COUNT };
static const char *start_name[START_COUNT] = {"two blocks while X ends",
                                              "hand-over of a queued block"};

static void lstart(lstate *s, int start) {
  memset(s, 0, sizeof *s);
  s->qnext = B_P1;
  s->s[0].req = 1; /* the push ran (or requested) A's pass */
  if (start == START_REPRO) {
    /* core 0 idle and parked; core 1 runs X; P1 and P2 queued */
    s->c[0].cn = 1;
    s->c[0].parked = 1;
    s->c[1] = (lcore){.claim = 1, .dispatched = 1, .slot = {0, B_X}, .cpc = L_RUN, .cn = 1};
    s->s[0].pub_idle = 1;
    s->s[1].issued = 1;
    s->queued = 2;
  } else {
    /* core 0 runs Y for good; core 1 idle and parked; P1 queued; O done */
    s->c[0] = (lcore){.claim = 1, .dispatched = 1, .slot = {0, B_Y}, .cpc = L_FOREVER, .cn = 1};
    s->ran[B_Y] = 1;
    s->c[1].cn = 1;
    s->c[1].parked = 1;
    s->s[0].issued = 1;
    s->s[1].pub_idle = 1;
    s->queued = 1;
    s->opc = 1;
  }
}

/* Explores a variant from each start, run N alone (R_NONE) or run N
 * ending anywhere, `reset`, and run N+1; true when no start violates
 * anything. */
static bool run_liveness2(int variant, int reset, char *why_out, size_t why_size) {
  const xp_model m = {.state_size = sizeof(lstate),
                      .key_size = sizeof(lstate),
                      .max_depth = 200,
                      .nact = lnact,
                      .apply = lapply,
                      .on_final = lon_final,
                      .detect_cycles = true};
  bool ok = true;
  for (int start = 0; start < START_COUNT && ok; start++) {
    lstate s;
    lstart(&s, start);
    char label[96];
    snprintf(label, sizeof label, "liveness, %s, %s%s%s", lvariant_name[variant], start_name[start],
             reset ? ", then run N+1 after " : "", reset ? reset_name[reset] : "");
    ctx e = {variant, false, "", reset};
    xp_search xs;
    int why = xp_run(&xs, &m, &e, &s);
    assert_true(why != XP_DEPTH);
    if (why == XP_CYCLE) snprintf(e.why, sizeof e.why, "a cycle: passes that never end");
    ok = why == XP_DONE;
    printf("%s: %ld states, %ld final, %s\n", label, xs.states, xs.finals,
           ok ? "no violation" : e.why);
    if (!ok) lprint_path(&xs, &s);
    if (!ok && why_out) snprintf(why_out, why_size, "%s", e.why);
    xp_free(&xs);
  }
  return ok;
}

static bool run_liveness(int variant) { return run_liveness2(variant, R_NONE, NULL, 0); }

static void test_no_block_waits_while_a_core_idles(void **state) {
  (void)state;
  if (!run_liveness(LV_GOOD)) fail_msg("a block waits while a core idles");
  for (int v = LV_GOOD + 1; v < LV_COUNT; v++)
    if (run_liveness(v)) fail_msg("broken variant '%s' was not caught", lvariant_name[v]);
}

/* Run N ends at every step, the real reset, run N+1 under the same
 * checks; each reset with a part left out is caught. */
static void test_run_n_plus_1(void **state) {
  (void)state;
  if (!run_liveness2(LV_GOOD, R_REAL, NULL, 0)) fail_msg("run N+1 after the real reset fails");
  static const struct {
    int reset;
    const char *why;
  } broken[] = {
      /* the claim word at run N's last id: run N+1's first block on that
       * core is taken for lost, published finished, never run */
      {R_KEEPS_CLAIM, "of run N+1 ran 0 times"},
      /* B still shows its core busy (run N's counts, or zeroed): A puts
       * Q2 behind Y2 on its own core and kicks nobody */
      {R_KEEPS_COUNTS, "of run N+1 waits pending"},
      {R_ZEROES_COUNTS, "of run N+1 waits pending"},
      /* the dispatch registers and slots of run N: a core runs a block
       * of run N */
      {R_KEEPS_DISPATCH, "of run N ran"},
  };
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
    char why[200] = "";
    if (run_liveness2(LV_GOOD, broken[i].reset, why, sizeof why))
      fail_msg("broken reset '%s' was not caught", reset_name[broken[i].reset]);
    if (!strstr(why, broken[i].why))
      fail_msg("broken reset '%s' was caught for another reason: %s", reset_name[broken[i].reset],
               why);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steal_protocol),
      cmocka_unit_test(test_steal_from_another_scheduler),
      cmocka_unit_test(test_lone_block_taken_before_a_park),
      cmocka_unit_test(test_no_block_waits_while_a_core_idles),
      cmocka_unit_test(test_run_n_plus_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
