/* test_head_take_explorer.c — a core taking its next block from its
 * queue's head (src/chip/head_take.h) against the passes that place blocks
 * behind busy cores (src/chip/sched.c, dispatch_shape), explored over
 * every interleaving of 2 cores, 1 or 2 schedulers and a pusher, with
 * broken variants caught.
 *
 * Model: the AIV queue and the MIX (AIV x2) queue are the real ready
 * queues (ready_queue.h's inline steps, on cells loaded from and stored
 * back to the explored state); a claim under a queue's claim lock is one
 * step (a mutex: nothing else claims meanwhile). Tasks are one block
 * each. Actors, one atomic operation (or one locked section) per step:
 *   core  WAIT      dispatched >= next: start the block of slot next
 *         RUN       the block ends; its first end decides, as core_serve:
 *                   a one-unit task, a successor it may keep or something
 *                   queued (handoff_worth || head_take_worth), and
 *                   handoff_core_may_keep (dispatched still next, no MIX
 *                   queued): then COMPLETE, else FIN. A link of the chain
 *                   re-reads handoff_core_may_keep into keep.
 *         COMPLETE  sched_complete_here: the task completes; its one
 *                   successor is kept (keep, nothing queued: the slot's
 *                   movable set again) or pushed (pushed)
 *         TAKE      head_take: keep, nothing pushed, the queue's size
 *                   peeked; under the AIV queue's lock: dispatched still
 *                   next, the head published, claim it, the slot not
 *                   movable -> RUN it; else FIN
 *         FIN       the slot deferred if completed here, finished = next
 *   pass  POLL      seen = finished; completes the blocks not completed
 *                   on their core (pushes their successors)
 *         MIX_FIT   placements of the MIX queue's head: a cluster whose
 *                   cores have room with max_inflight 0 (idle)
 *         MIX_CLAIM rq_claim under the MIX queue's lock
 *         MIX_PLACE place_block on the cluster
 *         IDLE_CLAIM the AIV queue's blocks for idle cores (max_inflight 0),
 *                   claimed under the AIV lock
 *         IDLE_PLACE placed
 *         PEEK      placements with max_inflight 1: cores with room
 *                   behind their block (has_room: the slot's movable)
 *         BEHIND    under the AIV lock: still_room, rq_claim, place_block
 *   pusher PUSH_CLAIM, PUSH_PUB  rq_push_claim, rq_push_publish
 * A pass starts when it has something to do (a block end to poll, a
 * queued block and a core with room for it); one scheduler's passes never
 * overlap (role.h); with two schedulers each owns one core and both claim
 * from the one queue. Interleavings are sequentially consistent: every
 * decision that matters is made under a queue's lock or on the role's own
 * counts (issued, seen).
 * Checked, in every state:
 *  - no block claimed before the one a core took from the head waits
 *    behind it (in the core's pending slot): a kernel that waits for an
 *    earlier block's progress (a collective's ranks) would deadlock;
 *  - no block is placed behind a block a core took from the head
 *    (head_take.h: the pass sees the slot not movable);
 *  - no block runs more often than it has parts;
 * and in every final state: every block ran exactly once (a MIX block
 * once on each of its cores), every task completed, both queues are
 * empty, and every dispatch was served and seen (nothing left placed).
 * Broken variants, each must be caught with the interleaving printed:
 *  - PLACE_UNLOCKED: the placement behind a busy core after the claim's
 *    lock is released (the code before the head take): a block claimed
 *    before the core's take is placed behind it;
 *  - NO_STILL_ROOM: under the lock but without looking at the core's
 *    room again: a block goes behind a head taken after the peek;
 *  - TAKE_IGNORES_DISPATCH: the take without the check that nothing was
 *    placed behind the core's block: the core runs the head before the
 *    block placed on it earlier;
 *  - MIX_BEHIND: MIX blocks placed behind busy cores (max_inflight 1,
 *    under the MIX queue's lock only): a MIX block claimed before the AIV
 *    head a core takes waits behind it. The real passes place MIX blocks
 *    on idle cores only, and a core in its chain is busy to its pass
 *    (its end, `finished`, is published after the chain), so the MIX
 *    queue's claims need no order with the AIV queue's lock; the same
 *    holds for AIC cores and MIX shapes with an AIC part (their own
 *    queue and lock, head_queue).
 * What the variants show: the order (the first invariant) rests on the
 * claim and the placement behind a busy core being one section under the
 * lock, and on the take's look at the dispatch register under it; the
 * pass's second look at the room (still_room, the slot not movable) is
 * what keeps blocks from waiting behind a taken head at all.
 * Not modelled: priority levels (head_take refuses them), gangs and the
 * drain (idle cores only, as MIX), steals (a pending block moves to an
 * idle core, never behind one), and scheduler threads (no head take). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip/ready_queue.h"
#include "explore.h"

enum { V_GOOD = 0, V_PLACE_UNLOCKED, V_NO_STILL_ROOM, V_TAKE_IGNORES_DISPATCH, V_MIX_BEHIND };
static const char *variant_name[] = {"good", "PLACE_UNLOCKED", "NO_STILL_ROOM",
                                     "TAKE_IGNORES_DISPATCH", "MIX_BEHIND"};

enum { C_WAIT, C_RUN, C_COMPLETE, C_TAKE, C_FIN };
enum {
  P_POLL, /* the pass's first step (idle between passes) */
  P_MIX_FIT,
  P_MIX_CLAIM,
  P_MIX_PLACE,
  P_IDLE_CLAIM,
  P_IDLE_PLACE,
  P_PEEK,
  P_BEHIND,
  P_BEHIND_PLACE /* PLACE_UNLOCKED only */
};
enum { U_CLAIM, U_PUB, U_DONE };
/* what a path step names: the actor kind's pc */
enum { K_CORE, K_PASS, K_PUSH };
static const char *core_pc[] = {"WAIT", "RUN", "COMPLETE", "TAKE", "FIN"};
static const char *pass_pc[] = {"POLL",       "MIX_FIT", "MIX_CLAIM", "MIX_PLACE",   "IDLE_CLAIM",
                                "IDLE_PLACE", "PEEK",    "BEHIND",    "BEHIND_PLACE"};
