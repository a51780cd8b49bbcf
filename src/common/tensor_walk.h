/* tensor_walk.h — private iteration over views, shared by the comm ops
 * (transfers between two views, chunked put/get) and the fuzz target that
 * checks them against brute force. Views must have passed the checks of
 * tensor_check.h first: then no offset computed here can overflow, since
 * every element offset lies inside the view's checked extent. */
#ifndef PTO_TENSOR_WALK_H
#define PTO_TENSOR_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/tensor.h"

/* Element count of a valid (or empty: 0) view. */
int64_t tensor_walk_numel(const pto_tensor *t);

/* Calls fn(arg, a_off, b_off, n) for the runs of two views with the same
 * number of elements, in row-major order: element offsets (from buf) of n
 * elements that are contiguous in both views. Stops at and returns the
 * first nonzero result of fn; 0 when all ran (nothing for empty views). */
typedef int (*tensor_run_fn)(void *arg, int64_t a_off, int64_t b_off, int64_t n);
int tensor_lockstep(const pto_tensor *a, const pto_tensor *b, tensor_run_fn fn, void *arg);

/* A view cut into tiles of (at most) rows x cols of its last two dims, all
 * leading dims whole (a 1-D view has one row). Chunk sizes <= 0 mean the
 * whole dim. Tiles go row-major over the tile grid; an empty view has none. */
typedef struct tensor_tiles {
  int64_t rows, cols; /* of the view's last two dims */
  int64_t cr, cc;     /* tile size */
  int64_t r0, c0;     /* next tile's corner */
  int64_t lead;       /* product of the leading dims */
} tensor_tiles;

void tensor_tiles_init(tensor_tiles *g, const pto_tensor *t, int64_t chunk_rows,
                       int64_t chunk_cols);
/* Elements of the largest tile. */
int64_t tensor_tiles_max_elems(const tensor_tiles *g);
/* The next tile's corner and size; false when all were given. */
bool tensor_tiles_next(tensor_tiles *g, int64_t *r0, int64_t *nr, int64_t *c0, int64_t *nc);
/* The sub-view [r0, r0+nr) x [c0, c0+nc) of t's last two dims. */
pto_tensor tensor_tile_of(const pto_tensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc);

#endif
