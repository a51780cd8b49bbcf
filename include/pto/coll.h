/* pto/coll.h — collectives over a domain, called from a kernel on every
 * rank of the domain (one block per rank, one collective at a time per
 * scratch buffer): allreduce (mesh or ring), allgather, reduce-scatter,
 * broadcast from any root, all-to-all.
 *
 * They are built only on the in-kernel operations of pto/comm.h (put,
 * notify, signal wait), so they run on every communication backend.
 *
 * Each call takes `scratch`: a contiguous view of this rank's own copy of
 * a window buffer of the domain (the same buffer and view on every rank;
 * a view of a peer's copy fails with PTO_EINVAL on every rank) of at least
 * pto_coll_scratch_bytes(nranks, block_bytes) bytes, where block_bytes is
 * the largest per-rank block of the calls that use it (allreduce,
 * allgather, broadcast: the whole src; reduce-scatter: dst; all-to-all: one
 * of the nranks blocks). Its first bytes hold the collective's signal
 * cells: every call on it gets the next sequence number of the node task
 * (cells are epoch-tagged, so a new node task or run starts again at 1 with
 * no reset), and a rank does not write a peer's scratch before that peer
 * acknowledged the previous call. Back-to-back calls on one scratch buffer
 * are therefore safe by construction.
 *
 * Every rank publishes a descriptor of its call (collective, sequence,
 * count, dtype, op, root, algorithm) before any data is used; a rank whose
 * peers called with other arguments fails with PTO_EINVAL on every rank,
 * naming each rank's call — never a wrong result (a small broadcast's
 * root: see pto_broadcast). A rank that does not
 * call makes its peers fail with PTO_EWAIT_TIMEOUT after the domain's wait
 * timeout. src and dst are contiguous local tensors (a kernel's tile, a
 * task tensor, or a window buffer other than scratch) of the same dtype.
 * Reductions: f32, f64, f16, bf16 (computed in f32, rounded per step),
 * i32 (wrapping); mesh reduces in rank order 0..n-1, so every rank gets the
 * same bits. Moving collectives take any dtype.
 *
 * On the MPI backend, PTO_COLL_AUTO (and PTO_COLL_MPI) run MPI's own
 * nonblocking collectives on a communicator of the domain's ranks (an
 * allreduce between 2 ranks on two hosts, an allgather or all-to-all
 * between 2 ranks of one host: one exchange of MPI messages, as MPI's own
 * blocking calls make), after
 * the descriptors were compared over MPI too; mesh and ring stay
 * selectable. There, "one collective at a time per scratch buffer" is per
 * window buffer: two scratch views in one window buffer share its
 * communicator. With PTO_RED_REPRODUCIBLE or-ed into the op (or the
 * environment variable PTO_COLL_REPRODUCIBLE=1) a reduction is computed in
 * rank order ((x0 op x1) op x2) ... on every path, so its bits do not
 * depend on the size, the algorithm, the backend or the rank count's
 * splitting of the work (docs/comm.md, "Reproducible reductions"). */
#ifndef PTO_COLL_H
#define PTO_COLL_H

#include "pto/export.h"
#include <stddef.h>

#include "pto/chip.h"
#include "pto/comm.h"
#include "pto/node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pto_red_op {
  PTO_RED_SUM = 0,
  PTO_RED_MAX = 1,
  PTO_RED_MIN = 2,
  PTO_RED_PROD = 3,
  /* or-ed into an op: reduce in rank order on every path (bit-identical
   * results for any size, algorithm, backend); every rank must ask alike */
  PTO_RED_REPRODUCIBLE = 0x100,
} pto_red_op;

typedef enum pto_coll_algo {
  PTO_COLL_AUTO = 0, /* mesh while nranks x block bytes stay within
                        PTO_COLL_MESH_MAX_BYTES, ring beyond; on the MPI
                        backend's RMA windows (several hosts) MPI's
                        collectives instead */
  PTO_COLL_MESH = 1, /* every rank's block reaches every peer in one step
                        (pulled from its window where the windows are
                        direct, docs/comm.md) */
  PTO_COLL_RING = 2, /* reduce-scatter then allgather around the ring: 2(n-1) steps */
  PTO_COLL_MPI = 3,  /* the backend's own collectives (MPI's); as AUTO where it has none */
} pto_coll_algo;

