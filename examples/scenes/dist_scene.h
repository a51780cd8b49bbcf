/* dist_scene.h — shared pieces of the multi-chip scenes (acceptance scenes
 * 1-10 of the node/comm spec): a small node config from the scene options,
 * the generic chip orchestration that runs one kernel per rank, and the
 * scene inputs (row r = 100 r + 0..63).
 *
 * Convention for node-task arguments: scalar 0 = kernel id, scalar 1 =
 * tensors per rank (k), then the scene's scalars; tensors k*g .. k*g+k-1
 * belong to group rank g. A group task declares every rank's tensors, so
 * node-level dependency inference sees all of them. */
#ifndef PTO_DIST_SCENE_H
#define PTO_DIST_SCENE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pto/comm.h"
#include "pto/node.h"
#include "scene.h"

#define DIST_SIZE 64
#define DIST_HALF 32

static inline void dist_config(const pto_scene_opts *o, int nchips, pto_chip_init_fn init,
                               pto_node_config *cfg) {
  pto_node_config_init(cfg);
  cfg->nchips = nchips;
  cfg->chip.clusters = o->clusters > 0 ? o->clusters : 2;
  cfg->chip.schedulers = o->schedulers > 0 ? o->schedulers : 1; /* too many: node create says so */
  cfg->chip.task_slots = 256;
  cfg->chip.heap_bytes = 1u << 20;
  cfg->chip.watchdog_ms = 10000;
  cfg->chip_init = init;
  cfg->host_bytes = 4u << 20;
  cfg->window_space = 64u << 20;
  cfg->startup_timeout_ms = 30000;
  cfg->control_timeout_ms = 10000;
  cfg->wait_timeout_ms = 5000;
  cfg->lease_wait_ms = 60000; /* parallel test runs share device ids: wait, don't fail */
  cfg->fault_inject = o->fault_inject;
  cfg->fault_seed = o->seed;
  cfg->trace_path = o->trace; /* one merged trace, one process per rank */
}

/* Chip orchestration: submits kernel scalars[0] with this rank's tensors. */
static inline void dist_chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_args *na = t->args;
  int k = (int)na->scalars[1];
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < k; i++)
    pto_args_add(&a, (pto_access)na->access[t->group_rank * k + i],
                 &na->tensors[t->group_rank * k + i]);
  for (int i = 0; i < na->nscalars; i++)
    pto_args_scalar(&a, na->scalars[i]);
  pto_submit_opts so = {.block_num = (int)na->scalars[2] > 0 ? (int)na->scalars[2] : 1};
  pto_submit(o, (int)na->scalars[0], &a, &so, NULL);
}

/* After the tensors (scalars come last): kernel `kid`, k tensors per rank,
 * `blocks` blocks; the scene's own scalars follow (DIST_SCALAR). */
static inline void dist_scalars(pto_args *a, int kid, int k, int blocks) {
  pto_args_scalar(a, (uint64_t)kid);
  pto_args_scalar(a, (uint64_t)k);
  pto_args_scalar(a, (uint64_t)blocks);
}
#define DIST_SCALAR(ctx, i) ((ctx)->scalars[3 + (i)])

/* Host input: row r = 100 r + 0..63, for nrows ranks. */
static inline int dist_inputs(pto_node *n, int nrows, pto_tensor *in) {
  int64_t sh[2] = {nrows, DIST_SIZE};
  int rc = pto_node_host_tensor(n, PTO_F32, 2, sh, in);
  for (int r = 0; rc == 0 && r < nrows; r++)
    for (int i = 0; i < DIST_SIZE; i++)
      pto_tensor_f32(in)[r * DIST_SIZE + i] = (float)(100 * r + i);
  return rc;
}

static inline pto_tensor dist_row(const pto_tensor *t, int r) {
  int64_t st[2] = {r, 0}, sh[2] = {1, t->shape[1]};
  pto_tensor v, row;
  pto_tensor_slice(t, st, sh, &v);
  pto_tensor_reshape(&v, 1, &sh[1], &row);
  return row;
}

/* Local copy of a view into another (same numel), for kernels. */
static inline void dist_copy(const pto_tensor *dst, const pto_tensor *src) {
  size_t es = pto_dtype_size((pto_dtype)src->dtype);
  unsigned char tmp[8];
  for (int64_t i = 0; i < pto_tensor_numel(src); i++) {
    memcpy(tmp, pto_tensor_at_linear(src, i), es);
    memcpy(pto_tensor_at_linear(dst, i), tmp, es);
  }
}

