/* rec_file.h — the files of a controlled schedule's records (schedule,
 * node schedule and delivery records, docs/schedules.md): whether a record
 * and a replay name one file, and writing a record so that a failed write
 * leaves the file it replaces as it was (as `pto trace --merge` writes its
 * merged trace, tools/trace_read.c). */
#ifndef PTO_COMMON_REC_FILE_H
#define PTO_COMMON_REC_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

/* Whether paths a and b name one file: the same device and inode when
 * both exist (another spelling, a link), else the same string. */
bool rec_file_same(const char *a, const char *b);

typedef struct rec_file {
  FILE *f;                 /* write the record here */
  char tmp[PATH_MAX + 48]; /* the temporary file beside path; "" when in place */
} rec_file;

/* Opens a record to be written to path: a temporary file beside it
 * (path.tmp.PID.N) that rec_file_close renames over path, so a write that
 * fails leaves an existing file whole. A path that exists and is not a
 * regular file (a directory, a symbolic link, a device such as /dev/full)
 * is opened in place, as is path when no file can be made beside it.
 * 0, or -1 with errno. */
int rec_file_open(rec_file *w, const char *path);
/* Writes out and closes the record, then puts it at path. 0, or -1 with
 * errno (the temporary file removed, path untouched). */
int rec_file_close(rec_file *w, const char *path);

#endif
