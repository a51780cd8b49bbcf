/* test_coll_table_explorer.c — proves the collectives' call table
 * (src/comm/coll.c, table_exchange, table_finish, coll_settle and
 * coll_exchange on a direct backend; the steps, slot, generation, gate
 * and DONE target from coll_proto.h) over every interleaving of 2 and 3
 * ranks making back-to-back calls on one scratch: small calls (data in
 * the table), one-way broadcasts (the root waits for nobody, a non-root
 * for the root), large calls (data put into the peers' mesh slots) and
 * mixes, on tables of 2 and 3 slots; after an aborted task; and with
 * mismatched arguments, which every rank must name itself: none may end
 * its task without, nor wait for a rank that stopped on it. It shows that the same explorer catches
 * the known-bad variants: one slot where the gate counts two, a generation without the epoch, a
 * gate that does not compare while it waits (its seen never moves on: a hang), no gate (a root
 * overwrites what a peer still reads), no comparison at the task's end (two ranks that both think
 * they are the root end without naming it), a wait that compares
 * nothing meanwhile (a root whose peer stopped on a mismatch of the call
 * before waits for it instead of naming it), a large call that puts
 * without the DONE wait, and one that publishes its generation before its
 * puts.
 *
 * Model of call s of rank r (each step one access to shared memory, or a
 * comparison of what was read). GATE: while not coll_table_may_write (the
 * least seen of every rank), COMPARE one call after my seen that every
 * peer has published (a step; a mismatch fails the rank), else block.
 * Small: WRITE my slot's data and descriptor, PUBLISH its generation (the
 * release store), per peer a WAIT (coll_table_waits) until its slot holds
 * call s (while it waits, COMPARE up to call s - 1), CHECK the descriptors waited for, per peer a
 * READ of its slot's data (it must be call s's of this epoch), FINISH (seen = s, or compare what
 * has come; a one-way root compares at its gate only). Large (number l among the large calls: the
 * SEQ cell): WAIT_DONE until DONE >= coll_done_target(l, n), per peer a PUT of my data into my mesh
 * slot of its scratch, GATE, WRITE, PUBLISH, WAITs and CHECK as a small call, FINISH, per peer a
 * READ of its mesh slot in my scratch, and per peer a NOTIFY of its DONE cell. After the last call:
 * SETTLE, comparing up to it (blocking). The gate's read of the ranks' seen words is one step: they
 * only grow, so reading them one by one only waits longer. Depth-first over every reachable state
 * (hashed); a violation prints its path. */
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
#define XK     3    /* most slots */
#define XCALLS 4    /* most calls per rank */
#define XPATH  4096 /* longest path explored (never reached) */

typedef struct xvariant {
  const char *name;
  bool one_slot;        /* every call in slot 0, while the gate counts the slots */
  bool no_epoch;        /* the generation is the call number alone */
  bool gate_no_compare; /* the gate waits without comparing (its seen stays) */
  bool no_gate;         /* a call writes its slot without the gate */
  bool no_settle;       /* nothing is compared at the task's end */
  bool wait_no_compare; /* a call's wait for its peers compares nothing meanwhile */
  bool no_done_wait;    /* a large call puts without waiting for DONE */
  bool publish_first;   /* a large call publishes before its puts */
} xvariant;
static const xvariant V_REAL = {.name = "real"};
static const xvariant V_ONE_SLOT = {.name = "one slot", .one_slot = true};
static const xvariant V_NO_EPOCH = {.name = "generation without the epoch", .no_epoch = true};
static const xvariant V_GATE_NO_COMPARE = {.name = "gate without comparing",
                                           .gate_no_compare = true};
static const xvariant V_NO_GATE = {.name = "no gate", .no_gate = true};
static const xvariant V_NO_SETTLE = {.name = "no comparison at the end", .no_settle = true};
static const xvariant V_WAIT_NO_COMPARE = {.name = "wait without comparing",
                                           .wait_no_compare = true};
