/* drain.h — the drain protocol that gang-starts a sync_start task across
 * every scheduler of a chip when no single scheduler can hold its cohort.
 *
 * The protocol is a set of non-blocking step functions over one shared
 * drain_state per chip run plus one drain_part per scheduler. The scheduler
 * loop calls them; nothing here waits, sleeps or spins, so a test can drive
 * every participant from one thread in any interleaving (see
 * tests/unit/test_drain_explorer.c and docs/drain.md).
 *
 * Use from a scheduler loop (sched = this scheduler's index):
 *
 *   drain_part me;  drain_part_init(&me, sched);            // once
 *   for (;;) {
 *     retire_completions();                                 // always, even in a drain
 *     int r = drain_step(s, &me, &ops, env);
 *     if (r == DRAIN_NONE && !drain_active(s)) {             // this order, right before
 *       if (sync task T fits on my idle cores) launch it;    //   dispatching
 *       else if (sync task T is ready && !drain_request(s, sched, T, T.block_num))
 *         keep T for later;                                  // another drain is active
 *       dispatch_other_ready_work();
 *     }
 *     ... wait for completions (pto_wait) when nothing happened ...
 *   }
 *
 * The one rule for the caller: dispatch new work only after a drain_step
 * that returned DRAIN_NONE followed by drain_active() == false. A drain_step
 * that acknowledges an attempt reads this scheduler's capacity; the protocol
 * relies on that capacity only growing (completions retire, nothing new is
 * dispatched) until the drain ends.
 *
 * Steps (docs/drain.md has the full story and the ABA failure it avoids):
 *  1. drain_request(): claim the single drain slot, publish the task, advance
 *     the attempt number.
 *  2. Acknowledge through a binary tree: each scheduler waits for its (at
 *     most two) children's tokens of this attempt, then publishes its own
 *     token (attempt, capacity).
 *  3. Scheduler 0 (fixed coordinator) sums the capacities. Enough: it writes
 *     each scheduler's block range (prefix sums) and broadcasts GO for this
 *     attempt. Too little: it waits until the schedulers' advertised
 *     capacity (hints, which only grow) would be enough, then advances the
 *     attempt; everyone acknowledges again.
 *  4. Each scheduler stages exactly its range on its own idle cores and
 *     reports; the coordinator, once all have reported, calls launch() once
 *     and ends the drain.
 *  5. Every wait gives up as soon as the attempt differs from the waiter's
 *     own, or the run has ended. Every published word carries the attempt
 *     (low 32 bits), so a stale word never matches a fresh attempt. */
#ifndef PTO_CHIP_DRAIN_H
#define PTO_CHIP_DRAIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/options.h"

#define DRAIN_MAX_SCHED PTO_SCHEDULERS_MAX /* a slot per scheduler */
/* Block ranges are packed in 16 bits each next to the attempt tag. */
#define DRAIN_MAX_BLOCKS 0xffff

/* drain_step() results. */
enum {
  DRAIN_NONE = 0,     /* no drain needs this scheduler (dispatch if !drain_active) */
  DRAIN_WAITING = 1,  /* in a drain, nothing to do until others act */
  DRAIN_PROGRESS = 2, /* did a step (acknowledged, advertised, decided, retried) */
  DRAIN_STAGED = 3,   /* staged this scheduler's range of the cohort */
  DRAIN_LAUNCHED = 4, /* coordinator: every range staged, launch() called, drain over */
};

/* A participant's phase within its attempt (exposed for tests and traces). */
typedef enum drain_phase {
  DRAIN_PH_IDLE = 0, /* not in a drain */
  DRAIN_PH_ACK,      /* waiting for the children's tokens, then acknowledging */
  DRAIN_PH_WAIT_GO,  /* non-root: acknowledged; waiting for GO (advertising growth) */
  DRAIN_PH_DECIDE,   /* root: whole tree acknowledged; sum capacities */
  DRAIN_PH_SHORT,    /* root: too little capacity; waiting for the hints to suffice */
  DRAIN_PH_STAGE,    /* root: GO published; stage own range next */
  DRAIN_PH_STAGED,   /* non-root: staged and reported; waiting for the drain to end */
  DRAIN_PH_COLLECT,  /* root: staged; waiting for every report, then launch */
  DRAIN_PH_COUNT
} drain_phase;
const char *drain_phase_name(int phase);
const char *drain_result_name(int result);

