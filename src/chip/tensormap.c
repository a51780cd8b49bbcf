/* tensormap.c — dependency inference from tensor regions (see tensormap.h). */
#include "chip/tensormap.h"

#include <stdlib.h>

#include "common/region.h"
#include "pto/status.h"

struct tmap_entry {
  pto_tensor view;
  int64_t task;
  int32_t mode;
  int32_t next; /* bucket chain or free list, -1 = end */
};

static uint32_t bucket_of(const tmap *m, const void *buf) {
  uint64_t h = ((uint64_t)(uintptr_t)buf >> 4) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & (m->nbuckets - 1);
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
  for (uint32_t i = 0; i < m->capacity; i++)
    m->pool[i].next = (int32_t)i + 1;
  m->pool[m->capacity - 1].next = -1;
  m->free_head = 0;
  m->used = 0;
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

/* Walks the bucket of view->buf: reports conflicting live entries; when
 * `record` is set, also drops entries the new write covers. */
static void scan(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                 tmap_dep_fn dep, void *arg, bool record) {
  int32_t *link = &m->buckets[bucket_of(m, view->buf)];
  while (*link >= 0) {
    tmap_entry *e = &m->pool[*link];
    if (e->task < oldest_live) { /* retired: it completed, nobody waits for it */
      int32_t dead = *link;
      *link = e->next;
      entry_free(m, dead);
      continue;
    }
    if (e->view.buf == view->buf && e->task != task && conflicts(e->mode, mode) &&
        region_overlap(&e->view, view)) {
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

int tmap_access(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                tmap_dep_fn dep, void *arg) {
  if (m->free_head < 0) {
    for (uint32_t b = 0; b < m->nbuckets; b++)
      purge_chain(m, &m->buckets[b], oldest_live);
    if (m->free_head < 0) return PTO_ETENSORMAP_OVERFLOW;
  }
  scan(m, view, mode, task, oldest_live, dep, arg, true);
  int32_t i = m->free_head;
  tmap_entry *e = &m->pool[i];
  m->free_head = e->next;
  m->used++;
  e->view = *view;
  e->task = task;
  e->mode = (int32_t)mode;
  int32_t *head = &m->buckets[bucket_of(m, view->buf)];
  e->next = *head;
  *head = i;
  return PTO_OK;
}

void tmap_conflicts(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t oldest_live,
                    tmap_dep_fn dep, void *arg) {
  scan(m, view, mode, -1, oldest_live, dep, arg, false);
}
