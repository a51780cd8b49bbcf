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

/* Absolute byte addresses [lo, hi) that the view touches (its bounding
 * box). A malformed view, or one whose addresses overflow, claims all of
 * memory: [0, UINT64_MAX). */
void region_span(const pto_tensor *t, uint64_t *lo, uint64_t *hi);
/* False only if the views provably share no byte of memory. */
bool region_overlap(const pto_tensor *a, const pto_tensor *b);
/* True only if every byte of `inner` provably lies in `outer`. */
bool region_covers(const pto_tensor *outer, const pto_tensor *inner);

#endif
