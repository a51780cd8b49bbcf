/* test_ready_explorer.c — the ready queue (src/chip/ready_queue.h) as used
 * by src/chip/sched.c, explored over every interleaving of 2 and 3
 * threads, with broken variants caught.
 *
 * Model: threads run scripts of two operations made of the real inline
 * step functions, one atomic operation per step, on a queue loaded from
 * and stored back to the explored state (interleavings are sequentially
 * consistent):
 *   PUSH t    rq_push_claim, rq_push_publish           (sched_make_ready)
 *   PUSH2 t   tasks t and t + 1 made ready together (ready_batch.h):
 *             rq_push_claim_n of 2 positions, then rq_push_publish of
 *             each, in order                          (rb_push)
 *   CLAIM m   under the claimers' lock (sched.c rq_claim): LOCK, then
 *             rq_pop_head, then per task rq_pop_cell (published? else
 *             done), take up to m blocks of it, rq_pop_advance when its
 *             last block is taken, else UNLOCK with it left at the head
 * A depth-first search with a visited set (explore.h) checks:
 *  - a publish never overwrites a position whose task was not fully
 *    claimed (the capacity argument of ready_queue.h);
 *  - blocks are claimed in queue order: every block of a task a pusher
 *    pushed first is claimed before any block of its next;
 *  - in every final state, after claiming what is left, every block of
 *    every task was claimed exactly once and the queue is empty.
 * Runs N and N+1: in the scenarios with a reset, run N fails with
 * whatever its scripts left queued (its leftovers are never claimed), the
 * chip resets the queue between the runs (chip.c run_reset: rq_discard,
 * an action enabled once every thread is done and the lock is free), and
 * the threads run run N+1's scripts on the same cells, whose capacity
 * covers one run's live tasks only. Checked besides: run N+1 never claims
 * a position pushed in run N, and its final state is as above for its
 * own tasks.
 * Broken variants, each must be caught with the interleaving printed:
 *  - NO_TAG: a claimer that trusts tail > head instead of the cell's tag
 *    takes last lap's word, a task claimed twice or one claimed early;
 *  - CAP_TOO_SMALL: one cell fewer than the tasks that may be queued: a
 *    publish overwrites a task nobody claimed;
 *  - OLD_RESET: the reset that left the shape queues' positions as they
 *    were: run N+1 claims run N's stale cells (its blocks run again), or
 *    a push of run N+1 overwrites the cell its head waits on;
 *  - BATCH_SHORT: a batch of two tasks that claims one position: its
 *    second publish lands on a position nobody claimed for it (another
 *    pusher's, or past the tail), and a task is lost or claimed twice. */
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

enum { V_GOOD = 0, V_NO_TAG, V_CAP_TOO_SMALL, V_OLD_RESET, V_BATCH_SHORT };
enum {
  PC_NEXT, /* start the script's next operation */
  PC_PUSH_CLAIM,
  PC_PUSH_PUB,
  PC_LOCK, /* the claimers' lock (free: take it; else wait here) */
  PC_POP_HEAD,
  PC_POP_CELL, /* published? then take blocks (claimer-private) */
  PC_ADVANCE,  /* rq_pop_advance after the task's last block */
  PC_UNLOCK,
  PC_DONE,
  PC_RESET /* in a path: the reset between the runs */
};
static const char *pc_name[] = {"NEXT",     "PUSH_CLAIM", "PUSH_PUB", "LOCK", "POP_HEAD",
                                "POP_CELL", "ADVANCE",    "UNLOCK",   "DONE", "RESET"};

#define MAXT   3 /* threads */
#define MAXN   6 /* tasks, of both runs */
#define MAXC   4 /* cells: one run's tasks rounded up to a power of two */
#define MAXB   2 /* blocks per task */
#define MAXOPS 3

typedef struct op {
  int kind; /* 0 none, 1 push, 2 claim, 3 push2 (a batch of two) */
  int arg;  /* push: task; push2: its first task; claim: blocks */
} op;

typedef struct scenario {
  const char *name;
  int nthreads, ntasks;
  int blocks[MAXN];
  op ops[MAXT][MAXOPS];
  /* > 0: run N has tasks 0..reset_at-1 and fails; after the reset, the
   * threads run ops2 (run N+1, tasks reset_at..ntasks-1) */
  int reset_at;
  op ops2[MAXT][MAXOPS];
} scenario;

