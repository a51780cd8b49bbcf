"""cffi builder of pto._pto (API mode): compiled against pto's public headers.

The cdef below names only what the Python layer uses. Struct fields are
declared with a trailing ``...;`` so that cffi takes their layout from the
real headers at compile time (integer fields get the header's type; a
pointer or function type that differs is a build error); nothing here is a
hand-copied mirror of a C struct.

Environment (read by setup.py): PTO_BUILD_DIR (CMake build tree holding
src/libpto.so), PTO_SOURCE_DIR (the repository root, for include/).
"""
import os

from cffi import FFI

NTRAMP = 256  # Python kernels per process (one C trampoline each)
NTRAMP_REDUX = 64  # reduction ops registered from Python at once, over all live chips

CDEF = r"""
#define PTO_MAX_DIMS ...
#define PTO_MAX_TENSOR_ARGS ...
#define PTO_MAX_SCALAR_ARGS ...
#define PTO_MAX_SCOPE_DEPTH ...
#define PTO_NODE_MAX_CHIPS ...
#define PTO_NODE_MAX_WORKERS ...
#define PTO_COMM_MAX_RANKS ...
#define PTO_COMM_MAX_BUFFERS ...
#define PTO_COMM_NAME_MAX ...
#define PTO_VERSION_MAJOR ...
#define PTO_VERSION_MINOR ...
#define PTO_VERSION_PATCH ...

typedef int64_t pto_task_id;
typedef int32_t pto_domain;

typedef struct pto_tensor {
  void *buf; size_t buf_bytes; int64_t offset; int32_t dtype; int32_t ndims;
  int64_t shape[...]; int64_t stride[...]; uint64_t alloc_tag; ...;
} pto_tensor;

typedef enum pto_core_type { PTO_CORE_AIC, PTO_CORE_AIV, ... } pto_core_type;

typedef struct pto_kctx {
  int32_t block_idx; int32_t block_num; int32_t sub_block_id; int32_t core_id;
  int32_t cluster_id; pto_core_type core_type; pto_task_id task_id;
  int32_t ntensors; int32_t nscalars; const pto_tensor *tensors;
  const uint64_t *scalars; void *env; ...;
} pto_kctx;
typedef int (*pto_kernel_fn)(const pto_kctx *ctx);

typedef struct pto_chip pto_chip;
typedef struct pto_orch pto_orch;
typedef struct pto_chip_config {
  int clusters; int aic_per_cluster; int aiv_per_cluster; int schedulers;
  uint32_t task_slots; size_t heap_bytes; uint32_t dep_entries;
  uint32_t tensormap_entries; int64_t alloc_timeout_ms; int64_t watchdog_ms;
  int64_t shutdown_ms; uint32_t async_slots; int sched_threads; int spread_cores; void *env;
  int check; uint64_t check_seed;
  uint64_t schedule_seed; const char *record_path; const char *replay_path;
  ...;
} pto_chip_config;

typedef struct pto_kernel_desc {
  const char *name; pto_kernel_fn aic; pto_kernel_fn aiv; int aiv_count; ...;
} pto_kernel_desc;

typedef enum pto_stall_class { PTO_STALL_NONE, ... } pto_stall_class;
typedef struct pto_error_info {
  int code; pto_stall_class stall; pto_task_id task_id; int core_id;
  char kernel[...]; char details[...]; int32_t arg; ...;
} pto_error_info;

typedef struct pto_run_stats {
  uint64_t tasks; uint64_t blocks; double host_us; double device_us; double orch_us;
  double sched_us; double effective_us; uint64_t sync_tasks; uint64_t sync_fast_launches;
  uint64_t drains; uint64_t drain_attempts; uint64_t drain_max_attempts;
  double cohort_spread_max_us; double cohort_spread_sum_us; double drain_latency_max_us;
  double drain_latency_sum_us; uint64_t pull_holds; uint64_t steals; uint64_t handoffs; uint64_t head_yields; uint64_t gathered; ...;
} pto_run_stats;

typedef void (*pto_orch_fn)(pto_orch *orch, void *arg);

typedef struct pto_kernel_ids {
  int add, mul, scale, exp, copy, fill, matmul, matmul_acc, softmax_rows, online_softmax,
      normalize_rows, row_sum, row_max, col_sum, col_max; ...;
} pto_kernel_ids;

typedef struct pto_submit_opts {
  int block_num; bool sync_start; const pto_task_id *deps; int ndeps; ...;
} pto_submit_opts;

const char *pto_version(void);
const char *pto_status_name(int status);
const char *pto_strerror(int status);
const char *pto_last_error(void);
const char *pto_stall_class_name(pto_stall_class c);
size_t pto_dtype_size(int dt);
const char *pto_dtype_name(int dt);

void pto_chip_config_init(pto_chip_config *cfg);
const pto_chip_config *pto_chip_get_config(const pto_chip *chip);
bool pto_chip_stuck(pto_chip *chip);
int pto_chip_create_ex(const pto_chip_config *cfg, pto_chip **out, pto_error_info *err);
void pto_chip_destroy(pto_chip *chip);
int pto_kernel_register(pto_chip *chip, const pto_kernel_desc *desc, int *kernel_id);
int pto_kernel_skip_read_check(pto_chip *chip, int kernel_id);
int pto_kernels_register(pto_chip *chip, pto_kernel_ids *ids);
int pto_chip_run(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *stats,
                 pto_error_info *err);
int pto_chip_set_trace(pto_chip *chip, const char *path);

int pto_tensor_validate(const pto_tensor *t);
int pto_tensor_view(const pto_tensor *src, int ndims, const int64_t *shape,
                    const int64_t *stride, int64_t offset, pto_tensor *out);
int pto_tensor_reshape(const pto_tensor *src, int ndims, const int64_t *shape, pto_tensor *out);
int pto_tensor_transpose(const pto_tensor *src, int d0, int d1, pto_tensor *out);
int pto_tensor_desc(pto_tensor *t, int dt, int ndims, const int64_t *shape);

int pto_scope_begin(pto_orch *o, int mode);
int pto_scope_end(pto_orch *o);
int pto_orch_batch_begin(pto_orch *o);
int pto_orch_batch_end(pto_orch *o);
int pto_orch_read(pto_orch *o, const pto_tensor *t, void *dst, int64_t timeout_ms);
int pto_orch_write(pto_orch *o, const pto_tensor *t, const void *src, int64_t timeout_ms);
int pto_orch_wait_task(pto_orch *o, pto_task_id id, int64_t timeout_ms);
int pto_orch_status(const pto_orch *o);

/* comm / node */
typedef struct pto_comm pto_comm;
typedef struct pto_node pto_node;
typedef struct pto_node_orch pto_node_orch;
typedef int (*pto_chip_init_fn)(pto_chip *chip, int chip_rank, void *arg);
typedef struct pto_node_config {
  int nchips; const int *device_ids; int nworkers; pto_chip_config chip;
  pto_chip_init_fn chip_init; void *chip_init_arg; size_t host_bytes; size_t window_space;
  int64_t startup_timeout_ms; int64_t control_timeout_ms; int64_t task_timeout_ms;
  int64_t lease_wait_ms; int64_t wait_timeout_ms; bool fault_inject; uint64_t fault_seed;
  bool quiet; const char *trace_path; int64_t host_task_timeout_ms;
  uint32_t tensormap_entries; ...;
} pto_node_config;
typedef struct pto_window_buffer { const char *name; size_t bytes; ...; } pto_window_buffer;
typedef void (*pto_node_orch_fn)(pto_node_orch *no, void *arg);

void pto_node_config_init(pto_node_config *cfg);
int pto_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err);
void pto_node_destroy(pto_node *node);
void *pto_node_host_alloc(pto_node *node, size_t bytes);
void *pto_node_host_keep(pto_node *node, size_t *bytes);
int pto_node_run(pto_node *node, pto_node_orch_fn fn, void *arg, pto_error_info *err);
int pto_node_cancel(pto_node *node);
int pto_node_wait_all(pto_node_orch *no);
int pto_node_read(pto_node_orch *no, const pto_tensor *t, void *dst);
int pto_node_domain_create(pto_node_orch *no, const int *chips, int nranks,
                           const pto_window_buffer *buffers, int nbuffers, pto_domain *out);
int pto_node_window_tensor(pto_node_orch *no, pto_domain dom, int rank, const char *name,
                           int dt, int ndims, const int64_t *shape, pto_tensor *out);
const char *pto_node_shm_prefix(const pto_node *node);
int pto_node_child_pids(const pto_node *node, int *pids, int max);

typedef struct pto_xfer_opts {
  int64_t chunk_rows; int64_t chunk_cols; const pto_tensor *staging; bool atomic_add; ...;
} pto_xfer_opts;
int pto_comm_chip(const pto_comm *c);
int pto_comm_rank(const pto_comm *c, pto_domain dom);
int pto_comm_size(const pto_comm *c, pto_domain dom);
int pto_remote_store(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                     const pto_tensor *src);
int pto_remote_store_add(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                         const pto_tensor *src);
int pto_remote_load(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
                    const pto_tensor *src);
int pto_put(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts);
int pto_get(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *dst,
            const pto_tensor *src, const pto_xfer_opts *opts);
int pto_notify(const pto_kctx *ctx, pto_domain dom, int peer, const pto_tensor *cell,
               int op, int32_t v);
int pto_signal_wait(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, int cmp,
                    int32_t v, int64_t timeout_ms);
int pto_signal_read(const pto_kctx *ctx, pto_domain dom, const pto_tensor *cell, int32_t *v);
int pto_quiet(const pto_kctx *ctx, pto_domain dom);
int pto_barrier(const pto_kctx *ctx, pto_domain dom);
bool pto_kctx_cancelled(const pto_kctx *ctx);
int pto_kctx_fail(const pto_kctx *ctx, int code, const char *fmt, ...);

size_t pto_coll_scratch_bytes(int nranks, size_t block_bytes);
int pto_coll_register(pto_chip *chip);
int pto_allreduce(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, int op, int algo);
int pto_allgather(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src);
int pto_reduce_scatter(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                       const pto_tensor *dst, const pto_tensor *src, int op);
int pto_broadcast(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                  const pto_tensor *dst, const pto_tensor *src, int root);
int pto_alltoall(const pto_kctx *ctx, pto_domain dom, const pto_tensor *scratch,
                 const pto_tensor *dst, const pto_tensor *src);
int pto_node_allreduce(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src, int op, int algo);
int pto_node_allgather(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src);
int pto_node_reduce_scatter(pto_node_orch *no, pto_domain dom, const char *scratch,
                            const pto_tensor *dst, const pto_tensor *src, int op);
int pto_node_broadcast(pto_node_orch *no, pto_domain dom, const char *scratch,
                       const pto_tensor *dst, const pto_tensor *src, int root);
int pto_node_alltoall(pto_node_orch *no, pto_domain dom, const char *scratch,
                      const pto_tensor *dst, const pto_tensor *src);

/* reference kernels (pto/kernels.h) */
int pto_kern_add(const pto_kctx *ctx);
int pto_kern_mul(const pto_kctx *ctx);
int pto_kern_scale(const pto_kctx *ctx);
int pto_kern_exp(const pto_kctx *ctx);
int pto_kern_copy(const pto_kctx *ctx);
int pto_kern_fill(const pto_kctx *ctx);
int pto_kern_matmul(const pto_kctx *ctx);
int pto_kern_matmul_acc(const pto_kctx *ctx);
int pto_kern_softmax_rows(const pto_kctx *ctx);
int pto_kern_online_softmax(const pto_kctx *ctx);
int pto_kern_normalize_rows(const pto_kctx *ctx);
int pto_kern_row_sum(const pto_kctx *ctx);
int pto_kern_row_max(const pto_kctx *ctx);
int pto_kern_col_sum(const pto_kctx *ctx);
int pto_kern_col_max(const pto_kctx *ctx);

typedef struct pto_args {
  int32_t ntensors; int32_t nscalars; uint8_t access[...]; pto_tensor tensors[...];
  uint64_t scalars[...]; ...;
} pto_args;
int pto_host_fail(const pto_args *args, int code, const char *fmt, ...);

/* glue (set_source below) */
int pyk_submit(pto_orch *o, int kernel_id, int ntensors, const int64_t *desc, int nscalars,
               const uint64_t *scalars, int block_num, int sync_start, const int64_t *deps,
               int ndeps, int dummy, pto_tensor *outs, pto_task_id *id, int priority);
int pyk_node_submit(pto_node_orch *no, const int *chips, int nchips, int kernel_id,
                    int per_rank, const int64_t *desc, int nscalars, const uint64_t *scalars,
                    int block_num, int sync_start, int py_mask, pto_task_id *id);
int pyk_node_submit_host(pto_node_orch *no, int worker, int fn_index, int ntensors,
                         const int64_t *desc, int nscalars, const uint64_t *scalars,
                         int read_check, pto_task_id *id);
int pyk_tensor(pto_tensor *t, const int64_t *d);
pto_kernel_fn pyk_trampoline(int slot);
int pyk_ntrampolines(void);
#define PTO_REDUX_MAX_NAME ...
int pyr_register(pto_chip *chip, const char *name, int dtype, int slot, int *op);
int pyr_ntrampolines(void);
int pyk_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err);
pto_chip_init_fn pyk_chip_init_fn(void);
pto_node_orch_fn pyk_node_orch_fn(void);
pto_comm *pyk_comm(const pto_kctx *ctx);
int pyk_munmap(void *p, size_t bytes);
int pyk_fatal(pto_orch *o, const char *msg);
int pyk_foreign_call(pto_orch *o, int call);
int pyk_node_foreign_call(pto_node_orch *no, int call);
int pyk_chip_run(pto_chip *chip, void *arg, pto_run_stats *stats, pto_error_info *err,
                 int python_sigint);
int pyk_sigint_tripped(void);
int pyk_node_run(pto_node *node, void *arg, pto_error_info *err, int python_sigint);

typedef struct pto_graph pto_graph;
typedef struct pto_graph_info {
  int64_t tasks; int64_t edges; int32_t buffers; int32_t scalars; uint64_t heap_bytes;
  int64_t launches; int64_t warm_launches; ...;
} pto_graph_info;
typedef struct pto_graph_bindings {
  const pto_tensor *buffers; int32_t nbuffers; int32_t nscalars; const uint64_t *scalars; ...;
} pto_graph_bindings;
int pto_graph_get_info(const pto_graph *graph, pto_graph_info *info);
int pto_graph_buffer(const pto_graph *graph, int i, pto_tensor *out);
void pto_graph_destroy(pto_graph *graph);
int pyk_graph_capture(pto_chip *chip, void *arg, pto_graph **graph, pto_run_stats *stats,
                      pto_error_info *err, int python_sigint);
int pyk_graph_launch(pto_chip *chip, pto_graph *graph, const pto_graph_bindings *b,
                     pto_run_stats *stats, pto_error_info *err, int python_sigint);

extern "Python+C" int _pyk_kernel(int slot, const pto_kctx *ctx);
extern "Python+C" void _pyr_init(int slot, void *dst, int64_t n);
extern "Python+C" void _pyr_combine(int slot, void *acc, const void *src, int64_t n);
extern "Python+C" int _pyk_chip_init(pto_chip *chip, int rank, void *arg);
extern "Python+C" void _pyk_orch(pto_orch *o, void *arg);
extern "Python+C" void _pyk_node_orch(pto_node_orch *no, void *arg);
extern "Python+C" int _pyk_host(const pto_args *args, void *arg);
"""

SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "pto/pto.h"
#include "pto/kernels.h"
#include "pto/node.h"
#include "pto/comm.h"
#include "pto/coll.h"

int _pyk_kernel(int slot, const pto_kctx *ctx);
void _pyr_init(int slot, void *dst, int64_t n);
void _pyr_combine(int slot, void *acc, const void *src, int64_t n);
int _pyk_chip_init(pto_chip *chip, int rank, void *arg);
void _pyk_orch(pto_orch *o, void *arg);
void _pyk_node_orch(pto_node_orch *no, void *arg);
int _pyk_host(const pto_args *args, void *arg);

/* One tensor descriptor from Python: 17 int64 words
 * [mode, buf, bytes, dtype, ndims, offset, shape[5], stride[5], alloc_tag]. */
#define PYK_DESC 17
int pyk_tensor(pto_tensor *t, const int64_t *d) {
  memset(t, 0, sizeof *t);
  t->buf = (void *)(intptr_t)d[1];
  t->buf_bytes = (size_t)d[2];
  t->dtype = (int32_t)d[3];
  t->ndims = (int32_t)d[4];
  t->offset = d[5];
  t->alloc_tag = (uint64_t)d[16];
  if (t->ndims < 1 || t->ndims > PTO_MAX_DIMS) return PTO_EINVAL;
  for (int i = 0; i < t->ndims; i++) {
    t->shape[i] = d[6 + i];
    t->stride[i] = d[11 + i];
  }
  return 0;
}

