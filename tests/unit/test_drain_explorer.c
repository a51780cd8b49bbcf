/* test_drain_explorer.c — proves the drain protocol (src/chip/drain.c) over
 * every interleaving of its participants' steps for small chips, and shows
 * that the same explorer catches the reference's ABA bug.
 *
 * The explorer drives the real drain_step() of 2, 3 or 4 schedulers from one
 * thread against a fake scheduler environment: per-scheduler idle capacity,
 * a completion actor that frees capacity at any point (so attempt 1 may be
 * short and must retry, and completions arrive during the drain), a request
 * actor, and optionally an actor that ends the run. A depth-first search
 * with state hashing visits every reachable state; a step that changes
 * nothing is a wait and is not an edge. It checks:
 *  - no participant combines state from two attempts: when the coordinator
 *    concludes that the tree acknowledged attempt A, every scheduler's last
 *    acknowledgement is for A; every scheduler stages only in the attempt
 *    it acknowledged; all ranges of a cohort come from one attempt;
 *  - the cohort is staged exactly once, exactly block_num blocks, within
 *    each scheduler's capacity, and launched once, by the coordinator;
 *  - no participant waits forever: every state from which no step changes
 *    anything is a finished one (drains launched, everyone idle), and the
 *    state graph has no cycle (no livelock).
 * Runs N and N+1 (scenarios with `rerun`): the drain state and each
 * scheduler's part outlive a run, and attempts restart from 0 in every
 * run, so a part or a word left by run N could pass for run N+1's. Run N
 * ends at any step (a drain in any phase); once every scheduler's stores
 * have landed, chip.c run_reset's drain_init and drain_part_init, then
 * run N+1 with the same capacities, completions and requests, under the
 * same checks. Caught (test_broken_reset_caught): a reset without
 * drain_part_init (a part still at run N's attempt 1 takes run N+1's
 * attempt 1 as handled: HANG) and one without drain_init (run N's token
 * of attempt 1 passes for run N+1's: MIXED ATTEMPTS).
 * On failure it prints the interleaving that led there. docs/drain.md
 * explains how to read it. A small threaded test then runs the protocol on
 * real threads for the sanitizers' sake. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip/drain.h"
#include "common/clock.h"
#include "common/wait.h"

#include "drain_broken.c" /* the broken variant, test tree only */
#include "explore.h"

/* ------------------------------------------------------------------------ */
/* Scenarios and worlds                                                     */
/* ------------------------------------------------------------------------ */

#define XS     4        /* most schedulers explored */
#define XREQ   2        /* most drains per scenario */
#define XEV    4        /* most completion events */
#define XDEPTH 400      /* a path longer than this is reported (never reached) */
#define XPEND  (XS + 2) /* most shared stores one step makes */
#define XTASK0 100      /* task id of request k is XTASK0 + k */

typedef struct xscenario {
  const char *name;
  int nsched;
  int cap0[XS]; /* idle capacity (blocks of the sync task) at the start */
  int nev;      /* completions, fired in this order, each at any point */
  struct {
    int sched, add;
  } ev[XEV];
  int nreq; /* drains requested one after another */
  struct {
    int sched, block_num;
  } req[XREQ];
  bool end_run; /* an actor may end the run at any point */
  /* after run N ended: chip.c run_reset's drain_init and drain_part_init,
   * then run N+1 with the same capacities, completions and requests */
  bool rerun;
} xscenario;

typedef struct xworld {
  drain_part p[XS];
  /* the fake scheduler environment */
  int cap[XS];
  int next_ev, next_req;
  bool run_over;
  uint8_t run; /* 0: run N; 1: run N+1 (scenario rerun) */
  /* ghost state for the checks */
  bool ev_in_drain;         /* a completion fired while a drain was active */
  uint32_t acked[XS];       /* attempt of each scheduler's last acknowledgement */
  uint64_t staged[XREQ];    /* blocks staged per drain */
  uint32_t stage_att[XREQ]; /* attempt those blocks were staged in */
  int launches[XREQ];
  /* split mode: stores a step made that have not landed yet */
  uint8_t npend[XS];
  uint8_t pend_field[XS][XPEND];
  uint64_t pend_val[XS][XPEND];
  drain_state s; /* last: copies stop after the slots in use */
} xworld;

typedef int (*xstep_fn)(drain_state *, drain_part *, const drain_ops *, void *);
typedef struct xproto {
  const char *name;
  xstep_fn step;
} xproto;
static const xproto X_REAL = {"real", drain_step};
static const xproto X_BROKEN = {"broken (untagged ack)", broken_drain_step};

/* The reset between runs: the real one, without drain_part_init (each
 * scheduler's part as run N left it), without drain_init (the shared
 * state as run N left it). */
enum { XR_REAL = 0, XR_NO_PART_INIT, XR_NO_DRAIN_INIT };

enum { XF_OK = 0, XF_MIXED, XF_STAGE, XF_LAUNCH, XF_HANG, XF_CYCLE, XF_DEPTH };
static const char *const xfail_names[] = {
    "ok", "MIXED ATTEMPTS", "BAD STAGING", "BAD LAUNCH", "HANG", "LIVELOCK", "DEPTH BOUND",
};

typedef struct xctx {
  const xscenario *sc;
  const xproto *pr;
  bool split; /* a step's stores land in a later, separate action */
  int reset;  /* the reset between runs (rerun): XR_REAL or a broken one */
  xworld *w;  /* the world being stepped: what the callbacks see */
  int actor;
  int fail;
  char why[512];
  FILE *log;            /* set while replaying a failing interleaving */
  int path[XDEPTH + 1]; /* the failing interleaving (search) or the schedule (script) */
  int depth;
  xworld *work; /* 3 worlds: a schedule's current and next, and the replay's */
  /* A state's key is the bytes of its world up to the last slot in use (L
   * bytes; padding is zero from the start and never written). */
  size_t L;
  /* figures */
  long states, edges, terminals, term_retry, term_ev_in_drain;
  int max_depth;
  uint64_t max_attempts;
} xctx;

