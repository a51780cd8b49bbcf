/* region.h — overlap and coverage of two views of one base buffer.
 * Used by the TensorMap; answers are conservative: when unsure, views
 * overlap and do not cover. Views may differ in dtype (compared in bytes). */
#ifndef PTO_REGION_H
#define PTO_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "pto/tensor.h"

/* Byte range [lo, hi) of buf that the view touches (its bounding box). */
void region_bytes(const pto_tensor *t, int64_t *lo, int64_t *hi);
/* False only if the views provably share no byte. Both must view the same buf. */
bool region_overlap(const pto_tensor *a, const pto_tensor *b);
/* True only if every byte of `inner` provably lies in `outer`. */
bool region_covers(const pto_tensor *outer, const pto_tensor *inner);

#endif
