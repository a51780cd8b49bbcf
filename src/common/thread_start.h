/* thread_start.h — starting a thread whose failure names the thread and
 * pthread_create's error. */
#ifndef PTO_COMMON_THREAD_START_H
#define PTO_COMMON_THREAD_START_H

#include <pthread.h>
#include <stddef.h>

/* pthread_create(t, NULL, fn, arg). On failure writes "cannot start
 * <what>: pthread_create: <strerror of its return>" into why (what: the
 * printf format and its arguments, e.g. "the thread of core %d of %d") and
 * returns pthread_create's return (an errno value); 0 when it started. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg, char *why, size_t len,
                 const char *what, ...) __attribute__((format(printf, 6, 7)));

#endif
