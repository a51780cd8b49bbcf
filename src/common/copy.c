/* copy.c — large copies (copy.h says why and when `rep movsb`). */
#include "common/copy.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/options.h"

#if PTO_COPY_MOVSB_BUILT
static void movsb(void *dst, const void *src, size_t n) {
  __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

#define TRY_BYTES ((size_t)2 << 20)
#define TRY_REPS  5

/* The best of TRY_REPS copies of TRY_BYTES, in ns. */
static uint64_t best(void (*copy)(void *, const void *, size_t), unsigned char *a,
                     unsigned char *b) {
  uint64_t least = UINT64_MAX;
  for (int i = 0; i < TRY_REPS; i++) {
    uint64_t t0 = pto_now_ns();
    copy(b, a, TRY_BYTES);
    uint64_t t = pto_now_ns() - t0;
    least = t < least ? t : least;
  }
  return least;
}

static void libc_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

/* Two 2 MiB buffers on huge pages where the kernel gives them (a first
 * touch of 1024 small pages cost 10 ms on one virtual machine), copied
 * both ways, alternated twice. */
static bool movsb_faster(void) {
  size_t len = 2 * TRY_BYTES + TRY_BYTES; /* room to align to 2 MiB */
  unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  unsigned char *a =
      (unsigned char *)(((uintptr_t)m + TRY_BYTES - 1) & ~(uintptr_t)(TRY_BYTES - 1));
  unsigned char *b = a + TRY_BYTES;
  (void)madvise(a, 2 * TRY_BYTES, MADV_HUGEPAGE);
  memset(a, 1, 2 * TRY_BYTES);
  uint64_t lib = UINT64_MAX, rep = UINT64_MAX;
  for (int round = 0; round < 2; round++) {
    uint64_t l = best(libc_copy, a, b), r = best(movsb, a, b);
    lib = l < lib ? l : lib;
    rep = r < rep ? r : rep;
  }
  munmap(m, len);
  return rep * 100 <= lib * 95;
}
#endif

static bool use_movsb;
static pthread_once_t decided = PTHREAD_ONCE_INIT;

static void decide(void) {
#if PTO_COPY_MOVSB_BUILT
  long long o = pto_option(PTO_OPT_COPY_MOVSB);
  use_movsb = o < 0 ? movsb_faster() : o == 1;
#endif
}

bool pto_copy_movsb(void) {
  pthread_once(&decided, decide);
  return use_movsb;
}

void pto_copy_large(void *dst, const void *src, size_t n) {
#if PTO_COPY_MOVSB_BUILT
  if (pto_copy_movsb()) {
    movsb(dst, src, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}
