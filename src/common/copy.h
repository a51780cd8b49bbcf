/* copy.h — large copies into and out of window memory: `rep movsb` where
 * it beats libc's memcpy on this machine.
 *
 * glibc's memcpy on AMD CPUs stops using `rep movsb` above the L2 cache's
 * size and copies with vector loops up to its non-temporal threshold
 * (dl-cacheinfo.h: "ERMS ... performing poorly for data above L2 cache
 * size", written for Zen 3). On the machine pto is measured on (an AMD
 * EPYC with ERMS and FSRM, 1 MiB of L2 a core) `rep movsb` copied 2 MiB in
 * 36 us against 38-44 and 16 MiB in 503-643 against 601-812, and pto's
 * put and get of 1-2 MiB on shared windows took 1.15-1.19x Open MPI's
 * through memcpy, 0.94-1.02x so (docs/comm.md, "Large copies").
 * Which one runs is decided once per process: PTO_COPY_MOVSB=1 or 0, or,
 * by default (-1), whichever copied 2 MiB faster in a first test (best of
 * 5 each, alternated; `rep movsb` when it took at most 0.95x memcpy's
 * time). Copies below COPY_LARGE, every copy off x86-64 and every
 * copy of a sanitized build are memcpy's. */
#ifndef PTO_COMMON_COPY_H
#define PTO_COMMON_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define COPY_LARGE ((size_t)1 << 20)

/* Where `rep movsb` may run: x86-64, and not under a sanitizer, which
 * sees into memcpy (its interceptor checks every byte) but not into an
 * asm statement. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PTO_COPY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define PTO_COPY_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && !defined(PTO_COPY_SANITIZED)
#define PTO_COPY_MOVSB_BUILT 1
#else
#define PTO_COPY_MOVSB_BUILT 0
#endif

/* A copy of COPY_LARGE bytes or more (pto_copy's). */
void pto_copy_large(void *dst, const void *src, size_t n);

/* memcpy(dst, src, n): the regions must not overlap. Inline, so that the
 * small puts and gets keep their memcpy as the compiler expands it. */
static inline void pto_copy(void *dst, const void *src, size_t n) {
  if (n >= COPY_LARGE)
    pto_copy_large(dst, src, n);
  else
    memcpy(dst, src, n);
}

/* Whether copies of COPY_LARGE bytes and more take `rep movsb` in this
 * process (decided at the first call of either). */
bool pto_copy_movsb(void);

#endif
