/* region.c — overlap and coverage of two tensor views (see region.h).
 *
 * Everything is computed in bytes, so views of different dtypes compare.
 * A view is a set of "levels" (byte stride, extent): one per dim of extent
 * > 1, plus the element's own bytes as level (1, elem_size). Three tests,
 * cheapest first:
 *   1. bounding byte ranges: disjoint ranges share nothing;
 *   2. dense views: levels that tile their range exactly (a contiguous view
 *      or a transpose of one) touch every byte of it;
 *   3. nested boxes: over the union of both views' strides, sorted
 *      descending, greedy division of an address gives unique coordinates
 *      when every level's reach stays below the next-outer stride. Then each
 *      view is exactly a box of coordinates plus a residue below the
 *      smallest stride, and overlap/containment is per-level interval logic.
 *      This is what decides row blocks, column blocks and tiles of a matrix.
 * Anything else gets the conservative answer (overlap, no cover). */
#include "common/region.h"

#include <stddef.h>
#include <string.h>

#include "common/tensor_check.h"

#define REGION_MAX_LEVELS (PTO_MAX_DIMS + 1)

typedef struct region_level {
  int64_t stride; /* bytes */
  int64_t extent;
} region_level;

/* Bytes [lo, hi) in element units of the view's own buffer. */
static bool view_range(const pto_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t first, end, es;
  if (t->dtype < 0 || t->dtype >= PTO_DTYPE_COUNT) return false;
  es = (int64_t)pto_dtype_size((pto_dtype)t->dtype);
  if (!tensor_span(t, &first, &end)) return false;
  if (__builtin_mul_overflow(first, es, lo) || __builtin_mul_overflow(end, es, hi)) return false;
  return true;
}

void region_bytes(const pto_tensor *t, int64_t *lo, int64_t *hi) {
  if (!view_range(t, lo, hi)) { /* malformed view: claim everything */
    *lo = 0;
    *hi = INT64_MAX;
  }
}

/* The view's levels with extent > 1, sorted by stride ascending. Returns the
 * count, or -1 on overflow. */
static int view_levels(const pto_tensor *t, region_level *lv) {
  const int64_t es = (int64_t)pto_dtype_size((pto_dtype)t->dtype);
  int n = 0;
  if (es > 1) lv[n++] = (region_level){1, es};
  for (int d = 0; d < t->ndims; d++) {
    if (t->shape[d] == 1) continue;
    int64_t s;
    if (__builtin_mul_overflow(t->stride[d], es, &s)) return -1;
    lv[n++] = (region_level){s, t->shape[d]};
  }
  for (int i = 1; i < n; i++) { /* insertion sort: n <= 6 */
    region_level x = lv[i];
    int j = i;
    for (; j > 0 && lv[j - 1].stride > x.stride; j--)
      lv[j] = lv[j - 1];
    lv[j] = x;
  }
  return n;
}

/* Every byte of [lo, hi) is touched: ascending levels tile it exactly. */
static bool view_dense(const pto_tensor *t) {
  region_level lv[REGION_MAX_LEVELS];
  int n = view_levels(t, lv);
  if (n < 0) return false;
  int64_t expect = 1;
  for (int i = 0; i < n; i++) {
    if (lv[i].stride != expect || __builtin_mul_overflow(expect, lv[i].extent, &expect))
      return false;
  }
  return true;
}

/* A view as a coordinate box over shared strides (descending). */
typedef struct region_box {
  int64_t lo[2 * REGION_MAX_LEVELS];
  int64_t hi[2 * REGION_MAX_LEVELS]; /* inclusive */
  int64_t resid;                     /* bytes below the smallest stride */
} region_box;

/* Fills box for view t over strides s[0..ns) (descending, distinct). False
 * when the view is not nested over s (greedy coordinates not unique). */
