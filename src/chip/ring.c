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

/* The ranges of one lap (begin / cap the same) are a run of `held` (sorted
 * by begin) and, held at once, disjoint: sorted by physical place, their
 * ends too. The first of held[lo, hi) (one lap) that ends after p, or hi. */
static uint32_t first_ending_after(const ring_hole *held, uint32_t lo, uint32_t hi, uint64_t cap,
                                   uint64_t p) {
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ring_hole_end(&held[mid], cap) > p)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The end of held[i]'s lap's run in held[i, nheld). */
static uint32_t lap_run_end(const ring_hole *held, uint32_t i, uint32_t nheld, uint64_t cap) {
  uint64_t lap = held[i].begin / cap;
  uint32_t lo = i + 1, hi = nheld;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (held[mid].begin / cap > lap)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

int64_t ring_hole_find(const ring_hole *held, uint32_t nheld, uint64_t cap, uint64_t p,
                       uint64_t n) {
  for (uint32_t lo = 0, hi; lo < nheld; lo = hi) {
    hi = lap_run_end(held, lo, nheld, cap);
    uint32_t i = first_ending_after(held, lo, hi, cap, p);
    if (i < hi && ring_hole_at(&held[i], cap) < p + n) return i;
  }
  return -1;
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
     * inside [tail, head) cannot overlap (the check above). The first one
     * in `held`'s order that overlaps (ring_hole_find). */
    uint64_t p = start % r->cap;
    int64_t i = ring_hole_find(held, nheld, r->cap, p, n);
    if (i < 0) break;
    start += ring_hole_end(&held[i], r->cap) - p;
  }
  r->head = start + n;
  return r->base + start % r->cap;
}
