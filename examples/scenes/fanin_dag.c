/* fanin_dag.c — a many-fanin DAG, 64 x 64:
 *
 *   A = 0, B = 0                              (2 fills, heap tensors [64,64])
 *   A[i,:] = (i+1) * X[i,:]      i < 64       (64 AIV tasks, row slices of A)
 *   B[j,:] = W[j,:] · A          j < 64       (64 AIC tasks, each waits for
 *                                              all 64 writers of A: fanin 65)
 *   out = column sums of B                    (1 AIV task, fanin 65)
 *
 * The orchestrator then reads A and B back (pto_orch_read) before the
 * scope closes. About 4,300 inferred dependency edges in all. */
#include <stdlib.h>

#include "chip_scenes.h"

#define FD_N 64

typedef struct fd_state {
  pto_kernel_ids k;
  float x[FD_N * FD_N], w[FD_N * FD_N], a[FD_N * FD_N], b[FD_N * FD_N], out[FD_N];
  pto_tensor tx, tw, tout;
} fd_state;

static int fd_row(const pto_tensor *t, int i, pto_tensor *row) {
  int64_t start[2] = {i, 0}, shape[2] = {1, FD_N};
  return pto_tensor_slice(t, start, shape, row);
}

static int fd_fill(pto_orch *o, const fd_state *st, pto_tensor *t) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, t);
  pto_args_scalar_f32(&a, 0.0f);
  return cs_submit(o, st->k.fill, &a, 2, NULL);
}

static void fd_orch(pto_orch *o, void *arg) {
  fd_state *st = arg;
  pto_tensor A, B;
  if (cs_desc2(&A, FD_N, FD_N) || cs_desc2(&B, FD_N, FD_N)) {
    pto_orch_fatal(o, "fanin_dag: bad descriptor");
    return;
  }
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  if (fd_fill(o, st, &A) || fd_fill(o, st, &B)) return;
  for (int i = 0; i < FD_N; i++) {
    pto_tensor xi, ai;
    if (fd_row(&st->tx, i, &xi) || fd_row(&A, i, &ai)) goto bad_view;
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &xi);
    pto_args_output_existing(&a, &ai);
    pto_args_scalar_f32(&a, (float)(i + 1));
    if (pto_submit(o, st->k.scale, &a, NULL, NULL)) return;
  }
  for (int j = 0; j < FD_N; j++) {
    pto_tensor wj, bj;
    if (fd_row(&st->tw, j, &wj) || fd_row(&B, j, &bj)) goto bad_view;
    pto_args a;
    pto_args_init(&a);
    pto_args_input(&a, &wj);
    pto_args_input(&a, &A);
    pto_args_output_existing(&a, &bj);
    if (pto_submit(o, st->k.matmul, &a, NULL, NULL)) return;
  }
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &B);
  pto_args_output_existing(&a, &st->tout);
  if (cs_submit(o, st->k.col_sum, &a, 4, NULL)) return;
  if (pto_orch_read(o, &A, st->a, -1) || pto_orch_read(o, &B, st->b, -1)) return;
  pto_scope_end(o);
  return;
bad_view:
  pto_orch_fatal(o, "fanin_dag: bad row view");
}

static int fanin_dag_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  fd_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "fanin_dag");
  cs_fill_rand(st->x, FD_N * FD_N, 7 + opts->seed);
  cs_fill_rand(st->w, FD_N * FD_N, 8 + opts->seed);
  for (int i = 0; i < FD_N * FD_N; i++)
    st->w[i] *= 1.0f / 16.0f;
  int rc = cs_view2(&st->tx, st->x, PTO_F32, FD_N, FD_N);
  rc |= cs_view2(&st->tw, st->w, PTO_F32, FD_N, FD_N);
  int64_t oshape[1] = {FD_N};
  rc |= pto_tensor_init(&st->tout, st->out, sizeof st->out, PTO_F32, 1, oshape);
  pto_chip_config cfg;
  scene_chip_config(opts, 0, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = scene_run_rounds(chip, opts, fd_orch, st, rep);
  if (rc) {
    cs_run_failed(rep, rc, "fanin_dag");
  } else {
    static double ra[FD_N * FD_N], rb[FD_N * FD_N];
    float fa[FD_N * FD_N], fb[FD_N * FD_N], fo[FD_N];
    for (int i = 0; i < FD_N * FD_N; i++) {
      ra[i] = (double)st->x[i] * (i / FD_N + 1);
      fa[i] = (float)ra[i];
    }
    for (int j = 0; j < FD_N; j++)
      for (int c = 0; c < FD_N; c++) {
        double s = 0;
        for (int i = 0; i < FD_N; i++)
          s += (double)st->w[j * FD_N + i] * ra[i * FD_N + c];
        rb[j * FD_N + c] = s;
        fb[j * FD_N + c] = (float)s;
      }
    for (int c = 0; c < FD_N; c++) {
      double s = 0;
      for (int j = 0; j < FD_N; j++)
        s += rb[j * FD_N + c];
      fo[c] = (float)s;
    }
    rep->verified = scene_check_f32(rep, "A", st->a, fa, FD_N * FD_N, 1e-6f) &&
                    scene_check_f32(rep, "B", st->b, fb, FD_N * FD_N, 1e-4f) &&
                    scene_check_f32(rep, "out", st->out, fo, FD_N, 1e-4f);
    if (rep->verified)
      snprintf(rep->message, sizeof rep->message,
               "64 row writers, 64 matmuls with fanin 65 each, 1 column sum with fanin 65: A, B "
               "and out match the sequential reference");
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(fanin_dag, "many-fanin DAG: 64 writers x 64 readers of the whole tensor",
               fanin_dag_run, PTO_SCENE_RANDOM);
