/* schedule_record.h — the schedule record's text format
 * (docs/schedules.md): what a controlled run chose, one action a line,
 * after a header that identifies the program and the chip:
 *
 *   pto-schedule 1                  format version
 *   seed 42                         the seed it was drawn from (0: none)
 *   chip 8 1 2                      clusters, AIC and AIV per cluster
 *   kernel 0 matmul                 every registered kernel, by id
 *   tasks 120 blocks 480            submitted tasks, blocks started
 *   O 3                             actions run after the 3rd submit
 *   W 3                             actions run at a wait, 3 tasks submitted
 *   S 2 0 0:4                       task 2 (kernel 0) block 0 on core 4
 *   S 5 1 0:0.1.2 1:3.4.5           a gang (or MIX block): block:cores
 *   D 2 0 1                         block 0 of task 2 completed (1 unit)
 *   A 7                             an async completion of task 7
 *   Y 3 1 2                         block 1 of task 3 yielded at its 2nd wait
 *   R 3 1                           block 1 of task 3 resumed
 *   end
 *
 * Written at the end of a run from memory; read whole before a replay.
 * Parsing never trusts the file: every number is range-checked by its
 * user, and a malformed line is an error naming its number. */
#ifndef PTO_CHIP_SCHEDULE_RECORD_H
#define PTO_CHIP_SCHEDULE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_RECORD_VERSION 1

typedef struct rec_buf { /* the body of a record being made */
  char *data;
  size_t len, cap;
  bool oom;
} rec_buf;

void rec_buf_free(rec_buf *b);

typedef struct rec_header {
  uint64_t seed;
  int clusters, aic, aiv;
  int nkernels;
  const char *const *kernel_names; /* writer: nkernels names */
  int64_t tasks, blocks;
} rec_header;

/* Writes header + body + "end" to path; 0, or -1 with why. */
int rec_write(const char *path, const rec_header *h, const rec_buf *body, char *why, size_t n);

typedef enum rec_kind {
  REC_END = 0,
  REC_ORCH,
  REC_START,
  REC_DONE,
  REC_ASYNC,
  REC_YIELD,
  REC_RESUME
} rec_kind;

typedef struct rec_item {
  rec_kind kind;
  int line;
  int64_t task;   /* S D A Y R: the task; O W: tasks submitted */
  int32_t kernel; /* S: the kernel; O: 0, W: 1 */
  int32_t block;  /* D Y R: the block */
  int32_t units;  /* D; Y: the wait it yielded at (1: its first) */
  /* S: nblocks blocks; block i on cores[first[i] .. first[i + 1]) */
  int nblocks;
  int32_t *blocks;
  int *first;
  int *cores;
} rec_item;

typedef struct rec_reader {
  char *text;
  size_t len, pos;
  int line;
  rec_header h;
  char (*names)[48]; /* h.nkernels kernel names */
  /* storage of the current item's lists */
  int32_t *blocks;
  int *first, *cores;
  int cap_blocks, cap_first, cap_cores;
} rec_reader;

/* Appends item's line (not REC_END: rec_write ends the record). */
void rec_buf_item(rec_buf *b, const rec_item *it);

/* Reads the whole record and its header; 0, or -1 with why (naming the
 * line). A record without its "end" line is refused as truncated. */
int rec_open(rec_reader *rd, const char *path, char *why, size_t n);
/* The same over text[0..len) (copied), `name` standing for the file. */
int rec_open_text(rec_reader *rd, const char *text, size_t len, const char *name, char *why,
                  size_t n);
/* The next item (REC_END after the last); -1 with why on a bad line. */
int rec_next(rec_reader *rd, rec_item *it, char *why, size_t n);
void rec_close(rec_reader *rd);

/* The number parser of every record format (this one, the node's and the
 * delivery record, docs/schedules.md): a decimal integer at *s, after any
 * spaces, in [lo, hi]; advances *s past it. False on no digits, overflow
 * or a value out of range (*s unchanged). */
bool rec_num(char **s, long long lo, long long hi, long long *out);
/* The line (from 1) of text[0..len) holding its first NUL byte, or 0 when
 * it has none: a record is text, and its lines are read as C strings. */
int rec_nul_line(const char *text, size_t len);

#endif
