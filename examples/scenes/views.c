/* views.c — slices, transposes, reshapes and strided views as task
 * arguments, all over one 8x8 caller buffer M, with the dependencies the
 * runtime infers from their regions. Each kernel reads its input, then
 * writes its output; readers sleep before reading and writers before
 * writing, so any missing read-after-write or write-after-read edge
 * changes a result.
 *
 *   a: T = M^T                        (transposed view in)
 *   b: M[2:4, :] *= 10                (row slice, in place)
 *   c: C = M[:, 1:3]                  (column slice: strided)
 *   d: M^T[5:7, :] = 7                (slice of a transposed view = columns 5, 6)
 *   e: R = reshape(M, [64])
 *   f: M[1::2, :] *= -1               (every other row: view with row stride 16)
 *   g: S = view(M, [2,4,8])[1, 0:2, :] (3-D view = rows 4, 5)
 *   h: Out = reshape(M, [4, 16])      (into a caller buffer)
 *
 * T, C, R and S are runtime-allocated and read back by the orchestrator. */
#include <stdlib.h>

#include "chip_scenes.h"

#define VW_D 8
#define VW_N (VW_D * VW_D)

enum { VW_COPY = 0, VW_SCALE, VW_FILL };

typedef struct vw_state {
  int k_op;
  float m[VW_N], out[VW_N], t[VW_N], c[VW_D * 2], r[VW_N], s[2 * VW_D];
  pto_tensor tm, tout;
} vw_state;

/* t0 in (absent for fill), t1 out; s0 op, s1 alpha/value (f32), s2 us to
 * sleep before reading, s3 us to sleep before writing. */
static int vw_op(const pto_kctx *ctx) {
  const int op = (int)ctx->scalars[0];
  const float v = pto_kctx_scalar_f32(ctx, 1);
  const pto_tensor *out = &ctx->tensors[ctx->ntensors - 1];
  const int64_t n = pto_tensor_numel(out);
  float tmp[VW_N];
  if (n > VW_N) return PTO_EINVAL;
  cs_sleep_us((int64_t)ctx->scalars[2]);
  for (int64_t i = 0; i < n; i++)
    tmp[i] = op == VW_FILL ? v : *(const float *)pto_tensor_at_linear(&ctx->tensors[0], i);
  cs_sleep_us((int64_t)ctx->scalars[3]);
  for (int64_t i = 0; i < n; i++)
    *(float *)pto_tensor_at_linear(out, i) = op == VW_SCALE ? v * tmp[i] : tmp[i];
  return PTO_OK;
}

#define VW_SLOW 3000

static int vw_task(pto_orch *o, const vw_state *st, int op, float v, const pto_tensor *in,
                   pto_tensor *out, pto_access out_mode) {
  pto_args a;
  pto_args_init(&a);
  if (in) pto_args_input(&a, in);
  pto_args_add(&a, out_mode, out);
  pto_args_scalar(&a, (uint64_t)op);
  pto_args_scalar_f32(&a, v);
  pto_args_scalar(&a, out_mode == PTO_OUTPUT ? VW_SLOW : 0); /* a reader: read late */
  pto_args_scalar(&a, out_mode == PTO_OUTPUT ? 0 : VW_SLOW); /* a writer: write late */
  return pto_submit(o, st->k_op, &a, NULL, NULL);
}