/* The tensors (descriptors) and scalars into a; an output is allocated
 * into outs[i] when outs is given, else added as it is. */
static void pyk_fill(pto_args *a, int ntensors, const int64_t *desc, pto_tensor *outs,
                     int nscalars, const uint64_t *scalars) {
  for (int i = 0; i < ntensors; i++) {
    const int64_t *d = desc + (size_t)i * PYK_DESC;
    int mode = (int)(d[0] & 0xff); /* a REDUX argument's word also holds its op */
    if (mode == PTO_OUTPUT && outs) {
      pto_tensor_desc(&outs[i], (pto_dtype)d[3], (int)d[4], d + 6);
      pto_args_output(a, &outs[i]);
    } else {
      pto_tensor t;
      pyk_tensor(&t, d);
      if (mode == PTO_REDUX)
        pto_args_redux(a, &t, (int)(d[0] >> 8));
      else
        pto_args_add(a, (pto_access)mode, &t);
    }
  }
  for (int i = 0; i < nscalars; i++) pto_args_scalar(a, scalars[i]);
}

int pyk_submit(pto_orch *o, int kernel_id, int ntensors, const int64_t *desc, int nscalars,
               const uint64_t *scalars, int block_num, int sync_start, const int64_t *deps,
               int ndeps, int dummy, pto_tensor *outs, pto_task_id *id, int priority) {
  pto_args a;
  pto_args_init(&a);
  pyk_fill(&a, ntensors, desc, outs, nscalars, scalars);
  pto_submit_opts so = {.block_num = block_num, .sync_start = sync_start != 0,
                        .deps = (const pto_task_id *)deps, .ndeps = ndeps, .priority = priority};
  return dummy ? pto_submit_dummy(o, &a, &so, id) : pto_submit(o, kernel_id, &a, &so, id);
}

