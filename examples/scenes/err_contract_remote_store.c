/* err_contract_remote_store.c — PTO_ECONTRACT on a node: a kernel remote-
 * stores one element past the window region its node task declared.
 *
 * Two chips in checking mode, one group task. Each rank's half of its
 * "dst" window buffer (elements 0..31, bytes 0..127) is the task's window
 * target, passed INOUT. Rank 1 stores 32 elements into rank 0's half;
 * rank 0 stores 33 into rank 1's: element 32, byte 128, lies outside. The
 * store is refused before it writes anything, and the run names the
 * storing task and kernel, rank 1, buffer 'dst', byte 128, its value 0x00
 * and the byte the store would have put there, 0x31 (0x11 + 32). */
#include "dist_scene.h"

#define RS_HALF 32
static int k_past;

static int past_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % 2;
  int64_t n = me == 0 ? RS_HALF + 1 : RS_HALF; /* rank 0: one element too many */
  int32_t tile[RS_HALF + 1];
  for (int j = 0; j < n; j++)
    tile[j] = 0x11 + j;
  pto_tensor dst, src;
  int rc = pto_comm_window_tensor(c, dom, me, "dst", PTO_I32, 1, &n, &dst);
  if (!rc) rc = pto_tensor_init(&src, tile, sizeof tile, PTO_I32, 1, &n);
  return rc ? rc : pto_remote_store(ctx, dom, peer, &dst, &src);
}

static int past_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "remote_past", past_kernel, &k_past);
}

static void past_node(pto_node_orch *no, void *arg) {
  (void)arg;
  /* the window target: rank r's first half */
  dist_window_group(no, "dst", DIST_SIZE * 4, PTO_I32, RS_HALF, false, k_past);
}

static int err_contract_remote_store_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static const char *const want[] = {
      "chip rank 0, node task 0: task 0 (kernel 'remote_past') block 0/1: remote_store to rank 1",
      "buffer 'dst' byte 128 is outside the node task's window targets (0x00, would be 0x31)"};
  return dist_contract_run(
      o, rep, past_init, past_node, want,
      "rank 0's store of element 32 into rank 1's 'dst' (byte 128, one past the "
      "declared half) refused, 0x00 -> 0x31 named",
      "byte 128 of rank 1's 'dst'");
}

PTO_SCENE_WITH(err_contract_remote_store,
               "PTO_ECONTRACT: 2 chips, a remote store one element past the declared window "
               "target",
               err_contract_remote_store_run, PTO_SCENE_MULTI_CHIP);
