/* ring.c — byte ring allocator with in-order release. */
#include "chip/ring.h"

#include <stdlib.h>
#include <string.h>

#include "pto/status.h"

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

int ring_init(ring *r, uint64_t cap) {
  r->base = NULL;
  if (cap > UINT64_MAX / 2) return PTO_ENOMEM; /* rounding and offsets must not wrap */
  r->cap = round_up(cap ? cap : RING_ALIGN, RING_ALIGN);
  r->base = aligned_alloc(RING_ALIGN, r->cap);
  r->head = r->tail = 0;
  return r->base ? PTO_OK : PTO_ENOMEM;
}

void ring_populate(ring *r) { memset(r->base, 0, r->cap); }

void ring_destroy(ring *r) {
  free(r->base);
  r->base = NULL;
}

bool ring_fits(const ring *r, uint64_t n) {
  return n <= r->cap && round_up(n, RING_ALIGN) <= r->cap;
}

void *ring_try_alloc(ring *r, uint64_t n) {
  if (n > r->cap) return NULL; /* before rounding, which could wrap */
  n = round_up(n ? n : 1, RING_ALIGN);
  if (n > r->cap) return NULL;
  if (r->head == r->tail) {
    /* Empty: rebase to the physical start so the whole ring is usable again.
     * Monotonic, so ends recorded earlier stay below the new tail. */
    r->head = r->tail = round_up(r->head, r->cap);
  }
  uint64_t start = r->head;
  if (start % r->cap + n > r->cap) start = round_up(start, r->cap); /* skip the end piece */
  if (start + n - r->tail > r->cap) return NULL;
  r->head = start + n;
  return r->base + start % r->cap;
}

void ring_release_to(ring *r, uint64_t end) {
  if (end > r->tail) r->tail = end;
}

void *ring_try_alloc_around(ring *r, uint64_t n, const ring_hole *held, uint32_t nheld) {
  n = round_up(n ? n : 1, RING_ALIGN);
  if (n > r->cap) return NULL;
  if (r->head == r->tail) r->head = r->tail = round_up(r->head, r->cap); /* as above */
  uint64_t start = r->head;
  for (;;) {
    if (start % r->cap + n > r->cap) start = round_up(start, r->cap);
    if (start + n - r->tail > r->cap) return NULL;
    /* A held range's bytes sit at the same physical place on every lap;
     * one overlapping [start, start + n) moves start to its end. Ranges
     * inside [tail, head) cannot overlap (the check above). */
    uint64_t p = start % r->cap, was = start;
    for (uint32_t i = 0; i < nheld && start == was; i++) {
      uint64_t a = held[i].begin % r->cap, b = a + (held[i].end - held[i].begin);
      if (a < p + n && p < b) start += b - p;
    }
    if (start == was) break;
  }
  r->head = start + n;
  return r->base + start % r->cap;
}
