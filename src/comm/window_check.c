/* window_check.c — checking mode on a node: where a remote store or signal
 * may land, and what a remote load may read.
 *
 * A node task declares the window bytes its kernels may store into on a
 * peer the way it declares any write: it passes that peer's view of the
 * window buffer (pto_node_window_tensor) as OUTPUT_EXISTING, INOUT, NO_DEP
 * or COMMUTE. Those views are the task's window targets. In checking mode
 * the node hands its task's arguments to each chip (pto_comm.check_args),
 * and every remote store and atomic add is held against them before it
 * writes anything: a byte outside fails the op (and the task) with
 * PTO_ECONTRACT naming the byte. A signal (pto_notify) writes its cell's
 * 8 bytes on the peer, so the cell must lie in a window target too. A
 * remote load or get reads only bytes
 * of the peer's window that one of the task's views names, of any access
 * (INPUT included: a declared read). Views are compared by the bytes they
 * touch (common/region.h), at the addresses every process of the node maps
 * the windows at (desc.base + rank * win_bytes). */
#include "comm/window_check.h"

#include <inttypes.h>
#include <stdio.h>

#include "chip/contract.h"
#include "common/region.h"
#include "common/tensor_walk.h"

static bool is_target(int access) { return access != PTO_INPUT && access != PTO_OUTPUT; }
/* OUTPUT is not passed at node level; any other view may be read. */
static bool is_source(int access) { return access != PTO_OUTPUT; }

typedef struct walk {
  region_view tv[PTO_MAX_TENSOR_ARGS]; /* the window targets, normalised once */
  int nt;
  uint64_t at;                /* address of the peer's window (offset 0) */
  uint64_t woff;              /* window offset of the remote view's buf */
  const unsigned char *local; /* NULL for a load: nothing to report */
  size_t es;
  uint64_t bad;      /* out: window offset of the first byte outside */
  unsigned char now; /* out: the byte the op would store there */
} walk;

/* Every byte of [addr, addr + len) lies in one window target. */
static bool covered(const walk *w, uint64_t addr, uint64_t len) {
  pto_tensor t;
  int64_t n = (int64_t)len;
  if (pto_tensor_init(&t, (void *)(uintptr_t)addr, (size_t)len, PTO_U8, 1, &n)) return false;
  region_view r;
  region_view_init(&t, &r);
  for (int i = 0; i < w->nt; i++)
    if (region_view_covers(&w->tv[i], &r)) return true;
  return false;
}

/* One contiguous run: covered whole (the common case), else byte by byte
 * (targets may tile it together). Returns 1 at the first byte outside. */
static int check_run(void *arg, int64_t remote, int64_t local, int64_t n) {
  walk *w = arg;
  uint64_t off = w->woff + (uint64_t)remote * w->es, len = (uint64_t)n * w->es;
  if (covered(w, w->at + off, len)) return 0;
  for (uint64_t i = 0; i < len; i++)
    if (!covered(w, w->at + off + i, 1)) {
      w->bad = off + i;
      w->now = w->local ? w->local[(uint64_t)local * w->es + i] : 0;
      return 1;
    }
  return 0;
}

/* Whether every byte of `remote` on rank `peer` lies in a view of the node
 * task that pick() takes; w's bad and now say where not (now: from
 * `values`, the bytes the op would write, laid out as `local`; NULL when
 * it writes none of its own). */
static bool within(const pto_args *decl, bool (*pick)(int), const comm_dom *d, int peer,
                   const pto_tensor *remote, const pto_tensor *local, uint64_t woff,
                   const unsigned char *values, walk *w) {
  *w = (walk){.nt = 0,
              .at = d->desc.base + (uint64_t)peer * d->desc.win_bytes,
              .woff = woff,
              .local = values,
              .es = pto_dtype_size((pto_dtype)remote->dtype)};
  for (int a = 0; a < decl->ntensors; a++)
    if (pick(decl->access[a])) region_view_init(&decl->tensors[a], &w->tv[w->nt++]);
  return !tensor_lockstep(remote, local, check_run, w);
}

