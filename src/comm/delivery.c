/* delivery.c — recording and replaying the landing order of held-back
 * remote stores (delivery.h). Batches land from any kernel thread of the
 * chip, so the state is under a lock; under a controlled schedule only one
 * block runs at a time, which is what makes the sequence of batches the
 * same from run to run. */
#include "comm/delivery.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto/status.h"

#define DELIVERY_VERSION 1

static struct {
  pthread_mutex_t lock;
  bool record, replay;
  char path[4096];
  char *text; /* record being made, or the replayed file */
  size_t len, cap, pos;
  int line;         /* replay: the line read last */
  bool oom;         /* record: a line was lost */
  char bad[300];    /* replay: the first departure */
} dl = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void put(const char *s, size_t k) {
  if (dl.oom) return;
  if (dl.len + k + 1 > dl.cap) {
    size_t cap = dl.cap ? dl.cap * 2 : 1024;
    while (cap < dl.len + k + 1)
      cap *= 2;
    char *t = realloc(dl.text, cap);
    if (!t) {
      dl.oom = true;
      return;
    }
    dl.text = t;
    dl.cap = cap;
  }
  memcpy(dl.text + dl.len, s, k);
  dl.len += k;
  dl.text[dl.len] = 0;
}

static void reset(void) {
  free(dl.text);
  dl.text = NULL;
  dl.len = dl.cap = dl.pos = 0;
  dl.line = 0;
  dl.oom = false;
  dl.bad[0] = 0;
  dl.record = dl.replay = false;
}

int delivery_begin(const char *record_path, const char *replay_path, char *why, size_t n) {
  pthread_mutex_lock(&dl.lock);
  reset();
  int rc = 0;
  if (replay_path) {
    snprintf(dl.path, sizeof dl.path, "%s", replay_path);
    FILE *f = fopen(replay_path, "r");
    char buf[4096];
    size_t k;
    while (f && (k = fread(buf, 1, sizeof buf, f)) > 0)
      put(buf, k);
    if (!f || ferror(f) || dl.oom) {
      snprintf(why, n, "delivery record %s: cannot be read", replay_path);
      rc = PTO_EREPLAY;
    } else if (dl.len < 4 || memcmp(dl.text + dl.len - 4, "end\n", 4) != 0) {
      snprintf(why, n, "delivery record %s: truncated (it does not end with its \"end\" line)",
               replay_path);
      rc = PTO_EREPLAY;
    } else if (strncmp(dl.text, "pto-delivery 1\n", 15) != 0) {
      snprintf(why, n, "delivery record %s: line 1 is not \"pto-delivery %d\"", replay_path,
               DELIVERY_VERSION);
      rc = PTO_EREPLAY;
    }
    if (f) fclose(f);
    dl.pos = 15;
    dl.line = 1;
    dl.replay = rc == 0;
    if (rc) reset();
  } else if (record_path) {
    snprintf(dl.path, sizeof dl.path, "%s", record_path);
    dl.record = true;
    put("pto-delivery 1\n", 15);
  }
  pthread_mutex_unlock(&dl.lock);
  return rc;
}

/* The next line of the replayed record, NUL-terminated in place. */
static char *next_line(void) {
  if (dl.pos >= dl.len) return NULL;
  char *s = dl.text + dl.pos, *e = strchr(s, '\n');
  *e = 0; /* the text ends with "end\n": every line has its newline */
  dl.pos = (size_t)(e - dl.text) + 1;
  dl.line++;
  return s;
}

static bool num(char **s, long long lo, long long hi, long long *v) {
  char *e;
  if (**s != ' ') return false;
  *v = strtoll(*s + 1, &e, 10);
  if (e == *s + 1 || *v < lo || *v > hi) return false;
  *s = e;
  return true;
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
  if (dl.record) {
    char b[64];
    put(b, (size_t)snprintf(b, sizeof b, "L %d %d %zu", dom, peer, nb));
    for (size_t i = 0; i < nb; i++)
      put(b, (size_t)snprintf(b, sizeof b, " %zu", order[i]));
    put("\n", 1);
  } else if (dl.replay && !dl.bad[0]) {
    take(dom, peer, nb, order);
  }
  pthread_mutex_unlock(&dl.lock);
}

int delivery_end(char *why, size_t n) {
  pthread_mutex_lock(&dl.lock);
  int rc = 0;
  if (dl.record) {
    put("end\n", 4);
    FILE *f = dl.oom ? NULL : fopen(dl.path, "w");
    bool ok = f && fwrite(dl.text, 1, dl.len, f) == dl.len;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok) {
      snprintf(why, n, "delivery record %s: cannot be written", dl.path);
      rc = PTO_ESYSTEM;
    }
  } else if (dl.replay) {
    if (!dl.bad[0]) {
      char *s = next_line();
      if (!s || strcmp(s, "end") != 0)
        snprintf(dl.bad, sizeof dl.bad,
                 "line %d: the chip task ended with the record's batches from this line on not "
                 "landed",
                 dl.line);
    }
    if (dl.bad[0]) {
      snprintf(why, n, "replay of %s diverged at %s", dl.path, dl.bad);
      rc = PTO_EREPLAY;
    }
  }
  reset();
  pthread_mutex_unlock(&dl.lock);
  return rc;
}
