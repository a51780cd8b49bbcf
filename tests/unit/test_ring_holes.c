/* test_ring_holes.c — ring_try_alloc_around (chip/ring.c), the heap ring's
 * allocation around held ranges (an open scope's OUTPUT buffers the tail
 * has passed):
 *  - against a brute-force oracle (the first held range in order that
 *    overlaps the candidate moves it to its end, again until none does,
 *    stepping to the next lap where the rest of this one is too short) on
 *    random rings, held sets and sizes: the same place and the same head,
 *    or NULL both;
 *  - its cost does not grow with the ranges held away from the candidate:
 *    100 000 allocations beside 100 000 held ranges. Before, every step
 *    scanned every range (10^10 steps here; an orchestration keeping an
 *    outer scope's OUTPUT per loop step apart with an inner scope's took
 *    2.5 s for 16 000 steps and grew with their square). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "chip/ring.h"
#include "hang_alarm.h"

static uint64_t up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* The oracle: ring_try_alloc_around as specified, one range at a time. */
static void *oracle(ring *r, uint64_t n, const ring_hole *held, uint32_t nheld) {
  n = up(n ? n : 1, RING_ALIGN);
  if (n > r->cap) return NULL;
  if (r->head == r->tail) r->head = r->tail = up(r->head, r->cap);
  uint64_t start = r->head;
  for (;;) {
    if (start % r->cap + n > r->cap) start = up(start, r->cap);
    if (start + n - r->tail > r->cap) return NULL;
    uint64_t p = start % r->cap, moved = start;
    for (uint32_t i = 0; i < nheld && moved == start; i++) {
      uint64_t a = held[i].begin % r->cap, b = a + (held[i].end - held[i].begin);
      if (a < p + n && p < b) moved = start + (b - p);
    }
    if (moved == start) break;
    start = moved;
  }
  r->head = start + n;
  return r->base + start % r->cap;
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n) { /* xorshift64, [0, n) */
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state % n;
}

/* Held ranges as the orchestrator keeps them: sorted by begin, each in one
 * lap, disjoint within a lap (ranges of several laps; units of
 * RING_ALIGN). */
static uint32_t random_held(ring_hole *h, uint32_t max, uint64_t cap, uint64_t first_lap) {
  uint32_t n = 0;
  uint64_t units = cap / RING_ALIGN;
  for (uint64_t lap = first_lap; lap < first_lap + 3 && n < max; lap++) {
    uint64_t u = rnd(units);
    while (u < units && n < max) {
      uint64_t len = 1 + rnd(units / 8 + 1);
      if (u + len > units) break;
      if (rnd(3)) {
        h[n].begin = lap * cap + u * RING_ALIGN;
        h[n].end = h[n].begin + len * RING_ALIGN;
        n++;
      }
      u += len + rnd(4);
    }
  }
  return n;
}

static void test_against_oracle(void **state) {
  (void)state;
  enum { HELD = 64 };
  ring_hole held[HELD];
  int found = 0, none = 0;
  for (int round = 0; round < 200000; round++) {
    uint64_t cap = RING_ALIGN * (1 + rnd(64));
    ring a = {0}, b = {0};
    a.cap = b.cap = cap;
    a.base = b.base = (uint8_t *)(uintptr_t)0x10000; /* never dereferenced */
    uint64_t lap0 = 1 + rnd(4);
    uint32_t nheld = random_held(held, 1 + (uint32_t)rnd(HELD), cap, lap0);
    a.tail = (lap0 + 1) * cap + rnd(2 * cap);
    a.head = a.tail + (rnd(4) ? rnd(cap + 1) : 0);
    b.head = a.head;
    b.tail = a.tail;
    uint64_t n = rnd(cap + RING_ALIGN);
    uint64_t head0 = a.head;
    void *got = ring_try_alloc_around(&a, n, held, nheld);
    void *want = oracle(&b, n, held, nheld);
    if (got != want || a.head != b.head || a.tail != b.tail)
      fail_msg("round %d: cap %llu, head %llu, tail %llu, n %llu, %u held: got %p (head %llu), "
               "expected %p (head %llu)",
               round, (unsigned long long)cap, (unsigned long long)head0,
               (unsigned long long)a.tail, (unsigned long long)n, nheld, got,
               (unsigned long long)a.head, want, (unsigned long long)b.head);
    if (got)
      found++;
    else
      none++;
  }
  /* both outcomes were exercised */
  assert_true(found > 1000);
  assert_true(none > 1000);
}

static void test_cost_apart_from_held(void **state) {
  (void)state;
  enum { HELD = 100000, ALLOCS = 100000 };
  ring r;
  assert_int_equal(ring_init(&r, 16u << 20), 0);
  ring_hole *held = malloc(sizeof *held * HELD);
  assert_non_null(held);
  /* lap 0's first 6.4 MB, held; the ring's live bytes in lap 1 after them */
  for (uint32_t i = 0; i < HELD; i++)
    held[i] = (ring_hole){(uint64_t)i * RING_ALIGN, (uint64_t)(i + 1) * RING_ALIGN};
  r.tail = r.cap + (7u << 20);
  r.head = r.cap + (8u << 20);
  hang_alarm_arm("100000 allocations beside 100000 held ranges", 20);
  for (uint32_t i = 0; i < ALLOCS; i++) {
    uint64_t at = r.head;
    uint8_t *p = ring_try_alloc_around(&r, RING_ALIGN, held, HELD);
    if (p != r.base + at % r.cap) fail_msg("allocation %u not at the head", i);
  }
  alarm(0);
  free(held);
  ring_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_oracle),
      cmocka_unit_test(test_cost_apart_from_held),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
