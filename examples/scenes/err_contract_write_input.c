/* err_contract_write_input.c — PTO_ECONTRACT: a kernel copies its INPUT
 * (argument 0) to its OUTPUT_EXISTING and also writes element 3 of the
 * INPUT: checking mode names argument 0, byte 12, 0x03 -> 0x22. */
#include "contract_scenes.h"

static int wi_kernel(const pto_kctx *ctx) {
  int32_t *in = (int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  int32_t *out = (int32_t *)ctx->tensors[1].buf + ctx->tensors[1].offset;
  for (int j = 0; j < CT_N; j++)
    out[j] = in[j];
  in[3] = 0x22; /* the breach */
  return PTO_OK;
}

static void wi_orch(pto_orch *o, void *arg) {
  ct_state *st = arg;
  pto_tensor in, out;
  int64_t shape[1] = {CT_N};
  if (pto_tensor_init(&in, st->m[0], sizeof st->m[0], PTO_I32, 1, shape) ||
      pto_tensor_init(&out, st->out, sizeof st->out, PTO_I32, 1, shape))
    return;
  pto_submit_v(o, st->k, PTO_IN(&in), PTO_OUT_EXISTING(&out));
}

static int err_contract_write_input_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  static const ct_expect e = {
      "err_contract_write_input", 0, "byte 12 changed 0x03 -> 0x22, inside its INPUT view",
      "the report names task 0, kernel \"contract_breaker\", its INPUT argument 0 and byte 12 "
      "(element 3) changed 0x03 -> 0x22"};
  return ct_run(opts, rep, wi_kernel, wi_orch, &e);
}

PTO_SCENE(err_contract_write_input, "PTO_ECONTRACT: a kernel writes into its INPUT",
          err_contract_write_input_run);
