/* run.h — the private state of one chip run, shared by the orchestrator
 * (orch.c), the schedulers (sched.c), the cores (core.c) and the watchdog
 * (watchdog.c). Ownership of each field is stated next to it: "orch" fields
 * are touched only by the orchestrator thread; atomics are shared. */
#ifndef PTO_CHIP_RUN_H
#define PTO_CHIP_RUN_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "chip/commute.h"
#include "chip/core_sets.h"
#include "chip/drain.h"
#include "chip/gather.h"
#include "chip/heap_live.h"
#include "chip/ready_queue.h"
#include "chip/redux.h"
#include "chip/ring.h"
#include "chip/role.h"
#include "chip/tensormap.h"
#include "chip/wake_budget.h"
#include "common/cacheline.h"
#include "common/spinlock.h"
#include "common/trace.h"
#include "common/wait.h"
#include "pto/chip.h"
#include "pto/orch.h"

#define PTO_MAX_KERNELS 256

/* Resource shape of one block: how many AIC and AIV cores of one cluster it
 * occupies at once. */
typedef enum shape {
  SHAPE_AIC = 0,  /* 1 AIC */
  SHAPE_AIV,      /* 1 AIV */
  SHAPE_AIV2,     /* 2 AIV of one cluster (MIX) */
  SHAPE_AIC_AIV,  /* 1 AIC + 1 AIV (MIX) */
  SHAPE_AIC_AIV2, /* 1 AIC + 2 AIV (MIX) */
  SHAPE_COUNT,
  SHAPE_DUMMY = SHAPE_COUNT,
} shape;

/* AIC and AIV cores a block of shape s occupies (a dummy: none), read
 * from bit tables (two instructions: submit asks four times, and every
 * announce): one bit a shape for the AIC, two for the AIV count. */
#define SHAPE_AIC_BITS (1u << SHAPE_AIC | 1u << SHAPE_AIC_AIV | 1u << SHAPE_AIC_AIV2)
#define SHAPE_AIV_BITS                                                                             \
  (1u << 2 * SHAPE_AIV | 2u << 2 * SHAPE_AIV2 | 1u << 2 * SHAPE_AIC_AIV | 2u << 2 * SHAPE_AIC_AIV2)
static inline int shape_aic(shape s) { return (int)(SHAPE_AIC_BITS >> (unsigned)s & 1u); }
static inline int shape_aiv(shape s) { return (int)(SHAPE_AIV_BITS >> 2 * (unsigned)s & 3u); }

static inline const char *shape_name(int s) {
  static const char *const names[SHAPE_COUNT] = {"AIC", "AIV", "AIV x2", "AIC + AIV",
                                                 "AIC + AIV x2"};
  return s >= 0 && s < SHAPE_COUNT ? names[s] : "dummy";
}

typedef struct kernel_rec {
  char name[48];
  pto_kernel_fn aic, aiv;
  int aiv_count;
  shape shape;
  bool skip_read_check; /* checking mode runs it once per block (contract.c) */
} kernel_rec;

/* What a run's orchestration lends its kernels beyond the run's own state
 * (a graph launch: its tasks' views and scalars, graph.c). A thread left
 * inside a kernel past the run's end may still read it, so the run's end
 * then calls hold(arg), which returns what the chip keeps; the chip calls
 * release on that once the thread has left, or as the chip is freed. The
 * chip knows the loan only through these. */
typedef struct run_loan {
  void *(*hold)(void *arg);
  void (*release)(void *held);
  void *arg;
} run_loan;

struct pto_chip {
  pto_chip_config cfg;
  /* this chip among every chip the process made, never 0 or reused: what a
   * captured graph checks, where a chip made at a destroyed one's address
   * had passed for it (pto_graph_launch) */
  uint64_t uid;
  int nkernels;
  /* and, past the registered ones, the runtime's: KERNEL_REDUX_COMBINE */
  kernel_rec kernels[PTO_MAX_KERNELS + 1];
  char *trace_path;
  int trace_pid;                           /* the trace's process (a node chip's rank) */
  char trace_name[32];                     /* its name; "" = "chip" */
  uint64_t trace_origin_ns;                /* time zero shared by a node run's ranks; 0 = none */
  int64_t trace_task_base, trace_task_end; /* final task ids (chip_set_trace_task_base) */
  bool broken;                             /* a completer never left a run: no more runs */
  bool stuck; /* a thread of the last run has not left it yet (chip.c) */
  /* while stuck: what that run lent its kernels (run_loan), which the
   * thread inside may still read; given back once it has left
   * (chip_unstick) or as the chip is freed. release NULL: nothing held */
  void (*held_release)(void *held);
  void *held;
  int cpu_first; /* spread_cores: core i runs on CPU cpu_first + i (node_hooks.h) */
  /* its blocks start in the ready queues' order: a node's chip, whose
   * kernels may wait for other ranks' (chip_keep_queue_order; handoff.h) */
  bool queue_order;
  /* a kernel of a MIX shape (a block of several cores) is registered: only
   * then may a MIX block wait in a queue (handoff_core_may_keep) */
  bool mix_kernels;
  /* called by a run's first failure (run.c run_latch; node_hooks.h) */
  void (*fail_wake)(void *arg);
  void *fail_wake_arg;
  /* the node's cancel word of the node task the next runs belong to
   * (chip_set_node_cancel; node_hooks.h), copied into each run */
  const _Atomic uint64_t *node_cancel;
  uint32_t node_cancel_gen;
  const char *(*node_cancel_why)(void *arg, char *buf, size_t n);
  void *node_cancel_arg;
  _Atomic int running;
  /* the run state and its threads: made at the first run, reset by each
   * run, freed by destroy (chip.c) */
  struct pto_run *run;
  uint64_t run_seq;                /* runs started (64 bits: never wraps, graph.c warm) */
  struct pto_run *_Atomic cur_run; /* the run in progress (async completions) */
  /* Async completion slots belong to the chip, not to a run: a completer
   * may come late. Each begin takes a fresh chip-wide generation, so a
   * token never matches again once its block completed or its run ended. */
  struct async_slot *async;
  uint32_t nasync;
  _Atomic uint64_t async_gen; /* generations handed out (48 bits in a token) */
  /* pto_chip_async_complete calls in flight, counted in the current phase;
   * the end of a run flips the phase and waits for the old one to drain,
   * so a stream of later calls cannot hold it up */
  _Atomic uint32_t async_phase;
  _Atomic int32_t async_calls[2];
  /* Checking mode on a chip of a node (node_hooks.h): the views the node
   * task running now lets any of its ranks write (its OUTPUT_EXISTING,
   * INOUT, NO_DEP, COMMUTE arguments), which the other ranks and their
   * remote stores may change while a unit of this chip runs. Set by the
   * node between chip runs. */
  pto_tensor shared_writes[PTO_MAX_TENSOR_ARGS];
  int nshared_writes;
  bool in_node_task;
  int nredux_ops; /* pto_redux_register: op PTO_REDUX_USER + i is redux_ops[i] */
  redux_user_op redux_ops[PTO_MAX_REDUX_OPS];
};

