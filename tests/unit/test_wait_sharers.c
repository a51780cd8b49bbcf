/* test_wait_sharers.c — a waiter on the shared-memory backend counts the
 * ranks that share its CPUs, not only its own process's threads: ranks on
 * one host are processes that pto's count of runnable threads does not
 * see, and a rank that spun while they outnumbered the CPUs spun away the
 * time slice of the very peer it waited for (4 ranks on 2 CPUs: an 8-byte
 * broadcast took 28-34 us, 4.8 without the spin). The process pins itself
 * to one CPU, so the domain's two ranks (both in this process, both
 * publishing that CPU) are two sharers of one CPU; the spin is set to 1 ms,
 * so a waiter that spins calls its condition thousands of times, one that
 * yields and parks a handful. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "comm_fixture.h"

#include "comm/comm.h"
#include "common/clock.h"
#include "common/cpu_bind.h"
#include "common/wait.h"

#define SPACE (1u << 20)

/* Never true: counts how often the wait asked. */
static bool never(void *arg) {
  ++*(unsigned *)arg;
  return false;
}

static void test_ranks_outnumbering_the_cpus_do_not_spin(void **state) {
  (void)state;
  assert_int_equal(pto_wait_cpus(), 1);
  fixture f;
  pto_window_buffer bufs[] = {{"sig", 8 * 8}};
  comm_fixture_reserve(&f, SPACE, bufs, 1, 5);
  comm_fixture_open(&f, 's', 1);
  comm_dom *d = comm_find(&f.c[0], 5);
  assert_non_null(d);
  unsigned asked = 0;
  /* a wait for rank 1, which never comes: it ends at its deadline */
  assert_false(d->be->signal_park(d->win, never, &asked, pto_now_ns() + 3000000ull));
  /* without a spin: the first check, the yields, one per park and the
   * last; a spin of 1 ms asks thousands of times */
  if (asked > 64) {
    print_error("2 ranks share 1 CPU, yet the waiter asked its condition %u times in 3 ms "
                "(it spun)\n",
                asked);
    fail();
  }
  comm_fixture_close(&f);
}

/* How often a plain pto_wait of this process (no window's: a core's, the
 * orchestrator's) asks its condition in 3 ms. */
static unsigned plain_wait_asks(void) {
  pto_event ev;
  pto_event_init(&ev, false);
  unsigned asked = 0;
  assert_false(pto_wait(&ev, never, &asked, pto_now_ns() + 3000000ull));
  return asked;
}

/* The count of sharing ranks is the process's, not the window's waits':
 * while the window is open every wait of the process yields and parks
 * (a spinning core or signal wait took the time slice of a peer rank just
 * as the window's waits did), and once it is closed they spin again. */
static void test_every_wait_counts_the_sharers_while_the_window_is_open(void **state) {
  (void)state;
  unsigned alone = plain_wait_asks();
  fixture f;
  pto_window_buffer bufs[] = {{"sig", 8 * 8}};
  comm_fixture_reserve(&f, SPACE, bufs, 1, 6);
  comm_fixture_open(&f, 's', 1);
  unsigned shared = plain_wait_asks();
  comm_fixture_close(&f);
  unsigned after = plain_wait_asks();
  if (alone <= 64 || shared > 64 || after <= 64) {
    print_error("a plain wait asked its condition %u times alone, %u with 2 ranks sharing the "
                "one CPU, %u after the window closed (expected: a spin's thousands, at most "
                "64, thousands)\n",
                alone, shared, after);
    fail();
  }
}

int main(void) {
  /* before anything of pto's reads the options or counts the CPUs */
  setenv("PTO_SPIN_NS", "1000000", 1);
  cpu_set_t all;
  if (cpu_set_of_self(&all) != 0) return 1;
  if (cpu_bind_thread(pthread_self(), &all, 0) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranks_outnumbering_the_cpus_do_not_spin),
      cmocka_unit_test(test_every_wait_counts_the_sharers_while_the_window_is_open),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
