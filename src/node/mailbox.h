/* mailbox.h — the hand-off between the node (parent) and one child process
 * (a chip or a host sub-worker), in shared memory. One frame at a time:
 * the parent posts frame gen g, the child takes it, runs it and replies
 * with gen g. Every frame and reply carries its generation, and each side
 * accepts only the generation it expects, so a stale frame or a late reply
 * of an earlier exchange can never be taken for the current one. Written
 * as non-blocking steps; the loops in node_task.c and child.c call them, and
 * tests/unit/test_mailbox_explorer.c drives the same steps over every
 * interleaving of a parent and one or two children (children dying at any
 * point, stores landing late, an abandoned exchange answered late).
 *
 * The parent posts only when the mailbox is idle, or when it gave up on the
 * outstanding exchange after the child took it (mbox_taken): the child's
 * copy of that frame is complete, so the new post cannot tear it, and the
 * late reply of the abandoned generation is never taken for the new one.
 * (the node never abandons: a missed deadline kills the run's children.) */
#ifndef PTO_NODE_MAILBOX_H
#define PTO_NODE_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "common/options.h"
#include "common/wait.h"
#include "pto/chip.h"
#include "pto/node.h"
#include "pto/orch.h"

typedef enum frame_type {
  FRAME_TASK = 1,   /* run a chip orchestration or a host callback */
  FRAME_DOM_OPEN,   /* create and zero my window of a domain */
  FRAME_DOM_ATTACH, /* after the allocation barrier: map the peers */
  FRAME_DOM_CLOSE,  /* release a domain */
  FRAME_EXIT,       /* leave the loop */
} frame_type;

typedef enum child_state { CHILD_STARTING = 0, CHILD_READY = 1, CHILD_FAILED = 2 } child_state;

typedef struct node_frame {
  uint32_t gen;
  uint32_t type;
  int64_t task_id;
  uint32_t epoch;
  int32_t group_rank, group_size;
  uint64_t group;      /* bit per node chip of the task */
  pto_orch_fn chip_fn; /* the same binary is mapped in every child (fork) */
  pto_host_fn host_fn;
  void *host_arg;
  pto_args args;
  uint64_t trace_origin_ns; /* FRAME_TASK: the node run's trace time zero; 0 = not tracing */
  int32_t trace_run;        /* FRAME_TASK: this rank's chip tasks before it in the node run */
  int32_t dom_rank;
  comm_domain_desc dom;
  int64_t sched_task; /* FRAME_TASK under a controlled schedule: its index in the run, else -1 */
  /* FRAME_TASK of a host task in checking mode: run it a second time on
   * flipped memory (node_check_host_run), over node host memory's first
   * host_used bytes */
  int32_t read_check;
  uint64_t host_used;
} node_frame;

typedef struct node_reply {
  uint32_t gen;
  int32_t status;
  pto_error_info err;
  /* FRAME_TASK: the error follows another chip's own (comm.h,
   * comm_fail_secondary), which the node reports first */
  bool secondary;
  uint64_t tasks, blocks; /* FRAME_TASK on a chip: its pto_run_stats */
  double host_us, device_us;
} node_reply;

typedef struct node_mbox {
  _Atomic uint32_t posted; /* last gen posted by the parent */
  _Atomic uint32_t taken;  /* last gen the child took */
  _Atomic uint32_t done;   /* last gen the child replied to */
  _Atomic uint32_t state;  /* child_state */
  _Atomic uint32_t beat;   /* bumped every HEARTBEAT_MS by the child while it lives */
  _Atomic uint32_t stop;   /* parent: leave now, a child that is a thread of the parent
                              (node_proc.c, stop_threads) */
  /* parent: cancel the task of frame gen G, as chip C of its group failed:
   * (G << 32) | (C + 1) (comm.h, pto_comm.cancel; node_task.c); also the
   * run's cancel and the node's stop (COMM_CANCEL_RUN, COMM_CANCEL_STOP) */
  _Atomic uint64_t cancel;
  pto_event to_child; /* signalled with every post */
  node_frame frame;
  node_reply reply;
  /* child: why it failed to start, written before its state turns
   * CHILD_FAILED (mbox_set_failed): the parent names it with the exit */
  char start_why[240];
} node_mbox;

/* A child process proves it is not stopped or frozen by bumping its
 * mailbox's `beat` from a thread of its own; the parent gives up on it after
 * control_timeout_ms without a beat while it waits for that child. */
#define HEARTBEAT_MS ((int)pto_option(PTO_OPT_HEARTBEAT_MS)) /* default 100 */

void mbox_init(node_mbox *mb);
/* Parent: true when no exchange is outstanding. */
bool mbox_idle(node_mbox *mb);
/* Parent: posts *f (its gen is set) and wakes the child; the mailbox must
 * be idle or its outstanding frame taken (see above). */
uint32_t mbox_post(node_mbox *mb, node_frame *f);
/* Parent: has the child taken gen? */
bool mbox_taken(node_mbox *mb, uint32_t gen);
/* Parent: copies the reply of gen into *r when it is there. */
bool mbox_poll_reply(node_mbox *mb, uint32_t gen, node_reply *r);
/* Child: takes the next frame after `last` into *f; false when none. */
bool mbox_take(node_mbox *mb, uint32_t last, node_frame *f);
/* Child: publishes the reply of gen and wakes the parent. */
void mbox_reply(node_mbox *mb, const node_reply *r, pto_event *parent);
/* Relay on the parent's side (mpi_relay.c), standing in for a child in
 * another process: copies frame gen > last into *f without taking it (the
 * remote child takes it: mbox_mark_taken); false when none is posted. */
bool mbox_peek(node_mbox *mb, uint32_t last, node_frame *f);
/* Relay: the remote child took gen. */
void mbox_mark_taken(node_mbox *mb, uint32_t gen);
/* Parent: the task of frame gen, which the child runs, is cancelled, as
 * chip `failed` of its group failed, or COMM_CANCEL_RUN: the run was
 * cancelled, or COMM_CANCEL_STOP: the node stopped the child, a thread of
 * its process (comm.h, pto_comm.cancel: its waits end, and its kernels see
 * pto_kctx_cancelled). */
void mbox_cancel(node_mbox *mb, uint32_t gen, int failed);
/* Relay on a chip rank (mpi_relay.c), standing in for the parent: rank 0's
 * cancel word w (0: none) for its frame `remote`, which this mailbox runs
 * as its own frame `local` (0: none yet), `replied` or not. Stores it in
 * the local generation when it names that frame and no reply went; false
 * otherwise (a word for a frame that has not come yet applies once it
 * has: call again; one for a frame that ended here, never). */
bool mbox_cancel_relay(node_mbox *mb, uint64_t w, uint32_t remote, uint32_t local, bool replied);
/* Child: reports start-up success or failure. */
void mbox_set_state(node_mbox *mb, child_state s, pto_event *parent);
/* Child: reports start-up failure, saying why (printf format) in start_why. */
void mbox_set_failed(node_mbox *mb, pto_event *parent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
child_state mbox_state(node_mbox *mb);

#endif
