/* fault.h — ordering fault injection for the shm backend (a debug option
 * of a domain, seeded, deterministic). Remote stores and atomic adds are
 * held back in a queue and land only when pto's contract forces them: at
 * the caller's next notify/get to that peer, quiet, barrier, or the end of
 * the node task — and each batch lands in a seeded order in which a later
 * store becomes visible before an earlier one. At the end of a task, the
 * backend may pause between landings (gap callback), so a reader that
 * trusts a plain store as a flag observes the stale data deterministically.
 * A program that publishes only through pto_notify() cannot tell. */
#ifndef PTO_COMM_FAULT_H
#define PTO_COMM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pto/tensor.h"

typedef enum fault_kind { FAULT_PUT = 0, FAULT_ACC = 1 } fault_kind;

typedef struct fault_op {
  int peer;
  fault_kind kind;
  pto_dtype dt; /* FAULT_ACC */
  uint64_t off; /* window offset */
  size_t bytes;
  uint64_t seq; /* issue order */
  unsigned char *data;
} fault_op;

/* Lands one held-back operation for real. */
typedef void (*fault_land_fn)(void *arg, const fault_op *op);
/* Between two landings of an end-of-task batch in which order was inverted. */
typedef void (*fault_gap_fn)(void *arg, const fault_op *landed);

typedef struct fault_queue fault_queue;

int fault_create(uint64_t seed, fault_land_fn land, fault_gap_fn gap, void *arg, fault_queue **out);
void fault_destroy(fault_queue *q);
/* The queue of domain `dom` in a controlled node run: each batch's order
 * is recorded or replayed (delivery.h). */
void fault_set_controlled(fault_queue *q, int dom);
/* Holds a copy of `bytes` bytes of src. */
int fault_hold(fault_queue *q, int peer, fault_kind kind, pto_dtype dt, uint64_t off,
               const void *src, size_t bytes);
/* Lands every held operation to peer (peer < 0: to every peer). */
void fault_flush(fault_queue *q, int peer, bool end_of_task);
/* Number of held operations (tests). */
size_t fault_pending(fault_queue *q);

#endif
