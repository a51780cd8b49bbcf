/* last_error.c — why this thread's last refused call failed (last_error.h). */
#include "common/last_error.h"

#include <stdarg.h>
#include <stdio.h>

#include "pto/status.h"

static _Thread_local char last_why[400];

const char *pto_last_error(void) { return last_why; }

int last_error_keep(int rc, const char *details) {
  if (rc) last_error_set(rc, "%s", details && details[0] ? details : pto_strerror(rc));
  return rc;
}

int last_error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_why, sizeof last_why, fmt, ap);
  va_end(ap);
  return code;
}
