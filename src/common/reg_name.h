/* reg_name.h — the names things are registered by (kernels, reduction
 * ops): kept in a table's char[max], shown in traces, errors and schedule
 * records, where each name is one line. */
#ifndef PTO_COMMON_REG_NAME_H
#define PTO_COMMON_REG_NAME_H

#include <stddef.h>

/* 0 when `name` (not NULL) fits a char[max] and has no control character
 * (bytes 0x01-0x1f and 0x7f); else PTO_EINVAL, with why[0..whylen) saying
 * which: "name 'NAME' is 60 bytes long, more than the 47 a name may have",
 * or "name 'a\nb' has a control character (0x0a) at byte 1 (from 0)"
 * (control characters shown escaped). A longer name would be cut short in
 * the table, so that two names of one prefix went by one; a newline would
 * split a schedule record's line. */
int reg_name_check(const char *name, size_t max, char *why, size_t whylen);

#endif
