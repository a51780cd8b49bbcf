/* test_cancel_explorer.c — the cancel of a failed group task (node_task.c
 * cancel_parts, mailbox.c mbox_cancel / mbox_cancel_relay, comm.h
 * comm_cancel_by, mpi_relay.c), explored over every interleaving, and two
 * broken variants caught.
 *
 * One chip slot runs two node tasks, A then B. Task A is the group task
 * whose other chip fails: its kernel waits for that chip and ends only when
 * it sees the cancel (a wait with no deadline). Task B runs after it on the
 * same slot and must never see A's cancel, which stays in the mailbox.
 * Actors, each step one real mbox_* call on a mailbox loaded from and
 * stored back to the explored state:
 *   parent  post A, collect A's reply, post B, collect B's reply (node.c)
 *   fail    while A is outstanding: mbox_cancel(A's generation) (once)
 *   child   take a frame; A: wait until comm_cancel_by names its frame;
 *           B: look at the word twice (a wait that ends by itself); reply
 * Under mpirun (relayed) the child serves a mailbox of its own, in its
 * own generations, and the relays stand between:
 *   root frames   mbox_peek a new frame of the parent's mailbox, send it
 *   root cancels  send the parent's cancel word when it changed
 *   root replies  a reply received: mbox_reply on the parent's mailbox
 *   rank frame    receive a frame: mbox_post it locally
 *   rank cancel   receive a cancel word (kept)
 *   rank apply    mbox_cancel_relay of the kept word (when not applied)
 *   rank reply    mbox_poll_reply locally: send it
 * Frames, cancels and replies travel on three channels, each in order, in
 * no order with one another (MPI orders messages by tag only).
 * Checked: the child never sees a cancel while it runs B; and every final
 * state has both tasks answered (A's wait ended: the cancel reached it).
 * Each with A's wait ended by the cancel alone, and with A free to end by
 * itself too (its kernel failed first, say), so that the cancel may come
 * after A ended, while B runs.
 * Broken variants, each caught with the interleaving printed:
 *  - NO_GEN: the relay applies any cancel word to the frame it runs,
 *    without its generation: A's cancel, arriving late, ends B's wait;
 *  - DROP_EARLY: the relay drops a cancel whose frame has not come yet
 *    (it differs in tag, so it can come first): A waits for ever. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm/comm.h"
#include "node/mailbox.h"

#include "explore.h"

enum { V_GOOD = 0, V_NO_GEN, V_DROP_EARLY };
enum {
  A_PARENT,
  A_FAIL,
  A_CHILD,
  A_RFRAME,
  A_RCANCEL,
  A_RREPLY,
  A_KFRAME,
  A_KCANCEL,
  A_KAPPLY,
  A_KREPLY,
  NACT
};
static const char *a_name[] = {"parent",      "fail",       "child",      "root-frame",
                               "root-cancel", "root-reply", "rank-frame", "rank-cancel",
                               "rank-apply",  "rank-reply"};
enum { P_POST_A, P_WAIT_A, P_POST_B, P_WAIT_B, P_DONE };
enum { C_TAKE, C_RUN_A, C_LOOK1, C_LOOK2, C_REPLY };

/* The words of a mailbox the steps use. */
typedef struct mwords {
  uint32_t posted, taken, done, fgen, rgen;
  uint32_t pad;
  uint64_t cancel;
} mwords;

typedef struct mstate {
  mwords m0, ml;   /* the parent's mailbox; the chip rank's own (relayed) */
  uint32_t gen[2]; /* the parent's generations of A and B */
  uint8_t ppc, failed;
  /* the child: its step, the task it runs (0: A, 1: B), the last frame taken */
  uint8_t cpc, task;
  uint32_t last, running;
  uint8_t saw_b; /* it saw a cancel while it ran B */
  uint8_t pad[3];
  /* relayed: rank 0's relay, the channels, rank c's relay */
  uint32_t sent;
  uint64_t cancel_sent;
  uint32_t fch[2], rch[2];
  uint64_t cch[2];
  uint8_t nf, nr, nc, reply_sent;
  uint32_t remote, local;
  uint64_t cancel_in, applied;
} mstate;

#define MAX_PATH 96

typedef struct explorer {
  bool relayed;
  bool a_ends; /* A's wait may also end by itself (its kernel fails first, say) */
  int variant;
  uint64_t states;
  bool failed;
  char why[200];
  const int *path;
  int depth;
} explorer;

static node_mbox MB; /* the mailbox a step runs on (events: mbox_init) */
static pto_event PARENT_EV;

