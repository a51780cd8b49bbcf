/* subview_halves.c — acceptance scene 2: each rank pushes its low half into
 * the peer's dst[0:32] and its high half into dst[32:64], notifies (set 1)
 * and waits (>= 1): out[0] = 100..163, out[1] = 0..63. */
#include "dist_scene.h"

static int k_halves;

static int halves_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  const pto_tensor *in = &ctx->tensors[0], *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2, rc = 0;
  for (int h = 0; h < 2 && !rc; h++) {
    int64_t st = h * DIST_HALF, sh = DIST_HALF;
    pto_tensor src, part;
    pto_tensor_slice(in, &st, &sh, &src);
    pto_tensor_slice(dst, &st, &sh, &part);
    rc = pto_remote_store(ctx, dom, peer, &part, &src);
  }
  if (!rc) rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_SET, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) dist_copy(&ctx->tensors[3], dst);
  return rc;
}

static int halves_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "subview_halves", halves_kernel, &k_halves);
}

static void halves_node(pto_node_orch *no, void *io) {
  pto_domain dom;
  if (dist_dst_sig_domain(no, &dom) == 0) dist_pair_group(no, io, k_halves, dom, true);
}

static int subview_halves_run(const pto_scene_opts *o, pto_scene_report *rep) {
  float want[2 * DIST_SIZE];
  for (int i = 0; i < DIST_SIZE; i++) {
    want[i] = (float)(100 + i);
    want[DIST_SIZE + i] = (float)i;
  }
  dist_pair_scene sc = {"subview_halves", halves_init, halves_node, DIST_SIZE, want, NULL, -1};
  return dist_run_pair(o, &sc, rep);
}

PTO_SCENE_WITH(subview_halves,
               "2 chips: halves pushed into sub-views of the peer's buffer (dist "
               "scene 2)",
               subview_halves_run, PTO_SCENE_MULTI_CHIP);