static void xfail(xctx *c, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void xfail(xctx *c, int kind, const char *fmt, ...) {
  if (c->fail) return;
  c->fail = kind;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
}

/* Actors: s0..s(n-1), completion, request, end-run, then (split mode) the
 * landing of each scheduler's pending stores. */
static int x_nact(const xctx *c) { return c->sc->nsched * (c->split ? 2 : 1) + 3; }
static int x_cur_req(const xworld *w) { return w->next_req - 1; }

/* ---- the fake scheduler environment (drain_ops) ---- */

static int x_capacity(void *env, int sched) {
  xctx *c = env;
  if (sched != c->actor) xfail(c, XF_STAGE, "s%d asked for the capacity of s%d", c->actor, sched);
  if (c->log) fprintf(c->log, " cap=%d", c->w->cap[sched]);
  return c->w->cap[sched];
}

static int x_stage(void *env, int sched, int first, int n) {
  xctx *c = env;
  xworld *w = c->w;
  int k = x_cur_req(w);
  if (c->log) fprintf(c->log, " stage[%d,%d)", first, first + n);
  if (sched != c->actor || k < 0) {
    xfail(c, XF_STAGE, "s%d staged for s%d (drain %d)", c->actor, sched, k);
    return -1;
  }
  int need = c->sc->req[k].block_num;
  uint32_t att = w->p[sched].att;
  if (first < 0 || n < 1 || first + n > need) {
    xfail(c, XF_STAGE, "s%d staged blocks [%d,%d) of a %d-block cohort", sched, first, first + n,
          need);
    return -1;
  }
  if (n > w->cap[sched]) {
    xfail(c, XF_STAGE, "s%d staged %d blocks on %d idle slots", sched, n, w->cap[sched]);
    return -1;
  }
  uint64_t bits = ((n == 64 ? ~0ull : (1ull << n) - 1)) << first;
  if (w->staged[k] & bits) {
    xfail(c, XF_STAGE, "s%d staged blocks [%d,%d), some already staged", sched, first, first + n);
    return -1;
  }
  if (w->acked[sched] != att)
    xfail(c, XF_MIXED, "s%d stages in attempt %u but last acknowledged attempt %u", sched, att,
          w->acked[sched]);
  if (w->stage_att[k] && w->stage_att[k] != att)
    xfail(c, XF_MIXED, "one cohort staged in attempts %u and %u", w->stage_att[k], att);
  w->staged[k] |= bits;
  w->stage_att[k] = att;
  w->cap[sched] -= n;
  return 0;
}

static void x_launch(void *env, int64_t task_id) {
  xctx *c = env;
  xworld *w = c->w;
  int k = x_cur_req(w);
  if (c->log) fprintf(c->log, " launch(task %lld)", (long long)task_id);
  if (c->actor != 0 || k < 0 || task_id != XTASK0 + k) {
    xfail(c, XF_LAUNCH, "s%d launched task %lld during drain %d", c->actor, (long long)task_id, k);
    return;
  }
  int need = c->sc->req[k].block_num;
  uint64_t all = need == 64 ? ~0ull : (1ull << need) - 1;
  if (++w->launches[k] != 1)
    xfail(c, XF_LAUNCH, "task %lld launched %d times", (long long)task_id, w->launches[k]);
  else if (w->staged[k] != all)
    xfail(c, XF_LAUNCH, "task %lld launched with %d of %d blocks staged", (long long)task_id,
          __builtin_popcountll(w->staged[k]), need);
  else if (w->stage_att[k] != w->p[0].att)
    xfail(c, XF_MIXED, "launch in attempt %u of a cohort staged in attempt %u", w->p[0].att,
          w->stage_att[k]);
  else if (w->run_over)
    xfail(c, XF_LAUNCH, "launch after the run ended");
}

static bool x_run_ended(void *env) {
  xctx *c = env;
  return c->w->run_over;
}

static const drain_ops x_ops = {x_capacity, x_stage, x_launch, x_run_ended};

/* ---- worlds ---- */

/* Copies a world up to the last slot in use (the rest stays zero). */
static void x_copy(const xctx *c, xworld *dst, const xworld *src) { memcpy(dst, src, c->L); }
static bool x_same(const xctx *c, const xworld *a, const xworld *b) {
  return memcmp(a, b, c->L) == 0;
}

static void x_world_init(const xctx *c, xworld *w) {
  memset(w, 0, sizeof *w);
  drain_init(&w->s, c->sc->nsched);
  for (int i = 0; i < c->sc->nsched; i++) {
    drain_part_init(&w->p[i], i);
    w->cap[i] = c->sc->cap0[i];
  }
}

#define LD(x)    atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

/* Every shared word of drain_state by index, for split mode's store diff. */
#define XW_FIXED 11
static int x_nwords(const xctx *c) { return XW_FIXED + 4 * c->sc->nsched; }

static uint64_t x_word_get(drain_state *s, int f) {
  switch (f) {
  case 0: return LD(s->attempt);
  case 1: return LD(s->ended);
  case 2: return (uint64_t)LD(s->busy);
  case 3: return (uint64_t)LD(s->task_id);
  case 4: return (uint64_t)LD(s->block_num);
  case 5: return (uint64_t)LD(s->requester);
  case 6: return LD(s->first_attempt);
  case 7: return LD(s->go);
  case 8: return LD(s->drains);
  case 9: return LD(s->attempts);
  case 10: return LD(s->max_attempts);
  }
  drain_slot *sl = &s->slot[(f - XW_FIXED) / 4];
  switch ((f - XW_FIXED) % 4) {
  case 0: return LD(sl->token);
  case 1: return LD(sl->hint);
  case 2: return LD(sl->quota);
  default: return LD(sl->staged);
  }
}

static void x_word_set(drain_state *s, int f, uint64_t v) {
  switch (f) {
  case 0: ST(s->attempt, (uint32_t)v); return;
  case 1: ST(s->ended, (uint32_t)v); return;
  case 2: ST(s->busy, (int)v); return;
  case 3: ST(s->task_id, (int64_t)v); return;
  case 4: ST(s->block_num, (int32_t)v); return;
  case 5: ST(s->requester, (int32_t)v); return;
  case 6: ST(s->first_attempt, (uint32_t)v); return;
  case 7: ST(s->go, v); return;
  case 8: ST(s->drains, v); return;
  case 9: ST(s->attempts, v); return;
  case 10: ST(s->max_attempts, v); return;
  }
  drain_slot *sl = &s->slot[(f - XW_FIXED) / 4];
  switch ((f - XW_FIXED) % 4) {
  case 0: ST(sl->token, v); return;
  case 1: ST(sl->hint, v); return;
  case 2: ST(sl->quota, v); return;
  default: ST(sl->staged, v); return;
  }
}

static void x_word_print(FILE *f, int field, uint64_t v) {
  static const char *const fixed[XW_FIXED] = {"attempt",   "ended",     "busy",          "task_id",
                                              "block_num", "requester", "first_attempt", "go",
                                              "drains",    "attempts",  "max_attempts"};
  static const char *const slot[4] = {"token", "hint", "quota", "staged"};
  if (field < XW_FIXED && field != 7)
    fprintf(f, " %s=%lld", fixed[field], (long long)v);
  else if (field == 7)
    fprintf(f, " go=(att %u, %u)", (uint32_t)(v >> 32), (uint32_t)v);
  else
    fprintf(f, " %s[s%d]=(att %u, %u)", slot[(field - XW_FIXED) % 4], (field - XW_FIXED) / 4,
            (uint32_t)(v >> 32), (uint32_t)v);
}

/* ---- one action ---- */

/* Run N ended (failed or cancelled: a drain in any phase, its waits
 * abandoned) and every scheduler has left, its stores landed
 * (test_lifecycle_explorer: none is inside at the reset): chip.c
 * run_reset's part of the drain, then run N+1, whose attempts restart
 * from 0, with the scenario's capacities, completions and requests again.
 * The ghost state restarts with it: run N+1's checks are its own. */
static void x_next_run(xctx *c, xworld *w) {
  const xscenario *sc = c->sc;
  if (c->reset != XR_NO_DRAIN_INIT) drain_init(&w->s, sc->nsched);
  for (int i = 0; i < sc->nsched; i++) {
    if (c->reset != XR_NO_PART_INIT) drain_part_init(&w->p[i], i);
    w->cap[i] = sc->cap0[i];
    w->acked[i] = 0;
  }
  w->next_ev = w->next_req = 0;
  memset(w->staged, 0, sizeof w->staged);
  memset(w->stage_att, 0, sizeof w->stage_att);
  memset(w->launches, 0, sizeof w->launches);
  w->run_over = false;
  w->run = 1;
}

static void x_apply(xctx *c, xworld *w, int a) {
  const xscenario *sc = c->sc;
  int n = sc->nsched;
  c->w = w;
  c->actor = a;
  if (a < n) {
    if (w->npend[a]) return; /* its previous step has not finished (its stores are in flight) */
    drain_part before = w->p[a];
    uint32_t att0 = LD(w->s.attempt);
    uint64_t go0 = LD(w->s.go);
    uint64_t old[XW_FIXED + 4 * XS];
    for (int f = 0; f < x_nwords(c); f++)
      old[f] = x_word_get(&w->s, f);
    if (c->log)
      fprintf(c->log, "s%d   %-7s att %u:", a, drain_phase_name(before.phase), before.att);
    int r = c->pr->step(&w->s, &w->p[a], &x_ops, c);
    drain_part *p = &w->p[a];
    if (c->split) /* hold the step's stores back; they land in a later action */
      for (int f = 0; f < x_nwords(c); f++) {
        uint64_t v = x_word_get(&w->s, f);
        if (v == old[f]) continue;
        if (w->npend[a] == XPEND) {
          xfail(c, XF_STAGE, "one step of s%d stored more than %d shared words", a, XPEND);
          break;
        }
        x_word_set(&w->s, f, old[f]);
        w->pend_field[a][w->npend[a]] = (uint8_t)f;
        w->pend_val[a][w->npend[a]++] = v;
      }
    /* It acknowledged in this step if it entered WAIT_GO/DECIDE from ACK or
     * from another attempt (joining and acknowledging in one step). */
    bool acked = (p->phase == DRAIN_PH_WAIT_GO || p->phase == DRAIN_PH_DECIDE) &&
                 (p->att != before.att || before.phase == DRAIN_PH_ACK);
    if (acked) w->acked[a] = p->att;
    if (acked && a == 0)
      for (int j = 0; j < n; j++)
        if (w->acked[j] != p->att)
          xfail(c, XF_MIXED,
                "the coordinator took attempt %u as acknowledged by all, but s%d last "
                "acknowledged attempt %u",
                p->att, j, w->acked[j]);
    if (c->log) {
      fprintf(c->log, " -> %s att %u, %s", drain_phase_name(p->phase), p->att,
              drain_result_name(r));
      if (LD(w->s.attempt) != att0) fprintf(c->log, "  [attempt %u -> %u]", att0, LD(w->s.attempt));
      if (LD(w->s.go) != go0)
        fprintf(c->log, "  [GO for attempt %u]", (uint32_t)(LD(w->s.go) >> 32));
      if (w->npend[a])
        fprintf(c->log, "  (%d store%s in flight)", w->npend[a], w->npend[a] > 1 ? "s" : "");
    }
  } else if (a >= n + 3) {
    int j = a - n - 3;
    if (!w->npend[j]) return;
    if (c->log) fprintf(c->log, "s%d's stores land:", j);
    for (int q = 0; q < w->npend[j]; q++) {
      x_word_set(&w->s, w->pend_field[j][q], w->pend_val[j][q]);
      if (c->log) x_word_print(c->log, w->pend_field[j][q], w->pend_val[j][q]);
    }
    w->npend[j] = 0;
    memset(w->pend_field[j], 0, sizeof w->pend_field[j]);
    memset(w->pend_val[j], 0, sizeof w->pend_val[j]);
  } else if (a == n) {
    if (w->next_ev < sc->nev) {
      int j = sc->ev[w->next_ev].sched, add = sc->ev[w->next_ev].add;
      w->cap[j] += add;
      w->next_ev++;
      if (LD(w->s.busy)) w->ev_in_drain = true;
      if (c->log) fprintf(c->log, "completion on s%d frees %d (idle now %d)", j, add, w->cap[j]);
    } else if (c->log) {
      fprintf(c->log, "completion: none left");
    }
  } else if (a == n + 1) {
    if (w->next_req < sc->nreq && !w->run_over) {
      int k = w->next_req, j = sc->req[k].sched, bn = sc->req[k].block_num;
      bool ok = drain_request(&w->s, j, XTASK0 + k, bn);
      if (ok) w->next_req++;
      if (c->log)
        fprintf(c->log, "request by s%d: task %d, %d blocks -> %s %u", j, XTASK0 + k, bn,
                ok ? "attempt" : "refused, attempt stays", LD(w->s.attempt));
    } else if (c->log) {
      fprintf(c->log, "request: none left");
    }
  } else {
    bool landed = true;
    for (int j = 0; j < n; j++)
      landed &= !w->npend[j];
    if (sc->end_run && !w->run_over && !w->run) {
      w->run_over = true;
      if (c->log) fprintf(c->log, "the run ends");
    } else if (sc->rerun && w->run_over && !w->run && landed) {
      x_next_run(c, w);
      if (c->log)
        fprintf(c->log, "the chip resets (%s) and run N+1 starts",
                c->reset == XR_NO_PART_INIT    ? "broken: without drain_part_init"
                : c->reset == XR_NO_DRAIN_INIT ? "broken: without drain_init"
                                               : "drain_init, drain_part_init");
    }
  }
}

/* A state where no action changes anything must be a finished one. */
static void x_check_terminal(xctx *c, const xworld *w) {
  const xscenario *sc = c->sc;
  char who[256] = "";
  size_t len = 0;
  bool stuck = false;
  for (int i = 0; i < sc->nsched; i++) {
    len += (size_t)snprintf(who + len, sizeof who - len, " s%d:%s/att%u", i,
                            drain_phase_name(w->p[i].phase), w->p[i].att);
    if (w->p[i].phase != DRAIN_PH_IDLE) stuck = true;
  }
  if (!w->run_over) {
    if (w->next_req != sc->nreq || LD(w->s.busy)) stuck = true;
    for (int k = 0; k < sc->nreq; k++)
      if (w->launches[k] != 1) stuck = true;
  }
  if (stuck)
    xfail(c, XF_HANG,
          "no step can change anything, but the drain%s is not finished: attempt %u, ended %u, "
          "busy %d, requests %d/%d, participants%s",
          w->run ? " of run N+1" : "", LD(w->s.attempt), LD(w->s.ended), LD(w->s.busy), w->next_req,
          sc->nreq, who);
}

/* Prints the failure and replays its interleaving with every step shown. */
static void x_report(xctx *c, FILE *out) {
  fprintf(out, "drain explorer: %s protocol, scenario '%s' (%d schedulers%s): %s: %s\n",
          c->pr->name, c->sc->name, c->sc->nsched, c->split ? ", split stores" : "",
          xfail_names[c->fail], c->why);
  fprintf(out, "interleaving (%d steps):\n", c->depth);
  int fail = c->fail;
  char why[sizeof c->why];
  memcpy(why, c->why, sizeof why);
  xworld *w = &c->work[2];
  x_world_init(c, w);
  c->log = out;
  for (int i = 0; i < c->depth; i++) {
    fprintf(out, "  %3d. ", i + 1);
    x_apply(c, w, c->path[i]);
    fputc('\n', out);
  }
  c->log = NULL;
  fprintf(out, "state: attempt %u, ended %u, busy %d;", LD(w->s.attempt), LD(w->s.ended),
          LD(w->s.busy));
  for (int i = 0; i < c->sc->nsched; i++)
    fprintf(out, " s%d %s/att%u", i, drain_phase_name(w->p[i].phase), w->p[i].att);
  fputc('\n', out);
  c->fail = fail;
  memcpy(c->why, why, sizeof why);
}

/* ---- search (explore.h) ---- */

static int xm_nact(xp_search *x) { return x_nact(x->ctx); }

static int xm_apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  xctx *c = x->ctx;
  x_apply(c, state, a);
  return c->fail ? XP_STOP : XP_STEP;
}

