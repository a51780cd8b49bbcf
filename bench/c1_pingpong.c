/* c1_pingpong.c — benchmark C1: remote-store ping-pong between two chips of
 * a node. Rank 0 stores an N-byte tile into rank 1's window and notifies;
 * rank 1 waits and answers the same way; repeated. Reports the median over
 * trials of the half round trip (one store + notify + wait), for 8 B and
 * 64 KiB by default (sizes in bytes on the command line).
 *
 * Built with the suite (-DPTO_BUILD_BENCH=ON, as bench/run.sh does):
 *   build-bench/bench/bench_c1_pingpong [bytes...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "scenes/dist_scene.h"

#define ITERS  2000
#define TRIALS 7
static int k_pp;

static int pp_kernel(const pto_kctx *ctx) { /* tensors: my buf, my sig; scalars: dom, bytes */
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int64_t n = (int64_t)DIST_SCALAR(ctx, 1);
  int me = pto_comm_rank(pto_kctx_comm(ctx), dom), peer = 1 - me, rc = 0;
  pto_tensor buf = ctx->tensors[0], src;
  buf.shape[0] = n;
  static _Thread_local unsigned char tile[1 << 20];
  pto_tensor_init(&src, tile, sizeof tile, PTO_U8, 1, &n);
  for (int i = 1; i <= ITERS && !rc; i++) {
    if (me == 1) rc = pto_signal_wait(ctx, dom, &ctx->tensors[1], PTO_CMP_GE, i, -1);
    if (!rc) rc = pto_remote_store(ctx, dom, peer, &buf, &src);
    if (!rc) rc = pto_notify(ctx, dom, peer, &ctx->tensors[1], PTO_SIGNAL_SET, i);
    if (!rc && me == 0) rc = pto_signal_wait(ctx, dom, &ctx->tensors[1], PTO_CMP_GE, i, -1);
  }
  return rc;
}

static int pp_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "pingpong", pp_kernel, &k_pp);
}

static void pp_node(pto_node_orch *no, void *arg) {
  int64_t bytes = *(int64_t *)arg;
  const int chips[2] = {0, 1};
  const pto_window_buffer bufs[] = {{"buf", 1 << 20}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t n = 1 << 20, one = 1;
    pto_tensor b, s;
    pto_node_window_tensor(no, dom, r, "buf", PTO_U8, 1, &n, &b);
    pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &s);
    pto_args_inout(&a, &b);
    pto_args_inout(&a, &s);
  }
  dist_scalars(&a, k_pp, 2, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_args_scalar(&a, (uint64_t)bytes);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int64_t sizes[16] = {8, 64 << 10};
  int ns = 2;
  if (argc > 1)
    for (ns = 0; ns < argc - 1 && ns < 16; ns++)
      sizes[ns] = atoll(argv[ns + 1]);
  pto_scene_opts o = {0};
  pto_node_config cfg;
  dist_config(&o, 2, pp_init, &cfg);
  cfg.chip.clusters = 1;
  pto_node *n;
  pto_error_info err;
  if (pto_node_create(&cfg, &n, &err)) {
    fprintf(stderr, "node: %s\n", err.details);
    return 1;
  }
  printf("size_bytes,half_rtt_us_median,half_rtt_us_min,half_rtt_us_max,MB_per_s\n");
  for (int s = 0; s < ns; s++) {
    double t[TRIALS];
    for (int k = 0; k < TRIALS; k++) {
      uint64_t t0 = pto_now_ns();
      int rc = pto_node_run(n, pp_node, &sizes[s], &err);
      if (rc) {
        fprintf(stderr, "run: %s: %s\n", pto_status_name(rc), err.details);
        return 1;
      }
      t[k] = (double)(pto_now_ns() - t0) / 1e3 / (2.0 * ITERS); /* includes run set-up */
    }
    qsort(t, TRIALS, sizeof t[0], cmp);
    printf("%lld,%.2f,%.2f,%.2f,%.1f\n", (long long)sizes[s], t[TRIALS / 2], t[0], t[TRIALS - 1],
           (double)sizes[s] / t[TRIALS / 2]);
  }
  pto_node_destroy(n);
  return 0;
}
