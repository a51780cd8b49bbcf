/* region.c — overlap and coverage of two tensor views (see region.h).
 *
 * Everything is computed on absolute byte addresses (the view's buf plus
 * its byte offset), so views of different dtypes, views whose base is an
 * interior pointer of another view's buffer and views of overlapping
 * buffers all compare. A view is normalised to its byte range [lo, hi)
 * and a set of "levels" (byte stride, extent): one per dim of extent > 1,
 * plus the element's own bytes as level (1, elem_size). Tests, cheapest
 * first:
 *   1. bounding byte ranges: disjoint ranges share nothing;
 *   2. dense views: levels that tile their range exactly (a contiguous view
 *      or a transpose of one) touch every byte of it, so a dense view
 *      overlaps any view whose first or last byte lies in its range, and
 *      covers any view inside its range;
 *   3. nested boxes: addresses are taken relative to a common origin (the
 *      lower of the two base pointers, the allocation both views most
 *      likely came from). Over the union of both views' strides, sorted
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
#include "pto/status.h"

/* Every byte of [lo, hi) is touched: ascending levels tile it exactly. */
static bool view_dense(const region_view *v) {
  int64_t expect = 1;
  for (int i = 0; i < v->n; i++) {
    if (v->lv[i].stride != expect || __builtin_mul_overflow(expect, v->lv[i].extent, &expect))
      return false;
  }
  return true;
}

/* view_of for a view whose elements lie one after the other along its
 * last dim, every other extent 1 (a 1-D tensor, a row of a matrix): the
 * same levels without the general walk and sort, about a third of the
 * instructions (a submit normalises every argument). */
static bool view_of_line(const pto_tensor *t, int64_t es, region_view *v, bool *packed_ok) {
  const int64_t n = t->shape[t->ndims - 1];
  int64_t last, lo, hi;
  if (n < 1 || __builtin_add_overflow(t->offset, n - 1, &last) || last == INT64_MAX ||
      __builtin_mul_overflow(t->offset, es, &lo) || __builtin_mul_overflow(last + 1, es, &hi))
    return false;
  int k = 0;
  if (es > 1) v->lv[k++] = (region_level){1, es};
  if (n > 1) v->lv[k++] = (region_level){es, n};
  v->base = (uint64_t)(uintptr_t)t->buf;
  if (__builtin_add_overflow(v->base, (uint64_t)lo, &v->lo) ||
      __builtin_add_overflow(v->base, (uint64_t)hi, &v->hi))
    return false;
  v->n = k;
  v->dense = true;   /* (1, es) then (es, n) tile [lo, hi) */
  *packed_ok = true; /* es * n <= hi, which fits */
  return true;
}

/* Normalises t: its byte range (tensor_dims_reach), and its levels with
 * extent > 1 sorted by stride ascending (the element's own bytes as level
 * (1, elem_size)). False for a malformed view or one whose byte addresses
 * overflow (callers then answer conservatively). *packed_ok: the packed
 * byte size, tensor_check_shape's product, fits int64 as well (set only
 * when true is returned). */
static bool view_of(const pto_tensor *t, region_view *v, bool *packed_ok) {
  if (t->dtype < 0 || t->dtype >= PTO_DTYPE_COUNT || t->ndims < 1 || t->ndims > PTO_MAX_DIMS ||
      t->offset < 0)
    return false;
  const int64_t es = (int64_t)tensor_es(t->dtype);
  const int line = t->ndims - 1;
  if (t->stride[line] == 1) {
    int d = 0;
    while (d < line && t->shape[d] == 1 && t->stride[d] >= 1)
      d++;
    if (d == line) return view_of_line(t, es, v, packed_ok);
  }
  int64_t last, lo, hi;
  if (!tensor_dims_reach(t, es, &last, packed_ok) || __builtin_mul_overflow(t->offset, es, &lo) ||
      __builtin_mul_overflow(last + 1, es, &hi))
    return false;
  region_level *lv = v->lv;
  int n = 0;
  if (es > 1) lv[n++] = (region_level){1, es};
  for (int d = 0; d < t->ndims; d++) {
    int64_t s;
    if (t->shape[d] == 1) continue;
    if (__builtin_mul_overflow(t->stride[d], es, &s)) return false;
    region_level x = {s, t->shape[d]};
    int j = n++;
    for (; j > 0 && lv[j - 1].stride > s; j--) /* insertion sort: n <= 6 */
      lv[j] = lv[j - 1];
    lv[j] = x;
  }
  v->base = (uint64_t)(uintptr_t)t->buf;
  if (__builtin_add_overflow(v->base, (uint64_t)lo, &v->lo) ||
      __builtin_add_overflow(v->base, (uint64_t)hi, &v->hi))
    return false;
  v->n = n;
  v->dense = view_dense(v);
  return true;
}

static void view_unknown(region_view *v) { /* malformed view: claim everything */
  v->known = false;
  v->base = v->lo = 0;
  v->hi = UINT64_MAX;
  v->n = 0;
  v->dense = false;
}

void region_view_init(const pto_tensor *t, region_view *v) {
  bool packed_ok;
  v->known = t && view_of(t, v, &packed_ok);
  if (!v->known) view_unknown(v);
}

bool region_view_checked(const pto_tensor *t, region_view *v) {
  bool packed_ok = false;
  v->known = t && view_of(t, v, &packed_ok);
  if (!v->known) {
    view_unknown(v);
    return false;
  }
  /* valid as tensor_problem judges: buf set, the packed size representable
   * (tensor_check_shape), the extent (hi - base bytes) inside buf_bytes */
  return t->buf && packed_ok && v->hi - v->base <= (uint64_t)t->buf_bytes;
}