/* The kernel id of the tasks that combine a reduction's private copies
 * (redux.h): past every id a user can register, so it never shifts theirs */
#define KERNEL_REDUX_COMBINE PTO_MAX_KERNELS

/* A task's state (task.state, through task_state / task_set_state): the
 * value, tagged with the run that stored it (pto_run.state_tag), so that
 * a state an earlier run left reads as PENDING: a warm graph launch
 * (graph.c) writes no slot, and its tasks must not read as done before
 * they ran in it. */
enum { TASK_PENDING = 0, TASK_READY, TASK_DONE };
#define TASK_STATE_BITS 2
enum { ALONE_NO = 0, ALONE_YES, ALONE_ENDING }; /* pto_run.alone */

/* fanout_head values besides a node index */
#define FANOUT_EMPTY  ((int64_t)-1)
#define FANOUT_CLOSED ((int64_t)-2)

/* One task slot. Written by the orchestrator before the task is published
 * (its links into its producers' lists, release, after which a producer's
 * completion may make it ready; or the submit's own drop of the edges that
 * found their producer done, acq_rel), read-only afterwards except for the
 * atomics. Slots start on a cache line, and their fields are grouped into
 * lines by who writes them, so that linking a consumer to a producer that
 * a core is running does not wait on the line that core is writing:
 *   line 0, read-only once published (cores read it at dispatch and run);
 *   line 1, the producer side: consumers link into fanout_head
 *           (orchestrator), completion closes the list; plus the
 *           orchestrator's own;
 *   line 2, execution: readiness, claiming, block ends, gang start. */
typedef struct task {
  PTO_LINE_ALIGNED pto_task_id id;
  pto_tensor *tensors; /* in the args ring */
  uint64_t *scalars;
  int32_t kernel; /* -1: dummy */
  int32_t block_num;
  int32_t units_total; /* block_num * cores per block */
  int32_t ntensors, nscalars;
  int8_t shape; /* enum shape */
  bool sync_start;
  int8_t scope_depth;  /* orch */
  bool commute;        /* has COMMUTE views: excluded from overlapping ones (commute.h) */
  int8_t priority;     /* 0 .. PTO_PRIORITY_MAX: its ready queue level (ready_queue.h) */
  bool fixed_fanout;   /* a graph launch's: nobody links into fanout_head (sched.c) */
  uint32_t redux_args; /* bit i: tensor i is a REDUX argument's slots (redux.h) */
  /* the op of each REDUX argument, in argument order: the core sets its
   * copy to the op's identity before the kernel (redux_unit_identity) */
  uint8_t redux_op[REDUX_GROUPS];
  /* Consumers' dependency nodes, a lock-free stack: the orchestrator pushes
   * (CAS), completion closes it once (exchange with FANOUT_CLOSED); in a
   * graph launch, the successor list, written before the run's first push
   * and only read (fixed_fanout). */
  PTO_LINE_ALIGNED _Atomic int64_t fanout_head;
  pto_task_id dep_mark; /* orch: last submit that listed it as a producer */
  uint32_t ndeps;       /* orch: its dependency nodes, the last before dep_end */
  /* a graph launch's: its predecessors, what its completion sets `fanin`
   * back to for the graph's next launch (graph.c: a warm launch); on the
   * line the completion reads fanout_head from */
  int32_t fanin0;
  int64_t pre; /* orch: every task up to pre is its ancestor or retired at its submit */
  uint64_t heap_end, args_end; /* orch: ring heads after this task's allocations */
  uint64_t dep_end;    /* orch: dep ring head after this task's nodes (its retirement frees them) */
  pto_task_id dep_max; /* orch: its newest producer with a node (-1: none; dep_reduce's rule 2) */
  PTO_LINE_ALIGNED _Atomic int32_t state;
  _Atomic int32_t fanin; /* producers not finished (+ 1 while a graph launch fills the slot) */
  _Atomic int32_t units_done;
  int32_t next_block;                             /* under its ready queue's lock */
  _Atomic int32_t cohort_go;                      /* sync_start: blocks start when nonzero */
  _Atomic uint64_t first_start_ns, last_start_ns; /* sync_start spread */
  _Atomic uint64_t drain_ns; /* sync_start: when its drain began (relaxed; stats only) */
} task;
_Static_assert(sizeof(task) == 3 * PTO_CACHELINE, "a task slot is three cache lines");

/* The part of its block that a core of type `type`, sub-block `sub`,
 * runs of kernel k: 0 on the AIC (or on a block's one core), then the
 * AIVs of a MIX block in sub-block order. Part 0 counts the block. */