static int xm_final(xp_search *x, const void *state, int d) {
  (void)d;
  xctx *c = x->ctx;
  const xworld *w = state;
  x_check_terminal(c, w);
  if (c->fail) return XP_STOP;
  uint64_t att = LD(w->s.max_attempts);
  if (att > c->max_attempts) c->max_attempts = att;
  if (att >= 2) c->term_retry++;
  if (w->ev_in_drain) c->term_ev_in_drain++;
  return XP_STEP;
}

static void x_setup(xctx *c, const xscenario *sc, const xproto *pr, bool split) {
  memset(c, 0, sizeof *c);
  c->sc = sc;
  c->pr = pr;
  c->split = split;
  c->work = calloc(3, sizeof *c->work);
  assert_non_null(c->work);
  c->L =
      offsetof(xworld, s) + offsetof(drain_state, slot) + (size_t)sc->nsched * sizeof(drain_slot);
}

static void x_teardown(xctx *c) { free(c->work); }

/* Every state reachable from the initial one, depth first (explore.h); a
 * step that changes nothing is a wait; a cycle is a livelock. */
static void x_search(xctx *c) {
  const xp_model m = {.state_size = sizeof(xworld),
                      .key_size = c->L,
                      .copy_size = c->L, /* the slots past nsched stay zero */
                      .max_depth = XDEPTH,
                      .nact = xm_nact,
                      .apply = xm_apply,
                      .on_final = xm_final,
                      .unchanged_is_wait = true,
                      .detect_cycles = true};
  xp_search x;
  x_world_init(c, &c->work[0]);
  int why = xp_run(&x, &m, c, &c->work[0]);
  if (why == XP_CYCLE) xfail(c, XF_CYCLE, "the last step returns to a state already on this path");
  if (why == XP_DEPTH) xfail(c, XF_DEPTH, "a path longer than %d steps", XDEPTH);
  c->depth = x.stop_depth;
  memcpy(c->path, x.path, (size_t)(why ? x.stop_depth : 0) * sizeof *c->path);
  c->states = x.states;
  c->edges = x.edges;
  c->terminals = x.finals;
  c->max_depth = x.deepest;
  xp_free(&x);
}

