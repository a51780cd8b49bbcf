/* tensormap.c — dependency inference from tensor regions (see tensormap.h).
 *
 * Index: an entry lives in the bucket of (base buffer, first 4 KiB chunk of
 * the bytes its view touches), so tasks working on different parts of one
 * big buffer do not share a chain. A lookup scans the chunks its own view
 * touches, widened down by the longest span any stored narrow view has
 * (so an entry that starts earlier but reaches into the view is found).
 * Views spanning more than WIDE_CHUNKS chunks go to one per-buffer "wide"
 * bucket, which every lookup on that buffer also scans. Stale entries
 * (retired tasks) are dropped while scanning. */
#include "chip/tensormap.h"

#include <stdlib.h>

#include "common/region.h"
#include "pto/status.h"

#define CHUNK_SHIFT 12
#define WIDE_CHUNKS 16
#define WIDE_KEY    UINT64_MAX

struct tmap_entry {
  int64_t lo, hi; /* bytes of buf the view touches: the cheap first test */
  pto_tensor view;
  int64_t task;
  int32_t mode;
  int32_t next; /* bucket chain or free list, -1 = end */
};

static uint32_t bucket_of(const tmap *m, const void *buf, uint64_t chunk) {
  uint64_t h = ((uint64_t)(uintptr_t)buf >> 4) ^ (chunk * 0xD6E8FEB86659FD93ull);
  h *= 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & (m->nbuckets - 1);
}

/* A lookup: the view, its byte range and its chunks, computed once. */
typedef struct probe {
  const pto_tensor *view;
  int64_t lo, hi;
  uint64_t c0, c1; /* first and last 4 KiB chunk (relative to the buffer) */
} probe;

static probe probe_of(const pto_tensor *v) {
  probe p = {v, 0, 0, 0, 0};
  region_bytes(v, &p.lo, &p.hi);
  p.c0 = (uint64_t)p.lo >> CHUNK_SHIFT;
  p.c1 = (uint64_t)(p.hi > p.lo ? p.hi - 1 : p.lo) >> CHUNK_SHIFT;
  return p;
}

int tmap_init(tmap *m, uint32_t capacity) {
  if (capacity == 0) return PTO_EINVAL;
  m->capacity = capacity;
  m->nbuckets = 64;
  while (m->nbuckets < capacity / 4 && m->nbuckets < (1u << 20))
    m->nbuckets <<= 1;
  m->buckets = malloc(sizeof(int32_t) * m->nbuckets);
  m->pool = malloc(sizeof(tmap_entry) * capacity);
  if (!m->buckets || !m->pool) {
    tmap_destroy(m);
    return PTO_ENOMEM;
  }
  tmap_clear(m);
  return PTO_OK;
}

void tmap_destroy(tmap *m) {
  free(m->buckets);
  free(m->pool);
  m->buckets = NULL;
  m->pool = NULL;
}

void tmap_clear(tmap *m) {
  for (uint32_t b = 0; b < m->nbuckets; b++)
    m->buckets[b] = -1;
  /* The pool is handed out in order first (fresh), then from the free list,
   * so a large, mostly unused pool is never touched. */
  m->fresh = 0;
  m->free_head = -1;
  m->used = 0;
  m->max_span = 1;
}

/* An unused entry; the caller checked used < capacity. */
static int32_t entry_alloc(tmap *m) {
  int32_t i = m->free_head;
  if (i >= 0)
    m->free_head = m->pool[i].next;
  else
    i = (int32_t)m->fresh++;
  m->used++;
  return i;
}

static void entry_free(tmap *m, int32_t i) {
  m->pool[i].next = m->free_head;
  m->free_head = i;
  m->used--;
}

/* Drops entries of retired tasks in one bucket chain. */
static void purge_chain(tmap *m, int32_t *link, int64_t oldest_live) {
  while (*link >= 0) {
    tmap_entry *e = &m->pool[*link];
    if (e->task < oldest_live) {
      int32_t dead = *link;
      *link = e->next;
      entry_free(m, dead);
    } else {
      link = &e->next;
    }
  }
}

