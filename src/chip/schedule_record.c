/* schedule_record.c — writing and reading schedule records (the format:
 * schedule_record.h). */
#include "chip/schedule_record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rec_file.h"

static void rec_buf_printf(rec_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rec_buf_printf(rec_buf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int k = vsnprintf(b->data ? b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->oom = true;
      return;
    }
    if ((size_t)k < room) {
      b->len += (size_t)k;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap - b->len <= (size_t)k)
      cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->oom = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
}

void rec_buf_item(rec_buf *b, const rec_item *it) {
  switch (it->kind) {
  case REC_ORCH: rec_buf_printf(b, "%c %lld\n", it->kernel ? 'W' : 'O', (long long)it->task); break;
  case REC_START:
    rec_buf_printf(b, "S %lld %d", (long long)it->task, it->kernel);
    for (int i = 0; i < it->nblocks; i++) {
      rec_buf_printf(b, " %d:", it->blocks[i]);
      for (int j = it->first[i]; j < it->first[i + 1]; j++)
        rec_buf_printf(b, j > it->first[i] ? ".%d" : "%d", it->cores[j]);
    }
    rec_buf_printf(b, "\n");
    break;
  case REC_DONE:
    rec_buf_printf(b, "D %lld %d %d\n", (long long)it->task, it->block, it->units);
    break;
  case REC_ASYNC: rec_buf_printf(b, "A %lld\n", (long long)it->task); break;
  case REC_YIELD:
    rec_buf_printf(b, "Y %lld %d %d\n", (long long)it->task, it->block, it->units);
    break;
  case REC_RESUME: rec_buf_printf(b, "R %lld %d\n", (long long)it->task, it->block); break;
  case REC_END: break;
  }
}

void rec_buf_free(rec_buf *b) {
  free(b->data);
  *b = (rec_buf){0};
}

int rec_write(const char *path, const rec_header *h, const rec_buf *body, char *why, size_t n) {
  if (body->oom) {
    snprintf(why, n, "schedule record %s: out of memory while recording", path);
    return -1;
  }
  rec_file w;
  if (rec_file_open(&w, path)) {
    snprintf(why, n, "schedule record %s: cannot open for writing: %s", path, strerror(errno));
    return -1;
  }
  FILE *f = w.f;
  fprintf(f, "pto-schedule %d\nseed %" PRIu64 "\nchip %d %d %d\n", SCHED_RECORD_VERSION, h->seed,
          h->clusters, h->aic, h->aiv);
  for (int k = 0; k < h->nkernels; k++)
    fprintf(f, "kernel %d %s\n", k, h->kernel_names[k]);
  fprintf(f, "tasks %" PRId64 " blocks %" PRId64 "\n", h->tasks, h->blocks);
  if (body->len) fwrite(body->data, 1, body->len, f);
  fprintf(f, "end\n");
  if (rec_file_close(&w, path)) {
    snprintf(why, n, "schedule record %s: write failed: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* ---- reading ---- */

/* The current line, NUL-terminated in place; NULL at the end. */
static char *next_line(rec_reader *rd) {
  if (rd->pos >= rd->len) return NULL;
  char *s = rd->text + rd->pos;
  char *nl = memchr(s, '\n', rd->len - rd->pos);
  if (!nl) return NULL; /* every line of a whole record ends in '\n' */
  *nl = '\0';
  rd->pos = (size_t)(nl - rd->text) + 1;
  rd->line++;
  return s;
}

bool rec_num(char **s, long long lo, long long hi, long long *out) {
  char *p = *s;
  while (*p == ' ')
    p++;
  if (!(*p >= '0' && *p <= '9') && *p != '-') return false;
  char *e;
  errno = 0;
  long long v = strtoll(p, &e, 10);
  if (e == p || errno || v < lo || v > hi) return false;
  *s = e;
  *out = v;
  return true;
}

int rec_nul_line(const char *text, size_t len) {
  const char *z = memchr(text, '\0', len);
  if (!z) return 0;
  int line = 1;
  for (const char *p = text; (p = memchr(p, '\n', (size_t)(z - p))) != NULL; p++)
    line++;
  return line;
}

static bool line_end(const char *s) {
  while (*s == ' ')
    s++;
  return *s == '\0';
}

int rec_open(rec_reader *rd, const char *path, char *why, size_t n) {
  memset(rd, 0, sizeof *rd);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(why, n, "schedule record %s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  for (size_t got; text && (got = fread(text + len, 1, cap - len, f)) > 0;) {
    len += got;
    if (len == cap) {
      char *t = realloc(text, cap * 2);
      if (!t) {
        free(text);
        text = NULL;
        break;
      }
      text = t;
      cap *= 2;
    }
  }
  int read_errno = ferror(f) ? errno : 0; /* a directory opens, then reads fail */
  fclose(f);
  if (read_errno) {
    free(text);
    snprintf(why, n, "schedule record %s: cannot read: %s", path, strerror(read_errno));
    return -1;
  }
  if (!text) {
    snprintf(why, n, "schedule record %s: out of memory reading it", path);
    return -1;
  }
  int rc = rec_open_text(rd, text, len, path, why, n);
  free(text);
  return rc;
}

int rec_open_text(rec_reader *rd, const char *text, size_t len, const char *path, char *why,
                  size_t n) {
  memset(rd, 0, sizeof *rd);
  rd->text = malloc(len + 1);
  if (!rd->text) {
    snprintf(why, n, "schedule record %s: out of memory reading it", path);
    return -1;
  }
  if (len) memcpy(rd->text, text, len);
  rd->len = len;
  rd->text[rd->len] = '\0';
  /* truncated: the last line must be "end" */
  if (rd->len < 4 || memcmp(rd->text + rd->len - 4, "end\n", 4) != 0 ||
      (rd->len > 4 && rd->text[rd->len - 5] != '\n')) {
    snprintf(why, n, "schedule record %s: truncated (it does not end with its \"end\" line)", path);
    return -1;
  }
  int nul = rec_nul_line(rd->text, rd->len);
  if (nul) {
    snprintf(why, n, "schedule record %s line %d: a NUL byte (a record is text)", path, nul);
    return -1;
  }
  long long v[3];
  char *s = next_line(rd);
  if (!s || strncmp(s, "pto-schedule ", 13) != 0) {
    snprintf(why, n, "schedule record %s line 1: not a schedule record (no \"pto-schedule\")",
             path);
    return -1;
  }
  s += 12;
  if (!rec_num(&s, 0, 1000, &v[0]) || !line_end(s) || v[0] != SCHED_RECORD_VERSION) {
    snprintf(why, n, "schedule record %s line 1: format version is not %d", path,
             SCHED_RECORD_VERSION);
    return -1;
  }
#define BAD_LINE(what)                                                                             \
  do {                                                                                             \
    snprintf(why, n, "schedule record %s line %d: expected %s", path, rd->line, what);             \
    return -1;                                                                                     \
  } while (0)
  s = next_line(rd);
  if (!s || strncmp(s, "seed", 4) != 0) BAD_LINE("\"seed N\"");
  s += 4;
  if (!rec_num(&s, 0, INT64_MAX, &v[0]) || !line_end(s)) BAD_LINE("\"seed N\"");
  rd->h.seed = (uint64_t)v[0];
  s = next_line(rd);
  if (!s || strncmp(s, "chip", 4) != 0) BAD_LINE("\"chip CLUSTERS AIC AIV\"");
  s += 4;
  if (!rec_num(&s, 1, 1 << 20, &v[0]) || !rec_num(&s, 0, 1, &v[1]) || !rec_num(&s, 0, 2, &v[2]) ||
      !line_end(s))
    BAD_LINE("\"chip CLUSTERS AIC AIV\"");
  rd->h.clusters = (int)v[0];
  rd->h.aic = (int)v[1];
  rd->h.aiv = (int)v[2];
  for (;;) {
    size_t at = rd->pos;
    int line = rd->line;
    s = next_line(rd);
    if (!s) BAD_LINE("\"tasks N blocks N\"");
    if (strncmp(s, "kernel ", 7) != 0) {
      rd->text[rd->pos - 1] = '\n'; /* the NUL next_line wrote over it */
      rd->pos = at;                 /* not a kernel: read again below */
      rd->line = line;
      break;
    }
    s += 6;
    if (!rec_num(&s, 0, 1 << 20, &v[0]) || v[0] != rd->h.nkernels || *s != ' ')
      BAD_LINE("\"kernel ID NAME\" with ids in order");
    char(*names)[48] = realloc(rd->names, sizeof *names * (size_t)(rd->h.nkernels + 1));
    if (!names) BAD_LINE("a smaller record (out of memory)");
    rd->names = names;
    snprintf(names[rd->h.nkernels], sizeof names[0], "%s", s + 1);
    rd->h.nkernels++;
  }
  s = next_line(rd);
  if (!s || strncmp(s, "tasks", 5) != 0) BAD_LINE("\"tasks N blocks N\"");
  s += 5;
  if (!rec_num(&s, 0, INT64_MAX, &v[0])) BAD_LINE("\"tasks N blocks N\"");
  while (*s == ' ')
    s++;
  if (strncmp(s, "blocks", 6) != 0) BAD_LINE("\"tasks N blocks N\"");
  s += 6;
  if (!rec_num(&s, 0, INT64_MAX, &v[1]) || !line_end(s)) BAD_LINE("\"tasks N blocks N\"");
  rd->h.tasks = v[0];
  rd->h.blocks = v[1];
  return 0;
}

static bool grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return true;
  int c = *cap ? *cap * 2 : 16;
  while (c < need)
    c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

int rec_next(rec_reader *rd, rec_item *it, char *why, size_t n) {
  memset(it, 0, sizeof *it);
  char *s = next_line(rd);
  it->line = rd->line;
  if (!s) {
    snprintf(why, n, "line %d: the record ends without its \"end\" line", rd->line + 1);
    return -1;
  }
  long long v = 0, w = 0, u = 0;
  const char *whole = s;
  char k = s[0];
  if (strcmp(s, "end") == 0) {
    it->kind = REC_END;
    rd->text[rd->pos - 1] = '\n';     /* the NUL next_line wrote over it */
    rd->pos = (size_t)(s - rd->text); /* read again: stays at the end */
    rd->line--;
    return 0;
  }
  s++;
  bool ok = false;
  switch (k) {
  case 'O':
    it->kind = REC_ORCH;
    ok = rec_num(&s, 0, INT64_MAX, &v) && line_end(s);
    it->task = v;
    break;
  case 'W':
    it->kind = REC_ORCH;
    it->kernel = 1; /* a wait's marker */
    ok = rec_num(&s, 0, INT64_MAX, &v) && line_end(s);
    it->task = v;
    break;
  case 'A':
    it->kind = REC_ASYNC;
    ok = rec_num(&s, 0, INT64_MAX, &v) && line_end(s);
    it->task = v;
    break;
  case 'Y':
    it->kind = REC_YIELD;
    ok = rec_num(&s, 0, INT64_MAX, &v) && rec_num(&s, 0, INT32_MAX, &w) &&
         rec_num(&s, 1, INT32_MAX, &u) && line_end(s);
    it->task = v;
    it->block = (int32_t)w;
    it->units = (int32_t)u;
    break;
  case 'R':
    it->kind = REC_RESUME;
    ok = rec_num(&s, 0, INT64_MAX, &v) && rec_num(&s, 0, INT32_MAX, &w) && line_end(s);
    it->task = v;
    it->block = (int32_t)w;
    break;
  case 'D':
    it->kind = REC_DONE;
    ok = rec_num(&s, 0, INT64_MAX, &v) && rec_num(&s, 0, INT32_MAX, &w) && rec_num(&s, 1, 3, &u) &&
         line_end(s);
    it->task = v;
    it->block = (int32_t)w;
    it->units = (int32_t)u;
    break;
  case 'S': {
    it->kind = REC_START;
    ok = rec_num(&s, 0, INT64_MAX, &v) && rec_num(&s, 0, INT32_MAX, &w);
    it->task = v;
    it->kernel = (int32_t)w;
    int nb = 0, nc = 0;
    while (ok && !line_end(s)) {
      long long b, c;
      ok = rec_num(&s, 0, INT32_MAX, &b) && *s == ':';
      if (!ok) break;
      s++;
      if (!grow((void **)&rd->blocks, &rd->cap_blocks, nb + 2, sizeof *rd->blocks) ||
          !grow((void **)&rd->first, &rd->cap_first, nb + 2, sizeof *rd->first)) {
        snprintf(why, n, "line %d: out of memory", rd->line);
        return -1;
      }
      rd->blocks[nb] = (int32_t)b;
      rd->first[nb] = nc;
      nb++;
      for (;;) {
        ok = rec_num(&s, 0, INT32_MAX, &c);
        if (!ok) break;
        if (!grow((void **)&rd->cores, &rd->cap_cores, nc + 1, sizeof *rd->cores)) {
          snprintf(why, n, "line %d: out of memory", rd->line);
          return -1;
        }
        rd->cores[nc++] = (int)c;
        if (*s != '.') break;
        s++;
      }
    }
    ok = ok && nb > 0;
    if (ok) rd->first[nb] = nc;
    it->nblocks = nb;
    it->blocks = rd->blocks;
    it->first = rd->first;
    it->cores = rd->cores;
    break;
  }
  default: break;
  }
  if (!ok) {
    snprintf(why, n, "line %d: malformed action \"%.60s\"", rd->line, whole);
    return -1;
  }
  return 0;
}

void rec_close(rec_reader *rd) {
  free(rd->text);
  free(rd->names);
  free(rd->blocks);
  free(rd->first);
  free(rd->cores);
  memset(rd, 0, sizeof *rd);
}
