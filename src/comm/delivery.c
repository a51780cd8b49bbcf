/* delivery.c — recording and replaying the landing order of held-back
 * remote stores (delivery.h). Batches land from any kernel thread of the
 * chip, so the state is under a lock; under a controlled schedule only one
 * block runs at a time, which is what makes the sequence of batches the
 * same from run to run. */
#include "comm/delivery.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/schedule_record.h"
#include "common/rec_file.h"
#include "pto/status.h"

#define DELIVERY_VERSION 1

typedef struct text {
  char *data;
  size_t len, cap;
  bool oom; /* a part was lost */
} text;

static struct {
  pthread_mutex_t lock;
  bool record, replay; /* both: the replayed orders are recorded */
  char rec_path[4096], rep_path[4096];
  text out; /* the record being made */
  text in;  /* the replayed file */
  size_t pos;
  int line;      /* replay: the line read last */
  char bad[300]; /* replay: the first departure */
} dl = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void put(text *t, const char *s, size_t k) {
  if (t->oom) return;
  if (t->len + k + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    while (cap < t->len + k + 1)
      cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) {
      t->oom = true;
      return;
    }
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s, k);
  t->len += k;
  t->data[t->len] = 0;
}

static void reset(void) {
  free(dl.out.data);
  free(dl.in.data);
  memset(&dl.out, 0, sizeof dl.out);
  memset(&dl.in, 0, sizeof dl.in);
  dl.pos = 0;
  dl.line = 0;
  dl.bad[0] = 0;
  dl.record = dl.replay = false;
}

int delivery_begin(const char *record_path, const char *replay_path, char *why, size_t n) {
  pthread_mutex_lock(&dl.lock);
  reset();
  int rc = 0;
  if (replay_path) {
    snprintf(dl.rep_path, sizeof dl.rep_path, "%s", replay_path);
    FILE *f = fopen(replay_path, "r");
    char buf[4096];
    size_t k;
    int nul;
    while (f && (k = fread(buf, 1, sizeof buf, f)) > 0)
      put(&dl.in, buf, k);
    if (!f || ferror(f)) { /* a directory opens, then reads fail */
      snprintf(why, n, "delivery record %s: cannot %s: %s", replay_path, f ? "read" : "open",
               strerror(errno));
      rc = PTO_EREPLAY;
    } else if (dl.in.oom) {
      snprintf(why, n, "delivery record %s: out of memory reading it", replay_path);
      rc = PTO_EREPLAY;
    } else if (dl.in.len < 4 || memcmp(dl.in.data + dl.in.len - 4, "end\n", 4) != 0) {
      snprintf(why, n, "delivery record %s: truncated (it does not end with its \"end\" line)",
               replay_path);
      rc = PTO_EREPLAY;
    } else if ((nul = rec_nul_line(dl.in.data, dl.in.len)) != 0) {
      snprintf(why, n, "delivery record %s line %d: a NUL byte (a record is text)", replay_path,
               nul);
      rc = PTO_EREPLAY;
    } else if (strncmp(dl.in.data, "pto-delivery 1\n", 15) != 0) {
      snprintf(why, n, "delivery record %s: line 1 is not \"pto-delivery %d\"", replay_path,
               DELIVERY_VERSION);
      rc = PTO_EREPLAY;
    }
    if (f) fclose(f);
    dl.pos = 15;
    dl.line = 1;
    dl.replay = rc == 0;
    if (rc) reset();
  }
  if (record_path && !rc) {
    snprintf(dl.rec_path, sizeof dl.rec_path, "%s", record_path);
    dl.record = true;
    put(&dl.out, "pto-delivery 1\n", 15);
  }
  pthread_mutex_unlock(&dl.lock);
  return rc;
}

/* The next line of the replayed record, NUL-terminated in place (a record
 * with a NUL byte was refused whole by delivery_begin). */
static char *next_line(void) {
  if (dl.pos >= dl.in.len) return NULL;
  char *s = dl.in.data + dl.pos, *e = memchr(s, '\n', dl.in.len - dl.pos);
  if (!e) return NULL; /* cannot happen: the text ends with "end\n" */
  *e = 0;
  dl.pos = (size_t)(e - dl.in.data) + 1;
  dl.line++;
  return s;
}

