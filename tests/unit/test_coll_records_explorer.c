/* test_coll_records_explorer.c — proves the one-way broadcasts through the
 * MPI backend's records (src/comm/mpi_coll.c, "one-way exchanges"; coll.c,
 * native_exchange and records_settle) over every interleaving of 2 and 3
 * ranks making back-to-back calls on one window buffer, with the batch of
 * acknowledged calls (the backend's settle_run) as a small parameter. It shows that
 * the same explorer catches the broken variants: no acknowledgements (two
 * ranks that each take themselves for a broadcast's root both return
 * PTO_OK), a task's end that does not compare the ranks' counts of calls
 * (a root's broadcast that a rank never made passes), and one that does
 * but does not mark its acknowledgement as the end's (a rank that made
 * fewer calls takes a peer's batch for its end and passes, the peer waits
 * until the deadline).
 *
 * Model. Rank r's view of call s is a code: a whole exchange (W) or a
 * one-way broadcast with root q (bq), and its arguments (' marks other
 * ones). Records go over a FIFO per ordered pair of ranks (MPI's
 * non-overtaking order on one communicator and tag), acknowledgements over
 * another (their own tag). Call s of rank r, in two steps:
 *   START: when s is a multiple of RUN, the settle: the acknowledgement in
 *     flight (of calls s - 2 RUN .. s - RUN - 1) is waited for (the step
 *     is enabled only once every peer's is there), and every call it
 *     covers compared with mine; then, when calls s - RUN .. s - 1 had a
 *     one-way one of mine, mine of them is sent to every peer. Then the
 *     call's records: a whole exchange sends mine to every peer, a one-way
 *     root to every peer (and its call is done), another rank of a one-way
 *     call sends none.
 *   RECEIVE (enabled once every record it needs is there): a whole
 *     exchange takes one from every peer, another rank of a one-way call
 *     the root's only; each must be of my call s, with my code.
 * After its last call a rank finishes the acknowledgement in flight, then
 * sends one of the calls since the last batch, marked as the end's, with
 * its count of calls, when they had a one-way one, and waits for every
 * peer's, comparing the counts too (an end's acknowledgement against a
 * batch's, or a batch's against the end's, is a peer that made fewer or
 * more calls). A rank that finds a difference stops there, and so does
 * every rank (the node cancels the run). Properties: where every rank
 * sees the same calls, every final state has every rank done and no
 * difference found; where they differ, no final state has every rank done
 * without one found (no silent success), and a state where no rank can
 * move (the deadline's naming) only where the scenario allows it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "explore.h"

#define XR    3  /* ranks */
#define XC    8  /* calls */
#define XQ    10 /* messages in flight per ordered pair */
#define XPATH 400
#define FINAL 0x80 /* an acknowledgement of the task's end, with the count */

enum { PC_START, PC_RECV, PC_END_ACK, PC_END_WAIT, PC_DONE };

typedef struct rstate {
  uint8_t call[XR];  /* calls finished */
  uint8_t pc[XR];    /* PC_* */
  uint8_t open[XR];  /* first call of my acknowledgement in flight, + 1; 0: none */
  uint8_t found[XR]; /* r found a difference */
  uint8_t rn[XR][XR];
  uint8_t an[XR][XR];
  uint8_t rq[XR][XR][XQ][2]; /* records from p to q: {call, code} */
  uint8_t aq[XR][XR][XQ][2]; /* acknowledgements: {first call, last call | FINAL at the end} */
} rstate;

typedef struct xvariant {
  const char *name;
  bool no_ack, no_count, no_mark;
} xvariant;
static const xvariant V_REAL = {"real", false, false, false};
static const xvariant V_NO_ACK = {"no acknowledgements", true, false, false};
static const xvariant V_NO_COUNT = {"no count nor end mark", false, true, false};
static const xvariant V_NO_MARK = {"a count but no end mark", false, false, true};

typedef struct xrun {
  const xvariant *v;
  int n, run;
  int calls[XR];
  uint8_t code[XR][XC]; /* bit 0 one-way, bits 1-2 its root, bit 3 other arguments */
  bool mismatch, deadline_ok;
  bool violated;
  char msg[200];
} xrun;

