/* clock.h — monotonic time for deadlines and statistics. */
#ifndef PTO_CLOCK_H
#define PTO_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline uint64_t pto_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* Deadline `ms` from now; ms < 0 means none (UINT64_MAX), and so does one
 * too far away to represent (it must not wrap into the past). */
static inline uint64_t pto_deadline_ms(int64_t ms) {
  uint64_t ns;
  if (ms < 0 || __builtin_mul_overflow((uint64_t)ms, 1000000ull, &ns) ||
      __builtin_add_overflow(pto_now_ns(), ns, &ns))
    return UINT64_MAX;
  return ns;
}
#endif