static bool conflicts(int32_t a, int32_t b) { return ((a | b) & TMAP_WRITE) != 0; }

/* Walks one bucket: reports conflicting live entries on view->buf; when
 * `record` is set, also drops entries the new write covers. */
static void scan_bucket(tmap *m, uint32_t b, const probe *p, tmap_mode mode, int64_t task,
                        int64_t oldest_live, tmap_dep_fn dep, void *arg, bool record) {
  const pto_tensor *view = p->view;
  int32_t *link = &m->buckets[b];
  while (*link >= 0) {
    tmap_entry *e = &m->pool[*link];
    if (e->task < oldest_live) { /* retired: it completed, nobody waits for it */
      int32_t dead = *link;
      *link = e->next;
      entry_free(m, dead);
      continue;
    }
    if (e->view.buf == view->buf && e->lo < p->hi && p->lo < e->hi && e->task != task &&
        conflicts(e->mode, mode) && region_overlap(&e->view, view)) {
      dep(arg, e->task);
      if (record && (mode & TMAP_WRITE) && region_covers(view, &e->view)) {
        int32_t dead = *link; /* the new writer orders after it: later tasks need only that */
        *link = e->next;
        entry_free(m, dead);
        continue;
      }
    }
    link = &e->next;
  }
}

/* Every bucket that may hold an entry overlapping `view`. A chunk bucket
 * is shared by colliding keys, so a bucket may be visited twice; the
 * second visit only re-reports dependencies (deduplicated by callers). */
static void scan(tmap *m, const probe *p, tmap_mode mode, int64_t task, int64_t oldest_live,
                 tmap_dep_fn dep, void *arg, bool record) {
  const void *buf = p->view->buf;
  scan_bucket(m, bucket_of(m, buf, WIDE_KEY), p, mode, task, oldest_live, dep, arg, record);
  uint64_t from = p->c0 >= m->max_span - 1 ? p->c0 - (m->max_span - 1) : 0;
  uint64_t n = p->c1 - from + 1;
  if (n > m->nbuckets) { /* a view wider than the table: every bucket, once */
    for (uint32_t b = 0; b < m->nbuckets; b++)
      scan_bucket(m, b, p, mode, task, oldest_live, dep, arg, record);
    return;
  }
  for (uint64_t c = from; c <= p->c1; c++)
    scan_bucket(m, bucket_of(m, buf, c), p, mode, task, oldest_live, dep, arg, record);
}

int tmap_access(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                tmap_dep_fn dep, void *arg) {
  if (m->used == m->capacity) {
    for (uint32_t b = 0; b < m->nbuckets; b++)
      purge_chain(m, &m->buckets[b], oldest_live);
    if (m->used == m->capacity) return PTO_ETENSORMAP_OVERFLOW;
  }
  probe p = probe_of(view);
  scan(m, &p, mode, task, oldest_live, dep, arg, true);
  int32_t i = entry_alloc(m);
  tmap_entry *e = &m->pool[i];
  e->lo = p.lo;
  e->hi = p.hi;
  e->view = *view;
  e->task = task;
  e->mode = (int32_t)mode;
  uint64_t span = p.c1 - p.c0 + 1;
  uint64_t key = span > WIDE_CHUNKS ? WIDE_KEY : p.c0;
  if (span <= WIDE_CHUNKS && span > m->max_span) m->max_span = (uint32_t)span;
  int32_t *head = &m->buckets[bucket_of(m, view->buf, key)];
  e->next = *head;
  *head = i;
  return PTO_OK;
}

void tmap_conflicts(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t oldest_live,
                    tmap_dep_fn dep, void *arg) {
  probe p = probe_of(view);
  scan(m, &p, mode, -1, oldest_live, dep, arg, false);
}