/* Explores every interleaving; returns the failure kind (XF_OK if none). */
static int x_explore(xctx *c, const xscenario *sc, const xproto *pr, bool split) {
  x_setup(c, sc, pr, split);
  uint64_t t0 = pto_now_ns();
  x_search(c);
  double ms = (double)(pto_now_ns() - t0) / 1e6;
  if (c->fail)
    x_report(c, stdout);
  else
    printf("drain explorer: %s protocol, scenario '%s' (%d schedulers%s): %ld states, %ld "
           "steps, %ld final states (%ld with a retry, %ld with a completion during the "
           "drain), longest path %d, at most %llu attempts, %.0f ms\n",
           pr->name, sc->name, sc->nsched, split ? ", split stores" : "", c->states, c->edges,
           c->terminals, c->term_retry, c->term_ev_in_drain, c->max_depth,
           (unsigned long long)c->max_attempts, ms);
  fflush(stdout);
  return c->fail;
}

/* ---- scripted schedules ---- */

enum { XD_COMPLETE = -1, XD_REQUEST = -2 };
typedef struct xdir {
  int actor;          /* scheduler index, XD_COMPLETE or XD_REQUEST */
  bool until_blocked; /* repeat the actor until its step changes nothing */
} xdir;

/* Runs the directives, then every actor round-robin until nothing changes,
 * and checks the end state like the search does. */
