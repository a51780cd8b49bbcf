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
 * which runs on while its priority beats every enabled action. An
 * asynchronous completion waits for a token from outside the run, which
 * may need the other blocks to run first: it goes only when nothing else
 * can (pct_prio_last), in a random order among those pending. k is not
 * known ahead, so the steps come in windows of doubling length (64, 128,
 * ...), each with d change points drawn uniformly in it: d per doubling
 * of the run's length. Deterministic: one splitmix64 stream from the
 * seed. */
#ifndef PTO_CHIP_SCHEDULE_PCT_H
#define PTO_CHIP_SCHEDULE_PCT_H

#include <stdbool.h>
#include <stdint.h>

#define PCT_DEPTH      3          /* d: change points per window */
#define PCT_FIRST_SPAN 64         /* the first window's steps */
#define PCT_LOW        (1u << 20) /* demoted priorities are below this; drawn ones above */

typedef struct pct {
  uint64_t seed, state;
  uint64_t step;              /* actions chosen so far */
  uint64_t window_end;        /* the current window's last step */
  uint64_t change[PCT_DEPTH]; /* its change points */
  uint64_t demoted;           /* demotions so far: each goes below the last */
  uint64_t orch_prio;         /* the orchestrator's priority */
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

/* A priority below every other, demoted ones included (their lowest is
 * PCT_LOW minus the demotions so far): for what runs only once nothing
 * else can, in a random order among its kind. */
static inline uint64_t pct_prio_last(pct *p) { return pct_next(p) >> (64 - 18); }

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

/* The next step: true when it is a change point, where the action about
 * to run (the highest priority) gets *low, below every priority so far. */
static inline bool pct_step(pct *p, uint64_t *low) {
  if (++p->step > p->window_end) pct_window(p, p->step, p->window_end + 1);
  for (int i = 0; i < PCT_DEPTH; i++)
    if (p->change[i] == p->step) {
      *low = PCT_LOW - 1 - p->demoted++;
      return true;
    }
  return false;
}

#endif
