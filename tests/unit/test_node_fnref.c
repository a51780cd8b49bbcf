/* test_node_fnref.c — addresses as they travel to other processes of the
 * program under mpirun (src/node/fnref.c): a function of the program, of
 * libpto and of libc, and a global, encode as (object, offset) and decode
 * to the same address; NULL stays NULL; a heap or stack address, or heap
 * memory passed as a function, is refused naming it; a reference whose
 * object is not loaded, or whose code differs (another build), is refused
 * on decode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/fnref.h"
#include "pto/node.h"

static int a_global = 7;

static int program_fn(int x) { return x + a_global; }

static void round_trip(const void *p, bool code, const char *what) {
  fnref r;
  char why[300] = "";
  int rc = fnref_encode(p, code, &r, why, sizeof why);
  if (rc) fprintf(stderr, "%s: encode failed: %s\n", what, why);
  assert_int_equal(rc, 0);
  void *back = NULL;
  rc = fnref_decode(&r, &back, why, sizeof why);
  if (rc || back != p) fprintf(stderr, "%s: decoded %p, expected %p (%s)\n", what, back, p, why);
  assert_int_equal(rc, 0);
  assert_ptr_equal(back, p);
}

static void test_round_trips(void **state) {
  (void)state;
  round_trip((const void *)program_fn, true, "a function of the program");
  round_trip((const void *)pto_node_create, true, "a function of libpto");
  round_trip((const void *)memcpy, true, "a function of libc");
  round_trip(&a_global, false, "a global of the program");
  fnref r;
  char why[64];
  assert_int_equal(fnref_encode(NULL, true, &r, why, sizeof why), 0);
  void *back = (void *)1;
  assert_int_equal(fnref_decode(&r, &back, why, sizeof why), 0);
  assert_null(back);
}

static void test_refusals(void **state) {
  (void)state;
  fnref r;
  char why[300] = "";
  void *heap = calloc(1, 64);
  assert_non_null(heap);
  int rc = fnref_encode(heap, true, &r, why, sizeof why);
  fprintf(stderr, "heap as a function: %s\n", why);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(why, "lies in no loaded code segment"));
  int local = 0;
  why[0] = 0;
  rc = fnref_encode(&local, false, &r, why, sizeof why);
  fprintf(stderr, "stack address: %s\n", why);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(why, "lies in no loaded object"));
  free(heap);
  /* a global's address is data, not code */
  why[0] = 0;
  assert_int_equal(fnref_encode(&a_global, true, &r, why, sizeof why), PTO_EINVAL);
  /* decode: another build (the code differs), or an object not loaded */
  assert_int_equal(fnref_encode((const void *)program_fn, true, &r, why, sizeof why), 0);
  fnref other = r;
  other.check ^= 1;
  void *back = NULL;
  why[0] = 0;
  rc = fnref_decode(&other, &back, why, sizeof why);
  fprintf(stderr, "other build: %s\n", why);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(why, "differs in this process"));
  assert_null(back);
  other = r;
  other.object ^= 0x10;
  why[0] = 0;
  rc = fnref_decode(&other, &back, why, sizeof why);
  fprintf(stderr, "unknown object: %s\n", why);
  assert_int_equal(rc, PTO_EINVAL);
  assert_non_null(strstr(why, "is not loaded in this process"));
  other = r;
  other.offset = UINT64_MAX / 2; /* beyond every segment of the program */
  why[0] = 0;
  assert_int_equal(fnref_decode(&other, &back, why, sizeof why), PTO_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trips),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