static const char *push_pc[] = {"PUSH_CLAIM", "PUSH_PUB", "DONE"};

#define NCORE    2
#define MAXS     2 /* schedulers */
#define MAXN     6 /* tasks */
#define CAP      8 /* cells per queue */
#define MAXP     3 /* pusher's pushes */
#define Q_AIV    0
#define Q_MIX    1
#define NONE     0xff
#define MAX_PATH 200

typedef struct scenario {
  const char *name;
  int nsched; /* 1: both cores, one cluster; 2: one core each */
  int ntasks;
  bool mix[MAXN];   /* a MIX (AIV x2) task, else one AIV block */
  int succ[MAXN];   /* its one successor (an AIV task), or -1 */
  int queued[MAXN]; /* AIV tasks queued at the start, -1 ends */
  int pushes[MAXP]; /* the pusher's tasks, in order, -1 ends */
} scenario;

typedef struct qstate {
  uint64_t head, tail, cells[CAP];
} qstate;

typedef struct cstate {
  uint8_t pc, next, dispatched, finished; /* dispatch ids, from 1 */
  uint8_t slot_task[2], slot_movable[2], slot_deferred[2];
  uint8_t cur, cur_seq, cur_head; /* the block running, its claim, taken by head_take */
  uint8_t chain, keep, pushed, completed;
} cstate;

typedef struct pstate {
  uint8_t pc;
  uint8_t issued[NCORE], seen[NCORE]; /* the role's own counts */
  uint8_t spots, nclaimed;            /* the cores found, the tasks claimed for them */
  uint8_t claimed[NCORE], spot_of[NCORE];
} pstate;