/* Node tasks from Python: the generic chip orchestration below submits one
 * kernel on each chip of the task with that chip's `per_rank` tensors and
 * the user's scalars. Three hidden scalars go last: kernel id, tensors per
 * rank, block_num | sync_start << 31 | py_mask << 32; the kernel never sees
 * them. py_mask: the last of the user's scalars is a Python kernel's input
 * mask over every rank's tensors (bit g * per_rank + i: tensor i of rank g
 * is an INPUT); each chip's kernel gets its own rank's bits. */
static void pyk_chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_args *na = t->args;
  int ns = na->nscalars - 3;
  int kid = (int)na->scalars[ns], k = (int)na->scalars[ns + 1];
  uint64_t bs = na->scalars[ns + 2];
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < k; i++)
    pto_args_add(&a, (pto_access)na->access[t->group_rank * k + i],
                 &na->tensors[t->group_rank * k + i]);
  for (int i = 0; i < ns; i++) pto_args_scalar(&a, na->scalars[i]);
  if ((bs >> 32) & 1 && ns > 0 && k > 0) /* k <= PTO_MAX_TENSOR_ARGS (16) */
    a.scalars[ns - 1] = (na->scalars[ns - 1] >> (t->group_rank * k)) & ((1ull << k) - 1);
  pto_submit_opts so = {.block_num = (int)(bs & 0x7fffffff), .sync_start = (bs >> 31) & 1};
  pto_submit(o, kid, &a, &so, NULL);
}

