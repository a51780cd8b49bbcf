/* mpi_relay.h — private to the MPI backend (mpi_coll.c): the relay thread
 * that, with PTO_MPI_COLL_RELAY=1, makes every MPI call of the collectives
 * in place of the kernel threads (mpi_relay.c). */
#ifndef PTO_COMM_MPI_RELAY_H
#define PTO_COMM_MPI_RELAY_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/comm_backend.h"

/* One call's MPI work: issue(arg, req, &nreq) issues requests (the MPI
 * error, or MPI_SUCCESS), then they are tested to completion. Run by the
 * relay thread: arg must stay valid until the job is done or abandoned,
 * and issue runs only before either. */
typedef struct mpi_job {
  int (*issue)(void *arg, MPI_Request *req, int *nreq);
  void *arg;
  MPI_Request req[2 * PTO_COMM_MAX_RANKS];
  int nreq;
  int err; /* of issue, or of the test */
  _Atomic int state;
  struct mpi_job *next;
} mpi_job;

bool mpi_relay_on(void);

/* Posts j to the relay thread and waits (pto_wait: spin, yield, park) until
 * it completed (true; j->err says how), the deadline passed or cancel said
 * so (false, *cancelled set for the latter). On false the job stays with
 * the relay, which tests it to the end and frees it: j must be malloc'ed
 * and is no longer the caller's. Fails with an MPI error in j->err when the
 * relay thread cannot be started. */
bool mpi_relay_run(mpi_job *j, uint64_t deadline_ns, comm_cancel_fn cancel, void *cancel_arg,
                   bool *cancelled);

#endif
