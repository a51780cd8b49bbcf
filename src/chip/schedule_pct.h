/* schedule_pct.h — choices drawn from a seed by PCT, probabilistic
 * concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
 * ASPLOS 2010): every thread of the program gets a random priority, the
 * highest-priority enabled one always runs, and at d random steps the one
 * about to run is demoted below all others. A bug that needs d ordering
 * constraints among n threads and k steps is found with probability at
 * least 1/(n k^(d-1)) per run, where uniform noise has no such bound.
 *
 * Here a "thread" is an action of the controlled schedule (schedule.c): a
 * block's start, which passes its priority on to its completion (so a
 * demotion delays a completion's publication), and the orchestrator,
 * which runs on while its priority beats every enabled action. k is not
 * known ahead, so the steps come in windows of doubling length (64, 128,
 * ...), each with d change points drawn uniformly in it: d per doubling
 * of the run's length. Deterministic: one splitmix64 stream from the
 * seed. */
#ifndef PTO_CHIP_SCHEDULE_PCT_H
#define PTO_CHIP_SCHEDULE_PCT_H

#include <stddef.h>
#include <stdint.h>

#define PCT_DEPTH      3          /* d: change points per window */
#define PCT_FIRST_SPAN 64         /* the first window's steps */
#define PCT_LOW        (1u << 20) /* demoted priorities are below this; drawn ones above */

typedef struct pct {
  uint64_t seed, state;
  uint64_t step;                /* actions chosen so far */
  uint64_t window_end;          /* the current window's last step */
  uint64_t change[PCT_DEPTH];   /* its change points */
  uint64_t demoted;             /* demotions so far: each goes below the last */
  uint64_t orch_prio;           /* the orchestrator's priority */
} pct;

static inline uint64_t pct_next(pct *p) { /* splitmix64 */
  uint64_t z = (p->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (the bias of a 64-bit modulo is negligible). */
static inline uint64_t pct_below(pct *p, uint64_t n) { return pct_next(p) % n; }

/* A fresh thread's priority: above every demoted one. */
static inline uint64_t pct_prio(pct *p) { return PCT_LOW + (pct_next(p) >> 1); }

static inline void pct_window(pct *p, uint64_t first, uint64_t span) {
  for (int i = 0; i < PCT_DEPTH; i++)
    p->change[i] = first + pct_below(p, span);
  p->window_end = first + span - 1;
}

static inline void pct_init(pct *p, uint64_t seed) {
  *p = (pct){0};
  p->seed = seed;
  p->state = seed;
  pct_window(p, 1, PCT_FIRST_SPAN);
  p->orch_prio = pct_prio(p);
}

#define PCT_PRIO(base, i, stride, off) (*(uint64_t *)((char *)(base) + (size_t)(i) * (stride) + (off)))

/* The highest priority among n items (each a uint64_t at `off` in an
 * element of `stride` bytes); its index in *at. */
static inline uint64_t pct_best_at(void *items, uint32_t n, size_t stride, size_t off,
                                   uint32_t *at) {
  uint64_t best = 0;
  *at = 0;
  for (uint32_t i = 0; i < n; i++)
    if (PCT_PRIO(items, i, stride, off) > best) {
      best = PCT_PRIO(items, i, stride, off);
      *at = i;
    }
  return best;
}

static inline uint64_t pct_best(void *items, uint32_t n, size_t stride, size_t off) {
  uint32_t at;
  return pct_best_at(items, n, stride, off, &at);
}

/* Chooses the next of n > 0 enabled items: the highest priority, unless
 * this step is a change point, which demotes it first. */
static inline uint32_t pct_pick(pct *p, void *items, uint32_t n, size_t stride, size_t off) {
  if (++p->step > p->window_end) pct_window(p, p->step, p->window_end + 1);
  uint32_t at;
  pct_best_at(items, n, stride, off, &at);
  for (int i = 0; i < PCT_DEPTH; i++)
    if (p->change[i] == p->step) {
      PCT_PRIO(items, at, stride, off) = PCT_LOW - 1 - p->demoted++;
      pct_best_at(items, n, stride, off, &at);
      break;
    }
  return at;
}

#endif
