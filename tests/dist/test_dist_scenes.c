/* test_dist_scenes.c — acceptance scenes 1-10 of the node/comm spec (the
 * dist scenes of examples/scenes), each with ordering fault injection off
 * and on (two seeds). A failing scene prints its whole actual and expected
 * tensors (scene_check_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "mpi_ranks.h"
#include "scene.h"

static void run_scene(const char *name) {
  const pto_scene *s = pto_scene_find(name);
  assert_non_null(s);
  for (int mode = 0; mode < 3; mode++) {
    pto_scene_opts o = {0};
    o.rounds = 1;
    o.fault_inject = mode > 0;
    o.seed = (unsigned)(mode * 7919);
    pto_scene_report rep = {0};
    int rc = s->run(&o, &rep);
    if (rc || !rep.verified)
      fprintf(stderr, "%s (fault injection %s, seed %u): %s: %s\n", name,
              o.fault_inject ? "on" : "off", o.seed, pto_status_name(rc), rep.message);
    assert_int_equal(rc, 0);
    assert_true(rep.verified);
  }
}

#define SCENE_TEST(n)                                                                              \
  static void test_##n(void **state) {                                                             \
    (void)state;                                                                                   \
    run_scene(#n);                                                                                 \
  }
SCENE_TEST(ring_shuffle)
SCENE_TEST(subview_halves)
SCENE_TEST(dist_push_computed)
SCENE_TEST(dist_put)
SCENE_TEST(dist_get)
SCENE_TEST(dist_notify_wait)
SCENE_TEST(dist_separate_reader)
SCENE_TEST(dist_epochs)
SCENE_TEST(dist_overlap)

/* Chips per scene (dist_overlap: 3, the rest 2). Without mpirun every
 * scene runs; under `mpirun -np N` those that fit in N ranks. */
int main(void) {
  static const struct {
    struct CMUnitTest t;
    int chips;
  } all[] = {
      {cmocka_unit_test(test_ring_shuffle), 2},         /* scene 1 */
      {cmocka_unit_test(test_subview_halves), 2},       /* scene 2 */
      {cmocka_unit_test(test_dist_push_computed), 2},   /* scene 3 */
      {cmocka_unit_test(test_dist_put), 2},             /* scene 4 */
      {cmocka_unit_test(test_dist_get), 2},             /* scene 5 */
      {cmocka_unit_test(test_dist_notify_wait), 2},     /* scenes 6, 7 */
      {cmocka_unit_test(test_dist_separate_reader), 2}, /* scene 8 */
      {cmocka_unit_test(test_dist_epochs), 2},          /* scene 9 */
      {cmocka_unit_test(test_dist_overlap), 3},         /* scene 10 */
  };
  enum { N = sizeof all / sizeof all[0] };
  struct CMUnitTest tests[N];
  int n = 0, have = dist_chips_available();
  for (int i = 0; i < N; i++) {
    if (all[i].chips <= have)
      tests[n++] = all[i].t;
    else
      dist_not_run(all[i].t.name, all[i].chips, have);
  }
  return _cmocka_run_group_tests("test_dist_scenes", tests, (size_t)n, NULL, NULL);
}