typedef struct mstate {
  qstate q[2];
  cstate c[NCORE];
  pstate p[MAXS];
  uint8_t runs[MAXN], done[MAXN], seq[MAXN], parts_seen[MAXN];
  uint8_t nclaims;
  uint8_t push_pc, push_i;
  uint64_t push_pos;
} mstate;

typedef struct explorer {
  const scenario *sc;
  int variant;
  bool order_only; /* only the first invariant: a block claimed before waits behind */
  uint64_t states, finals;
  /* steps seen, so that the good runs are shown to reach them: heads
   * taken, takes refused for a block placed behind, blocks placed behind
   * a busy core, successors kept */
  uint64_t takes, refused, behind, kept;
  bool failed;
  char why[240];
  const int *path_a; /* the search's path: the actor of each step */
  uint8_t path_pc[MAX_PATH];
  int depth;
} explorer;

static const char *task_name(int t) {
  static const char *n[] = {"A", "B", "C", "D", "E", "F"};
  return t >= 0 && t < MAXN ? n[t] : "?";
}

static int actor_kind(int a) { return a < NCORE ? K_CORE : a < NCORE + MAXS ? K_PASS : K_PUSH; }

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("head take explorer (%s, %s): %s\n  interleaving:", e->sc->name, variant_name[e->variant],
         e->why);
  for (int d = 0; d < e->depth; d++) {
    int a = e->path_a[d], k = actor_kind(a);
    if (k == K_CORE)
      printf(" core%d:%s", a, core_pc[e->path_pc[d]]);
    else if (k == K_PASS)
      printf(" sched%d:%s", a - NCORE, pass_pc[e->path_pc[d]]);
    else
      printf(" pusher:%s", push_pc[e->path_pc[d]]);
  }
  printf("\n");
}

/* ---- the queues: real steps on cells loaded from the state ---- */

static _Atomic uint64_t cellmem[2][CAP];

static void load_q(rq *q, const mstate *s, int which) {
  q->cells = cellmem[which];
  q->cap = CAP;
  atomic_store(&q->head, s->q[which].head);
  atomic_store(&q->tail, s->q[which].tail);
  for (int i = 0; i < CAP; i++)
    atomic_store(&cellmem[which][i], s->q[which].cells[i]);
}
static void store_q(const rq *q, mstate *s, int which) {
  s->q[which].head = atomic_load(&q->head);
  s->q[which].tail = atomic_load(&q->tail);
  for (int i = 0; i < CAP; i++)
    s->q[which].cells[i] = atomic_load(&cellmem[which][i]);
}

/* rq_size: a peek at head and tail only */
static uint64_t q_size(const mstate *s, int which) {
  rq q;
  q.cells = NULL;
  q.cap = CAP;
  atomic_store(&q.head, s->q[which].head);
  atomic_store(&q.tail, s->q[which].tail);
  return rq_size(&q);
}

/* A push of task t as one step (sched_make_ready; its two steps are the
 * pusher's, and test_ready_explorer's). */
static void push_now(mstate *s, int which, int t) {
  rq q;
  load_q(&q, s, which);
  rq_push_publish(&q, rq_push_claim(&q), (uint32_t)t);
  store_q(&q, s, which);
}

/* Under the queue's claim lock (the caller's one step): up to n tasks of
 * one block each from the head, in order (rq_claim); returns how many. */
static int claim_n(mstate *s, int which, int n, uint8_t *out) {
  rq q;
  load_q(&q, s, which);
  uint64_t h = rq_pop_head(&q);
  int got = 0;
  uint32_t idx;
  while (got < n && rq_pop_cell(&q, h, &idx)) {
    s->seq[idx] = ++s->nclaims;
    out[got++] = (uint8_t)idx;
    rq_pop_advance(&q, ++h);
  }
  store_q(&q, s, which);
  return got;
}

