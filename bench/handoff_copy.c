/* handoff_copy.c — what a block costs to hand from one process to another
 * through shared memory, as pto's collectives on shared windows move it
 * (the root copies its block into its window slot, each peer copies it
 * out): a writer process copies N bytes into a shared mapping, a reader
 * process copies them out, in turn, ITERS times; against the same two
 * copies in one process. On a host where the two CPUs are far apart the
 * lines the writer dirtied cross between them on every hand-off, and both
 * copies slow down; Open MPI's shared-memory transport instead copies
 * large messages once, from the sender's buffer (CMA), which the benchmark
 * does not write between calls.
 *
 *   build-bench/bench/bench_handoff_copy [bytes...]   (default 262144 2097152 16777216)
 *
 * Prints, per size, µs per copy: the writer's and the reader's across
 * processes, and each copy within one process. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"

#define ITERS 200

/* The reader's side: waits for each hand-off, copies the block out, hands
 * it back; reports its mean copy time through *out_us. */
static void reader(const unsigned char *shared, _Atomic int *turn, size_t n, double *out_us) {
  unsigned char *dst = malloc(n);
  if (!dst) _exit(1);
  memset(dst, 0, n);
  uint64_t ns = 0;
  for (int i = 0; i < ITERS; i++) {
    while (atomic_load_explicit(turn, memory_order_acquire) != 2 * i + 1)
      ;
    uint64_t t0 = pto_now_ns();
    memcpy(dst, shared, n);
    ns += pto_now_ns() - t0;
    atomic_store_explicit(turn, 2 * i + 2, memory_order_release);
  }
  *out_us = (double)ns / ITERS / 1e3;
  bool came = dst[0] == 1 && dst[n - 1] == 1; /* the writer's bytes */
  free(dst);
  if (!came) _exit(1);
}

static int one_size(size_t n) {
  /* the block, then the turn word and the reader's result on their own line */
  unsigned char *shared =
      mmap(NULL, n + 128, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  unsigned char *src = malloc(n), *dst = malloc(n);
  if (shared == MAP_FAILED || !src || !dst) {
    fprintf(stderr, "handoff_copy: no memory for %zu bytes\n", n);
    return 1;
  }
  memset(shared, 0, n + 128);
  memset(src, 1, n);
  memset(dst, 0, n);
  _Atomic int *turn = (_Atomic int *)(shared + n);
  double *reader_us = (double *)(shared + n + 64);
  pid_t pid = fork();
  if (pid < 0) {
    perror("handoff_copy: fork");
    return 1;
  }
  if (pid == 0) {
    reader(shared, turn, n, reader_us);
    _exit(0);
  }
  uint64_t ns = 0;
  for (int i = 0; i < ITERS; i++) {
    while (atomic_load_explicit(turn, memory_order_acquire) != 2 * i)
      ;
    uint64_t t0 = pto_now_ns();
    memcpy(shared, src, n);
    ns += pto_now_ns() - t0;
    atomic_store_explicit(turn, 2 * i + 1, memory_order_release);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double writer_us = (double)ns / ITERS / 1e3;
  /* the same two copies in this process */
  uint64_t in_ns = 0, out_ns = 0;
  for (int i = 0; i < ITERS; i++) {
    uint64_t t0 = pto_now_ns();
    memcpy(shared, src, n);
    uint64_t t1 = pto_now_ns();
    memcpy(dst, shared, n);
    in_ns += t1 - t0;
    out_ns += pto_now_ns() - t1;
  }
  printf("%zu,%.1f,%.1f,%.1f,%.1f\n", n, writer_us, *reader_us, (double)in_ns / ITERS / 1e3,
         (double)out_ns / ITERS / 1e3);
  munmap(shared, n + 128);
  free(src);
  free(dst);
  return !WIFEXITED(status) || WEXITSTATUS(status);
}

int main(int argc, char **argv) {
  static const size_t def[] = {262144, 2097152, 16777216};
  printf("bytes,writer_us,reader_us,one_process_in_us,one_process_out_us\n");
  int rc = 0;
  for (int i = 0; i < (argc > 1 ? argc - 1 : 3) && !rc; i++) {
    long v = argc > 1 ? atol(argv[i + 1]) : (long)def[i];
    if (v < 1 || v > (1L << 30)) {
      fprintf(stderr, "handoff_copy: bytes must be 1..%ld, not '%s'\n", 1L << 30, argv[i + 1]);
      return 2;
    }
    rc = one_size((size_t)v);
  }
  return rc;
}