int pyk_node_submit(pto_node_orch *no, const int *chips, int nchips, int kernel_id,
                    int per_rank, const int64_t *desc, int nscalars, const uint64_t *scalars,
                    int block_num, int sync_start, int py_mask, pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pyk_fill(&a, per_rank * nchips, desc, NULL, nscalars, scalars);
  pto_args_scalar(&a, (uint64_t)kernel_id);
  pto_args_scalar(&a, (uint64_t)per_rank);
  pto_args_scalar(&a, (uint64_t)block_num | ((uint64_t)(sync_start != 0) << 31) |
                          ((uint64_t)(py_mask != 0) << 32));
  if (nchips == 1) return pto_node_submit(no, chips[0], pyk_chip_orch, &a, id);
  return pto_node_submit_group(no, chips, nchips, pyk_chip_orch, &a, id);
}

/* _pyk_host under another address: the host function of tasks submitted
 * with read_check=False, which pto_node_skip_read_check takes out of
 * checking mode's read check (it names host functions by address). */
static int pyk_host_once(const pto_args *args, void *arg) { return _pyk_host(args, arg); }

/* A host sub-worker task running the Python callable number fn_index of the
 * process-wide table (filled before the node forked, so valid there too). */
int pyk_node_submit_host(pto_node_orch *no, int worker, int fn_index, int ntensors,
                         const int64_t *desc, int nscalars, const uint64_t *scalars,
                         int read_check, pto_task_id *id) {
  pto_args a;
  pto_args_init(&a);
  pyk_fill(&a, ntensors, desc, NULL, nscalars, scalars);
  pto_host_fn fn = _pyk_host;
  if (!read_check) { /* the opt-out names functions: this one's tasks run once */
    fn = pyk_host_once;
    int rc = pto_node_skip_read_check(pto_node_orch_node(no), fn);
    if (rc) return rc;
  }
  return pto_node_submit_host(no, worker, fn, (void *)(intptr_t)fn_index, &a, id);
}

int pyk_fatal(pto_orch *o, const char *msg) { return pto_orch_fatal(o, "%s", msg); }

/* An Orch call made from a thread other than the orchestrator's: the C
 * call it stands for, which pto refuses there before reading any argument
 * (it fails the run, naming the rule and the call). */
