/* pto/comm.h — communication domains, symmetric windows and the in-kernel
 * one-sided operations (remote store/load, put/get, notify/wait, barrier,
 * quiet) a kernel running on a chip of a node may call.
 *
 * A domain is a set of chips (ranks 0..size-1 of the domain) that each own
 * a window with the same layout: named buffers at the same offsets on every
 * rank. A view of a window buffer names a region by its offset inside the
 * window, so a kernel expresses a peer's region with a view of its own
 * window (windows are symmetric); a view of any rank's copy of the buffer
 * names the same offsets. A local tile (the src of a store or put, the dst
 * of a load or get, a staging tile, a collective's src and dst) is read or
 * written in this process, so it must be this rank's own memory: one that
 * lies in a peer's copy of a window fails with PTO_EINVAL naming the copy.
 * A transfer to my own rank whose local tile overlaps the region moves as
 * if the whole source were read first; a staging tile must share no byte
 * with the transfer's views (PTO_EINVAL).
 *
 * Ordering contract (the only one there is):
 *   - remote stores and atomic adds of a caller to a peer may land late and
 *     in any order, until the caller's next notify to that peer, quiet,
 *     barrier, remote load from that peer, or the end of the node task;
 *   - pto_notify() orders every earlier store of the caller (its chip) to
 *     that peer before the signal (release); pto_signal_wait() acquires:
 *     once it returns, every store the notifier made before notifying is
 *     visible;
 *   - a store or add wakes no wait of the peer by itself: a wait on a word
 *     that a store wrote, rather than a notify, ends once the store lands
 *     (the writer's notify to that peer, quiet, barrier or task end).
 * Signal cells are int64 elements of a window buffer carrying (epoch,
 * value); the epoch numbers the node tasks of a run in the order they
 * start, so a value left by an earlier task or run reads as 0. A run
 * numbers 4294967295 tasks: the signals, waits, reads, barriers and
 * collectives of a task started after those fail with PTO_EINVAL — see
 * docs/comm.md.
 *
 * Every operation returns 0 or a negative PTO_E* code and writes nothing
 * when its arguments are wrong; a kernel should return that code. The
 * details of the first failure (domain, rank, cell, expected and seen
 * value...) are reported with the node task's error. */
#ifndef PTO_COMM_H
#define PTO_COMM_H

#include "pto/export.h"
#include <stdbool.h>
#include <stdint.h>

#include "pto/kernel.h"
#include "pto/status.h"
#include "pto/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A domain id, valid in every process of the node's run. Pass it to
 * kernels as a scalar argument. */
typedef int32_t pto_domain;
#define PTO_DOMAIN_NONE ((pto_domain)-1)

#define PTO_COMM_MAX_RANKS   64 /* ranks per domain */
#define PTO_COMM_MAX_BUFFERS 16 /* named buffers per window */
#define PTO_COMM_NAME_MAX    32 /* buffer name length, NUL included */
#define PTO_COMM_ALIGN       64 /* buffer alignment inside a window (>= 32) */

/* The per-chip communication context; a kernel finds it in pto_kctx.env
 * on chips of a node. */
typedef struct pto_comm pto_comm;

typedef struct pto_window_buffer {
  const char *name;
  size_t bytes;
} pto_window_buffer;

typedef enum pto_signal_op { PTO_SIGNAL_ADD = 0, PTO_SIGNAL_SET = 1 } pto_signal_op;
typedef enum pto_cmp { PTO_CMP_EQ = 0, PTO_CMP_GE = 1 } pto_cmp;

/* ---- context queries ---- */
/* The kernel's communication context (NULL for a NULL ctx). */
static inline pto_comm *pto_kctx_comm(const pto_kctx *ctx) {
  return ctx ? (pto_comm *)ctx->env : NULL;
}
/* This chip's rank in the node, or -1. */
PTO_API int pto_comm_chip(const pto_comm *c);
/* My rank in the domain (>= 0), or PTO_EPEER when this chip is not a member. */
PTO_API int pto_comm_rank(const pto_comm *c, pto_domain dom);
/* Number of ranks, or PTO_EINVAL for an unknown domain. */
PTO_API int pto_comm_size(const pto_comm *c, pto_domain dom);
/* A contiguous row-major view of rank `rank`'s copy of buffer `name`
 * (the view must fit the buffer). Valid in every process that mapped the
 * domain: the members and the node's orchestrator. */
PTO_API int pto_comm_window_tensor(const pto_comm *c, pto_domain dom, int rank, const char *name,
                                   pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out);

/* ---- in-kernel operations ---- */

/* Writes the local tile `src` into the region `dst` of peer's window.
 * dst and src have the same dtype and element count (row-major order). */
PTO_API int pto_remote_store(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                             const pto_tensor *src);
/* Atomic element-wise dst += src on the peer (f32, f16, bf16, i32, i16,
 * i8); a mistyped or unaligned destination fails with PTO_EALIGN. */
PTO_API int pto_remote_store_add(const pto_kctx *ctx, pto_domain dom, int peer,
                                 const pto_tensor *dst, const pto_tensor *src);
/* Reads the region `src` of peer's window into the local tile `dst`. */
PTO_API int pto_remote_load(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                            const pto_tensor *src);

/* Bulk transfer options: the last two dims are cut into chunk_rows x
 * chunk_cols chunks (0 = whole dim); each chunk goes through `staging` (a
 * local tile of at least one chunk of the same dtype; NULL = direct).
 * With room for two chunks in staging, chunks alternate halves so that
 * filling one overlaps the transfer of the other. */
typedef struct pto_xfer_opts {
  int64_t chunk_rows;
  int64_t chunk_cols;
  const pto_tensor *staging;
  bool atomic_add; /* put only: accumulate instead of store */
} pto_xfer_opts;

/* put: local src (any local tensor, e.g. my window) -> peer's dst region. */
PTO_API int pto_put(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                    const pto_tensor *src, const pto_xfer_opts *opts);
/* get: peer's src region -> local dst. */
PTO_API int pto_get(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                    const pto_tensor *src, const pto_xfer_opts *opts);

/* Signals peer's cell (element [0..] of `cell`, an int64 window view):
 * add `v` or set it to `v`. Releases every earlier store of this chip to
 * that peer first. */
PTO_API int pto_notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
                       pto_signal_op op, int32_t v);
/* Waits until my own cell == v or >= v (acquire). timeout_ms < 0: the
 * domain's default. Fails with PTO_EWAIT_TIMEOUT naming domain, rank,
 * cell, expected and seen value. */
PTO_API int pto_signal_wait(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell,
                            pto_cmp cmp, int32_t v, int64_t timeout_ms);
/* Current value of my own cell in this task (acquire). */
PTO_API int pto_signal_read(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell,
                            int32_t *v);
/* Completes every earlier store of this chip to every peer of the domain. */
PTO_API int pto_quiet(const pto_kctx *ctx, pto_domain dom);
/* Quiet, then waits until every rank of the domain reached the same
 * barrier of this node task. One block per rank should call it. */
PTO_API int pto_barrier(const pto_kctx *ctx, pto_domain dom);

#ifdef __cplusplus
}
#endif
#endif