static inline int block_part(const kernel_rec *k, pto_core_type type, int32_t sub) {
  return type == PTO_CORE_AIC ? 0 : sub + (k->aic ? 1 : 0);
}

/* The unit of part `part` of block `block` of t: its REDUX copies'
 * index (redux.h). */
static inline int task_unit(const task *t, int32_t block, int part) {
  return block * (t->units_total / t->block_num) + part;
}

/* One dependency: its consumer waits for the producer whose fanout list
 * the node is linked into. Node i belongs to the consumer (its slot: the
 * node lives no longer than it) and links into the producer's fanout
 * list, which holds indexes into the pool (deps[], not the ever-growing
 * dep_head). */
typedef struct dep_node {
  task *consumer;
  int64_t next; /* next node of the producer's fanout list, -1 = end */
} dep_node;

/* A ready queue per resource shape (`lf`, ready_queue.h; its cells are
 * `items`' storage): pushes take no lock, claimers of blocks take `lock`.
 * The sync_start queue, whose head waits for room for its whole gang, uses
 * the lock and the fields below it. */
typedef struct ready_queue {
  rq lf;                      /* priority 0 (priority.h) */
  rq up[PTO_PRIORITY_MAX];    /* priorities 1 .. PTO_PRIORITY_MAX (shape queues only) */
  _Atomic int32_t up_used;    /* a push went to `up` this run (priority.h) */
  _Atomic uint64_t *up_cells; /* their cells */
  pto_spinlock lock;
  /* the core that took the last head itself (head_take.h), -1: none this
   * run; written under the lock, on its line */
  int32_t last_taker;
  task **items;
  uint32_t cap, head;
  _Atomic uint32_t count; /* written under lock; peeked without it */
} ready_queue;

/* What a core runs: written by its scheduler before `dispatched` moves.
 * The block's fields are relaxed atomics because another scheduler's role
 * holder may read a pending one before it takes it (steal.h), while the
 * slot's owner may be writing the block two dispatches later; such a
 * read is kept only if the take succeeds, which proves it was not.
 * payload_set / payload_get access them. */
typedef struct core_payload {
  task *_Atomic t;
  _Atomic int32_t block;
  _Atomic int32_t sub_block;
  bool deferred; /* written by the core: completion comes from pto_chip_async_complete */
  /* the dispatcher's: a single-core block of no gang and of priority 0,
   * which another block may wait behind and an idle core may take
   * (sched.c, steal.h); the core clears it while it runs a block of a
   * higher priority that it kept (handoff.h). Relaxed: a hint to passes */
  _Atomic bool movable;
  /* the dispatcher's: the block is its task's only unit (one block of one
   * core, no gang), so its core completes the task and then takes its
   * next block from the queue's head itself (head_take.h). Relaxed: a
   * hint to passes (sched.c, has_room) */
  _Atomic bool completes_here;
} core_payload;

/* A block as read from a slot. */
typedef struct payload {
  task *t;
  int32_t block, sub_block;
} payload;

static inline void payload_set(core_payload *p, task *t, int32_t block, int32_t sub) {
  atomic_store_explicit(&p->t, t, memory_order_relaxed);
  atomic_store_explicit(&p->block, block, memory_order_relaxed);
  atomic_store_explicit(&p->sub_block, sub, memory_order_relaxed);
  p->deferred = false;
}

static inline task *payload_task(const core_payload *p) {
  return atomic_load_explicit(&p->t, memory_order_relaxed);
}

static inline payload payload_get(const core_payload *p) {
  return (payload){payload_task(p), atomic_load_explicit(&p->block, memory_order_relaxed),
                   atomic_load_explicit(&p->sub_block, memory_order_relaxed)};
}

/* An outstanding asynchronous completion. `state` is (generation << 1) |
 * busy, so a token from an earlier use of the slot never matches.
 * Chip-owned (pto_chip.async); `t` is valid while busy within a run. */
typedef struct async_slot {
  _Atomic uint64_t state;
  task *_Atomic t; /* relaxed: ordered by the token hand-off and `state` */
} async_slot;

/* A simulated core, in cache lines by writer: its own thread's, the
 * dispatcher's (whoever holds its scheduler's role), and what neither
 * writes during a run. A role holder other than the core itself (the
 * orchestrator, another core) then misses only on what the core wrote. */
typedef struct core {
  /* set up once; read by everyone */
  PTO_LINE_ALIGNED int id, cluster, sched;
  int sched_idx; /* its index in its scheduler's cores (and core sets) */
  pto_core_type type;
  struct pto_run *run;
  pthread_t thread;
  bool started;
  bool spread;              /* orch: bound to a CPU of its own (spread.c) */
  _Atomic uint64_t entered; /* generation of the run it serves, 0: none (run_enter) */
  uint64_t last_gen;        /* thread-private: last generation served or skipped */
  int trace_track;
  /* the dispatcher's: the payload, the register the core polls, and the
   * scheduler-private counts */
  PTO_LINE_ALIGNED _Atomic uint64_t
      dispatched;       /* last dispatch id; release pairs with core's acquire */
  core_payload slot[2]; /* by dispatch id & 1 */
  _Atomic uint32_t
      woken; /* counted as waking (wake_budget.h): set by the dispatcher, cleared by the core */
  uint64_t issued; /* scheduler-private copy of dispatched */
  uint64_t seen;   /* scheduler-private: completions processed */
  /* the core's own */
  PTO_LINE_ALIGNED _Atomic uint64_t
      finished;             /* last finished id; release pairs with scheduler's acquire */
  _Atomic int64_t cur_task; /* watchdog: running task or -1 (relaxed) */
  /* the last dispatch id it claimed or lost to a taker (steal.h): the core
   * and, for its pending block, the role holder */
  _Atomic uint64_t claim;
  bool defer_current; /* core-private: the running kernel went async */
  /* core-private: its last chain left the queue's heads to another
   * (head_take.h); its pass then places none of them here (sched.c) */
  bool left_heads;
  /* core-private: the task whose block it runs now (a dispatched one, or
   * one kept in a hand-off, handoff.h: then not its slot's) */
  struct task *running;
  uint64_t handoffs;    /* core-private until join: blocks it kept and ran (handoff.h) */
  uint64_t head_yields; /* core-private until join: heads it left to another (head_take.h) */
  uint64_t first_ns;    /* first block start; core-private until join */
  uint32_t nblocks;     /* core-private: blocks run this run (pull_hold.h) */
  /* core-private until join: kernel blocks whose first part it called this
   * run (a MIX block's AIC, or its one core): pto_run_stats.blocks */
  uint64_t ran;
  /* timed blocks' running average, 0: none yet; written by the core only,
   * read by the orchestrator too (spread.c; relaxed: a hint) */
  _Atomic uint64_t block_ns;
  /* core-private until the run's end: its timed blocks this run, and
   * those of UNSTARTED_MIN_BLOCK_NS or more (orch.c, orch_unstarted_look) */
  uint32_t timed, timed_long;
  uint64_t holds; /* core-private until join: pull holds this run */
  /* the core parks here, in a run and between runs (waiters: the core;
   * seq: whoever signals) */
  PTO_LINE_ALIGNED pto_event ev;
} core;

