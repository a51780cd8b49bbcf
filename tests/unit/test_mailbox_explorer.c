/* test_mailbox_explorer.c — proves the node/child mailbox hand-off
 * (src/node/mailbox.c) over every interleaving of a parent and one or two
 * children, and shows that the same explorer catches a mailbox whose reply
 * carries no generation (mailbox_broken.c).
 *
 * The explorer drives the real mbox_* steps — the ones node.c and child.c
 * call — from one thread. Actors: the parent (one pass over its children
 * per step, shaped like node.c's step(): deaths first, then replies, then
 * posts), each child (take, then run and reply), each child's death (at
 * any point, once), and each child's deadline (the parent gives up on an
 * exchange the child took — it may post the next frame — or, on one not
 * taken, fails the run as node.c's control deadline does). In split mode
 * every store of a step is held back and lands later, one at a time in
 * program order (data before the flag that publishes it), in an action of
 * its own, so the other side acts between a step and its stores landing.
 * A depth-first search with state hashing visits every reachable state; a
 * step that changes nothing is a wait and not an edge. It checks:
 *  - the parent takes for exchange g only the reply the child made to
 *    frame g (gen and result), never a late reply of an earlier one;
 *  - a child runs each frame once, in order, never a torn one (the payload
 *    of the post with that gen);
 *  - no one waits forever: every state where no action changes anything
 *    has the parent finished (every exchange answered or given up on) or
 *    failed for a reason (a child died, a deadline passed), and the state
 *    graph has no cycle.
 * On failure it prints the interleaving that led there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "node/mailbox.h"

#include "explore.h"
#include "mailbox_broken.c" /* the broken variant, test tree only */

#define XC     2   /* most children */
#define XEX    4   /* most exchanges per scenario */
#define XGEN   8   /* most generations per mailbox */
#define XPEND  8   /* most stores in flight per actor */
#define XDEPTH 300 /* a path longer than this is reported (never reached) */
#define XF     7   /* tracked mailbox words */

typedef struct xproto {
  const char *name;
  bool (*idle)(node_mbox *);
  uint32_t (*post)(node_mbox *, node_frame *);
  bool (*taken)(node_mbox *, uint32_t);
  bool (*poll_reply)(node_mbox *, uint32_t, node_reply *);
  bool (*take)(node_mbox *, uint32_t, node_frame *);
  void (*reply)(node_mbox *, const node_reply *, pto_event *);
} xproto;
static const xproto X_REAL = {"real",          mbox_idle, mbox_post, mbox_taken,
                              mbox_poll_reply, mbox_take, mbox_reply};
static const xproto X_BROKEN = {"broken (no generation on the reply)",
                                broken_mbox_idle,
                                broken_mbox_post,
                                broken_mbox_taken,
                                broken_mbox_poll_reply,
                                broken_mbox_take,
                                broken_mbox_reply};

typedef struct xscenario {
  const char *name;
  int nchild;
  int nex;
  uint8_t ex[XEX]; /* children (bit mask) of each exchange, in order */
  bool deaths;     /* each child may die once, at any point */
  int deadlines;   /* how many times a deadline may pass */
} xscenario;

enum { PP_POST, PP_WAIT, PP_DONE, PP_FAILED };
enum { CP_WAIT, CP_RUN, CP_DEAD };
enum { PART_NONE, PART_OUT, PART_REPLIED, PART_GIVEN_UP };
enum { XF_OK, XF_WRONG, XF_TORN, XF_TWICE, XF_HANG, XF_CYCLE, XF_DEPTH, XF_BOUND };
static const char *const xfail_names[] = {"ok",   "WRONG REPLY", "TORN FRAME",  "FRAME RUN TWICE",
                                          "HANG", "LIVELOCK",    "DEPTH BOUND", "MODEL BOUND"};
static const char *const pphase_names[] = {"POST", "WAIT", "DONE", "FAILED"};
static const char *const cphase_names[] = {"WAIT", "RUN", "DEAD"};

