/* last_error.h — why this thread's last refused call failed, for the
 * calls that take no pto_error_info (pto_last_error, pto/status.h). */
#ifndef PTO_COMMON_LAST_ERROR_H
#define PTO_COMMON_LAST_ERROR_H

/* Records the reason (printf format, truncated to about 400 characters)
 * as this thread's pto_last_error() and returns code: `return
 * last_error_set(PTO_EINVAL, "pto_kernel_register: name is NULL");`. */
int last_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
