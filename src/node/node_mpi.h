/* node_mpi.h — a node whose chips are MPI ranks: under `mpirun -np N prog`
 * node chip c is MPI world rank c. Rank 0 runs the node orchestration and
 * hosts chip 0 and the host sub-workers as threads (it does not fork); a
 * relay thread carries the mailbox protocol of every other chip over MPI
 * messages (frames out, taken/reply/heartbeat/state back), so the parent's
 * logic (node_task.c, node_proc.c) is the same on both transports. Ranks
 * > 0 serve, inside pto_node_create, every node rank 0 creates, and exit
 * (MPI_Finalize, status 0) when rank 0's program ends.
 *
 * Without mpirun nothing here is used. In a build without MPI a program
 * run under mpirun gets PTO_EMPI saying pto was built without MPI. */
#ifndef PTO_NODE_MPI_H
#define PTO_NODE_MPI_H

#include <stdbool.h>
#include <stddef.h>

#include "pto/node.h"

typedef struct pto_node pto_node;

/* The environment says this process was started by mpirun (Open MPI's
 * OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, or PMI's PMI_RANK). */
bool node_mpi_detect(void);
/* Initialises MPI (MPI_THREAD_MULTIPLE) once. On rank 0 returns 0 when the
 * world has at least cfg->nchips ranks; ranks > 0 never return (they serve
 * rank 0's nodes, then exit). Fails with PTO_EMPI (built without MPI, no
 * MPI_THREAD_MULTIPLE, too few ranks) or PTO_EINVAL (a chip_init or
 * chip_init_arg that cannot reach the other ranks), err naming why. */
int node_mpi_enter(const pto_node_config *cfg, pto_error_info *err);
/* Rank 0: host memory (a named shared-memory object) and the window space,
 * at addresses every rank can map too. */
int node_mpi_map(pto_node *n, char *why, size_t len);
void node_mpi_unmap(pto_node *n);
/* Rank 0: starts the remote chips (a begin message to each) and the relay. */
int node_mpi_start(pto_node *n, char *why, size_t len);
/* Rank 0: a frame was posted to slot s, or a cancel written (wakes the
 * relay). */
void node_mpi_posted(pto_node *n, int s);
/* Rank 0, on the parent's thread: wakes the waits (parked on shared
 * windows) of the chip ranks whose task's cancel reached their mailbox
 * (n->cancel_arrived, set by the relay). */
void node_mpi_wake(pto_node *n);
/* Rank 0: stops the relay. When the node failed or a rank is left
 * running, ends the job (MPI_Abort: MPI cannot take one rank out). */
void node_mpi_stop(pto_node *n);

#endif
