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
 * Private to the scheduler's role holder (or its thread), like the counts
 * it replaces: no atomics. tests/unit/test_core_sets.c checks it against
 * a brute-force model. */
#ifndef PTO_CHIP_CORE_SETS_H
#define PTO_CHIP_CORE_SETS_H

#include <stdint.h>

typedef struct core_set {
  int *at;    /* n items: the segment order */
  int *pos;   /* by item: its index in at[] (shared by the sets of one scheduler) */
  int n;      /* items in the set */
  int end[2]; /* ends of the idle and the one-in-flight segments */
} core_set;

/* Every item idle. */
static inline void cs_reset(core_set *s) {
  for (int i = 0; i < s->n; i++)
    s->pos[s->at[i]] = i;
  s->end[0] = s->end[1] = s->n;
}

/* Adds item (idle); at[] holds room for every item added. */
static inline void cs_add(core_set *s, int item) {
  s->at[s->n] = item;
  s->pos[item] = s->n++;
  s->end[0] = s->end[1] = s->n;
}

static inline int cs_level(const core_set *s, int item) {
  int p = s->pos[item];
  return p < s->end[0] ? 0 : p < s->end[1] ? 1 : 2;
}

static inline void cs_swap(core_set *s, int p, int q) {
  int a = s->at[p], b = s->at[q];
  s->at[p] = b;
  s->at[q] = a;
  s->pos[b] = p;
  s->pos[a] = q;
}

/* item's count goes from level to level + 1 (level 0 or 1): it trades
 * places with the last item of its segment, which then closes before it. */
static inline void cs_up(core_set *s, int item, int level) {
  int last = --s->end[level];
  cs_swap(s, s->pos[item], last);
}

/* item's count goes from level to level - 1 (level 1 or 2): it trades
 * places with the first item of its segment, which then opens after it.
 * Only positions at or below item's own change, so a walk up the busy
 * segments that polls each item once (sched.c poll_completions) meets
 * every item exactly once. */
static inline void cs_down(core_set *s, int item, int level) {
  int first = s->end[level - 1]++;
  cs_swap(s, s->pos[item], first);
}

/* Items at each level. */
static inline int cs_idle(const core_set *s) { return s->end[0]; }
static inline int cs_pending(const core_set *s) { return s->n - s->end[1]; }

#endif
