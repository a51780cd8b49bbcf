/* thread_start.c — a thread start that names what failed (thread_start.h). */
#include "common/thread_start.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg, char *why, size_t len,
                 const char *what, ...) {
  int rc = pthread_create(t, NULL, fn, arg);
  if (rc == 0 || !why || !len) return rc;
  char name[200];
  va_list ap;
  va_start(ap, what);
  vsnprintf(name, sizeof name, what, ap);
  va_end(ap);
  snprintf(why, len, "cannot start %s: pthread_create: %s", name, strerror(rc));
  return rc;
}
