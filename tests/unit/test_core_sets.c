/* test_core_sets.c — a scheduler's core sets (src/chip/core_sets.h)
 * against a brute-force model: random dispatches (up) and completions
 * (down) keep every item's level, the counts per level and the segment
 * layout equal to the model's; the poll's walk up the busy segments, with
 * random completions on the way, meets every busy item exactly once; the
 * placements' walk (idle top down, then the running ones) visits each
 * candidate once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "chip/core_sets.h"

#define N 37

static uint64_t rng = 20261201;
static int rnd(int n) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (int)((rng >> 33) % (uint64_t)n);
}

typedef struct fixture {
  _Atomic int at[2][N];
  int pos[N];
  core_set set[2];
  int type[N], level[N]; /* the model */
} fixture;

static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  for (int t = 0; t < 2; t++) {
    f->set[t].at = f->at[t];
    f->set[t].pos = f->pos;
  }
  for (int i = 0; i < N; i++) {
    f->type[i] = rnd(3) == 0 ? 0 : 1; /* as AIC and AIV */
    cs_add(&f->set[f->type[i]], i);
  }
}

static void check(const fixture *f, const char *when) {
  for (int t = 0; t < 2; t++) {
    const core_set *s = &f->set[t];
    int count[3] = {0, 0, 0}, members = 0;
    for (int i = 0; i < N; i++) {
      if (f->type[i] != t) continue;
      members++;
      count[f->level[i]]++;
      if (cs_at(s, s->pos[i]) != i)
        fail_msg("%s: item %d at %d holds %d", when, i, s->pos[i], cs_at(s, s->pos[i]));
      if (cs_level(s, i) != f->level[i])
        fail_msg("%s: item %d at level %d, the model says %d", when, i, cs_level(s, i),
                 f->level[i]);
    }
    assert_int_equal(cs_size(s), members);
    assert_int_equal(cs_idle(s), count[0]);
    assert_int_equal(cs_end(s, 1) - cs_end(s, 0), count[1]);
    assert_int_equal(cs_pending(s), count[2]);
  }
}

static void test_random_moves(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  check(&f, "after the adds");
  for (int step = 0; step < 100000; step++) {
    int i = rnd(N);
    core_set *s = &f.set[f.type[i]];
    if (f.level[i] < 2 && (f.level[i] == 0 || rnd(2))) {
      cs_up(s, i, f.level[i]);
      f.level[i]++;
    } else if (f.level[i] > 0) {
      cs_down(s, i, f.level[i]);
      f.level[i]--;
    }
    char when[64];
    snprintf(when, sizeof when, "step %d", step);
    check(&f, when);
    if (step % 20000 == 19999) { /* a run's reset: every item idle */
      for (int t = 0; t < 2; t++)
        cs_reset(&f.set[t]);
      for (int k = 0; k < N; k++)
        f.level[k] = 0;
      check(&f, "after a reset");
    }
  }
}

/* sched.c poll_completions: walk up from the first busy position; each
 * item met may complete some of its blocks (down, once or twice). */
static void test_poll_walk_meets_each_busy_item_once(void **state) {
  (void)state;
  for (int round = 0; round < 2000; round++) {
    fixture f;
    setup(&f);
    for (int i = 0; i < N; i++)
      for (int k = rnd(3); k > 0; k--) {
        cs_up(&f.set[f.type[i]], i, f.level[i]);
        f.level[i]++;
      }
    int met[N] = {0}, busy_before[N];
    for (int i = 0; i < N; i++)
      busy_before[i] = f.level[i] > 0;
    for (int t = 0; t < 2; t++) {
      core_set *s = &f.set[t];
      for (int p = cs_end(s, 0); p < cs_size(s); p++) {
        int i = cs_at(s, p);
        met[i]++;
        for (int k = rnd(f.level[i] + 1); k > 0; k--) {
          cs_down(s, i, f.level[i]);
          f.level[i]--;
        }
      }
    }
    for (int i = 0; i < N; i++)
      if (met[i] != busy_before[i])
        fail_msg("round %d: item %d (busy %d) met %d times by the walk", round, i, busy_before[i],
                 met[i]);
    check(&f, "after the walk");
  }
}

/* sched.c steal_pending: idle items top down, some taking a block (up): a
 * taker leaves by the top, so each idle item is looked at once. */
static void test_idle_walk_with_takes(void **state) {
  (void)state;
  for (int round = 0; round < 2000; round++) {
    fixture f;
    setup(&f);
    for (int i = 0; i < N; i++)
      if (rnd(2)) {
        cs_up(&f.set[f.type[i]], i, 0);
        f.level[i] = 1;
      }
    int met[N] = {0}, idle_before[N];
    for (int i = 0; i < N; i++)
      idle_before[i] = f.level[i] == 0;
    for (int t = 0; t < 2; t++) {
      core_set *s = &f.set[t];
      for (int k = cs_idle(s) - 1; k >= 0; k--) {
        int i = cs_at(s, k);
        met[i]++;
        if (rnd(2)) {
          cs_up(s, i, 0);
          f.level[i] = 1;
        }
      }
    }
    for (int i = 0; i < N; i++)
      if (met[i] != idle_before[i])
        fail_msg("round %d: item %d (idle %d) looked at %d times", round, i, idle_before[i],
                 met[i]);
    check(&f, "after the idle walk");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_moves),
      cmocka_unit_test(test_poll_walk_meets_each_busy_item_once),
      cmocka_unit_test(test_idle_walk_with_takes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
