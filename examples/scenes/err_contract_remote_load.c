/* err_contract_remote_load.c — PTO_ECONTRACT on a node: a kernel remote-
 * loads one element past the window region its node task declared.
 *
 * Two chips in checking mode, one group task. Each rank's half of its
 * "stage" window buffer (elements 0..31, bytes 0..127) is passed INPUT: a
 * declared read. Rank 1 loads 32 elements of rank 0's half; rank 0 loads 33
 * of rank 1's: element 32, byte 128, lies outside every view of the task.
 * The load is refused before it reads anything, and the run names the
 * loading task and kernel, rank 1, buffer 'stage', byte 128 and its value
 * there, 0x00. */
#include "dist_scene.h"

#define RL_HALF 32
static int k_load;

static int load_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % 2;
  int64_t n = me == 0 ? RL_HALF + 1 : RL_HALF; /* rank 0: one element too many */
  int32_t tile[RL_HALF + 1];
  pto_tensor src, dst;
  int rc = pto_comm_window_tensor(c, dom, me, "stage", PTO_I32, 1, &n, &src);
  if (!rc) rc = pto_tensor_init(&dst, tile, sizeof tile, PTO_I32, 1, &n);
  return rc ? rc : pto_remote_load(ctx, dom, peer, &dst, &src);
}

static int load_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "load_past", load_kernel, &k_load);
}

static void load_node(pto_node_orch *no, void *arg) {
  (void)arg;
  /* the declared read: rank r's first half */
  dist_window_group(no, "stage", DIST_SIZE * 4, PTO_I32, RL_HALF, true, k_load);
}

static int err_contract_remote_load_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static const char *const want[] = {
      "chip rank 0, node task 0: task 0 (kernel 'load_past') block 0/1: remote_load from rank 1",
      "buffer 'stage' byte 128 (0x00) is outside every view of the node task: reads memory it "
      "did not declare"};
  return dist_contract_run(
      o, rep, load_init, load_node, want,
      "rank 0's load of element 32 of rank 1's 'stage' (byte 128, one past the "
      "declared half) refused and named",
      "byte 128 of rank 1's 'stage'");
}

PTO_SCENE_WITH(err_contract_remote_load,
               "PTO_ECONTRACT: 2 chips, a remote load one element past the declared window view",
               err_contract_remote_load_run, PTO_SCENE_MULTI_CHIP);
