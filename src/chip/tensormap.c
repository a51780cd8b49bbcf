/* tensormap.c — dependency inference from tensor regions (see tensormap.h).
 *
 * Index: by absolute byte address, so every view that may share a byte
 * with another is found, whatever its base pointer. Chunks come in levels:
 * a level-L chunk is 64 << 2L bytes (64 B, 256 B, 1 KiB, 4 KiB, ...
 * 2^62 B). An entry lives in the bucket of (L, first level-L chunk its
 * bytes touch) for the smallest L at which its view spans at most
 * SPAN_MAX (4) chunks, so views of different bytes rarely share a chain,
 * even 64-byte slots of one buffer, and a huge view is still one entry.
 *
 * A lookup visits each level that holds entries it may conflict with.
 * There it either scans the chunks its own view touches, widened down by
 * the longest span of those entries at that level (so an entry that
 * starts earlier but reaches into the view is found; a read is not
 * widened by wider reads, which it does not walk), or, when those chunks
 * outnumber the level's entries, walks the level's list of entries
 * instead. Per level it costs at most min(chunks, entries) plus the
 * entries met in those chains: a small probe pays for a few buckets per
 * level in use, and a 1 MiB probe over fine entries pays for the entries,
 * not for 16384 chunks. Each bucket keeps writers, pure readers and
 * COMMUTE accesses in separate chains, and a lookup walks only those it
 * conflicts with that hold entries at the level: a read never walks the
 * readers, and a write of a slot beside wider reads walks back over their
 * chunks, where a read of it does not.
 *
 * Chains and level lists are doubly linked (back links in the cold
 * m->links[]), so any entry is dropped in O(1) from either walk. Stale
 * entries (retired tasks) are dropped while walking, and each access drops
 * up to two from the oldest end of its level's list; a level that empties
 * forgets its chains and their longest spans.
 *
 * A sole writer. An update (READ_WRITE: INOUT) of a dense view whose
 * lookup left no other entry whose byte range meets its own (each one it
 * met was retired, or covered by it and dropped) is marked SOLE, and
 * remembered by its first byte in m->sole. Every later access whose range
 * meets it walks it (a writers' chain, which every access walks; ranges
 * widened as above) and clears the mark, so while the mark stands the
 * entry is the only one that meets its bytes. The next update of exactly
 * those bytes (a dense view of the same range) by another task then needs
 * no lookup: it conflicts with that entry alone, and, ordered after it,
 * covers it, so the entry becomes the new one in place (a chain's next
 * link, an accumulator's next step: W1's INOUT slot, a K loop's output
 * tile); one not ordered after it (a manual scope) is recorded beside it,
 * which clears its mark. Only updates look (a plain write of the same
 * bytes seldom follows with no reader between; the look costs every
 * access that makes it). */
#include "chip/tensormap.h"

#include <stdlib.h>

#include "common/region.h"
#include "pto/status.h"

#define CHUNK_SHIFT 6
#define LEVEL_SHIFT 2
#define SPAN_MAX    4 /* chunks an entry may span at its level (1 << LEVEL_SHIFT) */
/* chains per bucket: writers, pure readers, COMMUTE accesses (which a
 * COMMUTE access does not walk: a group of 10^5 accumulations into one
 * tensor would otherwise walk every live member at each submit) */
#define CHAINS 3

/* What a chain walk reads of every entry, 32 bytes: two to a cache line.
 * The normalised view (m->views[i], 144 bytes) is read only for entries
 * whose byte range meets the probe's. */
struct tmap_entry {
  int64_t task;
  uint64_t lo, hi; /* views[i].lo/hi: the cheap first test */
  int32_t mode;
  int32_t next; /* bucket chain or free list, -1 = end */
};

/* Read and written only when an entry is recorded or dropped, and when a
 * lookup walks a level's list. */