/* ---- the role's view of a core (sched.c) ---- */

static int owner(const explorer *e, int c) { return e->sc->nsched == 1 ? 0 : c; }

static uint8_t inflight(const pstate *p, int c) { return (uint8_t)(p->issued[c] - p->seen[c]); }

/* has_room: idle, or one block in flight and that one movable */
static bool has_room(const mstate *s, const pstate *p, int c, int max_inflight) {
  int n = inflight(p, c);
  return n == 0 || (n <= max_inflight && s->c[c].slot_movable[p->issued[c] & 1]);
}

/* core_dispatch: the payload, its movable flag (a single-core block),
 * then the new id published */
static void core_dispatch(const explorer *e, mstate *s, pstate *p, int c, int t) {
  cstate *k = &s->c[c];
  int d = ++p->issued[c];
  k->slot_task[d & 1] = (uint8_t)t;
  k->slot_deferred[d & 1] = 0;
  k->slot_movable[d & 1] = !e->sc->mix[t];
  k->dispatched = (uint8_t)d;
}

static void complete(explorer *e, mstate *s, int t) {
  if (s->done[t]++) violation(e, "task %s completed twice", task_name(t));
}

/* A completion outside a chain: its successor queued (the pass's). */
static void complete_pushing(explorer *e, mstate *s, int t) {
  complete(e, s, t);
  if (e->sc->succ[t] >= 0) push_now(s, Q_AIV, e->sc->succ[t]);
}

static void start_block(explorer *e, mstate *s, int c, int t, int seq, bool head) {
  cstate *k = &s->c[c];
  k->cur = (uint8_t)t;
  k->cur_seq = (uint8_t)seq;
  k->cur_head = head;
  k->pc = C_RUN;
  if (++s->runs[t] > (e->sc->mix[t] ? 2 : 1))
    violation(e, "a block of task %s ran twice", task_name(t));
}

/* handoff_core_may_keep: nothing placed behind, no MIX queued */
static bool may_keep(mstate *s, int c) {
  return s->c[c].dispatched == s->c[c].next && q_size(s, Q_MIX) == 0;
}

/* ---- the core's steps (core.c core_serve, head_take.h) ---- */

static void core_step(explorer *e, mstate *s, int c) {
  cstate *k = &s->c[c];
  const scenario *sc = e->sc;
  switch (k->pc) {
  case C_WAIT: {
    int t = k->slot_task[k->next & 1];
    start_block(e, s, c, t, s->seq[t], false);
    k->chain = k->completed = k->pushed = 0;
    break;
  }
  case C_RUN: {
    int t = k->cur;
    if (k->chain) { /* a kept or taken block: completed here in any case */
      k->keep = may_keep(s, c);
      k->pc = C_COMPLETE;
    } else if (!sc->mix[t] && (sc->succ[t] >= 0 || q_size(s, Q_AIV) > 0) && may_keep(s, c)) {
      k->chain = 1;
      k->keep = 1;
      k->pc = C_COMPLETE;
    } else {
      k->pc = C_FIN;
    }
    break;
  }
  case C_COMPLETE: { /* sched_complete_here */
    int t = k->cur, n = sc->succ[t];
    k->completed = 1;
    complete(e, s, t);
    if (n >= 0 && k->keep && q_size(s, Q_AIV) == 0) {
      /* kept: it stands in the slot's place for the passes' has_room */
      k->slot_movable[k->next & 1] = 1;
      e->kept++;
      start_block(e, s, c, n, 0, false);
      break;
    }
    if (n >= 0) {
      push_now(s, Q_AIV, n);
      k->pushed = 1;
    }
    k->pc = C_TAKE;
    break;
  }
  case C_TAKE: { /* head_take */
    k->pc = C_FIN;
    if (!k->keep || k->pushed || q_size(s, Q_AIV) == 0) break;
    /* the queue's claim lock held: one step */
    rq q;
    load_q(&q, s, Q_AIV);
    uint64_t at = rq_pop_head(&q);
    uint32_t idx;
    bool same = k->dispatched == k->next || e->variant == V_TAKE_IGNORES_DISPATCH;
    if (!same && rq_pop_cell(&q, at, &idx)) e->refused++;
    if (same && rq_pop_cell(&q, at, &idx)) {
      e->takes++;
      s->seq[idx] = ++s->nclaims;
      rq_pop_advance(&q, at + 1);
      k->slot_movable[k->next & 1] = 0;
      start_block(e, s, c, (int)idx, s->seq[idx], true);
    }
    store_q(&q, s, Q_AIV);
    break;
  }
  case C_FIN:
    k->slot_deferred[k->next & 1] = k->completed;
    k->finished = k->next++;
    k->chain = 0;
    k->pc = C_WAIT;
    break;
  default: break;
  }
}

