/* tmap_bench.c — TensorMap cost per tmap_access (CPU time, ns) on four
 * patterns: a chain on one tensor, independent buffers, 64-slot fan-out
 * with a reader of all slots, and 256 KiB row blocks of a 4 MiB matrix
 * read whole (1024 live tasks). Not part of the build; compile it against
 * the sources of the revision to measure, e.g. from the repository root:
 *   gcc -O2 -Iinclude -Isrc bench/tmap_bench.c src/chip/tensormap.c \
 *       src/common/region.c src/common/tensor.c -o /tmp/tmap_bench && /tmp/tmap_bench
 * (-DTMAP_VOID_DEP for revisions whose dependency callback returns void). */
#include "chip/tensormap.h"
#include "pto/status.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long ndeps;
#ifdef TMAP_VOID_DEP
static void dep(void *a, int64_t p) {
  (void)a;
  (void)p;
  ndeps++;
}
#else
static bool dep(void *a, int64_t p) {
  (void)a;
  (void)p;
  ndeps++;
  return true;
}
#endif
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static pto_tensor vec(void *p, int64_t n) {
  pto_tensor t;
  pto_tensor_init(&t, p, (size_t)n * 4, PTO_F32, 1, &n);
  return t;
}
int main(void) {
  static float big[1 << 20], bufs[256][1024];
  const int N = 400000;
  tmap m;
  /* chain: one 4 KiB tensor INOUT, tasks retire right away */
  tmap_init(&m, 4096);
  pto_tensor c = vec(bufs[0], 1024);
  double t0 = now();
  for (int i = 0; i < N; i++)
    tmap_access(&m, &c, TMAP_READ_WRITE, i, i - 1, dep, NULL);
  printf("chain        %6.1f ns/access\n", (now() - t0) / N);
  tmap_destroy(&m);
  /* independent: 256 buffers, 1024 live tasks */
  tmap_init(&m, 16384);
  pto_tensor ind[256];
  for (int b = 0; b < 256; b++)
    ind[b] = vec(bufs[b], 1024);
  t0 = now();
  for (int i = 0; i < N; i++)
    tmap_access(&m, &ind[i % 256], TMAP_WRITE, i, i - 1024, dep, NULL);
  printf("independent  %6.1f ns/access\n", (now() - t0) / N);
  tmap_destroy(&m);
  /* fan-out/fan-in: 64 slots of 256 floats (64 KiB); every 65th task reads all */
  tmap_init(&m, 16384);
  pto_tensor slot[64], all = vec(big, 64 * 256);
  for (int s = 0; s < 64; s++) {
    int64_t st = s * 256, n = 256;
    pto_tensor_slice(&all, &st, &n, &slot[s]);
  }
  t0 = now();
  for (int i = 0; i < N; i++) {
    if (i % 65 == 64)
      tmap_access(&m, &all, TMAP_READ, i, i - 1024, dep, NULL);
    else
      tmap_access(&m, &slot[i % 65], TMAP_WRITE, i, i - 1024, dep, NULL);
  }
  printf("fanout       %6.1f ns/access\n", (now() - t0) / N);
  tmap_destroy(&m);
  /* row blocks of a 4 MiB matrix (1024 x 1024 f32): 16 blocks of 64 rows (256 KiB) written, the
   * whole read */
  tmap_init(&m, 16384);
  pto_tensor mat, blk[16];
  int64_t sh[2] = {1024, 1024};
  pto_tensor_init(&mat, big, sizeof big, PTO_F32, 2, sh);
  for (int b = 0; b < 16; b++) {
    int64_t st[2] = {b * 64, 0}, s2[2] = {64, 1024};
    pto_tensor_slice(&mat, st, s2, &blk[b]);
  }
  t0 = now();
  for (int i = 0; i < N; i++) {
    if (i % 17 == 16)
      tmap_access(&m, &mat, TMAP_READ, i, i - 1024, dep, NULL);
    else
      tmap_access(&m, &blk[i % 17], TMAP_WRITE, i, i - 1024, dep, NULL);
  }
  printf("big blocks   %6.1f ns/access\n", (now() - t0) / N);
  tmap_destroy(&m);
  printf("(deps %ld)\n", ndeps);
  return 0;
}
