/* mpi_relay.h — the relays that carry the node's mailbox protocol over MPI
 * (under mpirun; node_mpi.c starts them, mpi_relay.c runs them). Messages,
 * on pto's private duplicate of MPI_COMM_WORLD:
 *   rank 0 -> rank c: BEGIN (a node's configuration: rank c starts chip c),
 *     FRAME (a mailbox frame; its chip function as a fnref), DATA (after a
 *     task frame for a chip on another host: its host tensors), FINAL (rank
 *     0's program ends), CANCEL (the parent's cancel word of rank c's slot:
 *     node_task.c cancel_parts);
 *   rank c -> rank 0: STATE (ready or failed, with its pid, start time, host
 *     and why), TAKEN, DATA (the host-tensor elements a task changed, before
 *     its reply), REPLY, BEAT (its heartbeat counter), ENDED (it left the
 *     node, with its exit status; also sent by a rank that calls exit()
 *     while it serves a node, from its exit path), CANCELLED (a CANCEL of
 *     the task it runs is in its mailbox: rank 0 wakes its waits parked on
 *     shared windows, node_mpi_wake). */
#ifndef PTO_NODE_MPI_RELAY_H
#define PTO_NODE_MPI_RELAY_H

#ifdef PTO_HAVE_MPI

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "node/fnref.h"
#include "node/node_internal.h"

enum {
  T_BEGIN = 1,
  T_FRAME,
  T_FINAL,
  T_STATE,
  T_TAKEN,
  T_REPLY,
  T_BEAT,
  T_ENDED,
  T_DATA,
  T_CANCEL,
  T_CANCELLED
};

typedef struct wire_frame {
  node_frame f; /* f.chip_fn travels as chip_fn below */
  fnref chip_fn;
} wire_frame;

typedef struct wire_state {
  int32_t state, pid;
  uint64_t start; /* the process's start time (proc_watch.h), 0 = unknown */
  char host[64];
  char why[240]; /* CHILD_FAILED: why (node_mbox.start_why) */
} wire_state;

/* A blocking send of bytes to rank (pto's messages are small, or the
 * receiver is waiting for them). */
void relay_send(MPI_Comm comm, int rank, int tag, const void *p, size_t bytes);
/* A receive of the message of `bytes` from src with tag that a probe
 * matched, when src may die before all of it is here: a message above
 * MPI's eager limit (a task frame: 5.6 KiB) goes by rendezvous, which the
 * sender's process must live to complete, and a blocking MPI_Recv then
 * waited for ever. Posted with MPI_Irecv and tested; between the tests
 * (every 20 ms) gone(arg) looks at the sender. True once the message is
 * in buf; false when gone() said the sender is gone: the receive is then
 * left to MPI with buf, which the caller must leave allocated. */
bool relay_recv(MPI_Comm comm, void *buf, int bytes, int src, int tag, bool (*gone)(void *),
                void *arg);
/* Rank c: tells rank 0 its chip's state (with this pid, host and why). */
void relay_send_state(MPI_Comm comm, child_state st, const char *host, const char *why);

/* Rank 0's process as rank c sees it: watched when it runs on rank c's
 * host (start != 0, proc_watch.h). */
typedef struct root_proc {
  int32_t pid;
  uint64_t start;
} root_proc;
/* Rank c: when rank 0's process is gone (it runs the node: nothing can go
 * on, and mpirun, keeping the job running, would leave this rank waiting
 * for ever), says so, removes the objects of the run named prefix (NULL:
 * none, between nodes) as rank 0 would have, and ends the job
 * (MPI_Abort). */
void relay_check_root(const root_proc *root, int rank, const char *prefix);

/* Rank 0: one relay thread for every chip slot of kind SLOT_RANK; NULL when
 * it cannot start, why saying why. It also watches the processes of the chip ranks on rank
 * 0's host (proc_watch.h): one that is gone is reported ended at once.
 * wake: a frame was posted; stop: joins it. */
typedef struct root_relay root_relay;
root_relay *root_relay_start(pto_node *n, MPI_Comm comm, char *why, size_t len);
void root_relay_wake(root_relay *rr);
void root_relay_stop(root_relay *rr);

/* Rank c: the relay of its chip's mailbox (slot); other_host: not on rank
 * 0's host, so host tensors travel; root: rank 0's process, watched
 * (relay_check_root) while the chip serves. stop (after the chip's service ended)
 * makes one last pass, so the exit frame's reply is out, then joins it.
 * NULL when it cannot start, why saying why. */
typedef struct rank_relay rank_relay;
rank_relay *rank_relay_start(pto_node *n, int slot, MPI_Comm comm, bool other_host,
                             const char *host, root_proc root, char *why, size_t len);
void rank_relay_stop(rank_relay *rr);

#endif
#endif
