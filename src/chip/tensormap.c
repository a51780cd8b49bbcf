/* tensormap.c — dependency inference from tensor regions (see tensormap.h).
 *
 * Index: by absolute byte address, so every view that may share a byte
 * with another is found, whatever its base pointer. Chunks come in levels:
 * a level-L chunk is 4 KiB << 4L bytes (4 KiB, 64 KiB, 1 MiB, ... 2^60).
 * An entry lives in the bucket of (L, first level-L chunk its bytes touch)
 * for the smallest L at which its view spans at most SPAN_MAX chunks, so
 * tasks working on different parts of one big buffer do not share a chain
 * and a huge view is still one entry. A lookup scans, at each level that
 * holds entries, the chunks its own view touches, widened down by the
 * longest span any entry at that level has (so an entry that starts
 * earlier but reaches into the view is found). Views of ordinary size use
 * level 0 only: one bucket per 4 KiB chunk they touch, as before levels.
 * Each bucket keeps writers and pure readers in separate chains, so a
 * read, which conflicts only with writers, never walks the readers.
 * Stale entries (retired tasks) are dropped while scanning. */
#include "chip/tensormap.h"

#include <stdlib.h>

#include "common/region.h"
#include "pto/status.h"

#define CHUNK_SHIFT 12
#define LEVEL_SHIFT 4
#define SPAN_MAX    16 /* chunks an entry may span at its level (1 << LEVEL_SHIFT) */

/* What a chain walk reads of every entry, 32 bytes: two to a cache line.
 * The normalised view (m->views[i], 144 bytes) is read only for entries
 * whose byte range meets the probe's. */
struct tmap_entry {
  int64_t task;
  uint64_t lo, hi; /* views[i].lo/hi: the cheap first test */
  int32_t mode;
  int32_t next; /* bucket chain or free list, -1 = end */
};

static unsigned level_shift(int level) { return CHUNK_SHIFT + LEVEL_SHIFT * (unsigned)level; }

static uint32_t bucket_of(const tmap *m, int level, uint64_t chunk) {
  uint64_t h = chunk * 0xD6E8FEB86659FD93ull ^ ((uint64_t)level << 58);
  h *= 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & (m->nbuckets - 1);
}

/* A lookup: the view normalised once, and its first and last byte. */
typedef struct probe {
  region_view rv;
  uint64_t lo, last;
} probe;

static void probe_of(const pto_tensor *v, probe *p) {
  region_view_init(v, &p->rv);
  p->lo = p->rv.lo;
  p->last = p->rv.hi > p->rv.lo ? p->rv.hi - 1 : p->rv.lo;
}

/* The level an entry for p is stored at, and its first chunk there. */
static int level_of(const probe *p, uint64_t *chunk, uint32_t *span) {
  int level = 0;
  for (;; level++) {
    unsigned sh = level_shift(level);
    uint64_t c0 = p->lo >> sh, n = (p->last >> sh) - c0 + 1;
    if (n <= SPAN_MAX || level == TMAP_LEVELS - 1) {
      *chunk = c0;
      *span = (uint32_t)n; /* <= 16 at the top level: 2^64 / 2^60 */
      return level;
    }
  }
}

int tmap_init(tmap *m, uint32_t capacity) {
  if (capacity == 0) return PTO_EINVAL;
  m->capacity = capacity;
  m->nbuckets = 64;
  while (m->nbuckets < capacity / 4 && m->nbuckets < (1u << 20))
    m->nbuckets <<= 1;
  m->buckets = malloc(sizeof(int32_t) * 2 * m->nbuckets);
  m->pool = malloc(sizeof(tmap_entry) * capacity);
  m->views = malloc(sizeof(region_view) * capacity);
  if (!m->buckets || !m->pool || !m->views) {
    tmap_destroy(m);
    return PTO_ENOMEM;
  }
  m->fresh = UINT32_MAX; /* every bucket, once */
  tmap_clear(m);
  return PTO_OK;
}

void tmap_destroy(tmap *m) {
  free(m->buckets);
  free(m->pool);
  free(m->views);
  m->buckets = NULL;
  m->pool = NULL;
  m->views = NULL;
}