static int x_script(xctx *c, const xscenario *sc, const xproto *pr, const xdir *dir, int ndir) {
  x_setup(c, sc, pr, false);
  int n = sc->nsched;
  xworld *w = &c->work[0], *nw = &c->work[1];
  x_world_init(c, w);
  for (int i = 0; i <= ndir && !c->fail; i++) {
    bool fair = i == ndir; /* after the script: round-robin to the end */
    for (int round = 0; round < XDEPTH && !c->fail; round++) {
      bool changed = false;
      for (int j = 0; j < (fair ? x_nact(c) : 1) && !c->fail; j++) {
        int a = fair ? j : dir[i].actor >= 0 ? dir[i].actor : n - 1 - dir[i].actor;
        x_copy(c, nw, w);
        x_apply(c, nw, a);
        if (!x_same(c, w, nw) || c->fail) {
          if (c->depth >= XDEPTH) {
            xfail(c, XF_DEPTH, "the schedule runs longer than %d steps", XDEPTH);
            break;
          }
          c->path[c->depth++] = a;
          x_copy(c, w, nw);
          changed = true;
        }
      }
      if (!changed || (!fair && !dir[i].until_blocked)) break;
    }
  }
  if (!c->fail) x_check_terminal(c, w);
  if (c->fail) {
    x_report(c, stdout);
  } else {
    printf("drain explorer: %s protocol, schedule '%s' (%d schedulers): finished after %d "
           "steps, %llu attempts\n",
           pr->name, sc->name, n, c->depth, (unsigned long long)LD(w->s.max_attempts));
    c->max_attempts = LD(w->s.max_attempts);
  }
  fflush(stdout);
  return c->fail;
}

/* ------------------------------------------------------------------------ */
/* Scenarios                                                                */
/* ------------------------------------------------------------------------ */

/* Attempt 1 may be short: one cluster's worth is held by running work on
 * some schedulers and comes free at an arbitrary point. */
static const xscenario SC_RETRY2 = {
    .name = "retry",
    .nsched = 2,
    .cap0 = {1, 1},
    .nev = 2,
    .ev = {{0, 1}, {1, 1}},
    .nreq = 1,
    .req = {{1, 4}},
};
static const xscenario SC_RETRY3 = {
    .name = "retry",
    .nsched = 3,
    .cap0 = {2, 1, 1},
    .nev = 2,
    .ev = {{2, 1}, {1, 1}},
    .nreq = 1,
    .req = {{2, 6}},
};
static const xscenario SC_RETRY4 = {
    .name = "retry",
    .nsched = 4,
    .cap0 = {1, 1, 1, 1},
    .nev = 2,
    .ev = {{3, 1}, {1, 1}},
    .nreq = 1,
    .req = {{1, 6}},
};
/* Quotas of zero: the coordinator's prefix fills the cohort early. */
static const xscenario SC_ZERO3 = {
    .name = "zero-quota",
    .nsched = 3,
    .cap0 = {2, 0, 2},
    .nev = 1,
    .ev = {{1, 2}},
    .nreq = 1,
    .req = {{0, 3}},
};
/* Two drains in a row: words of drain 1 must not pass for drain 2's. */
static const xscenario SC_TWO2 = {
    .name = "two-drains",
    .nsched = 2,
    .cap0 = {1, 1},
    .nev = 2,
    .ev = {{0, 1}, {1, 2}},
    .nreq = 2,
    .req = {{1, 3}, {0, 2}},
};
static const xscenario SC_TWO3 = {
    .name = "two-drains",
    .nsched = 3,
    .cap0 = {1, 1, 1},
    .nev = 2,
    .ev = {{2, 1}, {0, 1}},
    .nreq = 2,
    .req = {{2, 3}, {1, 2}},
};
static const xscenario SC_TWO4 = {
    .name = "two-drains",
    .nsched = 4,
    .cap0 = {1, 0, 1, 1},
    .nev = 3,
    .ev = {{1, 2}, {3, 1}, {0, 1}},
    .nreq = 2,
    .req = {{3, 5}, {0, 2}},
};
/* Three completions on three schedulers, any of them during the drain. */
static const xscenario SC_MANY4 = {
    .name = "three-completions",
    .nsched = 4,
    .cap0 = {1, 2, 0, 1},
    .nev = 3,
    .ev = {{2, 2}, {0, 1}, {3, 1}},
    .nreq = 1,
    .req = {{2, 8}},
};
/* The run ends at an arbitrary point: every wait must be abandoned. */
static const xscenario SC_END3 = {
    .name = "run-ends",
    .nsched = 3,
    .cap0 = {2, 1, 1},
    .nev = 2,
    .ev = {{2, 1}, {1, 1}},
    .nreq = 1,
    .req = {{2, 6}},
    .end_run = true,
};
static const xscenario SC_END4 = {
    .name = "run-ends",
    .nsched = 4,
    .cap0 = {1, 1, 1, 1},
    .nev = 2,
    .ev = {{3, 1}, {1, 1}},
    .nreq = 1,
    .req = {{1, 6}},
    .end_run = true,
};
/* Run N ends at an arbitrary point (a drain in any phase), the chip
 * resets, and run N+1 drains again from attempt 0. */
