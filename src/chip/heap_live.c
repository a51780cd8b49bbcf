/* heap_live.c — validity of runtime-allocated OUTPUT views (see heap_live.h). */
#include "chip/heap_live.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/tensor_check.h"
#include "pto/status.h"

/* Every heap offset handed out by a run that has ended is below it. */
static _Atomic uint64_t heap_clock;

void heap_live_init(heap_live *l, ring *heap) {
  l->first = atomic_load_explicit(&heap_clock, memory_order_relaxed);
  heap->head = heap->tail = l->first;
  for (int d = 0; d <= PTO_MAX_SCOPE_DEPTH; d++)
    l->scope_head[d] = l->first;
  l->dead = NULL;
  l->ndead = l->cap = 0;
}

void heap_live_destroy(heap_live *l, const ring *heap) {
  free(l->dead);
  l->dead = NULL;
  l->ndead = l->cap = 0;
  /* runs on other chips may end in any order: only ever move forward */
  uint64_t end = heap->head + RING_ALIGN, cur = atomic_load(&heap_clock);
  while (cur < end && !atomic_compare_exchange_weak(&heap_clock, &cur, end)) {
  }
}

void heap_live_scope_begin(heap_live *l, int depth, const ring *heap) {
  if (depth >= 0 && depth <= PTO_MAX_SCOPE_DEPTH) l->scope_head[depth] = heap->head;
}

/* Drops the records the ring has reclaimed anyway (below its tail). */
static void prune(heap_live *l, const ring *heap) {
  uint32_t k = 0;
  while (k < l->ndead && l->dead[2 * k + 1] <= heap->tail)
    k++;
  if (!k) return;
  for (uint32_t i = k; i < l->ndead; i++) {
    l->dead[2 * (i - k)] = l->dead[2 * i];
    l->dead[2 * (i - k) + 1] = l->dead[2 * i + 1];
  }
  l->ndead -= k;
}

int heap_live_scope_end(heap_live *l, int depth, const ring *heap) {
  if (depth < 0 || depth > PTO_MAX_SCOPE_DEPTH) return PTO_OK;
  uint64_t lo = l->scope_head[depth], hi = heap->head;
  prune(l, heap);
  if (hi <= lo) return PTO_OK;                          /* it allocated nothing */
  while (l->ndead && l->dead[2 * (l->ndead - 1)] >= lo) /* its inner scopes' ranges */
    l->ndead--;
  if (l->ndead && l->dead[2 * (l->ndead - 1) + 1] >= lo) { /* adjacent: one range */
    l->dead[2 * (l->ndead - 1) + 1] = hi;
    return PTO_OK;
  }
  if (l->ndead == l->cap) {
    uint32_t cap = l->cap ? 2 * l->cap : 8;
    uint64_t *d = realloc(l->dead, sizeof(uint64_t) * 2 * cap);
    if (!d) return PTO_ENOMEM;
    l->dead = d;
    l->cap = cap;
  }
  l->dead[2 * l->ndead] = lo;
  l->dead[2 * l->ndead + 1] = hi;
  l->ndead++;
  return PTO_OK;
}

uint64_t heap_live_tag(const ring *heap, const void *p) {
  uint64_t phys = (uint64_t)((const uint8_t *)p - heap->base);
  /* the allocation just made ends at head and does not wrap around the
   * ring's end, so it lies in the lap of its last byte */
  uint64_t last = heap->head - 1;
  return last - last % heap->cap + phys + 1;
}

/* The ended scope range containing [lo, hi)'s first byte, or overlapping it. */
static const uint64_t *dead_range(const heap_live *l, uint64_t lo, uint64_t hi) {
  uint32_t a = 0, b = l->ndead; /* first range whose end is above lo */
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (l->dead[2 * m + 1] <= lo)
      a = m + 1;
    else
      b = m;
  }
  return a < l->ndead && l->dead[2 * a] < hi ? &l->dead[2 * a] : NULL;
}

const char *heap_live_problem(const heap_live *l, const ring *heap, const pto_tensor *t, char *why,
                              size_t n) {
  uint64_t p = (uint64_t)(uintptr_t)t->buf, base = (uint64_t)(uintptr_t)heap->base;
  bool in_heap = p >= base && p - base < heap->cap;
  if (!t->alloc_tag && !in_heap) return NULL; /* the caller's memory */
  uint64_t lo, hi, m;
  if (!tensor_byte_span(t, &lo, &hi)) return "its extent overflows 64 bits";
  if (t->alloc_tag) {
    m = t->alloc_tag - 1;
    if (m < l->first || m >= heap->head || !in_heap || m % heap->cap != p - base) {
      snprintf(why, n,
               "it is an OUTPUT view allocated by another run (or its buf was changed): "
               "runtime-allocated views are valid only in their own run and scope");
      return why;
    }
  } else { /* by address: the one offset in [tail, head) at this position */
    m = heap->tail + (p - base + heap->cap - heap->tail % heap->cap) % heap->cap;
  }
  if (m + lo < heap->tail || m >= heap->head) {
    snprintf(why, n,
             "it is an OUTPUT view whose scope has ended and whose heap range was reclaimed "
             "(it may hold another tensor now)");
    return why;
  }
  if (m + hi > heap->head || (m % heap->cap) + hi > heap->cap) {
    snprintf(why, n, "it reaches past the live OUTPUT buffers of the heap");
    return why;
  }
  if (dead_range(l, m + lo, m + hi)) {
    snprintf(why, n,
             "it is an OUTPUT view whose scope has ended: its heap range is being reclaimed "
             "(use OUTPUT views only inside the scope that allocated them)");
    return why;
  }
  return NULL;
}
