/* dist_put.c — acceptance scene 4, put: (a) ring swap through a staged
 * window, (b) an [8,128] tile pipelined in [4,64] chunks through a
 * two-chunk staging tile, (c) atomic adds of 10 (rank 0) and 32 (rank 1)
 * into rank 0 -> 42, (d) a row put at row offset 1, (e) an [8,64] tile
 * chunked through a [2,32] staging tile. Every result lands in the peer;
 * each rank copies what it received to its output row. */
#include "dist_scene.h"

#define OUT_N (64 + 8 * 128 + 4 * 64 + 8 * 64 + 1)
static int k_put;

static float mat_val(int r, int i, int j) { return (float)(1000 * r + i * 128 + j); }

static int put_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % 2, rc;
  const pto_tensor *in = &ctx->tensors[0];
  pto_tensor stage, dst, mat, rows, mat2, acc, sig, t;
  int64_t n64 = 64, one = 1, m[2] = {8, 128}, rs[2] = {4, 64}, m2[2] = {8, 64};
  pto_comm_window_tensor(c, dom, me, "stage", PTO_F32, 1, &n64, &stage);
  pto_comm_window_tensor(c, dom, me, "dst", PTO_F32, 1, &n64, &dst);
  pto_comm_window_tensor(c, dom, me, "mat", PTO_F32, 2, m, &mat);
  pto_comm_window_tensor(c, dom, me, "rows", PTO_F32, 2, rs, &rows);
  pto_comm_window_tensor(c, dom, me, "mat2", PTO_F32, 2, m2, &mat2);
  pto_comm_window_tensor(c, dom, me, "acc", PTO_I32, 1, &one, &acc);
  pto_comm_window_tensor(c, dom, me, "sig", PTO_I64, 1, &one, &sig);
  dist_copy(&stage, in); /* (a) */
  rc = pto_put(ctx, dom, peer, &dst, &stage, NULL);
  static _Thread_local float tile[8 * 128], st[2 * 4 * 64];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 128; j++)
      tile[i * 128 + j] = mat_val(me, i, j);
  pto_tensor src, stg, src2;
  int64_t nst = 2 * 4 * 64, stsh[2] = {2, 32}, st2[2] = {128, 1};
  pto_tensor_init(&src, tile, sizeof tile, PTO_F32, 2, m);
  pto_tensor_init(&stg, st, sizeof st, PTO_F32, 1, &nst);
  pto_xfer_opts pipe = {4, 64, &stg, false}; /* (b) */
  if (!rc) rc = pto_put(ctx, dom, peer, &mat, &src, &pipe);
  int32_t add = me == 0 ? 10 : 32; /* (c) */
  pto_tensor_init(&t, &add, 4, PTO_I32, 1, &one);
  pto_xfer_opts atomic = {0, 0, NULL, true};
  if (!rc) rc = pto_put(ctx, dom, 0, &acc, &t, &atomic);
  int64_t r1[2] = {1, 0}, rsh[2] = {1, 64}; /* (d) */
  pto_tensor row, inrow;
  pto_tensor_slice(&rows, r1, rsh, &row);
  pto_tensor_reshape(in, 2, rsh, &inrow);
  if (!rc) rc = pto_put(ctx, dom, peer, &row, &inrow, NULL);
  pto_tensor_init_strided(&src2, tile, sizeof tile, PTO_F32, 2, m2, st2, 0); /* (e) */
  pto_tensor small;
  pto_tensor_init(&small, st, 2 * 32 * 4, PTO_F32, 2, stsh);
  pto_xfer_opts chunked = {2, 32, &small, false};
  if (!rc) rc = pto_put(ctx, dom, peer, &mat2, &src2, &chunked);
  if (!rc) rc = pto_quiet(ctx, dom); /* my atomic add to myself (rank 0) is not to `peer` */
  if (!rc) rc = pto_notify(ctx, dom, peer, &sig, PTO_SIGNAL_ADD, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, &sig, PTO_CMP_GE, 1, -1);
  if (rc) return rc;
  float *out = (float *)pto_tensor_at_linear(&ctx->tensors[1], 0);
  memcpy(out, dst.buf, 64 * 4);
  memcpy(out + 64, mat.buf, 8 * 128 * 4);
  memcpy(out + 64 + 1024, rows.buf, 4 * 64 * 4);
  memcpy(out + 64 + 1024 + 256, mat2.buf, 8 * 64 * 4);
  out[OUT_N - 1] = (float)*(int32_t *)acc.buf;
  return 0;
}

static int put_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "put", put_kernel, &k_put);
}

static void put_node(pto_node_orch *no, void *arg) {
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"stage", 64 * 4},
                                    {"dst", 64 * 4},
                                    {"mat", 8 * 128 * 4},
                                    {"rows", 4 * 64 * 4},
                                    {"mat2", 8 * 64 * 4},
                                    {"acc", 4},
                                    {"sig", 8}};
  pto_domain dom;
  /* the peers put into buffers 1..5 and notify 6 */
  if (pto_node_domain_create(no, chips, 2, bufs, 7, &dom) == 0)
    dist_pair_group_targets(no, arg, k_put, dom, false, &bufs[1], 6);
}

static int dist_put_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static float want[2 * OUT_N];
  memset(want, 0, sizeof want);
  for (int r = 0; r < 2; r++) {
    float *w = want + r * OUT_N;
    int p = 1 - r; /* what rank r received came from its peer */
    for (int i = 0; i < 64; i++)
      w[i] = (float)(100 * p + i);
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 128; j++)
        w[64 + i * 128 + j] = mat_val(p, i, j);
    for (int j = 0; j < 64; j++)
      w[64 + 1024 + 64 + j] = (float)(100 * p + j);
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 64; j++)
        w[64 + 1024 + 256 + i * 64 + j] = mat_val(p, i, j);
    w[OUT_N - 1] = r == 0 ? 42.0f : 0.0f;
  }
  dist_pair_scene sc = {"put", put_init, put_node, OUT_N, want, NULL, -1};
  return dist_run_pair(o, &sc, rep);
}

PTO_SCENE_WITH(dist_put,
               "2 chips: put — staged ring swap, pipelined and chunked tiles, atomic add, "
               "row offset (dist scene 4)",
               dist_put_run, PTO_SCENE_MULTI_CHIP);
