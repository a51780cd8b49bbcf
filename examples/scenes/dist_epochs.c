/* dist_epochs.c — acceptance scene 9: in each of 3 epochs (calls, no
 * window reset) block 0 of each rank stores in + 1000 e into the peer and
 * sets the peer's signal to e; blocks 1 and 2 (two waiters per rank) wait
 * >= e and copy what arrived: out[e][r][w] = in[1 - r] + 1000 e. */
#include "dist_scene.h"

#define EPOCHS 3
static int k_epoch;

static int epoch_kernel(const pto_kctx *ctx) { /* tensors: in, my dst, my sig, out [2, 64] */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int32_t e = (int32_t)DIST_SCALAR(ctx, 1);
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2;
  const pto_tensor *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  if (ctx->block_idx == 0) { /* the publisher */
    float tile[DIST_SIZE];
    int64_t n = DIST_SIZE;
    for (int i = 0; i < DIST_SIZE; i++)
      tile[i] = *(float *)pto_tensor_at_linear(&ctx->tensors[0], i) + 1000.0f * (float)e;
    pto_tensor t;
    pto_tensor_init(&t, tile, sizeof tile, PTO_F32, 1, &n);
    int rc = pto_remote_store(ctx, dom, peer, dst, &t);
    return rc ? rc : pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_SET, e);
  }
  int rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, e, -1);
  if (rc) return rc;
  pto_tensor row;
  int64_t at[2] = {ctx->block_idx - 1, 0}, sh[2] = {1, DIST_SIZE};
  pto_tensor_slice(&ctx->tensors[3], at, sh, &row);
  dist_copy(&row, dst);
  return 0;
}

static int epoch_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "epochs", epoch_kernel, &k_epoch);
}

static void epoch_node(pto_node_orch *no, void *arg) {
  pto_tensor *io = arg; /* io[1]: [EPOCHS * 2 ranks * 2 waiters, 64] */
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  for (int e = 1; e <= EPOCHS; e++) {
    pto_args a;
    pto_args_init(&a);
    for (int r = 0; r < 2; r++) {
      int64_t n = DIST_SIZE, one = 1, at[2] = {((e - 1) * 2 + r) * 2, 0}, sh[2] = {2, DIST_SIZE};
      pto_tensor in = dist_row(&io[0], r), dst, sig, out;
      pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst);
      pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
      pto_tensor_slice(&io[1], at, sh, &out);
      pto_args_input(&a, &in);
      pto_args_inout(&a, &dst);
      pto_args_inout(&a, &sig);
      pto_args_output_existing(&a, &out);
    }
    dist_scalars(&a, k_epoch, 4, 3);
    pto_args_scalar(&a, (uint64_t)dom);
    pto_args_scalar(&a, (uint64_t)e);
    pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
  }
}

static int dist_epochs_run(const pto_scene_opts *o, pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 2, epoch_init, &cfg);
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  pto_tensor io[2];
  int64_t sh[2] = {EPOCHS * 4, DIST_SIZE};
  dist_inputs(n, 2, &io[0]);
  pto_node_host_tensor(n, PTO_F32, 2, sh, &io[1]);
  pto_error_info err;
  rc = pto_node_run(n, epoch_node, io, &err);
  dist_node_stats(rep, n);
  if (dist_status(rep, rc, &err)) {
    static float want[EPOCHS * 4 * DIST_SIZE];
    for (int e = 1; e <= EPOCHS; e++)
      for (int r = 0; r < 2; r++)
        for (int w = 0; w < 2; w++)
          for (int i = 0; i < DIST_SIZE; i++)
            want[(((e - 1) * 2 + r) * 2 + w) * DIST_SIZE + i] =
                (float)(100 * (1 - r) + i + 1000 * e);
    rep->verified = scene_check_f32(rep, "epochs out", pto_tensor_f32(&io[1]), want,
                                    EPOCHS * 4 * DIST_SIZE, 0.0f);
    if (!rep->verified) rc = PTO_EFATAL;
  }
  pto_node_destroy(n);
  return rc;
}

PTO_SCENE_WITH(dist_epochs,
               "2 chips: publisher sets the signal to the epoch, two waiters per rank, "
               "3 epochs without reset (dist scene 9)",
               dist_epochs_run, PTO_SCENE_MULTI_CHIP);
