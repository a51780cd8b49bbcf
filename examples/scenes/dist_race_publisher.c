/* dist_race_publisher.c — a deliberate multi-chip race, for controlled
 * schedules (docs/schedules.md, "Several chips"): chip 0 publishes its row
 * to chip 1 with plain remote stores, in four quarters, and then announces
 * it with a plain store of the signal word into chip 1's cell — the data
 * and the signal travel separately, without pto_notify, which would order
 * the stores before the signal. Chip 1 waits for the signal and copies
 * what arrived. Under ordering fault injection (which the scene turns on)
 * the five stores land in a seeded order at the end of chip 0's task, and
 * chip 1 reads whichever quarters landed before the signal: the rest of
 * its row stays zero. Under a controlled schedule each landing waits until
 * chip 1 has seen it, so a seed (or a record) decides the wrong values,
 * the same every time; a plain run depends on timing and is not in the
 * suite. The fix is pto_notify(ctx, dom, 1, sig, PTO_SIGNAL_SET, 1) in
 * place of the plain store. out[r] = in[0]. */
#include "comm/comm.h"
#include "comm/signal.h"
#include "dist_scene.h"

#define QUARTER (DIST_SIZE / 4)

static int race_kernel(const pto_kctx *ctx) { /* tensors: in, dst, sig, out */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  const pto_tensor *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  if (pto_comm_rank(c, dom) == 1) {
    int rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
    if (!rc) dist_copy(&ctx->tensors[3], dst);
    return rc;
  }
  dist_copy(&ctx->tensors[3], &ctx->tensors[0]);
  for (int q = 0; q < 4; q++) {
    int64_t st = q * QUARTER, sh = QUARTER;
    pto_tensor src, part;
    pto_tensor_slice(&ctx->tensors[0], &st, &sh, &src);
    pto_tensor_slice(dst, &st, &sh, &part);
    int rc = pto_remote_store(ctx, dom, 1, &part, &src);
    if (rc) return rc;
  }
  /* the bug: the signal word by a plain store, not pto_notify */
  int64_t word = (int64_t)sig_pack(c->epoch, 1), one = 1;
  pto_tensor w;
  pto_tensor_init(&w, &word, sizeof word, PTO_I64, 1, &one);
  return pto_remote_store(ctx, dom, 1, sig, &w);
}

static int race_init(pto_chip *chip, int rank, void *arg) {
  int k = -1, rc = pto_kernel_register_aiv(chip, "race_publisher", race_kernel, &k);
  return rc ? rc : k == 0 ? 0 : PTO_EINVAL;
}

static void race_node(pto_node_orch *no, void *arg) {
  pto_tensor *io = arg;
  pto_domain dom;
  if (dist_dst_sig_domain(no, &dom)) return;
  dist_pair_group(no, io, 0, dom, true);
}

static int dist_race_publisher_run(const pto_scene_opts *o, pto_scene_report *rep) {
  float want[2 * DIST_SIZE];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < DIST_SIZE; i++)
      want[r * DIST_SIZE + i] = (float)i;
  pto_scene_opts fo = *o;
  fo.fault_inject = true; /* the stores land late and out of order: the race shows */
  dist_pair_scene sc = {"race_publisher", race_init, race_node, DIST_SIZE, want, NULL, -1};
  return dist_run_pair(&fo, &sc, rep);
}

PTO_SCENE_WITH(dist_race_publisher,
               "2 chips: a deliberate race, data and signal stored separately without "
               "pto_notify (for --fuzz-schedules)",
               dist_race_publisher_run, PTO_SCENE_MULTI_CHIP);
