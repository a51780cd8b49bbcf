/* coll_node.c — node-level collectives on host tensors: one group task over
 * the domain's chips, each chip running the collective kernel (registered
 * by pto_coll_register in its chip_init) on its own rank's tensors. The
 * kernel calls the in-kernel collectives of coll.c, so the node level
 * inherits their checks: mismatched or bad arguments fail the task on every
 * rank with the details. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "common/region.h"
#include "node/node_internal.h"
#include "pto/coll.h"

enum { NK_ALLREDUCE, NK_ALLGATHER, NK_REDUCE_SCATTER, NK_BROADCAST, NK_ALLTOALL };

/* Per chip process (one node chip at a time): the id pto_coll_register got,
 * for the chip of generation coll_gen (node_chip_generation: under mpirun a
 * rank serves one node's chip after another). */
static int coll_kernel_id = -1;
static uint64_t coll_gen;

static int kernel_id(void) { return coll_gen == node_chip_generation() ? coll_kernel_id : -1; }

/* tensors: scratch, src, dst; scalars: kind, dom, op, algo, root */
static int coll_kernel(const pto_kctx *ctx) {
  const pto_tensor *s = &ctx->tensors[0], *src = &ctx->tensors[1], *dst = &ctx->tensors[2];
  pto_domain dom = (pto_domain)ctx->scalars[1];
  pto_red_op op = (pto_red_op)ctx->scalars[2];
  int root = (int)ctx->scalars[4];
  switch ((int)ctx->scalars[0]) {
  case NK_ALLREDUCE:
    return pto_allreduce(ctx, dom, s, dst, src, op, (pto_coll_algo)ctx->scalars[3]);
  case NK_ALLGATHER: return pto_allgather(ctx, dom, s, dst, src);
  case NK_REDUCE_SCATTER: return pto_reduce_scatter(ctx, dom, s, dst, src, op);
  case NK_BROADCAST:
    return pto_broadcast(ctx, dom, s, dst,
                         pto_comm_rank(pto_kctx_comm(ctx), dom) == root ? src : NULL, root);
  default: return pto_alltoall(ctx, dom, s, dst, src);
  }
}

int pto_coll_register(pto_chip *chip) {
  if (!chip) return PTO_EINVAL;
  if (kernel_id() >= 0) return PTO_OK;
  coll_gen = node_chip_generation();
  return pto_kernel_register_aiv(chip, "pto_coll", coll_kernel, &coll_kernel_id);
}

/* Chip orchestration: this rank's three tensors and the scalars. */
static void coll_chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_args *na = t->args;
  int kid = kernel_id();
  if (kid < 0) {
    pto_orch_fatal(o,
                   "node-level collective on chip %d: call pto_coll_register(chip) in the "
                   "node's chip_init",
                   t->chip);
    return;
  }
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 3; i++)
    pto_args_add(&a, (pto_access)na->access[t->group_rank * 3 + i],
                 &na->tensors[t->group_rank * 3 + i]);
  for (int i = 0; i < na->nscalars; i++)
    pto_args_scalar(&a, na->scalars[i]);
  pto_submit(o, kid, &a, NULL, NULL);
}

static const char *const nk_name[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                      "alltoall"};

