/* cpu_bind.c — which CPUs a thread may run on. */
#include "common/cpu_bind.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

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

static int loadavg_fd = -1;
static pthread_once_t loadavg_once = PTHREAD_ONCE_INIT;
static void loadavg_open(void) { loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC); }

int cpu_runnable_now(void) {
  pthread_once(&loadavg_once, loadavg_open);
  char b[128];
  /* "0.52 0.41 0.30 3/412 12345": runnable/threads is the fourth field;
   * pread at 0 reads the file anew each time, and moves no offset that
   * another thread's read shares */
  ssize_t n = loadavg_fd < 0 ? -1 : pread(loadavg_fd, b, sizeof b - 1, 0);
  if (n <= 0) return -1;
  b[n] = '\0';
  const char *p = b;
  for (int field = 0; field < 3; field++) {
    while (*p && *p != ' ')
      p++;
    while (*p == ' ')
      p++;
  }
  char *end;
  long r = strtol(p, &end, 10);
  return end == p || *end != '/' || r < 0 || r > 1L << 30 ? -1 : (int)r;
}

int cpu_online(void) {
  static _Atomic int online;
  int n = atomic_load_explicit(&online, memory_order_relaxed);
  if (!n) {
    long v = sysconf(_SC_NPROCESSORS_ONLN);
    n = v > 0 && v < 1L << 20 ? (int)v : 1;
    atomic_store_explicit(&online, n, memory_order_relaxed);
  }
  return n;
}