typedef struct mstate {
  uint64_t head, tail, cells[MAXC];
  uint64_t p[MAXT], h[MAXT];
  uint8_t next_block[MAXN], first_claim[MAXN], last_claim[MAXN];
  uint8_t claims[MAXN][MAXB];
  uint8_t nclaims, lock;
  uint8_t pc[MAXT], opi[MAXT], want[MAXT], cur[MAXT];
  uint8_t left[MAXT];  /* a push's tasks not yet published */
  uint8_t run;         /* 0: run N, 1: run N+1 (after the reset) */
  uint64_t reset_tail; /* run N's tail at the reset: its positions lie below */
} mstate;

#define MAX_PATH 256

typedef struct explorer {
  const scenario *sc;
  int variant, cap;
  uint64_t states, finals;
  bool failed;
  char why[200];
  const int *path_t;     /* the search's path: the thread of each step */
  int path_pc[MAX_PATH]; /* and the pc it stepped from */
  int depth;
} explorer;

static _Atomic uint64_t cellmem[MAXC];

static void load_q(rq *q, const explorer *e, const mstate *s) {
  q->cells = cellmem;
  q->cap = (uint64_t)e->cap;
  atomic_store(&q->head, s->head);
  atomic_store(&q->tail, s->tail);
  for (int i = 0; i < e->cap; i++)
    atomic_store(&cellmem[i], s->cells[i]);
}
static void store_q(const rq *q, const explorer *e, mstate *s) {
  s->head = atomic_load(&q->head);
  s->tail = atomic_load(&q->tail);
  for (int i = 0; i < e->cap; i++)
    s->cells[i] = atomic_load(&cellmem[i]);
}

static void violation(explorer *e, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  printf("ready explorer (%s, variant %d): %s\n  interleaving:", e->sc->name, e->variant, e->why);
  for (int d = 0; d < e->depth; d++)
    printf(" t%d:%s", e->path_t[d], pc_name[e->path_pc[d]]);
  printf("\n");
}

/* The position whose word a cell holds (its tag minus one). */
static uint64_t word_pos(uint64_t w) { return (w >> RQ_IDX_BITS) - 1; }

static void publish(explorer *e, rq *q, mstate *s, int i) {
  uint64_t p = s->p[i];
  uint64_t old = atomic_load(&q->cells[p & (q->cap - 1)]);
  /* the previous occupant: position p - cap (none on the first lap) */
  uint64_t prev = word_pos(old);
  if (p >= (uint64_t)e->cap && (prev != p - (uint64_t)e->cap || prev >= s->head))
    violation(e,
              "publish of position %llu overwrote position %llu, which nobody claimed "
              "(head %llu): task %u lost",
              (unsigned long long)p, (unsigned long long)prev, (unsigned long long)s->head,
              (unsigned)(old & RQ_IDX_MASK));
  rq_push_publish(q, p, s->cur[i]);
}

static void claim_block(mstate *s, int t) {
  s->claims[t][s->next_block[t]++]++;
  s->nclaims++;
  if (!s->first_claim[t]) s->first_claim[t] = s->nclaims;
  s->last_claim[t] = s->nclaims;
}

