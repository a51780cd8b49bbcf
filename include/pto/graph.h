/* pto/graph.h — captured graphs: an orchestration recorded once, replayed
 * many times with new buffers and scalars, without dependency inference.
 *
 *   pto_graph *g;
 *   pto_graph_capture(chip, orchestrate, arg, &g, NULL, NULL); // a real run
 *   for (step ...) pto_graph_launch(chip, g, &bindings, &stats, &err);
 *   pto_graph_destroy(g);
 *
 * Capture runs the orchestration once, as pto_chip_run does (its results
 * are valid), and records every task: kernel, block count, sync_start, its
 * arguments, and the dependency edges pto inferred (scopes and explicit
 * dependencies included; an edge that other edges imply is left out). A launch refills the chip's
 * task slots from the record, with each task's fanin from a precomputed array and each task's
 * successors as precomputed lists, and releases the tasks with no
 * predecessor: no TensorMap, no per-task inference.
 *
 * Buffers. A tensor argument's base (`buf`) is either the chip's heap (an
 * OUTPUT buffer the runtime allocated during capture, or a view of one) or
 * the caller's memory: a *bound buffer*. Bound buffers are numbered in
 * order of first use during capture, one per distinct `buf` pointer (two
 * views with the same `buf` are one buffer; a view built from an interior
 * pointer is another buffer, overlapping the first). pto_graph_buffer()
 * describes buffer i as captured: `buf`, `buf_bytes` (the largest of its
 * views') and `dtype` (its first view's). A launch may rebind each to new
 * memory of the same size and dtype; every view of it moves with it
 * (offsets, shapes and strides unchanged).
 *
 * Heap buffers are the replay's scratch: a launch allocates, in one piece,
 * as many heap bytes as the capture used, and places each OUTPUT buffer at
 * the offset it had during capture (the capture never reuses heap bytes,
 * so the layout holds them all at once). Their contents are not visible to
 * the caller after a launch: results go to bound buffers.
 *
 * Scalars are numbered in submission order over all tasks (task 0's
 * first); a launch may give all of them anew. (The runtime's own tasks,
 * which combine PTO_REDUX copies, have none in this numbering; at every
 * launch those copies start from their op's identity again, as in a
 * dynamic run.)
 *
 * Refusals (PTO_EGRAPH, the details naming what): a capture whose graph
 * does not fit the chip's rings all at once (every captured task stays
 * live until the orchestration returns: at most task_slots tasks,
 * dep_entries edges, tensormap_entries TensorMap entries, heap_bytes of
 * OUTPUT buffers, the argument ring), or whose orchestration reads,
 * writes or waits on the host side (pto_orch_read / _write / _wait_task:
 * a replay has no host side); a launch on another chip than the capture's (a chip made where
 * the destroyed capture chip was included),
 * with a binding of another size or dtype, a binding inside the chip's
 * heap, bindings that overlap differently from capture (two buffers
 * disjoint then must be disjoint now; two that overlapped must overlap at
 * the same distance), or a scalar count that differs. A refused launch
 * starts no run and leaves the chip as it was. */
#ifndef PTO_GRAPH_H
#define PTO_GRAPH_H

#include "pto/export.h"
#include <stdint.h>

#include "pto/chip.h"
#include "pto/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pto_graph pto_graph;

/* Runs fn(orch, arg) once on chip as pto_chip_run does (stats, err: as
 * there, either may be NULL) and records it. On success *graph holds the
 * graph; on failure *graph is NULL and the run's error is returned. */
PTO_API int pto_graph_capture(pto_chip *chip, pto_orch_fn fn, void *arg, pto_graph **graph,
                              pto_run_stats *stats, pto_error_info *err);

typedef struct pto_graph_info {
  int64_t tasks;       /* dummy tasks included */
  int64_t edges;       /* dependency edges between them */
  int32_t buffers;     /* bound buffers */
  int32_t scalars;     /* scalar arguments, over all tasks */
  uint64_t heap_bytes; /* heap a launch allocates for OUTPUT buffers */
  /* launches that ran (refused ones are not counted), and of them the
   * warm ones: the chip's run before was this graph's successful launch,
   * so its task slots were left as this launch starts them and it wrote
   * none (docs/graphs.md, "Warm launches") */
  int64_t launches, warm_launches;
} pto_graph_info;
PTO_API int pto_graph_get_info(const pto_graph *graph, pto_graph_info *info);
/* Bound buffer i (0 .. buffers - 1) as captured: buf, buf_bytes and dtype
 * are set, every other field is zero (it describes a buffer, not a view). */
PTO_API int pto_graph_buffer(const pto_graph *graph, int i, pto_tensor *out);

typedef struct pto_graph_bindings {
  /* nbuffers is 0 (every buffer as captured) or the graph's count; entry
   * i rebinds buffer i: its buf, buf_bytes and dtype (a NULL buf keeps
   * the captured memory) */
  const pto_tensor *buffers;
  int32_t nbuffers;
  /* nscalars is 0 (the captured values) or the graph's count */
  int32_t nscalars;
  const uint64_t *scalars;
} pto_graph_bindings;

/* Replays graph on chip (the chip it was captured on); bindings may be
 * NULL (as captured). Returns 0, PTO_EGRAPH (refused: nothing ran), or the
 * run's first error, as pto_chip_run. */
PTO_API int pto_graph_launch(pto_chip *chip, pto_graph *graph, const pto_graph_bindings *bindings,
                             pto_run_stats *stats, pto_error_info *err);

/* Frees graph. During its own launch (from a kernel, or another thread)
 * the launch goes on and frees it as it ends; the graph may not be
 * launched again. After a launch whose run ended with a thread still
 * inside a kernel (pto_chip_stuck), the chip frees it once that thread has
 * left (meanwhile a launch of it is refused). */
PTO_API void pto_graph_destroy(pto_graph *graph);

#ifdef __cplusplus
}
#endif
#endif