int pyk_foreign_call(pto_orch *o, int call) {
  switch (call) {
  case 0: return pto_submit(o, 0, NULL, NULL, NULL);
  case 1: return pto_submit_dummy(o, NULL, NULL, NULL);
  case 2: return pto_scope_begin(o, PTO_SCOPE_AUTO);
  case 3: return pto_orch_read(o, NULL, NULL, 0);
  case 4: return pto_orch_write(o, NULL, NULL, 0);
  case 6: return pto_orch_batch_begin(o);
  default: return pto_orch_wait_task(o, 0, 0);
  }
}
/* The same for a NodeOrch call: the pto_node_* call it stands for, which
 * pto refuses on that thread before reading any other argument (it fails
 * the run, naming the rule and the call). */
int pyk_node_foreign_call(pto_node_orch *no, int call) {
  switch (call) {
  case 0: return pto_node_domain_create(no, NULL, 0, NULL, 0, NULL);
  case 1: return pto_node_window_tensor(no, 0, 0, NULL, PTO_F32, 0, NULL, NULL);
  case 2: return pto_node_submit(no, 0, NULL, NULL, NULL);
  case 3: return pto_node_submit_group(no, NULL, 0, NULL, NULL, NULL);
  case 4: return pto_node_submit_host(no, -1, NULL, NULL, NULL, NULL);
  case 5: return pto_node_wait_all(no);
  case 6: return pto_node_read(no, NULL, NULL);
  case 7: return pto_node_allreduce(no, 0, NULL, NULL, NULL, PTO_RED_SUM, PTO_COLL_AUTO);
  case 8: return pto_node_allgather(no, 0, NULL, NULL, NULL);
  case 9: return pto_node_reduce_scatter(no, 0, NULL, NULL, NULL, PTO_RED_SUM);
  case 10: return pto_node_broadcast(no, 0, NULL, NULL, NULL, 0);
  default: return pto_node_alltoall(no, 0, NULL, NULL, NULL);
  }
}
pto_comm *pyk_comm(const pto_kctx *ctx) { return pto_kctx_comm(ctx); }
/* host memory a closed node left to its arrays (pto_node_host_keep) */
int pyk_munmap(void *p, size_t bytes) { return munmap(p, bytes); }
/* Ctrl-C during a chip run. Python runs a signal's handler on the main
 * thread between bytecodes; during pto_chip_run that thread waits in C,
 * so Python alone would raise KeyboardInterrupt only once the run ended by
 * itself. While runs are in progress, a handler of ours stands in front of
 * Python's for SIGINT: it counts the signal, then calls Python's handler
 * as before. A Python kernel that starts after the count moved raises
 * KeyboardInterrupt instead of running (_kernel.py), which fails the run:
 * nothing more is dispatched, the run ends and is cleaned up as any failed
 * run, and Python then raises the KeyboardInterrupt its handler recorded.
 * Arming and disarming happen inside pyk_chip_run, one C call, so no
 * KeyboardInterrupt can come between them and the run.
 * A node run (pyk_node_run) runs its kernels in the chip processes, which
 * this count does not reach: the handler also cancels the runs of the
 * nodes in pyk_node_run (pto_node_cancel, async-signal-safe). A node's
 * slot is taken by compare-and-swap; the handler counts itself in
 * pyk_sig_busy while it reads the slots, and the run's end waits for it
 * after emptying its slot, so the node is never cancelled once its run
 * returned (it may be destroyed then). */
#define PYK_SIG_NODES 64
static pto_node *_Atomic pyk_sig_nodes[PYK_SIG_NODES];
static _Atomic int pyk_sig_busy;
static pthread_mutex_t pyk_sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int pyk_sig_runs, pyk_sig_ours;      /* under pyk_sig_lock */
static _Atomic int pyk_sig_armed;            /* runs in progress */
static _Atomic unsigned pyk_sigints, pyk_sig_since;
static struct sigaction pyk_sig_prev;       /* Python's */

static void pyk_on_sigint(int sig, siginfo_t *si, void *uc) {
  atomic_fetch_add(&pyk_sigints, 1); /* lock-free: safe in a handler */
  atomic_fetch_add(&pyk_sig_busy, 1);
  for (int i = 0; i < PYK_SIG_NODES; i++) {
    pto_node *node = atomic_load(&pyk_sig_nodes[i]);
    if (node) pto_node_cancel(node);
  }
  atomic_fetch_sub(&pyk_sig_busy, 1);
  if (pyk_sig_prev.sa_flags & SA_SIGINFO)
    pyk_sig_prev.sa_sigaction(sig, si, uc);
  else if (pyk_sig_prev.sa_handler != SIG_DFL && pyk_sig_prev.sa_handler != SIG_IGN)
    pyk_sig_prev.sa_handler(sig);
}

