/* heap_live.h — which runtime-allocated OUTPUT views are still valid.
 *
 * An OUTPUT view is valid until the scope it was allocated in ends (the run
 * itself for top-level ones). Each view the runtime hands out carries its
 * allocation's heap offset in `alloc_tag` (offset + 1): offsets are
 * monotonic within a run and, through a process-wide clock, across runs, so
 * a tag identifies one allocation for good even after its heap range holds
 * another tensor. The orchestrator's held ranges (run.h: `held`,
 * `held_until`) are the one record of live OUTPUT buffers: a range is held
 * from its allocation and stays held after its scope ends until its
 * readers retired (held_until < INT64_MAX). A view is valid only inside a
 * range whose scope is still open. A view with no tag that points into the
 * heap (built by hand over an OUTPUT's memory) is held to the same ranges
 * by its address. Owned by the orchestrator thread. */
#ifndef PTO_CHIP_HEAP_LIVE_H
#define PTO_CHIP_HEAP_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "chip/ring.h"
#include "pto/orch.h"
#include "pto/tensor.h"

typedef struct heap_live {
  uint64_t first; /* the heap's first offset in this run */
} heap_live;

/* Starts the run's heap offsets after every offset an earlier run handed
 * out (call right after ring_init of the heap). */
void heap_live_init(heap_live *l, ring *heap);
/* Moves the process-wide clock past this run. */
void heap_live_destroy(heap_live *l, const ring *heap);

/* Tag of the byte at heap pointer p of an allocation just made. */
uint64_t heap_live_tag(const ring *heap, const void *p);

/* Whether t may be a view the runtime allocated: tagged by it, or inside
 * the heap. Only such a view can be stale (heap_live_problem): the test a
 * submit makes of every argument, inline. */
static inline bool heap_live_maybe(const ring *heap, const pto_tensor *t) {
  uint64_t p = (uint64_t)(uintptr_t)t->buf, base = (uint64_t)(uintptr_t)heap->base;
  return t->alloc_tag || (p >= base && p - base < heap->cap);
}

/* NULL when the view may be used: caller's memory, or a live allocation of
 * this run. Otherwise why it may not, as a sentence in why[n]. `held` are
 * the held heap ranges in allocation order, `held_until[i]` INT64_MAX while
 * range i's scope is open. The view must have passed tensor_problem()
 * first. */
const char *heap_live_problem(const heap_live *l, const ring *heap, const ring_hole *held,
                              const pto_task_id *held_until, uint32_t nheld, const pto_tensor *t,
                              char *why, size_t n);

#endif
