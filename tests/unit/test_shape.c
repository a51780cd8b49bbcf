/* test_shape.c — the cores a block of each shape occupies (src/chip/run.h,
 * shape_aic and shape_aiv), read from bit tables: each shape against what
 * its name says, written out, so that a table that shifts a shape's bits
 * (or a shape added to the enum without its bits) fails here, naming the
 * shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "chip/run.h"

static void test_cores_of_every_shape(void **state) {
  (void)state;
  static const struct {
    shape s;
    int aic, aiv;
  } want[] = {
      {SHAPE_AIC, 1, 0},     {SHAPE_AIV, 0, 1},      {SHAPE_AIV2, 0, 2},
      {SHAPE_AIC_AIV, 1, 1}, {SHAPE_AIC_AIV2, 1, 2}, {SHAPE_DUMMY, 0, 0},
  };
  _Static_assert(SHAPE_COUNT == 5, "a new shape needs its bits in run.h and its row here");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int aic = shape_aic(want[i].s), aiv = shape_aiv(want[i].s);
    if (aic != want[i].aic || aiv != want[i].aiv)
      fail_msg("shape %d (%s): %d AIC + %d AIV, expected %d + %d", (int)want[i].s,
               want[i].s == SHAPE_DUMMY ? "dummy" : shape_name(want[i].s), aic, aiv, want[i].aic,
               want[i].aiv);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cores_of_every_shape)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
