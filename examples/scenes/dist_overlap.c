/* dist_overlap.c — acceptance scene 10: 3 chips, overlapping domains
 * A = {0,1} and B = {1,2}; in each domain the two ranks stage their input,
 * barrier, and swap by remote load: outA = [in1, in0], outB = [in2, in1].
 * Each group task declares its ranks' "stage" (INOUT): where its ranks
 * write and their peers load (docs/contracts.md, "Node runs"). */
#include "dist_scene.h"

static int k_swap;

static int swap_kernel(const pto_kctx *ctx) { /* tensors: in, out */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % 2;
  int64_t n = DIST_SIZE;
  pto_tensor mine, theirs;
  pto_comm_window_tensor(c, dom, me, "stage", PTO_F32, 1, &n, &mine);
  pto_comm_window_tensor(c, dom, peer, "stage", PTO_F32, 1, &n, &theirs);
  dist_copy(&mine, &ctx->tensors[0]);
  int rc = pto_barrier(ctx, dom);
  if (!rc) rc = pto_remote_load(ctx, dom, peer, &ctx->tensors[1], &theirs);
  return rc ? rc : pto_barrier(ctx, dom);
}

static int swap_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "swap", swap_kernel, &k_swap);
}

static void overlap_node(pto_node_orch *no, void *arg) {
  pto_tensor *io = arg; /* io[1]: [4, 64] = outA rows 0,1 then outB rows 0,1 */
  const pto_window_buffer bufs[] = {{"stage", DIST_SIZE * 4}};
  const int groups[2][2] = {{0, 1}, {1, 2}};
  pto_domain dom[2];
  for (int g = 0; g < 2; g++)
    if (pto_node_domain_create(no, groups[g], 2, bufs, 1, &dom[g])) return;
  for (int g = 0; g < 2; g++) {
    pto_args a;
    pto_args_init(&a);
    for (int r = 0; r < 2; r++) {
      pto_tensor in = dist_row(&io[0], groups[g][r]), out = dist_row(&io[1], 2 * g + r);
      pto_args_input(&a, &in);
      pto_args_output_existing(&a, &out);
    }
    for (int r = 0; r < 2; r++) { /* each rank's stage: written there, loaded by its peer */
      pto_tensor stage;
      int64_t n = DIST_SIZE;
      if (pto_node_window_tensor(no, dom[g], r, "stage", PTO_F32, 1, &n, &stage)) return;
      pto_args_inout(&a, &stage);
    }
    dist_scalars(&a, k_swap, 2, 1);
    pto_args_scalar(&a, (uint64_t)dom[g]);
    pto_node_submit_group(no, groups[g], 2, dist_chip_orch, &a, NULL);
  }
}

static int dist_overlap_run(const pto_scene_opts *o, pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 3, swap_init, &cfg);
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  pto_tensor io[2];
  int64_t sh[2] = {4, DIST_SIZE};
  dist_inputs(n, 3, &io[0]);
  pto_node_host_tensor(n, PTO_F32, 2, sh, &io[1]);
  pto_error_info err;
  rc = pto_node_run(n, overlap_node, io, &err);
  dist_node_stats(rep, n);
  if (dist_status(rep, rc, &err)) {
    const int src[4] = {1, 0, 2, 1};
    float want[4 * DIST_SIZE];
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < DIST_SIZE; i++)
        want[k * DIST_SIZE + i] = (float)(100 * src[k] + i);
    rep->verified = scene_check_f32(rep, "overlap out [A0 A1 B0 B1]", pto_tensor_f32(&io[1]), want,
                                    4 * DIST_SIZE, 0.0f);
    if (!rep->verified) rc = PTO_EFATAL;
  }
  pto_node_destroy(n);
  return rc;
}

PTO_SCENE_WITH(dist_overlap,
               "3 chips: overlapping domains {0,1} and {1,2}, swaps by remote load "
               "(dist scene 10)",
               dist_overlap_run, PTO_SCENE_MULTI_CHIP);