/* The most cores a chip may have for the orchestrator to look at each of
 * them for a block not started (orch.c, orch_unstarted_look). */
#define UNSTARTED_LOOK_MAX 16
/* Blocks shorter than this (timed, pull_hold.h) do not have a run's first
 * block moved by the orchestrator's look in the next run. */
#define UNSTARTED_MIN_BLOCK_NS 150
/* ... and only after a run that timed this many blocks at least */
#define UNSTARTED_MIN_TIMED 8

/* A scheduler, in cache lines by writer: set up once; the role word pair
 * (every requester, holder and puller); what only the role holder writes. */
typedef struct sched {
  PTO_LINE_ALIGNED int id;
  struct pto_run *run;
  pthread_t thread;
  bool started;
  int ncores;
  core **cores;       /* own cores, cluster by cluster: AIC, AIV, AIV */
  core **spots;       /* scratch for placements: ncores entries */
  core **parked;      /* scratch for placements: ncores entries */
  task **claim_tasks; /* scratch for claimed blocks: ncores entries */
  int32_t *claim_blocks;
  int nclusters;
  int *clusters; /* own cluster ids */
  int trace_track;
  /* its thread's part in runs, as core.entered and core.last_gen */
  _Atomic uint64_t entered;
  uint64_t last_gen;
  PTO_LINE_ALIGNED role role; /* whoever runs its passes (the default mode): role.h */
  /* Its idle cores and its cores with a pending block, by type
   * (PTO_CORE_AIC, PTO_CORE_AIV), as of its last pass, for the other
   * schedulers' passes (sched.c: others_shown): its role
   * holder stores a count when it changed; others read it relaxed, a hint.
   * Kept only with several schedulers. */
  PTO_LINE_ALIGNED _Atomic uint32_t idle[2], pending[2];
  pto_event ev; /* its thread parks here (sched_threads mode) */
  /* the role holder's (or its thread's) */
  PTO_LINE_ALIGNED bool wake_pending; /* it made tasks ready in this pass */
  bool again;                         /* its last pass moved the drain */
  bool starved;                       /* its pass left blocks queued for want of wake budget */
  uint64_t steals;                    /* pending blocks it moved to idle cores (steal.h) */
  /* a core about to park that asked the next pass to look for a block
   * placed on a core of its type that has not started it, and the types
   * (a bit each) for which the orchestrator asked the same for any idle
   * core of ours (sched_lone_ask); the pass that looks clears them */
  core *_Atomic lone_for;
  _Atomic uint32_t lone_any;
  /* its cores by type (PTO_CORE_AIC, PTO_CORE_AIV) and blocks in flight:
   * idle ones (published: idle), ones with a pending block (published:
   * pending), and the busy ones a pass polls (core_sets.h) */
  core_set sets[2];
  uint32_t *cl_mark; /* scratch for placements: a cluster's last stamp (all cleared when
                      * the stamp wraps) */
  uint32_t cl_stamp;
  /* this pass's news, a bit per type (1 << PTO_CORE_AIC / AIV): a core
   * fell idle, a block went behind a busy core or was left queued for
   * another scheduler (sched.c, steal_or_hand_over) */
  uint8_t news;
  drain_part drain;
  uint32_t trace_att; /* last drain attempt traced */
  uint64_t first_ns, last_ns;
} sched;

typedef struct scope_rec {
  pto_task_id begin;
  pto_scope_mode mode;
} scope_rec;

/* The handle an orchestration function gets: one of the run state's
 * (r->orch), so that a pointer kept past the run is still memory pto owns,
 * and a different one each run (r->orch[run_seq % ORCH_HANDLES]), so that
 * a pointer kept from one run is not the next run's. It is the run's
 * handle while r->orch_live points to it: while pto_chip_run runs the
 * orchestration and waits for its tasks. A call with any other handle
 * does nothing and returns PTO_EINVAL (orch_live), where one kept past its
 * run once went into the chip's idle run (a submit that returned success
 * and never ran) or, being the same pointer, into the chip's next run (its
 * submits ran there, its pto_orch_fatal failed it). A handle is handed
 * out again after ORCH_HANDLES runs. */
#define ORCH_HANDLES 4096
struct pto_orch {
  struct pto_run *run; /* set when the run state is made, never changed */
};