/* One scheduler's published words, on its own cache line. Each word is
 * (attempt tag << 32 | payload); tag 0 never names an attempt. */
typedef struct drain_slot {
  _Alignas(64) _Atomic uint64_t token; /* (att, capacity): this subtree acknowledged */
  _Atomic uint64_t hint;               /* (att, capacity): grown capacity, advisory */
  _Atomic uint64_t quota;              /* (att, first << 16 | n): written by the coordinator */
  _Atomic uint64_t staged;             /* (att, n): this scheduler staged its range */
} drain_slot;

typedef struct drain_state {
  /* Claim and attempt words, written once or twice per attempt. */
  _Alignas(64) _Atomic uint32_t attempt; /* current attempt; 0 = never */
  _Atomic uint32_t ended;                /* attempt with which the last drain ended */
  _Atomic int busy;                      /* 1 from drain_request to the end of that drain */
  int nsched;
  /* The drain's task, published by the attempt advance of drain_request. */
  _Atomic int64_t task_id;
  _Atomic int32_t block_num;
  _Atomic int32_t requester;
  _Atomic uint32_t first_attempt;
  /* Coordinator's broadcast: (att, 1) = GO for that attempt. */
  _Alignas(64) _Atomic uint64_t go;
  /* Statistics, written by the coordinator only. */
  _Alignas(64) _Atomic uint64_t drains; /* drains completed (launched) */
  _Atomic uint64_t attempts;            /* attempts over all completed drains */
  _Atomic uint64_t max_attempts;        /* most attempts one drain needed */
  drain_slot slot[DRAIN_MAX_SCHED];
} drain_state;

/* Per-scheduler local state; only its owner touches it. */
typedef struct drain_part {
  int sched;
  int phase;    /* drain_phase */
  uint32_t att; /* the attempt this scheduler is working on */
  int need;     /* block_num of the drain's task */
  int cap;      /* capacity acknowledged in att */
  int hint;     /* capacity last advertised in att */
  int64_t task_id;
} drain_part;

/* What the protocol asks of the scheduler. env is passed back unchanged. */
typedef struct drain_ops {
  /* How many blocks of the pending task this scheduler's idle cores can hold
   * now. Must not shrink between an acknowledgement and the end of the
   * drain (nothing new is dispatched while drain_active()). */
  int (*capacity)(void *env, int sched);
  /* Put blocks [first, first + n) on this scheduler's idle cores without
   * starting them; must succeed for n <= the capacity acknowledged in this
   * attempt. Returns 0. Nonzero means the capacity contract was broken: the
   * scheduler does not report, so the cohort is never launched, and the
   * caller must latch a run error (run_ended() then frees every waiter). */
  int (*stage)(void *env, int sched, int first, int n);
  /* Called exactly once per drain, by the coordinator, after every
   * scheduler has staged: start the whole cohort. */
  void (*launch)(void *env, int64_t task_id);
  /* True once the run has failed or is shutting down. */
  bool (*run_ended)(void *env);
} drain_ops;

/* One drain_state per chip run; nsched in 1..DRAIN_MAX_SCHED. */
void drain_init(drain_state *s, int nsched);
void drain_part_init(drain_part *p, int sched);

/* Step 1. Claims the drain for task_id (1 <= block_num <= DRAIN_MAX_BLOCKS,
 * and no wider than the chip) and starts attempt 1 of it. Returns false when
 * another drain is active: keep the task and ask again later. */
bool drain_request(drain_state *s, int sched, int64_t task_id, int block_num);

/* True from a successful drain_request until that drain has ended. */
static inline bool drain_active(const drain_state *s) {
  /* acquire: pairs with the coordinator's release store of busy = 0, so a
   * scheduler that resumes dispatching sees the launched cohort's state. */
  return atomic_load_explicit(&s->busy, memory_order_acquire) != 0;
}

/* Steps 2-5 for one scheduler: does what it can right now and returns one
 * of DRAIN_NONE .. DRAIN_LAUNCHED. Never blocks. */
int drain_step(drain_state *s, drain_part *p, const drain_ops *ops, void *env);

/* Task id of the active drain, or -1 (for watchdog reports). */
int64_t drain_task(const drain_state *s);

typedef struct drain_stats {
  uint64_t drains;
  uint64_t attempts;
  uint64_t max_attempts;
} drain_stats;
/* Read after the schedulers have stopped (or as a racy snapshot). */
void drain_get_stats(const drain_state *s, drain_stats *out);

#endif
