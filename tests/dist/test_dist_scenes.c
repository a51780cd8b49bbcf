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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_shuffle),         /* scene 1 */
      cmocka_unit_test(test_subview_halves),       /* scene 2 */
      cmocka_unit_test(test_dist_push_computed),   /* scene 3 */
      cmocka_unit_test(test_dist_put),             /* scene 4 */
      cmocka_unit_test(test_dist_get),             /* scene 5 */
      cmocka_unit_test(test_dist_notify_wait),     /* scenes 6, 7 */
      cmocka_unit_test(test_dist_separate_reader), /* scene 8 */
      cmocka_unit_test(test_dist_epochs),          /* scene 9 */
      cmocka_unit_test(test_dist_overlap),         /* scene 10 */
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
