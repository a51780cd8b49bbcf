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
static inline int coll_table_slot(int32_t s) { return s & 1; }

/* The steps of a call s through the table, on rank `me` of n (coll.c runs
 * them; test_coll_table_explorer models them):
 *   1. prior: unless I compared every peer's descriptor of call s - 1
 *      already (coll_table_owes), wait until each peer's slot of s - 1
 *      holds it and compare it with mine. A peer publishes s - 1 only after
 *      it finished reading my call s - 2, whose slot call s reuses; and it
 *      writes its slot of s - 1 again (call s + 1) only after it saw my
 *      call s, which I publish after this check;
 *   2. write my descriptor (and data) into my slot of s, release-store its
 *      generation;
 *   3. wait for the peers coll_table_waits names, compare their
 *      descriptors with mine, then use their data. Every peer (so
 *      afterwards I owe nothing), except in a broadcast whose data goes
 *      with the table: its root uses nobody's data and waits for nobody,
 *      a non-root waits for the root alone (a mismatch touching its data
 *      differs from the root's descriptor);
 *   4. at the end of the node task (coll_settle): step 1 for the last call
 *      when I still owe it. So every rank compares every peer's descriptor
 *      of every call: in the call, at its next call on the scratch, or at
 *      the task's end, and each names a mismatch. */
static inline bool coll_table_waits(bool one_way, int root, int me, int p) {
  return p != me && (!one_way || (me != root && p == root));
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
