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

static void push_node(pto_node_orch *no, void *arg) {
  pto_tensor *io = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t n = DIST_SIZE, one = 1;
    pto_tensor in = dist_row(&io[0], r), out = dist_row(&io[1], r), dst, sig;
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst);
    pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
    pto_args_input(&a, &in);
    pto_args_inout(&a, &dst);
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &out);
  }
  dist_scalars(&a, k_push, 4, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

static int dist_push_computed_run(const pto_scene_opts *o, pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 2, push_init, &cfg);
  pto_node *n;
  int rc = pto_node_create(&cfg, &n, &rep->err);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  pto_tensor io[2];
  int64_t sh[2] = {2, DIST_SIZE};
  dist_inputs(n, 2, &io[0]);
  pto_node_host_tensor(n, PTO_F32, 2, sh, &io[1]);
  pto_error_info err;
  rc = pto_node_run(n, push_node, io, &err);
  if (dist_status(rep, rc, &err)) {
    float want[2 * DIST_SIZE];
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < DIST_SIZE; i++)
        want[r * DIST_SIZE + i] = 2.0f * (float)(100 * (1 - r) + i);
    rep->verified = scene_check_f32(rep, "push_computed out", pto_tensor_f32(&io[1]), want,
                                    2 * DIST_SIZE, 0.0f);
    if (!rep->verified) rc = PTO_EFATAL;
  }
  pto_node_destroy(n);
  return rc;
}

PTO_SCENE(dist_push_computed, "2 chips: push of a computed tile 2*in (dist scene 3)",
          dist_push_computed_run);