struct tmap_link {
  int32_t prev;         /* chain: previous entry, or -1 - (head index in buckets) */
  int32_t lprev, lnext; /* level list, -1 = end (lprev -1: first) */
  int32_t level;
};

static unsigned level_shift(int level) { return CHUNK_SHIFT + LEVEL_SHIFT * (unsigned)level; }

/* In tmap_entry.mode, above the tmap_mode bits: a sole writer (above). */
#define SOLE 0x100

/* m->sole's slot for an entry whose bytes start at lo: lo folded 6 bits
 * at a time from bit 3, so that 64 views at a power-of-two stride of 8
 * bytes to 1 MiB (the rows of a tile, a slot per task) take 61-64 slots
 * (a multiplicative hash gave 1 KiB rows 20) and other strides about 42. */
static uint32_t sole_slot(uint64_t lo) {
  return (uint32_t)(lo >> 3 ^ lo >> 9 ^ lo >> 15 ^ lo >> 21) & (TMAP_SOLE_HINTS - 1);
}

/* Neighbouring chunks of one level share a bucket group: 1 << GROUP_SHIFT
 * chunks in a row go to consecutive buckets (the low bits of the chunk
 * number are kept, the group number is hashed). Views taken in address
 * order (a slot per task, the rows of a buffer) then find their buckets
 * in the cache lines the previous lookups touched, and a widened scan's
 * chunks are neighbours, where a hash of each chunk sent every lookup to
 * a line of its own in a table larger than the first-level cache. Keys
 * of different groups spread as before; within a group none collide. */
#define GROUP_SHIFT 4

#define GROUP_MASK ((1u << GROUP_SHIFT) - 1)

/* The hashed part of the buckets of the chunks of `chunk`'s group (its low
 * GROUP_SHIFT bits clear): the chunk's bucket is this | (chunk &
 * GROUP_MASK), masked to the table (bucket_in). A walk over neighbouring
 * chunks hashes once per group. */
static uint32_t group_of(int level, uint64_t chunk) {
  /* a level-l chunk number has at most 58 - 2l bits: the key is unique */
  uint64_t h = (chunk >> GROUP_SHIFT | (uint64_t)level << 59) * 0xD6E8FEB86659FD93ull;
  h = (h ^ h >> 29) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) << GROUP_SHIFT;
}

static uint32_t bucket_in(const tmap *m, uint32_t group, uint64_t chunk) {
  return (group | (uint32_t)(chunk & GROUP_MASK)) & (m->nbuckets - 1);
}

static uint32_t bucket_of(const tmap *m, int level, uint64_t chunk) {
  return bucket_in(m, group_of(level, chunk), chunk);
}

/* A lookup: the view, normalised once (the caller's, read in place), and
 * its first and last byte. */
typedef struct probe {
  const region_view *rv;
  uint64_t lo, last;
} probe;

static void probe_of_view(const region_view *v, probe *p) {
  p->rv = v;
  p->lo = v->lo;
  p->last = v->hi > v->lo ? v->hi - 1 : v->lo;
}

/* The level an entry for p is stored at, and the chunks it spans there
 * (its chain: head_of). */
static int level_of(const probe *p, uint32_t *span) {
  int level = 0;
  for (;; level++) {
    unsigned sh = level_shift(level);
    uint64_t c0 = p->lo >> sh, n = (p->last >> sh) - c0 + 1;
    if (n <= SPAN_MAX || level == TMAP_LEVELS - 1) {
      *span = (uint32_t)n; /* <= 4 at the top level: 2^64 / 2^62 */
      return level;
    }
  }
}

/* The chain of a bucket that holds entries of `mode`: 0 plain writers, 1
 * pure readers, 2 COMMUTE accesses. */
static uint32_t chain_of(int32_t mode) {
  return mode == TMAP_READ ? 1 : (mode & TMAP_COMMUTE) ? 2 : 0;
}

/* The chain head (index into m->buckets) of an entry recorded as (level,
 * view lo) in chain c (chain_of its mode). */
