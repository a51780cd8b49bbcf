/* test_coll_table_explorer.c — proves the reuse of the collectives' call
 * table (src/comm/coll.c, table_exchange and coll_exchange on a direct
 * backend; generation, slot and DONE target from coll_proto.h) over every
 * interleaving of 2 and 3 ranks making back-to-back calls on one scratch:
 * small calls (data in the table), large ones (data put into the peers'
 * mesh slots, or pulled: copied once into my own mesh slot, which the
 * peers read) and mixes of them. It shows that the same explorer catches
 * the known-bad variants: one slot instead of two (a rank overwrites what
 * a peer still reads), a generation without the epoch (a slot left by an
 * aborted earlier task passes for this task's call), a call that waits
 * for one rank only (a broadcast's root: the root runs two calls ahead of
 * a reader), a large call that puts without the DONE wait, and one that
 * publishes its generation before its puts.
 *
 * Model of call s of rank r (each step one access to shared memory).
 * Small: WRITE my slot's data (tagged (epoch, s)), PUBLISH its generation
 * (the release store: what I stored before is visible to whoever sees
 * it), then per peer p a WAIT until p's slot holds the generation of call
 * s, then per peer a READ of its slot's data, which must be call s's of
 * this epoch. Large (number l among the large calls: the SEQ cell):
 * WAIT_DONE until DONE >= coll_done_target(l, n), per peer a PUT of my
 * data into my mesh slot of its scratch, then WRITE (the descriptor),
 * PUBLISH and the WAITs as a small call, per peer a READ of its mesh slot
 * in my scratch, and per peer a NOTIFY of its DONE cell. A pulled large
 * call makes one OWN write of my data into my own mesh slot in place of
 * the PUTs, and READs each peer's own mesh slot in its scratch. Every state where
 * no step is possible must have every rank done (no hang). The aborted
 * scenario starts task 2 with rank 0's slot holding its call 1 of the
 * aborted task 1 (cells read 0 in a new task: signal.h). Depth-first over
 * every reachable state (hashed); a violation prints its path. */
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
  bool one_slot;      /* every call in slot 0 */
  bool no_epoch;      /* the generation is the call number alone */
  bool root_only;     /* every rank waits for (and reads) rank 0 only */
  bool no_done_wait;  /* a large call puts without waiting for DONE */
  bool publish_first; /* a large call publishes before its puts */
} xvariant;
static const xvariant V_REAL = {.name = "real"};
static const xvariant V_ONE_SLOT = {.name = "one slot", .one_slot = true};
static const xvariant V_NO_EPOCH = {.name = "generation without the epoch", .no_epoch = true};
static const xvariant V_ROOT_ONLY = {.name = "waits for the root only", .root_only = true};
static const xvariant V_NO_DONE = {.name = "no DONE wait", .no_done_wait = true};
static const xvariant V_PUBLISH_FIRST = {.name = "publishes before its puts",
                                         .publish_first = true};

typedef struct xstate {
  uint64_t gen[XR][2];   /* rank r's slot generations */
  uint16_t data[XR][2];  /* what its slot's data is of: epoch << 8 | call */
  uint16_t mesh[XR][XR]; /* mesh[r][p]: in r's scratch, written by p; same tags */
  uint8_t done[XR];      /* r's DONE cell (its value in this task) */
  uint8_t pc[XR];
  uint8_t call[XR]; /* calls finished */
  uint8_t pad[1];   /* no implicit padding: states are hashed bytewise */
} xstate;
_Static_assert(sizeof(xstate) == 88, "xstate has implicit padding");

