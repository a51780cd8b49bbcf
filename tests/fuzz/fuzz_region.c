/* fuzz_region.c — libFuzzer target for view construction and region math.
 *
 * From the fuzz bytes: two views over one small buffer, each built with
 * pto_tensor_init / init_strided / desc or taken raw, from the buffer's
 * start or an interior pointer, in any dtype, then put through up to four
 * of slice / view / reshape / transpose with small or extreme (64-bit)
 * parameters. Oracles, each checked against brute force (every byte each
 * view touches, enumerated):
 *   - a constructor that succeeds gives a valid view whose every byte lies
 *     inside [buf, buf + buf_bytes); a derived view touches only bytes of
 *     its source (transpose and reshape: exactly the same bytes); a failed
 *     derivation leaves its output untouched, and a failed constructor
 *     (pto_tensor_init, _strided) leaves the view asked for, which
 *     pto_tensor_validate refuses and pto_tensor_problem names;
 *   - region_span is the tight bounding box of the bytes;
 *   - region_overlap is false only for disjoint byte sets, region_covers
 *     true only for subsets, overlap is symmetric, a view covers itself;
 *   - two slices of one view (same base pointer, no other op) are decided
 *     exactly, as region.h promises for row/column blocks and tiles;
 *   - a malformed view never crashes: it overlaps everything, covers
 *     nothing and claims all of memory.
 * Any disagreement is __builtin_trap(). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/region.h"
#include "common/tensor_check.h"
#include "pto/status.h"
#include "pto/tensor.h"

#include "fuzz_input.h"

#define BUF_BYTES 192
#define MAX_ENUM  4096 /* views with more elements are not enumerated */

static _Alignas(16) uint8_t mem[BUF_BYTES];

/* Mostly small values; sometimes a raw 64-bit one (overflow paths). */
static int64_t num(input *in, int64_t small_max) {
  uint8_t sel = u8(in);
  if ((sel & 0xe0) == 0xe0) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
      v = v << 8 | u8(in);
    return (int64_t)v;
  }
  if ((sel & 0xe0) == 0xc0) return -(int64_t)(sel & 0x1f); /* small negatives */
  return (int64_t)(sel % (uint8_t)(small_max + 1));
}

/* A value in [0, n) (n >= 1; large n: [0, 256)). */
static int64_t below(input *in, int64_t n) { return n <= 1 ? 0 : u8(in) % (n < 256 ? n : 256); }

/* A view as built, with what the oracle needs to know about it. */
typedef struct built {
  pto_tensor t;
  bool ok;         /* constructed and valid */
  bool slice_only; /* pto_tensor_init over mem itself, then only slices */
} built;

/* The bytes of a valid view, as offsets into mem; false when the view is
 * too big to enumerate. Traps on a byte outside [buf, buf + buf_bytes). */
static bool byte_set(const pto_tensor *t, bool *set) {
  memset(set, 0, BUF_BYTES);
  int64_t n = pto_tensor_numel(t);
  if (n < 1 || n > MAX_ENUM) return false;
  size_t es = pto_dtype_size((pto_dtype)t->dtype);
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *e = pto_tensor_at_linear(t, i);
    CHECK(e >= (const uint8_t *)t->buf && e + es <= (const uint8_t *)t->buf + t->buf_bytes);
    CHECK(e >= mem && e + es <= mem + BUF_BYTES);
    for (size_t b = 0; b < es; b++)
      set[e - mem + (ptrdiff_t)b] = true;
  }
  return true;
}

static bool subset(const bool *a, const bool *b) { /* a within b */
  for (int i = 0; i < BUF_BYTES; i++)
    if (a[i] && !b[i]) return false;
  return true;
}

static bool same_set(const bool *a, const bool *b) { return subset(a, b) && subset(b, a); }

static void check_failed_call(int rc, const pto_tensor *out, const pto_tensor *before) {
  if (rc != PTO_OK) CHECK(memcmp(out, before, sizeof *out) == 0);
}