/* PTO_COLL_AUTO's allreduce takes the mesh while nranks x its block bytes
 * stay within this, the ring beyond: the mesh reduces every rank's whole
 * block on every rank, the ring 2 (n - 1) / n blocks on each, in 2 (n - 1)
 * steps (bench C2, docs/comm.md: the mesh won up to 256 KiB blocks on 2
 * ranks and 128 KiB on 4). */
#define PTO_COLL_MESH_MAX_BYTES (512u << 10)

/* Scratch bytes a collective over nranks needs for blocks of up to
 * block_bytes (0 when nranks is outside 1..PTO_COMM_MAX_RANKS or the size
 * overflows). */
PTO_API size_t pto_coll_scratch_bytes(int nranks, size_t block_bytes);

/* dst = op over every rank's src (same count on every rank). */
PTO_API int pto_allreduce(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                          const pto_tensor *dst, const pto_tensor *src, pto_red_op op,
                          pto_coll_algo algo);
/* dst (nranks x count) = [src of rank 0, ..., src of rank n-1]. */
PTO_API int pto_allgather(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                          const pto_tensor *dst, const pto_tensor *src);
/* src holds nranks blocks of dst's count: dst on rank r = op over every
 * rank's block r. */
PTO_API int pto_reduce_scatter(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                               const pto_tensor *dst, const pto_tensor *src, pto_red_op op);
/* dst on every rank = src of `root` (src is read on the root only and may
 * be NULL elsewhere). A broadcast of up to 4 KiB is one-way, as MPI_Bcast
 * with eager sends: the root returns once its data is published (the shm
 * backend, the MPI backend's shared windows) or sent (MPI's records: RMA
 * windows, several hosts), up to a few calls ahead of the other ranks,
 * each of which checks the root's call against its own; the calls the
 * root cannot compare at once are checked at a later call on the scratch
 * (32 calls on with a call table, 17-32 through MPI's records) or at the
 * node task's end. So a rank that also took itself for the root fails the
 * root's task (PTO_EINVAL, naming both calls) rather than the root's call
 * (docs/comm.md, "One-way broadcasts"). */
PTO_API int pto_broadcast(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                          const pto_tensor *dst, const pto_tensor *src, int root);
/* src and dst hold nranks blocks: dst block s on rank r = src block r of
 * rank s. */
PTO_API int pto_alltoall(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                         const pto_tensor *dst, const pto_tensor *src);

/* ---- node-level calls on host tensors ----
 * From a node orchestration function: one group task over the chips of
 * `dom`, each running the collective on its rank's tensors: dst[r] and
 * src[r] (arrays of nranks tensors in node host memory, shaped as for the
 * kernel calls above; dst[r] may equal or overlap src[r]). `scratch`
 * names a window buffer of the domain sized with pto_coll_scratch_bytes.
 * Each chip
 * process must have called pto_coll_register(chip) in the node's
 * chip_init (a chip that did not fails the task saying so). At most
 * PTO_MAX_TENSOR_ARGS / 3 ranks (3 tensors per rank in one group task).
 * Returns PTO_EINVAL for an unknown domain or buffer, a NULL array, a root
 * outside the domain or too many ranks; errors of the collective itself
 * (mismatched shapes, ...) fail the task, with details, like the kernel
 * calls. Ordered after earlier writers of src and before later readers of
 * every byte of dst by node-level dependency inference. */
PTO_API int pto_coll_register(pto_chip *chip);
PTO_API int pto_node_allreduce(pto_node_orch *no, pto_domain dom, const char *scratch,
                               const pto_tensor *dst, const pto_tensor *src, pto_red_op op,
                               pto_coll_algo algo);
PTO_API int pto_node_allgather(pto_node_orch *no, pto_domain dom, const char *scratch,
                               const pto_tensor *dst, const pto_tensor *src);
PTO_API int pto_node_reduce_scatter(pto_node_orch *no, pto_domain dom, const char *scratch,
                                    const pto_tensor *dst, const pto_tensor *src, pto_red_op op);
/* src[r] is read on the root only (other entries are ignored). */
PTO_API int pto_node_broadcast(pto_node_orch *no, pto_domain dom, const char *scratch,
                               const pto_tensor *dst, const pto_tensor *src, int root);
PTO_API int pto_node_alltoall(pto_node_orch *no, pto_domain dom, const char *scratch,
                              const pto_tensor *dst, const pto_tensor *src);

#ifdef __cplusplus
}
#endif
#endif
