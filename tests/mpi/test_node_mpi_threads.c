/* test_node_mpi_threads.c — a node under mpirun (-np 2) whose thread cannot
 * start names the thread and pthread_create's error:
 *
 *   relay : rank 0's relay thread (the first thread pto_node_create starts
 *           there): "cannot start the relay thread: pthread_create: ...";
 *   chip0 : chip 0's thread (a thread of rank 0, the next one): "cannot
 *           start the thread of chip rank 0: pthread_create: ...";
 *   rank  : rank 1's relay thread (the first thread rank 1 starts for its
 *           chip): rank 0 names chip rank 1 with rank 1's reason.
 *
 * The program is linked with -Wl,--wrap=pthread_create (node.cmake): every
 * pthread_create of the library goes through ../unit/thread_fault.h and, on
 * the rank the mode names, fails with EAGAIN from the chosen call on (MPI's own threads, in
 * its shared libraries, are not affected). A node that cannot start under
 * mpirun ends the job (MPI_Abort) with its reason on rank 0's stderr, which
 * node.cmake matches; pto_node_create returning is a failure. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/thread_fault.h"
#include "pto/node.h"
#include "small_node.h"

#define DEV0 123 /* device ids of this program: 123, 124 */

static int init(pto_chip *chip, int rank, void *arg) {
  (void)chip, (void)rank, (void)arg;
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "relay";
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  int rank = r ? atoi(r) : 0;
  const char *want = NULL;
  if (strcmp(mode, "relay") == 0) {
    if (rank == 0) thread_fault_arm(0);
    want = "node under mpirun: cannot start the relay thread: pthread_create: Resource "
           "temporarily unavailable";
  } else if (strcmp(mode, "chip0") == 0) {
    if (rank == 0) thread_fault_arm(1);
    want = "cannot start the thread of chip 0: pthread_create: Resource temporarily unavailable";
  } else if (strcmp(mode, "rank") == 0) {
    if (rank == 1) thread_fault_arm(0);
    want = "cannot start the relay thread: pthread_create: Resource temporarily unavailable";
  } else {
    fprintf(stderr, "unknown mode '%s' (relay, chip0, rank)\n", mode);
    return 2;
  }
  static const int devs[2] = {DEV0, DEV0 + 1};
  pto_node_config cfg = small_node(2, devs, init);
  cfg.quiet = true;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rank == 0)
    printf("FAILED: %s: pto_node_create returned %s (%s); expected the job to end naming \"%s\"\n",
           mode, pto_status_name(rc), rc ? err.details : "", want);
  if (rc == 0) pto_node_destroy(n);
  return 1;
}
