/* ring_shuffle.c — acceptance scene 1: rank r remote-stores its input into
 * peer (r+1)%2's window buffer `dst`, notifies (add 1), waits (>= 1) and
 * reads its own `dst`: out = [in[1], in[0]]. */
#include "dist_scene.h"

static int k_ring;

static int ring_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  const pto_tensor *in = &ctx->tensors[0], *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2;
  int rc = pto_remote_store(ctx, dom, peer, dst, in);
  if (!rc) rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_ADD, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) dist_copy(&ctx->tensors[3], dst);
  return rc;
}

static int ring_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "ring_shuffle", ring_kernel, &k_ring);
}

typedef struct ring_io {
  pto_tensor in, out;
} ring_io;

static void ring_node(pto_node_orch *no, void *io) {
  pto_domain dom;
  if (dist_dst_sig_domain(no, &dom) == 0) dist_pair_group(no, io, k_ring, dom, true);
}

int ring_shuffle_leased(const pto_scene_opts *o, const int *device_ids, int64_t lease_wait_ms,
                        pto_scene_report *rep) {
  float want[2 * DIST_SIZE];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < DIST_SIZE; i++)
      want[r * DIST_SIZE + i] = (float)(100 * (1 - r) + i);
  dist_pair_scene sc = {"ring_shuffle", ring_init,  ring_node,    DIST_SIZE,
                        want,           device_ids, lease_wait_ms};
  return dist_run_pair(o, &sc, rep);
}

static int ring_shuffle_run(const pto_scene_opts *o, pto_scene_report *rep) {
  return ring_shuffle_leased(o, NULL, -1, rep);
}

PTO_SCENE_WITH(ring_shuffle, "2 chips: remote store to the next rank, notify, wait (dist scene 1)",
               ring_shuffle_run, PTO_SCENE_MULTI_CHIP);