typedef struct xworld {
  /* the parent */
  uint8_t pphase, ex, failed_by; /* failed_by: 1 a death, 2 a deadline */
  uint8_t deadlines_left;
  uint8_t part[XC];
  uint32_t pgen[XC];     /* outstanding gen per child */
  uint32_t given_up[XC]; /* gen of the last exchange given up on, 0 none */
  /* the children */
  uint8_t cphase[XC];
  bool dead[XC];
  uint32_t clast[XC], cgen[XC];
  int64_t ctask[XC];
  /* ghost state for the checks */
  int64_t payload[XC][XGEN]; /* what was posted with gen g to child c */
  uint8_t runs[XC][XGEN];
  bool late_reply, died_mid;
  /* split mode: stores in flight per actor (children, then the parent) */
  uint8_t npend[XC + 1];
  uint8_t pend_mb[XC + 1][XPEND], pend_f[XC + 1][XPEND];
  int64_t pend_v[XC + 1][XPEND];
  node_mbox mb[XC]; /* last: only the tracked words enter the state key */
} xworld;

#define XHEAD offsetof(xworld, mb)
typedef struct xkey {
  unsigned char head[XHEAD];
  int64_t f[XC][XF];
} xkey;

typedef struct xctx {
  const xscenario *sc;
  const xproto *pr;
  bool split;
  int fail;
  char why[384];
  FILE *log;
  int path[XDEPTH + 1]; /* the failing interleaving */
  int depth;
  xworld *replay; /* the world x_report steps */
  long states, edges, terminals, t_done, t_death, t_deadline, t_late, t_died_mid;
  int max_depth;
} xctx;

static pto_event x_parent_ev; /* the child's reply wakes it: no one waits here */