void region_view_bytes(region_view *v, uint64_t lo, uint64_t hi) {
  /* what view_of makes of a 1-D PTO_U8 tensor of hi - lo elements at lo:
   * no element level (1 byte), the one dim a level when it spans more than
   * a byte (unit.test_region, test_view_bytes_as_u8) */
  int64_t n = (int64_t)(hi - lo);
  v->base = v->lo = lo;
  v->hi = hi;
  v->known = v->dense = true;
  v->n = n > 1;
  v->lv[0] = (region_level){1, n};
}

void region_span(const pto_tensor *t, uint64_t *lo, uint64_t *hi) {
  region_view v;
  region_view_init(t, &v);
  *lo = v.lo;
  *hi = v.hi;
}

static bool in_range(uint64_t x, const region_view *v) { return x >= v->lo && x < v->hi; }

/* A view as a coordinate box over shared strides (descending). */
typedef struct region_box {
  int64_t lo[2 * REGION_MAX_LEVELS];
  int64_t hi[2 * REGION_MAX_LEVELS]; /* inclusive */
  int64_t resid;                     /* bytes below the smallest stride */
} region_box;

/* Fills box for view v, whose first byte is `rel` bytes above the common
 * origin, over strides s[0..ns) (descending, distinct). False when the view
 * is not nested over s (greedy coordinates not unique). */
static bool view_box(const region_view *v, int64_t rel, const int64_t *s, int ns, region_box *box) {
  int64_t extent[2 * REGION_MAX_LEVELS];
  for (int k = 0; k < ns; k++)
    extent[k] = 1;
  for (int i = 0; i < v->n; i++) {
    int k = 0;
    while (s[k] != v->lv[i].stride)
      k++;                            /* s holds every stride of v */
    if (extent[k] != 1) return false; /* two dims on one stride: aliasing */
    extent[k] = v->lv[i].extent;
  }
  int64_t rem = rel;
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

/* Boxes of a and b over the union of their strides, relative to the lower
 * of their base pointers; false if either view is not nested over it. */
static bool boxes(const region_view *a, const region_view *b, region_box *ba, region_box *bb,
                  int *ns_out) {
  uint64_t origin = a->base < b->base ? a->base : b->base;
  if (a->lo - origin > (uint64_t)INT64_MAX || b->lo - origin > (uint64_t)INT64_MAX) return false;
  int64_t s[2 * REGION_MAX_LEVELS];
  int ns = 0;
  /* merge both ascending lists into s descending, without duplicates */
  int i = a->n - 1, j = b->n - 1;
  while (i >= 0 || j >= 0) {
    int64_t x;
    if (j < 0 || (i >= 0 && a->lv[i].stride >= b->lv[j].stride))
      x = a->lv[i--].stride;
    else
      x = b->lv[j--].stride;
    if (ns == 0 || s[ns - 1] != x) s[ns++] = x;
  }
  if (ns == 0) s[ns++] = 1; /* two single bytes */
  if (!view_box(a, (int64_t)(a->lo - origin), s, ns, ba) ||
      !view_box(b, (int64_t)(b->lo - origin), s, ns, bb))
    return false;
  *ns_out = ns;
  return true;
}

/* The same first byte and the same levels: the same set of bytes. */
static bool same_bytes(const region_view *a, const region_view *b) {
  if (a->lo != b->lo || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->lv[i].stride != b->lv[i].stride || a->lv[i].extent != b->lv[i].extent) return false;
  return true;
}

bool region_view_overlap_full(const region_view *a, const region_view *b) {
  if (!a->known || !b->known) return true;
  if (a->hi <= b->lo || b->hi <= a->lo) return false;
  /* a view touches its first and last byte: views that share either (the
   * same view again, rows of one buffer) overlap with no algebra */
  if (a->lo == b->lo || a->hi == b->hi) return true;
  /* a dense view touches every byte of its range; the other view touches
   * its own first and last byte */
  if (a->dense && (in_range(b->lo, a) || in_range(b->hi - 1, a))) return true;
  if (b->dense && (in_range(a->lo, b) || in_range(a->hi - 1, b))) return true;
  region_box ba, bb;
  int ns;
  if (!boxes(a, b, &ba, &bb, &ns)) return true;
  if (ba.resid != bb.resid) return false;
  for (int k = 0; k < ns; k++)
    if (ba.hi[k] < bb.lo[k] || bb.hi[k] < ba.lo[k]) return false;
  return true;
}

bool region_view_covers(const region_view *vo, const region_view *vi) {
  if (!vo->known || !vi->known) return false;
  if (vi->lo < vo->lo || vi->hi > vo->hi) return false;
  if (vo->dense || same_bytes(vo, vi)) return true;
  region_box bo, bi;
  int ns;
  if (!boxes(vo, vi, &bo, &bi, &ns) || bo.resid != bi.resid) return false;
  for (int k = 0; k < ns; k++)
    if (bi.lo[k] < bo.lo[k] || bi.hi[k] > bo.hi[k]) return false;
  return true;
}

bool region_overlap(const pto_tensor *a, const pto_tensor *b) {
  region_view va, vb;
  region_view_init(a, &va);
  region_view_init(b, &vb);
  return region_view_overlap(&va, &vb);
}

bool region_covers(const pto_tensor *outer, const pto_tensor *inner) {
  region_view vo, vi;
  region_view_init(outer, &vo);
  region_view_init(inner, &vi);
  return region_view_covers(&vo, &vi);
}