typedef struct pto_run {
  pto_chip *chip;
  const pto_chip_config *cfg;
  pto_trace *trace; /* NULL when tracing is off */
  /* task ring */
  task *slots;        /* slot_mask + 1 of them: id & slot_mask is id's slot */
  uint32_t nslots;    /* live tasks at most (task_slots) */
  uint32_t slot_mask; /* nslots rounded up to a power of two, minus one */
  /* the run's generation, shifted past the state (TASK_STATE_BITS): what
   * every task state this run stores carries (pto_chip_run sets it before
   * any thread enters; read-only during the run) */
  int32_t state_tag;
  dep_node *deps;
  pto_task_id *dep_from; /* orch-owned: node i's producer (dep_reduce.c) */
  uint32_t ndeps;
  /* orch-owned */
  pto_task_id next_id; /* next id to hand out */
  pto_task_id retired; /* ids below this are retired */
  uint64_t dep_head, dep_tail;
  ring heap, args;
  heap_live live; /* which OUTPUT views are still valid */
  tmap tm;
  cm_table cm;    /* COMMUTE tasks held and waiting (commute.h; its lock) */
  redux_table rx; /* open REDUX groups (redux.h) */
  int scope_depth;
  scope_rec scopes[PTO_MAX_SCOPE_DEPTH + 1];
  /* pto_orch_batch_begin's depth, and the tasks made ready at their
   * submit under it, not yet pushed (sched_make_ready, sched_orch_flush) */
  int batch_depth;
  struct ready_batch *orch_batch;
  /* the orchestrator's gather (gather.h) is in use this run
   * (PTO_ORCH_GATHER, no scheduler threads), the shape of the tasks its
   * epoch holds, and the tasks it gathered */
  bool gather_on;
  int8_t gather_shape;
  uint64_t gathered;
  /* Held OUTPUT heap ranges, oldest first: only these outlive their
   * task's retirement (the task's slot, arguments and dependency nodes
   * retire as usual), while their scope is open and then until every task
   * submitted before the scope ended (its possible readers) has retired */
  ring_hole *held;
  pto_task_id *held_task;  /* first task of each range */
  pto_task_id *held_until; /* free once retired reaches it; INT64_MAX: scope open */
  int8_t *held_depth;
  uint32_t nheld, held_cap;
  pto_task_id held_release; /* smallest held_until */
  pto_task_id *depbuf;      /* producers of the task being submitted */
  uint32_t depbuf_n, depbuf_cap;
  /* shared, on lines by writer: the orchestrator's fields above and the
   * counters every completion or dispatch bumps below must not share a
   * line (each submit would miss on the line a completion just wrote) */
  PTO_LINE_ALIGNED _Atomic int64_t submitted; /* published tasks (release: slot contents) */
  /* completions signal orch_ev once `completed` reaches it; INT64_MAX
   * while the orchestrator does not wait. Read at every completion and by
   * idle cores that hold (pull_hold.h), written only when a wait begins or
   * ends: a line of its own */
  PTO_LINE_ALIGNED _Atomic int64_t orch_wake_at;
  /* tasks ready at their submit, not yet pushed (gather.h): appended by
   * the orchestrator, taken by it or by an idle core */
  gather gather;
  PTO_LINE_ALIGNED _Atomic int32_t status; /* latched first error */
  _Atomic int32_t stop;                    /* threads exit when set */
  _Atomic int32_t orch_done;
  /* a node chip's run: the node's cancel word and the generation that
   * names this run's node task (chip->node_cancel, as the run began; NULL:
   * none), on stop's line: pto_kctx_cancelled reads both (core.c) */
  const _Atomic uint64_t *node_cancel;
  uint32_t node_cancel_gen;
  PTO_LINE_ALIGNED _Atomic int64_t
      completed;               /* completed tasks (release pairs with orch acquire) */
  _Atomic uint64_t async_done; /* async completions (watchdog progress) */
  _Atomic uint64_t ready_gen;  /* sched_threads mode: bumped on every ready push */
  _Atomic uint64_t drain_gen;  /* bumped on every drain step that publishes */
  /* parked cores woken and not yet running (wake_budget.h): every pass
   * that wakes a core and every woken core write it */
  PTO_LINE_ALIGNED wake_budget wake;
  ready_queue queues[SHAPE_COUNT];
  ready_queue sync_queue;
  async_slot *async; /* the chip's slots */
  uint32_t nasync;
  uint64_t async_gen0; /* chip->async_gen when the run began: older tokens are stale */
  drain_state drain;
  pthread_mutex_t err_lock;
  pto_error_info err;
  pto_event orch_ev; /* orchestrator waits here (completions) */
  pto_event watchdog_ev;
  int ncores, nsched;
  bool sched_threads; /* cfg->sched_threads: dedicated scheduler threads */
  core *cores;
  sched *scheds;
  pthread_t watchdog;
  bool watchdog_started;
  /* Lifecycle (chip.c): the threads are made at the chip's first run and
   * serve run after run. `phase` is generation << 1 | 1 while run number
   * `generation` is in progress, generation << 1 between runs. A thread
   * takes part in a run only through run_enter/run_leave, so a run's state
   * is reset only when no thread is inside; every field below `lifecycle`
   * that a run changes is reset by run_reset (chip.c). */
  _Atomic uint64_t phase;
  _Atomic int32_t quit;    /* pto_chip_destroy: threads return */
  _Atomic int32_t alive;   /* threads not yet returned, + 1 for the chip */
  pto_event ended_ev;      /* a thread leaving a run signals it */
  _Atomic int32_t wd_busy; /* the watchdog is reading the run's state */
  _Atomic int32_t wd_idle; /* the watchdog is parked until the next run */
  /* orch: the CPUs the cores are spread over (spread.c); kept from one
   * run's end to the next run's start, when the cores are let go */
  cpu_set_t spread_cpus;
  /* The orchestrator alone on a CPU (spread.c): `alone` is ALONE_YES while
   * it is, ALONE_ENDING while the orchestrator or the watchdog ends it;
   * the CPUs it had and its thread are written before (orch) */
  _Atomic int32_t alone;
  cpu_set_t alone_cpus;
  pthread_t orch_thread;
  bool alone_tried; /* orch: this run has taken (or failed to take) a CPU of its own */
  /* orch: per core, the block it had not started at the last look of
   * orch_unstarted_look (0: none); chips of UNSTARTED_LOOK_MAX cores at
   * most */
  uint64_t unstarted[UNSTARTED_LOOK_MAX];
  int64_t unstarted_retired; /* orch: `retired` at that look */
  bool prev_blocks_long;     /* most blocks timed in the run before were long (run_reset) */
  uint64_t unstarted_asks;   /* orch: blocks it asked moved this run */
  /* stats */
  uint64_t orch_start_ns, orch_end_ns;
  _Atomic uint64_t sync_fast, sync_tasks;
  _Atomic uint64_t spread_max_ns, spread_sum_ns;
  _Atomic uint64_t drain_lat_max_ns, drain_lat_sum_ns;
  int orch_track;
  /* orch: the graph this run's orchestration is recording (graph.c), set
   * and cleared around the orchestration function; NULL otherwise */
  struct pto_graph *capture;
  /* orch: what this run's orchestration lends its kernels (run_loan), or
   * hold NULL; reset at each run's start */
  run_loan loan;
  /* checking mode's state (contract.c), NULL when off; orch */
  struct contract *contract;
  uint64_t contract_blocks; /* orch: blocks it ran (stats.blocks), reset by it */
  /* a controlled schedule's controller (schedule.h), or NULL: set before
   * the run's threads enter it, by schedule_begin; with it the intake of
   * the tasks made ready (schedule_ready, called through this pointer
   * so that sched.c, which schedule.c calls, does not depend on it) */
  struct sched_ctl *ctl;
  void (*ctl_ready)(struct pto_run *r, struct task *t);
  /* the orchestration function's handles (above): the live one, written
   * by the orchestrator (pto_chip_run) and read by any thread, NULL between
   * runs; `orch_owner` is the thread that runs it (the caller of
   * pto_chip_run): the orchestrator's state (rings, TensorMap, scopes,
   * next_id) has that one writer and no lock, so every call that touches it
   * is made there (orch_gate) */
  pto_orch *_Atomic orch_live;
  pthread_t orch_owner;
  pto_orch orch[ORCH_HANDLES];
} pto_run;