static void xfail(xctx *c, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void xfail(xctx *c, int kind, const char *fmt, ...) {
  if (c->fail) return;
  c->fail = kind;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
}

static int64_t x_result(int64_t task) { return 3 * task + 1; } /* what a child answers */

/* ---- tracked words ---- */

#define LD(x)    atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
static const char *const field_names[XF] = {"frame.task", "frame.gen", "reply.status", "reply.gen",
                                            "taken",      "posted",    "done"};

/* In program order: data (0-3) before the flags that publish it (4-6). */
static int64_t x_get(node_mbox *m, int f) {
  switch (f) {
  case 0: return m->frame.task_id;
  case 1: return m->frame.gen;
  case 2: return m->reply.status;
  case 3: return m->reply.gen;
  case 4: return LD(m->taken);
  case 5: return LD(m->posted);
  default: return LD(m->done);
  }
}
static void x_set(node_mbox *m, int f, int64_t v) {
  switch (f) {
  case 0: m->frame.task_id = v; return;
  case 1: m->frame.gen = (uint32_t)v; return;
  case 2: m->reply.status = (int32_t)v; return;
  case 3: m->reply.gen = (uint32_t)v; return;
  case 4: ST(m->taken, (uint32_t)v); return;
  case 5: ST(m->posted, (uint32_t)v); return;
  default: ST(m->done, (uint32_t)v); return;
  }
}

static void x_key(const xctx *c, const xworld *w, xkey *k) {
  memset(k, 0, sizeof *k);
  memcpy(k->head, w, XHEAD);
  for (int i = 0; i < c->sc->nchild; i++)
    for (int f = 0; f < XF; f++)
      k->f[i][f] = x_get((node_mbox *)&w->mb[i], f);
}

static void x_world_init(const xctx *c, xworld *w) {
  memset(w, 0, sizeof *w);
  w->deadlines_left = (uint8_t)c->sc->deadlines;
  for (int i = 0; i < c->sc->nchild; i++)
    mbox_init(&w->mb[i]);
}

/* ---- actors ---- */

static int x_nact(const xctx *c) {
  int n = c->sc->nchild;
  return 3 * n + 1 + (c->split ? n + 1 : 0);
}

static bool x_all_parts(const xworld *w, uint8_t mask, int nchild) {
  for (int i = 0; i < nchild; i++)
    if ((mask >> i & 1) && w->part[i] != PART_REPLIED && w->part[i] != PART_GIVEN_UP) return false;
  return true;
}

static void x_parent(xctx *c, xworld *w) {
  const xscenario *sc = c->sc;
  int n = sc->nchild;
  if (w->pphase == PP_DONE || w->pphase == PP_FAILED) return;
  for (int i = 0; i < n; i++) /* deaths first, as node.c's step() */
    if (w->dead[i]) {
      w->pphase = PP_FAILED;
      w->failed_by = 1;
      if (c->log) fprintf(c->log, " sees child %d dead: the run fails", i);
      return;
    }
  uint8_t mask = sc->ex[w->ex];
  if (w->pphase == PP_WAIT) {
    for (int i = 0; i < n; i++) {
      if (!(mask >> i & 1) || w->part[i] != PART_OUT) continue;
      node_reply r;
      memset(&r, 0, sizeof r);
      if (!c->pr->poll_reply(&w->mb[i], w->pgen[i], &r)) continue;
      int64_t want = x_result(w->payload[i][w->pgen[i]]);
      if (c->log)
        fprintf(c->log, " takes reply gen %u status %d from child %d", r.gen, r.status, i);
      if (r.gen != w->pgen[i] || r.status != want)
        xfail(c, XF_WRONG,
              "the parent took a reply (gen %u, status %d) as child %d's reply to frame gen %u, "
              "which answers status %lld",
              r.gen, r.status, i, w->pgen[i], (long long)want);
      w->part[i] = PART_REPLIED;
    }
    if (x_all_parts(w, mask, n)) {
      memset(w->part, 0, sizeof w->part);
      w->ex++;
      w->pphase = w->ex == sc->nex ? PP_DONE : PP_POST;
      if (c->log)
        fprintf(c->log, " -> exchange %d %s", w->ex, w->ex == sc->nex ? "(all done)" : "");
    }
    return;
  }
  /* PP_POST: one post per step */
  for (int i = 0; i < n; i++) {
    if (!(mask >> i & 1) || w->part[i] != PART_NONE) continue;
    bool may = c->pr->idle(&w->mb[i]) || (w->given_up[i] && w->given_up[i] == w->pgen[i]);
    if (!may) return; /* waits */
    static node_frame f;
    memset(&f, 0, sizeof f);
    f.type = FRAME_TASK;
    f.task_id = 10 * (w->ex + 1) + i;
    uint32_t g = c->pr->post(&w->mb[i], &f);
    if (g >= XGEN) {
      xfail(c, XF_BOUND, "more than %d generations", XGEN - 1);
      return;
    }
    w->payload[i][g] = f.task_id;
    w->pgen[i] = g;
    w->part[i] = PART_OUT;
    if (c->log)
      fprintf(c->log, " posts gen %u (task %lld) to child %d", g, (long long)f.task_id, i);
    break;
  }
  bool all = true;
  for (int i = 0; i < n; i++)
    if ((mask >> i & 1) && w->part[i] == PART_NONE) all = false;
  if (all) w->pphase = PP_WAIT;
}

static void x_deadline(xctx *c, xworld *w, int i) {
  if (w->pphase != PP_WAIT || !w->deadlines_left || w->part[i] != PART_OUT) return;
  w->deadlines_left--;
  if (c->pr->taken(&w->mb[i], w->pgen[i])) {
    w->part[i] = PART_GIVEN_UP;
    w->given_up[i] = w->pgen[i];
    if (c->log) fprintf(c->log, " the parent gives up on gen %u (taken)", w->pgen[i]);
  } else {
    w->pphase = PP_FAILED;
    w->failed_by = 2;
    if (c->log) fprintf(c->log, " gen %u not taken: the run fails (control deadline)", w->pgen[i]);
  }
}

static void x_child(xctx *c, xworld *w, int i) {
  node_mbox *mb = &w->mb[i];
  if (w->cphase[i] == CP_WAIT) {
    static node_frame f;
    memset(&f, 0, sizeof f);
    if (!c->pr->take(mb, w->clast[i], &f)) return;
    if (c->log) fprintf(c->log, " takes gen %u (task %lld)", f.gen, (long long)f.task_id);
    if (f.gen >= XGEN || f.gen <= w->clast[i]) {
      xfail(c, XF_TWICE, "child %d took gen %u after gen %u", i, f.gen, w->clast[i]);
      return;
    }
    if (w->payload[i][f.gen] != f.task_id)
      xfail(c, XF_TORN, "child %d took gen %u with task %lld, but gen %u was posted with task %lld",
            i, f.gen, (long long)f.task_id, f.gen, (long long)w->payload[i][f.gen]);
    if (++w->runs[i][f.gen] > 1)
      xfail(c, XF_TWICE, "child %d ran gen %u %d times", i, f.gen, w->runs[i][f.gen]);
    w->clast[i] = f.gen;
    w->cgen[i] = f.gen;
    w->ctask[i] = f.task_id;
    w->cphase[i] = CP_RUN;
  } else if (w->cphase[i] == CP_RUN) {
    node_reply r;
    memset(&r, 0, sizeof r);
    r.gen = w->cgen[i];
    r.status = (int32_t)x_result(w->ctask[i]);
    c->pr->reply(mb, &r, &x_parent_ev);
    if (w->given_up[i] == w->cgen[i]) w->late_reply = true;
    if (c->log)
      fprintf(c->log, " replies gen %u status %d%s", r.gen, r.status,
              w->given_up[i] == w->cgen[i] ? " (late: the parent gave up on it)" : "");
    w->cphase[i] = CP_WAIT;
  }
}

static void x_apply(xctx *c, xworld *w, int a) {
  int n = c->sc->nchild;
  int who = a < n ? a : a == 2 * n ? n : -1; /* actor whose stores are tracked */
  if (a >= 3 * n + 1) { /* split mode: the oldest store in flight of actor j lands */
    int j = a - 3 * n - 1;
    if (!w->npend[j]) return;
    int m = w->pend_mb[j][0], f = w->pend_f[j][0];
    x_set(&w->mb[m], f, w->pend_v[j][0]);
    if (c->log) {
      if (j < n)
        fprintf(c->log, "child %d's store lands:", j);
      else
        fprintf(c->log, "the parent's store lands:");
      fprintf(c->log, " mailbox %d %s=%lld", m, field_names[f], (long long)w->pend_v[j][0]);
    }
    w->npend[j]--;
    memmove(w->pend_mb[j], w->pend_mb[j] + 1, w->npend[j]);
    memmove(w->pend_f[j], w->pend_f[j] + 1, w->npend[j]);
    memmove(w->pend_v[j], w->pend_v[j] + 1, w->npend[j] * sizeof(int64_t));
    w->pend_mb[j][w->npend[j]] = w->pend_f[j][w->npend[j]] = 0;
    w->pend_v[j][w->npend[j]] = 0;
    return;
  }
  if (who >= 0 && w->npend[who]) return; /* its previous step's stores are in flight */
  int64_t old[XC][XF];
  for (int i = 0; i < n; i++)
    for (int f = 0; f < XF; f++)
      old[i][f] = x_get(&w->mb[i], f);
  if (a < n) {
    if (w->cphase[a] == CP_DEAD) return;
    if (c->log) fprintf(c->log, "child %d  %-4s:", a, cphase_names[w->cphase[a]]);
    x_child(c, w, a);
  } else if (a < 2 * n) {
    int i = a - n;
    if (!c->sc->deaths || w->dead[i]) return;
    w->dead[i] = true;
    w->cphase[i] = CP_DEAD;
    if (w->part[i] == PART_OUT) w->died_mid = true;
    if (c->log) fprintf(c->log, "child %d dies", i);
  } else if (a == 2 * n) {
    if (c->log) fprintf(c->log, "parent   %-4s:", pphase_names[w->pphase]);
    x_parent(c, w);
  } else {
    if (c->log) fprintf(c->log, "deadline of child %d:", a - 2 * n - 1);
    x_deadline(c, w, a - 2 * n - 1);
  }
  if (!c->split || who < 0) return;
  for (int i = 0; i < n; i++) /* hold the step's stores back, in program order */
    for (int f = 0; f < XF; f++) {
      int64_t v = x_get(&w->mb[i], f);
      if (v == old[i][f]) continue;
      if (w->npend[who] == XPEND) {
        xfail(c, XF_BOUND, "one step stored more than %d words", XPEND);
        return;
      }
      x_set(&w->mb[i], f, old[i][f]);
      int k = w->npend[who]++;
      w->pend_mb[who][k] = (uint8_t)i;
      w->pend_f[who][k] = (uint8_t)f;
      w->pend_v[who][k] = v;
    }
  if (c->log && w->npend[who]) fprintf(c->log, "  (%d stores in flight)", w->npend[who]);
}

static void x_check_terminal(xctx *c, const xworld *w) {
  if (w->pphase == PP_DONE || w->pphase == PP_FAILED) return;
  char who[160] = "";
  size_t len = 0;
  for (int i = 0; i < c->sc->nchild; i++)
    len += (size_t)snprintf(who + len, sizeof who - len, " child %d %s (last gen %u, part %d)", i,
                            cphase_names[w->cphase[i]], w->clast[i], w->part[i]);
  xfail(c, XF_HANG, "no step can change anything, but the parent waits in %s at exchange %d;%s",
        pphase_names[w->pphase], w->ex, who);
}

/* ---- report ---- */

static void x_report(xctx *c, FILE *out) {
  fprintf(out, "mailbox explorer: %s mailbox, scenario '%s' (%d child%s%s): %s: %s\n", c->pr->name,
          c->sc->name, c->sc->nchild, c->sc->nchild > 1 ? "ren" : "",
          c->split ? ", split stores" : "", xfail_names[c->fail], c->why);
  fprintf(out, "interleaving (%d steps):\n", c->depth);
  int fail = c->fail;
  char why[sizeof c->why];
  memcpy(why, c->why, sizeof why);
  xworld *w = c->replay;
  x_world_init(c, w);
  c->log = out;
  for (int i = 0; i < c->depth; i++) {
    fprintf(out, "  %3d. ", i + 1);
    x_apply(c, w, c->path[i]);
    fputc('\n', out);
  }
  c->log = NULL;
  c->fail = fail;
  memcpy(c->why, why, sizeof why);
}

/* ---- search (explore.h) ---- */

static void xm_key(xp_search *x, const void *state, void *key) { x_key(x->ctx, state, key); }
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
  c->t_done += w->pphase == PP_DONE;
  c->t_death += w->pphase == PP_FAILED && w->failed_by == 1;
  c->t_deadline += w->pphase == PP_FAILED && w->failed_by == 2;
  c->t_late += w->late_reply;
  c->t_died_mid += w->died_mid;
  return XP_STEP;
}

