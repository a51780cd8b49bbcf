/* coll_mpi_exchange.c — the MPI calls under the record exchange of pto's
 * small collectives (src/comm/mpi_coll.c), alone, between ranks 0 and 1:
 * one record each way per iteration, through
 *   isend:      MPI_Irecv + MPI_Isend, MPI_Testall until done (what pto does)
 *   isend, two: the same, a record of more than 256 bytes sent as 256 bytes
 *               and the rest, received once the first came (what pto does
 *               for one of 257-512 bytes: mpi_coll.c, INLINE_MAX)
 *   persistent: MPI_Recv_init/MPI_Send_init once, MPI_Startall + MPI_Testall
 *   send:       MPI_Irecv + MPI_Send + MPI_Wait
 *   sendrecv:   MPI_Sendrecv
 * against MPI_Allreduce of 8 bytes. Receives are posted at pto's bound
 * (64-byte descriptor + 32 KiB). Prints, per variant, the best over 11
 * trials of ns per exchange (rank 0); the variants alternate within each
 * trial.
 *
 *   mpiexec -np 2 bench_coll_mpi_exchange [ITERS] [RECORD_BYTES]   (default 100000 72) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"

#define MAX_REC (64 + 32768)
#define TAG     0x70

int main(int argc, char **argv) {
  int provided, me, np;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  long iters = argc > 1 ? atol(argv[1]) : 100000;
  int bytes = argc > 2 ? atoi(argv[2]) : 72;
  if (np != 2 || iters < 1 || bytes < 1 || bytes > MAX_REC) {
    if (me == 0) fprintf(stderr, "2 ranks; ITERS >= 1; RECORD_BYTES 1..%d\n", MAX_REC);
    MPI_Finalize();
    return 2;
  }
  static char rb[MAX_REC], sb[MAX_REC];
  int peer = 1 - me, bad = 0;
  for (int i = 0; i < bytes; i++)
    sb[i] = (char)(me * 31 + i);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Request pq[2];
  MPI_Recv_init(rb, MAX_REC, MPI_BYTE, peer, TAG, c, &pq[0]);
  MPI_Send_init(sb, bytes, MPI_BYTE, peer, TAG, c, &pq[1]);
  enum { INLINE = 256, VARIANTS = 6, EXCHANGES = VARIANTS - 1 };
  static const char *const names[VARIANTS] = {"isend", "isend, two", "persistent",
                                              "send",  "sendrecv",   "MPI_Allreduce 8 B"};
  double best[VARIANTS];
  for (int v = 0; v < VARIANTS; v++)
    best[v] = 1e30;
  float x[2] = {1, 2}, y[2];
  for (int t = 0; t < 11; t++)
    for (int v = 0; v < VARIANTS; v++) {
      MPI_Barrier(c);
      uint64_t t0 = pto_now_ns();
      for (long i = 0; i < iters; i++) {
        MPI_Request q[4];
        int done = 0, cut = v == 1 && bytes > INLINE ? INLINE : bytes;
        switch (v) {
        case 0:
        case 1:
          MPI_Irecv(rb, MAX_REC, MPI_BYTE, peer, TAG, c, &q[0]);
          MPI_Isend(sb, cut, MPI_BYTE, peer, TAG, c, &q[1]);
          if (cut < bytes) MPI_Isend(sb + cut, bytes - cut, MPI_BYTE, peer, TAG, c, &q[2]);
          while (!done)
            MPI_Testall(2, q, &done, MPI_STATUSES_IGNORE);
          if (cut == bytes) break;
          MPI_Irecv(rb + cut, bytes - cut, MPI_BYTE, peer, TAG, c, &q[3]);
          for (done = 0; !done;)
            MPI_Testall(2, q + 2, &done, MPI_STATUSES_IGNORE);
          break;
        case 2:
          MPI_Startall(2, pq);
          while (!done)
            MPI_Testall(2, pq, &done, MPI_STATUSES_IGNORE);
          break;
        case 3:
          MPI_Irecv(rb, MAX_REC, MPI_BYTE, peer, TAG, c, &q[0]);
          MPI_Send(sb, bytes, MPI_BYTE, peer, TAG, c);
          MPI_Wait(&q[0], MPI_STATUS_IGNORE);
          break;
        case 4:
          MPI_Sendrecv(sb, bytes, MPI_BYTE, peer, TAG, rb, MAX_REC, MPI_BYTE, peer, TAG, c,
                       MPI_STATUS_IGNORE);
          break;
        default: MPI_Allreduce(x, y, 2, MPI_FLOAT, MPI_SUM, c);
        }
      }
      double ns = (double)(pto_now_ns() - t0) / (double)iters;
      best[v] = ns < best[v] ? ns : best[v];
      if (v < EXCHANGES)
        for (int i = 0; i < bytes; i++)
          bad |= rb[i] != (char)(peer * 31 + i);
    }
  if (bad) fprintf(stderr, "rank %d: a record arrived wrong\n", me);
  if (me == 0 && !bad)
    for (int v = 0; v < VARIANTS; v++)
      printf("%s: %.0f ns per %s\n", names[v], best[v], v < EXCHANGES ? "exchange" : "call");
  MPI_Request_free(&pq[0]);
  MPI_Request_free(&pq[1]);
  MPI_Comm_free(&c);
  MPI_Finalize();
  return bad;
}