static uint32_t head_of(const tmap *m, int level, uint64_t lo, uint32_t c) {
  return CHAINS * bucket_of(m, level, lo >> level_shift(level)) + c;
}

/* What a lookup walks at a level ("look"). A lookup's kind: a read walks
 * the writers' and the COMMUTE accesses' chains, a write every chain, a
 * COMMUTE access the writers' and the readers'. m->look[l] holds a byte
 * per kind (byte k for kind k): bits 4-6 the chains it walks at level l,
 * those that got an entry there since the level was last empty, and bits
 * 0-3 the most chunks one of those entries spans (1-4, as 1, 3, 7 or 15:
 * the larger of two is their OR). Recording an entry ORs in its chain and
 * span for each kind that walks its chain (look_add); the level's last
 * entry going zeroes it. An entry since dropped may leave its chain
 * walked and its span widening the walk until then, which is only work. */
enum { LOOK_READ, LOOK_WRITE, LOOK_COMMUTE };

/* The shift of a lookup's byte in m->look, by its mode. */
static unsigned look_shift(tmap_mode mode) {
  static const uint8_t shift[8] = {
      [TMAP_READ] = 8 * LOOK_READ,           [TMAP_WRITE] = 8 * LOOK_WRITE,
      [TMAP_READ_WRITE] = 8 * LOOK_WRITE,    [TMAP_COMMUTE] = 8 * LOOK_COMMUTE,
      [TMAP_COMMUTE | 1] = 8 * LOOK_COMMUTE, [TMAP_COMMUTE | 2] = 8 * LOOK_COMMUTE,
      [TMAP_COMMUTE_RW] = 8 * LOOK_COMMUTE};
  return shift[mode & TMAP_COMMUTE_RW];
}

/* The bits an entry of chain c spanning `span` chunks adds to m->look:
 * its byte in the byte of each kind that walks chain c. */
#define LOOK_BYTE(c, span) ((1u << (4 + (c))) | ((1u << (span)) - 1))
#define LOOK_ADD(c, span)                                                                          \
  ((c) == 0 ? LOOK_BYTE(0, span) *                                                                 \
                  (1u << 8 * LOOK_READ | 1u << 8 * LOOK_WRITE | 1u << 8 * LOOK_COMMUTE)            \
   : (c) == 1 ? LOOK_BYTE(1, span) * (1u << 8 * LOOK_WRITE | 1u << 8 * LOOK_COMMUTE)               \
              : LOOK_BYTE(2, span) * (1u << 8 * LOOK_READ | 1u << 8 * LOOK_WRITE))
#define LOOK_SPANS(c)                                                                              \
  { 0, LOOK_ADD(c, 1), LOOK_ADD(c, 2), LOOK_ADD(c, 3), LOOK_ADD(c, 4) }
static const uint32_t look_add[CHAINS][SPAN_MAX + 1] = {LOOK_SPANS(0), LOOK_SPANS(1),
                                                        LOOK_SPANS(2)};
_Static_assert(SPAN_MAX == 4, "look keeps a span of 1-4 chunks in 4 bits");

