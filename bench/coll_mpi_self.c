/* coll_mpi_self.c — pto's own work per small collective call on the MPI
 * backend, without MPI's message exchange: every rank calls allreduce on a
 * domain of itself alone, so a call is pto's argument and view checks, the
 * record exchange with no peer (the requests' test included), the
 * descriptors' comparison and the fold. Prints the best over 11 trials of
 * ns per call (rank 0), and checks the result (the sum of one rank is its
 * src).
 *
 *   mpiexec -np 1 bench_coll_mpi_self [ITERS] [BYTES]
 *
 * Set against an 8-byte MPI_Allreduce of 2 ranks (bench_coll_mpi) it says
 * what of pto's time is its own (docs/comm.md, "Measured, small calls"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "pto/coll.h"

int main(int argc, char **argv) {
  int provided, me;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  long iters = argc > 1 ? atol(argv[1]) : 200000;
  int64_t n = (argc > 2 ? atoll(argv[2]) : 8) / 4;
  if (iters < 1 || n < 1 || n > (1 << 20)) {
    fprintf(stderr, "usage: bench_coll_mpi_self [ITERS >= 1] [BYTES 4..4 MiB]\n");
    MPI_Finalize();
    return 2;
  }
  pto_window_buffer buf = {"scratch", pto_coll_scratch_bytes(1, (size_t)n * 4)};
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  comm_desc_layout(&d, &buf, 1);
  d.id = 1;
  d.nranks = 1;
  d.backend = COMM_BACKEND_MPI;
  d.wait_timeout_ms = 60000;
  d.chips[0] = me;
  pto_comm c;
  comm_init(&c, me);
  int rc = comm_domain_open(&c, &d, 0);
  if (!rc) rc = comm_domain_attach(&c, 1);
  comm_task_begin(&c, 1, 1);
  pto_kctx k;
  memset(&k, 0, sizeof k);
  k.env = &c;
  pto_tensor scratch, in, out;
  int64_t sb = (int64_t)buf.bytes;
  float *a = malloc((size_t)n * 4), *b = calloc((size_t)n, 4);
  for (int64_t i = 0; i < n; i++)
    a[i] = (float)(i % 7 + me);
  if (!rc) rc = pto_comm_window_tensor(&c, 1, 0, "scratch", PTO_U8, 1, &sb, &scratch);
  pto_tensor_init(&in, a, (size_t)n * 4, PTO_F32, 1, &n);
  pto_tensor_init(&out, b, (size_t)n * 4, PTO_F32, 1, &n);
  double best = 1e30;
  for (int t = 0; t < 11 && !rc; t++) {
    uint64_t t0 = pto_now_ns();
    for (long i = 0; i < iters && !rc; i++)
      rc = pto_allreduce(&k, 1, &scratch, &out, &in, PTO_RED_SUM, PTO_COLL_AUTO);
    double ns = (double)(pto_now_ns() - t0) / (double)iters;
    best = ns < best ? ns : best;
  }
  if (!rc && memcmp(a, b, (size_t)n * 4) != 0) {
    fprintf(stderr, "rank %d: the allreduce of one rank is not its src\n", me);
    rc = PTO_EINVAL;
  }
  if (rc) {
    char det[400];
    comm_task_error(&c, det, sizeof det);
    fprintf(stderr, "rank %d: %s: %s\n", me, pto_status_name(rc), det);
  } else if (me == 0) {
    printf("allreduce of %lld B on a domain of one rank: best %.1f ns per call\n", (long long)n * 4,
           best);
  }
  free(a);
  free(b);
  comm_fini(&c, true);
  MPI_Finalize();
  return rc ? 1 : 0;
}
