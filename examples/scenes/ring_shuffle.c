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

static void ring_node(pto_node_orch *no, void *arg) {
  ring_io *io = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t n = DIST_SIZE, one = 1;
    pto_tensor in = dist_row(&io->in, r), out = dist_row(&io->out, r), dst, sig;
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst);
    pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
    pto_args_input(&a, &in);
    pto_args_inout(&a, &dst);
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &out);
  }
  dist_scalars(&a, k_ring, 4, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

int ring_shuffle_leased(const pto_scene_opts *o, const int *device_ids, int64_t lease_wait_ms,
                        pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 2, ring_init, &cfg);
  cfg.lease_wait_ms = lease_wait_ms;
  if (device_ids) cfg.device_ids = device_ids;
  pto_node *n;
  int rc = pto_node_create(&cfg, &n, &rep->err);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  ring_io io;
  int64_t sh[2] = {2, DIST_SIZE};
  dist_inputs(n, 2, &io.in);
  pto_node_host_tensor(n, PTO_F32, 2, sh, &io.out);
  for (int round = 0; rc == 0 && round < (o->rounds > 0 ? o->rounds : 1); round++) {
    memset(io.out.buf, 0, io.out.buf_bytes);
    pto_error_info err;
    rc = pto_node_run(n, ring_node, &io, &err);
    if (dist_status(rep, rc, &err)) {
      float want[2 * DIST_SIZE];
      for (int r = 0; r < 2; r++)
        for (int i = 0; i < DIST_SIZE; i++)
          want[r * DIST_SIZE + i] = (float)(100 * (1 - r) + i);
      rep->verified = scene_check_f32(rep, "ring_shuffle out", pto_tensor_f32(&io.out), want,
                                      2 * DIST_SIZE, 0.0f);
      if (!rep->verified) rc = PTO_EFATAL;
    }
  }
  pto_node_destroy(n);
  return rc;
}

static int ring_shuffle_run(const pto_scene_opts *o, pto_scene_report *rep) {
  return ring_shuffle_leased(o, NULL, 60000, rep);
}

PTO_SCENE(ring_shuffle, "2 chips: remote store to the next rank, notify, wait (dist scene 1)",
          ring_shuffle_run);