/* The node statistics of the last run, for the report (pto run prints them). */
static inline void dist_node_stats(pto_scene_report *rep, const pto_node *n) {
  pto_node_stats_get(n, &rep->node);
}

/* Fills the report of a node run; returns false when it failed. */
static inline bool dist_status(pto_scene_report *rep, int rc, const pto_error_info *err) {
  rep->status = rc;
  if (err) rep->err = *err;
  if (rc && err)
    snprintf(rep->message, sizeof rep->message, "%s: %.400s", pto_status_name(rc), err->details);
  return rc == 0;
}

/* ---- the shape most 2-chip scenes share ---- */

static const int dist_pair_chips[2] = {0, 1};

/* A domain over chips 0 and 1 with "dst" (DIST_SIZE f32) and "sig". */
static inline int dist_dst_sig_domain(pto_node_orch *no, pto_domain *dom) {
  const pto_window_buffer bufs[] = {{"dst", DIST_SIZE * 4}, {"sig", 8}};
  return pto_node_domain_create(no, dist_pair_chips, 2, bufs, 2, dom);
}

/* One group task on chips 0 and 1 running kernel `kid` (1 block): rank r
 * gets row r of io[0] (INPUT), then, when dst_sig, its own "dst" and "sig"
 * window buffers (INOUT: the peer stores and signals into them), then row r
 * of io[1] (OUTPUT_EXISTING); the scene's scalar 0 is the domain. */
static inline void dist_pair_group_targets(pto_node_orch *no, const pto_tensor *io, int kid,
                                           pto_domain dom, bool dst_sig,
                                           const pto_window_buffer *targets, int ntargets);
static inline void dist_pair_group(pto_node_orch *no, const pto_tensor *io, int kid, pto_domain dom,
                                   bool dst_sig) {
  dist_pair_group_targets(no, io, kid, dom, dst_sig, NULL, 0);
}

/* dist_pair_group, declaring after the ranks' tensors each rank's window
 * buffers targets[0..ntargets) whole (as bytes, INOUT): where its peer
 * stores (the task's window targets) or loads from (docs/contracts.md,
 * "Node runs").
 * dist_chip_orch passes the chips only the per-rank tensors before them. */
static inline void dist_pair_group_targets(pto_node_orch *no, const pto_tensor *io, int kid,
                                           pto_domain dom, bool dst_sig,
                                           const pto_window_buffer *targets, int ntargets) {
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t n = DIST_SIZE, one = 1;
    pto_tensor in = dist_row(&io[0], r), out = dist_row(&io[1], r), dst, sig;
    pto_args_input(&a, &in);
    if (dst_sig) {
      pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &n, &dst);
      pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
      pto_args_inout(&a, &dst);
      pto_args_inout(&a, &sig);
    }
    pto_args_output_existing(&a, &out);
  }
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < ntargets; i++) {
      int64_t bytes = (int64_t)targets[i].bytes;
      pto_tensor v;
      if (pto_node_window_tensor(no, dom, r, targets[i].name, PTO_U8, 1, &bytes, &v) == 0)
        pto_args_inout(&a, &v);
    }
  dist_scalars(&a, kid, dst_sig ? 4 : 2, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, dist_pair_chips, 2, dist_chip_orch, &a, NULL);
}

/* A 2-chip scene: node orchestration `node_fn` gets io[0] = the inputs
 * [2, DIST_SIZE] (row r = 100 r + i) and io[1] = a host output [2, out_cols]
 * zeroed before each of opts->rounds runs; after each run io[1] must equal
 * want[2 * out_cols] (the whole tensors are printed if not). */
typedef struct dist_pair_scene {
  const char *label;
  pto_chip_init_fn init;
  void (*node_fn)(pto_node_orch *no, void *io);
  int64_t out_cols;
  const float *want;
  const int *device_ids; /* NULL: 0 and 1 */
  int64_t lease_wait_ms; /* < 0: dist_config's */
} dist_pair_scene;

