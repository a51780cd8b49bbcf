/* node_internal.h — private state of a node: its children, the control
 * block shared with them, node tasks and the live domains of a run. The
 * parent side is single-threaded (it forks, so it must not run threads). */
#ifndef PTO_NODE_INTERNAL_H
#define PTO_NODE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "chip/tensormap.h"
#include "comm/comm.h"
#include "node/mailbox.h"
#include "pto/node.h"

#define NODE_MAX_CHILDREN (PTO_NODE_MAX_CHIPS + PTO_NODE_MAX_WORKERS)

typedef struct node_ctl {
  pto_event parent_ev; /* signalled by every child reply/state change */
  node_mbox mbox[];    /* chips first, then host workers */
} node_ctl;

typedef enum task_kind { TASK_CHIP = 0, TASK_HOST = 1 } task_kind;
typedef enum task_state {
  TS_WAITING = 0, /* dependencies outstanding */
  TS_READY,
  TS_RUNNING,
  TS_DONE,
  TS_FAILED, /* ran and failed, or poisoned */
} task_state;

typedef struct node_task {
  int64_t id;
  task_kind kind;
  int nchildren;
  int children[PTO_NODE_MAX_CHIPS]; /* child slots (chips, or one worker; -1 = any worker) */
  pto_orch_fn chip_fn;
  pto_host_fn host_fn;
  void *host_arg;
  pto_args args;
  task_state state;
  int deps_left;
  int64_t *consumers;
  int nconsumers, capconsumers;
  int parts_left;
  int status;
  pto_error_info err;
  uint64_t start_ns;
  int64_t next_ready; /* next task id in its ready queue, -1 = last */
} node_task;

/* READY tasks waiting for their children, in the order they became ready,
 * linked through node_task.next_ready (ids; -1 = empty). */
typedef struct task_queue {
  int64_t head, tail;
} task_queue;

typedef struct child_slot {
  pid_t pid;
  bool alive;
  int wstatus;
  int64_t task; /* running node task id, -1 = none (or a control frame) */
  uint32_t gen; /* outstanding frame gen, 0 = none */
  uint64_t posted_ns;
  uint32_t beat_seen; /* the child's heartbeat at beat_ns */
  uint64_t beat_ns;
  node_reply reply; /* reply of a control frame */
  bool replied;
} child_slot;

struct pto_node {
  pto_node_config cfg;
  int device_ids[PTO_NODE_MAX_CHIPS];
  int lease_fds[PTO_NODE_MAX_CHIPS];
  int nchildren;
  child_slot child[NODE_MAX_CHILDREN];
  pid_t parent_pid;
  node_ctl *ctl;
  size_t ctl_bytes;
  unsigned char *host;
  size_t host_used;
  void *space; /* reserved address space for windows */
  uint64_t space_used;
  char prefix[48];                    /* run-unique shm name prefix, e.g. "/pto.123.0.ab12cd" */
  char *trace_path;                   /* cfg.trace_path, owned; NULL = not tracing */
  uint64_t trace_origin_ns;           /* time zero of the current run's trace */
  int trace_runs[PTO_NODE_MAX_CHIPS]; /* chip tasks posted per rank this run */
  pto_comm observer;                  /* the orchestrator's view of the domains */
  comm_domain_desc doms[COMM_MAX_DOMAINS];
  bool dom_live[COMM_MAX_DOMAINS];
  int32_t next_dom;
  int fatal; /* the node is broken (a child died or hung) */
  pto_error_info fatal_err;
  /* the current run */
  bool running;
  tmap tm;
  node_task *tasks;
  int64_t base_id, ntasks, captasks, oldest_live;
  int64_t next_id;    /* node-lifetime task ids: epochs never repeat */
  int64_t unfinished; /* tasks of the run neither done nor failed */
  /* dispatch looks only at queue heads, never at every live task */
  task_queue ready_slot[NODE_MAX_CHILDREN]; /* single-child tasks, by child slot */
  task_queue ready_any;                     /* host tasks for any worker */
  task_queue ready_group;                   /* tasks of several chips */
  int first_err;
  pto_error_info first_info;
};

struct pto_node_orch {
  pto_node *node;
};

/* rank_trace.c: where chip rank `rank` writes the trace of its chip task number
 * `run` (0, 1, ... within a node run): "<trace_path>.<prefix>.rank<r>.<run>",
 * unique to this node. Returns false if it does not fit in len. */
bool node_rank_trace_path(const pto_node *n, int rank, int run, char *buf, size_t len);
/* rank_trace.c: at the end of a node run, merges the ranks' trace files into
 * trace_path and removes them. Returns 0, or the merge's error (why says more). */
int node_trace_finish(pto_node *n, char *why, size_t whylen);

/* child.c: the loop of a chip or worker child; never returns. */
void node_child_main(pto_node *n, int slot) __attribute__((noreturn));

#endif