static void vw_orch(pto_orch *o, void *arg) {
  vw_state *st = arg;
  pto_tensor mt, rows, cols, mt_rows, flat, odd, cube, cube_s, T, C, R, S, out2;
  int64_t rs[2] = {2, 0}, rn[2] = {2, VW_D}, cs[2] = {0, 1}, cn[2] = {VW_D, 2};
  int64_t ts[2] = {5, 0}, tn[2] = {2, VW_D}, flat_shape[1] = {VW_N};
  int64_t odd_shape[2] = {VW_D / 2, VW_D}, odd_stride[2] = {2 * VW_D, 1};
  int64_t cube_shape[3] = {2, 4, VW_D}, ss[3] = {1, 0, 0}, sn[3] = {1, 2, VW_D};
  int64_t out_shape[2] = {4, 16};
  if (pto_tensor_transpose(&st->tm, 0, 1, &mt) || pto_tensor_slice(&st->tm, rs, rn, &rows) ||
      pto_tensor_slice(&st->tm, cs, cn, &cols) || pto_tensor_slice(&mt, ts, tn, &mt_rows) ||
      pto_tensor_reshape(&st->tm, 1, flat_shape, &flat) ||
      pto_tensor_view(&st->tm, 2, odd_shape, odd_stride, VW_D, &odd) ||
      pto_tensor_reshape(&st->tm, 3, cube_shape, &cube) ||
      pto_tensor_slice(&cube, ss, sn, &cube_s) ||
      pto_tensor_reshape(&st->tm, 2, out_shape, &out2) || cs_desc2(&T, VW_D, VW_D) ||
      cs_desc2(&C, VW_D, 2) || pto_tensor_desc(&R, PTO_F32, 1, flat_shape) ||
      pto_tensor_desc(&S, PTO_F32, 3, sn)) {
    pto_orch_fatal(o, "views: a view could not be built");
    return;
  }
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  if (vw_task(o, st, VW_COPY, 0, &mt, &T, PTO_OUTPUT) ||
      vw_task(o, st, VW_SCALE, 10.0f, &rows, &rows, PTO_OUTPUT_EXISTING) ||
      vw_task(o, st, VW_COPY, 0, &cols, &C, PTO_OUTPUT) ||
      vw_task(o, st, VW_FILL, 7.0f, NULL, &mt_rows, PTO_OUTPUT_EXISTING) ||
      vw_task(o, st, VW_COPY, 0, &flat, &R, PTO_OUTPUT) ||
      vw_task(o, st, VW_SCALE, -1.0f, &odd, &odd, PTO_OUTPUT_EXISTING) ||
      vw_task(o, st, VW_COPY, 0, &cube_s, &S, PTO_OUTPUT) ||
      vw_task(o, st, VW_COPY, 0, &out2, &st->tout, PTO_OUTPUT_EXISTING))
    return;
  if (pto_orch_read(o, &T, st->t, -1) || pto_orch_read(o, &C, st->c, -1) ||
      pto_orch_read(o, &R, st->r, -1) || pto_orch_read(o, &S, st->s, -1))
    return;
  pto_scope_end(o);
}

static bool vw_check(const vw_state *st, pto_scene_report *rep) {
  float m[VW_N], t[VW_N], c[VW_D * 2], r[VW_N], s[2 * VW_D];
  for (int i = 0; i < VW_N; i++)
    m[i] = (float)i;
  for (int i = 0; i < VW_D; i++)
    for (int j = 0; j < VW_D; j++)
      t[i * VW_D + j] = m[j * VW_D + i];
  for (int i = 2 * VW_D; i < 4 * VW_D; i++)
    m[i] *= 10.0f;
  for (int i = 0; i < VW_D; i++)
    for (int j = 0; j < 2; j++)
      c[i * 2 + j] = m[i * VW_D + 1 + j];
  for (int i = 0; i < VW_D; i++)
    m[i * VW_D + 5] = m[i * VW_D + 6] = 7.0f;
  memcpy(r, m, sizeof r);
  for (int i = 1; i < VW_D; i += 2)
    for (int j = 0; j < VW_D; j++)
      m[i * VW_D + j] *= -1.0f;
  memcpy(s, &m[4 * VW_D], sizeof s);
  return scene_check_f32(rep, "T = M^T", st->t, t, VW_N, 0) &&
         scene_check_f32(rep, "C = M[:, 1:3]", st->c, c, VW_D * 2, 0) &&
         scene_check_f32(rep, "R = reshape(M)", st->r, r, VW_N, 0) &&
         scene_check_f32(rep, "S = rows 4, 5 through a 3-D view", st->s, s, 2 * VW_D, 0) &&
         scene_check_f32(rep, "Out = reshape(M, [4, 16])", st->out, m, VW_N, 0) &&
         scene_check_f32(rep, "M at the end", st->m, m, VW_N, 0);
}

static int views_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  vw_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "views");
  int rc = cs_view2(&st->tm, st->m, PTO_F32, VW_D, VW_D);
  rc |= cs_view2(&st->tout, st->out, PTO_F32, 4, 16);
  pto_chip_config cfg;
  scene_chip_config(opts, 4, 0, &cfg);
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernel_register_aiv(chip, "view_op", vw_op, &st->k_op);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  for (int r = 0; r < rounds && !rc; r++) {
    for (int i = 0; i < VW_N; i++)
      st->m[i] = (float)i;
    rc = scene_run_rounds(chip, &one, vw_orch, st, rep);
    if (!rc && !(rep->verified = vw_check(st, rep))) break;
  }
  if (rc)
    cs_run_failed(rep, rc, "views");
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "8 tasks on transposed, sliced, strided, reshaped and 3-D views of one buffer: "
             "every read saw the sequential data");
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(views, "slices, transposes, reshapes and strided views as task args, with deps",
          views_run);