/* " N" with N in [lo, hi] (the records' one parser, rec_num). */
static bool num(char **s, long long lo, long long hi, long long *v) {
  return **s == ' ' && rec_num(s, lo, hi, v);
}

/* Replay: takes the record's order for this batch, or notes why not. */
static void take(int dom, int peer, size_t nb, size_t *order) {
  char *s = next_line();
  long long d, p, k;
  if (!s || s[0] != 'L') {
    snprintf(dl.bad, sizeof dl.bad,
             "line %d: a batch of %zu stores to rank %d of domain %d landed where the record has "
             "%s",
             dl.line, nb, peer, dom, s ? "another line" : "nothing");
    return;
  }
  s++;
  if (!num(&s, 0, INT32_MAX, &d) || !num(&s, -1, INT32_MAX, &p) || !num(&s, 1, INT32_MAX, &k)) {
    snprintf(dl.bad, sizeof dl.bad, "line %d: malformed batch line", dl.line);
    return;
  }
  if (d != dom || p != peer || (size_t)k != nb) {
    snprintf(dl.bad, sizeof dl.bad,
             "line %d: a batch of %zu stores to rank %d of domain %d landed, the record has %lld "
             "to rank %lld of domain %lld",
             dl.line, nb, peer, dom, k, p, d);
    return;
  }
  size_t *got = malloc(nb * sizeof *got);
  bool *used = calloc(nb, sizeof *used);
  bool ok = got && used;
  for (size_t i = 0; ok && i < nb; i++) {
    long long v;
    ok = num(&s, 0, (long long)nb - 1, &v) && !used[v];
    if (ok) used[v] = true, got[i] = (size_t)v;
  }
  if (ok && *s == 0)
    memcpy(order, got, nb * sizeof *order);
  else
    snprintf(dl.bad, sizeof dl.bad, "line %d: %s", dl.line,
             got && used ? "the order is not a permutation of the batch" : "out of memory");
  free(got);
  free(used);
}

void delivery_order(int dom, int peer, size_t nb, size_t *order) {
  pthread_mutex_lock(&dl.lock);
  if (dl.replay && !dl.bad[0]) take(dom, peer, nb, order);
  if (dl.record) {
    char b[64];
    put(&dl.out, b, (size_t)snprintf(b, sizeof b, "L %d %d %zu", dom, peer, nb));
    for (size_t i = 0; i < nb; i++)
      put(&dl.out, b, (size_t)snprintf(b, sizeof b, " %zu", order[i]));
    put(&dl.out, "\n", 1);
  }
  pthread_mutex_unlock(&dl.lock);
}

int delivery_end(char *why, size_t n) {
  pthread_mutex_lock(&dl.lock);
  int rc = 0;
  if (dl.record) {
    put(&dl.out, "end\n", 4);
    rec_file w;
    int bad = dl.out.oom ? -1 : rec_file_open(&w, dl.rec_path);
    if (!bad) {
      bool short_write = fwrite(dl.out.data, 1, dl.out.len, w.f) != dl.out.len;
      int e = errno;
      bad = rec_file_close(&w, dl.rec_path); /* fails too after a short write */
      if (short_write) errno = e;
    }
    if (bad) {
      if (dl.out.oom)
        snprintf(why, n, "delivery record %s: out of memory while recording", dl.rec_path);
      else
        snprintf(why, n, "delivery record %s: cannot be written: %s", dl.rec_path, strerror(errno));
      rc = PTO_ESYSTEM;
    }
  }
  if (dl.replay) {
    if (!dl.bad[0]) {
      char *s = next_line();
      if (!s || strcmp(s, "end") != 0)
        snprintf(dl.bad, sizeof dl.bad,
                 "line %d: the chip task ended with the record's batches from this line on not "
                 "landed",
                 dl.line);
    }
    if (dl.bad[0]) {
      snprintf(why, n, "replay of %s diverged at %s", dl.rep_path, dl.bad);
      rc = PTO_EREPLAY;
    }
  }
  reset();
  pthread_mutex_unlock(&dl.lock);
  return rc;
}