static bool is_oneway(uint8_t c) { return c & 1; }
static int root_of(uint8_t c) { return c >> 1 & 3; }

static void push(uint8_t q[XQ][2], uint8_t *len, int a, int b) {
  if (*len == XQ) {
    fprintf(stderr, "test_coll_records_explorer: a channel is full (raise XQ)\n");
    abort();
  }
  q[*len][0] = (uint8_t)a;
  q[*len][1] = (uint8_t)b;
  (*len)++;
}

static void pop(uint8_t q[XQ][2], uint8_t *len, uint8_t out[2]) {
  out[0] = q[0][0];
  out[1] = q[0][1];
  memmove(q[0], q[1], (size_t)(*len - 1) * 2);
  (*len)--;
  q[*len][0] = q[*len][1] = 0; /* states are compared bytewise */
}

/* My first one-way call up to call `last`, 0 if none: my acknowledgements
 * begin there at the earliest (the calls before it are not logged). */
static int first_oneway(const xrun *x, int r, int last) {
  for (int t = 1; t <= last && t <= x->calls[r]; t++)
    if (is_oneway(x->code[r][t - 1])) return t;
  return 0;
}

/* Had my calls first .. last (1-based, 0 skipped) a one-way one? */
static bool oneway_among(const xrun *x, int r, int first, int last) {
  for (int t = first < 1 ? 1 : first; t <= last && t <= x->calls[r]; t++)
    if (is_oneway(x->code[r][t - 1])) return true;
  return false;
}

static bool acks_there(const xrun *x, const rstate *s, int r) {
  for (int p = 0; p < x->n; p++)
    if (p != r && !s->an[p][r]) return false;
  return true;
}

/* Takes every peer's acknowledgement and compares it with mine (first ..
 * last); at the task's end its count too. False: a difference found. */
static bool ack_check(const xrun *x, rstate *s, int r, int first, int last, bool end) {
  /* a round's first: the batch's, or my first one-way call, later */
  bool ok = true;
  for (int p = 0; p < x->n; p++) {
    if (p == r) continue;
    uint8_t a[2];
    pop(s->aq[p][r], &s->an[p][r], a);
    /* of the same calls; at the end, of as many (a peer's end against my batch, or its batch
     * against my end: it made fewer, or more) */
    bool final = a[1] & FINAL;
    a[1] &= (uint8_t)~FINAL;
    if (a[0] != first) ok = false;
    if (!x->v->no_count && ((final != end && !x->v->no_mark) || (end && a[1] != last))) ok = false;
    int upto = a[1] < last ? a[1] : last;
    for (int t = first < 1 ? 1 : first; ok && t <= upto; t++)
      ok = x->code[p][t - 1] == x->code[r][t - 1];
  }
  return ok;
}

static void post_ack(const xrun *x, rstate *s, int r, int first, int last, bool end) {
  for (int p = 0; p < x->n; p++)
    if (p != r) push(s->aq[r][p], &s->an[r][p], first, last | (end ? FINAL : 0));
  s->open[r] = (uint8_t)(first + 1);
}

/* Finishes my acknowledgement in flight, if any: -1 while a peer's is
 * not there, 0 when one differs (found), 1 when done. */
static int finish_round(const xrun *x, rstate *s, int r) {
  if (!s->open[r]) return 1;
  if (!acks_there(x, s, r)) return -1;
  int f = s->open[r] - 1;
  s->open[r] = 0;
  if (ack_check(x, s, r, f, f / x->run * x->run + x->run - 1, false)) return 1;
  s->found[r] = 1;
  return 0;
}

