/* test_cpu_bind.c — src/common/cpu_bind.c: binding a thread to the k-th
 * CPU of a set (k modulo the set's size, negative k too), letting it run
 * on a set again, and the errors it reports instead of binding nowhere. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "common/cpu_bind.h"

static cpu_set_t all;
static int n;

/* The index within `all` of the only CPU the calling thread may run on, or
 * -1 when it may run on more than one. */
static int bound_index(void) {
  cpu_set_t s;
  assert_int_equal(cpu_set_of_self(&s), 0);
  if (CPU_COUNT(&s) != 1) return -1;
  for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &all)) continue;
    if (CPU_ISSET(cpu, &s)) return k;
    k++;
  }
  return -2; /* a CPU outside the set: wrong */
}

static void test_k_counts_modulo_the_set(void **state) {
  (void)state;
  for (int k = -2 * n; k <= 2 * n; k++) {
    assert_int_equal(cpu_bind_thread(pthread_self(), &all, k), 0);
    int want = ((k % n) + n) % n, got = bound_index();
    if (got != want && !(n == 1 && got == 0)) {
      print_error("k = %d of %d CPUs: bound to #%d, expected #%d\n", k, n, got, want);
      fail();
    }
  }
  assert_int_equal(cpu_allow_thread(pthread_self(), &all), 0);
  cpu_set_t s;
  assert_int_equal(cpu_set_of_self(&s), 0);
  assert_true(CPU_EQUAL(&s, &all));
}

static void test_an_empty_set_is_an_error(void **state) {
  (void)state;
  cpu_set_t none;
  CPU_ZERO(&none);
  assert_int_equal(cpu_bind_thread(pthread_self(), &none, 0), EINVAL);
  cpu_set_t s;
  assert_int_equal(cpu_set_of_self(&s), 0);
  assert_true(CPU_EQUAL(&s, &all)); /* untouched */
}

int main(void) {
  assert_int_equal(cpu_set_of_self(&all), 0);
  n = CPU_COUNT(&all);
  printf("the test may use %d CPUs\n", n);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_k_counts_modulo_the_set),
      cmocka_unit_test(test_an_empty_set_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
