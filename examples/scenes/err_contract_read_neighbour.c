/* err_contract_read_neighbour.c — PTO_ECONTRACT: a kernel declares row 1
 * of a 4-row matrix as its INPUT but adds row 2 too. Run again with the
 * bytes outside its INPUT flipped, its output differs: checking mode names
 * argument 1 (the output), byte 0: 0x2c (100 + 200 = 300) on the declared
 * inputs, 0x9b (100 + ~200 = -101) with row 2 flipped. */
#include "contract_scenes.h"

static int rn_kernel(const pto_kctx *ctx) {
  const int32_t *row = (const int32_t *)ctx->tensors[0].buf + ctx->tensors[0].offset;
  int32_t *out = (int32_t *)ctx->tensors[1].buf + ctx->tensors[1].offset;
  for (int j = 0; j < CT_N; j++)
    out[j] = row[j] + row[CT_N + j]; /* row[CT_N + j]: the next row, not declared */
  return PTO_OK;
}

static void rn_orch(pto_orch *o, void *arg) {
  ct_state *st = arg;
  pto_tensor m, row1, out;
  int64_t mshape[2] = {4, CT_N}, start[2] = {1, 0}, rshape[2] = {1, CT_N}, oshape[1] = {CT_N};
  if (pto_tensor_init(&m, st->m, sizeof st->m, PTO_I32, 2, mshape) ||
      pto_tensor_slice(&m, start, rshape, &row1) ||
      pto_tensor_init(&out, st->out, sizeof st->out, PTO_I32, 1, oshape))
    return;
  pto_submit_v(o, st->k, PTO_IN(&row1), PTO_OUT_EXISTING(&out));
}

static int err_contract_read_neighbour_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  static const ct_expect e = {
      "err_contract_read_neighbour", 1,
      "reads memory it did not declare: argument 1's byte 0 came out 0x2c, but 0x9b",
      "the report names task 0, kernel \"contract_breaker\", its output argument 1 and byte 0: "
      "0x2c on the declared inputs, 0x9b with the undeclared row flipped"};
  int rc = ct_run(opts, rep, rn_kernel, rn_orch, &e);
  cs_expect_details(rep, "pto_kernel_skip_read_check");
  return rc;
}

PTO_SCENE(err_contract_read_neighbour,
          "PTO_ECONTRACT: a kernel reads a neighbour row it did not declare",
          err_contract_read_neighbour_run);