/* One step of thread i. */
static void step(explorer *e, mstate *s, int i) {
  const scenario *sc = e->sc;
  rq q;
  load_q(&q, e, s);
  switch (s->pc[i]) {
  case PC_NEXT: {
    const op *o = s->opi[i] < MAXOPS ? &(s->run ? sc->ops2 : sc->ops)[i][s->opi[i]] : NULL;
    if (!o || o->kind == 0) {
      s->pc[i] = PC_DONE;
      break;
    }
    s->opi[i]++;
    if (o->kind == 1 || o->kind == 3) {
      s->cur[i] = (uint8_t)o->arg;
      s->left[i] = o->kind == 1 ? 1 : 2;
      s->pc[i] = PC_PUSH_CLAIM;
    } else {
      s->want[i] = (uint8_t)o->arg;
      s->pc[i] = PC_LOCK;
    }
    break;
  }
  case PC_PUSH_CLAIM:
    if (s->left[i] == 1)
      s->p[i] = rq_push_claim(&q);
    else /* broken BATCH_SHORT: one position for the two */
      s->p[i] = rq_push_claim_n(&q, e->variant == V_BATCH_SHORT ? 1 : s->left[i]);
    s->pc[i] = PC_PUSH_PUB;
    break;
  case PC_PUSH_PUB:
    publish(e, &q, s, i);
    if (--s->left[i] > 0) { /* the batch's next task, at the next position */
      s->p[i]++;
      s->cur[i]++;
    } else {
      s->pc[i] = PC_NEXT;
    }
    break;
  case PC_LOCK:
    if (!s->lock) {
      s->lock = (uint8_t)(i + 1);
      s->pc[i] = PC_POP_HEAD;
    }
    break;
  case PC_POP_HEAD:
    s->h[i] = rq_pop_head(&q);
    s->pc[i] = PC_POP_CELL;
    break;
  case PC_POP_CELL: {
    uint32_t idx;
    bool ok = rq_pop_cell(&q, s->h[i], &idx);
    if (e->variant == V_NO_TAG) ok = s->tail > s->h[i]; /* broken: trusts the tail */
    if (s->want[i] == 0 || !ok) {
      s->pc[i] = PC_UNLOCK;
      break;
    }
    if (s->run && s->h[i] < s->reset_tail)
      violation(e,
                "run N+1 claimed position %llu, queued by the failed run N: its task %u runs again",
                (unsigned long long)s->h[i], (unsigned)idx);
    int t = (int)idx;
    while (s->want[i] > 0 && s->next_block[t] < sc->blocks[t]) {
      claim_block(s, t);
      s->want[i]--;
    }
    s->pc[i] = s->next_block[t] < sc->blocks[t] ? PC_UNLOCK : PC_ADVANCE;
    break;
  }
  case PC_ADVANCE:
    rq_pop_advance(&q, ++s->h[i]);
    s->pc[i] = PC_POP_CELL;
    break;
  case PC_UNLOCK:
    s->lock = 0;
    s->want[i] = 0;
    s->pc[i] = PC_NEXT;
    break;
  default: break;
  }
  store_q(&q, e, s);
}

static void check_final(explorer *e, const mstate *s0) {
  const scenario *sc = e->sc;
  mstate s = *s0;
  rq q;
  load_q(&q, e, &s);
  /* claim what is left, one thread, as a later pass would */
  uint64_t h = rq_pop_head(&q);
  uint32_t idx;
  while (rq_pop_cell(&q, h, &idx)) {
    if (s.run && h < s.reset_tail)
      violation(e,
                "run N+1 claimed position %llu, queued by the failed run N: its task %u runs again",
                (unsigned long long)h, idx);
    while (s.next_block[idx] < sc->blocks[idx])
      claim_block(&s, (int)idx);
    rq_pop_advance(&q, ++h);
  }
  store_q(&q, e, &s);
  if (s.head != s.tail)
    violation(e, "queue not empty at the end: head %llu tail %llu (a task nobody can claim)",
              (unsigned long long)s.head, (unsigned long long)s.tail);
  for (int t = 0; t < sc->ntasks; t++)
    for (int b = 0; b < sc->blocks[t]; b++)
      if (t < sc->reset_at ? s.claims[t][b] > 1 : s.claims[t][b] != 1)
        violation(e, "block %d of task %d claimed %u times (expected 1)", b, t, s.claims[t][b]);
  /* queue order: a pusher's task is fully claimed before its next starts */
  for (int i = 0; i < sc->nthreads; i++) {
    int last = -1;
    for (int k = 0; k < MAXOPS; k++) {
      const op *o = &(sc->reset_at ? sc->ops2 : sc->ops)[i][k];
      if (o->kind != 1 && o->kind != 3) continue;
      for (int t = o->arg; t <= o->arg + (o->kind == 3); t++) {
        if (last >= 0 && s.first_claim[t] < s.last_claim[last])
          violation(e,
                    "a block of task %d, pushed after task %d by thread %d, claimed before "
                    "task %d's last",
                    t, last, i, last);
        last = t;
      }
    }
  }
}

/* ---- search (explore.h) ---- */

/* Action nthreads, in the scenarios with a reset: the end of the failed
 * run N and the chip's reset, once every thread has left it. */
static int em_nact(xp_search *x) {
  const scenario *sc = ((explorer *)x->ctx)->sc;
  return sc->nthreads + (sc->reset_at > 0);
}

static bool all_done(const explorer *e, const mstate *s) {
  for (int i = 0; i < e->sc->nthreads; i++)
    if (s->pc[i] != PC_DONE) return false;
  return true;
}

