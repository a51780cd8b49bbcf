/* heap_live.c — validity of runtime-allocated OUTPUT views (see heap_live.h). */
#include "chip/heap_live.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/tensor_check.h"
#include "pto/status.h"

/* Every heap offset handed out by a run that has ended is below it. */
static _Atomic uint64_t heap_clock;

void heap_live_init(heap_live *l, ring *heap) {
  l->first = atomic_load_explicit(&heap_clock, memory_order_relaxed);
  heap->head = heap->tail = l->first;
}

void heap_live_destroy(heap_live *l, const ring *heap) {
  (void)l;
  /* runs on other chips may end in any order: only ever move forward */
  uint64_t end = heap->head + RING_ALIGN, cur = atomic_load(&heap_clock);
  while (cur < end && !atomic_compare_exchange_weak(&heap_clock, &cur, end)) {
  }
}

uint64_t heap_live_tag(const ring *heap, const void *p) {
  uint64_t phys = (uint64_t)((const uint8_t *)p - heap->base);
  /* the allocation just made ends at head and does not wrap around the
   * ring's end, so it lies in the lap of its last byte */
  uint64_t last = heap->head - 1;
  return last - last % heap->cap + phys + 1;
}

/* The held range containing offsets [lo, hi), or -1. Ranges are sorted by
 * offset (allocation order): the last one beginning at or below lo. */
static int64_t held_at(const ring_hole *held, uint32_t nheld, uint64_t lo, uint64_t hi) {
  uint32_t a = 0, b = nheld;
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (held[m].begin <= lo)
      a = m + 1;
    else
      b = m;
  }
  return a > 0 && hi <= held[a - 1].end ? (int64_t)a - 1 : -1;
}

/* The held range whose bytes contain physical heap bytes [plo, phi), or -1
 * (for views without a tag: located by address). Held ranges are live at
 * once, so disjoint: the one that overlaps them is the only candidate. */
static int64_t held_at_phys(const ring *heap, const ring_hole *held, uint32_t nheld, uint64_t plo,
                            uint64_t phi) {
  int64_t i = ring_hole_find(held, nheld, heap->cap, plo, phi > plo ? phi - plo : 1);
  if (i < 0) return -1;
  return ring_hole_at(&held[i], heap->cap) <= plo && phi <= ring_hole_end(&held[i], heap->cap) ? i
                                                                                               : -1;
}

const char *heap_live_problem(const heap_live *l, const ring *heap, const ring_hole *held,
                              const pto_task_id *held_until, uint32_t nheld, const pto_tensor *t,
                              char *why, size_t n) {
  if (!heap_live_maybe(heap, t)) return NULL; /* the caller's memory */
  uint64_t p = (uint64_t)(uintptr_t)t->buf, base = (uint64_t)(uintptr_t)heap->base;
  bool in_heap = p >= base && p - base < heap->cap;
  uint64_t lo, hi;
  if (!tensor_byte_span(t, &lo, &hi)) return "its extent overflows 64 bits";
  int64_t i;
  if (t->alloc_tag) {
    uint64_t m = t->alloc_tag - 1;
    if (m < l->first || m >= heap->head || !in_heap || m % heap->cap != p - base) {
      snprintf(why, n,
               "it is an OUTPUT view allocated by another run (or its buf was changed): "
               "runtime-allocated views are valid only in their own run and scope");
      return why;
    }
    i = held_at(held, nheld, m + lo, m + hi);
  } else {
    i = held_at_phys(heap, held, nheld, p - base + lo, p - base + hi);
  }
  if (i < 0) {
    snprintf(why, n,
             "it is an OUTPUT view whose scope has ended and whose heap range was reclaimed, or "
             "it reaches past its OUTPUT buffer (it may hold another tensor now)");
    return why;
  }
  if (held_until[i] != INT64_MAX) {
    snprintf(why, n,
             "it is an OUTPUT view whose scope has ended: its heap range is being reclaimed "
             "(use OUTPUT views only inside the scope that allocated them)");
    return why;
  }
  return NULL;
}