/* One step of rank r; false when it cannot move. */
static bool rank_step(xrun *x, rstate *s, int r) {
  for (int k = 0; k < x->n; k++)
    if (s->found[k]) return false; /* the run is cancelled */
  int n = x->n, R = x->run, c = s->call[r], sn = c + 1;
  switch (s->pc[r]) {
  case PC_START: {
    if (c == x->calls[r]) {
      s->pc[r] = PC_END_ACK;
      return true;
    }
    uint8_t mine = x->code[r][c];
    if (sn % R == 0 && !x->v->no_ack) {
      int f = finish_round(x, s, r);
      if (f <= 0) return f == 0;
      int from = first_oneway(x, r, sn - 1), first = sn - R > from ? sn - R : from;
      if (from && oneway_among(x, r, first, sn - 1)) post_ack(x, s, r, first, sn - 1, false);
    }
    bool send = !is_oneway(mine) || root_of(mine) == r;
    for (int p = 0; send && p < n; p++)
      if (p != r) push(s->rq[r][p], &s->rn[r][p], sn, mine);
    if (is_oneway(mine) && root_of(mine) == r)
      s->call[r]++; /* the root's call is done */
    else
      s->pc[r] = PC_RECV;
    return true;
  }
  case PC_RECV: {
    uint8_t mine = x->code[r][c];
    int only = is_oneway(mine) ? root_of(mine) : -1;
    for (int p = 0; p < n; p++)
      if (p != r && (only < 0 || p == only) && !s->rn[p][r]) return false;
    for (int p = 0; p < n; p++) {
      if (p == r || (only >= 0 && p != only)) continue;
      uint8_t m[2];
      pop(s->rq[p][r], &s->rn[p][r], m);
      if (m[0] != sn || m[1] != mine) s->found[r] = 1;
    }
    if (!s->found[r]) {
      s->call[r]++;
      s->pc[r] = PC_START;
    }
    return true;
  }
  case PC_END_ACK: {
    int last = x->calls[r], from = first_oneway(x, r, last), first = last / R * R;
    if (first < from) first = from;
    int f = x->v->no_ack ? 1 : finish_round(x, s, r);
    if (f <= 0) return f == 0;
    if (!x->v->no_ack && from && oneway_among(x, r, first, last)) {
      post_ack(x, s, r, first, last, true);
      s->pc[r] = PC_END_WAIT;
    } else {
      s->pc[r] = PC_DONE;
    }
    return true;
  }
  case PC_END_WAIT: {
    if (!acks_there(x, s, r)) return false;
    int last = x->calls[r], first = s->open[r] - 1;
    s->open[r] = 0;
    if (!ack_check(x, s, r, first, last, true)) s->found[r] = 1;
    s->pc[r] = PC_DONE;
    return true;
  }
  default: return false;
  }
}

static int xm_nact(xp_search *x) { return ((xrun *)x->ctx)->n; }

static int xm_apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  return rank_step(x->ctx, state, a) ? XP_STEP : XP_SKIP;
}

static int xm_final(xp_search *x, const void *state, int d) {
  (void)d;
  xrun *r = x->ctx;
  const rstate *s = state;
  bool found = false, all_done = true;
  for (int k = 0; k < r->n; k++) {
    found = found || s->found[k];
    all_done = all_done && s->pc[k] == PC_DONE;
  }
  const char *bad = NULL;
  if (!r->mismatch && found)
    bad = "a difference found where the calls agree";
  else if (!r->mismatch && !all_done)
    bad = "no rank can move (a hang)";
  else if (r->mismatch && all_done && !found)
    bad = "every rank done, the difference not found";
  else if (r->mismatch && !found && !r->deadline_ok)
    bad = "no rank can move (named only at the deadline)";
  if (!bad) return XP_STEP;
  r->violated = true;
  snprintf(r->msg, sizeof r->msg, "%s", bad);
  return XP_STOP;
}

/* Rank r's calls from "b0b1W b0'": bq a one-way broadcast of root q, W a
 * whole exchange, ' other arguments; ranks separated by '|' (one view for
 * every rank when there is none). */