/* A derived view of v (slice, view, reshape or transpose), checked. */
static void derive(input *in, built *v) {
  pto_tensor out, before;
  memset(&out, 0x5a, sizeof out);
  before = out;
  int op = u8(in) % 4, rc;
  int64_t a[PTO_MAX_DIMS], b[PTO_MAX_DIMS];
  switch (op) {
  case 0: /* slice */
    for (int d = 0; d < PTO_MAX_DIMS; d++) {
      a[d] = num(in, 8);
      b[d] = num(in, 8);
    }
    rc = pto_tensor_slice(&v->t, a, b, &out);
    break;
  case 1: { /* view */
    int nd = 1 + u8(in) % PTO_MAX_DIMS;
    for (int d = 0; d < nd; d++) {
      a[d] = num(in, 8); /* shape */
      b[d] = num(in, 24);
    }
    rc = pto_tensor_view(&v->t, nd, a, b, num(in, 64), &out);
    break;
  }
  case 2: { /* reshape */
    int nd = 1 + u8(in) % PTO_MAX_DIMS;
    for (int d = 0; d < nd; d++)
      a[d] = num(in, 12);
    rc = pto_tensor_reshape(&v->t, nd, a, &out);
    break;
  }
  default: rc = pto_tensor_transpose(&v->t, (int)num(in, 5), (int)num(in, 5), &out); break;
  }
  check_failed_call(rc, &out, &before);
  if (rc != PTO_OK) return;
  /* derived from a (possibly unbacked) source: the same checks hold */
  CHECK(tensor_check(&out, true) == PTO_OK);
  CHECK(out.buf == v->t.buf && out.buf_bytes == v->t.buf_bytes && out.dtype == v->t.dtype);
  if (v->t.buf) {
    bool s[BUF_BYTES], o[BUF_BYTES];
    if (byte_set(&v->t, s) && byte_set(&out, o)) {
      if (op == 0) CHECK(subset(o, s));
      if (op >= 2) CHECK(same_set(o, s));
    }
  }
  if (op != 0) v->slice_only = false;
  v->t = out;
}

