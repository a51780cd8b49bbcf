/* tmap_bench.c — TensorMap cost per tmap_access (CPU time, ns) on seven
 * patterns:
 *   chain        one 4 KiB tensor INOUT, tasks retire right away;
 *   independent  256 buffers of 4 KiB written in turn, 1024 live tasks;
 *   fanout       64 slots of 1 KiB (one 64 KiB buffer) written, every
 *                65th task reads all 64 KiB;
 *   big blocks   16 row blocks of 256 KiB of a 4 MiB matrix written, every
 *                17th task reads it whole;
 *   slots64      like bench_pto indep (W2): task i writes 64-byte slot i
 *                of one 4 MiB slots array, 1024 live tasks;
 *   rows64       like bench_pto fanout (W4), every access of a round:
 *                produce (read R, write A), 64 consumers (read A, INOUT
 *                their 64-byte row of a 4 KiB buffer B), reduce (read B
 *                whole, write R);
 *   big probe    1 MiB read of a buffer whose 64-byte lines were written
 *                by the 1024 tasks before it (16 per KiB line scattered).
 * Patterns by name (chain independent fanout big-blocks slots64 rows64
 * big-probe) as arguments: only those. Not part of the build; compile it
 * against the sources of the revision to measure, e.g. from the repository
 * root:
 *   gcc -O2 -Iinclude -Isrc bench/tmap_bench.c src/chip/tensormap.c \
 *       src/common/region.c src/common/tensor.c src/common/tensor_walk.c \
 *       -o build-plain/tmap_bench && build-plain/tmap_bench
 * (-DTMAP_VOID_DEP for revisions whose dependency callback returns void). */
#include "chip/tensormap.h"
#include "pto/status.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static void must(int rc) {
  if (rc != PTO_OK) {
    fprintf(stderr, "tmap_access: %d\n", rc);
    exit(1);
  }
}
static float big[1 << 20], bufs[256][1024];
static int nsel;
static char **sel;
/* Runs a pattern when no names were given, or when it is one of them. */
static bool want(const char *name) {
  for (int i = 0; i < nsel; i++)
    if (!strcmp(sel[i], name)) return true;
  return nsel == 0;
}
/* n accesses: task i writes part[i % (nparts + 1)], and every
 * (nparts + 1)-th task reads `all` instead; 1024 tasks live. */