static void pyk_sigint_arm(int python_sigint) {
  pthread_mutex_lock(&pyk_sig_lock);
  if (pyk_sig_runs++ == 0) {
    atomic_store(&pyk_sig_since, atomic_load(&pyk_sigints));
    struct sigaction sa;
    /* only in front of Python's own handler (SIG_DFL ends the process anyway) */
    if (python_sigint && sigaction(SIGINT, NULL, &pyk_sig_prev) == 0) {
      sa = pyk_sig_prev;
      sa.sa_sigaction = pyk_on_sigint;
      sa.sa_flags |= SA_SIGINFO;
      pyk_sig_ours = sigaction(SIGINT, &sa, NULL) == 0;
    }
    atomic_store(&pyk_sig_armed, 1);
  }
  pthread_mutex_unlock(&pyk_sig_lock);
}

static void pyk_sigint_disarm(void) {
  pthread_mutex_lock(&pyk_sig_lock);
  if (--pyk_sig_runs == 0) {
    atomic_store(&pyk_sig_armed, 0);
    struct sigaction cur;
    /* Python's back, unless someone set another handler meanwhile */
    if (pyk_sig_ours && sigaction(SIGINT, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == pyk_on_sigint)
      sigaction(SIGINT, &pyk_sig_prev, NULL);
    pyk_sig_ours = 0;
  }
  pthread_mutex_unlock(&pyk_sig_lock);
}

int pyk_sigint_tripped(void) {
  return atomic_load(&pyk_sig_armed) && atomic_load(&pyk_sigints) != atomic_load(&pyk_sig_since);
}

int pyk_chip_run(pto_chip *chip, void *arg, pto_run_stats *stats, pto_error_info *err,
                 int python_sigint) {
  pyk_sigint_arm(python_sigint);
  int rc = pto_chip_run(chip, _pyk_orch, arg, stats, err);
  pyk_sigint_disarm();
  return rc;
}

/* A node run as a chip's; a node run beyond the PYK_SIG_NODES running at
 * once is cancelled only at the end of its orchestration function
 * (_pyk_node_orch: pyk_sigint_tripped). */
int pyk_node_run(pto_node *node, void *arg, pto_error_info *err, int python_sigint) {
  pyk_sigint_arm(python_sigint);
  int slot = -1;
  for (int i = 0; i < PYK_SIG_NODES && slot < 0; i++) {
    pto_node *none = NULL;
    if (atomic_compare_exchange_strong(&pyk_sig_nodes[i], &none, node)) slot = i;
  }
  int rc = pto_node_run(node, _pyk_node_orch, arg, err);
  if (slot >= 0) {
    atomic_store(&pyk_sig_nodes[slot], NULL);
    while (atomic_load(&pyk_sig_busy)) /* a handler that may have read it */
      sched_yield();
  }
  pyk_sigint_disarm();
  return rc;
}

/* A capture runs the Python orchestration as pyk_chip_run does; a
 * launch runs no Python orchestration, only the kernels. */
int pyk_graph_capture(pto_chip *chip, void *arg, pto_graph **graph, pto_run_stats *stats,
                      pto_error_info *err, int python_sigint) {
  pyk_sigint_arm(python_sigint);
  int rc = pto_graph_capture(chip, _pyk_orch, arg, graph, stats, err);
  pyk_sigint_disarm();
  return rc;
}

int pyk_graph_launch(pto_chip *chip, pto_graph *graph, const pto_graph_bindings *b,
                     pto_run_stats *stats, pto_error_info *err, int python_sigint) {
  pyk_sigint_arm(python_sigint);
  int rc = pto_graph_launch(chip, graph, b, stats, err);
  pyk_sigint_disarm();
  return rc;
}

/* pto_node_create forks its chip and sub-worker processes from C, with
 * the GIL released (cffi releases it around the call). A fork is taken as
 * os.fork takes one: the forking thread holds the GIL and Python's fork
 * locks (the import lock, the os.register_at_fork hooks: logging's lock)
 * across it, and the child updates the interpreter (PyOS_AfterFork_Child:
 * the threads that did not come along are gone, their locks reset).
 * Before, another Python thread could hold the GIL at the fork: the child
 * inherited it held by a thread it does not have, its first Python call
 * (registering the node's kernels) waited for ever, and pto_node_create
 * failed after startup_timeout_ms (5 minutes by default) with
 * PTO_ESTARTUP_TIMEOUT. The handlers act only for the forks of the thread
 * inside pyk_node_create. */
/* (in the stable ABI since 3.7; cffi's Py_LIMITED_API names no version) */
PyAPI_FUNC(void) PyOS_BeforeFork(void);
PyAPI_FUNC(void) PyOS_AfterFork_Parent(void);
PyAPI_FUNC(void) PyOS_AfterFork_Child(void);
static _Thread_local int pyk_forking;
static _Thread_local PyGILState_STATE pyk_fork_gil;

static void pyk_fork_prepare(void) {
  if (!pyk_forking) return;
  pyk_fork_gil = PyGILState_Ensure();
  PyOS_BeforeFork();
}

static void pyk_fork_parent(void) {
  if (!pyk_forking) return;
  PyOS_AfterFork_Parent();
  PyGILState_Release(pyk_fork_gil);
}

static void pyk_fork_child(void) {
  if (!pyk_forking) return;
  PyOS_AfterFork_Child();
  pyk_forking = 0;
  PyGILState_Release(pyk_fork_gil);
}

static void pyk_fork_handlers(void) {
  pthread_atfork(pyk_fork_prepare, pyk_fork_parent, pyk_fork_child);
}

int pyk_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pyk_fork_handlers);
  pyk_forking = 1;
  int rc = pto_node_create(cfg, out, err);
  pyk_forking = 0;
  return rc;
}

