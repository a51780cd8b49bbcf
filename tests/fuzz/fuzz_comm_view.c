/* fuzz_comm_view.c — the view checks and walks of the in-kernel comm ops
 * against brute force.
 *
 * The input builds a domain layout (1-3 ranks, 1-4 buffers), a view (dtype,
 * 1-5 dims, shapes including 0 and negative ones, strides and offset up to
 * 2^64, buf anywhere around the windows, buf_bytes) and chunk sizes. The
 * oracle enumerates the view's elements with 128-bit arithmetic and
 * decides by itself whether the view is valid, empty, and inside one window
 * buffer; then compares:
 *   - tensor_problem_or_empty() and comm_view_locate() (what ops.c uses to
 *     accept a view) with that verdict, and the window offset and buffer
 *     they report;
 *   - tensor_lockstep() over the view and a packed view of the same shape
 *     (what every transfer walks) with the enumerated (element, packed
 *     index) pairs;
 *   - the tiles of tensor_tiles_*() (what chunked put/get cuts), each
 *     walked the same way, with the same pairs: every element exactly once.
 * Any disagreement traps. Shapes are kept small enough to enumerate (at
 * most 4096 elements); strides and offsets are not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/tensor_check.h"
#include "common/tensor_walk.h"

#include "fuzz_input.h"

#define MAX_ELEMS 4096

typedef __int128 i128;

/* A stride, offset or shift: mostly small, sometimes near a power of two,
 * sometimes anything. */
static int64_t pick(input *in, int64_t small) {
  uint8_t k = (uint8_t)take(in, 1);
  switch (k & 3) {
  case 0: return (int64_t)(take(in, 1) % (uint64_t)small);
  case 1: return (int64_t)take(in, 2) - 8;
  case 2: { /* 2^e + d, e in 0..63 (2^63 wraps negative) */
    int e = (int)(take(in, 1) % 64);
    return (int64_t)((UINT64_C(1) << e) + (uint64_t)(int8_t)take(in, 1));
  }
  default: return (int64_t)take(in, 8);
  }
}

typedef struct pair {
  int64_t elem, packed; /* element offset in the view, index in packed order */
} pair;

static int cmp_pair(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->packed != y->packed) return x->packed < y->packed ? -1 : 1;
  return (x->elem > y->elem) - (x->elem < y->elem);
}

typedef struct collect {
  pair *v;
  int64_t n, cap;
  int64_t packed_base; /* added to the packed side's offsets */
} collect;

