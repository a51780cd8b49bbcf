/* region.h — overlap and coverage of two tensor views, decided by the bytes
 * of memory they touch (absolute addresses), however the views were built:
 * from a pointer into the middle of another buffer, as another dtype over
 * the same bytes, or over two buffers that overlap. Answers are
 * conservative: when unsure, views overlap and do not cover. Used by the
 * TensorMap (chip and node) and by kernels that check aliasing. */
#ifndef PTO_REGION_H
#define PTO_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/tensor.h"

#define REGION_MAX_LEVELS (PTO_MAX_DIMS + 1)

typedef struct region_level {
  int64_t stride; /* bytes */
  int64_t extent;
} region_level;

/* A view normalised to absolute bytes, computed once (region_view_init) and
 * compared many times: the TensorMap stores it per entry, so no view is
 * normalised again for each entry it is compared with. */
typedef struct region_view {
  uint64_t base;   /* buf */
  uint64_t lo, hi; /* bytes [lo, hi) it touches (bounding box) */
  int32_t n;       /* levels with extent > 1, ascending stride */
  bool known;      /* false: malformed or overflowing view, [0, UINT64_MAX) */
  bool dense;      /* levels tile [lo, hi) exactly: every byte is touched */
  region_level lv[REGION_MAX_LEVELS];
} region_view;

/* Normalises t (NULL or malformed: known = false, claiming all memory). */
void region_view_init(const pto_tensor *t, region_view *v);
/* region_view_init, and true when t is also valid as tensor_problem()
 * judges it (buf set, packed size representable, inside buf_bytes): a
 * caller that checks a view and then normalises it does both at once.
 * False says nothing more: tensor_problem() then names the problem, or
 * finds none (a view whose addresses overflow: v is then unknown). */
bool region_view_checked(const pto_tensor *t, region_view *v);
/* The view of the bytes [lo, hi) (hi > lo), exactly as region_view_init
 * makes it for a 1-D PTO_U8 tensor over them: dense, one level. */
void region_view_bytes(region_view *v, uint64_t lo, uint64_t hi);
/* region_overlap and region_covers on normalised views: the same answers.
 * The overlap's first test, disjoint byte ranges (most pairs a caller
 * compares), is inline: no call for it (redux.c's submit, the TensorMap). */
bool region_view_overlap_full(const region_view *a, const region_view *b);
static inline bool region_view_overlap(const region_view *a, const region_view *b) {
  if (a->known && b->known && (a->hi <= b->lo || b->hi <= a->lo)) return false;
  return region_view_overlap_full(a, b);
}
bool region_view_covers(const region_view *outer, const region_view *inner);

/* Absolute byte addresses [lo, hi) that the view touches (its bounding
 * box). A malformed view, or one whose addresses overflow, claims all of
 * memory: [0, UINT64_MAX). */
void region_span(const pto_tensor *t, uint64_t *lo, uint64_t *hi);
/* False only if the views provably share no byte of memory. */
bool region_overlap(const pto_tensor *a, const pto_tensor *b);
/* True only if every byte of `inner` provably lies in `outer`. */
bool region_covers(const pto_tensor *outer, const pto_tensor *inner);

#endif