static void reset_step(explorer *e, mstate *s) {
  rq q;
  load_q(&q, e, s);
  s->reset_tail = s->tail;
  if (e->variant != V_OLD_RESET) rq_discard(&q);
  store_q(&q, e, s);
  s->run = 1;
  for (int i = 0; i < e->sc->nthreads; i++) {
    s->pc[i] = PC_NEXT;
    s->opi[i] = 0;
  }
}

static int em_apply(xp_search *x, void *state, int i, int d) {
  explorer *e = x->ctx;
  mstate *n = state;
  if (i == e->sc->nthreads) {
    if (n->run || n->lock || !all_done(e, n)) return XP_SKIP;
    e->path_t = x->path;
    e->path_pc[d] = PC_RESET;
    e->depth = d + 1;
    reset_step(e, n);
    return e->failed ? XP_STOP : XP_STEP;
  }
  if (n->pc[i] == PC_DONE || (n->pc[i] == PC_LOCK && n->lock)) return XP_SKIP;
  e->path_t = x->path;
  e->path_pc[d] = n->pc[i];
  e->depth = d + 1;
  step(e, n, i);
  return e->failed ? XP_STOP : XP_STEP;
}

/* A state where every thread is done is final: check it. */
static int em_state(xp_search *x, const void *state, int d) {
  explorer *e = x->ctx;
  const mstate *s = state;
  if (!all_done(e, s) || (e->sc->reset_at && !s->run)) return XP_STEP;
  e->finals++;
  e->path_t = x->path;
  e->depth = d;
  check_final(e, s);
  return e->failed ? XP_STOP : XP_STEP;
}

static explorer explore(const scenario *sc, int variant) {
  explorer e;
  memset(&e, 0, sizeof e);
  e.sc = sc;
  e.variant = variant;
  /* cells for every task (a power of two, as the chip's); one lap too
   * small in the broken variant */
  int per_run = sc->reset_at ? sc->reset_at : sc->ntasks;
  if (sc->ntasks - sc->reset_at > per_run) per_run = sc->ntasks - sc->reset_at;
  e.cap = (int)rq_cap_for((uint64_t)per_run);
  if (variant == V_CAP_TOO_SMALL) e.cap /= 2;
  mstate s;
  memset(&s, 0, sizeof s);
  rq q;
  for (int i = 0; i < e.cap; i++) /* zeroed, as the chip's calloc'd cells (rq_init) */
    atomic_store(&cellmem[i], 0);
  rq_init(&q, cellmem, (uint64_t)e.cap);
  store_q(&q, &e, &s);
  const xp_model m = {.state_size = sizeof(mstate),
                      .key_size = sizeof(mstate),
                      .max_depth = MAX_PATH - 1,
                      .nact = em_nact,
                      .apply = em_apply,
                      .on_state = em_state};
  xp_explore(&m, &e, &s, &e.states, &e.failed, e.why, sizeof e.why);
  e.path_t = NULL;
  return e;
}

/* cap = tasks (rounded up to a power of two): a second operation's pushes
 * wrap around the cells */
