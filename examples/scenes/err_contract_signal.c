/* err_contract_signal.c — PTO_ECONTRACT on a node: a kernel notifies a
 * signal cell its node task did not declare.
 *
 * Two chips in checking mode, one group task. Each rank's window has two
 * signal cells, "sig"[0] and "sig"[1]; the task passes each rank's cell 0
 * INOUT (a window target). Rank 1 notifies rank 0's cell 0; rank 0
 * notifies rank 1's cell 1, which no view of the task names. The notify is
 * refused before the cell changes, and the run names the notifying task,
 * kernel and block, the op, rank 1, the cell 'sig'[1] (byte 8) and what
 * the notify would have done (an add of 1). */
#include "dist_scene.h"

static int k_sig;

static int sig_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  int me = pto_comm_rank(c, dom), peer = (me + 1) % 2;
  int64_t two = 2, one = 1, at = me == 0 ? 1 : 0; /* rank 0: the undeclared cell */
  pto_tensor sig, cell;
  int rc = pto_comm_window_tensor(c, dom, me, "sig", PTO_I64, 1, &two, &sig);
  if (!rc) rc = pto_tensor_slice(&sig, &at, &one, &cell);
  return rc ? rc : pto_notify(ctx, dom, peer, &cell, PTO_SIGNAL_ADD, 1);
}

static int sig_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "notify_past", sig_kernel, &k_sig);
}

static void sig_node(pto_node_orch *no, void *arg) {
  (void)arg;
  /* the window target: rank r's cell 0 */
  dist_window_group(no, "sig", 2 * 8, PTO_I64, 1, false, k_sig);
}

static int err_contract_signal_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static const char *const want[] = {
      "chip rank 0, node task 0: task 0 (kernel 'notify_past') block 0/1: notify to rank 1",
      "signal cell 'sig'[1] (byte 8) is outside the node task's window targets (an add of 1)"};
  return dist_contract_run(
      o, rep, sig_init, sig_node, want,
      "rank 0's notify of rank 1's undeclared cell 'sig'[1] (byte 8) refused before it landed, "
      "naming the task, kernel, block and cell",
      "rank 1's cell 'sig'[1]");
}

PTO_SCENE_WITH(err_contract_signal,
               "PTO_ECONTRACT: 2 chips, a notify of a signal cell the node task did not declare",
               err_contract_signal_run, PTO_SCENE_MULTI_CHIP);