/* ---- shared helpers (defined in the file named in brackets) ---- */
/* Latch the first error and start shutdown [run.c]. */
void run_fail(pto_run *r, int code, pto_task_id task, int core, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The watchdog's PTO_ESCHED_TIMEOUT with its stall class [run.c]. */
void run_fail_stall(pto_run *r, pto_stall_class stall, pto_task_id task, int core, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));
/* An error record with nothing in it: no code, no task, core or argument
 * (what a call that takes a pto_error_info fills first, and each run). */
static inline void error_info_reset(pto_error_info *e) {
  memset(e, 0, sizeof *e);
  e->task_id = PTO_TASK_NONE;
  e->core_id = -1;
  e->arg = -1;
}
/* The run's latched first error (PTO_OK while none). */
static inline int run_latched(const pto_run *r) {
  return atomic_load_explicit(&r->status, memory_order_acquire);
}
static inline bool run_stopping(const pto_run *r) {
  /* acquire pairs with the release store in run_fail/run_finish */
  return atomic_load_explicit(&r->stop, memory_order_acquire) != 0;
}
/* A node chip's run whose node task the node cancelled, or whose chip it
 * stopped (its cancel word names the run's generation: node_hooks.h).
 * Relaxed: the word is the whole message; nothing is published with it. */
static inline bool run_node_cancelled(const pto_run *r) {
  return r->node_cancel && (uint32_t)(atomic_load_explicit(r->node_cancel, memory_order_relaxed) >>
                                      32) == r->node_cancel_gen;
}
/* Fails the run for that cancel (PTO_ESHUTDOWN, the node's reason), seen
 * by task's block on core [core.c]. */
void run_fail_node_cancel(pto_run *r, pto_task_id task, int core);
void run_wake_all(pto_run *r);
/* Task t's state in this run: PENDING when an earlier run stored it. */
static inline int32_t task_state(const pto_run *r, task *t, memory_order mo) {
  int32_t s = atomic_load_explicit(&t->state, mo);
  return (s & ~((1 << TASK_STATE_BITS) - 1)) == r->state_tag ? s & ((1 << TASK_STATE_BITS) - 1)
                                                             : TASK_PENDING;
}
static inline void task_set_state(const pto_run *r, task *t, int32_t state, memory_order mo) {
  atomic_store_explicit(&t->state, r->state_tag | state, mo);
}
static inline task *run_slot(pto_run *r, pto_task_id id) {
  /* a mask, not a division: ids live at once span fewer than nslots */
  return &r->slots[(uint64_t)id & r->slot_mask];
}
const char *run_kernel_name(const pto_run *r, const task *t);

/* What a block's trace slice shows of its task besides its name
 * (docs/tracing.md): "commute", "redux" or "priority" (with the task's
 * priority), or NULL. Read before the kernel runs: an async block's task
 * may be recycled after it. */
static inline const char *trace_block_mark(const task *t) {
  return t->commute ? "commute" : t->redux_args ? "redux" : t->priority ? "priority" : NULL;
}
/* A block's slice [t0, t1] on a core's track: part 0 (the first core of
 * a MIX block) records the block, the others args.part, so that each
 * block is counted once; mark and prio as trace_block_mark gave them.
 * The core thread (core.c) and checking mode (contract.c) record alike. */