static void build(input *in, built *v) {
  memset(v, 0, sizeof *v);
  int kind = u8(in) % 8;
  size_t shift = (size_t)(u8(in) % 64); /* base = mem + shift: an interior pointer */
  if (u8(in) & 1) shift = 0;
  uint8_t *base = mem + shift;
  size_t room = BUF_BYTES - shift;
  size_t bytes = (size_t)num(in, (int64_t)room);
  if (bytes > room) bytes = room;
  pto_dtype dt = (pto_dtype)(u8(in) % (PTO_DTYPE_COUNT + 1)); /* one past: invalid */
  int nd = (int)(u8(in) % (PTO_MAX_DIMS + 2));                /* 0 and 6: invalid */
  int64_t shape[PTO_MAX_DIMS], stride[PTO_MAX_DIMS];
  for (int d = 0; d < PTO_MAX_DIMS; d++) {
    shape[d] = num(in, 6);
    stride[d] = num(in, 24);
  }
  memset(&v->t, 0x3c, sizeof v->t);
  int rc;
  switch (kind) {
  case 0:
  case 1:
  case 2:
    rc = pto_tensor_init(&v->t, base, bytes, dt, nd, shape);
    v->slice_only = rc == PTO_OK && shift == 0;
    break;
  case 3:
  case 4:
  case 5:
    rc = pto_tensor_init_strided(&v->t, base, bytes, dt, nd, shape, stride, num(in, 64));
    break;
  case 6: /* an unbacked descriptor (buf NULL): derived views only */
    rc = pto_tensor_desc(&v->t, dt, nd, shape);
    if (rc == PTO_OK) {
      CHECK(tensor_check(&v->t, true) == PTO_OK);
      int n = u8(in) % 3;
      v->ok = false;
      for (int i = 0; i < n; i++) {
        built w = {v->t, false, false};
        derive(in, &w);
        v->t = w.t;
      }
      CHECK(tensor_check(&v->t, true) == PTO_OK);
    }
    return;
  default: { /* raw fields: anything at all */
    v->t.buf = base;
    v->t.buf_bytes = bytes;
    v->t.dtype = (int32_t)(u8(in) % 12) - 1;
    v->t.ndims = nd;
    v->t.offset = num(in, 64);
    for (int d = 0; d < PTO_MAX_DIMS; d++) {
      v->t.shape[d] = shape[d];
      v->t.stride[d] = stride[d];
    }
    v->ok = pto_tensor_validate(&v->t) == PTO_OK;
    if (!v->ok) { /* no crash, and conservative answers */
      uint64_t lo, hi;
      int64_t first, end;
      region_span(&v->t, &lo, &hi);
      CHECK(lo < hi);
      CHECK(region_overlap(&v->t, &v->t));
      bool shapeless = v->t.dtype < 0 || v->t.dtype >= PTO_DTYPE_COUNT || v->t.ndims < 1 ||
                       v->t.ndims > PTO_MAX_DIMS || !tensor_span(&v->t, &first, &end);
      if (shapeless) {
        CHECK(lo == 0 && hi == UINT64_MAX);
        CHECK(!region_covers(&v->t, &v->t));
      }
    }
    return;
  }
  }
  if (rc != PTO_OK) { /* the view asked for, refused and named */
    char why[160];
    CHECK(pto_tensor_validate(&v->t) != PTO_OK);
    CHECK(pto_tensor_problem(&v->t, why, sizeof why) == why && why[0]);
    return;
  }
  CHECK(pto_tensor_validate(&v->t) == PTO_OK);
  CHECK(pto_tensor_problem(&v->t, NULL, 0) == NULL);
  v->ok = true;
  int n = u8(in) % 5;
  for (int i = 0; i < n; i++)
    derive(in, v);
  CHECK(pto_tensor_validate(&v->t) == PTO_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  built a, b;
  build(&in, &a);
  /* the second view: mostly a slice of the first one's source */
  build(&in, &b);
  bool one_source = false;
  if (a.ok && (u8(&in) & 1)) { /* a and b: two slices of the view a was */
    pto_tensor whole = a.t, s1, s2;
    int64_t st[PTO_MAX_DIMS], sh[PTO_MAX_DIMS];
    for (int d = 0; d < whole.ndims; d++) {
      st[d] = below(&in, whole.shape[d]);
      sh[d] = 1 + below(&in, whole.shape[d] - st[d]);
    }
    bool ok1 = pto_tensor_slice(&whole, st, sh, &s1) == PTO_OK;
    for (int d = 0; d < whole.ndims; d++) {
      st[d] = below(&in, whole.shape[d]);
      sh[d] = 1 + below(&in, whole.shape[d] - st[d]);
    }
    bool ok2 = pto_tensor_slice(&whole, st, sh, &s2) == PTO_OK;
    CHECK(ok1 && ok2); /* in-range slices of a valid view always succeed */
    a.t = s1;
    b.t = s2;
    b.ok = true;
    b.slice_only = a.slice_only;
    one_source = true;
  }
  if (!a.ok || !b.ok) return 0;
  bool sa[BUF_BYTES], sb[BUF_BYTES];
  if (!byte_set(&a.t, sa) || !byte_set(&b.t, sb)) return 0;
  bool share = false;
  for (int i = 0; i < BUF_BYTES; i++)
    share |= sa[i] && sb[i];
  bool ov = region_overlap(&a.t, &b.t), ab = region_covers(&a.t, &b.t),
       ba = region_covers(&b.t, &a.t);
  CHECK(ov == region_overlap(&b.t, &a.t));
  if (share) CHECK(ov);
  if (ab) CHECK(subset(sb, sa));
  if (ba) CHECK(subset(sa, sb));
  CHECK(region_covers(&a.t, &a.t) && region_overlap(&a.t, &a.t));
  if (ab || ba) CHECK(ov);
  /* tight bounding box */
  const built *vs[2] = {&a, &b};
  const bool *sets[2] = {sa, sb};
  for (int k = 0; k < 2; k++) {
    uint64_t lo, hi, at = (uint64_t)(uintptr_t)mem;
    region_span(&vs[k]->t, &lo, &hi);
    CHECK(lo >= at && hi <= at + BUF_BYTES && lo < hi);
    CHECK(sets[k][lo - at] && sets[k][hi - 1 - at]);
    for (uint64_t i = 0; i < BUF_BYTES; i++)
      if (sets[k][i]) CHECK(i >= lo - at && i < hi - at);
  }
  /* exact for slices of one row-major view over mem itself */
  if (one_source && a.slice_only) {
    CHECK(ov == share);
    CHECK(ab == subset(sb, sa));
    CHECK(ba == subset(sa, sb));
  }
  return 0;
}
