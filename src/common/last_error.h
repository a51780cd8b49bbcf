/* last_error.h — why this thread's last refused or failed call failed
 * (pto_last_error, pto/status.h). */
#ifndef PTO_COMMON_LAST_ERROR_H
#define PTO_COMMON_LAST_ERROR_H

/* Records the reason (printf format, truncated to about 400 characters)
 * as this thread's pto_last_error() and returns code: `return
 * last_error_set(PTO_EINVAL, "pto_kernel_register: name is NULL");`. */
int last_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calls that take a pto_error_info, which the caller may pass as
 * NULL, say why they failed in pto_last_error() too: on failure (rc != 0)
 * the details they filled in, or rc's hint when they are empty. Returns
 * rc: `return last_error_keep(rc, err->details);`. */
int last_error_keep(int rc, const char *details);

#endif