static int node_coll(pto_node_orch *no, pto_domain dom, const char *scratch, const pto_tensor *dst,
                     const pto_tensor *src, int kind, pto_red_op op, pto_coll_algo algo, int root) {
  if (!no || !no->node || node_orch_foreign(no, nk_name[kind])) return PTO_EINVAL;
  /* a refused call fails the run, naming why (docs/node.md: an
   * orchestration-side error fails the run), as a bad submit does */
  pto_node *nd = no->node;
  char call[24];
  snprintf(call, sizeof call, "node %s", nk_name[kind]);
  if (!scratch) return node_refuse(nd, PTO_EINVAL, call, "the scratch buffer's name is NULL");
  if (!dst) return node_refuse(nd, PTO_EINVAL, call, "dst (one tensor per rank) is NULL");
  comm_dom *d = comm_find(&nd->observer, dom);
  if (!d)
    return node_refuse(nd, PTO_EINVAL, call, "no domain %d (pto_node_domain_create makes one)",
                       (int)dom);
  int n = d->desc.nranks, b = -1;
  for (int i = 0; i < d->desc.nbuffers; i++)
    if (!strcmp(d->desc.buffers[i].name, scratch)) b = i;
  if (b < 0)
    return node_refuse(nd, PTO_EINVAL, call, "domain %d has no window buffer named '%s'", (int)dom,
                       scratch);
  if (3 * n > PTO_MAX_TENSOR_ARGS)
    return node_refuse(nd, PTO_EINVAL, call,
                       "domain %d has %d ranks, at most %d here (3 tensors per rank in one group "
                       "task)",
                       (int)dom, n, PTO_MAX_TENSOR_ARGS / 3);
  if (kind == NK_BROADCAST && (root < 0 || root >= n))
    return node_refuse(nd, PTO_EINVAL, call, "root %d is outside domain %d's ranks 0..%d", root,
                       (int)dom, n - 1);
  if (!src) return node_refuse(nd, PTO_EINVAL, call, "src (one tensor per rank) is NULL");
  /* each rank's tensors named as the call's (the group task's refusal
   * would name its flattened argument, "tensor 5") */
  for (int r = 0; r < n; r++) {
    char why[256];
    const char *bad = node_view_problem(nd, &dst[r], why, sizeof why);
    const char *w = "dst";
    if (!bad && !(kind == NK_BROADCAST && r != root)) { /* src is read on the root only */
      bad = node_view_problem(nd, &src[r], why, sizeof why);
      w = "src";
    }
    if (bad)
      return node_refuse(nd, PTO_EINVAL, call, "%s[%d] (rank %d, chip %d): %s", w, r, r,
                         d->desc.chips[r], bad);
  }
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < n; r++) {
    int64_t bytes = (int64_t)d->desc.buffers[b].bytes;
    pto_tensor s;
    int rc = pto_node_window_tensor(no, dom, r, scratch, PTO_U8, 1, &bytes, &s);
    if (rc) return rc;
    pto_args_inout(&a, &s);
    bool no_src = kind == NK_BROADCAST && r != root; /* src is read on the root only */
    /* src's INOUT stands for dst only where it covers every byte of dst:
     * a src that merely begins where dst does (rank r's block of an
     * allgather in place) leaves dst an access of its own, so that readers
     * of every byte the call writes come after it */
    bool in_place = !no_src && region_covers(&src[r], &dst[r]);
    if (no_src) { /* dst stands in for the unused src, without a dependency */
      pto_args_nodep(&a, &dst[r]);
      pto_args_output_existing(&a, &dst[r]);
    } else if (in_place) {
      pto_args_inout(&a, &src[r]);
      pto_args_nodep(&a, &dst[r]);
    } else {
      pto_args_input(&a, &src[r]);
      pto_args_output_existing(&a, &dst[r]);
    }
  }
  pto_args_scalar(&a, (uint64_t)kind);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_args_scalar(&a, (uint64_t)op);
  pto_args_scalar(&a, (uint64_t)algo);
  pto_args_scalar(&a, (uint64_t)root);
  return pto_node_submit_group(no, d->desc.chips, n, coll_chip_orch, &a, NULL);
}

int pto_node_allreduce(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src, pto_red_op op,
                       pto_coll_algo algo) {
  return node_coll(no, dom, scratch, dst, src, NK_ALLREDUCE, op, algo, 0);
}
int pto_node_allgather(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src) {
  return node_coll(no, dom, scratch, dst, src, NK_ALLGATHER, PTO_RED_SUM, PTO_COLL_MESH, 0);
}
int pto_node_reduce_scatter(pto_node_orch *no, pto_domain dom, const char *scratch,
                            const pto_tensor *dst, const pto_tensor *src, pto_red_op op) {
  return node_coll(no, dom, scratch, dst, src, NK_REDUCE_SCATTER, op, PTO_COLL_MESH, 0);
}
int pto_node_broadcast(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src, int root) {
  return node_coll(no, dom, scratch, dst, src, NK_BROADCAST, PTO_RED_SUM, PTO_COLL_MESH, root);
}
int pto_node_alltoall(pto_node_orch *no, pto_domain dom, const char *scratch, const pto_tensor *dst,
                      const pto_tensor *src) {
  return node_coll(no, dom, scratch, dst, src, NK_ALLTOALL, PTO_RED_SUM, PTO_COLL_MESH, 0);
}
