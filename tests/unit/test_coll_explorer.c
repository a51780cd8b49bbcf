/* test_coll_explorer.c — proves the reuse of a collective's signal cells
 * and slots (src/comm/coll.c, targets from coll_proto.h, cells from
 * signal.h) over every interleaving of 2 and 3 ranks making back-to-back
 * mesh calls on one scratch, and shows that the same explorer catches the
 * known-bad variants: no acknowledgement wait before writing (DONE), no
 * sequence number (every call waits for n-1 arrivals, a "credit reset by
 * convention" that nobody does), and cells without epochs (leftovers of an
 * aborted earlier task).
 *
 * Model of one call s of rank r (the steps of coll_exchange/coll_done):
 * SEQ (read my count, notify myself), WAIT_DONE, then per peer a PUT of my
 * data into my slot of its scratch (one step: the store may land any time
 * before the notify; landing early is the dangerous case) and a NOTIFY of
 * its ARRIVE cell, WAIT_ARRIVE, a READ of each peer's slot in my scratch
 * (one step each), and a NOTIFY of each peer's DONE cell. Cells are the
 * real epoch-tagged words (sig_update / sig_value). A slot holds
 * (epoch, call) of its last write. The epoch scenario starts task 2 after
 * an aborted task 1 in which rank 0 published call 1 to everyone, with one
 * more epoch-1 notify of rank 1's ARRIVE still in flight (it may land at
 * any time). Checks: every READ of call s in epoch e finds (e, s) — the
 * data of the peer's same call, never an earlier or later one — and every
 * state where no step is possible has every rank done (no hang). Depth-first
 * over every reachable state (hashed); a violation prints its path. */
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
#include "comm/signal.h"
#include "explore.h"

#define XR     3    /* most ranks */
#define XCALLS 3    /* most calls per rank */
#define XPATH  4096 /* longest path explored (never reached) */

enum { C_SEQ, C_ARRIVE, C_DONE, C_N };

typedef struct xvariant {
  const char *name;
  bool no_done_wait; /* writes a peer's slot without its acknowledgement */
  bool no_seq;       /* waits ARRIVE >= n-1 every call */
  bool no_epoch;     /* cells are plain counters */
} xvariant;
static const xvariant V_REAL = {"real", false, false, false};
static const xvariant V_NO_DONE = {"no acknowledgement wait", true, false, false};
static const xvariant V_NO_SEQ = {"no sequence number", false, true, false};
static const xvariant V_NO_EPOCH = {"cells without epochs", false, false, true};

typedef struct xstate {
  uint64_t cell[XR][C_N];
  uint16_t slot[XR][XR]; /* slot[r][p]: in rank r's scratch, written by p: epoch << 8 | call */
  uint8_t pc[XR];
  uint8_t call[XR]; /* calls finished */
  int8_t seq[XR];   /* current call's number */
  uint8_t late;     /* 1: the epoch-1 notify is still in flight */
  uint8_t pad[4];   /* no implicit padding: states are hashed and compared bytewise */
} xstate;

typedef struct xrun {
  const xvariant *v;
  int n, calls;
  uint32_t epoch;
  size_t states;
  bool violated, hung;
  char msg[256];
  const int *path; /* the search's, for print_path */
  int depth;
} xrun;

/* ---- cells (the real words, or plain counters for the bad variant) ---- */

static void cell_add(const xrun *x, uint64_t *w, int32_t v, uint32_t epoch) {
  if (x->v->no_epoch) {
    *w = (uint64_t)(uint32_t)((int32_t)(uint32_t)*w + v);
    return;
  }
  _Atomic uint64_t a = *w;
  sig_update(&a, PTO_SIGNAL_ADD, v, epoch);
  *w = atomic_load(&a);
}
static int32_t cell_val(const xrun *x, uint64_t w) {
  return x->v->no_epoch ? (int32_t)(uint32_t)w : sig_value(w, x->epoch);
}

/* ---- the rank program: pc layout of one call ---- */

/* 0 SEQ, 1 WAIT_DONE, 2 + 2i PUT to the i-th peer, 3 + 2i NOTIFY it, ... */
static int pc_wait_arrive(const xrun *x) { return 2 + 2 * (x->n - 1); }
static int pc_read(const xrun *x, int p) { return pc_wait_arrive(x) + 1 + p; }
static int pc_done(const xrun *x, int i) { return pc_read(x, x->n) + i; }
static int pc_end(const xrun *x) { return pc_done(x, x->n - 1); }

