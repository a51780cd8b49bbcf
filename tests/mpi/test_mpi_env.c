/* test_mpi_env.c — the MPI environment pto's MPI backend relies on, under
 * `mpiexec -np N test_mpi_env N`: the library provides MPI_THREAD_MULTIPLE,
 * the world has the N ranks asked for, and an RMA window (allocated and
 * shared) uses the unified memory model. Prints actual vs expected. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_model(MPI_Win w, const char *what, int rank) {
  int *model, flag = 0;
  MPI_Win_get_attr(w, MPI_WIN_MODEL, &model, &flag);
  if (!flag || *model != MPI_WIN_UNIFIED) {
    fprintf(stderr, "FAILED rank %d: %s window memory model is %d, expected MPI_WIN_UNIFIED (%d)\n",
            rank, what, flag ? *model : -1, MPI_WIN_UNIFIED);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int provided = -1, rank, size, bad = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int want = argc > 1 ? atoi(argv[1]) : size;
  if (provided != MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "FAILED rank %d: thread level %d, expected MPI_THREAD_MULTIPLE (%d)\n", rank,
            provided, MPI_THREAD_MULTIPLE);
    bad = 1;
  }
  if (size != want) {
    fprintf(stderr, "FAILED rank %d: world size %d, expected %d\n", rank, size, want);
    bad = 1;
  }
  void *p;
  MPI_Win w;
  MPI_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &p, &w);
  bad |= check_model(w, "MPI_Win_allocate", rank);
  MPI_Win_free(&w);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Win_allocate_shared(4096, 1, MPI_INFO_NULL, node, &p, &w);
  bad |= check_model(w, "MPI_Win_allocate_shared", rank);
  MPI_Win_free(&w);
  MPI_Comm_free(&node);
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0 && !any) printf("mpi env: %d ranks, MPI_THREAD_MULTIPLE, unified windows\n", size);
  MPI_Finalize();
  return any;
}