static bool core_enabled(const mstate *s, int c) {
  const cstate *k = &s->c[c];
  return k->pc != C_WAIT || k->dispatched >= k->next;
}

/* ---- the pass's steps (sched.c) ---- */

static bool owns(const explorer *e, int sch, int c) { return owner(e, c) == sch; }

/* Whether scheduler sch has something to do (a pass it would start). */
static bool pass_has_work(explorer *e, mstate *s, int sch) {
  pstate *p = &s->p[sch];
  bool room = false, idle_cluster = e->sc->nsched == 1;
  for (int c = 0; c < NCORE; c++) {
    if (!owns(e, sch, c)) continue;
    if (s->c[c].finished != p->seen[c]) return true;
    room |= has_room(s, p, c, 1);
    idle_cluster &= has_room(s, p, c, e->variant == V_MIX_BEHIND ? 1 : 0);
  }
  return (room && q_size(s, Q_AIV) > 0) || (idle_cluster && q_size(s, Q_MIX) > 0);
}

static void pass_step(explorer *e, mstate *s, unsigned sch) {
  if (sch >= MAXS) return;
  pstate *p = &s->p[sch];
  const scenario *sc = e->sc;
  switch (p->pc) {
  case P_POLL:
    for (int c = 0; c < NCORE; c++) {
      if (!owns(e, sch, c)) continue;
      cstate *k = &s->c[c];
      for (int d = p->seen[c] + 1; d <= k->finished; d++) {
        int t = k->slot_task[d & 1];
        if (k->slot_deferred[d & 1]) continue; /* completed on its core */
        if (!sc->mix[t])
          complete_pushing(e, s, t);
        else if (++s->parts_seen[t] == 2)
          complete_pushing(e, s, t);
      }
      p->seen[c] = k->finished;
    }
    p->pc = sc->nsched == 1 ? P_MIX_FIT : P_IDLE_CLAIM;
    break;
  case P_MIX_FIT: { /* one cluster: both cores, idle (max_inflight 0) */
    int max = e->variant == V_MIX_BEHIND ? 1 : 0;
    p->pc = P_IDLE_CLAIM;
    if (q_size(s, Q_MIX) == 0) break;
    if (has_room(s, p, 0, max) && has_room(s, p, 1, max)) p->pc = P_MIX_CLAIM;
    break;
  }
  case P_MIX_CLAIM: /* under the MIX queue's lock */
    p->nclaimed = (uint8_t)claim_n(s, Q_MIX, 1, p->claimed);
    p->pc = p->nclaimed ? P_MIX_PLACE : P_IDLE_CLAIM;
    break;
  case P_MIX_PLACE:
    core_dispatch(e, s, p, 0, p->claimed[0]);
    core_dispatch(e, s, p, 1, p->claimed[0]);
    p->pc = P_IDLE_CLAIM;
    break;
  case P_IDLE_CLAIM: { /* dispatch_shape(AIV, 0): idle cores, claimed under the lock */
    int n = 0;
    for (int c = 0; c < NCORE; c++)
      if (owns(e, sch, c) && inflight(p, c) == 0) p->spot_of[n++] = (uint8_t)c;
    p->pc = P_PEEK;
    if (n == 0 || q_size(s, Q_AIV) == 0) break;
    p->nclaimed = (uint8_t)claim_n(s, Q_AIV, n, p->claimed);
    if (p->nclaimed) p->pc = P_IDLE_PLACE;
    break;
  }
  case P_IDLE_PLACE:
    for (int i = 0; i < p->nclaimed; i++)
      core_dispatch(e, s, p, p->spot_of[i], p->claimed[i]);
    p->pc = P_PEEK;
    break;
  case P_PEEK: { /* placements(AIV, 1): none while a core of ours idles */
    p->pc = P_POLL;
    p->spots = 0;
    if (q_size(s, Q_AIV) == 0) break;
    for (int c = 0; c < NCORE; c++)
      if (owns(e, sch, c) && inflight(p, c) == 0) return;
    for (int c = 0; c < NCORE; c++)
      if (owns(e, sch, c) && has_room(s, p, c, 1)) p->spots |= (uint8_t)(1u << c);
    if (p->spots) p->pc = P_BEHIND;
    break;
  }
  case P_BEHIND: { /* the AIV queue's lock held: one step (but PLACE_UNLOCKED) */
    bool recheck = e->variant != V_PLACE_UNLOCKED && e->variant != V_NO_STILL_ROOM;
    int n = 0;
    for (int c = 0; c < NCORE; c++)
      if ((p->spots >> c & 1) && (!recheck || has_room(s, p, c, 1))) /* still_room */
        p->spot_of[n++] = (uint8_t)c;
    p->nclaimed = (uint8_t)(n ? claim_n(s, Q_AIV, n, p->claimed) : 0);
    p->pc = P_POLL;
    if (e->variant == V_PLACE_UNLOCKED) {
      if (p->nclaimed) p->pc = P_BEHIND_PLACE;
      break;
    }
    e->behind += p->nclaimed;
    for (int i = 0; i < p->nclaimed; i++)
      core_dispatch(e, s, p, p->spot_of[i], p->claimed[i]);
    break;
  }
  case P_BEHIND_PLACE:
    for (int i = 0; i < p->nclaimed; i++)
      core_dispatch(e, s, p, p->spot_of[i], p->claimed[i]);
    p->pc = P_POLL;
    break;
  default: break;
  }
}

