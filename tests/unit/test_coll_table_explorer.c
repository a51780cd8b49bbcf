/* test_coll_table_explorer.c — proves the reuse of the collectives' call
 * table (src/comm/coll.c, table_exchange; generation and slot from
 * coll_proto.h) over every interleaving of 2 and 3 ranks making
 * back-to-back calls on one scratch, and shows that the same explorer
 * catches the known-bad variants: one slot instead of two (a rank
 * overwrites what a peer still reads), a generation without the epoch (a
 * slot left by an aborted earlier task passes for this task's call), and
 * a call that waits for one rank only (a broadcast's root: the root runs
 * two calls ahead of a reader).
 *
 * Model of call s of rank r (each step one access to shared memory):
 * WRITE my slot's data (tagged (epoch, s)), PUBLISH its generation
 * (the release store; the data is visible to whoever sees it), then per
 * peer p a WAIT until p's slot holds the generation of call s, then per
 * peer a READ of its data, which must be call s's of this epoch. Every
 * state where no step is possible must have every rank done (no hang).
 * The aborted scenario starts task 2 with rank 0's slot holding its call 1
 * of the aborted task 1. Depth-first over every reachable state (hashed);
 * a violation prints its path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm/coll_proto.h"
#include "explore.h"

#define XR     3    /* most ranks */
#define XCALLS 4    /* most calls per rank */
#define XPATH  4096 /* longest path explored (never reached) */

typedef struct xvariant {
  const char *name;
  bool one_slot;  /* every call in slot 0 */
  bool no_epoch;  /* the generation is the call number alone */
  bool root_only; /* every rank waits for (and reads) rank 0 only */
} xvariant;
static const xvariant V_REAL = {"real", false, false, false};
static const xvariant V_ONE_SLOT = {"one slot", true, false, false};
static const xvariant V_NO_EPOCH = {"generation without the epoch", false, true, false};
static const xvariant V_ROOT_ONLY = {"waits for the root only", false, false, true};

typedef struct xstate {
  uint64_t gen[XR][2];  /* rank r's slot generations */
  uint16_t data[XR][2]; /* what its slot's data is of: epoch << 8 | call */
  uint8_t pc[XR];
  uint8_t call[XR]; /* calls finished */
  uint8_t pad[2];   /* no implicit padding: states are hashed bytewise */
} xstate;

typedef struct xrun {
  const xvariant *v;
  int n, calls;
  uint32_t epoch;
  bool violated, hung;
  char msg[256];
  const int *path;
  int depth;
} xrun;

static int slot_of(const xrun *x, int32_t s) { return x->v->one_slot ? 0 : coll_table_slot(s); }
static uint64_t gen_of(const xrun *x, int32_t s) {
  return x->v->no_epoch ? (uint64_t)(uint32_t)s : coll_table_gen(x->epoch, s);
}
static bool waits_for(const xrun *x, int r, int p) {
  return p != r && (!x->v->root_only || p == 0);
}

/* pc: 0 WRITE, 1 PUBLISH, 2 + p WAIT for peer p, 2 + n + p READ peer p */
static int pc_end(const xrun *x) { return 2 + 2 * x->n; }

/* One step of rank r; false when it cannot move (a wait, or finished). */
static bool rank_step(xrun *x, xstate *s, int r) {
  int n = x->n, pc = s->pc[r];
  if (s->call[r] >= x->calls) return false;
  int32_t seq = s->call[r] + 1;
  int sl = slot_of(x, seq);
  uint16_t tag = (uint16_t)(x->epoch << 8 | (uint32_t)seq);
  uint64_t want = gen_of(x, seq);
  if (pc == 0) {
    s->data[r][sl] = tag;
  } else if (pc == 1) {
    s->gen[r][sl] = want;
  } else if (pc < 2 + n) {
    int p = pc - 2;
    uint64_t seen = s->gen[p][sl];
    if (x->v->no_epoch) seen = (uint32_t)seen;
    if (waits_for(x, r, p) && seen != want) return false;
  } else {
    int p = pc - 2 - n;
    if (waits_for(x, r, p) && s->data[p][sl] != tag && !x->violated) {
      x->violated = true;
      snprintf(x->msg, sizeof x->msg,
               "rank %d, call %d of epoch %u, read rank %d's slot holding epoch %u call %u", r, seq,
               x->epoch, p, s->data[p][sl] >> 8, s->data[p][sl] & 0xff);
    }
  }
  if (++s->pc[r] == pc_end(x)) {
    s->pc[r] = 0;
    s->call[r]++;
  }
  return true;
}

