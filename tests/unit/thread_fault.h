/* thread_fault.h — makes the library's pthread_create fail where a test
 * chooses. A program that includes it (once) is linked with
 * -Wl,--wrap=pthread_create: every pthread_create of the library comes to
 * __wrap_pthread_create first, which fails with EAGAIN from the
 * thread_fault_from-th call after thread_fault_arm() on (what an exhausted
 * process, its thread or memory limits, gets), and calls the real one
 * otherwise. Threads of shared libraries (MPI's) are not affected. */
#ifndef PTO_TESTS_THREAD_FAULT_H
#define PTO_TESTS_THREAD_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

static atomic_int thread_fault_calls, thread_fault_from = -1;

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg) {
  int k = atomic_fetch_add(&thread_fault_calls, 1);
  int from = atomic_load(&thread_fault_from);
  if (from >= 0 && k >= from) return EAGAIN;
  return __real_pthread_create(t, attr, fn, arg);
}

/* From now on, the from-th pthread_create (0: the next) and every later one
 * fail; from -1: none. */
static inline void thread_fault_arm(int from) {
  atomic_store(&thread_fault_calls, 0);
  atomic_store(&thread_fault_from, from);
}

#endif
