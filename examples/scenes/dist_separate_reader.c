/* dist_separate_reader.c — acceptance scene 8: a writer task on one chip
 * remote-stores (in two halves, no notify) into the peer's buffer; a
 * different task on the peer reads it. The writer declares the peer's
 * buffer as OUTPUT_EXISTING, so node dependency inference orders the
 * reader after it. out[r] = in[1 - r]. */
#include "dist_scene.h"

/* kernel ids follow registration order, so the node (which has no chip)
 * names them by constant; sr_init checks the chips agree */
enum { K_WRITE, K_READ };

static int write_kernel(const pto_kctx *ctx) { /* tensors: in, peer's dst */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2, rc = 0;
  for (int h = 0; h < 2 && !rc; h++) {
    int64_t st = h * DIST_HALF, sh = DIST_HALF;
    pto_tensor src, part;
    pto_tensor_slice(&ctx->tensors[0], &st, &sh, &src);
    pto_tensor_slice(&ctx->tensors[1], &st, &sh, &part);
    rc = pto_remote_store(ctx, dom, peer, &part, &src);
  }
  return rc;
}

static int read_kernel(const pto_kctx *ctx) { /* tensors: my dst, out */
  dist_copy(&ctx->tensors[1], &ctx->tensors[0]);
  return 0;
}

static int sr_init(pto_chip *chip, int rank, void *arg) {
  int kw = -1, kr = -1, rc = pto_kernel_register_aiv(chip, "writer", write_kernel, &kw);
  if (!rc) rc = pto_kernel_register_aiv(chip, "reader", read_kernel, &kr);
  return rc ? rc : kw == K_WRITE && kr == K_READ ? 0 : PTO_EINVAL;
}

static void sr_node(pto_node_orch *no, void *arg) {
  pto_tensor *io = arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 1, &dom)) return;
  pto_tensor dst[2];
  int64_t n = DIST_SIZE;
  for (int r = 0; r < 2; r++)
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst[r]);
  for (int r = 0; r < 2; r++) { /* writers first: chip r writes rank 1-r's dst */
    pto_args a;
    pto_args_init(&a);
    pto_tensor in = dist_row(&io[0], r);
    pto_args_input(&a, &in);
    pto_args_output_existing(&a, &dst[1 - r]); /* a remote store is a write of the peer's buffer */
    dist_scalars(&a, K_WRITE, 2, 1);
    pto_args_scalar(&a, (uint64_t)dom);
    pto_node_submit(no, r, dist_chip_orch, &a, NULL);
  }
  for (int r = 1; r >= 0; r--) {
    pto_args a;
    pto_args_init(&a);
    pto_tensor out = dist_row(&io[1], r);
    pto_args_input(&a, &dst[r]);
    pto_args_output_existing(&a, &out);
    dist_scalars(&a, K_READ, 2, 1);
    pto_node_submit(no, r, dist_chip_orch, &a, NULL);
  }
}

static int dist_separate_reader_run(const pto_scene_opts *o, pto_scene_report *rep) {
  float want[2 * DIST_SIZE];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < DIST_SIZE; i++)
      want[r * DIST_SIZE + i] = (float)(100 * (1 - r) + i);
  dist_pair_scene sc = {"separate_reader", sr_init, sr_node, DIST_SIZE, want, NULL, -1};
  return dist_run_pair(o, &sc, rep);
}

PTO_SCENE_WITH(dist_separate_reader,
               "2 chips: a reader task on the peer is ordered after the "
               "writer's remote store (dist scene 8)",
               dist_separate_reader_run, PTO_SCENE_MULTI_CHIP);
