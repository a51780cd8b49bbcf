/* test_steal_explorer.c — "an idle core takes a pending block"
 * (src/chip/steal.h), explored over every interleaving, with broken
 * variants caught.
 *
 * Model: core C has claimed dispatch id 1 and runs it; id 2 is pending in
 * its slot. The role holder H may take the pending block (steal_take,
 * when its view says C has two in flight: issued - seen == 2) and place
 * it on the idle core X; once its completion poll has seen id 1 finished
 * (C then has one in flight) it may dispatch id 3 as pending too, and take
 * that one. Steps, each one atomic operation of the real functions on a
 * claim word loaded from and stored back to the explored state:
 *   C: FIN1 (finished = 1), then for n = 2, 3 once dispatched: CLAIM n
 *      (steal_claim) -> RUN n, PUB n (finished = n); or lost -> LOST n
 *      (steal_lost) MARK n (slot deferred) PUB n
 *   H: POLL (seen moves to finished; a unit counted for each id not
 *      deferred), TAKE2, DISP3, TAKE3 (steal_take; X runs and completes
 *      what it took)
 * Checks in every final state: ids 2 and 3 each ran exactly once, and
 * their units were counted exactly once (by the poll when C ran it, by X's
 * completion when X did); C's claim word reads 3, ready for id 4.
 * Broken variants, each caught with its interleaving printed:
 *  - TAKE_LOAD_STORE: the holder reads the claim, then stores the mark;
 *  - CLAIM_LOAD_STORE: the core reads the claim, then stores its id;
 *  - NO_MARK: a lost block is published without its slot deferred.
 * A second model (below) has the pending block taken by another
 * scheduler's role holder, which reads the core's words instead of the
 * owner's counts, with a broken variant that reads the slot too late. */
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
enum { A_C, A_POLL, A_TAKE2, A_TAKE2ND, A_DISP3, A_TAKE3, A_NACT };
static const char *a_name[] = {"C", "H POLL", "H TAKE2", "H TAKE2(store)", "H DISP3", "H TAKE3"};

/* Core C and its owner's counts, shared by both models. */
typedef struct cstate {
  uint64_t claim;
  uint8_t finished, dispatched, seen;
  uint8_t slot[2];            /* the block each payload slot holds (id & 1) */
  uint8_t deferred[5];        /* per dispatch id: published lost */
  uint8_t ran[5], units[5];   /* per block: runs (C or a taker), units counted */
  uint8_t cpc, cn, tmp, last; /* C: pc, the id it is on, a loaded value, its last id */
} cstate;

typedef struct mstate {
  cstate c;
  uint8_t took2, took3, htmp, taking;
} mstate;