/* ---- the invariants ---- */

static void check_state(explorer *e, const mstate *s) {
  for (int c = 0; c < NCORE && !e->failed; c++) {
    const cstate *k = &s->c[c];
    if (k->pc != C_RUN || k->dispatched <= k->next) continue;
    int behind = k->slot_task[(k->next + 1) & 1];
    if (k->cur_seq && s->seq[behind] < k->cur_seq)
      violation(e,
                "task %s (claim %u), placed on core %d, waits behind task %s (claim %u), which "
                "the core took from the queue's head after it",
                task_name(behind), s->seq[behind], c, task_name(k->cur), k->cur_seq);
    else if (k->cur_head && !e->order_only)
      violation(e, "task %s placed behind task %s, which core %d took from the queue's head",
                task_name(behind), task_name(k->cur), c);
  }
}

static void check_final(explorer *e, const mstate *s) {
  const scenario *sc = e->sc;
  for (int t = 0; t < sc->ntasks; t++) {
    int parts = sc->mix[t] ? 2 : 1;
    if (s->runs[t] != parts || s->done[t] != 1)
      violation(e, "task %s: %u of %d blocks run, completed %u times (expected once)", task_name(t),
                s->runs[t], parts, s->done[t]);
  }
  for (int w = 0; w < 2; w++)
    if (s->q[w].head != s->q[w].tail)
      violation(e, "%s queue left with %llu queued at the end", w == Q_AIV ? "AIV" : "MIX",
                (unsigned long long)(s->q[w].tail - s->q[w].head));
  for (int c = 0; c < NCORE; c++) {
    const pstate *p = &s->p[owner(e, c)];
    const cstate *k = &s->c[c];
    if (k->dispatched != k->finished || p->issued[c] != k->dispatched || p->seen[c] != k->finished)
      violation(e, "core %d left with dispatch %u, finished %u, issued %u, seen %u", c,
                k->dispatched, k->finished, p->issued[c], p->seen[c]);
  }
}