static const xvariant V_NO_DONE = {.name = "no DONE wait", .no_done_wait = true};
static const xvariant V_PUBLISH_FIRST = {.name = "publishes before its puts",
                                         .publish_first = true};

typedef struct xstate {
  uint64_t gen[XR][XK];  /* rank r's slot generations */
  uint16_t data[XR][XK]; /* what its slot's data is of: epoch << 8 | call */
  uint16_t mesh[XR][XR]; /* mesh[r][p]: in r's scratch, written by p; same tags */
  uint8_t desc[XR][XK];  /* its slot's descriptor (xdesc) */
  uint8_t done[XR];      /* r's DONE cell (its value in this task) */
  uint8_t pc[XR];
  uint8_t call[XR];   /* calls finished */
  uint8_t seen[XR];   /* the table's seen (this task's calls) */
  uint8_t failed[XR]; /* named a mismatch */
  uint8_t pad[4];     /* no implicit padding: states are hashed bytewise */
} xstate;
_Static_assert(sizeof(xstate) == 136, "xstate has implicit padding");

/* A mismatch of one rank's one call. */
enum { MM_NONE, MM_ROOT /* it thinks it is the root */, MM_COUNT, MM_KIND /* all-wait */ };
typedef struct xrun {
  const xvariant *v;
  int n, calls, slots;
  unsigned large; /* bit s - 1: call s is large (the same on every rank) */
  unsigned bcast; /* bit s - 1: call s is a one-way broadcast of root 0 */
  int mm, mm_rank, mm_call;
  uint32_t epoch;
  bool violated, hung;
  char msg[256];
  const int *path;
  int depth;
} xrun;

static bool is_large(const xrun *x, int32_t seq) { return x->large >> (seq - 1) & 1; }
static bool mismatched(const xrun *x, int r, int32_t seq, int mm) {
  return x->mm == mm && r == x->mm_rank && seq == x->mm_call;
}
static bool one_way(const xrun *x, int r, int32_t seq) {
  return (x->bcast >> (seq - 1) & 1) && !mismatched(x, r, seq, MM_KIND);
}
static int root_of(const xrun *x, int r, int32_t seq) {
  return mismatched(x, r, seq, MM_ROOT) ? r : 0;
}
/* rank r's descriptor of call seq */
static uint8_t xdesc(const xrun *x, int r, int32_t seq) {
  return (uint8_t)(one_way(x, r, seq) | root_of(x, r, seq) << 1 |
                   mismatched(x, r, seq, MM_COUNT) << 3 | is_large(x, seq) << 4);
}
static int slot_of(const xrun *x, int32_t s) {
  return x->v->one_slot ? 0 : (int)((uint32_t)s % (uint32_t)x->slots);
}
static uint64_t gen_of(const xrun *x, int32_t s) {
  return x->v->no_epoch ? (uint64_t)(uint32_t)s : coll_table_gen(x->epoch, s);
}
static bool published(const xrun *x, const xstate *s, int p, int32_t seq) {
  uint64_t seen = s->gen[p][slot_of(x, seq)];
  if (x->v->no_epoch) seen = (uint32_t)seen;
  return seen == gen_of(x, seq);
}
static bool waits_for(const xrun *x, int r, int32_t seq, int p) {
  return coll_table_waits(one_way(x, r, seq) && !is_large(x, seq), root_of(x, r, seq), r, p);
}

/* The steps of a call: each once, or once per rank p (my own skipped). */
enum {
  OP_WAIT_DONE,
  OP_PUT,
  OP_GATE,
  OP_WRITE,
  OP_PUBLISH,
  OP_WAIT,
  OP_CHECK,
  OP_READ,
  OP_FINISH,
  OP_MESH_READ,
  OP_DONE
};
typedef struct xop {
  int op;
  bool per_rank;
} xop;
static const xop SMALL[] = {{OP_GATE, false},   {OP_WRITE, false}, {OP_PUBLISH, false},
                            {OP_WAIT, true},    {OP_CHECK, false}, {OP_READ, true},
                            {OP_FINISH, false}, {-1, false}};