static int x_explore(xctx *c, const xscenario *sc, const xproto *pr, bool split) {
  memset(c, 0, sizeof *c);
  c->sc = sc;
  c->pr = pr;
  c->split = split;
  c->replay = calloc(1, sizeof *c->replay);
  assert_non_null(c->replay);
  pto_event_init(&x_parent_ev, false);
  uint64_t t0 = pto_now_ns();
  /* every reachable state; a step that changes nothing is a wait, a cycle
   * a livelock */
  const xp_model m = {.state_size = sizeof(xworld),
                      .key_size = sizeof(xkey),
                      .max_depth = XDEPTH,
                      .key = xm_key,
                      .nact = xm_nact,
                      .apply = xm_apply,
                      .on_final = xm_final,
                      .unchanged_is_wait = true,
                      .detect_cycles = true};
  xworld *init = calloc(1, sizeof *init);
  assert_non_null(init);
  x_world_init(c, init);
  xp_search x;
  int why = xp_run(&x, &m, c, init);
  free(init);
  if (why == XP_CYCLE) xfail(c, XF_CYCLE, "the last step returns to a state already on this path");
  if (why == XP_DEPTH) xfail(c, XF_DEPTH, "a path longer than %d steps", XDEPTH);
  c->depth = why ? x.stop_depth : 0;
  memcpy(c->path, x.path, (size_t)c->depth * sizeof *c->path);
  c->states = x.states;
  c->edges = x.edges;
  c->terminals = x.finals;
  c->max_depth = x.deepest;
  xp_free(&x);
  double ms = (double)(pto_now_ns() - t0) / 1e6;
  if (c->fail)
    x_report(c, stdout);
  else
    printf("mailbox explorer: %s mailbox, scenario '%s' (%d child%s%s): %ld states, %ld steps, "
           "%ld final states (%ld all answered, %ld failed by a death, %ld by a deadline; %ld "
           "with a late reply, %ld with a death mid-exchange), longest path %d, %.0f ms\n",
           pr->name, sc->name, sc->nchild, sc->nchild > 1 ? "ren" : "",
           split ? ", split stores" : "", c->states, c->edges, c->terminals, c->t_done, c->t_death,
           c->t_deadline, c->t_late, c->t_died_mid, c->max_depth, ms);
  fflush(stdout);
  return c->fail;
}

