/* proc_watch.h — whether a process of this host, known by its pid and its
 * start time, still runs: how rank 0 sees at once that a chip rank on its
 * host has gone (under mpirun, where it is not rank 0's child and cannot
 * be reaped), instead of waiting for its heartbeat deadline.
 *
 * The start time (clock ticks after boot, /proc/<pid>/stat field 22) is
 * what tells the process from a later one that reuses its pid, and a pid
 * of another PID namespace (a rank whose pid means something else here)
 * from this host's: a process whose start time does not match at the
 * first look is not watched at all. Linux only (/proc). */
#ifndef PTO_NODE_PROC_WATCH_H
#define PTO_NODE_PROC_WATCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum proc_state {
  PROC_RUNS = 0, /* running, sleeping or stopped */
  PROC_ENDED,    /* exited, not reaped yet: *wstatus is its status */
  PROC_GONE,     /* reaped, or its pid is another process now: status unknown */
} proc_state;

/* The start time of process pid; false when it cannot be read. */
bool proc_start_time(int pid, uint64_t *start);
/* How process (pid, start) is now. */
proc_state proc_look(int pid, uint64_t start, int *wstatus);

#endif
