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
 * task's, so a zeroed slot never matches. A one-way call (a small
 * broadcast) waits for its root only, and the root for nobody: it checks
 * the peers' calls later, at its call coll_oneway_settled(s) = s + LAG
 * (before it publishes that one), or at the task's end. A rank writes its
 * slot of call s only once every peer has published call
 * coll_table_reuse(s) or a later one: such a peer has finished the call
 * that slot holds (s - SLOTS), and its check of it too, made before it
 * published call s - SLOTS + LAG. So a root runs up to LAG calls ahead of
 * the slowest peer. The _k forms take the slots and the lag as
 * arguments, for tests/unit/test_coll_table_explorer.c, which proves the
 * rules for small ones (and that smaller bounds fail).
 *
 * A root that reaches its bound waits for the slowest peer, so the lag
 * sets how many one-way calls a rank makes per wait, and where ranks
 * share CPUs each wait is a round of thread switches: 32 (docs/comm.md,
 * "One-way broadcasts", measures 4, 8, 16 and 32), the most a 64-bit
 * mask of pending checks (coll.c, coll_table.oneway) holds; 64 slots of
 * 4160 B hold it. */
#define COLL_TABLE_SLOTS 64
#define COLL_ONEWAY_LAG  32
_Static_assert((COLL_TABLE_SLOTS & (COLL_TABLE_SLOTS - 1)) == 0 &&
                   2 * COLL_ONEWAY_LAG <= COLL_TABLE_SLOTS && COLL_ONEWAY_LAG >= 1,
               "a power of two, and room for a root LAG calls ahead");
static inline uint64_t coll_table_gen(uint32_t epoch, int32_t s) {
  return (uint64_t)epoch << 32 | (uint32_t)s;
}
static inline int coll_table_slot_k(int32_t s, int slots) {
  return (int)((uint32_t)s % (uint32_t)slots);
}
static inline int coll_table_slot(int32_t s) { return coll_table_slot_k(s, COLL_TABLE_SLOTS); }
static inline int32_t coll_table_reuse_k(int32_t s, int slots, int lag) { return s - slots + lag; }
static inline int32_t coll_table_reuse(int32_t s) {
  return coll_table_reuse_k(s, COLL_TABLE_SLOTS, COLL_ONEWAY_LAG);
}
static inline int32_t coll_oneway_settled_k(int32_t s, int lag) { return s - lag; }
static inline int32_t coll_oneway_settled(int32_t s) {
  return coll_oneway_settled_k(s, COLL_ONEWAY_LAG);
}
/* The most a call publishes with its descriptor (each rank's whole src;
 * the broadcast's root only): larger calls move their data by put. 4 KiB:
 * up to it the table beat the mesh 3-6x on 2 ranks at 512 B-4 KiB
 * (docs/comm.md). */
#define COLL_TABLE_DATA 4096

#endif
