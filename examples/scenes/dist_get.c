/* dist_get.c — acceptance scene 5, get: each rank stages [in; in + 1000]
 * in its window, barrier, then gets row 0 of peer (r+1)%n's stage, and
 * (row-offset variant) row 1: out[r] = [in[p], in[p] + 1000]. */
#include "dist_scene.h"

static int k_get;

static int get_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % pto_comm_size(c, dom);
  const pto_tensor *in = &ctx->tensors[0], *out = &ctx->tensors[1];
  pto_tensor stage, row, orow;
  int64_t sh[2] = {2, DIST_SIZE}, rsh[2] = {1, DIST_SIZE};
  pto_comm_window_tensor(c, dom, me, "stage", PTO_F32, 2, sh, &stage);
  for (int i = 0; i < DIST_SIZE; i++) {
    float v = *(float *)pto_tensor_at_linear(in, i);
    pto_tensor_f32(&stage)[i] = v;
    pto_tensor_f32(&stage)[DIST_SIZE + i] = v + 1000.0f;
  }
  int rc = pto_barrier(ctx, dom);
  for (int r = 0; r < 2 && !rc; r++) {
    int64_t at[2] = {r, 0}, o0 = r * DIST_SIZE;
    pto_tensor_slice(&stage, at, rsh, &row);
    pto_tensor_view(out, 2, rsh, (int64_t[]){DIST_SIZE, 1}, o0, &orow);
    rc = pto_get(ctx, dom, peer, &orow, &row, NULL);
  }
  return rc ? rc : pto_barrier(ctx, dom); /* nobody rewrites stage while a peer reads */
}

static int get_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "get", get_kernel, &k_get);
}

static void get_node(pto_node_orch *no, void *arg) {
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"stage", 2 * DIST_SIZE * 4}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 1, &dom) == 0)
    dist_pair_group_targets(no, arg, k_get, dom, false, bufs, 1); /* stage: peers get it */
}

static int dist_get_run(const pto_scene_opts *o, pto_scene_report *rep) {
  float want[4 * DIST_SIZE];
  for (int r = 0; r < 2; r++)
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < DIST_SIZE; i++)
        want[(2 * r + h) * DIST_SIZE + i] = (float)(100 * (1 - r) + i + 1000 * h);
  dist_pair_scene sc = {"get", get_init, get_node, 2 * DIST_SIZE, want, NULL, -1};
  return dist_run_pair(o, &sc, rep);
}

PTO_SCENE_WITH(dist_get,
               "2 chips: stage, barrier, get from the next rank, with a row offset (dist "
               "scene 5)",
               dist_get_run, PTO_SCENE_MULTI_CHIP);
