/* test_wait_membarrier.c — an event shared between processes (wait.c,
 * asym): where the kernel has membarrier(2)'s expedited global command, a
 * waiter about to park makes its signallers' fence and a signal makes
 * none. Two processes play ping-pong through one event in shared memory,
 * each busy for a random 0-79 us before its store, so that the other's
 * wait parks (no spin) or meets the store in its announcement. The park
 * maximum is 10 s, so that a lost wake-up ends a 5 s wait false instead of
 * costing a short park. Then the same with PTO_WAIT_MEMBARRIER=0 (both
 * sides fence). The protocol is explored in test_wait_model.c
 * (test_eventcount_membarrier). */
#include <linux/membarrier.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/wait.h"

#define ROUNDS  2000
#define WAIT_NS 5000000000ull

typedef struct board {
  pto_event ev;
  _Atomic uint32_t ping, pong;
} board;

typedef struct until {
  _Atomic uint32_t *word;
  uint32_t want;
} until;

static bool reached(void *arg) {
  const until *u = arg;
  return atomic_load_explicit(u->word, memory_order_acquire) >= u->want;
}

/* Busy for 0-79 us (seeded): the peer's wait parks, or meets the store
 * in the middle of its announcement. */
static void busy(uint64_t *seed) {
  *seed ^= *seed << 13;
  *seed ^= *seed >> 7;
  *seed ^= *seed << 17;
  uint64_t until_ns = pto_now_ns() + (*seed % 80) * 1000;
  while (pto_now_ns() < until_ns)
    ;
}

/* Round i: `mine` = i, a signal, then a wait for `theirs` >= i (the
 * child waits first). False when a wait reached its deadline. */
static bool play(board *b, _Atomic uint32_t *mine, _Atomic uint32_t *theirs, bool first) {
  uint64_t seed = first ? 0x9E3779B97F4A7C15ull : 0xD6E8FEB86659FD93ull;
  for (uint32_t i = 1; i <= ROUNDS; i++) {
    until u = {theirs, i};
    if (!first && !pto_wait(&b->ev, reached, &u, pto_now_ns() + WAIT_NS)) return false;
    busy(&seed);
    atomic_store_explicit(mine, i, memory_order_release);
    pto_event_signal(&b->ev);
    if (first && !pto_wait(&b->ev, reached, &u, pto_now_ns() + WAIT_NS)) return false;
  }
  return true;
}

static void ping_pong(bool asym) {
  board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(b != MAP_FAILED);
  assert_int_equal(setenv("PTO_WAIT_MEMBARRIER", asym ? "1" : "0", 1), 0);
  pto_event_init(&b->ev, true);
  long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  bool can = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
             syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  /* the rule under test is in force where the kernel allows it */
  assert_int_equal(b->ev.asym != 0, asym && can);
  atomic_init(&b->ping, 0);
  atomic_init(&b->pong, 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(play(b, &b->pong, &b->ping, false) ? 0 : 3);
  uint64_t t0 = pto_now_ns();
  bool ok = play(b, &b->ping, &b->pong, true);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("a wait ended at its deadline (lost wake-up?): parent %s, child status %#x, "
             "after %llu ms",
             ok ? "done" : "timed out", status,
             (unsigned long long)((pto_now_ns() - t0) / 1000000));
  assert_int_equal(atomic_load(&b->ping), ROUNDS);
  assert_int_equal(atomic_load(&b->pong), ROUNDS);
  munmap(b, sizeof *b);
}

static void test_waiter_fences_for_the_signaller(void **state) {
  (void)state;
  ping_pong(true);
}

static void test_both_fence(void **state) {
  (void)state;
  ping_pong(false);
}

int main(void) {
  /* every wait parks: no spin; a missed wake-up is not hidden by a short
   * park (read once, before the first wait) */
  setenv("PTO_SPIN_NS", "0", 1);
  setenv("PTO_PARK_MAX_MS", "10000", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_waiter_fences_for_the_signaller),
      cmocka_unit_test(test_both_fence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