static const xop LARGE[] = {{OP_WAIT_DONE, false}, {OP_PUT, true},      {OP_GATE, false},
                            {OP_WRITE, false},     {OP_PUBLISH, false}, {OP_WAIT, true},
                            {OP_CHECK, false},     {OP_FINISH, false},  {OP_MESH_READ, true},
                            {OP_DONE, true},       {-1, false}};
static const xop LARGE_PUBLISH_FIRST[] = {
    {OP_WAIT_DONE, false}, {OP_GATE, false}, {OP_WRITE, false}, {OP_PUBLISH, false},
    {OP_PUT, true},        {OP_WAIT, true},  {OP_CHECK, false}, {OP_FINISH, false},
    {OP_MESH_READ, true},  {OP_DONE, true},  {-1, false}};

/* The step at pc of call seq: its op and rank; false past the call's end. */
static bool op_at(const xrun *x, int32_t seq, int pc, int *op, int *p) {
  const xop *ops = !is_large(x, seq) ? SMALL : x->v->publish_first ? LARGE_PUBLISH_FIRST : LARGE;
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

/* COMPARE (coll.c table_compare, one call): rank r compares call seen + 1
 * when every peer has published it; 1 compared, 0 nothing to compare,
 * -1 a mismatch (the rank fails). */
static int compare_one(const xrun *x, xstate *s, int r, int32_t upto) {
  int32_t j = s->seen[r] + 1;
  if (!coll_table_owes(s->seen[r], upto)) return 0;
  for (int p = 0; p < x->n; p++)
    if (p != r && !published(x, s, p, j)) return 0;
  for (int p = 0; p < x->n; p++)
    if (s->desc[p][slot_of(x, j)] != s->desc[r][slot_of(x, j)]) {
      s->failed[r] = 1;
      return -1;
    }
  s->seen[r]++;
  return 1;
}

/* One step of rank r; false when it cannot move (a wait, or finished). */
static bool rank_step(xrun *x, xstate *s, int r) {
  int n = x->n, op, p;
  if (s->failed[r]) return false;
  if (s->call[r] >= x->calls) { /* SETTLE */
    if (x->v->no_settle) return false;
    return compare_one(x, s, r, x->calls) != 0;
  }
  int32_t seq = s->call[r] + 1;
  int sl = slot_of(x, seq);
  uint16_t tag = (uint16_t)(x->epoch << 8 | (uint32_t)seq);
  op_at(x, seq, s->pc[r], &op, &p);
  switch (op) {
  case OP_WAIT_DONE:
    if (!x->v->no_done_wait && s->done[r] < coll_done_target(large_seq(x, seq), n)) return false;
    break;
  case OP_PUT:
    if (p != r) s->mesh[p][r] = tag;
    break;
  case OP_GATE: {
    if (x->v->no_gate) break;
    int least = s->seen[r];
    for (int q = 0; q < n; q++)
      if (s->seen[q] < least) least = s->seen[q];
    if (coll_table_may_write(seq, least, x->slots)) break;
    if (x->v->gate_no_compare) return false;
    return compare_one(x, s, r, seq - 1) != 0; /* a step, at the same pc */
  }
  case OP_WRITE:
    s->data[r][sl] = tag;
    s->desc[r][sl] = xdesc(x, r, seq);
    break;
  case OP_PUBLISH: s->gen[r][sl] = gen_of(x, seq); break;
  case OP_WAIT:
    if (waits_for(x, r, seq, p) && !published(x, s, p, seq))
      return !x->v->wait_no_compare && compare_one(x, s, r, seq - 1) != 0; /* compares meanwhile */
    break;
  case OP_CHECK:
    for (int q = 0; q < n; q++)
      if (waits_for(x, r, seq, q) && s->desc[q][sl] != xdesc(x, r, seq)) {
        s->failed[r] = 1;
        return true;
      }
    break;
  case OP_READ:
    if (waits_for(x, r, seq, p) && s->data[p][sl] != tag)
      violation(x, r, seq, p, "table slot", s->data[p][sl]);
    break;
  case OP_FINISH:
    if (one_way(x, r, seq) && !is_large(x, seq) && r == root_of(x, r, seq)) break; /* its gate */
    if (!(one_way(x, r, seq) && !is_large(x, seq)) && s->seen[r] == seq - 1) {
      s->seen[r] = (uint8_t)seq;
    } else {
      int c;
      while ((c = compare_one(x, s, r, seq)) > 0) {
      }
      if (c < 0) return true;
    }
    break;
  case OP_MESH_READ:
    if (p != r && s->mesh[r][p] != tag) violation(x, r, seq, p, "mesh slot", s->mesh[r][p]);
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

/* No step possible. Without a mismatch every rank must have finished its
 * calls and compared them all; with one, every rank must have named it
 * (not ended its task, nor wait for a rank that stopped). */
static int xm_final(xp_search *x, const void *state, int d) {
  (void)d;
  xrun *r = x->ctx;
  const xstate *s = state;
  for (int k = 0; k < r->n; k++) {
    bool ended = s->call[k] >= r->calls && (r->v->no_settle || s->seen[k] >= r->calls);
    const char *why = NULL;
    if (r->mm == MM_NONE && !ended) why = "is stuck";
    if (r->mm == MM_NONE && s->failed[k]) why = "failed without a mismatch";
    if (r->mm != MM_NONE && ended && !s->failed[k])
      why = "ended its task without naming the mismatch";
    if (r->mm != MM_NONE && !ended && !s->failed[k]) why = "waits, and has not named the mismatch";
    if (why) {
      r->hung = true;
      snprintf(r->msg, sizeof r->msg, "no step possible but rank %d %s (call %d, pc %d, seen %d)",
               k, why, s->call[k] + 1, s->pc[k], s->seen[k]);
      return XP_STOP;
    }
  }
  return XP_STEP;
}

/* A scenario: n ranks x calls on a table of `slots`, the large calls and
 * the one-way broadcasts by their bits, a mismatch (mm of rank mm_rank's
 * call mm_call); aborted: task 2 after rank 0 published call 1 of the
 * aborted task 1. */
typedef struct xcase {
  int n, calls, slots;
  unsigned large, bcast;
  int mm, mm_rank, mm_call;
  bool aborted;
} xcase;

/* True when no violation and no hang. */
static bool explore(const xvariant *v, xcase c, bool expect_ok) {
  xrun x = {.v = v,
            .n = c.n,
            .calls = c.calls,
            .slots = c.slots ? c.slots : 2,
            .large = c.large,
            .bcast = c.bcast,
            .mm = c.mm,
            .mm_rank = c.mm_rank,
            .mm_call = c.mm_call,
            .epoch = 1};
  xstate s;
  memset(&s, 0, sizeof s);
  if (c.aborted) {
    int sl = slot_of(&x, 1);
    s.gen[0][sl] = gen_of(&x, 1);
    s.data[0][sl] = (uint16_t)(1 << 8 | 1);
    s.desc[0][sl] = xdesc(&x, 0, 1);
    for (int p = 1; p < c.n; p++)
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
  static const char *mms[] = {"", ", rank %d thinks it is the root of call %d",
                              ", rank %d's count differs in call %d",
                              ", rank %d waits for all in call %d"};
  char mm[80] = "";
  snprintf(mm, sizeof mm, mms[c.mm], c.mm_rank, c.mm_call);
  fprintf(stderr,
          "%s, %d ranks x %d calls, %d slots (large %#x, broadcast %#x%s)%s: %zu states, %s%s%s\n",
          v->name, c.n, c.calls, x.slots, c.large, c.bcast, mm,
          c.aborted ? " after an aborted task" : "", (size_t)xs.states,
          ok           ? "proven"
          : x.violated ? "VIOLATION: "
                       : "HANG: ",
          ok ? "" : x.msg, ok == expect_ok ? "" : "  <-- unexpected");
  if (!ok) print_path(&x);
  xp_free(&xs);
  return ok;
}

/* which calls are large: none, all, and two mixes */
static const unsigned MIXES[] = {0x0, 0xf, 0x5, 0x6};

static void test_real_is_proven(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++) {
    for (int m = 0; m < 4; m++)
      assert_true(explore(&V_REAL, (xcase){.n = n, .calls = XCALLS, .large = MIXES[m]}, true));
    assert_true(explore(&V_REAL, (xcase){.n = n, .calls = 2, .aborted = true}, true));
    assert_true(explore(&V_REAL, (xcase){.n = n, .calls = 2, .large = 0x3, .aborted = true}, true));
    /* one-way broadcasts: all, beside small calls, beside large ones; 2 and 3 slots */
    for (int k = 2; k <= XK; k++) {
      assert_true(
          explore(&V_REAL, (xcase){.n = n, .calls = XCALLS, .slots = k, .bcast = 0xf}, true));
      assert_true(
          explore(&V_REAL, (xcase){.n = n, .calls = XCALLS, .slots = k, .bcast = 0x5}, true));
      assert_true(explore(
          &V_REAL, (xcase){.n = n, .calls = XCALLS, .slots = k, .bcast = 0x5, .large = 0x2}, true));
    }
    assert_true(explore(&V_REAL, (xcase){.n = n, .calls = 2, .bcast = 0x3, .aborted = true}, true));
  }
}

/* Mismatches: every rank names it; none ends its task without, none
 * waits for a rank that stopped on it. */
static void test_mismatch_is_named(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++)
    for (int call = 1; call <= 3; call++)
      for (int mm = MM_ROOT; mm <= MM_KIND; mm++)
        for (int r = mm == MM_ROOT; r < n; r++) { /* rank 0 is the root */
          xcase c = {.n = n, .calls = 3, .bcast = 0x7, .mm = mm, .mm_rank = r, .mm_call = call};
          assert_true(explore(&V_REAL, c, true));
          /* broadcasts beside an all-wait call 2 (where a root or an all-wait
           * call is no mismatch) */
          c.bcast = 0x5;
          if (mm == MM_COUNT || call != 2) assert_true(explore(&V_REAL, c, true));
        }
}

static void test_bad_variants_are_caught(void **state) {
  (void)state;
  for (int n = 2; n <= XR; n++) {
    assert_false(explore(&V_ONE_SLOT, (xcase){.n = n, .calls = 2}, false));
    assert_false(explore(&V_NO_EPOCH, (xcase){.n = n, .calls = 1, .aborted = true}, false));
    assert_false(explore(&V_GATE_NO_COMPARE, (xcase){.n = n, .calls = 4, .bcast = 0xf}, false));
    assert_false(explore(&V_NO_GATE, (xcase){.n = n, .calls = 3, .bcast = 0x7}, false));
    assert_false(explore(
        &V_NO_SETTLE,
        (xcase){.n = n, .calls = 1, .bcast = 0x1, .mm = MM_ROOT, .mm_rank = 1, .mm_call = 1},
        false));
    assert_false(explore(
        &V_WAIT_NO_COMPARE,
        (xcase){.n = n, .calls = 2, .bcast = 0x1, .mm = MM_COUNT, .mm_rank = 1, .mm_call = 1},
        false));
    assert_false(explore(&V_NO_DONE, (xcase){.n = n, .calls = 2, .large = 0x3}, false));
    assert_false(explore(&V_PUBLISH_FIRST, (xcase){.n = n, .calls = 1, .large = 0x1}, false));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_is_proven),
      cmocka_unit_test(test_mismatch_is_named),
      cmocka_unit_test(test_bad_variants_are_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
