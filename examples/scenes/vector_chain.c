/* vector_chain.c — a chain of 5 AIV tasks, the last four inside an inner
 * scope, with SPMD block counts 1..4:
 *
 *   outer scope:  c = a + b
 *   inner scope:  d = 0.5 * c;  e = c * d;  g = e + d;  out = g + c
 *
 * c, d, e, g are runtime-allocated intermediates (OUTPUT); out is the
 * caller's buffer (OUTPUT_EXISTING). Every link is inferred from the tensor
 * regions; the result must equal the same arithmetic done sequentially. */
#include <stdlib.h>

#include "chip_scenes.h"

#define VC_ROWS 32
#define VC_COLS 64
#define VC_N    (VC_ROWS * VC_COLS)

typedef struct vc_state {
  pto_kernel_ids k;
  float a[VC_N], b[VC_N], out[VC_N];
  pto_tensor ta, tb, tout;
} vc_state;

static int vc_binary(pto_orch *o, int kernel, const pto_tensor *x, const pto_tensor *y,
                     pto_tensor *z, bool existing, int blocks) {
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, x);
  pto_args_input(&a, y);
  if (existing)
    pto_args_output_existing(&a, z);
  else
    pto_args_output(&a, z);
  return cs_submit(o, kernel, &a, blocks, NULL);
}

static void vc_orch(pto_orch *o, void *arg) {
  vc_state *st = arg;
  pto_tensor c, d, e, g;
  if (cs_desc2(&c, VC_ROWS, VC_COLS) || cs_desc2(&d, VC_ROWS, VC_COLS) ||
      cs_desc2(&e, VC_ROWS, VC_COLS) || cs_desc2(&g, VC_ROWS, VC_COLS)) {
    pto_orch_fatal(o, "vector_chain: bad descriptor");
    return;
  }
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  if (vc_binary(o, st->k.add, &st->ta, &st->tb, &c, false, 2)) return;
  if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &c);
  pto_args_output(&a, &d);
  pto_args_scalar_f32(&a, 0.5f);
  if (cs_submit(o, st->k.scale, &a, 3, NULL)) return;
  if (vc_binary(o, st->k.mul, &c, &d, &e, false, 4)) return;
  if (vc_binary(o, st->k.add, &e, &d, &g, false, 1)) return;
  if (vc_binary(o, st->k.add, &g, &c, &st->tout, true, 2)) return;
  if (pto_scope_end(o)) return;
  pto_scope_end(o);
}

static int vector_chain_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  vc_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "vector_chain");
  cs_fill_rand(st->a, VC_N, 11 + opts->seed);
  cs_fill_rand(st->b, VC_N, 23 + opts->seed);
  for (int i = 0; i < VC_N; i++)
    st->out[i] = -1e30f;
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  pto_chip *chip = NULL;
  int rc = cs_view2(&st->ta, st->a, PTO_F32, VC_ROWS, VC_COLS);
  if (!rc) rc = cs_view2(&st->tb, st->b, PTO_F32, VC_ROWS, VC_COLS);
  if (!rc) rc = cs_view2(&st->tout, st->out, PTO_F32, VC_ROWS, VC_COLS);
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = scene_run_rounds(chip, opts, vc_orch, st, rep);
  if (rc) {
    cs_run_failed(rep, rc, "vector_chain");
  } else {
    float ref[VC_N];
    for (int i = 0; i < VC_N; i++) {
      float c = st->a[i] + st->b[i], d = 0.5f * c, e = c * d, g = e + d;
      ref[i] = g + c;
    }
    rep->verified = scene_check_f32(rep, "out", st->out, ref, VC_N, 1e-6f);
    if (rep->verified)
      snprintf(rep->message, sizeof rep->message,
               "5 AIV tasks (1 in the outer scope, 4 in an inner one), %dx%d, 1-4 blocks each: "
               "out = 0.5(a+b)^2 + 1.5(a+b) matches the sequential reference",
               VC_ROWS, VC_COLS);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(vector_chain,
               "chain of 5 AIV tasks with an inner scope (intermediates from the heap)",
               vector_chain_run, PTO_SCENE_RANDOM);