static const xscenario SC_RERUN2 = {
    .name = "run-ends-then-next-run",
    .nsched = 2,
    .cap0 = {1, 1},
    .nev = 1,
    .ev = {{1, 1}},
    .nreq = 1,
    .req = {{1, 3}},
    .end_run = true,
    .rerun = true,
};
static const xscenario SC_RERUN3 = {
    .name = "run-ends-then-next-run",
    .nsched = 3,
    .cap0 = {2, 1, 1},
    .nev = 2,
    .ev = {{2, 1}, {1, 1}},
    .nreq = 1,
    .req = {{2, 6}},
    .end_run = true,
    .rerun = true,
};
/* The reference's ABA setting: 3 schedulers, one of them (s2 here) has a
 * long-running task on one cluster, the cohort needs every cluster. */
static const xscenario SC_ABA = {
    .name = "aba",
    .nsched = 3,
    .cap0 = {2, 2, 1},
    .nev = 1,
    .ev = {{2, 1}},
    .nreq = 1,
    .req = {{2, 6}},
};
/* s1 acknowledges attempt 1 and is then parked until the others have acted
 * on attempt 2. */
static const xdir ABA_SCHEDULE[] = {
    {XD_REQUEST, false},
    {1, true},            /* s1 acknowledges attempt 1 ... and is delayed */
    {2, true},            /* s2 acknowledges attempt 1 */
    {0, true},            /* coordinator: tree complete, capacity short */
    {XD_COMPLETE, false}, /* the long task on s2 finishes */
    {2, true},            /* s2 advertises the freed cluster */
    {0, true},            /* coordinator retries: attempt 2 */
    {2, true},            /* s2 acts on attempt 2 */
    {0, true},            /* coordinator acts on attempt 2 */
                          /* then s1 resumes and everyone runs round-robin */
};

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

static void expect_proven_mode(const xscenario *sc, bool needs_retry, bool needs_ev, bool split) {
  xctx c;
  int f = x_explore(&c, sc, &X_REAL, split);
  assert_int_equal(f, XF_OK);
  assert_true(c.terminals > 0);
  /* the bound keeps a drain at two attempts: a retry happens only when the
   * advertised capacity already suffices */
  assert_true(c.max_attempts <= 2);
  if (needs_retry) assert_true(c.term_retry > 0);
  if (needs_ev) assert_true(c.term_ev_in_drain > 0);
  x_teardown(&c);
}

/* Both granularities: whole steps atomic, and each step's stores landing
 * in a separate action (others act between a step's reads and its stores). */
static void expect_proven(const xscenario *sc, bool needs_retry, bool needs_ev) {
  expect_proven_mode(sc, needs_retry, needs_ev, false);
  expect_proven_mode(sc, needs_retry, needs_ev, true);
}

static void test_explore_2(void **state) {
  (void)state;
  expect_proven(&SC_RETRY2, true, true);
  expect_proven(&SC_TWO2, true, true);
}

static void test_explore_3(void **state) {
  (void)state;
  expect_proven(&SC_RETRY3, true, true);
  expect_proven(&SC_ZERO3, false, true);
  expect_proven(&SC_TWO3, true, true);
  expect_proven(&SC_END3, false, true);
}

static void test_explore_4(void **state) {
  (void)state;
  expect_proven(&SC_RETRY4, true, true);
  expect_proven(&SC_TWO4, true, true);
  expect_proven(&SC_MANY4, true, true);
  expect_proven(&SC_END4, false, true);
}

/* Runs N and N+1 through the real reset; the reset without either half
 * is caught. */
static void test_explore_next_run(void **state) {
  (void)state;
  expect_proven(&SC_RERUN2, false, true);
  expect_proven(&SC_RERUN3, false, true);
}

static void test_broken_reset_caught(void **state) {
  (void)state;
  const int resets[] = {XR_NO_PART_INIT, XR_NO_DRAIN_INIT};
  for (int i = 0; i < 2; i++) {
    xctx c;
    x_setup(&c, &SC_RERUN2, &X_REAL, false);
    c.reset = resets[i];
    x_search(&c);
    assert_true(c.fail != XF_OK);
    x_report(&c, stdout);
    x_teardown(&c);
  }
}

static void test_aba_schedule(void **state) {
  (void)state;
  xctx c;
  int f = x_script(&c, &SC_ABA, &X_REAL, ABA_SCHEDULE,
                   (int)(sizeof ABA_SCHEDULE / sizeof ABA_SCHEDULE[0]));
  assert_int_equal(f, XF_OK);
  assert_int_equal(c.max_attempts, 2); /* attempt 1 was short, attempt 2 launched */
  x_teardown(&c);
}

