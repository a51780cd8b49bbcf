/* c2_allreduce_mpi.c — benchmark C2 on the MPI backend: pto_allreduce
 * (f32 sum) over a domain of every MPI rank, windows from the MPI backend
 * (src/comm/mpi.c), against Open MPI's own MPI_Allreduce on the same
 * buffers. Each process is one chip (MPI_COMM_WORLD rank r = chip r) and
 * calls the collective from its main thread as a kernel would; ITERS
 * back-to-back calls are timed per trial; reported: the median over trials
 * of the slowest rank's time per call (min and max too), like
 * bench_c2_allreduce does for the shared-memory backend.
 *
 *   mpiexec -np 2 bench_c2_allreduce_mpi [--iters N] [--trials T] [bytes...]
 *
 * Default sizes: 64 KiB and 4 MiB. PTO_MPI_SHARED_WINDOWS=0 measures RMA
 * windows (MPI_Win_create) instead of the shared windows of one host.
 * Built with the MPI tests (tests/mpi/CMakeLists.txt) whenever pto is
 * built with MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "pto/coll.h"

static int me, np;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The slowest rank's µs per call of each trial -> median, min, max. */
static void report(const char *sys, int64_t bytes, double *t, int trials) {
  qsort(t, (size_t)trials, sizeof t[0], cmp);
  if (me == 0)
    printf("%d,%lld,%s,%.1f,%.1f,%.1f,%.2f\n", np, (long long)bytes, sys, t[trials / 2], t[0],
           t[trials - 1], (double)bytes / t[trials / 2] / 1e3);
  fflush(stdout);
}

static double slowest(double us) {
  double m;
  MPI_Allreduce(&us, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int64_t sizes[16] = {64 << 10, 4 << 20};
  int ns = 0, iters_arg = 0, trials = 7;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters_arg = atoi(argv[++i]);
    else if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
      trials = atoi(argv[++i]);
    else if (ns < 16)
      sizes[ns++] = atoll(argv[i]);
  }
  if (ns == 0) ns = 2;
  if (trials < 1 || trials > 100 || iters_arg < 0) {
    if (me == 0) fprintf(stderr, "--trials 1..100, --iters >= 1\n");
    MPI_Finalize();
    return 2;
  }
  int64_t maxb = 0;
  for (int s = 0; s < ns; s++) {
    if (sizes[s] < 4 || sizes[s] % 4) {
      if (me == 0)
        fprintf(stderr, "size %lld: a positive multiple of 4 bytes\n", (long long)sizes[s]);
      MPI_Finalize();
      return 2;
    }
    if (sizes[s] > maxb) maxb = sizes[s];
  }

  /* one domain of every rank, through the comm layer */
  pto_window_buffer b[1] = {{"scratch", pto_coll_scratch_bytes(np, (size_t)maxb)}};
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  comm_desc_layout(&d, b, 1);
  d.id = 1;
  d.nranks = np;
  d.backend = COMM_BACKEND_MPI;
  d.wait_timeout_ms = 30000;
  for (int r = 0; r < np; r++)
    d.chips[r] = r;
  pto_comm c;
  comm_init(&c, me);
  int rc = comm_domain_open(&c, &d, me);
  MPI_Barrier(MPI_COMM_WORLD);
  if (!rc) rc = comm_domain_attach(&c, 1);
  if (rc) {
    char det[400];
    comm_task_error(&c, det, sizeof det);
    fprintf(stderr, "rank %d: domain: %s: %s\n", me, pto_status_name(rc), det);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  comm_task_begin(&c, 1, (np < 64 ? (1ull << np) : 0) - 1);
  pto_kctx k;
  memset(&k, 0, sizeof k);
  k.env = &c;
  pto_tensor scratch;
  int64_t sb = (int64_t)b[0].bytes;
  pto_comm_window_tensor(&c, 1, me, "scratch", PTO_U8, 1, &sb, &scratch);

  float *in = malloc((size_t)maxb), *out = malloc((size_t)maxb);
  for (int64_t i = 0; i < maxb / 4; i++)
    in[i] = (float)(me + i % 7);
  double *t = malloc(sizeof(double) * (size_t)trials);
  static const char *algos[] = {"pto-mpi-auto", "pto-mpi-mesh", "pto-mpi-ring"};
  if (me == 0) printf("ranks,size_bytes,system,us_per_call_median,us_min,us_max,GB_per_s\n");
  for (int s = 0; s < ns; s++) {
    int64_t n = sizes[s] / 4;
    int iters = iters_arg ? iters_arg : sizes[s] >= (1 << 20) ? 20 : 200;
    pto_tensor ti, to;
    pto_tensor_init(&ti, in, (size_t)n * 4, PTO_F32, 1, &n);
    pto_tensor_init(&to, out, (size_t)n * 4, PTO_F32, 1, &n);
    for (int al = 0; al < 3; al++) {
      rc = pto_allreduce(&k, 1, &scratch, &to, &ti, PTO_RED_SUM, (pto_coll_algo)al); /* warm-up */
      for (int tr = 0; tr < trials && !rc; tr++) {
        MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t0 = pto_now_ns();
        for (int i = 0; i < iters && !rc; i++)
          rc = pto_allreduce(&k, 1, &scratch, &to, &ti, PTO_RED_SUM, (pto_coll_algo)al);
        t[tr] = slowest((double)(pto_now_ns() - t0) / iters / 1e3);
      }
      if (rc) {
        char det[400];
        comm_task_error(&c, det, sizeof det);
        fprintf(stderr, "rank %d: pto_allreduce: %s: %s\n", me, pto_status_name(rc), det);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      /* every rank got the sum: out[i] = sum over r of (r + i % 7) */
      for (int64_t i = 0; i < n; i++) {
        float want = (float)(np * (np - 1) / 2 + np * (i % 7));
        if (out[i] != want) {
          fprintf(stderr, "rank %d: %s out[%lld] = %g, expected %g\n", me, algos[al], (long long)i,
                  out[i], want);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
      report(algos[al], sizes[s], t, trials);
    }
    MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
    for (int tr = 0; tr < trials; tr++) {
      MPI_Barrier(MPI_COMM_WORLD);
      uint64_t t0 = pto_now_ns();
      for (int i = 0; i < iters; i++)
        MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t[tr] = slowest((double)(pto_now_ns() - t0) / iters / 1e3);
    }
    report("MPI_Allreduce", sizes[s], t, trials);
  }
  free(t);
  free(in);
  free(out);
  comm_fini(&c, true);
  MPI_Finalize();
  return 0;
}