static void load(const mwords *w) {
  atomic_store(&MB.posted, w->posted);
  atomic_store(&MB.taken, w->taken);
  atomic_store(&MB.done, w->done);
  MB.frame.gen = w->fgen;
  MB.reply.gen = w->rgen;
  atomic_store(&MB.cancel, w->cancel);
}

static void save(mwords *w) {
  w->posted = atomic_load(&MB.posted);
  w->taken = atomic_load(&MB.taken);
  w->done = atomic_load(&MB.done);
  w->fgen = MB.frame.gen;
  w->rgen = MB.reply.gen;
  w->cancel = atomic_load(&MB.cancel);
}

static int parent_step(mstate *s) {
  node_frame f;
  node_reply r;
  memset(&f, 0, sizeof f);
  load(&s->m0);
  int rc = XP_STEP;
  switch (s->ppc) {
  case P_POST_A:
  case P_POST_B:
    if (!mbox_idle(&MB)) return XP_SKIP;
    s->gen[s->ppc == P_POST_B] = mbox_post(&MB, &f);
    s->ppc++;
    break;
  case P_WAIT_A:
  case P_WAIT_B:
    if (!mbox_poll_reply(&MB, s->gen[s->ppc == P_WAIT_B], &r)) return XP_SKIP;
    s->ppc++;
    break;
  default: return XP_SKIP;
  }
  save(&s->m0);
  return rc;
}

/* The child on the mailbox it serves (the parent's, or its own relayed). */
static int child_step(const explorer *e, mstate *s) {
  mwords *w = e->relayed ? &s->ml : &s->m0;
  load(w);
  node_frame f;
  switch (s->cpc) {
  case C_TAKE:
    if (!mbox_take(&MB, s->last, &f)) return XP_SKIP;
    s->last = s->running = f.gen;
    s->cpc = s->task == 0 ? C_RUN_A : C_LOOK1;
    break;
  case C_RUN_A: /* waits for the failed chip: the cancel ends it (or, a_ends, itself) */
    if (!e->a_ends && comm_cancel_by(atomic_load(&MB.cancel), s->running) < 0) return XP_SKIP;
    s->cpc = C_REPLY;
    break;
  case C_LOOK1:
  case C_LOOK2:
    if (comm_cancel_by(atomic_load(&MB.cancel), s->running) >= 0) s->saw_b = 1;
    s->cpc = s->cpc == C_LOOK1 ? C_LOOK2 : C_REPLY;
    break;
  case C_REPLY: {
    node_reply r;
    memset(&r, 0, sizeof r);
    r.gen = s->running;
    mbox_reply(&MB, &r, &PARENT_EV);
    s->task++;
    s->cpc = s->task < 2 ? C_TAKE : C_REPLY + 1;
    break;
  }
  default: return XP_SKIP;
  }
  save(w);
  return XP_STEP;
}

/* The relays (mpi_relay.c), one message or decision per step. */
static int relay_step(const explorer *e, mstate *s, int a) {
  node_frame f;
  node_reply r;
  memset(&r, 0, sizeof r);
  switch (a) {
  case A_RFRAME:
    load(&s->m0);
    if (s->nf == 2 || !mbox_peek(&MB, s->sent, &f)) return XP_SKIP;
    s->fch[s->nf++] = s->sent = f.gen;
    return XP_STEP;
  case A_RCANCEL:
    if (s->nc == 2 || s->m0.cancel == s->cancel_sent) return XP_SKIP;
    s->cch[s->nc++] = s->cancel_sent = s->m0.cancel;
    return XP_STEP;
  case A_RREPLY:
    if (!s->nr) return XP_SKIP;
    load(&s->m0);
    r.gen = s->rch[0];
    mbox_reply(&MB, &r, &PARENT_EV);
    save(&s->m0);
    s->rch[0] = s->rch[1];
    s->nr--;
    return XP_STEP;
  case A_KFRAME:
    if (!s->nf) return XP_SKIP;
    load(&s->ml);
    memset(&f, 0, sizeof f);
    s->remote = s->fch[0];
    s->local = mbox_post(&MB, &f);
    s->reply_sent = 0;
    save(&s->ml);
    s->fch[0] = s->fch[1];
    s->nf--;
    return XP_STEP;
  case A_KCANCEL:
    if (!s->nc) return XP_SKIP;
    s->cancel_in = s->cch[0];
    s->cch[0] = s->cch[1];
    s->nc--;
    if (e->variant == V_DROP_EARLY && !(s->local && comm_cancel_by(s->cancel_in, s->remote) >= 0))
      s->applied = s->cancel_in; /* broken: dropped unless its frame runs now */
    return XP_STEP;
  case A_KAPPLY:
    if (s->cancel_in == s->applied) return XP_SKIP;
    load(&s->ml);
    if (e->variant == V_NO_GEN) { /* broken: any word, to the frame that runs */
      if (!s->local || s->reply_sent) return XP_SKIP;
      mbox_cancel(&MB, s->local, (int)(uint32_t)s->cancel_in - 1);
    } else if (!mbox_cancel_relay(&MB, s->cancel_in, s->remote, s->local, s->reply_sent)) {
      return XP_SKIP;
    }
    save(&s->ml);
    s->applied = s->cancel_in;
    return XP_STEP;
  case A_KREPLY:
    load(&s->ml);
    if (s->nr == 2 || !s->local || s->reply_sent || !mbox_poll_reply(&MB, s->local, &r))
      return XP_SKIP;
    s->rch[s->nr++] = s->remote;
    s->reply_sent = 1;
    return XP_STEP;
  default: return XP_SKIP;
  }
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf(
      "cancel explorer (%s%s, variant %d): %s\n  interleaving:", e->relayed ? "relayed" : "direct",
      e->a_ends ? ", A may end by itself" : "", e->variant, e->why);
  for (int d = 0; d < e->depth; d++)
    printf(" %s", a_name[e->path[d]]);
  printf("\n");
}