int tmap_init(tmap *m, uint32_t capacity) {
  if (capacity == 0 || capacity > TMAP_ENTRIES_MAX) return PTO_EINVAL;
  m->capacity = capacity;
  m->nbuckets = 64;
  while (m->nbuckets < capacity / 4 && m->nbuckets < (1u << 20))
    m->nbuckets <<= 1;
  m->buckets = malloc(sizeof(int32_t) * CHAINS * m->nbuckets);
  m->pool = malloc(sizeof(tmap_entry) * capacity);
  m->links = malloc(sizeof(tmap_link) * capacity);
  m->views = malloc(sizeof(region_view) * capacity);
  if (!m->buckets || !m->pool || !m->links || !m->views) {
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
  free(m->links);
  free(m->views);
  m->buckets = NULL;
  m->pool = NULL;
  m->links = NULL;
  m->views = NULL;
}

void tmap_clear(tmap *m) {
  if (m->fresh < m->nbuckets) {
    /* O(entries used since the last clear): every live chain's head is
     * one of them, and names its bucket (prev < 0; a dropped entry's stale
     * name only empties a chain again). Not the bucket of the entry's lo:
     * a trim (below) moves lo, not the entry. */
    for (uint32_t i = 0; i < m->fresh; i++)
      if (m->links[i].prev < 0) m->buckets[-1 - m->links[i].prev] = -1;
  } else {
    for (uint32_t b = 0; b < CHAINS * m->nbuckets; b++)
      m->buckets[b] = -1;
  }
  /* The pool is handed out in order first (fresh), then from the free list,
   * so a large, mostly unused pool is never touched. */
  m->fresh = 0;
  m->free_head = -1;
  m->used = 0;
  for (int l = 0; l < TMAP_LEVELS; l++) {
    m->look[l] = 0;
    m->level_used[l] = 0;
    m->level_head[l] = m->level_tail[l] = -1;
  }
  m->levels = 0;
  for (int i = 0; i < TMAP_SOLE_HINTS; i++)
    m->sole[i].lo = UINT64_MAX; /* none: no view starts at that byte (it would end past 2^64) */
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

/* Unlinks entry i from its level's list. */
static void level_unlink(tmap *m, int32_t i) {
  tmap_link *k = &m->links[i];
  int l = k->level;
  if (k->lprev < 0)
    m->level_head[l] = k->lnext;
  else
    m->links[k->lprev].lnext = k->lnext;
  if (k->lnext >= 0)
    m->links[k->lnext].lprev = k->lprev;
  else
    m->level_tail[l] = k->lprev;
}

/* Links entry i at the head of level l's list (its newest). */
static void level_push(tmap *m, int32_t i, int l) {
  tmap_link *k = &m->links[i];
  k->level = l;
  k->lprev = -1;
  k->lnext = m->level_head[l];
  if (k->lnext >= 0)
    m->links[k->lnext].lprev = i;
  else
    m->level_tail[l] = i;
  m->level_head[l] = i;
}

/* Unlinks entry i from its chain and its level's list and frees it. */
static void drop(tmap *m, int32_t i) {
  tmap_link *k = &m->links[i];
  int32_t next = m->pool[i].next;
  if (k->prev < 0)
    m->buckets[-1 - k->prev] = next;
  else
    m->pool[k->prev].next = next;
  if (next >= 0) m->links[next].prev = k->prev;
  int l = k->level;
  level_unlink(m, i);
  m->pool[i].mode &= ~SOLE;      /* a freed entry is no hint's */
  if (--m->level_used[l] == 0) { /* no entry reaches across from an earlier chunk */
    m->look[l] = 0;
    m->levels &= ~(1u << l);
  }
  m->pool[i].next = m->free_head;
  m->free_head = i;
  m->used--;
}

static bool conflicts(int32_t a, int32_t b) {
  return ((a | b) & TMAP_WRITE) != 0 && !(a & b & TMAP_COMMUTE);
}

/* Entry i's bytes that an ordered write w covers at one end go: later
 * tasks need the entry's task only for the rest, since w is ordered after
 * it for those (a part-writer after a whole-buffer reader: without this,
 * every later writer of a part takes an edge to each whole-buffer reader
 * still live, and W4's consumers one to every reducer the orchestrator is
 * ahead of). Dense views only, and only an end: what is left stays dense.
 * The entry keeps its chain, that of its first chunk before the trim,
 * which every lookup of its bytes still walks (a lookup walks back up to
 * its span - 1 chunks from its first, and the span only shrank). */
static void trim(tmap *m, int32_t i, const region_view *w) {
  region_view *v = &m->views[i];
  if (!v->known || !v->dense || !w->known || !w->dense) return;
  uint64_t lo = v->lo, hi = v->hi;
  if (w->lo <= lo && w->hi > lo && w->hi < hi)
    lo = w->hi;
  else if (w->hi >= hi && w->lo > lo && w->lo < hi)
    hi = w->lo;
  else
    return;
  region_view_bytes(v, lo, hi);
  m->pool[i].lo = lo;
  m->pool[i].hi = hi;
}

/* A live entry of another task whose range meets the probe's and which
 * conflicts with the access: reports it when its bytes meet the
 * view's; when `record` is set and the new write is ordered after it,
 * also drops it when the write covers it (and returns true), or trims
 * the end it covers. Inlined in both walks: it runs for every entry whose
 * range meets the probe's. */
static inline __attribute__((always_inline)) bool
visit(tmap *m, int32_t i, const probe *p, tmap_mode mode, tmap_dep_fn dep, void *arg, bool record) {
  const tmap_entry *e = &m->pool[i];
  if (region_view_overlap(&m->views[i], p->rv)) {
    bool ordered = dep(arg, e->task);
    if (record && ordered && (mode & (TMAP_WRITE | TMAP_COMMUTE)) == TMAP_WRITE) {
      if (region_view_covers(p->rv, &m->views[i])) {
        drop(m, i); /* the new writer orders after it: later tasks need only that */
        return true;
      }
      trim(m, i, p->rv);
    }
  }
  return false;
}

/* What a walk does besides reporting: nothing (a query), drop what the
 * access covers and end the SOLE marks it meets (an access recorded),
 * and also count what it meets that stays (an update, whether it will be
 * a sole writer). A kind of its own, not a count every recording walk
 * makes: counting in all of them took 2.4-4.5% more orchestrator
 * instructions per task on W2, W4, stencil_1d and tree
 * (bench/orch_instructions.sh), the walk's code no longer specialized
 * without it. */
typedef enum walk { WALK_QUERY, WALK_RECORD, WALK_COUNT } walk;

/* One entry of either walk: dropped when retired, else visited when it
 * conflicts with the access, its range meets the probe's and it is
 * another task's. When recording, an entry that conflicts and meets
 * loses its SOLE mark (the new entry meets it; a sole writer conflicts
 * with every access). Returns 1 for such an entry that stays (WALK_COUNT
 * adds them up: a plain write conflicts with every entry), else 0.
 * Inlined in both walks, which call it for every entry they pass. */
static inline __attribute__((always_inline)) uint32_t check(tmap *m, int32_t i, const probe *p,
                                                            tmap_mode mode, int64_t task,
                                                            int64_t oldest_live, tmap_dep_fn dep,
                                                            void *arg, walk w) {
  tmap_entry *e = &m->pool[i];
  if (e->task < oldest_live) { /* retired: it completed, nobody waits for it */
    drop(m, i);
    return 0;
  }
  if (!conflicts(e->mode, mode) || e->lo > p->last || p->lo >= e->hi) return 0;
  if (w != WALK_QUERY && (e->mode & SOLE)) e->mode &= ~SOLE;
  if (e->task == task) return 1;
  return !visit(m, i, p, mode, dep, arg, w != WALK_QUERY);
}

/* Walks one chain (writers or readers of one bucket); inlined in the
 * chunk loop, which calls it for mostly empty or short chains. */
static inline __attribute__((always_inline)) uint32_t
scan_chain(tmap *m, uint32_t h, const probe *p, tmap_mode mode, int64_t task, int64_t oldest_live,
           tmap_dep_fn dep, void *arg, walk w) {
  uint32_t met = 0;
  for (int32_t i = m->buckets[h]; i >= 0;) {
    int32_t next = m->pool[i].next; /* i may be dropped */
    uint32_t stays = check(m, i, p, mode, task, oldest_live, dep, arg, w);
    if (w == WALK_COUNT) met += stays;
    i = next;
  }
  return met;
}

/* Walks every entry stored at `level`. */
static uint32_t scan_level(tmap *m, int level, const probe *p, tmap_mode mode, int64_t task,
                           int64_t oldest_live, tmap_dep_fn dep, void *arg, walk w) {
  uint32_t met = 0;
  for (int32_t i = m->level_head[level]; i >= 0;) {
    int32_t next = m->links[i].lnext; /* i may be dropped */
    uint32_t stays = check(m, i, p, mode, task, oldest_live, dep, arg, w);
    if (w == WALK_COUNT) met += stays;
    i = next;
  }
  return met;
}

/* Every entry that may overlap the probe, level by level: the buckets of
 * the chunks it may share with an entry there, or the level's list when
 * that is shorter. Bucket b holds three chains: plain writers at
 * buckets[3b], pure readers at buckets[3b + 1], COMMUTE accesses at
 * buckets[3b + 2]; a lookup walks those of its kind that hold entries at
 * the level (look). A chunk bucket is shared by colliding keys, so a
 * bucket may be visited twice; the second visit only re-reports
 * dependencies (deduplicated by callers). WALK_COUNT: returns the live
 * entries whose range meets the probe's that stay (check), else 0.
 * Inlined in each caller, where the walk's kind is a constant. */
static inline __attribute__((always_inline)) uint32_t scan(tmap *m, const probe *p, tmap_mode mode,
                                                           int64_t task, int64_t oldest_live,
                                                           tmap_dep_fn dep, void *arg, walk w) {
  uint32_t met = 0;
  const unsigned kind = look_shift(mode);
  for (uint32_t bits = m->levels; bits; bits &= bits - 1) { /* levels in use only */
    int l = __builtin_ctz(bits);
    uint32_t look = m->look[l] >> kind; /* 0 also once emptied by this lookup */
    if (!(look & 0x70)) continue;       /* no chain of this kind's here */
    unsigned sh = level_shift(l);
    uint64_t c0 = p->lo >> sh, widen = 31u - (unsigned)__builtin_clz(look & 0xf);
    uint64_t from = c0 >= widen ? c0 - widen : 0, to = p->last >> sh;
    if (to - from >= m->level_used[l]) { /* more chunks than entries */
      met += scan_level(m, l, p, mode, task, oldest_live, dep, arg, w);
      continue;
    }
    uint32_t group = group_of(l, from);
    for (uint64_t c = from; c <= to; c++) {
      if ((c & GROUP_MASK) == 0 && c != from) group = group_of(l, c);
      uint32_t h = CHAINS * bucket_in(m, group, c);
      if (look & 0x10) met += scan_chain(m, h, p, mode, task, oldest_live, dep, arg, w);
      if (look & 0x20) met += scan_chain(m, h + 1, p, mode, task, oldest_live, dep, arg, w);
      if (look & 0x40) met += scan_chain(m, h + 2, p, mode, task, oldest_live, dep, arg, w);
    }
  }
  return met;
}

int tmap_access(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                tmap_dep_fn dep, void *arg) {
  region_view rv;
  region_view_init(view, &rv);
  return tmap_access_view(m, &rv, mode, task, oldest_live, dep, arg);
}

/* The sole writer of exactly view's bytes (above), or -1; h: the view's
 * sole_slot. */
static int32_t sole_writer(tmap *m, const region_view *view, uint32_t h) {
  if (m->sole[h].lo != view->lo) return -1; /* none of this first byte: most lookups end here */
  int32_t i = m->sole[h].entry; /* an entry recorded since the last clear (which empties them) */
  const tmap_entry *e = &m->pool[i];
  if ((e->mode & SOLE) && e->lo == view->lo && e->hi == view->hi) return i;
  /* a stale hint (its writer met another access, or went): the next look
   * of this first byte ends at the test above */
  m->sole[h].lo = UINT64_MAX;
  return -1;
}

/* An update (READ_WRITE) of exactly sole writer s's bytes, by another
 * task: reports s (unless retired) and, when ordered after it (or after
 * it retired), makes s the new entry in place, the newest of its level,
 * and returns true; else unmarks s, which stays beside the new entry the
 * caller records, and returns false. */
static __attribute__((noinline)) bool sole_access(tmap *m, int32_t s, const region_view *view,
                                                  int64_t task, int64_t oldest_live,
                                                  tmap_dep_fn dep, void *arg) {
  tmap_entry *e = &m->pool[s];
  if (e->task >= oldest_live && !dep(arg, e->task)) {
    e->mode &= ~SOLE;
    return false;
  }
  m->views[s] = *view; /* the same bytes; the caller's levels and base */
  e->task = task;      /* its mode and chain stay: an update's */
  int l = m->links[s].level;
  level_unlink(m, s);
  level_push(m, s, l);
  return true;
}

int tmap_access_view(tmap *m, const region_view *view, tmap_mode mode, int64_t task,
                     int64_t oldest_live, tmap_dep_fn dep, void *arg) {
  if (m->used == m->capacity) {
    for (uint32_t bits = m->levels; bits; bits &= bits - 1) {
      int l = __builtin_ctz(bits);
      for (int32_t i = m->level_head[l]; i >= 0;) {
        int32_t next = m->links[i].lnext;
        if (m->pool[i].task < oldest_live) drop(m, i);
        i = next;
      }
    }
    if (m->used == m->capacity) return PTO_ETENSORMAP_OVERFLOW;
  }
  probe p;
  probe_of_view(view, &p);
  /* an update in place of a dense view: a sole writer's kind */
  bool update = mode == TMAP_READ_WRITE && view->known && view->dense, sole = false;
  uint32_t sh = update ? sole_slot(view->lo) : 0;
  int32_t s = update ? sole_writer(m, view, sh) : -1;
  if (s >= 0 && m->pool[s].task != task) {
    if (sole_access(m, s, view, task, oldest_live, dep, arg)) return PTO_OK;
    /* s stays beside it: no sole writer */
  } else if (update) {
    sole = scan(m, &p, mode, task, oldest_live, dep, arg, WALK_COUNT) == 0;
  } else {
    (void)scan(m, &p, mode, task, oldest_live, dep, arg, WALK_RECORD);
  }
  uint32_t span;
  int level = level_of(&p, &span);
  /* Entries are recorded in task order, so a level list's tail is its
   * oldest: up to two retired ones go now. Entries that no lookup visits
   * again (a fresh slot per task) are thus dropped anyway, the pool stays
   * about as large as the live entries, and the entry reused is warm. */
  for (int n = 0; n < 2; n++) {
    int32_t old = m->level_tail[level];
    if (old < 0 || m->pool[old].task >= oldest_live) break;
    drop(m, old);
  }
  int32_t i = entry_alloc(m);
  tmap_entry *e = &m->pool[i];
  tmap_link *k = &m->links[i];
  m->views[i] = *view;
  e->lo = view->lo;
  e->hi = view->hi;
  e->task = task;
  e->mode = (int32_t)mode;
  if (sole) {
    e->mode |= SOLE;
    m->sole[sh].lo = view->lo;
    m->sole[sh].entry = i;
  }
  const uint32_t c = chain_of((int32_t)mode);
  m->look[level] |= look_add[c][span];
  m->levels |= 1u << level;
  uint32_t h = head_of(m, level, view->lo, c);
  e->next = m->buckets[h];
  k->prev = -1 - (int32_t)h;
  if (e->next >= 0) m->links[e->next].prev = i;
  m->buckets[h] = i;
  level_push(m, i, level);
  m->level_used[level]++;
  return PTO_OK;
}

void tmap_conflicts(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t oldest_live,
                    tmap_dep_fn dep, void *arg) {
  region_view rv;
  probe p;
  region_view_init(view, &rv);
  probe_of_view(&rv, &p);
  (void)scan(m, &p, mode, -1, oldest_live, dep, arg, WALK_QUERY);
}
