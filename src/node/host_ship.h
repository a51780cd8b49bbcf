/* host_ship.h — node host tensors carried with a task to a chip on another
 * host (under mpirun, node_mpi.c). Such a chip does not share node host
 * memory: it has a private copy at the same addresses. Before the task,
 * rank 0 packs every tensor argument that lies in host memory and the chip
 * unpacks them into its copy; after the task, the chip sends back only the
 * elements that changed (runs of elements per tensor) and rank 0 writes
 * exactly those, so elements the chip did not write — which another chip
 * of the same group task may be writing on rank 0's host meanwhile — are
 * never overwritten with stale values. Pure: no MPI, no state. */
#ifndef PTO_NODE_HOST_SHIP_H
#define PTO_NODE_HOST_SHIP_H

#include <stddef.h>
#include <stdint.h>

#include "pto/orch.h"

/* Bytes of the packed host tensors of a (0: none lies in [host, host + bytes)). */
size_t ship_bytes(const pto_args *a, uintptr_t host, size_t bytes);
/* Packs them (element order of each view, tensor after tensor) into out. */
void ship_pack(const pto_args *a, uintptr_t host, size_t bytes, unsigned char *out);
/* Writes packed values into the views. */
void ship_unpack(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *in);
/* The elements that differ from `before` (packed as by ship_pack), as runs;
 * *out is malloc'd (NULL when none differ); returns its size, or SIZE_MAX
 * when out of memory. */
size_t ship_diff(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *before,
                 unsigned char **out);
/* Writes the runs of a diff into the views; PTO_EINVAL for a malformed one. */
int ship_apply(const pto_args *a, uintptr_t host, size_t bytes, const unsigned char *diff,
               size_t n);

#endif
