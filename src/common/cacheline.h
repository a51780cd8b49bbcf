/* cacheline.h — keeping data that different threads write on separate
 * cache lines. A field or struct marked PTO_LINE_ALIGNED starts a line;
 * an array of such structs must come from cacheline_calloc, since malloc
 * only aligns to 16 bytes. Two threads writing one line (false sharing)
 * turn every write into a cache miss for the other: a task slot the
 * orchestrator fills next to one a core completes, or the orchestrator's
 * own fields next to the completion counter, cost 10-40% of a submit. */
#ifndef PTO_COMMON_CACHELINE_H
#define PTO_COMMON_CACHELINE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PTO_CACHELINE    64
#define PTO_LINE_ALIGNED _Alignas(PTO_CACHELINE)

/* calloc for n elements of `size` bytes (a multiple of the line), starting
 * on a line; free() releases it. NULL on overflow or no memory. */
static inline void *cacheline_calloc(size_t n, size_t size) {
  if (n == 0) n = 1;
  if (size && n > SIZE_MAX / size) return NULL;
  size_t bytes = (n * size + PTO_CACHELINE - 1) / PTO_CACHELINE * PTO_CACHELINE;
  void *p = aligned_alloc(PTO_CACHELINE, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

#endif
