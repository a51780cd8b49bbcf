/* err_contract_host_read.c — PTO_ECONTRACT on a node: a host task reads a
 * row of node host memory that it did not declare.
 *
 * One chip and one host worker in checking mode. x is a [2, 8] i32 host
 * tensor (x[r][j] = 8 r + j + 1); the host task declares row 0 of x INPUT
 * and y (8 i32) OUTPUT_EXISTING, but computes y[j] = x[0][j] + x[1][0]:
 * x[1][0] is past its view. The real run leaves y[0] = 1 + 9 = 0x0a; run
 * again with every byte of node host memory outside its views flipped,
 * x[1][0] reads ~9 = -10 and y[0] comes out -9 (byte 0: 0xf7). The run
 * names node task 0, the host function and argument 1's byte 0. */
#include "dist_scene.h"

#define HR_COLS 8

static int peek_row(const pto_args *a, void *arg) {
  (void)arg;
  const int32_t *x = (const int32_t *)a->tensors[0].buf + a->tensors[0].offset;
  int32_t *y = (int32_t *)a->tensors[1].buf + a->tensors[1].offset;
  for (int j = 0; j < HR_COLS; j++)
    y[j] = x[j] + x[HR_COLS]; /* x[HR_COLS]: row 1, not declared */
  return 0;
}

typedef struct host_io {
  pto_tensor x, y;
} host_io;

static void host_read_node(pto_node_orch *no, void *arg) {
  host_io *io = arg;
  int64_t at[2] = {0, 0}, sh[2] = {1, HR_COLS};
  pto_tensor row0;
  if (pto_tensor_slice(&io->x, at, sh, &row0)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &row0);
  pto_args_output_existing(&a, &io->y);
  pto_node_submit_host(no, -1, peek_row, NULL, &a, NULL);
}

static int err_contract_host_read_run(const pto_scene_opts *o, pto_scene_report *rep) {
  static const char *const want[] = {
      "host worker 0, node task 0: host function ",
      "reads memory it did not declare: argument 1's byte 0 came out 0x0a, but 0xf7 when every "
      "byte of node host memory outside its views was flipped"};
  pto_node_config cfg;
  dist_config(o, 1, NULL, &cfg);
  cfg.nworkers = 1;
  cfg.chip.check = 1; /* checking mode, whatever the environment says */
  cfg.chip.check_seed = 1;
  rep->expected_status = PTO_ECONTRACT;
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (rc) return dist_status(rep, rc, &rep->err), rc;
  host_io io;
  int64_t xs[2] = {2, HR_COLS}, ys = HR_COLS;
  rc = pto_node_host_tensor(n, PTO_I32, 2, xs, &io.x);
  if (!rc) rc = pto_node_host_tensor(n, PTO_I32, 1, &ys, &io.y);
  pto_error_info err;
  memset(&err, 0, sizeof err);
  if (!rc) {
    for (int i = 0; i < 2 * HR_COLS; i++)
      ((int32_t *)io.x.buf)[i] = i + 1;
    rc = pto_node_run(n, host_read_node, &io, &err);
  }
  dist_node_stats(rep, n);
  pto_node_destroy(n);
  rep->status = rc;
  rep->err = err;
  rep->verified = rc == PTO_ECONTRACT && err.arg == 1;
  for (int i = 0; i < 2 && rep->verified; i++)
    rep->verified = strstr(err.details, want[i]) != NULL;
  if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "PTO_ECONTRACT as expected: the host task's read of x[1][0], outside its INPUT row, "
             "named at argument 1's byte 0 (0x0a, 0xf7 with the row flipped)");
  else
    snprintf(rep->message, sizeof rep->message,
             "expected PTO_ECONTRACT naming argument 1's byte 0, got %s (argument %d): %.400s",
             rc ? pto_status_name(rc) : "success", err.arg, err.details);
  return rc;
}

PTO_SCENE_WITH(err_contract_host_read,
               "PTO_ECONTRACT: a node host task reads a row of host memory it did not declare",
               err_contract_host_read_run, PTO_SCENE_MULTI_CHIP);
