/* cpu_bind.c — which CPUs a thread may run on. */
#include "common/cpu_bind.h"

#include <errno.h>

int cpu_set_of_self(cpu_set_t *set) {
  return pthread_getaffinity_np(pthread_self(), sizeof *set, set);
}

int cpu_bind_thread(pthread_t t, const cpu_set_t *set, int k) {
  int n = CPU_COUNT(set);
  if (n < 1) return EINVAL;
  k %= n;
  if (k < 0) k += n;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, set) || k-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(t, sizeof one, &one);
  }
  return EINVAL; /* cannot happen: k < n */
}

int cpu_allow_thread(pthread_t t, const cpu_set_t *set) {
  return pthread_setaffinity_np(t, sizeof *set, set);
}
