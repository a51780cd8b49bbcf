/* coll_proto.h — the signal targets of a collective's call protocol
 * (coll.c), shared with the exhaustive explorer of its cell reuse
 * (tests/unit/test_coll_explorer.c). Call s (1-based, counted per node task
 * by the rank's SEQ cell) over n ranks:
 *   - before writing into any peer: DONE >= coll_done_target(s, n) (every
 *     peer acknowledged call s-1);
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
/* Slots per table: a broadcast's root may run this many calls ahead of
 * its slowest peer (8: on 4 ranks over 2 CPUs, a rank descheduled for a
 * while lets the root go on for 7 calls; 2 gave it one, and the broadcast
 * stayed 20x Open MPI's, docs/comm.md). */
#define COLL_TABLE_SLOTS 8
static inline int coll_table_slot(int32_t s) { return (int)((uint32_t)s % COLL_TABLE_SLOTS); }

/* The steps of a call s through the table, on rank `me` of n (coll.c runs
 * them; test_coll_table_explorer models them). Each rank publishes `seen`:
 * it finished its calls up to seen and compared every peer's descriptor
 * of each.
 *   1. gate: wait until coll_table_may_write, comparing meanwhile every
 *      call after my seen that every peer has published (so my seen moves
 *      on while I wait: a peer may wait for it). The slot of call s held
 *      call s - SLOTS, which every rank has then finished reading and
 *      compared;
 *   2. write my descriptor (and data) into my slot of s, release-store its
 *      generation;
 *   3. wait for the peers coll_table_waits names, compare their
 *      descriptors with mine, then use their data. Every peer, except in a
 *      broadcast whose data goes with the table: its root uses nobody's
 *      data and waits for nobody, a non-root waits for the root alone (a
 *      mismatch touching its data differs from the root's descriptor);
 *   4. finish: seen = s when I compared every call up to s, else compare
 *      what has come, without waiting;
 *   5. at the end of the node task (coll_settle): compare, waiting, up to
 *      the last call. So every rank compares every peer's descriptor of
 *      every call (in the call, at a later call, or at the task's end), and
 *      each names a mismatch. */
static inline bool coll_table_waits(bool one_way, int root, int me, int p) {
  return p != me && (!one_way || (me != root && p == root));
}
/* May call s write its slot of a table of `slots`, when the least seen of
 * every rank (mine too) is least_seen? */
static inline bool coll_table_may_write(int32_t s, int32_t least_seen, int slots) {
  return s - slots <= least_seen;
}
/* Do I still owe the comparison of call `call`'s descriptors, having
 * compared every call up to `seen` (both of this task)? */
static inline bool coll_table_owes(int32_t seen, int32_t call) { return call >= 1 && seen < call; }

/* The most a call publishes with its descriptor (each rank's whole src;
 * the broadcast's root only): larger calls move their data by put. 4 KiB:
 * up to it the table beat the mesh 3-6x on 2 ranks at 512 B-4 KiB
 * (docs/comm.md), and the scratch grows by 8.3 KiB only. */
#define COLL_TABLE_DATA 4096

#endif