/* The explorer is itself tested: the pre-fix protocol must be caught. */
static void test_broken_aba_schedule(void **state) {
  (void)state;
  xctx c;
  int f = x_script(&c, &SC_ABA, &X_BROKEN, ABA_SCHEDULE,
                   (int)(sizeof ABA_SCHEDULE / sizeof ABA_SCHEDULE[0]));
  assert_true(f == XF_MIXED || f == XF_HANG);
  assert_true(c.depth > 0);
  x_teardown(&c);
}

static void test_broken_found_by_search(void **state) {
  (void)state;
  const xscenario *scs[] = {&SC_RETRY2, &SC_RETRY3, &SC_RETRY4, &SC_TWO2};
  for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) {
    for (int split = 0; split < 2; split++) {
      xctx c;
      int f = x_explore(&c, scs[i], &X_BROKEN, split);
      assert_true(f == XF_MIXED || f == XF_HANG);
      assert_true(c.depth > 0);
      x_teardown(&c);
    }
  }
}

/* ---- direct API checks ---- */

typedef struct senv {
  int cap[2];
  int staged[2];
  int launched;
  bool ended;
} senv;
static int s_capacity(void *e, int sched) { return ((senv *)e)->cap[sched]; }
static int s_stage(void *e, int sched, int first, int n) {
  (void)first;
  ((senv *)e)->staged[sched] += n;
  ((senv *)e)->cap[sched] -= n;
  return 0;
}
static void s_launch(void *e, int64_t task) {
  (void)task;
  ((senv *)e)->launched++;
}
static bool s_ended(void *e) { return ((senv *)e)->ended; }
static const drain_ops s_ops = {s_capacity, s_stage, s_launch, s_ended};

static void test_api(void **state) {
  (void)state;
  static drain_state s;
  drain_part p0, p1;
  senv e = {{3, 2}, {0, 0}, 0, false};
  drain_init(&s, 2);
  drain_part_init(&p0, 0);
  drain_part_init(&p1, 1);
  assert_false(drain_active(&s));
  assert_int_equal(drain_task(&s), -1);
  assert_int_equal(drain_step(&s, &p0, &s_ops, &e), DRAIN_NONE);
  assert_false(drain_request(&s, 1, 7, 0)); /* width out of range */
  assert_true(drain_request(&s, 1, 7, 4));
  assert_false(drain_request(&s, 0, 8, 1)); /* one drain at a time */
  assert_true(drain_active(&s));
  assert_int_equal(drain_task(&s), 7);
  int staged = 0, launched = 0;
  for (int i = 0; i < 50 && !launched; i++) {
    int r0 = drain_step(&s, &p0, &s_ops, &e), r1 = drain_step(&s, &p1, &s_ops, &e);
    staged += (r0 == DRAIN_STAGED) + (r1 == DRAIN_STAGED);
    launched += r0 == DRAIN_LAUNCHED;
    assert_true(r1 != DRAIN_LAUNCHED); /* only the coordinator launches */
  }
  assert_int_equal(launched, 1);
  assert_int_equal(staged, 2);
  assert_int_equal(e.launched, 1);
  assert_int_equal(e.staged[0] + e.staged[1], 4);
  assert_int_equal(e.staged[0], 3); /* prefix sums: s0 first */
  assert_false(drain_active(&s));
  assert_int_equal(drain_step(&s, &p1, &s_ops, &e), DRAIN_NONE);
  drain_stats st;
  drain_get_stats(&s, &st);
  assert_int_equal(st.drains, 1);
  assert_int_equal(st.attempts, 1);
  assert_int_equal(st.max_attempts, 1);

  /* a short drain abandoned when the run ends */
  assert_true(drain_request(&s, 0, 9, 5)); /* 1 + 1 idle now: short */
  for (int i = 0; i < 10; i++) {
    assert_true(drain_step(&s, &p0, &s_ops, &e) != DRAIN_LAUNCHED);
    drain_step(&s, &p1, &s_ops, &e);
  }
  assert_int_equal(p0.phase, DRAIN_PH_SHORT);
  e.ended = true;
  assert_int_equal(drain_step(&s, &p0, &s_ops, &e), DRAIN_NONE);
  assert_int_equal(drain_step(&s, &p1, &s_ops, &e), DRAIN_NONE);
  assert_int_equal(p0.phase, DRAIN_PH_IDLE);
  assert_int_equal(p1.phase, DRAIN_PH_IDLE);
  assert_int_equal(e.launched, 1);
  assert_string_equal(drain_phase_name(DRAIN_PH_WAIT_GO), "WAIT_GO");
  assert_string_equal(drain_result_name(DRAIN_STAGED), "STAGED");
}

/* ------------------------------------------------------------------------ */
/* Real threads (for TSan/ASan): schedulers loop over drain_step while a    */
/* completion thread frees capacity at arbitrary times.                     */
/* ------------------------------------------------------------------------ */

#define TS 4
typedef struct tenv {
  drain_state s;
  int nsched, rounds, total;
  _Atomic int cap[TS];    /* idle capacity per scheduler */
  _Atomic int held[TS];   /* capacity in use, freed by the completion thread */
  _Atomic int cohort[TS]; /* staged blocks of the current cohort per scheduler */
  _Atomic uint64_t mask;  /* blocks of the current cohort staged so far */
  _Atomic int need;
  _Atomic int round; /* next round to request */
  _Atomic int launched;
  _Atomic int bad;
  uint64_t deadline;
  pto_event ev;
} tenv;