static inline void trace_block(pto_trace *tr, int track, const char *name, pto_task_id id,
                               int32_t block, int part, const char *mark, int prio, uint64_t t0,
                               uint64_t t1) {
  if (part == 0 && !mark)
    trace_slice(tr, track, name, "block", t0, t1, id, block);
  else if (part == 0) /* a COMMUTE task's blocks: "commute": its priority */
    trace_slice_arg(tr, track, name, "block", t0, t1, id, block, mark, prio);
  else
    trace_slice_arg(tr, track, name, "block", t0, t1, id, block, "part", part);
}

/* Lifecycle of a chip thread [run.c]: parks the calling thread (on ev)
 * until a run it has not served is in progress and want(arg) says that run
 * has work for it, and enters it (returns true), or until the chip is
 * destroyed (returns false). want reads state the run's reset zeroed; who
 * makes it true signals ev. */
typedef bool (*run_want_fn)(void *arg);
bool run_enter(pto_run *r, pto_event *ev, _Atomic uint64_t *entered, uint64_t *last_gen,
               run_want_fn want, void *arg);
/* Leaves the run entered last (after its last touch of the run's state). */
void run_leave(pto_run *r, _Atomic uint64_t *entered);
static inline uint64_t run_phase_gen(uint64_t phase) { return phase >> 1; }

/* Scheduler side [sched.c] */
/* The orchestrator's thread only (a COMMUTE task may then join a held
 * task without the table's lock: commute.h, cm_ready). */
void sched_make_ready(pto_run *r, task *t);
/* sched_make_ready of tasks r->slots[idx[0 .. n - 1]], pushed as batches
 * (ready_batch.h): the tasks a graph launch's fill finds ready. */
void sched_make_ready_batch(pto_run *r, const uint32_t *idx, uint32_t n);
void sched_task_done_unit(pto_run *r, task *t, int units);
/* Hand-off (handoff.h), on the finishing core's thread: completes t, its
 * block's only unit, and returns the ready successor it kept for the
 * core, or NULL; the other ready ones are queued (announced at once when
 * one is kept). sched_handoff_end, after the core published its block's
 * end: the pass that end asks for, and the announces left. */
struct handoff;
task *sched_complete_here(struct handoff *h, task *t);
void sched_handoff_end(struct handoff *h);
/* Makes the fanin drops h holds (handoff.h, fan-in combining); returns
 * the task they made ready if it is kept for the core (only if
 * `may_keep`: nothing else runs next), else NULL (pushed). */
task *sched_release_held(struct handoff *h, bool may_keep);
/* Asks scheduler s for a pass after publishing work for it: runs the pass
 * here when nobody holds its role (the default), or wakes its thread. */
void sched_kick(pto_run *r, sched *s);
/* sched_kick for every scheduler but `except` (NULL: every one). */
void sched_kick_others(pto_run *r, const sched *except);
/* Pushes the tasks pto_orch_batch_begin's batch gathered (orch). */
void sched_orch_flush(pto_run *r);
/* Takes what the orchestrator gathered (gather.h), pushes it and asks for
 * the passes that place it. Any thread. */
void sched_gather_take(pto_run *r);
/* A core falls idle without holding (core.c): it takes what was gathered
 * unless a holder will (gather.h). */
void sched_gather_idle(pto_run *r);
/* The orchestration ended (orch_done set): the schedulers' last activity
 * is stamped even when the last block ended before (run_stats). */
void sched_orch_done(pto_run *r);
/* Role mode, an idle core of s that pulls for it: serves the requests
 * pending (role.h), as a pass of its own or through the holder. */
void sched_pull(sched *s);
/* The block core c has not started while it has no other in flight
 * (steal.h, steal_target_lone), read from c's words; 0: none. */
uint64_t sched_core_unstarted(const core *c);
/* Asks the next pass of core c's scheduler (its own in role mode when the
 * role is free) to move a block placed on a core of c's type that has
 * not started it (sched_core_unstarted; sched.c take_lone), if one is:
 * - to c, idle with nothing queued and about to park (!for_any);
 * - for_any: to an idle core of c's type, awake or parked (a futex wake,
 *   which the OS serves on an idle CPU if there is one), for the
 *   orchestrator, which found c's only block not started at two of its
 *   looks (orch.c, orch_unstarted_look). */
void sched_lone_ask(core *c, bool for_any);
/* Whether any shape's ready queue looks non-empty (a relaxed hint). */
bool sched_ready_queued(pto_run *r);
/* Blocks queued in the shape queues, a relaxed hint. */
uint64_t sched_queued_blocks(pto_run *r);
/* The calling thread is core c's (its completions prefer c for the next
 * single-core block). */
void sched_bind_core(core *c);
void *sched_main(void *arg);
/* up_cells: PTO_PRIORITY_MAX * cap words for the priority levels, or
 * NULL (the sync_start queue) */
void ready_queue_init(ready_queue *q, uint32_t cap, task **storage, _Atomic uint64_t *up_cells);

/* Core side [core.c] */
void *core_main(void *arg);

/* Watchdog [watchdog.c] */
void *watchdog_main(void *arg);
/* pto's own bookkeeping, which no program can break [watchdog.c]: at most
 * `submitted` completions; no queue position claimed and never published;
 * once the run `ended` successfully (no thread inside), every task
 * completed and every ready queue empty. A breach (a defect in pto) is
 * latched as PTO_EINTERNAL naming it, instead of passing as success, a
 * hang or a misnamed stall; returns whether it latched one. */
bool run_books_broken(pto_run *r, bool ended, uint64_t idle_ms);

/* Which CPUs a run's threads may use [spread.c] (cfg->spread_cores).
 * The orchestrator's thread calls spread_begin once its orchestration
 * function has returned (the cores that took part in the run get a CPU
 * each) and spread_end before the next one runs (they are let go);
 * spread_orch_ahead every 64 submits until it has tried (a CPU of its own
 * while it runs far ahead of cores with a backlog of short blocks, at most
 * once per run); spread_orch_share, from it or the watchdog, ends that. */