/* ---- search (explore.h) ---- */

static int cm_nact(xp_search *x) {
  (void)x;
  return NACT;
}

static int cm_apply(xp_search *x, void *state, int a, int d) {
  (void)d;
  explorer *e = x->ctx;
  mstate *s = state;
  switch (a) {
  case A_PARENT: return parent_step(s);
  case A_FAIL: /* the other chip's failure reaches the parent while A runs */
    if (s->failed || s->ppc != P_WAIT_A) return XP_SKIP;
    load(&s->m0);
    mbox_cancel(&MB, s->gen[0], 1);
    save(&s->m0);
    s->failed = 1;
    return XP_STEP;
  case A_CHILD: return child_step(e, s);
  default: return e->relayed ? relay_step(e, s, a) : XP_SKIP;
  }
}

static int cm_state(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  e->path = x->path;
  e->depth = d;
  if (s->saw_b) violation(e, "task B saw the cancel of task A");
  return e->failed ? XP_STOP : XP_STEP;
}

static int cm_final(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  e->path = x->path;
  e->depth = d;
  if (s->ppc != P_DONE)
    violation(e, "stuck with task %c unanswered (the child waits in task %c)",
              s->ppc <= P_WAIT_A ? 'A' : 'B', s->task == 0 ? 'A' : 'B');
  return e->failed ? XP_STOP : XP_STEP;
}

static explorer explore(bool relayed, bool a_ends, int variant) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.relayed = relayed;
  e.a_ends = a_ends;
  e.variant = variant;
  mbox_init(&MB);
  pto_event_init(&PARENT_EV, false);
  mstate s;
  memset(&s, 0, sizeof s);
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = cm_nact,
                      .apply = cm_apply,
                      .on_state = cm_state,
                      .on_final = cm_final,
                      .unchanged_is_wait = true,
                      .detect_cycles = true};
  xp_search x;
  int stop = xp_run(&x, &m, &e, &s);
  e.states = (uint64_t)x.states;
  if (stop == XP_CYCLE) {
    e.depth = x.stop_depth;
    e.path = x.path;
    violation(&e, "a cycle");
  } else if (stop == XP_DEPTH && !e.failed) {
    e.failed = true;
    snprintf(e.why, sizeof e.why, "a path longer than %d steps", m.max_depth);
  }
  xp_free(&x);
  e.path = NULL;
  return e;
}

static void test_cancel_all_interleavings(void **st) {
  (void)st;
  for (int relayed = 0; relayed < 2; relayed++)
    for (int a_ends = 0; a_ends < 2; a_ends++) {
      explorer e = explore(relayed, a_ends, V_GOOD);
      printf("cancel explorer: %s%s: %llu states: %s\n", relayed ? "relayed" : "direct",
             a_ends ? ", A may end by itself" : "", (unsigned long long)e.states,
             e.failed ? e.why : "ok");
      assert_false(e.failed);
      assert_true(e.states > 10u); /* the model ran */
    }
}

static void test_cancel_without_generation_caught(void **st) {
  (void)st;
  explorer e = explore(true, true, V_NO_GEN);
  assert_true(e.failed); /* printed above with its interleaving */
  assert_non_null(strstr(e.why, "task B saw the cancel"));
}

static void test_cancel_dropped_before_its_frame_caught(void **st) {
  (void)st;
  explorer e = explore(true, false, V_DROP_EARLY);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "stuck with task A"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cancel_all_interleavings),
      cmocka_unit_test(test_cancel_without_generation_caught),
      cmocka_unit_test(test_cancel_dropped_before_its_frame_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