static const scenario scenarios[] = {
    /* one pusher, one claimer taking a block at a time: B stays at the head */
    {"push A,B(2) | claim 1, claim 2",
     2,
     2,
     {1, 2},
     {{{1, 0}, {1, 1}}, {{2, 1}, {2, 2}}},
     0,
     {{{0, 0}}}},
    /* two pushers, one claimer: FIFO per pusher, publish order */
    {"push A(2) | push B | claim 2", 3, 2, {2, 1}, {{{1, 0}}, {{1, 1}}, {{2, 2}}}, 0, {{{0, 0}}}},
    /* two claimers share a task's blocks; one cell */
    {"push A(2) | claim 1 | claim 1", 3, 1, {2}, {{{1, 0}}, {{2, 1}}, {{2, 1}}}, 0, {{{0, 0}}}},
    /* three tasks, a pusher of two, a claimer that pushes too */
    {"push A,B | push C(2) | claim 1, claim 2",
     3,
     3,
     {1, 1, 2},
     {{{1, 0}, {1, 1}}, {{1, 2}}, {{2, 1}, {2, 2}}},
     0,
     {{{0, 0}}}},
    /* two claimers racing for two tasks pushed by a third */
    {"push A,B(2) | claim 2 | claim 1",
     3,
     2,
     {1, 2},
     {{{1, 0}, {1, 1}}, {{2, 2}}, {{2, 1}}},
     0,
     {{{0, 0}}}},
    /* run N fails with A's second block queued; run N+1 pushes and claims B */
    {"run N: push A(2) | claim 1; reset; run N+1: push B | claim 1",
     2,
     2,
     {2, 1},
     {{{1, 0}}, {{2, 1}}},
     1,
     {{{1, 1}}, {{2, 1}}}},
    /* run N fails with A and B queued, unclaimed; run N+1 fills every cell */
    {"run N: push A,B; reset; run N+1: push C,D | push E,F",
     2,
     6,
     {1, 1, 1, 1, 1, 1},
     {{{1, 0}, {1, 1}}},
     2,
     {{{1, 2}, {1, 3}}, {{1, 4}, {1, 5}}}},
    /* a batch of two (one of two blocks) against a single push and a
     * claimer: the batch's tasks stay in order and adjacent */
    {"push2 A,B(2) | push C | claim 2, claim 2",
     3,
     3,
     {1, 2, 1},
     {{{3, 0}}, {{1, 2}}, {{2, 2}, {2, 2}}},
     0,
     {{{0, 0}}}},
    /* two batches racing for the tail, one claimer */
    {"push2 A,B | push2 C,D | claim 2, claim 2",
     3,
     4,
     {1, 1, 1, 1},
     {{{3, 0}}, {{3, 2}}, {{2, 2}, {2, 2}}},
     0,
     {{{0, 0}}}},
    /* a claim of run N races the pushes; two claimers in run N+1 */
    {"run N: push A,B(2) | claim 1; reset; run N+1: push C | claim 1 | claim 1",
     3,
     3,
     {1, 2, 2},
     {{{1, 0}, {1, 1}}, {{2, 1}}},
     2,
     {{{1, 2}}, {{2, 1}}, {{2, 1}}}},
};
#define NSC (int)(sizeof scenarios / sizeof scenarios[0])

static void test_ready_all_interleavings(void **st) {
  (void)st;
  for (int i = 0; i < NSC; i++) {
    explorer e = explore(&scenarios[i], V_GOOD);
    printf("ready explorer: %s: %llu states, %llu final: %s\n", scenarios[i].name,
           (unsigned long long)e.states, (unsigned long long)e.finals, e.failed ? e.why : "ok");
    assert_false(e.failed);
    assert_true(e.finals > 0);
  }
}

static void test_ready_broken_no_tag_caught(void **st) {
  (void)st;
  explorer e = explore(&scenarios[1], V_NO_TAG);
  assert_true(e.failed); /* printed above with its interleaving */
}

static void test_ready_broken_cap_caught(void **st) {
  (void)st;
  explorer e = explore(&scenarios[1], V_CAP_TOO_SMALL);
  assert_true(e.failed);
  assert_non_null(strstr(e.why, "nobody claimed"));
}

/* The reset that left the positions as they were (chip.c before
 * rq_discard): every reset scenario catches it, by a push of run N+1 over
 * a cell of run N that nobody claimed (the head waits on it forever) or by
 * run N+1 claiming a stale block of run N; both kinds are among them. */
static void test_ready_broken_old_reset_caught(void **st) {
  (void)st;
  int overwrote = 0, ran_again = 0;
  for (int i = 0; i < NSC; i++) {
    if (!scenarios[i].reset_at) continue;
    explorer e = explore(&scenarios[i], V_OLD_RESET);
    assert_true(e.failed);
    overwrote += strstr(e.why, "nobody claimed") != NULL;
    ran_again += strstr(e.why, "queued by the failed run N") != NULL;
  }
  assert_true(overwrote > 0);
  assert_true(ran_again > 0);
}

/* A batch that claims fewer positions than it publishes: caught in both
 * batch scenarios, its tasks lost or claimed twice. */
static void test_ready_broken_batch_short_caught(void **st) {
  (void)st;
  int caught = 0;
  for (int i = 0; i < NSC; i++) {
    if (strncmp(scenarios[i].name, "push2", 5) != 0) continue;
    explorer e = explore(&scenarios[i], V_BATCH_SHORT);
    assert_true(e.failed);
    caught++;
  }
  assert_int_equal(caught, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ready_all_interleavings),
      cmocka_unit_test(test_ready_broken_no_tag_caught),
      cmocka_unit_test(test_ready_broken_cap_caught),
      cmocka_unit_test(test_ready_broken_old_reset_caught),
      cmocka_unit_test(test_ready_broken_batch_short_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
