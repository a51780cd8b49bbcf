/* fuzz_tensormap.c — libFuzzer target for the TensorMap's dependency answers.
 *
 * From the fuzz bytes: a pool size (1 .. 64 entries), then up to 64
 * accesses, each a view of 1-3 dims (any dtype, strides and offset) over
 * one of two overlapping buffers of 3 KiB (so views meet across base
 * pointers and across the index's 64 B .. 4 KiB chunk levels), sometimes a
 * malformed view (it claims all memory), a mode READ / WRITE / READ_WRITE
 * / COMMUTE_RW, a task (the next one, or the same task again: a second
 * argument), the oldest live task advancing, per producer whether the
 * dependency callback says "ordered", and sometimes a query
 * (tmap_conflicts) instead of an access; often the view of an earlier
 * access again (a chain's, an accumulator's: the sole writer's path).
 * Oracle: every recorded access in a list, brute force: an access must
 * report exactly the live (task >= oldest_live), conflicting (one of the
 * two writes, not both COMMUTE), other-task records whose views
 * region_overlap; a plain write (not COMMUTE) drops a record it
 * region_covers when its callback said ordered for it, and trims off a
 * dense record the end that a dense such write covers (the record becomes
 * a PTO_U8 view of the rest: trim_record, the rule of tensormap.c's trim
 * written again over tensors); the pool overflows exactly when every
 * entry is live. Any difference prints the access sequence and aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/tensormap.h"
#include "common/region.h"
#include "pto/status.h"
#include "pto/tensor.h"

#include "fuzz_input.h"

#define MEM_BYTES  4096
#define BUF_BYTES  3072 /* buffer 0: mem[0, 3072), buffer 1: mem[1024, 4096) */
#define MAX_ACCESS 64

static _Alignas(4096) uint8_t mem[MEM_BYTES];

typedef struct access {
  pto_tensor t;
  int mode;
  int64_t task, oldest;
  uint8_t ordered_bits; /* producer p is "ordered" when bit p % 8 is set */
  bool query;           /* tmap_conflicts: nothing recorded or dropped */
  bool live;            /* recorded and not dropped (the oracle's list) */
} access;

static access acc[MAX_ACCESS];
static int nacc;

/* The producers one call reported. */
typedef struct got {
  bool has[MAX_ACCESS + 1];
  uint8_t ordered_bits;
  bool bad; /* a producer that is no task of this input */
} got;

static bool on_dep(void *arg, int64_t producer) {
  got *g = arg;
  if (producer < 0 || producer > MAX_ACCESS)
    g->bad = true;
  else
    g->has[producer] = true;
  return (g->ordered_bits >> (producer & 7)) & 1;
}

static void print_view(const pto_tensor *t) {
  fprintf(stderr, "buf +%td %s offset %lld shape [", (uint8_t *)t->buf - mem,
          pto_dtype_name((pto_dtype)t->dtype), (long long)t->offset);
  for (int d = 0; d < t->ndims && d < PTO_MAX_DIMS; d++)
    fprintf(stderr, "%s%lld", d ? " " : "", (long long)t->shape[d]);
  fprintf(stderr, "] stride [");
  for (int d = 0; d < t->ndims && d < PTO_MAX_DIMS; d++)
    fprintf(stderr, "%s%lld", d ? " " : "", (long long)t->stride[d]);
  fprintf(stderr, "]");
}

static void fail(uint32_t capacity, const char *what, int64_t producer) {
  fprintf(stderr, "fuzz_tensormap: pool of %u entries; access %d: %s (producer %lld)\n", capacity,
          nacc, what, (long long)producer);
  for (int i = 0; i <= nacc && i < MAX_ACCESS; i++) {
    const access *a = &acc[i];
    fprintf(stderr, "  %2d task %lld oldest %lld %s%s ordered 0x%02x ", i, (long long)a->task,
            (long long)a->oldest, a->query ? "query " : "",
            a->mode == TMAP_READ         ? "R "
            : a->mode == TMAP_WRITE      ? "W "
            : a->mode == TMAP_READ_WRITE ? "RW"
                                         : "CM",
            a->ordered_bits);
    print_view(&a->t);
    fprintf(stderr, "\n");
  }
  abort();
}

/* A view over buffer 0 or 1, or a malformed one; false: skip this access. */
static bool make_view(input *in, pto_tensor *t) {
  static const pto_dtype dts[4] = {PTO_U8, PTO_I16, PTO_F32, PTO_I64};
  uint8_t sel = u8(in);
  uint8_t *buf = mem + (sel & 1) * (MEM_BYTES - BUF_BYTES);
  pto_dtype dt = dts[(sel >> 1) & 3];
  int ndims = 1 + (sel >> 3) % 3;
  int64_t shape[3], stride[3];
  for (int d = 0; d < ndims; d++) {
    uint8_t b = u8(in);
    shape[d] = 1 + (b & 15);
    /* strides: small, or a chunk-sized step (64 B .. 1 KiB in bytes) */
    stride[d] =
        (b & 0x80) ? (int64_t)(64u << (b >> 4 & 3)) / (int64_t)pto_dtype_size(dt) : 1 + (b >> 4);
    if (stride[d] < 1) stride[d] = 1;
  }
  int64_t offset = (int64_t)(u8(in) | (u8(in) & 7) << 8);
  if (pto_tensor_init_strided(t, buf, BUF_BYTES, dt, ndims, shape, stride, offset) != PTO_OK)
    return false;
  if ((sel & 0xe0) == 0xe0) t->stride[0] = 0; /* malformed: claims all memory */
  return true;
}