/* One step of rank r; false when it cannot move (a wait, or finished). */
static bool rank_step(xrun *x, xstate *s, int r) {
  int n = x->n, pc = s->pc[r];
  if (s->call[r] >= x->calls) return false;
  uint16_t tag = (uint16_t)(x->epoch << 8 | (uint32_t)s->seq[r]);
  if (pc == 0) { /* SEQ: read my count, notify myself +1 */
    s->seq[r] = (int8_t)(cell_val(x, s->cell[r][C_SEQ]) + 1);
    cell_add(x, &s->cell[r][C_SEQ], 1, x->epoch);
  } else if (pc == 1) { /* WAIT_DONE */
    if (!x->v->no_done_wait && cell_val(x, s->cell[r][C_DONE]) < coll_done_target(s->seq[r], n))
      return false;
  } else if (pc < pc_wait_arrive(x)) { /* PUT / NOTIFY ARRIVE to peer i */
    int i = (pc - 2) / 2, p = (r + 1 + i) % n;
    if ((pc - 2) % 2 == 0)
      s->slot[p][r] = tag;
    else
      cell_add(x, &s->cell[p][C_ARRIVE], 1, x->epoch);
  } else if (pc == pc_wait_arrive(x)) {
    int32_t want = x->v->no_seq ? n - 1 : coll_arrive_target(s->seq[r], n);
    if (cell_val(x, s->cell[r][C_ARRIVE]) < want) return false;
  } else if (pc < pc_done(x, 0)) { /* READ slot p */
    int p = pc - pc_read(x, 0);
    if (p != r && s->slot[r][p] != tag && !x->violated) {
      x->violated = true;
      snprintf(x->msg, sizeof x->msg,
               "rank %d, call %d of epoch %u, read rank %d's slot holding epoch %u call %u", r,
               s->seq[r], x->epoch, p, s->slot[r][p] >> 8, s->slot[r][p] & 0xff);
    }
  } else { /* NOTIFY DONE to peer i */
    int i = pc - pc_done(x, 0);
    cell_add(x, &s->cell[(r + 1 + i) % n][C_DONE], 1, x->epoch);
  }
  if (++s->pc[r] == pc_end(x)) {
    s->pc[r] = 0;
    s->call[r]++;
  }
  return true;
}

/* Actor a: ranks 0..n-1, then the late epoch-1 notify. */
static bool act(xrun *x, xstate *s, int a) {
  if (a < x->n) return rank_step(x, s, a);
  if (!s->late) return false;
  s->late = 0;
  cell_add(x, &s->cell[1][C_ARRIVE], 1, 1); /* epoch 1's signal, landing now */
  return true;
}

static void print_path(const xrun *x) {
  fprintf(stderr, "  interleaving (the rank of each step");
  if (x->epoch == 2) fprintf(stderr, "; %d = the late epoch-1 notify", x->n);
  fprintf(stderr, "):");
  for (int i = 0; i < x->depth; i++)
    fprintf(stderr, " %d", x->path[i]);
  fprintf(stderr, "\n");
}

/* ---- search (explore.h) ---- */

static int xm_nact(xp_search *x) { return ((xrun *)x->ctx)->n + 1; }

static int xm_apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  xrun *r = x->ctx;
  if (!act(r, state, a)) return XP_SKIP;
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
               s->seq[k], s->pc[k]);
      return XP_STOP;
    }
  return XP_STEP;
}

/* Explores n ranks x calls; aborted: epoch 2 after the aborted epoch 1.
 * Returns true when no violation and no hang. */
static bool explore(const xvariant *v, int n, int calls, bool aborted, bool expect_ok) {
  xrun x = {.v = v, .n = n, .calls = calls, .epoch = aborted ? 2 : 1};
  xstate s;
  memset(&s, 0, sizeof s);
  if (aborted) { /* epoch 1: rank 0 published call 1 to every peer, then the task was aborted */
    x.epoch = 1;
    s.cell[0][C_SEQ] = 0;
    cell_add(&x, &s.cell[0][C_SEQ], 1, 1);
    for (int p = 1; p < n; p++) {
      s.slot[p][0] = (uint16_t)(1 << 8 | 1);
      cell_add(&x, &s.cell[p][C_ARRIVE], 1, 1);
    }
    s.late = 1;
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
  x.states = (size_t)xs.states;
  x.path = xs.path;
  x.depth = xs.stop_depth;
  if (why == XP_DEPTH) {
    x.hung = true;
    snprintf(x.msg, sizeof x.msg, "a path longer than %d steps", XPATH);
  }
  bool ok = !x.violated && !x.hung;
  fprintf(stderr, "%s, %d ranks x %d calls%s: %zu states, %s%s%s\n", v->name, n, calls,
          aborted ? " after an aborted task" : "", x.states,
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
  assert_false(explore(&V_NO_DONE, 2, 2, false, false));
  assert_false(explore(&V_NO_DONE, 3, 2, false, false));
  assert_false(explore(&V_NO_SEQ, 2, 2, false, false));
  assert_false(explore(&V_NO_SEQ, 3, 2, false, false));
  assert_false(explore(&V_NO_EPOCH, 2, 1, true, false));
  assert_false(explore(&V_NO_EPOCH, 3, 1, true, false));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_is_proven),
      cmocka_unit_test(test_bad_variants_are_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