static int on_run(void *arg, int64_t a, int64_t b, int64_t n) {
  collect *c = arg;
  CHECK(n >= 1 && c->n + n <= c->cap);
  for (int64_t i = 0; i < n; i++)
    c->v[c->n++] = (pair){a + i, c->packed_base + b + i};
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  /* ---- domain layout ---- */
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  pto_window_buffer bufs[4];
  char names[4][2] = {"a", "b", "c", "d"};
  int nb = 1 + (int)(take(&in, 1) % 4);
  for (int i = 0; i < nb; i++) {
    bufs[i].name = names[i];
    bufs[i].bytes = 1 + take(&in, 2) % 20000;
  }
  if (comm_desc_layout(&d, bufs, nb)) return 0;
  d.nranks = 1 + (int)(take(&in, 1) % 3);
  d.base = UINT64_C(1) << 40; /* never dereferenced */

  /* ---- the view ---- */
  pto_tensor t;
  memset(&t, 0, sizeof t);
  uint8_t kind = (uint8_t)take(&in, 1);
  t.dtype = (int32_t)(kind % 11) - 1;    /* -1 and PTO_DTYPE_COUNT are invalid */
  t.ndims = (int32_t)(take(&in, 1) % 7); /* 0 and 6 are invalid */
  int64_t numel = 1;
  bool negative = false, zero = false;
  for (int i = 0; i < PTO_MAX_DIMS; i++) {
    uint8_t s = (uint8_t)take(&in, 1);
    t.shape[i] = s >= 250 ? (int64_t)s - 252 : 1 + s % 16; /* -2..3 sometimes */
    t.stride[i] = pick(&in, 64);
    if (i < t.ndims) {
      negative |= t.shape[i] < 0;
      zero |= t.shape[i] == 0;
      if (t.shape[i] > 0) numel *= t.shape[i];
    }
  }
  if (numel > MAX_ELEMS) return 0; /* too many to enumerate */
  t.offset = pick(&in, 256);
  int rank = (int)(take(&in, 1) % 4); /* 3 can be past the last window */
  int bi = (int)(take(&in, 1) % (uint64_t)nb);
  uint64_t delta = (uint64_t)pick(&in, 64) - 32; /* wraps: anywhere in the address space */
  uint64_t bufaddr = d.base + (uint64_t)rank * d.win_bytes + d.buffers[bi].offset + delta;
  t.buf = (take(&in, 1) % 16) ? (void *)(uintptr_t)bufaddr : NULL;
  uint8_t bb = (uint8_t)take(&in, 1);
  t.buf_bytes = bb < 64    ? (size_t)d.buffers[bi].bytes
                : bb < 128 ? (size_t)take(&in, 3)
                           : (size_t)pick(&in, 4096);
  int64_t chunk_rows = pick(&in, 8) % 8, chunk_cols = pick(&in, 8) % 8;

  /* ---- the oracle: enumerate in 128 bits ---- */
  bool fields_ok = t.buf && t.dtype >= 0 && t.dtype < PTO_DTYPE_COUNT && t.ndims >= 1 &&
                   t.ndims <= PTO_MAX_DIMS && t.offset >= 0;
  for (int i = 0; fields_ok && i < t.ndims; i++)
    fields_ok = t.stride[i] >= 1;
  int64_t es = fields_ok ? (int64_t)pto_dtype_size((pto_dtype)t.dtype) : 1;
  bool empty = fields_ok && zero && !negative;
  bool valid = fields_ok && !zero && !negative;
  static i128 elems[MAX_ELEMS];
  int64_t n = 0;
  i128 lo = 0, hi = 0; /* bytes from buf: [first element, last element + es) */
  if (valid) {
    int64_t idx[PTO_MAX_DIMS] = {0};
    for (;;) {
      i128 e = t.offset;
      for (int i = 0; i < t.ndims; i++)
        e += (i128)idx[i] * t.stride[i];
      elems[n++] = e;
      if (n == 1 || e * es < lo) lo = e * es;
      if (n == 1 || (e + 1) * es > hi) hi = (e + 1) * es;
      int i = t.ndims - 1;
      while (i >= 0 && ++idx[i] == t.shape[i])
        idx[i--] = 0;
      if (i < 0) break;
    }
    /* the extent must fit int64 and lie inside buf_bytes */
    valid = hi <= INT64_MAX && hi <= (i128)t.buf_bytes;
  }

  /* ---- the checks ops.c uses ---- */
  bool got_empty;
  char why[200];
  const char *bad = tensor_problem_or_empty(&t, &got_empty, why, sizeof why);
#ifdef FUZZ_TRACE /* -DFUZZ_TRACE: print what a crashing input built */
  fprintf(stderr, "dtype %d ndims %d offset %lld buf %p buf_bytes %zu\n", t.dtype, t.ndims,
          (long long)t.offset, t.buf, t.buf_bytes);
  for (int i = 0; i < t.ndims && i < PTO_MAX_DIMS; i++)
    fprintf(stderr, "  dim %d: shape %lld stride %lld\n", i, (long long)t.shape[i],
            (long long)t.stride[i]);
  fprintf(stderr, "oracle: valid %d empty %d; got: %s, empty %d\n", valid, empty,
          bad ? bad : "valid", got_empty);
#endif
  CHECK(got_empty == empty);
  CHECK(!bad == (valid || empty));
  if (empty) { /* no tiles, no runs */
    tensor_tiles g;
    tensor_tiles_init(&g, &t, chunk_rows, chunk_cols);
    int64_t r0, nr, c0, nc;
    CHECK(!tensor_tiles_next(&g, &r0, &nr, &c0, &nc));
    return 0;
  }
  uint64_t woff;
  int buf;
  int rc = comm_view_locate(&d, &t, &woff, &buf, why, sizeof why);
  if (!valid) {
    CHECK(rc == PTO_EINVAL);
    return 0;
  }
  /* inside one buffer of one rank's window: first and last byte decide */
  i128 a = (i128)(uint64_t)(uintptr_t)t.buf - d.base;
  bool inside = a >= 0 && a < (i128)d.nranks * d.win_bytes;
  int want_buf = -1;
  if (inside) {
    i128 w = a % d.win_bytes, first = w + lo, end = w + hi;
    for (int i = 0; i < d.nbuffers; i++)
      if (first >= d.buffers[i].offset && end <= d.buffers[i].offset + d.buffers[i].bytes)
        want_buf = i;
    CHECK(rc != PTO_OK || woff == (uint64_t)w);
  }
  CHECK((rc == PTO_OK) == (want_buf >= 0));
  CHECK(rc == PTO_OK ? buf == want_buf : rc == PTO_EBOUNDS);

  /* ---- the walks: lockstep against a packed view of the same shape ---- */
  pto_tensor packed = t;
  int64_t s = 1;
  for (int i = t.ndims - 1; i >= 0; i--) {
    packed.stride[i] = s;
    s *= t.shape[i];
  }
  packed.offset = 0;
  static pair want[MAX_ELEMS], got[MAX_ELEMS];
  for (int64_t k = 0; k < n; k++)
    want[k] = (pair){(int64_t)elems[k], k};
  collect c = {got, 0, MAX_ELEMS, 0};
  CHECK(tensor_lockstep(&t, &packed, on_run, &c) == 0);
  CHECK(c.n == n);
  for (int64_t k = 0; k < n; k++) /* in row-major order, pair by pair */
    CHECK(got[k].elem == want[k].elem && got[k].packed == want[k].packed);
  /* the tiles: each element once, paired with its own packed index */
  tensor_tiles g;
  tensor_tiles_init(&g, &t, chunk_rows, chunk_cols);
  int64_t max_tile = tensor_tiles_max_elems(&g), r0, nr, c0, nc;
  c.n = 0;
  while (tensor_tiles_next(&g, &r0, &nr, &c0, &nc)) {
    CHECK(nr >= 1 && nc >= 1);
    pto_tensor tv = tensor_tile_of(&t, r0, nr, c0, nc),
               pv = tensor_tile_of(&packed, r0, nr, c0, nc);
    CHECK(!tensor_problem(&tv, false, NULL, 0)); /* a tile of a valid view is valid */
    CHECK(tensor_walk_numel(&tv) <= max_tile);
    int64_t before = c.n;
    CHECK(tensor_lockstep(&tv, &pv, on_run, &c) == 0);
    CHECK(c.n - before == tensor_walk_numel(&tv));
  }
  CHECK(c.n == n);
  qsort(got, (size_t)n, sizeof got[0], cmp_pair);
  for (int64_t k = 0; k < n; k++)
    CHECK(got[k].elem == want[k].elem && got[k].packed == want[k].packed);
  return 0;
}