/* ---- search (explore.h) ---- */

#define NACT (NCORE + MAXS + 1)

static int em_nact(xp_search *x) {
  (void)x;
  return NACT;
}

static int em_apply(xp_search *x, void *state, int a, int d) {
  explorer *e = x->ctx;
  mstate *s = state;
  int kind = actor_kind(a), pc;
  if (kind == K_CORE) {
    if (!core_enabled(s, a)) return XP_SKIP;
    pc = s->c[a].pc;
  } else if (kind == K_PASS) {
    int sch = a - NCORE;
    if (sch >= e->sc->nsched) return XP_SKIP;
    if (s->p[sch].pc == P_POLL && !pass_has_work(e, s, sch)) return XP_SKIP;
    pc = s->p[sch].pc;
  } else {
    if (s->push_pc == U_DONE) return XP_SKIP;
    pc = s->push_pc;
  }
  if (d >= MAX_PATH) return XP_SKIP;
  e->path_a = x->path;
  e->path_pc[d] = (uint8_t)pc;
  e->depth = d + 1;
  if (kind == K_CORE) {
    core_step(e, s, a);
  } else if (kind == K_PASS) {
    pass_step(e, s, (unsigned)(a - NCORE));
  } else { /* the pusher: a push's two steps */
    int t = e->sc->pushes[s->push_i];
    int w = e->sc->mix[t] ? Q_MIX : Q_AIV;
    rq q;
    load_q(&q, s, w);
    if (s->push_pc == U_CLAIM) {
      s->push_pos = rq_push_claim(&q);
      s->push_pc = U_PUB;
    } else {
      rq_push_publish(&q, s->push_pos, (uint32_t)t);
      s->push_i++;
      s->push_pc = s->push_i < MAXP && e->sc->pushes[s->push_i] >= 0 ? U_CLAIM : U_DONE;
    }
    store_q(&q, s, w);
  }
  if (!e->failed) check_state(e, s);
  return e->failed ? XP_STOP : XP_STEP;
}

static int em_final(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  e->finals++;
  e->path_a = x->path;
  e->depth = d;
  check_final(e, state);
  return e->failed ? XP_STOP : XP_STEP;
}

static explorer explore(const scenario *sc, int variant, bool order_only) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.sc = sc;
  e.variant = variant;
  e.order_only = order_only;
  mstate s;
  memset(&s, 0, sizeof s);
  for (int w = 0; w < 2; w++) { /* zeroed cells, as the chip's (rq_init) */
    rq q;
    for (int i = 0; i < CAP; i++)
      atomic_store(&cellmem[w][i], 0);
    rq_init(&q, cellmem[w], CAP);
    store_q(&q, &s, w);
  }
  for (int i = 0; i < MAXN && sc->queued[i] >= 0; i++)
    push_now(&s, Q_AIV, sc->queued[i]);
  for (int c = 0; c < NCORE; c++) {
    s.c[c].next = 1;
    s.c[c].cur = NONE;
  }
  s.push_pc = sc->pushes[0] >= 0 ? U_CLAIM : U_DONE;
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_final = em_final};
  xp_explore(&m, &e, &s, &e.states, &e.failed, e.why, sizeof e.why);
  e.path_a = NULL;
  return e;
}

/* A..F: tasks 0..5 */
#define NO_SUCC                                                                                    \
  { -1, -1, -1, -1, -1, -1 }