static void print_path(const xrun *x) {
  fprintf(stderr, "  interleaving (the rank of each step):");
  for (int i = 0; i < x->depth; i++)
    fprintf(stderr, " %d", x->path[i]);
  fprintf(stderr, "\n");
}

/* ---- search (explore.h) ---- */

static int xm_nact(xp_search *x) { return ((xrun *)x->ctx)->n; }

static int xm_apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  xrun *r = x->ctx;
  if (!rank_step(r, state, a)) return XP_SKIP;
  return r->violated ? XP_STOP : XP_STEP;
}

/* No step possible: every rank must have finished its calls. */
static int xm_final(xp_search *x, const void *state, int d) {
  (void)d;
  xrun *r = x->ctx;
  const xstate *s = state;
  for (int k = 0; k < r->n; k++)
    if (s->call[k] < r->calls) {
      r->hung = true;
      snprintf(r->msg, sizeof r->msg, "no step possible but rank %d is in call %d (pc %d)", k,
               s->call[k] + 1, s->pc[k]);
      return XP_STOP;
    }
  return XP_STEP;
}

/* Explores n ranks x calls; aborted: task 2 after rank 0 published call 1
 * of the aborted task 1. True when no violation and no hang. */
static bool explore(const xvariant *v, int n, int calls, bool aborted, bool expect_ok) {
  xrun x = {.v = v, .n = n, .calls = calls, .epoch = 1};
  xstate s;
  memset(&s, 0, sizeof s);
  if (aborted) {
    int sl = slot_of(&x, 1);
    s.gen[0][sl] = gen_of(&x, 1);
    s.data[0][sl] = (uint16_t)(1 << 8 | 1);
    x.epoch = 2;
  }
  const xp_model m = {.state_size = sizeof(xstate),
                      .key_size = sizeof(xstate),
                      .max_depth = XPATH,
                      .nact = xm_nact,
                      .apply = xm_apply,
                      .on_final = xm_final};
  xp_search xs;
  int why = xp_run(&xs, &m, &x, &s);
  x.path = xs.path;
  x.depth = xs.stop_depth;
  if (why == XP_DEPTH) {
    x.hung = true;
    snprintf(x.msg, sizeof x.msg, "a path longer than %d steps", XPATH);
  }
  bool ok = !x.violated && !x.hung;
  fprintf(stderr, "%s, %d ranks x %d calls%s: %zu states, %s%s%s\n", v->name, n, calls,
          aborted ? " after an aborted task" : "", (size_t)xs.states,
          ok           ? "proven"
          : x.violated ? "VIOLATION: "
                       : "HANG: ",
          ok ? "" : x.msg, ok == expect_ok ? "" : "  <-- unexpected");
  if (!ok) print_path(&x);
  xp_free(&xs);
  return ok;
}

static void test_real_is_proven(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++) {
    assert_true(explore(&V_REAL, n, XCALLS, false, true));
    assert_true(explore(&V_REAL, n, 2, true, true));
  }
}

static void test_bad_variants_are_caught(void **state) {
  (void)state;
  assert_false(explore(&V_ONE_SLOT, 2, 2, false, false));
  assert_false(explore(&V_ONE_SLOT, 3, 2, false, false));
  assert_false(explore(&V_NO_EPOCH, 2, 1, true, false));
  assert_false(explore(&V_NO_EPOCH, 3, 1, true, false));
  assert_false(explore(&V_ROOT_ONLY, 2, 3, false, false));
  assert_false(explore(&V_ROOT_ONLY, 3, 3, false, false));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_is_proven),
      cmocka_unit_test(test_bad_variants_are_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
