/* host_ship.c — host tensors carried to a chip on another host (see
 * host_ship.h). */
#include "node/host_ship.h"

#include <stdlib.h>
#include <string.h>

#include "common/region.h"
#include "pto/status.h"

typedef struct run_hdr {
  uint32_t tensor; /* argument index */
  uint32_t esize;
  uint64_t first, count; /* elements */
} run_hdr;

static bool in_host(const pto_tensor *t, uintptr_t host, size_t bytes) {
  uint64_t a, z;
  region_span(t, &a, &z);
  return a >= host && z <= host + bytes && a < z;
}

static size_t esize(const pto_tensor *t) { return pto_dtype_size((pto_dtype)t->dtype); }

size_t ship_bytes(const pto_args *a, uintptr_t host, size_t bytes) {
  size_t n = 0;
  for (int i = 0; i < a->ntensors; i++)
    if (in_host(&a->tensors[i], host, bytes))
      n += (size_t)pto_tensor_numel(&a->tensors[i]) * esize(&a->tensors[i]);
  return n;
}

void ship_pack(const pto_args *a, uintptr_t host, size_t bytes, unsigned char *out) {
  for (int i = 0; i < a->ntensors; i++) {
    const pto_tensor *t = &a->tensors[i];
    if (!in_host(t, host, bytes)) continue;
    pto_tensor_copy_out(t, out);
    out += (size_t)pto_tensor_numel(t) * esize(t);
  }
}

void ship_unpack(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *in) {
  for (int i = 0; i < a->ntensors; i++) {
    const pto_tensor *t = &a->tensors[i];
    if (!in_host(t, host, bytes)) continue;
    pto_tensor_copy_in(t, in);
    in += (size_t)pto_tensor_numel(t) * esize(t);
  }
}

/* Appends len bytes to the growing buffer *b (size *n, capacity *cap). */
static bool append(unsigned char **b, size_t *n, size_t *cap, const void *p, size_t len) {
  if (*n + len > *cap) {
    size_t c = *cap ? *cap : 256;
    while (c < *n + len)
      c *= 2;
    unsigned char *nb = realloc(*b, c);
    if (!nb) return false;
    *b = nb;
    *cap = c;
  }
  memcpy(*b + *n, p, len);
  *n += len;
  return true;
}

size_t ship_diff(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *before,
                 unsigned char **out) {
  unsigned char *b = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < a->ntensors; i++) {
    const pto_tensor *t = &a->tensors[i];
    if (!in_host(t, host, bytes)) continue;
    size_t es = esize(t);
    int64_t numel = pto_tensor_numel(t);
    for (int64_t e = 0; e < numel;) {
      if (!memcmp(pto_tensor_at_linear(t, e), before + (size_t)e * es, es)) {
        e++;
        continue;
      }
      int64_t end = e + 1;
      while (end < numel && memcmp(pto_tensor_at_linear(t, end), before + (size_t)end * es, es))
        end++;
      run_hdr h = {(uint32_t)i, (uint32_t)es, (uint64_t)e, (uint64_t)(end - e)};
      bool ok = append(&b, &n, &cap, &h, sizeof h);
      for (int64_t k = e; ok && k < end; k++)
        ok = append(&b, &n, &cap, pto_tensor_at_linear(t, k), es);
      if (!ok) {
        free(b);
        *out = NULL;
        return SIZE_MAX;
      }
      e = end;
    }
    before += (size_t)numel * es;
  }
  *out = b;
  return n;
}

int ship_apply(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *diff,
               size_t n) {
  while (n > 0) {
    run_hdr h;
    if (n < sizeof h) return PTO_EINVAL;
    memcpy(&h, diff, sizeof h);
    diff += sizeof h;
    n -= sizeof h;
    if (h.tensor >= (uint32_t)a->ntensors) return PTO_EINVAL;
    const pto_tensor *t = &a->tensors[h.tensor];
    int64_t numel = pto_tensor_numel(t);
    if (!in_host(t, host, bytes) || h.esize != esize(t) || h.first > (uint64_t)numel ||
        h.count > (uint64_t)numel - h.first || h.count > n / h.esize)
      return PTO_EINVAL;
    for (uint64_t k = 0; k < h.count; k++)
      memcpy(pto_tensor_at_linear(t, (int64_t)(h.first + k)), diff + k * h.esize, h.esize);
    diff += h.count * h.esize;
    n -= h.count * h.esize;
  }
  return 0;
}
