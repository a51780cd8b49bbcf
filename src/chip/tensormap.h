/* tensormap.h — dependency inference from tensor regions.
 *
 * Keyed by the memory a view touches (absolute byte addresses), not by its
 * base pointer: views built from an interior pointer, as another dtype over
 * the same bytes, or over buffers that overlap are compared by their bytes
 * (common/region.h). Each entry records one earlier access (a reader or a
 * writer task and the view it touched). tmap_access() reports, through a
 * callback, every earlier task the new access must wait for:
 *   read  -> earlier overlapping writers           (read-after-write)
 *   write -> earlier overlapping writers + readers (write-after-write,
 *                                                   write-after-read)
 * then records the new access. A write that provably covers an older entry
 * replaces it, and one that covers an end of a dense older entry trims
 * that end off it, but only when the callback says the new task is
 * ordered after that entry's task (later tasks then need only the writer
 * for those bytes); a task that takes no edge (a manual scope) leaves
 * older entries as they are.
 * Entries of tasks older than `oldest_live` (already retired) are dropped
 * lazily: they have completed, so no one needs to wait for them.
 *
 * Single-threaded: owned by one orchestrator. Reused by the node runtime
 * for node-level tasks. */
#ifndef PTO_TENSORMAP_H
#define PTO_TENSORMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/tensor.h"

/* TMAP_COMMUTE marks a commutative read-write (PTO_COMMUTE): it conflicts
 * with every access as a write does, except with another COMMUTE access,
 * which it is not ordered against (commute.h excludes them at run time),
 * and it never drops an older entry it covers (a later COMMUTE access
 * still needs that entry's task). */
typedef enum tmap_mode {
  TMAP_READ = 1,
  TMAP_WRITE = 2,
  TMAP_READ_WRITE = 3,
  TMAP_COMMUTE = 4,
  TMAP_COMMUTE_RW = 7,
} tmap_mode;

/* Called for each earlier task the access conflicts with. Returns true when
 * the new task is now ordered after producer_task (an edge was added, or
 * the producer has already completed); false when it is not (no edge was
 * taken). Only then may a covering write drop the producer's entry. */
typedef bool (*tmap_dep_fn)(void *arg, int64_t producer_task);

/* Level-L chunks are 64 << 2L bytes: 64 B .. 2^62 B (see tensormap.c). */
#define TMAP_LEVELS     29
#define TMAP_SOLE_HINTS 64

typedef struct tmap_entry tmap_entry;
typedef struct tmap_link tmap_link;
typedef struct tmap {
  uint32_t capacity; /* entry pool size */
  uint32_t used;     /* live entries */
  uint32_t nbuckets; /* power of two */
  int32_t *buckets;  /* 3 heads per bucket (writers, readers, COMMUTE), -1 = empty */
  tmap_entry *pool;
  tmap_link *links;          /* chain back links and level lists of pool[i] */
  struct region_view *views; /* the view of pool[i], normalised when recorded */
  int32_t free_head;         /* free list through tmap_entry.next */
  uint32_t fresh;            /* entries [fresh, capacity) were never used */
  /* per level, for each kind of lookup (read, write, COMMUTE): the chains
   * it walks there and how many chunks back (tensormap.c, "look"); 0 once
   * the level holds no entry */
  uint32_t look[TMAP_LEVELS];
  uint32_t levels;                  /* bit l set: level l holds entries */
  uint32_t level_used[TMAP_LEVELS]; /* entries stored at each level */
  int32_t level_head[TMAP_LEVELS];  /* list of them, newest first, -1 = empty */
  int32_t level_tail[TMAP_LEVELS];  /* the oldest of them, -1 = empty */
  /* sole writers by their first byte (tensormap.c, "A sole writer"): a
   * hint, checked before use; lo UINT64_MAX = none (no view starts there) */
  struct {
    uint64_t lo;
    int32_t entry;
  } sole[TMAP_SOLE_HINTS];
} tmap;

/* Entries are indexed by int32 (free_head, level lists, chains: -1 ends
 * them): at most TMAP_ENTRIES_MAX (pto_chip_create refuses more). */
#define TMAP_ENTRIES_MAX INT32_MAX
/* 0, PTO_EINVAL (capacity 0 or above TMAP_ENTRIES_MAX) or PTO_ENOMEM. */
int tmap_init(tmap *m, uint32_t capacity);
void tmap_destroy(tmap *m);
void tmap_clear(tmap *m);

/* Reports dependencies of (task, view, mode) to dep(arg, producer) — the same
 * producer may be reported more than once — and records the access. Returns
 * 0, or PTO_ETENSORMAP_OVERFLOW when no entry is free even after dropping
 * entries older than oldest_live (the caller may retire tasks and retry;
 * nothing is recorded and no dependency is reported in that case). */
int tmap_access(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t task, int64_t oldest_live,
                tmap_dep_fn dep, void *arg);
/* tmap_access for a view already normalised (region_view_init): a submit
 * normalises each argument once, when it checks it. The view is read in
 * place throughout, so it must be the caller's own, not one the map
 * holds. */
struct region_view;
int tmap_access_view(tmap *m, const struct region_view *view, tmap_mode mode, int64_t task,
                     int64_t oldest_live, tmap_dep_fn dep, void *arg);

/* Reports every live task whose recorded access conflicts with an access of
 * `mode` to `view`, without recording anything (for host reads/writes). */
void tmap_conflicts(tmap *m, const pto_tensor *view, tmap_mode mode, int64_t oldest_live,
                    tmap_dep_fn dep, void *arg);

#endif