static void x_teardown(xctx *c) { free(c->replay); }

/* ---- scenarios ---- */

static const xscenario SC_ONE = {
    .name = "three exchanges",
    .nchild = 1,
    .nex = 3,
    .ex = {1, 1, 1},
    .deaths = true,
    .deadlines = 1,
};
static const xscenario SC_ONE_TWO_DEADLINES = {
    .name = "two deadlines",
    .nchild = 1,
    .nex = 3,
    .ex = {1, 1, 1},
    .deaths = false,
    .deadlines = 2,
};
static const xscenario SC_TWO = {
    .name = "group, then each alone",
    .nchild = 2,
    .nex = 3,
    .ex = {3, 1, 2},
    .deaths = true,
    .deadlines = 1,
};
static const xscenario SC_TWO_GROUPS = {
    .name = "two groups",
    .nchild = 2,
    .nex = 2,
    .ex = {3, 3},
    .deaths = false,
    .deadlines = 2,
};

static const xscenario SC_TWO_ALL = {
    .name = "three groups, deaths and two deadlines",
    .nchild = 2,
    .nex = 3,
    .ex = {3, 3, 3},
    .deaths = true,
    .deadlines = 2,
};

static void expect_proven(const xscenario *sc, bool split) {
  xctx c;
  int f = x_explore(&c, sc, &X_REAL, split);
  assert_int_equal(f, XF_OK);
  assert_true(c.t_done > 0);
  assert_true(c.t_late > 0); /* a late reply of an abandoned exchange was explored */
  if (sc->deaths) {
    assert_true(c.t_death > 0);
    assert_true(c.t_died_mid > 0);
  }
  if (sc->deadlines) assert_true(c.t_deadline > 0);
  x_teardown(&c);
}

static void test_explore_one_child(void **state) {
  (void)state;
  for (int split = 0; split < 2; split++) {
    expect_proven(&SC_ONE, split);
    expect_proven(&SC_ONE_TWO_DEADLINES, split);
  }
}

static void test_explore_two_children(void **state) {
  (void)state;
  for (int split = 0; split < 2; split++) {
    expect_proven(&SC_TWO, split);
    expect_proven(&SC_TWO_GROUPS, split);
  }
  expect_proven(&SC_TWO_ALL, false); /* 60 000 states split: too slow for the sanitizer builds */
}

/* The explorer is itself tested: the mailbox without a generation on the
 * reply must be caught taking a late reply for the current exchange. */
static void test_broken_found(void **state) {
  (void)state;
  const xscenario *scs[] = {&SC_ONE, &SC_TWO};
  for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++)
    for (int split = 0; split < 2; split++) {
      xctx c;
      int f = x_explore(&c, scs[i], &X_BROKEN, split);
      assert_int_equal(f, XF_WRONG);
      assert_true(c.depth > 0);
      x_teardown(&c);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_explore_one_child),
      cmocka_unit_test(test_explore_two_children),
      cmocka_unit_test(test_broken_found),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