static void parts_then_all(const char *name, const pto_tensor *part, int nparts,
                           const pto_tensor *all, int n) {
  tmap m;
  tmap_init(&m, 16384);
  double t0 = now();
  for (int i = 0; i < n; i++) {
    if (i % (nparts + 1) == nparts)
      must(tmap_access(&m, all, TMAP_READ, i, i - 1024, dep, NULL));
    else
      must(tmap_access(&m, &part[i % (nparts + 1)], TMAP_WRITE, i, i - 1024, dep, NULL));
  }
  printf("%s %6.1f ns/access\n", name, (now() - t0) / n);
  tmap_destroy(&m);
}
int main(int argc, char **argv) {
  nsel = argc - 1;
  sel = argv + 1;
  const int N = 400000;
  tmap m;
  double t0;
  long acc;
  int64_t task;
  pto_tensor s = vec(big, 16); /* slot i of big: element offset 16 i */
  s.buf_bytes = sizeof big;
  /* chain: one 4 KiB tensor INOUT, tasks retire right away */
  if (want("chain")) {
    tmap_init(&m, 4096);
    pto_tensor c = vec(bufs[0], 1024);
    t0 = now();
    for (int i = 0; i < N; i++)
      must(tmap_access(&m, &c, TMAP_READ_WRITE, i, i - 1, dep, NULL));
    printf("chain        %6.1f ns/access\n", (now() - t0) / N);
    tmap_destroy(&m);
  }
  /* independent: 256 buffers, 1024 live tasks */
  if (want("independent")) {
    tmap_init(&m, 16384);
    pto_tensor ind[256];
    for (int b = 0; b < 256; b++)
      ind[b] = vec(bufs[b], 1024);
    t0 = now();
    for (int i = 0; i < N; i++)
      must(tmap_access(&m, &ind[i % 256], TMAP_WRITE, i, i - 1024, dep, NULL));
    printf("independent  %6.1f ns/access\n", (now() - t0) / N);
    tmap_destroy(&m);
  }
  /* fan-out/fan-in: 64 slots of 256 floats (64 KiB); every 65th task reads all */
  if (want("fanout")) {
    pto_tensor slot[64], all = vec(big, 64 * 256);
    for (int s = 0; s < 64; s++) {
      int64_t st = s * 256, n = 256;
      pto_tensor_slice(&all, &st, &n, &slot[s]);
    }
    parts_then_all("fanout      ", slot, 64, &all, N);
  }
  /* row blocks of a 4 MiB matrix (1024 x 1024 f32): 16 blocks of 64 rows (256 KiB) written, the
   * whole read */
  if (want("big-blocks")) {
    pto_tensor mat, blk[16];
    int64_t sh[2] = {1024, 1024};
    pto_tensor_init(&mat, big, sizeof big, PTO_F32, 2, sh);
    for (int b = 0; b < 16; b++) {
      int64_t st[2] = {b * 64, 0}, s2[2] = {64, 1024};
      pto_tensor_slice(&mat, st, s2, &blk[b]);
    }
    parts_then_all("big blocks  ", blk, 16, &mat, N);
  }
  /* W2-like: task i writes 64-byte slot i (mod 65536) of one 4 MiB array */
  if (want("slots64")) {
    tmap_init(&m, 16384);
    t0 = now();
    for (int i = 0; i < N; i++) {
      s.offset = (int64_t)(i % 65536) * 16;
      must(tmap_access(&m, &s, TMAP_WRITE, i, i - 1024, dep, NULL));
    }
    printf("slots64      %6.1f ns/access\n", (now() - t0) / N);
    tmap_destroy(&m);
  }
  /* W4-like: R, A, then B = 64 rows of 64 bytes; every access of a round */
  if (want("rows64")) {
    tmap_init(&m, 16384);
    pto_tensor r = vec(big, 16), a = vec(big + 16, 16), b, row[64];
    int64_t bs[2] = {64, 16};
    pto_tensor_init(&b, big + 32, 64 * 64, PTO_F32, 2, bs);
    for (int q = 0; q < 64; q++) {
      int64_t st[2] = {q, 0}, s2[2] = {1, 16};
      pto_tensor_slice(&b, st, s2, &row[q]);
    }
    acc = 0;
    task = 0;
    t0 = now();
    while (acc < N) {
      must(tmap_access(&m, &r, TMAP_READ, task, task - 1024, dep, NULL));
      must(tmap_access(&m, &a, TMAP_WRITE, task, task - 1024, dep, NULL));
      task++;
      for (int q = 0; q < 64; q++, task++) {
        must(tmap_access(&m, &a, TMAP_READ, task, task - 1024, dep, NULL));
        must(tmap_access(&m, &row[q], TMAP_READ_WRITE, task, task - 1024, dep, NULL));
      }
      must(tmap_access(&m, &b, TMAP_READ, task, task - 1024, dep, NULL));
      must(tmap_access(&m, &r, TMAP_WRITE, task, task - 1024, dep, NULL));
      task++;
      acc += 2 * 66;
    }
    printf("rows64       %6.1f ns/access\n", (now() - t0) / acc);
    tmap_destroy(&m);
  }
  /* big probe: 1024 writes of 64-byte lines scattered over 1 MiB, then the
   * whole MiB read; repeated with the next lines. The reads are timed apart. */
  if (want("big-probe")) {
    tmap_init(&m, 16384);
    pto_tensor mib = vec(big, 1 << 18);
    acc = 0;
    task = 0;
    int probes = 0;
    double tprobe = 0;
    t0 = now();
    while (acc < N) {
      for (int k = 0; k < 1024; k++, task++) {
        s.offset = (int64_t)(((size_t)task * 16 + (size_t)(task >> 10)) % 16384) * 16;
        must(tmap_access(&m, &s, TMAP_WRITE, task, task - 1024, dep, NULL));
      }
      double p0 = now();
      must(tmap_access(&m, &mib, TMAP_READ, task, task - 1024, dep, NULL));
      tprobe += now() - p0;
      task++;
      probes++;
      acc += 1025;
    }
    printf("big probe    %6.1f ns/access, %.0f ns per 1 MiB read of 1024 lines\n",
           (now() - t0) / acc, tprobe / probes);
    tmap_destroy(&m);
  }
  printf("(deps %ld)\n", ndeps);
  return 0;
}