static bool explore(const xvariant *v, int n, int run, const char *views, bool deadline_ok,
                    bool expect_ok) {
  xrun x = {.v = v, .n = n, .run = run, .deadline_ok = deadline_ok};
  const char *q = views;
  for (int r = 0; r < n; r++) {
    if (r && !strchr(views, '|')) q = views;
    int c = 0;
    for (; *q && *q != '|'; q++) {
      if (*q == 'W' || *q == 'b') {
        assert_true(c < XC);
        x.code[r][c++] = *q == 'W' ? 0 : (uint8_t)(1 | (q[1] - '0') << 1);
        if (*q == 'b') q++;
      } else if (*q == '\'') {
        x.code[r][c - 1] |= 8;
      }
    }
    x.calls[r] = c;
    if (*q == '|') q++;
  }
  for (int r = 1; r < n; r++)
    x.mismatch = x.mismatch || x.calls[r] != x.calls[0] ||
                 memcmp(x.code[r], x.code[0], (size_t)x.calls[0]) != 0;
  rstate s;
  memset(&s, 0, sizeof s);
  const xp_model m = {.state_size = sizeof s,
                      .key_size = sizeof s,
                      .max_depth = XPATH,
                      .nact = xm_nact,
                      .apply = xm_apply,
                      .on_final = xm_final};
  xp_search xs;
  int why = xp_run(&xs, &m, &x, &s);
  bool ok = why == XP_DONE;
  fprintf(stderr, "%s, %d ranks, run %d, calls %s: %ld states, %s%s%s\n", v->name, n, run, views,
          xs.states, ok ? "proven" : "VIOLATION: ",
          ok                ? ""
          : why == XP_DEPTH ? "a path too long"
                            : x.msg,
          ok == expect_ok ? "" : "  <-- unexpected");
  if (!ok && ok != expect_ok) {
    fprintf(stderr, "  path:");
    for (int d = 0; d < xs.stop_depth; d++)
      fprintf(stderr, " r%d", xs.path[d]);
    fprintf(stderr, "\n");
  }
  xp_free(&xs);
  return ok;
}

/* Every rank sees the same calls: done, nothing found, no hang. */
static void test_agreeing_calls_are_proven(void **state) {
  (void)state;
  static const char *const two[] = {"b0b0b0b0b0", "b0Wb1Wb0", "WWb1b1W", "b1b0b1b0b1",
                                    "Wb0W",       "b1",       "WWWb0b0"};
  for (size_t i = 0; i < sizeof two / sizeof *two; i++)
    for (int run = 1; run <= 2; run++)
      assert_true(explore(&V_REAL, 2, run, two[i], false, true));
  assert_true(explore(&V_REAL, 2, 4, "b0b0b0b0b0b0b0", false, true));
  static const char *const three[] = {"b0b1b2b0", "Wb0b2W", "b2b2b2"};
  for (size_t i = 0; i < sizeof three / sizeof *three; i++)
    assert_true(explore(&V_REAL, 3, 2, three[i], false, true));
}

/* Calls that differ are found by some rank, never passed silently. */
static void test_differences_are_found(void **state) {
  (void)state;
  static const char *const two[] = {
      "b0|b1",           /* each rank the root: found by the acknowledgements */
      "b0b0b0|b0b0",     /* a broadcast rank 1 never makes: the counts */
      "b0|b0'",          /* other arguments: rank 1 compares with the root's */
      "b0W|b1W",         /* two roots, then a whole exchange */
      "Wb0|Wb1b0",       /* two roots at call 2, and a call more */
      "b0|W",            /* a one-way call against a whole exchange */
      "b1b1b0b1|b1b1b1", /* a root's one-way call and a count */
      "WWWb0|WWb0b0",    /* the first one-way call differs (its acknowledgements begin there) */
  };
  for (size_t i = 0; i < sizeof two / sizeof *two; i++)
    for (int run = 1; run <= 2; run++)
      assert_true(explore(&V_REAL, 2, run, two[i], false, true));
  assert_true(explore(&V_REAL, 3, 2, "b0b1|b0b1|b0b2", false, true));
  /* two other ranks that take different ranks for the root, neither of which takes itself for
   * it: rank 2 waits for rank 1's record, which rank 1 never sends; named at the deadline */
  assert_true(explore(&V_REAL, 3, 2, "b0|b0|b1", true, true));
  assert_false(explore(&V_REAL, 3, 2, "b0|b0|b1", false, false));
}

static void test_broken_variants_are_caught(void **state) {
  (void)state;
  assert_false(explore(&V_NO_ACK, 2, 2, "b0|b1", false, false));
  assert_false(explore(&V_NO_COUNT, 2, 2, "b0b0b0|b0b0", false, false));
  /* a peer's end taken for its batch: the rank that made more calls waits for an end that
   * never comes, the other passes (before the end mark) */
  assert_false(explore(&V_NO_MARK, 2, 1, "b0b0b0|b0b0", false, false));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_agreeing_calls_are_proven),
      cmocka_unit_test(test_differences_are_found),
      cmocka_unit_test(test_broken_variants_are_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
