/* test_copy.c — large copies (src/common/copy.h): every byte lands, at
 * every size around COPY_LARGE and at odd alignments, whichever way the
 * process copies; PTO_COPY_MOVSB=1 and 0 choose that way (the ctest
 * entries unit.test_copy_movsb and unit.test_copy_libc run this program
 * with each), and no byte outside dst is written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/copy.h"

#define GUARD 64

/* Copies n bytes from src + so to dst + d_off: returns the first wrong
 * byte's offset in dst's buffer (the copy, or a guard byte changed), or
 * -1 when every byte is as expected. */
static long copy_once(size_t n, size_t so, size_t d_off) {
  unsigned char *src = malloc(n + so + 1), *dst = malloc(n + d_off + 2 * GUARD);
  assert_non_null(src);
  assert_non_null(dst);
  for (size_t i = 0; i < n + so; i++)
    src[i] = (unsigned char)(i * 131 + 7);
  memset(dst, 0xA5, n + d_off + 2 * GUARD);
  pto_copy(dst + GUARD + d_off, src + so, n);
  long bad = -1;
  for (size_t i = 0; i < n + d_off + 2 * GUARD && bad < 0; i++) {
    bool in = i >= GUARD + d_off && i < GUARD + d_off + n;
    unsigned char want = in ? (unsigned char)((i - GUARD - d_off + so) * 131 + 7) : 0xA5;
    if (dst[i] != want) bad = (long)i;
  }
  free(src);
  free(dst);
  return bad;
}

static void test_every_byte(void **state) {
  (void)state;
  const size_t sizes[] = {0,
                          1,
                          63,
                          4097,
                          COPY_LARGE - 1,
                          COPY_LARGE,
                          COPY_LARGE + 1,
                          COPY_LARGE + 4093,
                          2 * COPY_LARGE + 5};
  const size_t offs[] = {0, 7, 1, 63};
  int wrong = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    /* every alignment pair for the small sizes, two each way for those
     * around COPY_LARGE (the sanitized builds check every byte slowly) */
    size_t k = sizes[i] < 65536 ? 4 : 2;
    for (size_t a = 0; a < k; a++)
      for (size_t b = 0; b < k; b++) {
        long bad = copy_once(sizes[i], offs[a], offs[b]);
        if (bad >= 0 && wrong++ < 5)
          print_error("copy of %zu bytes, src offset %zu, dst offset %zu (%s): byte %ld of the "
                      "destination buffer is wrong\n",
                      sizes[i], offs[a], offs[b], pto_copy_movsb() ? "rep movsb" : "memcpy", bad);
      }
  }
  assert_int_equal(wrong, 0);
}

/* PTO_COPY_MOVSB set: the way it names, where rep movsb is built. */
static void test_option_chooses(void **state) {
  (void)state;
  const char *v = getenv("PTO_COPY_MOVSB");
  if (!v) {
    printf("PTO_COPY_MOVSB unset: this process tried both and copies with %s\n",
           pto_copy_movsb() ? "rep movsb" : "memcpy");
    return;
  }
  /* off x86-64 and under a sanitizer: always memcpy (copy.h) */
  assert_int_equal(pto_copy_movsb(), PTO_COPY_MOVSB_BUILT && strcmp(v, "1") == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_byte),
      cmocka_unit_test(test_option_chooses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