/* The oracle's trim (tensormap.c): a dense record whose first or last
 * bytes a dense ordered write covers keeps the rest, as a PTO_U8 view. */
static void trim_record(access *r, const pto_tensor *w) {
  region_view v, x;
  region_view_init(&r->t, &v);
  region_view_init(w, &x);
  if (!v.known || !v.dense || !x.known || !x.dense) return;
  uint64_t lo = v.lo, hi = v.hi;
  if (x.lo <= lo && x.hi > lo && x.hi < hi)
    lo = x.hi;
  else if (x.hi >= hi && x.lo > lo && x.lo < hi)
    hi = x.lo;
  else
    return;
  int64_t n = (int64_t)(hi - lo);
  pto_tensor_init(&r->t, (void *)(uintptr_t)lo, (size_t)n, PTO_U8, 1, &n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  uint32_t capacity = 1 + u8(&in) % 64;
  tmap m;
  if (tmap_init(&m, capacity) != PTO_OK) abort();
  nacc = 0;
  int64_t task = 0, oldest = 0;
  while (in.n && nacc < MAX_ACCESS) {
    access *a = &acc[nacc];
    memset(a, 0, sizeof *a);
    uint8_t ctl = u8(&in);
    /* below 96, with an earlier access: that access's view again (exact
     * repeats take the sole writer's path, tensormap.c) */
    uint8_t again = u8(&in);
    if (again < 96 && nacc > 0)
      a->t = acc[again % nacc].t;
    else if (!make_view(&in, &a->t))
      continue;
    static const int modes[4] = {TMAP_READ, TMAP_WRITE, TMAP_READ_WRITE, TMAP_COMMUTE_RW};
    a->mode = modes[ctl & 3];
    if (!(ctl & 0x08) || nacc == 0) task++; /* else: the same task's next argument */
    oldest += (ctl >> 4) & 3;
    if (oldest > task) oldest = task;
    a->task = task;
    a->oldest = oldest;
    a->ordered_bits = u8(&in);
    a->query = (ctl & 0xc0) == 0xc0;
    /* the oracle: who must be reported, and whether the pool is full */
    bool want[MAX_ACCESS + 1] = {false};
    uint32_t live = 0;
    for (int i = 0; i < nacc; i++) {
      const access *r = &acc[i];
      if (!r->live || r->task < oldest) continue;
      live++;
      if ((a->query || r->task != task) && ((r->mode | a->mode) & TMAP_WRITE) &&
          !(r->mode & a->mode & TMAP_COMMUTE) && region_overlap(&r->t, &a->t))
        want[r->task] = true;
    }
    got g = {.ordered_bits = a->ordered_bits};
    if (a->query) {
      tmap_conflicts(&m, &a->t, (tmap_mode)a->mode, oldest, on_dep, &g);
    } else {
      int rc = tmap_access(&m, &a->t, (tmap_mode)a->mode, task, oldest, on_dep, &g);
      if ((rc == PTO_ETENSORMAP_OVERFLOW) != (live == capacity))
        fail(capacity, rc == PTO_OK ? "recorded into a full pool" : "overflow with free entries",
             -1);
      if (rc != PTO_OK) {
        for (int i = 0; i <= MAX_ACCESS; i++)
          if (g.has[i]) fail(capacity, "a producer reported on overflow", i);
        a->query = true; /* not recorded */
        nacc++;
        continue;
      }
    }
    if (g.bad) fail(capacity, "a producer that is no task", -1);
    for (int i = 0; i <= MAX_ACCESS; i++)
      if (g.has[i] != want[i])
        fail(capacity, want[i] ? "missed a producer" : "reported a producer that does not conflict",
             i);
    if (!a->query) {
      /* covered by an ordered plain write: dropped (a COMMUTE write keeps
       * what it covers, for the next COMMUTE access) */
      bool plain_write = (a->mode & (TMAP_WRITE | TMAP_COMMUTE)) == TMAP_WRITE;
      for (int i = 0; i < nacc; i++) {
        access *r = &acc[i];
        if (r->live && want[r->task] && plain_write && ((a->ordered_bits >> (r->task & 7)) & 1) &&
            region_covers(&a->t, &r->t))
          r->live = false;
        else if (r->live && want[r->task] && plain_write &&
                 ((a->ordered_bits >> (r->task & 7)) & 1))
          trim_record(r, &a->t);
      }
      a->live = true;
    }
    nacc++;
  }
  tmap_destroy(&m);
  return 0;
}