static int t_capacity(void *env, int sched) {
  tenv *e = env;
  /* relaxed: a capacity the scheduler itself reads; the completion thread's
   * increments only make it larger */
  return atomic_load_explicit(&e->cap[sched], memory_order_relaxed);
}
static int t_stage(void *env, int sched, int first, int n) {
  tenv *e = env;
  uint64_t bits = ((1ull << n) - 1) << first;
  /* relaxed: test bookkeeping; launch reads it after the staged report (acq/rel) */
  if (atomic_fetch_sub_explicit(&e->cap[sched], n, memory_order_relaxed) < n ||
      (atomic_fetch_or_explicit(&e->mask, bits, memory_order_relaxed) & bits))
    atomic_store_explicit(&e->bad, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&e->cohort[sched], n, memory_order_relaxed);
  return 0;
}
static void t_launch(void *env, int64_t task) {
  tenv *e = env;
  int need = atomic_load_explicit(&e->need, memory_order_relaxed);
  if (atomic_exchange_explicit(&e->mask, 0, memory_order_relaxed) != (1ull << need) - 1 ||
      task != atomic_load_explicit(&e->launched, memory_order_relaxed))
    atomic_store_explicit(&e->bad, 2, memory_order_relaxed);
  for (int i = 0; i < e->nsched; i++) /* the cohort runs; the completer frees it */
    atomic_fetch_add_explicit(&e->held[i],
                              atomic_exchange_explicit(&e->cohort[i], 0, memory_order_relaxed),
                              memory_order_relaxed);
  atomic_fetch_add_explicit(&e->launched, 1, memory_order_relaxed);
}
static bool t_ended(void *env) {
  tenv *e = env;
  return atomic_load_explicit(&e->bad, memory_order_relaxed) != 0 || pto_now_ns() > e->deadline;
}
static const drain_ops t_ops = {t_capacity, t_stage, t_launch, t_ended};

typedef struct targ {
  tenv *e;
  drain_part p;
  bool done;
} targ;

/* One scheduler loop iteration; true when it made progress or is done. */
static bool t_sched_iter(void *arg) {
  targ *t = arg;
  tenv *e = t->e;
  int i = t->p.sched;
  int r = drain_step(&e->s, &t->p, &t_ops, e);
  if (r != DRAIN_NONE) return r != DRAIN_WAITING;
  if (t_ended(e) || atomic_load_explicit(&e->launched, memory_order_relaxed) >= e->rounds) {
    t->done = true;
    return true;
  }
  if (drain_active(&e->s)) return false;
  int rd = atomic_load_explicit(&e->round, memory_order_relaxed);
  if (rd >= e->rounds || rd % e->nsched != i) return false;
  if (atomic_load_explicit(&e->launched, memory_order_relaxed) != rd)
    return false; /* the previous round's cohort is still being launched */
  /* dispatch one long task on this scheduler, then ask for a full cohort */
  if (atomic_load_explicit(&e->cap[i], memory_order_relaxed) > 0) {
    atomic_fetch_sub_explicit(&e->cap[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->held[i], 1, memory_order_relaxed);
  }
  int need = e->total - rd % 2;
  atomic_store_explicit(&e->need, need, memory_order_relaxed);
  if (drain_request(&e->s, i, rd, need))
    atomic_store_explicit(&e->round, rd + 1, memory_order_relaxed);
  return true;
}

static void *t_sched(void *arg) {
  targ *t = arg;
  while (!t->done) {
    if (pto_wait(&t->e->ev, t_sched_iter, t, t->e->deadline))
      pto_event_signal(&t->e->ev);
    else
      break;
  }
  return NULL;
}

static bool t_complete_iter(void *arg) {
  tenv *e = arg;
  for (int i = 0; i < e->nsched; i++) {
    int h = atomic_exchange_explicit(&e->held[i], 0, memory_order_relaxed);
    if (h) {
      atomic_fetch_add_explicit(&e->cap[i], h, memory_order_relaxed);
      pto_event_signal(&e->ev);
    }
  }
  return atomic_load_explicit(&e->launched, memory_order_relaxed) >= e->rounds || t_ended(e);
}

static void *t_completer(void *arg) {
  tenv *e = arg;
  pto_wait(NULL, t_complete_iter, e, e->deadline);
  return NULL;
}

static void run_threads(int nsched, int rounds) {
  tenv *e = calloc(1, sizeof *e);
  assert_non_null(e);
  drain_init(&e->s, nsched);
  e->nsched = nsched;
  e->rounds = rounds;
  e->total = 2 * nsched;
  for (int i = 0; i < nsched; i++)
    atomic_init(&e->cap[i], 2);
  uint64_t t0 = pto_now_ns();
  e->deadline = t0 + 20ull * 1000000000ull;
  pto_event_init(&e->ev, false);
  targ t[TS];
  pthread_t th[TS + 1];
  for (int i = 0; i < nsched; i++) {
    t[i].e = e;
    t[i].done = false;
    drain_part_init(&t[i].p, i);
    assert_int_equal(pthread_create(&th[i], NULL, t_sched, &t[i]), 0);
  }
  assert_int_equal(pthread_create(&th[nsched], NULL, t_completer, e), 0);
  for (int i = 0; i <= nsched; i++)
    pthread_join(th[i], NULL);
  drain_stats st;
  drain_get_stats(&e->s, &st);
  printf("threads: %d schedulers, %d drains: %llu attempts, at most %llu per drain, %.0f ms\n",
         nsched, atomic_load(&e->launched), (unsigned long long)st.attempts,
         (unsigned long long)st.max_attempts, (double)(pto_now_ns() - t0) / 1e6);
  assert_int_equal(atomic_load(&e->bad), 0);
  assert_int_equal(atomic_load(&e->launched), rounds);
  assert_int_equal(st.drains, (uint64_t)rounds);
  assert_true(st.max_attempts <= 2);
  free(e);
}

static void test_threads(void **state) {
  (void)state;
  run_threads(3, 40);
  run_threads(4, 40);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_api),
      cmocka_unit_test(test_explore_2),
      cmocka_unit_test(test_explore_3),
      cmocka_unit_test(test_explore_4),
      cmocka_unit_test(test_explore_next_run),
      cmocka_unit_test(test_broken_reset_caught),
      cmocka_unit_test(test_aba_schedule),
      cmocka_unit_test(test_broken_aba_schedule),
      cmocka_unit_test(test_broken_found_by_search),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