static bool view_box(const pto_tensor *t, const region_level *lv, int nlv, const int64_t *s, int ns,
                     region_box *box) {
  int64_t extent[2 * REGION_MAX_LEVELS];
  for (int k = 0; k < ns; k++)
    extent[k] = 1;
  for (int i = 0; i < nlv; i++) {
    int k = 0;
    while (s[k] != lv[i].stride)
      k++;                            /* s holds every stride of lv */
    if (extent[k] != 1) return false; /* two dims on one stride: aliasing */
    extent[k] = lv[i].extent;
  }
  int64_t rem, lo, hi;
  if (!view_range(t, &lo, &hi)) return false;
  rem = lo;
  for (int k = 0; k < ns; k++) {
    box->lo[k] = rem / s[k];
    rem %= s[k];
    box->hi[k] = box->lo[k] + extent[k] - 1;
  }
  box->resid = rem;
  /* Nested: the reach of levels k.. stays below the stride of level k-1. */
  int64_t reach = rem;
  for (int k = ns - 1; k >= 1; k--) {
    int64_t step;
    if (__builtin_mul_overflow(box->hi[k], s[k], &step) ||
        __builtin_add_overflow(reach, step, &reach) || reach >= s[k - 1])
      return false;
  }
  return true;
}

/* Boxes of a and b over the union of their strides; false if either view
 * is not nested over it. */
static bool boxes(const pto_tensor *a, const pto_tensor *b, region_box *ba, region_box *bb,
                  int *ns_out) {
  region_level la[REGION_MAX_LEVELS], lb[REGION_MAX_LEVELS];
  int na = view_levels(a, la), nb = view_levels(b, lb);
  if (na < 0 || nb < 0) return false;
  int64_t s[2 * REGION_MAX_LEVELS];
  int ns = 0;
  /* merge both ascending lists into s descending, without duplicates */
  int i = na - 1, j = nb - 1;
  while (i >= 0 || j >= 0) {
    int64_t x;
    if (j < 0 || (i >= 0 && la[i].stride >= lb[j].stride))
      x = la[i--].stride;
    else
      x = lb[j--].stride;
    if (ns == 0 || s[ns - 1] != x) s[ns++] = x;
  }
  if (!view_box(a, la, na, s, ns, ba) || !view_box(b, lb, nb, s, ns, bb)) return false;
  *ns_out = ns;
  return true;
}

static bool dtype_valid(const pto_tensor *t) {
  return t->dtype >= 0 && t->dtype < PTO_DTYPE_COUNT && t->ndims >= 1 && t->ndims <= PTO_MAX_DIMS;
}

bool region_overlap(const pto_tensor *a, const pto_tensor *b) {
  if (!dtype_valid(a) || !dtype_valid(b)) return true;
  int64_t alo, ahi, blo, bhi;
  if (!view_range(a, &alo, &ahi) || !view_range(b, &blo, &bhi)) return true;
  if (a->buf != b->buf) {
    /* Not the contract, but stay safe if one buffer lies inside another:
     * compare absolute addresses. */
    uintptr_t pa = (uintptr_t)a->buf, pb = (uintptr_t)b->buf;
    return pa + (uintptr_t)alo < pb + (uintptr_t)bhi && pb + (uintptr_t)blo < pa + (uintptr_t)ahi;
  }
  if (ahi <= blo || bhi <= alo) return false;
  region_box ba, bb;
  int ns;
  if (!boxes(a, b, &ba, &bb, &ns)) return true;
  if (ba.resid != bb.resid) return false;
  for (int k = 0; k < ns; k++)
    if (ba.hi[k] < bb.lo[k] || bb.hi[k] < ba.lo[k]) return false;
  return true;
}

static bool same_view(const pto_tensor *a, const pto_tensor *b) {
  if (a->buf != b->buf || a->offset != b->offset || a->ndims != b->ndims ||
      pto_dtype_size((pto_dtype)a->dtype) != pto_dtype_size((pto_dtype)b->dtype))
    return false;
  for (int d = 0; d < a->ndims; d++)
    if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d]) return false;
  return true;
}

bool region_covers(const pto_tensor *outer, const pto_tensor *inner) {
  if (!dtype_valid(outer) || !dtype_valid(inner) || outer->buf != inner->buf) return false;
  int64_t olo, ohi, ilo, ihi;
  if (!view_range(outer, &olo, &ohi) || !view_range(inner, &ilo, &ihi)) return false;
  if (ilo < olo || ihi > ohi) return false;
  if (same_view(outer, inner) || view_dense(outer)) return true;
  region_box bo, bi;
  int ns;
  if (!boxes(outer, inner, &bo, &bi, &ns) || bo.resid != bi.resid) return false;
  for (int k = 0; k < ns; k++)
    if (bi.lo[k] < bo.lo[k] || bi.hi[k] > bo.hi[k]) return false;
  return true;
}