void tmap_clear(tmap *m) {
  if (m->fresh < m->nbuckets) {
    /* O(entries used since the last clear): every live entry is one of
     * them, so emptying their buckets empties every chain */
    for (uint32_t i = 0; i < m->fresh; i++) {
      probe p = {m->views[i], m->views[i].lo, 0};
      p.last = p.rv.hi > p.rv.lo ? p.rv.hi - 1 : p.rv.lo;
      uint64_t chunk;
      uint32_t span;
      int level = level_of(&p, &chunk, &span);
      uint32_t b = bucket_of(m, level, chunk);
      m->buckets[2 * b] = m->buckets[2 * b + 1] = -1;
    }
  } else {
    for (uint32_t b = 0; b < 2 * m->nbuckets; b++)
      m->buckets[b] = -1;
  }
  /* The pool is handed out in order first (fresh), then from the free list,
   * so a large, mostly unused pool is never touched. */
  m->fresh = 0;
  m->free_head = -1;
  m->used = 0;
  for (int l = 0; l < TMAP_LEVELS; l++)
    m->max_span[l] = 0;
  m->levels = 0;
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

/* Walks one bucket: reports conflicting live entries whose bytes may meet
 * the view's; when `record` is set, also drops entries the new write covers
 * and is ordered after. */
static void scan_bucket(tmap *m, uint32_t b, const probe *p, tmap_mode mode, int64_t task,
                        int64_t oldest_live, tmap_dep_fn dep, void *arg, bool record) {
  int32_t *link = &m->buckets[b]; /* one chain: writers or readers */
  while (*link >= 0) {
    tmap_entry *e = &m->pool[*link];
    if (e->task < oldest_live) { /* retired: it completed, nobody waits for it */
      int32_t dead = *link;
      *link = e->next;
      entry_free(m, dead);
      continue;
    }
    if (conflicts(e->mode, mode) && e->lo <= p->last && p->lo < e->hi && e->task != task &&
        region_view_overlap(&m->views[*link], &p->rv)) {
      bool ordered = dep(arg, e->task);
      if (record && ordered && (mode & TMAP_WRITE) &&
          region_view_covers(&p->rv, &m->views[*link])) {
        int32_t dead = *link; /* the new writer orders after it: later tasks need only that */
        *link = e->next;
        entry_free(m, dead);
        continue;
      }
    }
    link = &e->next;
  }
}

/* Bucket b holds two chains: writers (any access with TMAP_WRITE) at
 * buckets[2b], pure readers at buckets[2b + 1]. Readers conflict only with
 * writers, so a read walks the writer chain alone. */
static void scan_chains(tmap *m, uint32_t b, const probe *p, tmap_mode mode, int64_t task,
                        int64_t oldest_live, tmap_dep_fn dep, void *arg, bool record) {
  scan_bucket(m, 2 * b, p, mode, task, oldest_live, dep, arg, record);
  if (mode & TMAP_WRITE) scan_bucket(m, 2 * b + 1, p, mode, task, oldest_live, dep, arg, record);
}

/* Every bucket that may hold an entry overlapping `view`. A chunk bucket
 * is shared by colliding keys, so a bucket may be visited twice; the
 * second visit only re-reports dependencies (deduplicated by callers). */
static void scan(tmap *m, const probe *p, tmap_mode mode, int64_t task, int64_t oldest_live,
                 tmap_dep_fn dep, void *arg, bool record) {
  uint64_t from[TMAP_LEVELS], to[TMAP_LEVELS], total = 0;
  for (uint32_t bits = m->levels; bits; bits &= bits - 1) { /* levels in use only */
    int l = __builtin_ctz(bits);
    unsigned sh = level_shift(l);
    uint64_t c0 = p->lo >> sh, widen = m->max_span[l] - 1;
    from[l] = c0 >= widen ? c0 - widen : 0;
    to[l] = p->last >> sh;
    total += to[l] - from[l] + 1;
  }
  if (total > m->nbuckets) { /* more chunks than buckets: every bucket, once */
    for (uint32_t b = 0; b < m->nbuckets; b++)
      scan_chains(m, b, p, mode, task, oldest_live, dep, arg, record);
    return;
  }
  for (uint32_t bits = m->levels; bits; bits &= bits - 1) {
    int l = __builtin_ctz(bits);
    for (uint64_t c = from[l]; c <= to[l]; c++)
      scan_chains(m, bucket_of(m, l, c), p, mode, task, oldest_live, dep, arg, record);
  }
}

int tmap_access(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                tmap_dep_fn dep, void *arg) {
  if (m->used == m->capacity) {
    for (uint32_t b = 0; b < 2 * m->nbuckets; b++)
      purge_chain(m, &m->buckets[b], oldest_live);
    if (m->used == m->capacity) return PTO_ETENSORMAP_OVERFLOW;
  }
  probe p;
  probe_of(view, &p);
  scan(m, &p, mode, task, oldest_live, dep, arg, true);
  int32_t i = entry_alloc(m);
  tmap_entry *e = &m->pool[i];
  m->views[i] = p.rv;
  e->lo = p.rv.lo;
  e->hi = p.rv.hi;
  e->task = task;
  e->mode = (int32_t)mode;
  uint64_t chunk;
  uint32_t span;
  int level = level_of(&p, &chunk, &span);
  if (span > m->max_span[level]) m->max_span[level] = span;
  m->levels |= 1u << level;
  int32_t *head = &m->buckets[2 * bucket_of(m, level, chunk) + (mode == TMAP_READ)];
  e->next = *head;
  *head = i;
  return PTO_OK;
}

void tmap_conflicts(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t oldest_live,
                    tmap_dep_fn dep, void *arg) {
  probe p;
  probe_of(view, &p);
  scan(m, &p, mode, -1, oldest_live, dep, arg, false);
}
