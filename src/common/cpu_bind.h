/* cpu_bind.h — which CPUs a thread may run on: one of a set, or a set. */
#ifndef PTO_COMMON_CPU_BIND_H
#define PTO_COMMON_CPU_BIND_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

/* The CPUs the calling thread may run on; 0, or an errno value. */
int cpu_set_of_self(cpu_set_t *set);

/* Binds thread t to the k-th CPU of set (k counted modulo its size).
 * Returns 0, or an errno value (t keeps its CPUs). */
int cpu_bind_thread(pthread_t t, const cpu_set_t *set, int k);

/* Lets thread t run on every CPU of set (and only those); 0, or an errno
 * value. */
int cpu_allow_thread(pthread_t t, const cpu_set_t *set);

/* The threads runnable on the machine at this instant, running or waiting
 * for a CPU (the kernel's count, /proc/loadavg's fourth field: one pread
 * of a descriptor opened once), or -1 when it cannot be read. */
int cpu_runnable_now(void);

/* The machine's online CPUs (read once). */
int cpu_online(void);

/* Whether a set of `mine` CPUs (of `online` on the machine) is left to a
 * process's own threads: the `others` runnable threads that are not its
 * own (the machine's runnable count less its own runnable threads) fit on
 * the CPUs outside the set. A heuristic over counts of one instant: a
 * thread that the kernel places on a CPU of the set anyway is not seen. */
static inline bool cpu_set_unshared(int others, int online, int mine) {
  return others <= online - mine;
}

#endif
