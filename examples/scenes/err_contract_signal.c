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
  const pto_window_buffer bufs[] = {{"sig", 2 * 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, dist_pair_chips, 2, bufs, 1, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) { /* the window target: rank r's cell 0 */
    int64_t one = 1;
    pto_tensor v;
    if (pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &v)) return;
    pto_args_inout(&a, &v);
  }
  dist_scalars(&a, k_sig, 1, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, dist_pair_chips, 2, dist_chip_orch, &a, NULL);
}

static int err_contract_signal_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static const char *const want[] = {
      "chip rank 0, node task 0: task 0 (kernel 'notify_past') block 0/1: notify to rank 1",
      "signal cell 'sig'[1] (byte 8) is outside the node task's window targets (an add of 1)"};
  pto_node_config cfg;
  dist_config(o, 2, sig_init, &cfg);
  cfg.chip.check = 1; /* checking mode, whatever the environment says */
  cfg.chip.check_seed = 1;
  rep->expected_status = PTO_ECONTRACT;
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (rc) return dist_status(rep, rc, &rep->err), rc;
  pto_error_info err;
  rc = pto_node_run(n, sig_node, NULL, &err);
  dist_node_stats(rep, n);
  pto_node_destroy(n);
  rep->status = rc;
  rep->err = err;
  rep->verified = rc == PTO_ECONTRACT;
  for (int i = 0; i < 2 && rep->verified; i++)
    rep->verified = strstr(err.details, want[i]) != NULL;
  if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "PTO_ECONTRACT as expected: rank 0's notify of rank 1's undeclared cell 'sig'[1] "
             "(byte 8) refused before it landed, naming the task, kernel, block and cell");
  else
    snprintf(rep->message, sizeof rep->message,
             "expected PTO_ECONTRACT naming rank 1's cell 'sig'[1], got %s: %.400s",
             rc ? pto_status_name(rc) : "success", err.details);
  return rc;
}

PTO_SCENE_WITH(err_contract_signal,
               "PTO_ECONTRACT: 2 chips, a notify of a signal cell the node task did not declare",
               err_contract_signal_run, PTO_SCENE_MULTI_CHIP);
