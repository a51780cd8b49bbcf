/* ring.h — a byte ring allocator with in-order release (the heap ring for
 * OUTPUT buffers and the argument ring). Offsets are monotonic 64-bit
 * counters, so a recorded end stays meaningful across wrap-arounds and
 * rebases. Single-threaded: owned by the orchestrator. */
#ifndef PTO_RING_H
#define PTO_RING_H

#include <stdbool.h>
#include <stdint.h>

#define RING_ALIGN 64u

typedef struct ring {
  uint8_t *base;
  uint64_t cap;  /* bytes, multiple of RING_ALIGN */
  uint64_t head; /* next allocation (monotonic) */
  uint64_t tail; /* oldest byte still in use (monotonic) */
} ring;

int ring_init(ring *r, uint64_t cap);
/* Touches every page of the ring now, so that no run pays their first-use
 * faults (the argument ring: a run of a few thousand tasks would fault in
 * a page per 30 or so submits; not the heap ring, whose size is the
 * user's and whose bytes may never be used). */
void ring_populate(ring *r);
void ring_destroy(ring *r);
/* Contiguous allocation of n bytes (rounded to RING_ALIGN), or NULL when the
 * ring has no room now. Never wraps an allocation around the end. */
void *ring_try_alloc(ring *r, uint64_t n);
/* Releases everything allocated before offset `end` (a past r->head). */
void ring_release_to(ring *r, uint64_t end);
/* Whether an allocation of n bytes could ever fit. */
bool ring_fits(const ring *r, uint64_t n);
/* A range [begin, end) of monotonic offsets that stays allocated after the
 * tail has passed it (OUTPUT buffers of a scope that is still open). */
typedef struct ring_hole {
  uint64_t begin, end;
} ring_hole;
/* The physical bytes [ring_hole_at, ring_hole_end) of held range h: one
 * interval, since no allocation, and no merge of them (orch.c:
 * hold_push), crosses the ring's physical end. */
static inline uint64_t ring_hole_at(const ring_hole *h, uint64_t cap) { return h->begin % cap; }
static inline uint64_t ring_hole_end(const ring_hole *h, uint64_t cap) {
  return h->begin % cap + (h->end - h->begin);
}
/* The first of `held` (sorted by begin, the orchestrator's held ranges)
 * whose physical bytes (begin % cap, never across the ring's end) overlap
 * physical [p, p + n), or -1. A lap's ranges are a run of the list and
 * disjoint, so it is a binary search per lap: a linear scan at every
 * allocation made an OUTPUT's allocation cost the number of ranges held
 * (an outer scope's OUTPUT per loop step, kept apart by an inner scope's:
 * 16 000 steps took 2.5 s, growing with their square). */
int64_t ring_hole_find(const ring_hole *held, uint32_t nheld, uint64_t cap, uint64_t p, uint64_t n);
/* ring_try_alloc that also steps over the bytes of `held` ranges (sorted by
 * begin): the tail may pass a held range, and the next lap goes around it. */
void *ring_try_alloc_around(ring *r, uint64_t n, const ring_hole *held, uint32_t nheld);
static inline uint64_t ring_used(const ring *r) { return r->head - r->tail; }
/* Whether p points into the ring's memory. */
static inline bool ring_holds(const ring *r, const void *p) {
  const uint8_t *b = p;
  return b >= r->base && b < r->base + r->cap;
}

#endif