static const scenario scenarios[] = {
    /* four independent blocks, all queued: the cores' takes race the
     * pass's placements behind them */
    {"1 sched, 2 cores: A,B,C,D queued", 1, 4, {0}, NO_SUCC, {0, 1, 2, 3, -1}, {-1}},
    /* two queued, two pushed while the cores run: the takes' peeks and
     * a head position claimed but not yet published */
    {"1 sched, 2 cores: A,B queued; push C, D", 1, 4, {0}, NO_SUCC, {0, 1, -1}, {2, 3, -1}},
    /* a MIX (AIV x2) block pushed while the cores take heads, then an AIV */
    {"1 sched, 2 cores: A,B,C queued; push MIX D, E",
     1,
     5,
     {false, false, false, true, false},
     NO_SUCC,
     {0, 1, 2, -1},
     {3, 4, -1}},
    /* a successor kept on the core (its slot movable again) beside takes */
    {"1 sched, 2 cores: A->B, C, D queued; push E",
     1,
     5,
     {0},
     {1, -1, -1, -1, -1, -1},
     {0, 2, 3, -1},
     {4, -1}},
    /* two schedulers, one core each, claiming from the one queue */
    {"2 scheds, 1 core each: A,B queued; push C", 2, 3, {0}, NO_SUCC, {0, 1, -1}, {2, -1}},
};
#define NSC (int)(sizeof scenarios / sizeof scenarios[0])

static void test_head_take_all_interleavings(void **st) {
  (void)st;
  uint64_t refused = 0;
  for (int i = 0; i < NSC; i++) {
    explorer e = explore(&scenarios[i], V_GOOD, false);
    printf("head take explorer: %s: %llu states, %llu final (steps: %llu takes, %llu refused, "
           "%llu placed behind, %llu kept): %s\n",
           scenarios[i].name, (unsigned long long)e.states, (unsigned long long)e.finals,
           (unsigned long long)e.takes, (unsigned long long)e.refused, (unsigned long long)e.behind,
           (unsigned long long)e.kept, e.failed ? e.why : "ok");
    assert_false(e.failed);
    assert_true(e.finals > 0);
    /* the races explored are reached: takes beside placements behind */
    assert_true(e.takes > 0 && e.behind > 0);
    assert_true(scenarios[i].succ[0] < 0 || e.kept > 0);
    refused += e.refused;
  }
  assert_true(refused > 0); /* a take that found a block placed behind */
}

/* The variant caught in scenario sc, its message containing `what`;
 * order_only: by the first invariant alone (a block claimed before the
 * head a core took waits behind it). */
static void caught(int variant, int sc, bool order_only, const char *what) {
  explorer e = explore(&scenarios[sc], variant, order_only);
  assert_true(e.failed); /* printed with its interleaving */
  assert_non_null(strstr(e.why, what));
}

static void test_head_take_broken_place_unlocked_caught(void **st) {
  (void)st;
  caught(V_PLACE_UNLOCKED, 1, true, "after it");
}

static void test_head_take_broken_no_still_room_caught(void **st) {
  (void)st;
  caught(V_NO_STILL_ROOM, 0, false, "placed behind");
}

static void test_head_take_broken_take_ignores_dispatch_caught(void **st) {
  (void)st;
  caught(V_TAKE_IGNORES_DISPATCH, 1, true, "after it");
}

static void test_head_take_broken_mix_behind_caught(void **st) {
  (void)st;
  caught(V_MIX_BEHIND, 2, true, "task D (claim");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_take_all_interleavings),
      cmocka_unit_test(test_head_take_broken_place_unlocked_caught),
      cmocka_unit_test(test_head_take_broken_no_still_room_caught),
      cmocka_unit_test(test_head_take_broken_take_ignores_dispatch_caught),
      cmocka_unit_test(test_head_take_broken_mix_behind_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
