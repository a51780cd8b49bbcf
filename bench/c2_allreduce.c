/* c2_allreduce.c — benchmark C2: pto_allreduce (f32 sum) between the
 * chips of a node on the shared-memory backend. Every rank runs ITERS
 * back-to-back allreduces on one scratch buffer inside one kernel and
 * times them; reported: the median over trials of the slowest rank's time
 * per call, for 64 KiB and 4 MiB by default, with 2 and 4 ranks and each
 * algorithm (auto, mesh, ring).
 *
 * Built with the suite (-DPTO_BUILD_BENCH=ON, as bench/run.sh does):
 *   build-bench/bench/bench_c2_allreduce [bytes...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pto/coll.h"
#include "scenes/dist_scene.h"

#define TRIALS 5
static int k_ar;

typedef struct c2_run {
  int nranks;
  int64_t bytes;
  int algo;
  int iters;
  pto_tensor times; /* [nranks] f64 ns per call */
} c2_run;

/* tensors: scratch, my time; scalars: dom, count, algo, iters */
static int ar_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 0);
  int64_t n = (int64_t)DIST_SCALAR(ctx, 1);
  int algo = (int)DIST_SCALAR(ctx, 2), iters = (int)DIST_SCALAR(ctx, 3), rc = 0;
  float *in = calloc((size_t)n, 4), *out = calloc((size_t)n, 4);
  if (!in || !out) {
    free(in);
    free(out);
    return PTO_ENOMEM;
  }
  pto_tensor ti, to;
  pto_tensor_init(&ti, in, (size_t)n * 4, PTO_F32, 1, &n);
  pto_tensor_init(&to, out, (size_t)n * 4, PTO_F32, 1, &n);
  rc = pto_allreduce(ctx, dom, &ctx->tensors[0], &to, &ti, PTO_RED_SUM, algo); /* warm-up */
  uint64_t t0 = pto_now_ns();
  for (int i = 0; i < iters && !rc; i++)
    rc = pto_allreduce(ctx, dom, &ctx->tensors[0], &to, &ti, PTO_RED_SUM, algo);
  *(double *)pto_tensor_at_linear(&ctx->tensors[1], 0) = (double)(pto_now_ns() - t0) / iters;
  free(in);
  free(out);
  return rc;
}

static int ar_init(pto_chip *chip, int rank, void *arg) {
  return pto_kernel_register_aiv(chip, "allreduce", ar_kernel, &k_ar);
}

static void ar_node(pto_node_orch *no, void *arg) {
  c2_run *r = arg;
  static const int chips[4] = {0, 1, 2, 3};
  pto_window_buffer b[] = {{"scratch", pto_coll_scratch_bytes(r->nranks, (size_t)r->bytes)}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, r->nranks, b, 1, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < r->nranks; i++) {
    int64_t sb = (int64_t)b[0].bytes, at = i, one = 1;
    pto_tensor s, t;
    pto_node_window_tensor(no, dom, i, "scratch", PTO_U8, 1, &sb, &s);
    pto_tensor_slice(&r->times, &at, &one, &t);
    pto_args_inout(&a, &s);
    pto_args_output_existing(&a, &t);
  }
  dist_scalars(&a, k_ar, 2, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_args_scalar(&a, (uint64_t)(r->bytes / 4));
  pto_args_scalar(&a, (uint64_t)r->algo);
  pto_args_scalar(&a, (uint64_t)r->iters);
  pto_node_submit_group(no, chips, r->nranks, dist_chip_orch, &a, NULL);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int64_t sizes[16] = {64 << 10, 4 << 20};
  int ns = 2;
  if (argc > 1)
    for (ns = 0; ns < argc - 1 && ns < 16; ns++)
      sizes[ns] = atoll(argv[ns + 1]);
  static const char *algos[] = {"auto", "mesh", "ring"};
  printf("ranks,size_bytes,algo,us_per_call_median,us_min,us_max,GB_per_s\n");
  for (int nr = 2; nr <= 4; nr += 2) {
    pto_scene_opts o = {0};
    pto_node_config cfg;
    dist_config(&o, nr, ar_init, &cfg);
    cfg.chip.clusters = 1;
    cfg.window_space = 1u << 30;
    pto_node *n;
    pto_error_info err;
    if (pto_node_create(&cfg, &n, &err)) {
      fprintf(stderr, "node: %s\n", err.details);
      return 1;
    }
    c2_run r = {.nranks = nr};
    int64_t four = 4;
    pto_node_host_tensor(n, PTO_F64, 1, &four, &r.times);
    for (int s = 0; s < ns; s++)
      for (int al = 0; al < 3; al++) {
        r.bytes = sizes[s];
        r.algo = al;
        r.iters = sizes[s] >= (1 << 20) ? 20 : 200;
        double t[TRIALS];
        for (int k = 0; k < TRIALS; k++) {
          int rc = pto_node_run(n, ar_node, &r, &err);
          if (rc) {
            fprintf(stderr, "run: %s: %s\n", pto_status_name(rc), err.details);
            return 1;
          }
          t[k] = 0;
          for (int i = 0; i < nr; i++)
            if (((double *)r.times.buf)[i] > t[k]) t[k] = ((double *)r.times.buf)[i];
          t[k] /= 1e3;
        }
        qsort(t, TRIALS, sizeof t[0], cmp);
        printf("%d,%lld,%s,%.1f,%.1f,%.1f,%.2f\n", nr, (long long)sizes[s], algos[al],
               t[TRIALS / 2], t[0], t[TRIALS - 1], (double)sizes[s] / t[TRIALS / 2] / 1e3);
        fflush(stdout);
      }
    pto_node_destroy(n);
  }
  return 0;
}
