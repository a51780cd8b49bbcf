/* coll_proto.h — the signal targets of a collective's call protocol
 * (coll.c), shared with the exhaustive explorer of its cell reuse
 * (tests/unit/test_coll_explorer.c). Call s (1-based, counted per node task
 * by the rank's SEQ cell) over n ranks:
 *   - before writing into any peer's scratch, or into my own mesh slot
 *     for the peers to read (a pulled block): DONE >=
 *     coll_done_target(s, n) (every peer acknowledged call s-1);
 *   - before reading what peers wrote: ARRIVE >= coll_arrive_target(s, n);
 *   - ring step k: the previous rank sets my RING cell to
 *     coll_ring_value(s, n, k), and I wait for it (>=).
 * The cells are epoch-tagged (signal.h): a new node task starts at 0. */
#ifndef PTO_COMM_COLL_PROTO_H
#define PTO_COMM_COLL_PROTO_H

#include <stdint.h>

static inline int32_t coll_done_target(int32_t s, int n) { return (s - 1) * (n - 1); }
static inline int32_t coll_arrive_target(int32_t s, int n) { return s * (n - 1); }
static inline int32_t coll_ring_value(int32_t s, int n, int k) {
  return (s - 1) * 2 * (n - 1) + k + 1;
}

/* The call table (coll.c, backends with direct windows): call s of node
 * task `epoch` is in slot coll_table_slot(s) of the caller's table once
 * that slot's generation is coll_table_gen(epoch, s); epoch 0 is never a
 * task's, so a zeroed slot never matches. */
static inline uint64_t coll_table_gen(uint32_t epoch, int32_t s) {
  return (uint64_t)epoch << 32 | (uint32_t)s;
}
static inline int coll_table_slot(int32_t s) { return s & 1; }
/* The most a call publishes with its descriptor (each rank's whole src;
 * the broadcast's root only): larger calls move their data by put. 4 KiB:
 * up to it the table beat the mesh 3-6x on 2 ranks at 512 B-4 KiB
 * (docs/comm.md), and the scratch grows by 8.3 KiB only. */
#define COLL_TABLE_DATA 4096

#endif
