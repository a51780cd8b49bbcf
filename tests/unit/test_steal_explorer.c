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

typedef struct mstate {
  uint64_t claim;
  uint8_t finished, dispatched, seen, deferred[4];
  uint8_t ran[4], units[4]; /* per id: runs (C or X), units counted */
  uint8_t cpc, cn, tmp;     /* C: pc, the id it is on, a loaded value */
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

static int step_c(const ctx *e, mstate *s) {
  _Atomic uint64_t w;
  atomic_init(&w, s->claim);
  switch (s->cpc) {
  case C_FIN1:
    s->finished = 1;
    s->cn = 2;
    s->cpc = C_CLAIM;
    return XP_STEP;
  case C_CLAIM:
    if (s->cn > 3 || s->dispatched < s->cn) return XP_SKIP; /* waits for a dispatch */
    if (e->variant == V_CLAIM_LOAD_STORE) {
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
    s->ran[s->cn]++;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_LOST:
    steal_lost(&w, s->cn);
    s->claim = atomic_load(&w);
    s->cpc = e->variant == V_NO_MARK ? C_PUB : C_MARK;
    return XP_STEP;
  case C_MARK:
    s->deferred[s->cn] = 1;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_PUB:
    s->finished = s->cn;
    s->cn++;
    s->cpc = s->cn > 3 ? C_DONE : C_CLAIM;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

/* X runs a block it was given and completes its unit. */
static void x_runs(mstate *s, int id) {
  s->ran[id]++;
  s->units[id]++;
}

static int apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  const ctx *e = x->ctx;
  mstate *s = state;
  _Atomic uint64_t w;
  atomic_init(&w, s->claim);
  switch (a) {
  case A_C: return step_c(e, s);
  case A_POLL:
    if (s->seen >= s->finished) return XP_SKIP;
    while (s->seen < s->finished) {
      s->seen++;
      if (s->seen >= 2 && !s->deferred[s->seen]) s->units[s->seen]++;
    }
    return XP_STEP;
  case A_TAKE2:
    /* the holder's view: issued 2, seen 0 */
    if (s->took2 || s->taking || s->seen != 0) return XP_SKIP;
    s->took2 = 1;
    if (e->variant == V_TAKE_LOAD_STORE) {
      s->htmp = (uint8_t)(atomic_load(&w) == 1);
      s->taking = 1;
      return XP_STEP;
    }
    if (steal_take(&w, 2)) x_runs(s, 2);
    s->claim = atomic_load(&w);
    return XP_STEP;
  case A_TAKE2ND:
    if (!s->taking) return XP_SKIP;
    s->taking = 0;
    if (s->htmp) {
      s->claim = 2 | STEAL_TAKEN;
      x_runs(s, 2);
    }
    return XP_STEP;
  case A_DISP3:
    /* one in flight in the holder's view (issued 2, seen 1) */
    if (s->dispatched != 2 || s->seen != 1 || s->taking) return XP_SKIP;
    s->dispatched = 3;
    return XP_STEP;
  case A_TAKE3:
    if (s->took3 || s->dispatched != 3 || s->seen != 1) return XP_SKIP; /* issued 3 - seen 1 */
    s->took3 = 1;
    if (steal_take(&w, 3)) x_runs(s, 3);
    s->claim = atomic_load(&w);
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static int on_final(xp_search *x, const void *state, int d) {
  (void)d;
  ctx *e = x->ctx;
  const mstate *s = state;
  int last = s->dispatched;
  for (int id = 2; id <= last; id++)
    if (s->ran[id] != 1 || s->units[id] != 1) {
      snprintf(e->why, sizeof e->why, "block %d ran %d times, its unit was counted %d times", id,
               s->ran[id], s->units[id]);
      e->failed = true;
      return XP_STOP;
    }
  if (last == 3 && (s->cpc != C_DONE || s->claim != 3)) {
    snprintf(e->why, sizeof e->why, "the core ended at %s with claim word %#llx", c_name[s->cpc],
             (unsigned long long)s->claim);
    e->failed = true;
    return XP_STOP;
  }
  return XP_DONE;
}

static void print_path(xp_search *xs, const mstate *init) {
  mstate s = *init;
  for (int d = 0; d < xs->stop_depth; d++) {
    int a = xs->path[d];
    const char *what = a == A_C ? c_name[s.cpc] : a_name[a];
    apply(xs, &s, a, d);
    printf("    %-15s -> claim %#llx finished %d dispatched %d seen %d\n", what,
           (unsigned long long)s.claim, s.finished, s.dispatched, s.seen);
  }
}

static bool run_variant(int variant) {
  ctx e = {variant, false, ""};
  mstate s;
  memset(&s, 0, sizeof s);
  s.claim = 1; /* C claimed id 1 and runs it */
  s.dispatched = 2;
  s.cpc = C_FIN1;
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = 64,
                      .nact = nact,
                      .apply = apply,
                      .on_final = on_final};
  xp_search xs;
  int why = xp_run(&xs, &m, &e, &s);
  assert_true(why != XP_DEPTH);
  bool ok = why == XP_DONE;
  printf("%s: %ld states, %ld final, %s\n", variant_name[variant], xs.states, xs.finals,
         ok ? "no violation" : e.why);
  if (!ok) print_path(&xs, &s);
  xp_free(&xs);
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
 * Model: core C as above (claimed id 1 and runs it; id 2 pending), its
 * own role holder O, which polls and, as C's in-flight count allows
 * (issued - seen <= 1), dispatches ids 3 and 4 into the slots (id & 1:
 * id 4 reuses id 2's slot), and a thief F, the role holder of another
 * scheduler, which cannot read O's counts and reads C's words instead,
 * one step each (sched.c, steal_foreign): D (dispatched); CLAIM (claim
 * == D - 1, else it gives up); FIN (finished < D - 1, else it gives up);
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
  uint64_t claim;
  uint8_t finished, dispatched, seen, slot[2], deferred[5];
  uint8_t ran[5], units[5];
  uint8_t cpc, cn;     /* C: pc, the dispatch id it is on */
  uint8_t fpc, fd, fb; /* F: pc, the id D it read, the block it read */
} fstate;

static int fnact(xp_search *x) {
  (void)x;
  return FA_NACT;
}

/* C, as in the first model, up to dispatch id 4. */
static int fstep_c(fstate *s) {
  _Atomic uint64_t w;
  atomic_init(&w, s->claim);
  switch (s->cpc) {
  case C_FIN1:
    s->finished = 1;
    s->cn = 2;
    s->cpc = C_CLAIM;
    return XP_STEP;
  case C_CLAIM:
    if (s->cn > 4 || s->dispatched < s->cn) return XP_SKIP;
    s->cpc = steal_claim(&w, s->cn) ? C_RUN : C_LOST;
    s->claim = atomic_load(&w);
    return XP_STEP;
  case C_RUN:
    s->ran[s->slot[s->cn & 1]]++;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_LOST:
    steal_lost(&w, s->cn);
    s->claim = atomic_load(&w);
    s->cpc = C_MARK;
    return XP_STEP;
  case C_MARK:
    s->deferred[s->cn] = 1;
    s->cpc = C_PUB;
    return XP_STEP;
  case C_PUB:
    s->finished = s->cn;
    s->cn++;
    s->cpc = s->cn > 4 ? C_DONE : C_CLAIM;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static int fstep_f(int variant, fstate *s) {
  _Atomic uint64_t w;
  atomic_init(&w, s->claim);
  switch (s->fpc) {
  case F_D:
    s->fd = s->dispatched;
    s->fpc = F_CLAIM;
    return XP_STEP;
  case F_CLAIM: s->fpc = s->claim == (uint64_t)s->fd - 1 ? F_FIN : F_DONE; return XP_STEP;
  case F_FIN:
    s->fpc = s->finished < s->fd - 1 ? (variant == FV_READ_AFTER_TAKE ? F_TAKE : F_READ) : F_DONE;
    return XP_STEP;
  case F_READ:
    s->fb = s->slot[s->fd & 1];
    s->fpc = F_TAKE;
    return XP_STEP;
  case F_TAKE: {
    bool took = steal_take(&w, s->fd);
    s->claim = atomic_load(&w);
    if (!took) {
      s->fpc = F_DONE;
    } else if (variant == FV_READ_AFTER_TAKE) {
      s->fpc = F_READ_AFTER;
    } else {
      s->ran[s->fb]++;
      s->units[s->fb]++;
      s->fpc = F_DONE;
    }
    return XP_STEP;
  }
  case F_READ_AFTER:
    s->fb = s->slot[s->fd & 1];
    s->ran[s->fb]++;
    s->units[s->fb]++;
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
  case FA_C: return fstep_c(s);
  case FA_POLL:
    if (s->seen >= s->finished) return XP_SKIP;
    while (s->seen < s->finished) {
      s->seen++;
      if (s->seen >= 2 && !s->deferred[s->seen]) s->units[s->slot[s->seen & 1]]++;
    }
    return XP_STEP;
  case FA_DISP: /* O: the next id, when C has at most one in flight */
    if (s->dispatched >= 4 || s->dispatched - s->seen > 1) return XP_SKIP;
    s->dispatched++;
    s->slot[s->dispatched & 1] = s->dispatched;
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
    if (s->ran[b] != 1 || s->units[b] != 1) {
      snprintf(e->why, sizeof e->why, "block %d ran %d times, its unit was counted %d times", b,
               s->ran[b], s->units[b]);
      e->failed = true;
      return XP_STOP;
    }
  return XP_DONE;
}

static void fprint_path(xp_search *xs, const fstate *init) {
  fstate s = *init;
  for (int d = 0; d < xs->stop_depth; d++) {
    int a = xs->path[d];
    const char *what = a == FA_C ? c_name[s.cpc] : a == FA_F ? f_name[s.fpc] : fa_name[a];
    fapply(xs, &s, a, d);
    printf("    %-15s -> claim %#llx finished %d dispatched %d seen %d slots %d %d\n", what,
           (unsigned long long)s.claim, s.finished, s.dispatched, s.seen, s.slot[0], s.slot[1]);
  }
}

static bool run_foreign(int variant) {
  ctx e = {variant, false, ""};
  fstate s;
  memset(&s, 0, sizeof s);
  s.claim = 1; /* C claimed id 1 and runs it */
  s.dispatched = 2;
  s.slot[1] = 1;
  s.slot[0] = 2;
  s.cpc = C_FIN1;
  const xp_model m = {.state_size = sizeof(fstate),
                      .key_size = sizeof(fstate),
                      .max_depth = 64,
                      .nact = fnact,
                      .apply = fapply,
                      .on_final = fon_final};
  xp_search xs;
  int why = xp_run(&xs, &m, &e, &s);
  assert_true(why != XP_DEPTH);
  bool ok = why == XP_DONE;
  printf("another scheduler, %s: %ld states, %ld final, %s\n", fvariant_name[variant], xs.states,
         xs.finals, ok ? "no violation" : e.why);
  if (!ok) fprint_path(&xs, &s);
  xp_free(&xs);
  return ok;
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