typedef struct xrun {
  const xvariant *v;
  int n, calls;
  unsigned large; /* bit s - 1: call s is large (the same on every rank) */
  unsigned pull;  /* bit s - 1: large call s is pulled */
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

/* The steps of a call: each once, or once per rank p (my own skipped). */
enum { OP_WAIT_DONE, OP_PUT, OP_OWN, OP_WRITE, OP_PUBLISH, OP_WAIT, OP_READ, OP_DONE };
typedef struct xop {
  int op;
  bool per_rank;
} xop;
static const xop SMALL[] = {
    {OP_WRITE, false}, {OP_PUBLISH, false}, {OP_WAIT, true}, {OP_READ, true}, {-1, false}};
static const xop LARGE[] = {{OP_WAIT_DONE, false}, {OP_PUT, true},  {OP_WRITE, false},
                            {OP_PUBLISH, false},   {OP_WAIT, true}, {OP_READ, true},
                            {OP_DONE, true},       {-1, false}};
static const xop LARGE_PUBLISH_FIRST[] = {
    {OP_WAIT_DONE, false}, {OP_WRITE, false}, {OP_PUBLISH, false}, {OP_PUT, true},
    {OP_WAIT, true},       {OP_READ, true},   {OP_DONE, true},     {-1, false}};
static const xop PULLED[] = {{OP_WAIT_DONE, false}, {OP_OWN, false}, {OP_WRITE, false},
                             {OP_PUBLISH, false},   {OP_WAIT, true}, {OP_READ, true},
                             {OP_DONE, true},       {-1, false}};
static const xop PULLED_PUBLISH_FIRST[] = {
    {OP_WAIT_DONE, false}, {OP_WRITE, false}, {OP_PUBLISH, false}, {OP_OWN, false},
    {OP_WAIT, true},       {OP_READ, true},   {OP_DONE, true},     {-1, false}};

static bool is_large(const xrun *x, int32_t seq) { return x->large >> (seq - 1) & 1; }
static bool is_pulled(const xrun *x, int32_t seq) {
  return is_large(x, seq) && (x->pull >> (seq - 1) & 1);
}

/* The step at pc of call seq: its op and rank; false past the call's end. */
static bool op_at(const xrun *x, int32_t seq, int pc, int *op, int *p) {
  bool first = x->v->publish_first;
  const xop *ops = !is_large(x, seq)   ? SMALL
                   : is_pulled(x, seq) ? (first ? PULLED_PUBLISH_FIRST : PULLED)
                   : first             ? LARGE_PUBLISH_FIRST
                                       : LARGE;
  for (int i = 0; ops[i].op >= 0; i++) {
    int c = ops[i].per_rank ? x->n : 1;
    if (pc < c) {
      *op = ops[i].op;
      *p = pc;
      return true;
    }
    pc -= c;
  }
  return false;
}

/* The large calls among calls 1..seq: the SEQ cell's count. */
static int32_t large_seq(const xrun *x, int32_t seq) {
  return __builtin_popcount(x->large & ((1u << seq) - 1));
}

static void violation(xrun *x, int r, int32_t seq, int p, const char *where, uint16_t held) {
  if (x->violated) return;
  x->violated = true;
  snprintf(x->msg, sizeof x->msg,
           "rank %d, call %d of epoch %u, read rank %d's %s holding epoch %u call %u", r, seq,
           x->epoch, p, where, held >> 8, held & 0xff);
}

/* One step of rank r; false when it cannot move (a wait, or finished). */
static bool rank_step(xrun *x, xstate *s, int r) {
  int n = x->n, op = 0, p = 0; /* set by op_at (initialised for -O3's flow analysis) */
  if (s->call[r] >= x->calls) return false;
  int32_t seq = s->call[r] + 1;
  int sl = slot_of(x, seq);
  uint16_t tag = (uint16_t)(x->epoch << 8 | (uint32_t)seq);
  uint64_t want = gen_of(x, seq);
  op_at(x, seq, s->pc[r], &op, &p);
  switch (op) {
  case OP_WAIT_DONE:
    if (!x->v->no_done_wait && s->done[r] < coll_done_target(large_seq(x, seq), n)) return false;
    break;
  case OP_PUT:
    if (p != r) s->mesh[p][r] = tag;
    break;
  case OP_OWN: s->mesh[r][r] = tag; break;
  case OP_WRITE: s->data[r][sl] = tag; break;
  case OP_PUBLISH: s->gen[r][sl] = want; break;
  case OP_WAIT: {
    uint64_t seen = s->gen[p][sl];
    if (x->v->no_epoch) seen = (uint32_t)seen;
    if (waits_for(x, r, p) && seen != want) return false;
    break;
  }
  case OP_READ:
    if (!waits_for(x, r, p)) break;
    if (is_pulled(x, seq) && s->mesh[p][p] != tag)
      violation(x, r, seq, p, "own mesh slot", s->mesh[p][p]);
    if (is_large(x, seq) && !is_pulled(x, seq) && s->mesh[r][p] != tag)
      violation(x, r, seq, p, "mesh slot", s->mesh[r][p]);
    if (!is_large(x, seq) && s->data[p][sl] != tag)
      violation(x, r, seq, p, "table slot", s->data[p][sl]);
    break;
  case OP_DONE:
    if (p != r) s->done[p]++;
    break;
  }
  int nop, np;
  if (!op_at(x, seq, ++s->pc[r], &nop, &np)) {
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

/* Explores n ranks x calls, the large ones by the bits of `large`;
 * aborted: task 2 after rank 0 published call 1 of the aborted task 1.
 * True when no violation and no hang. */
static bool explore(const xvariant *v, int n, int calls, unsigned large, unsigned pull,
                    bool aborted, bool expect_ok) {
  xrun x = {.v = v, .n = n, .calls = calls, .large = large, .pull = pull, .epoch = 1};
  xstate s;
  memset(&s, 0, sizeof s);
  if (aborted) {
    int sl = slot_of(&x, 1);
    s.gen[0][sl] = gen_of(&x, 1);
    s.data[0][sl] = (uint16_t)(1 << 8 | 1);
    for (int p = 0; p < n; p++) /* pushed to each peer, or pulled from its own */
      s.mesh[p][0] = (uint16_t)(1 << 8 | 1);
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
  fprintf(stderr, "%s, %d ranks x %d calls (large: %#x, pulled: %#x)%s: %zu states, %s%s%s\n",
          v->name, n, calls, large, pull & large, aborted ? " after an aborted task" : "",
          (size_t)xs.states,
          ok           ? "proven"
          : x.violated ? "VIOLATION: "
                       : "HANG: ",
          ok ? "" : x.msg, ok == expect_ok ? "" : "  <-- unexpected");
  if (!ok) print_path(&x);
  xp_free(&xs);
  return ok;
}

/* which calls are large: none, all, and two mixes; and which large ones
 * are pulled: none, all, and a mix with pushed ones */
static const unsigned MIXES[] = {0x0, 0xf, 0x5, 0x6};
static const unsigned PULLS[] = {0x0, 0xf, 0x3, 0xc};

static void test_real_is_proven(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++) {
    for (int m = 0; m < 4; m++)
      for (int p = 0; p < 4; p++)
        if (p == 0 || MIXES[m])
          assert_true(explore(&V_REAL, n, XCALLS, MIXES[m], PULLS[p], false, true));
    assert_true(explore(&V_REAL, n, 2, 0x0, 0x0, true, true));
    assert_true(explore(&V_REAL, n, 2, 0x3, 0x0, true, true));
    assert_true(explore(&V_REAL, n, 2, 0x3, 0x3, true, true));
  }
}

static void test_bad_variants_are_caught(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++) {
    assert_false(explore(&V_ONE_SLOT, n, 2, 0x0, 0x0, false, false));
    assert_false(explore(&V_NO_EPOCH, n, 1, 0x0, 0x0, true, false));
    assert_false(explore(&V_ROOT_ONLY, n, 3, 0x0, 0x0, false, false));
    for (unsigned pull = 0; pull <= 0x3; pull += 0x3) {
      assert_false(explore(&V_NO_DONE, n, 2, 0x3, pull, false, false));
      assert_false(explore(&V_PUBLISH_FIRST, n, 1, 0x1, pull, false, false));
    }
    /* (a pulled call right after a pushed one, or the other way round,
     * needs no DONE wait for its data: the two write different slots) */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_is_proven),
      cmocka_unit_test(test_bad_variants_are_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