void spread_begin(pto_run *r);
void spread_end(pto_run *r);
void spread_orch_ahead(pto_run *r);
void spread_orch_share(pto_run *r);

/* Dependency reduction [dep_reduce.c]: drops, in place, each producer of
 * the task `self` being submitted that others of its producers imply, and
 * returns how many are kept, with the task's `pre` (task.pre). `cover`:
 * the largest dep_covered of the listed producers (or less). Reads the
 * listed producers' pre and dependency nodes (task.ndeps before dep_end,
 * their producers in dep_from) and overwrites dep_marks. */
uint32_t dep_reduce(pto_run *r, pto_task_id self, pto_task_id *preds, uint32_t n, int64_t cover,
                    int64_t *pre);
/* c(p), for a live task p: every task up to c(p) is p, an ancestor of p
 * or had retired at p's submit. So a task ordered after p is ordered after
 * every task up to c(p) (dep_reduce's rule 1). */
static inline int64_t dep_covered(pto_run *r, pto_task_id p) {
  int64_t pre = run_slot(r, p)->pre;
  return pre >= p - 1 ? p : pre;
}

/* Submit's listing of the producers the TensorMap reports for the task
 * `self` (orch.c, collect_dep). `cover` starts at r->retired - 1 and
 * stays the largest dep_covered of the listed ones. dep_ordered: 1 when
 * self is already ordered after p (retired, at or below cover, or
 * listed), -1 when p is not before self, 0 when p is to be listed
 * (dep_list). A producer at or below cover is not listed, and its slot is
 * not read: listing it would write its dep_mark, on the line of its
 * fanout_head that the cores write, for dep_reduce to drop it after. In
 * W4 a consumer's writer and reader of its row from the round before,
 * and a producer's 64 readers of its output, all come before the task its
 * first argument found (the round's producer, the last reducer), which
 * waited for them. (r->retired is checked too: a wait for TensorMap room
 * retires tasks.) */
static inline int dep_ordered(pto_run *r, pto_task_id self, int64_t cover, pto_task_id p) {
  if (p <= cover || p < r->retired) return 1;
  if (p >= self) return -1;
  return run_slot(r, p)->dep_mark == self;
}
static inline void dep_list(pto_run *r, pto_task_id self, int64_t *cover, pto_task_id p) {
  run_slot(r, p)->dep_mark = self;
  int64_t c = dep_covered(r, p);
  if (c > *cover) *cover = c;
}

/* Captured graphs [graph_record.c] (pto/graph.h). While r->capture is
 * set, submit first reduces the producers of the task being submitted to
 * those no other of them follows (graph_capture_reduce: the kept ones,
 * compacted, are the edges it links), then records the task it publishes
 * with them and its COMMUTE arguments (graph_capture_task: cm_mask), and nothing retires; a call
 * the record cannot hold (a host access, a ring that only retirement could make room in) fails the
 * run as PTO_EGRAPH naming `what`, through graph_capture_refuse. Both return the run's latched
 * status. */
uint32_t graph_capture_reduce(pto_run *r, pto_task_id *preds, uint32_t npreds);
int graph_capture_task(pto_run *r, const task *t, const pto_args *a, const pto_task_id *preds,
                       uint32_t npreds);
int graph_capture_refuse(pto_run *r, const char *what);
/* Holds the chip (running) if it is idle, to give back what a run that
 * ended with a thread inside holds, if that thread has left [chip.c] */
void chip_settle(pto_chip *chip);

/* Orchestrator [orch.c] */
/* The orchestrator's rings and tables; on failure `why` names the part
 * that failed and the field that sized it. */
int orch_setup(pto_run *r, char *why, size_t n);
/* Before each run: the orchestrator's state as after orch_setup, in time
 * proportional to what the previous run used. */
void orch_reset(pto_run *r);
/* After each run: moves the process-wide heap clock past it (heap_live.h). */
void orch_end(pto_run *r);
void orch_teardown(pto_run *r);
void orch_finish(pto_run *r);
/* Refuses `call` made on o from a thread other than its owner: fails the
 * run with PTO_EINVAL naming the rule (a code alone would let a caller
 * that ignores it pass a graph with a task missing as a success), and
 * touches nothing of the orchestrator's. Returns PTO_EINVAL. */
int orch_refuse_thread(pto_orch *o, const char *call);
/* Refuses `call` made on a handle that is not a run in progress (NULL, or
 * kept past its run): says why through pto_last_error (it has no run to
 * report to) and returns PTO_EINVAL. */
int orch_refuse_stale(const pto_orch *o, const char *call);
/* Whether o is the handle of the run in progress: the check of every
 * pto_orch_* and pto_submit* entry (any thread may ask). Acquire: pairs
 * with pto_chip_run's release store of orch_live (orch_owner is written
 * before it). */
static inline bool orch_live(const pto_orch *o) {
  return o && o->run && atomic_load_explicit(&o->run->orch_live, memory_order_acquire) == o;
}

/* The entry of every orchestrator call but pto_orch_fatal / _status /
 * _chip (which any thread may make during the run, and which check
 * orch_live alone): PTO_EINVAL without a run in progress or with a handle
 * that is not its own, or from another thread (refused, above), else the
 * latched status. A load, a pthread_self() and two compares: nothing on
 * the submit path notices. */
static inline int orch_gate(pto_orch *o, const char *call) {
  /* a handle that is not live is refused before the owner is read (the
   * next run may be rewriting it) */
  if (__builtin_expect(!orch_live(o), 0)) return orch_refuse_stale(o, call);
  if (__builtin_expect(!pthread_equal(pthread_self(), o->run->orch_owner), 0))
    return orch_refuse_thread(o, call);
  return run_latched(o->run);
}

#endif
