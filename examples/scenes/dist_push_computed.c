/* dist_push_computed.c — acceptance scene 3: each rank pushes 2*in to its
 * peer: out[r] = 2 * in[(r-1) % 2]. */
#include "dist_scene.h"

static int k_push;

static int push_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  const pto_tensor *in = &ctx->tensors[0], *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2;
  float tile[DIST_SIZE];
  int64_t n = DIST_SIZE;
  for (int i = 0; i < DIST_SIZE; i++)
    tile[i] = 2.0f * *(float *)pto_tensor_at_linear(in, i);
  pto_tensor t;
  pto_tensor_init(&t, tile, sizeof tile, PTO_F32, 1, &n);
  int rc = pto_remote_store(ctx, dom, peer, dst, &t);
  if (!rc) rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_ADD, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) dist_copy(&ctx->tensors[3], dst);
  return rc;
}

static int push_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "push_computed", push_kernel, &k_push);
}

static void push_node(pto_node_orch *no, void *io) {
  pto_domain dom;
  if (dist_dst_sig_domain(no, &dom) == 0) dist_pair_group(no, io, k_push, dom, true);
}

static int dist_push_computed_run(const pto_scene_opts *o, pto_scene_report *rep) {
  float want[2 * DIST_SIZE];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < DIST_SIZE; i++)
      want[r * DIST_SIZE + i] = 2.0f * (float)(100 * (1 - r) + i);
  dist_pair_scene sc = {"push_computed", push_init, push_node, DIST_SIZE, want, NULL, -1};
  return dist_run_pair(o, &sc, rep);
}

PTO_SCENE_WITH(dist_push_computed, "2 chips: push of a computed tile 2*in (dist scene 3)",
               dist_push_computed_run, PTO_SCENE_MULTI_CHIP);