static inline int dist_run_pair(const pto_scene_opts *o, const dist_pair_scene *sc,
                                pto_scene_report *rep) {
  pto_node_config cfg;
  dist_config(o, 2, sc->init, &cfg);
  if (sc->device_ids) cfg.device_ids = sc->device_ids;
  if (sc->lease_wait_ms >= 0) cfg.lease_wait_ms = sc->lease_wait_ms;
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (!dist_status(rep, rc, &rep->err)) return rc;
  pto_tensor io[2];
  int64_t sh[2] = {2, sc->out_cols};
  rc = dist_inputs(n, 2, &io[0]);
  if (!rc) rc = pto_node_host_tensor(n, PTO_F32, 2, sh, &io[1]);
  for (int round = 0; rc == 0 && round < (o->rounds > 0 ? o->rounds : 1); round++) {
    memset(io[1].buf, 0, io[1].buf_bytes);
    pto_error_info err;
    rc = pto_node_run(n, sc->node_fn, io, &err);
    dist_node_stats(rep, n);
    if (dist_status(rep, rc, &err)) {
      char label[96];
      snprintf(label, sizeof label, "%s out", sc->label);
      rep->verified = scene_check_f32(rep, label, pto_tensor_f32(&io[1]), sc->want,
                                      (size_t)(2 * sc->out_cols), 0.0f);
      if (!rep->verified) rc = PTO_EFATAL;
    }
  }
  pto_node_destroy(n);
  return rc;
}

/* ring_shuffle on the given device ids (NULL: 0 and 1), waiting at most
 * lease_wait_ms for a leased device (0: fail fast with PTO_EDEVICE_BUSY);
 * used by the concurrent-runs test. */
int ring_shuffle_leased(const pto_scene_opts *o, const int *device_ids, int64_t lease_wait_ms,
                        pto_scene_report *rep);

/* ---- the node checking-mode scenes (err_contract_remote_*, _signal) ---- */

/* One group task on chips 0 and 1 running kernel `kid` (1 block) over a
 * domain with the one window buffer `buf` of buf_bytes: its views are, per
 * rank r, the first `count` `dt` elements of r's `buf`, INPUT or INOUT
 * (what the task declares it reads or writes there); its scalar 0 is the
 * domain. */
static inline void dist_window_group(pto_node_orch *no, const char *buf, uint64_t buf_bytes,
                                     pto_dtype dt, int64_t count, bool input, int kid) {
  const pto_window_buffer bufs[] = {{buf, buf_bytes}};
  pto_domain dom;
  if (pto_node_domain_create(no, dist_pair_chips, 2, bufs, 1, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    pto_tensor v;
    if (pto_node_window_tensor(no, dom, r, buf, dt, 1, &count, &v)) return;
    if (input)
      pto_args_input(&a, &v);
    else
      pto_args_inout(&a, &v);
  }
  dist_scalars(&a, kid, 1, 1);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, dist_pair_chips, 2, dist_chip_orch, &a, NULL);
}

/* Runs `node` once on chips 0 and 1 (kernels registered by `init`) in
 * checking mode with seed 1, expecting PTO_ECONTRACT whose details hold
 * want[0] and want[1]. The report says `refused` (what was refused, and
 * how it was named) when so, else what the error had to name (`naming`)
 * and what came instead. */
static inline int dist_contract_run(const pto_scene_opts *o, pto_scene_report *rep,
                                    pto_chip_init_fn init, pto_node_orch_fn node,
                                    const char *const want[2], const char *refused,
                                    const char *naming) {
  pto_node_config cfg;
  dist_config(o, 2, init, &cfg);
  cfg.chip.check = 1; /* checking mode, whatever the environment says */
  cfg.chip.check_seed = 1;
  rep->expected_status = PTO_ECONTRACT;
  pto_node *n;
  int rc = scene_node_create(&cfg, &n, rep);
  if (rc) return dist_status(rep, rc, &rep->err), rc;
  pto_error_info err;
  rc = pto_node_run(n, node, NULL, &err);
  dist_node_stats(rep, n);
  pto_node_destroy(n);
  rep->status = rc;
  rep->err = err;
  rep->verified = rc == PTO_ECONTRACT;
  for (int i = 0; i < 2 && rep->verified; i++)
    rep->verified = strstr(err.details, want[i]) != NULL;
  if (rep->verified)
    snprintf(rep->message, sizeof rep->message, "PTO_ECONTRACT as expected: %s", refused);
  else
    snprintf(rep->message, sizeof rep->message, "expected PTO_ECONTRACT naming %s, got %s: %.400s",
             naming, rc ? pto_status_name(rc) : "success", err.details);
  return rc;
}

#endif
