/* err_contract_write_past.c — PTO_ECONTRACT: a kernel writes one element
 * past its OUTPUT_EXISTING view (row 0 of a two-row buffer): checking mode
 * names argument 0 and byte 64, the first byte of element 16. */
#include "contract_scenes.h"

static int wp_kernel(const pto_kctx *ctx) {
  int32_t *out = (int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  for (int j = 0; j <= CT_N; j++) /* <=: one element too many */
    out[j] = 0x11;
  return PTO_OK;
}

static void wp_orch(pto_orch *o, void *arg) {
  ct_state *st = arg;
  pto_tensor row0;
  int64_t shape[1] = {CT_N};
  if (pto_tensor_init(&row0, st->out, sizeof st->out, PTO_I32, 1, shape)) return;
  pto_submit_v(o, st->k, PTO_OUT_EXISTING(&row0));
}

static int err_contract_write_past_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  static const ct_expect e = {
      "err_contract_write_past", 0, "argument 0 (OUTPUT_EXISTING, buffer",
      "the report names task 0, kernel \"contract_breaker\", argument 0 and its byte 64 "
      "(element 16, one past the view) changed 0x00 -> 0x11"};
  int rc = ct_run(opts, rep, wp_kernel, wp_orch, &e);
  cs_expect_details(rep, "byte 64 changed 0x00 -> 0x11, outside its OUTPUT/INOUT views");
  return rc;
}

PTO_SCENE(err_contract_write_past, "PTO_ECONTRACT: a kernel writes one element past its OUTPUT",
          err_contract_write_past_run);
