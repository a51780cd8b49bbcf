/* graph_rec.h — the record of a captured graph (pto/graph.h), shared by
 * graph_record.c (what submit records while a capture runs: it depends on
 * no chip file but run.c) and graph.c (the public calls, which run the
 * chip). */
#ifndef PTO_CHIP_GRAPH_REC_H
#define PTO_CHIP_GRAPH_REC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "chip/redux.h"
#include "common/region.h"
#include "pto/chip.h"
#include "pto/graph.h"
#include "pto/orch.h"
#include "pto/tensor.h"

/* One task of the record: slot fields, and where its arguments, edges
 * and predecessors start in the graph's arrays. */
typedef struct graph_task {
  int32_t kernel; /* -1: dummy */
  int32_t block_num, units_total;
  int32_t ntensors, nscalars;
  int8_t shape;
  bool sync_start;
  int8_t priority;
  bool fixed;             /* a runtime task (a REDUX combine): its scalars are not bound */
  uint32_t redux_args;    /* bit i: tensor i is a REDUX argument's copies (the slot's) */
  uint32_t commute_args;  /* bit i: tensor i is a COMMUTE view */
  uint32_t arg0, scalar0; /* first tensor / scalar in the arrays (fixed: in `fixed`) */
  uint32_t cm0;           /* its COMMUTE views: run_cm[cm0 ..] */
  uint32_t pred0, npred;  /* predecessors: preds[pred0 ..] (trace arrows) */
  uint32_t succ0, nsucc;  /* successors: succ[succ0 ..] (built at the end) */
  /* its lowest-numbered predecessor, whose slot a launch fills first and
   * whose fill sets this task's fanin (graph.c); UINT32_MAX: a root */
  uint32_t first_pred;
  int64_t pre; /* every task up to pre is its ancestor (graph_record.c) */
  /* the REDUX arguments' ops (task.redux_op) */
  uint8_t redux_op[REDUX_GROUPS];
} graph_task;

/* Where a tensor argument's base comes from at a launch. */
typedef struct graph_arg {
  int32_t buffer; /* bound buffer index, or -1: the launch's heap piece */
  int64_t delta;  /* bytes from that base to the view's buf */
} graph_arg;

/* A REDUX argument's private copies, set to the op's identity at each
 * launch where submit sets them (redux_identity_copies: a dummy task's,
 * and every one in checking mode; elsewhere the cores set their own): the
 * argument's view in run_views, and how many copies it has. */
typedef struct graph_init {
  uint32_t arg;
  int32_t op;
  int32_t units;
  bool dummy; /* its task runs on no core */
} graph_init;

typedef struct graph_buf {
  uint8_t *buf;
  size_t bytes;
  int32_t dtype;
} graph_buf;

/* Two bound buffers that overlapped at capture, and by how much apart. */
typedef struct graph_pair {
  int32_t a, b; /* a < b */
  int64_t dist; /* buf_b - buf_a */
} graph_pair;

struct pto_graph {
  pto_chip *chip;
  uint64_t chip_uid; /* chip->uid at capture: a chip made at its address since is another */
  int status;        /* the capture's own failure, latched as the run's */
  /* tasks and their arguments, as recorded */
  graph_task *tasks;
  uint32_t ntasks, tasks_cap;
  pto_tensor *views; /* every tensor argument as captured */
  graph_arg *args;   /* and where its base comes from */
  uint32_t nargs, args_cap, views_cap;
  uint64_t *scalars;
  uint32_t nscalars, scalars_cap;
  uint64_t *fixed; /* the scalars of runtime tasks (graph_task.fixed), as captured */
  uint32_t nfixed, fixed_cap;
  graph_init *inits; /* every REDUX argument, in submission order */
  uint32_t ninits, inits_cap;
  uint32_t ncm; /* COMMUTE views over all tasks */
  pto_task_id *preds;
  uint32_t npreds, preds_cap;
  graph_buf *bufs;
  uint32_t nbufs, bufs_cap;
  int32_t *bufmap; /* buffer index + 1 by base pointer (graph_record.c) */
  uint32_t bufmap_cap;
  uint32_t *mark;     /* tasks_cap: scratch stamps of the producer reduction */
  uint64_t heap_span; /* heap bytes the capture used, from the ring's base */
  /* built once the capture has ended */
  uint32_t *succ;  /* successors by producer, newest first (as a fanout list) */
  int32_t *fanin;  /* each task's predecessors: its initial fanin */
  uint32_t *roots; /* tasks with no predecessor, in submission order */
  uint32_t nroots;
  uint32_t nsync;    /* sync_start tasks */
  graph_pair *pairs; /* overlapping buffer pairs, sorted by (a, b) */
  uint32_t npairs;
  /* a launch's: the rebased views and scalars, and the bases they were
   * rebased for (the same bases again need no rebase) */
  pto_tensor *run_views;
  uint64_t *run_scalars;
  region_view *run_cm; /* the COMMUTE views of run_views, normalised at each launch */
  uint8_t **bases;     /* nbufs + 1: the last is the heap piece */
  bool rebased;
  /* Its last launch left every slot as its next launch starts it (`warm`,
   * set by pto_graph_launch): the launch succeeded on the path that fills
   * and pushes as it goes (`warm_path`, set by replay_orch), so every
   * task completed and each completion set its slot's fanin and counts
   * back (sched.c, complete_task). A launch in the chip run right after
   * that one (`warm_seq`, pto_chip.run_seq), with no run between to
   * write the slots, is warm: it writes no slot (graph.c, replay_orch). */
  bool warm, warm_path;
  uint64_t warm_seq;
  int64_t launches, warm_launches; /* runs launched, and how many warm (pto_graph_info) */
  /* a launch in progress: the arrays above are its (two threads launching
   * one graph at once would write them under each other); or held by its
   * chip after a launch whose run ended with a thread inside; or destroyed
   * during either, to be freed by the launch or the chip (graph.c:
   * GRAPH_IDLE, _LAUNCHING, _HELD, _DOOMED) */
  _Atomic int busy;
};

/* One pto_graph_launch call, on its thread's stack: what its run did with
 * the graph (replay_orch and the run's end, on that thread) */
typedef struct graph_launch {
  pto_graph *g;
  bool started; /* the run started the replay (a refused run did not) */
  uint64_t seq; /* that run (pto_chip.run_seq) */
  bool held;    /* the run ended with a thread inside: the chip holds g */
} graph_launch;

#endif
