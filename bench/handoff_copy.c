/* handoff_copy.c — what a block costs to hand from one process to another,
 * as pto's collectives on shared windows move it (the root copies its
 * block into its window slot, each peer copies it out), against one copy
 * from the sender's own buffer, as Open MPI's shared-memory transport
 * moves a large message (CMA: process_vm_readv):
 *   - shared: a writer process copies N bytes into a shared mapping, a
 *     reader process copies them out, in turn, ITERS times;
 *   - cma: the reader copies them straight from the writer's buffer, which
 *     the writer leaves as it is (clean) or writes anew every round (dirty,
 *     as a block just computed);
 *   - the shared copies' two copies in one process.
 * On a host whose two CPUs are far apart, the lines one process dirtied
 * cross to the other on every hand-off, and the copies slow down.
 *
 *   build-bench/bench/bench_handoff_copy [bytes...]   (default 262144 2097152 16777216)
 *
 * Prints CSV, per size, µs per copy: the writer's and the reader's through
 * the shared mapping, the reader's CMA copy of a clean and of a dirty
 * buffer ("-" where the kernel refuses it, with the reason on stderr), and
 * each copy within one process. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"

#define ITERS 200

enum { SHARED, CMA_CLEAN, CMA_DIRTY, MODES };

/* What the two processes share: the block (SHARED), the turn word and
 * the results, each on a line of its own after it. */
typedef struct handoff {
  unsigned char *shared, *src;
  size_t n;
  _Atomic int *turn;
  double *reader_us;
  int *reader_errno;
} handoff;

/* The reader's side: waits for each hand-off, copies the block out, hands
 * it back; its mean copy time to *reader_us (or the refusal's errno). */
static void reader(const handoff *h, int mode, pid_t writer) {
  unsigned char *dst = malloc(h->n);
  if (!dst) _exit(1);
  memset(dst, 0, h->n);
  uint64_t ns = 0;
  for (int i = 0; i < ITERS; i++) {
    while (atomic_load_explicit(h->turn, memory_order_acquire) != 2 * i + 1)
      ;
    uint64_t t0 = pto_now_ns();
    if (mode == SHARED) {
      memcpy(dst, h->shared, h->n);
    } else {
      struct iovec to = {dst, h->n}, from = {h->src, h->n};
      if (process_vm_readv(writer, &to, 1, &from, 1, 0) != (ssize_t)h->n) {
        *h->reader_errno = errno ? errno : EIO;
        atomic_store_explicit(h->turn, -1, memory_order_release);
        _exit(0);
      }
    }
    ns += pto_now_ns() - t0;
    atomic_store_explicit(h->turn, 2 * i + 2, memory_order_release);
  }
  *h->reader_us = (double)ns / ITERS / 1e3;
  /* the writer's bytes: its last round's */
  unsigned char want = mode == CMA_DIRTY ? 1 + (ITERS - 1) % 200 : 1;
  bool came = dst[0] == want && dst[h->n - 1] == want;
  free(dst);
  _exit(came ? 0 : 1);
}

/* One hand-off run; *writer_us the writer's mean time per round (its copy
 * into the mapping, or its new data); returns the reader's mean, or -1. */
static double run(handoff *h, int mode, double *writer_us) {
  atomic_store(h->turn, 0);
  *h->reader_errno = 0;
  pid_t me = getpid(), pid = fork();
  if (pid < 0) {
    perror("handoff_copy: fork");
    exit(1);
  }
  if (pid == 0) reader(h, mode, me);
  uint64_t ns = 0;
  for (int i = 0; i < ITERS; i++) {
    int t;
    while ((t = atomic_load_explicit(h->turn, memory_order_acquire)) != 2 * i && t >= 0)
      ;
    if (t < 0) break;
    uint64_t t0 = pto_now_ns();
    if (mode == SHARED) memcpy(h->shared, h->src, h->n);
    if (mode == CMA_DIRTY) memset(h->src, 1 + i % 200, h->n);
    ns += pto_now_ns() - t0;
    atomic_store_explicit(h->turn, 2 * i + 1, memory_order_release);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *writer_us = (double)ns / ITERS / 1e3;
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "handoff_copy: the reader's copy of %zu bytes came wrong\n", h->n);
    exit(1);
  }
  if (*h->reader_errno) {
    fprintf(stderr, "handoff_copy: process_vm_readv: %s\n", strerror(*h->reader_errno));
    return -1;
  }
  return *h->reader_us;
}

static void one_size(size_t n) {
  handoff h = {.n = n};
  h.shared = mmap(NULL, n + 192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  h.src = malloc(n);
  unsigned char *dst = malloc(n);
  if (h.shared == MAP_FAILED || !h.src || !dst) {
    fprintf(stderr, "handoff_copy: no memory for %zu bytes\n", n);
    exit(1);
  }
  memset(h.shared, 0, n + 192);
  memset(h.src, 1, n);
  memset(dst, 0, n);
  h.turn = (_Atomic int *)(h.shared + n);
  h.reader_us = (double *)(h.shared + n + 64);
  h.reader_errno = (int *)(h.shared + n + 128);
  double w[MODES], r[MODES];
  for (int m = 0; m < MODES; m++)
    r[m] = run(&h, m, &w[m]);
  /* the shared mode's two copies in this process */
  memset(h.src, 1, n);
  uint64_t in_ns = 0, out_ns = 0;
  for (int i = 0; i < ITERS; i++) {
    uint64_t t0 = pto_now_ns();
    memcpy(h.shared, h.src, n);
    uint64_t t1 = pto_now_ns();
    memcpy(dst, h.shared, n);
    in_ns += t1 - t0;
    out_ns += pto_now_ns() - t1;
  }
  char cma[2][32];
  for (int m = CMA_CLEAN; m <= CMA_DIRTY; m++)
    snprintf(cma[m - CMA_CLEAN], sizeof cma[0], r[m] < 0 ? "-" : "%.1f", r[m]);
  printf("%zu,%.1f,%.1f,%s,%s,%.1f,%.1f\n", n, w[SHARED], r[SHARED], cma[0], cma[1],
         (double)in_ns / ITERS / 1e3, (double)out_ns / ITERS / 1e3);
  munmap(h.shared, n + 192);
  free(h.src);
  free(dst);
}

int main(int argc, char **argv) {
  static const size_t def[] = {262144, 2097152, 16777216};
  /* the reader (a child) reads its parent's memory: allowed under Yama's
   * ptrace_scope 1 only when the parent names it a tracer */
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  int nsizes = argc > 1 ? argc - 1 : 3;
  size_t *sizes = malloc(sizeof *sizes * (size_t)nsizes);
  if (!sizes) return 1;
  for (int i = 0; i < nsizes; i++) {
    long v = argc > 1 ? atol(argv[i + 1]) : (long)def[i];
    if (v < 1 || v > (1L << 30)) {
      fprintf(stderr, "handoff_copy: bytes must be 1..%ld, not '%s'\n", 1L << 30, argv[i + 1]);
      return 2;
    }
    sizes[i] = (size_t)v;
  }
  printf("bytes,shared_writer_us,shared_reader_us,cma_clean_us,cma_dirty_us,one_process_in_us,"
         "one_process_out_us\n");
  for (int i = 0; i < nsizes; i++)
    one_size(sizes[i]);
  free(sizes);
  return 0;
}