typedef struct ctx {
  int variant;
  bool failed;
  char why[200];
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

/* C has claimed dispatch id 1 and runs it; id 2 is pending; ids up to
 * `last` will be dispatched. */
static void c_start(cstate *c, int last) {
  c->claim = 1;
  c->dispatched = 2;
  c->slot[1] = 1;
  c->slot[0] = 2;
  c->last = (uint8_t)last;
  c->cpc = C_FIN1;
}

/* The owner's completion poll: seen moves to finished, a unit counted
 * for each block that was not lost (deferred). */
static int poll_c(cstate *s) {
  if (s->seen >= s->finished) return XP_SKIP;
  while (s->seen < s->finished) {
    s->seen++;
    if (s->seen >= 2 && !s->deferred[s->seen]) s->units[s->slot[s->seen & 1]]++;
  }
  return XP_STEP;
}

/* X runs a block it was given and completes its unit. */
static void x_runs(mstate *s, int id) {
  s->c.ran[id]++;
  s->c.units[id]++;
}

static int apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  const ctx *e = x->ctx;
  mstate *s = state;
  _Atomic uint64_t w;
  atomic_init(&w, s->c.claim);
  switch (a) {
  case A_C: return step_c(e->variant, &s->c);
  case A_POLL: return poll_c(&s->c);
  case A_TAKE2:
    /* the holder's view: issued 2, seen 0 */
    if (s->took2 || s->taking || s->c.seen != 0) return XP_SKIP;
    s->took2 = 1;
    if (e->variant == V_TAKE_LOAD_STORE) {
      s->htmp = (uint8_t)(atomic_load(&w) == 1);
      s->taking = 1;
      return XP_STEP;
    }
    if (steal_take(&w, 2)) x_runs(s, 2);
    s->c.claim = atomic_load(&w);
    return XP_STEP;
  case A_TAKE2ND:
    if (!s->taking) return XP_SKIP;
    s->taking = 0;
    if (s->htmp) {
      s->c.claim = 2 | STEAL_TAKEN;
      x_runs(s, 2);
    }
    return XP_STEP;
  case A_DISP3:
    /* one in flight in the holder's view (issued 2, seen 1) */
    if (s->c.dispatched != 2 || s->c.seen != 1 || s->taking) return XP_SKIP;
    s->c.dispatched = 3;
    s->c.slot[1] = 3;
    return XP_STEP;
  case A_TAKE3:
    if (s->took3 || s->c.dispatched != 3 || s->c.seen != 1) return XP_SKIP; /* issued 3 - seen 1 */
    s->took3 = 1;
    if (steal_take(&w, 3)) x_runs(s, 3);
    s->c.claim = atomic_load(&w);
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static int on_final(xp_search *x, const void *state, int d) {
  (void)d;
  ctx *e = x->ctx;
  const mstate *s = state;
  int last = s->c.dispatched;
  for (int id = 2; id <= last; id++)
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
  ctx e = {variant, false, ""};
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

static bool run_variant(int variant) {
  mstate s;
  memset(&s, 0, sizeof s);
  c_start(&s.c, 3);
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = 64,
                      .nact = nact,
                      .apply = apply,
                      .on_final = on_final};
  return explore(&m, variant, variant_name[variant], &s, print_path);
}

static void test_steal_protocol(void **state) {
  (void)state;
  if (!run_variant(V_GOOD)) fail_msg("the steal protocol fails");
  for (int v = V_GOOD + 1; v < V_COUNT; v++)
    if (run_variant(v)) fail_msg("broken variant '%s' was not caught", variant_name[v]);
}

/* ---- another scheduler's role holder takes the pending block ----
 *
 * Model: core C as above (claimed id 1 and runs it; id 2 pending), its
 * own role holder O, which polls and, as C's in-flight count allows
 * (issued - seen <= 1), dispatches ids 3 and 4 into the slots (id & 1:
 * id 4 reuses id 2's slot), and a thief F, the role holder of another
 * scheduler, which cannot read O's counts and reads C's words instead,
 * one step each (sched.c, foreign_pending and take_pending): D
 * (dispatched); CLAIM (claim == D - 1, else it gives up); FIN (finished
 * < D - 1, else it gives up);
 * READ (the block in slot D & 1); TAKE (steal_take(D): F's idle core runs
 * the block it read and completes its unit). F tries once, from any
 * point. Each slot holds a block id; C runs, and O's poll counts, the
 * block in the slot of the dispatch id. Checks in every final state:
 * blocks 2..4 each ran exactly once and their units were counted once.
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
  cstate c;            /* C (last id 4) and O's counts */
  uint8_t fpc, fd, fb; /* F: pc, the id D it read, the block it read */
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
  case F_CLAIM: s->fpc = s->c.claim == (uint64_t)s->fd - 1 ? F_FIN : F_DONE; return XP_STEP;
  case F_FIN:
    s->fpc = s->c.finished < s->fd - 1 ? (variant == FV_READ_AFTER_TAKE ? F_TAKE : F_READ) : F_DONE;
    return XP_STEP;
  case F_READ:
    s->fb = s->c.slot[s->fd & 1];
    s->fpc = F_TAKE;
    return XP_STEP;
  case F_TAKE: {
    bool took = steal_take(&w, s->fd);
    s->c.claim = atomic_load(&w);
    if (!took) {
      s->fpc = F_DONE;
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
    s->fb = s->c.slot[s->fd & 1];
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
  for (int b = 2; b <= 4; b++)
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

static bool run_foreign(int variant) {
  fstate s;
  memset(&s, 0, sizeof s);
  c_start(&s.c, 4);
  const xp_model m = {.state_size = sizeof(fstate),
                      .key_size = sizeof(fstate),
                      .max_depth = 64,
                      .nact = fnact,
                      .apply = fapply,
                      .on_final = fon_final};
  char label[64];
  snprintf(label, sizeof label, "another scheduler, %s", fvariant_name[variant]);
  return explore(&m, variant, label, &s, fprint_path);
}

static void test_steal_from_another_scheduler(void **state) {
  (void)state;
  if (!run_foreign(FV_GOOD)) fail_msg("taking from another scheduler's core fails");
  for (int v = FV_GOOD + 1; v < FV_COUNT; v++)
    if (run_foreign(v)) fail_msg("broken variant '%s' was not caught", fvariant_name[v]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steal_protocol),
      cmocka_unit_test(test_steal_from_another_scheduler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
