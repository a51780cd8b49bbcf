/* cpu_bind.h — which CPUs a thread may run on: one of a set, or a set. */
#ifndef PTO_COMMON_CPU_BIND_H
#define PTO_COMMON_CPU_BIND_H

#include <pthread.h>
#include <sched.h>

/* The CPUs the calling thread may run on; 0, or an errno value. */
int cpu_set_of_self(cpu_set_t *set);

/* Binds thread t to the k-th CPU of set (k counted modulo its size).
 * Returns 0, or an errno value (t keeps its CPUs). */
int cpu_bind_thread(pthread_t t, const cpu_set_t *set, int k);

/* Lets thread t run on every CPU of set (and only those); 0, or an errno
 * value. */
int cpu_allow_thread(pthread_t t, const cpu_set_t *set);

#endif
