/* proc_watch.c — a process of this host by pid and start time (see
 * proc_watch.h): /proc/<pid>/stat, read after the command name (which may
 * hold spaces and parentheses: the last ')' ends it). */
#include "node/proc_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields 3.. of /proc/<pid>/stat: *state (field 3), *start (22), *code
 * (52, the exit status while a zombie; -1 when the kernel does not show
 * it). False when the file cannot be read. */
static bool read_stat(int pid, char *state, uint64_t *start, int *code) {
  char path[32], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  *start = 0;
  *code = -1;
  for (int field = 3; *p && field <= 52; field++) {
    if (field == 22) *start = strtoull(p, NULL, 10);
    if (field == 52) *code = atoi(p);
    p = strchr(p, ' ');
    if (!p) break;
    p++;
  }
  return *start != 0;
}

bool proc_start_time(int pid, uint64_t *start) {
  char state;
  int code;
  return pid > 0 && read_stat(pid, &state, start, &code);
}

proc_state proc_look(int pid, uint64_t start, int *wstatus) {
  char state;
  uint64_t now_start;
  int code;
  if (!read_stat(pid, &state, &now_start, &code) || now_start != start) return PROC_GONE;
  if (state != 'Z' && state != 'X') return PROC_RUNS;
  if (code < 0) return PROC_GONE;
  *wstatus = code;
  return PROC_ENDED;
}
