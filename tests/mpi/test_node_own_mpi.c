/* test_node_own_mpi.c — a program that initialises MPI itself and finalises
 * it at its end, under `mpirun -np N` (N = 2..10): every rank calls
 * MPI_Init_thread(MPI_THREAD_MULTIPLE), then pto_node_create with N chips.
 * Ranks > 0 serve inside it and never return. Rank 0 runs two nodes, one
 * after the other, each a node-level allreduce of COUNT f32 over every chip
 * (checked element by element), destroys each, then calls MPI_Finalize
 * itself and returns 0: that finalisation releases the other ranks, which
 * finalise MPI and exit 0, so the job exits 0. A check that fails prints
 * actual vs expected and the program exits 1; an MPI_Finalize that does
 * not return within FINALIZE_S seconds is named and exits 1 (the ctest
 * timeout is only a safety net). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pto/coll.h"
#include "pto/node.h"
#include "small_node.h"

#define DEV0       121 /* device ids of this program: 121 .. 121 + N - 1 */
#define COUNT      4097
#define FINALIZE_S 20

static int init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  return pto_coll_register(chip);
}

typedef struct io {
  int n;
  pto_tensor src[PTO_NODE_MAX_CHIPS], dst[PTO_NODE_MAX_CHIPS];
  int rc;
} io;

static void node_orch(pto_node_orch *no, void *arg) {
  io *x = arg;
  int chips[PTO_NODE_MAX_CHIPS];
  for (int r = 0; r < x->n; r++)
    chips[r] = r;
  pto_window_buffer b = {"scratch", pto_coll_scratch_bytes(x->n, COUNT * sizeof(float))};
  pto_domain dom;
  x->rc = pto_node_domain_create(no, chips, x->n, &b, 1, &dom);
  if (!x->rc)
    x->rc = pto_node_allreduce(no, dom, "scratch", x->dst, x->src, PTO_RED_SUM, PTO_COLL_RING);
}

static void finalize_late(int sig) {
  (void)sig;
  static const char msg[] = "own_mpi: FAILED: rank 0's MPI_Finalize did not return within 20 s\n";
  write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(int argc, char **argv) {
  int provided = -1, size = 0, fails = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || size > 10) {
    fprintf(stderr, "own_mpi: run with mpirun -np 2..10\n");
    MPI_Finalize();
    return 2;
  }
  int devs[PTO_NODE_MAX_CHIPS];
  for (int i = 0; i < size; i++)
    devs[i] = DEV0 + i;
  pto_node_config cfg = small_node(size, devs, init);
  cfg.startup_timeout_ms = 30000;
  for (int node = 1; node <= 2; node++) {
    pto_node *n = NULL;
    pto_error_info err;
    int rc = pto_node_create(&cfg, &n, &err); /* ranks > 0 serve in here */
    if (rc) {
      fprintf(stderr, "own_mpi: FAILED: node %d: create: %s: %s\n", node, pto_status_name(rc),
              err.details);
      return 1; /* a failed create ends the job (pto's exit handler) */
    }
    static io x;
    x.n = size;
    int64_t count = COUNT;
    for (int r = 0; r < size; r++) {
      pto_node_host_tensor(n, PTO_F32, 1, &count, &x.src[r]);
      pto_node_host_tensor(n, PTO_F32, 1, &count, &x.dst[r]);
      for (int i = 0; i < COUNT; i++)
        ((float *)x.src[r].buf)[i] = (float)(node * 1000 + r * 10 + i % 7);
    }
    rc = pto_node_run(n, node_orch, &x, &err);
    if (rc || x.rc) {
      fprintf(stderr, "own_mpi: FAILED: node %d: run: %s (%s): %s\n", node, pto_status_name(rc),
              pto_status_name(x.rc), err.details);
      fails++;
    }
    for (int r = 0; r < size && !rc; r++)
      for (int i = 0; i < COUNT; i++) {
        float want = 0, got = ((float *)x.dst[r].buf)[i];
        for (int q = 0; q < size; q++)
          want += (float)(node * 1000 + q * 10 + i % 7);
        if (got != want) {
          fprintf(stderr, "own_mpi: FAILED: node %d: dst[%d][%d] = %g, expected %g\n", node, r, i,
                  got, want);
          fails++;
          break;
        }
      }
    pto_node_destroy(n);
    printf("own_mpi: node %d: allreduce of %d f32 on %d chips %s\n", node, COUNT, size,
           fails ? "FAILED" : "verified");
    fflush(stdout);
  }
  signal(SIGALRM, finalize_late);
  alarm(FINALIZE_S);
  MPI_Finalize(); /* releases the other ranks (pto's part ends here) */
  alarm(0);
  printf("own_mpi: rank 0: MPI_Finalize returned; %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}
