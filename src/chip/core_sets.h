/* core_sets.h — a scheduler's cores of one type, partitioned by how many
 * blocks each has in flight (0 idle, 1 running, 2 running with one
 * pending), so that a pass finds an idle core, a core that can take a
 * pending block, or the cores whose completions it must poll without
 * looking at the others: its cost follows the cores that have work or are
 * about to get it, not the chip's size.
 *
 * One array of the cores' indexes in three segments: [0, end[0]) idle,
 * [end[0], end[1]) one in flight, [end[1], n) two; pos[] is each core's
 * place in it. A core's count moves by one at a time (a dispatch: +1; a
 * completion polled: -1), and so does it across one boundary: one swap
 * with the segment's edge element and one boundary moved, O(1). The most
 * recently idle core sits at end[0] - 1 (an idle core's thread spins a
 * while before it parks: the top of the idle segment is the likeliest
 * awake).
 *
 * Written by the scheduler's role holder (or its thread) only. Another
 * scheduler's pass reads the two-in-flight segment to find a block it may
 * take (sched.c take_for): the order and the segment ends are relaxed
 * atomics for that racy read, which yields valid indexes, and which core
 * really has a block to take is decided by that core's own words
 * (steal.h). On x86 a relaxed access is a plain one. pos[] is the
 * writer's alone. tests/unit/test_core_sets.c checks the sets against a
 * brute-force model. */
#ifndef PTO_CHIP_CORE_SETS_H
#define PTO_CHIP_CORE_SETS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct core_set {
  _Atomic int *at;    /* n items: the segment order */
  int *pos;           /* by item: its index in at[] (shared by the sets of one scheduler) */
  _Atomic int n;      /* items in the set (fixed once the chip's run state is made) */
  _Atomic int end[2]; /* ends of the idle and the one-in-flight segments */
} core_set;

static inline int cs_at(const core_set *s, int p) {
  return atomic_load_explicit(&s->at[p], memory_order_relaxed);
}
static inline int cs_end(const core_set *s, int level) {
  return atomic_load_explicit(&s->end[level], memory_order_relaxed);
}
static inline int cs_size(const core_set *s) {
  return atomic_load_explicit(&s->n, memory_order_relaxed);
}
static inline void cs_set_at(core_set *s, int p, int item) {
  atomic_store_explicit(&s->at[p], item, memory_order_relaxed);
  s->pos[item] = p;
}
static inline void cs_set_end(core_set *s, int level, int v) {
  atomic_store_explicit(&s->end[level], v, memory_order_relaxed);
}

/* Every item idle. */
static inline void cs_reset(core_set *s) {
  int n = cs_size(s);
  for (int i = 0; i < n; i++)
    s->pos[cs_at(s, i)] = i;
  cs_set_end(s, 0, n);
  cs_set_end(s, 1, n);
}

/* Adds item (idle); at[] holds room for every item added. */
static inline void cs_add(core_set *s, int item) {
  int n = cs_size(s);
  cs_set_at(s, n, item);
  atomic_store_explicit(&s->n, n + 1, memory_order_relaxed);
  cs_reset(s);
}

static inline int cs_level(const core_set *s, int item) {
  int p = s->pos[item];
  return p < cs_end(s, 0) ? 0 : p < cs_end(s, 1) ? 1 : 2;
}

static inline void cs_swap(core_set *s, int p, int q) {
  int a = cs_at(s, p), b = cs_at(s, q);
  cs_set_at(s, p, b);
  cs_set_at(s, q, a);
}

/* item's count goes from level to level + 1 (level 0 or 1): it trades
 * places with the last item of its segment, which then closes before it. */
static inline void cs_up(core_set *s, int item, int level) {
  int last = cs_end(s, level) - 1;
  cs_swap(s, s->pos[item], last);
  cs_set_end(s, level, last);
}

/* item's count goes from level to level - 1 (level 1 or 2): it trades
 * places with the first item of its segment, which then opens after it.
 * Only positions at or below item's own change, so a walk up the busy
 * segments that polls each item once (sched.c poll_completions) meets
 * every item exactly once. */
static inline void cs_down(core_set *s, int item, int level) {
  int first = cs_end(s, level - 1);
  cs_swap(s, s->pos[item], first);
  cs_set_end(s, level - 1, first + 1);
}

/* Items idle, and with two blocks in flight. */
static inline int cs_idle(const core_set *s) { return cs_end(s, 0); }
static inline int cs_pending(const core_set *s) { return cs_size(s) - cs_end(s, 1); }

#endif
