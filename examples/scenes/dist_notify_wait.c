/* dist_notify_wait.c — acceptance scenes 6 and 7 on one domain, 3 calls
 * each without resetting the window: (6) rank r adds r+1 to its peer's
 * cell and waits >= 1: cells [2, 1] every call; (7) credit reset: 4 x add
 * 1 to the peer, wait >= 4, self add -4: cell 0 every call. */
#include "dist_scene.h"

#define CALLS 3
enum { K_NW, K_CREDIT }; /* registration order; nw_init checks it */

static int nw_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int me = pto_comm_rank(pto_kctx_comm(ctx), dom), peer = (me + 1) % 2;
  const pto_tensor *sig = &ctx->tensors[0];
  int rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_ADD, me + 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) rc = pto_barrier(ctx, dom); /* every add has landed before we read */
  return rc ? rc
            : pto_signal_read(ctx, dom, sig, (int32_t *)pto_tensor_at_linear(&ctx->tensors[1], 0));
}

static int credit_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int me = pto_comm_rank(pto_kctx_comm(ctx), dom), peer = (me + 1) % 2, rc = 0;
  const pto_tensor *sig = &ctx->tensors[0];
  for (int i = 0; i < 4 && !rc; i++)
    rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_ADD, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 4, -1);
  if (!rc) rc = pto_notify(ctx, dom, me, sig, PTO_SIGNAL_ADD, -4);
  return rc ? rc
            : pto_signal_read(ctx, dom, sig, (int32_t *)pto_tensor_at_linear(&ctx->tensors[1], 0));
}

static int nw_init(pto_chip *chip, int rank, void *arg) {
  int a = -1, b = -1, rc = pto_kernel_register_aiv(chip, "notify_wait", nw_kernel, &a);
  if (!rc) rc = pto_kernel_register_aiv(chip, "credit_reset", credit_kernel, &b);
  return rc ? rc : a == K_NW && b == K_CREDIT ? 0 : PTO_EINVAL;
}

static void nw_node(pto_node_orch *no, void *arg) {
  pto_tensor *out = arg; /* [2 scenes][CALLS][2 ranks] i32 */
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"sig", 2 * 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 1, &dom)) return;
  for (int s = 0; s < 2; s++)
    for (int call = 0; call < CALLS; call++) {
      pto_args a;
      pto_args_init(&a);
      for (int r = 0; r < 2; r++) {
        int64_t one = 1;
        pto_tensor sig, cell;
        pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, (int64_t[]){2}, &sig);
        pto_tensor_slice(&sig, (int64_t[]){s}, &one, &cell); /* one cell per scene */
        pto_tensor o;
        pto_tensor_slice(out, (int64_t[]){(s * CALLS + call) * 2 + r}, &one, &o);
        pto_args_inout(&a, &cell);
        pto_args_output_existing(&a, &o);
      }
      dist_scalars(&a, s == 0 ? K_NW : K_CREDIT, 2, 1);
      pto_args_scalar(&a, (uint64_t)dom);
      pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
    }
}

static int dist_notify_wait_run(const pto_scene_opts *o, pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 2, nw_init, &cfg);
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  pto_tensor out;
  int64_t sh = 2 * CALLS * 2;
  pto_node_host_tensor(n, PTO_I32, 1, &sh, &out);
  for (int round = 0; rc == 0 && round < (o->rounds > 0 ? o->rounds : 1); round++) {
    pto_error_info err;
    rc = pto_node_run(n, nw_node, &out, &err);
    dist_node_stats(rep, n);
    if (dist_status(rep, rc, &err)) {
      int32_t want[2 * CALLS * 2] = {2, 1, 2, 1, 2, 1, 0, 0, 0, 0, 0, 0};
      rep->verified = scene_check_i32(rep, "cells [notify_wait x3, credit_reset x3]",
                                      (const int32_t *)out.buf, want, 2 * CALLS * 2);
      if (!rep->verified) rc = PTO_EFATAL;
    }
  }
  pto_node_destroy(n);
  return rc;
}

PTO_SCENE_WITH(dist_notify_wait,
               "2 chips: notify/wait cells [2,1] and credit reset to 0, 3 calls "
               "each on one domain (dist scenes 6, 7)",
               dist_notify_wait_run, PTO_SCENE_MULTI_CHIP);
