/* resident.h — this process's resident memory, for tests that bound it
 * (/proc/self/statm's second field, in pages). */
#ifndef PTO_TEST_RESIDENT_H
#define PTO_TEST_RESIDENT_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* Resident bytes, or -1 when /proc/self/statm cannot be read. */
static inline int64_t resident_bytes(void) {
  long size = 0, pages = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &pages) != 2) pages = -1;
    fclose(f);
  }
  return pages < 0 ? -1 : (int64_t)pages * sysconf(_SC_PAGESIZE);
}

#endif