int window_check_load(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer, const char *op,
                      const pto_tensor *remote, const pto_tensor *local, uint64_t woff,
                      const comm_buffer_desc *b) {
  const pto_args *decl = c->check_args;
  walk w;
  if (!decl || within(decl, is_source, d, peer, remote, local, woff, NULL, &w)) return 0;
  unsigned char there = 0;
  d->be->get(d->win, peer, w.bad, &there, 1); /* for the report only: 0 if it cannot */
  return comm_fail(c, PTO_ECONTRACT,
                   "task %" PRId64 " (kernel '%s') block %d/%d: %s from rank %d of domain %d: "
                   "buffer '%s' byte %" PRIu64 " (0x%02x) is outside every view of the node "
                   "task: reads memory it did not declare (pass rank %d's view of '%s' as INPUT "
                   "or INOUT)",
                   ctx->task_id, contract_kernel_name(ctx), ctx->block_idx, ctx->block_num, op,
                   peer, d->desc.id, b->name, w.bad - b->offset, there, peer, b->name);
}

int window_check_store(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer,
                       const char *op, const pto_tensor *remote, const pto_tensor *local,
                       uint64_t woff, const comm_buffer_desc *b, bool add) {
  const pto_args *decl = c->check_args;
  walk w;
  if (!decl ||
      within(decl, is_target, d, peer, remote, local, woff, (const unsigned char *)local->buf, &w))
    return 0;
  unsigned char old = 0;
  d->be->get(d->win, peer, w.bad, &old, 1); /* for the report only: 0 if it cannot */
  char now[48];
  if (add)
    snprintf(now, sizeof now, "an atomic add");
  else
    snprintf(now, sizeof now, "0x%02x", w.now);
  return comm_fail(c, PTO_ECONTRACT,
                   "task %" PRId64 " (kernel '%s') block %d/%d: %s to rank %d of domain %d: "
                   "buffer '%s' byte %" PRIu64 " is outside the node task's window targets "
                   "(0x%02x, would be %s): pass rank %d's view of '%s' as OUTPUT_EXISTING, "
                   "INOUT or NO_DEP",
                   ctx->task_id, contract_kernel_name(ctx), ctx->block_idx, ctx->block_num, op,
                   peer, d->desc.id, b->name, w.bad - b->offset, old, now, peer, b->name);
}

int window_check_signal(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer,
                        const char *op, uint64_t off, const comm_buffer_desc *b, pto_signal_op sop,
                        int32_t v) {
  const pto_args *decl = c->check_args;
  if (!decl) return 0;
  /* the cell as a one-element view at window offset off: its 8 bytes are
   * what the signal writes (the epoch-tagged word, comm/signal.h) */
  int64_t one = 1;
  uint64_t word = 0;
  pto_tensor cell;
  walk w;
  if (pto_tensor_init(&cell, &word, sizeof word, PTO_I64, 1, &one) == 0 &&
      within(decl, is_target, d, peer, &cell, &cell, off, NULL, &w))
    return 0;
  char what[48];
  if (sop == PTO_SIGNAL_ADD)
    snprintf(what, sizeof what, "an add of %" PRId32, v);
  else
    snprintf(what, sizeof what, "a set to %" PRId32, v);
  return comm_fail(c, PTO_ECONTRACT,
                   "task %" PRId64 " (kernel '%s') block %d/%d: %s to rank %d of domain %d: "
                   "signal cell '%s'[%" PRIu64 "] (byte %" PRIu64 ") is outside the node "
                   "task's window targets (%s): pass rank %d's view of '%s' as OUTPUT_EXISTING, "
                   "INOUT or NO_DEP",
                   ctx->task_id, contract_kernel_name(ctx), ctx->block_idx, ctx->block_num, op,
                   peer, d->desc.id, b->name, (off - b->offset) / 8, off - b->offset, what, peer,
                   b->name);
}
