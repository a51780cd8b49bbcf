/* mpi_ranks.h — how many node chips a dist test program can have: under
 * mpirun (node chip c is MPI rank c) the world size mpirun started, else
 * no limit (chips are forked). The programs run the same checks either way;
 * under `mpirun -np 2` those that need more chips are listed as not run at
 * that size (they run at -np 4). */
#ifndef PTO_TEST_MPI_RANKS_H
#define PTO_TEST_MPI_RANKS_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int dist_chips_available(void) {
  static const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(names[i]);
    if (v && atoi(v) > 0) return atoi(v);
  }
  return INT_MAX;
}

/* Rank 0 (or a run without mpirun) says so; the others are silent (they
 * serve chips inside pto_node_create and never get back to it). */
static inline void dist_not_run(const char *test, int chips, int have) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (rank && atoi(rank) != 0) return;
  fprintf(stderr, "%s: needs %d chips, mpirun started %d ranks: not run at this size\n", test,
          chips, have);
}

/* Are the ranks on several hosts (scripts/two_hosts.sh)? Then the MPI
 * backend acknowledges one-way calls in runs of 64, not 16 (mpi_coll.c,
 * ONEWAY_RUN_FAR), and its one-way records take 32 KiB blocks. */
static inline bool dist_several_hosts(void) {
  const char *ws = getenv("OMPI_COMM_WORLD_SIZE"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return ws && ls && atoi(ls) < atoi(ws);
}

/* Do the collectives go through the MPI backend's records, with no call
 * table (RMA windows, PTO_MPI_SHARED_WINDOWS=0, or ranks on several hosts)?
 * Rank 0 (the node) asks; a domain's ranks are chips 0..n-1 here. */
static inline bool dist_records_path(void) {
  const char *sw = getenv("PTO_MPI_SHARED_WINDOWS");
  if (!getenv("OMPI_COMM_WORLD_SIZE")) return false; /* forked chips: the shm backend */
  return (sw && atoi(sw) == 0) || dist_several_hosts();
}

/* ... and do they go whole, as one message, on one host: the job's btl
 * selection leaves out Open MPI's shared-memory transport (no pieces;
 * one-way records of at most a 4 KiB block)? */
static inline bool dist_records_whole(void) {
  const char *btl = getenv("OMPI_MCA_btl");
  return dist_records_path() && !dist_several_hosts() && btl && btl[0] != '^' &&
         !strstr(btl, "vader") && !strstr(btl, "sm");
}

#endif