pto_chip_init_fn pyk_chip_init_fn(void) { return _pyk_chip_init; }
pto_node_orch_fn pyk_node_orch_fn(void) { return _pyk_node_orch; }

/* Python kernels: one C entry point per registered callable, so that the
 * kernel id needs no hidden argument. */
#define PYK_T(n) static int pyk_t##n(const pto_kctx *c) { return _pyk_kernel(n, c); }
""" + "".join(f"PYK_T({i})\n" for i in range(NTRAMP)) + r"""
static const pto_kernel_fn pyk_tramps[] = {""" + ",".join(f"pyk_t{i}" for i in range(NTRAMP)) + r"""};
int pyk_ntrampolines(void) { return (int)(sizeof pyk_tramps / sizeof pyk_tramps[0]); }
pto_kernel_fn pyk_trampoline(int slot) {
  return slot >= 0 && slot < pyk_ntrampolines() ? pyk_tramps[slot] : NULL;
}

/* Reduction ops from Python: an init and a combine entry point per slot
 * (pto_redux_op_desc's functions take no context), each calling the
 * slot's Python functions (_redux.py). */
#define PYR_T(n) \
  static void pyr_i##n(void *d, int64_t k) { _pyr_init(n, d, k); } \
  static void pyr_c##n(void *a, const void *s, int64_t k) { _pyr_combine(n, a, s, k); }
""" + "".join(f"PYR_T({i})\n" for i in range(NTRAMP_REDUX)) + r"""
static void (*const pyr_inits[])(void *, int64_t) = {""" + ",".join(
    f"pyr_i{i}" for i in range(NTRAMP_REDUX)) + r"""};
static void (*const pyr_combines[])(void *, const void *, int64_t) = {""" + ",".join(
    f"pyr_c{i}" for i in range(NTRAMP_REDUX)) + r"""};
int pyr_ntrampolines(void) { return (int)(sizeof pyr_inits / sizeof pyr_inits[0]); }
int pyr_register(pto_chip *chip, const char *name, int dtype, int slot, int *op) {
  if (slot < 0 || slot >= pyr_ntrampolines()) return PTO_EINVAL;
  pto_redux_op_desc d = {name, dtype, pyr_inits[slot], pyr_combines[slot]};
  return pto_redux_register(chip, &d, op);
}
"""


def make_ffibuilder(source_dir=None, build_dir=None):
    here = os.path.dirname(os.path.abspath(__file__))
    source_dir = source_dir or os.environ.get("PTO_SOURCE_DIR") or os.path.join(here, "..", "..")
    build_dir = build_dir or os.environ.get("PTO_BUILD_DIR") or os.path.join(source_dir, "build")
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        "pto._pto",
        SOURCE,
        include_dirs=[os.path.join(os.path.abspath(source_dir), "include")],
        library_dirs=[os.path.join(os.path.abspath(build_dir), "src")],
        libraries=["pto"],
        # libpto.so.0 is copied next to the module (setup.py), found by $ORIGIN
        extra_link_args=["-Wl,-rpath,$ORIGIN"],
        extra_compile_args=["-std=gnu11", "-Wno-unused-function",
                            # a cdef field or function type that differs from the headers
                            "-Werror=incompatible-pointer-types"],
    )
    return ffi


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
