/* node.c — the node runtime's public entry points on the parent side:
 * create (the config checks, leases, run-unique names, the control block,
 * host memory and window space, then the children: node_proc.c) and
 * destroy, host memory, and pto_node_run, which calls the node
 * orchestration (node tasks: node_task.c; domains: node_domain.c) and
 * merges the ranks' trace files at its end (rank_trace.c). The parent is
 * single-threaded: it forks, and it must not start threads. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/last_error.h"
#include "common/options.h"
#include "node/lease.h"
#include "node/node_internal.h"
#include "node/node_mpi.h"
#include "node/run_guard.h"

void pto_node_config_init(pto_node_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->nchips = 2;
  pto_chip_config_init(&cfg->chip);
  cfg->host_bytes = 64u << 20;
  cfg->window_space = 1u << 30;
  cfg->startup_timeout_ms = pto_option(PTO_OPT_NODE_STARTUP_MS);
  cfg->control_timeout_ms = pto_option(PTO_OPT_NODE_CONTROL_MS);
  cfg->task_timeout_ms = -1;
  cfg->host_task_timeout_ms = pto_option(PTO_OPT_NODE_HOST_TASK_MS);
  cfg->tensormap_entries = (uint32_t)pto_option(PTO_OPT_NODE_TENSORMAP_ENTRIES);
  cfg->lease_wait_ms = 0;
  cfg->wait_timeout_ms = pto_option(PTO_OPT_NODE_WAIT_MS);
}

/* ---- create / destroy ---- */

/* Refuses a config that cannot work, naming the field (err filled). */
static bool config_ok(const pto_node_config *cfg, pto_error_info *err) {
  if (cfg->nchips < 1 || cfg->nchips > PTO_NODE_MAX_CHIPS) {
    node_set_err(err, PTO_EINVAL, "node config: nchips is %d, must be 1..%d", cfg->nchips,
                 PTO_NODE_MAX_CHIPS);
    return false;
  }
  if (cfg->nworkers < 0 || cfg->nworkers > PTO_NODE_MAX_WORKERS) {
    node_set_err(err, PTO_EINVAL, "node config: nworkers is %d, must be 0..%d", cfg->nworkers,
                 PTO_NODE_MAX_WORKERS);
    return false;
  }
  for (int i = 0; cfg->device_ids && i < cfg->nchips; i++)
    if (cfg->device_ids[i] < 0) {
      node_set_err(err, PTO_EINVAL, "node config: device_ids[%d] is device id %d, must be >= 0", i,
                   cfg->device_ids[i]);
      return false;
    }
  const char *zero = !cfg->host_bytes ? "host_bytes" : !cfg->window_space ? "window_space" : NULL;
  if (zero) {
    node_set_err(err, PTO_EINVAL, "node config: %s is 0", zero);
    return false;
  }
  if (cfg->wait_timeout_ms < 1) { /* every window wait of a kernel has a deadline */
    node_set_err(err, PTO_EINVAL,
                 "node config: wait_timeout_ms is %" PRId64
                 ", must be at least 1 (the deadline of the kernels' window waits)",
                 cfg->wait_timeout_ms);
    return false;
  }
  if (cfg->trace_path && !cfg->trace_path[0]) { /* else every run fails at its end */
    node_set_err(err, PTO_EINVAL, "node config: trace_path is empty (NULL: no trace)");
    return false;
  }
  if (cfg->tensormap_entries < PTO_MAX_TENSOR_ARGS || cfg->tensormap_entries > TMAP_ENTRIES_MAX) {
    node_set_err(err, PTO_EINVAL,
                 "node config: tensormap_entries is %u, must be %d..%d (at least one task's "
                 "tensors; the TensorMap counts its entries in an int32)",
                 cfg->tensormap_entries, PTO_MAX_TENSOR_ARGS, TMAP_ENTRIES_MAX);
    return false;
  }
  return true;
}

static bool all_started(pto_node *n, void *arg) {
  (void)arg;
  for (int s = 0; s < n->nchildren; s++)
    if (mbox_state(&n->ctl->mbox[s]) != CHILD_READY) return false;
  return true;
}

/* Under mpirun: chip 0 and the host workers as threads of rank 0, chip c
 * > 0 on rank c (node_mpi.c). A failure fails the node. */
static void start_mpi_children(pto_node *n) {
  char why[256] = "";
  int rc = node_mpi_start(n, why, sizeof why);
  if (rc) {
    node_fatal(n, rc, "%s", why);
    return;
  }
  for (int s = 0; s < n->nchildren; s++) {
    if (s > 0 && s < n->cfg.nchips) continue; /* on its MPI rank */
    rc = node_start_thread(n, s, why, sizeof why);
    if (rc) {
      node_fatal(n, rc, "%s", why);
      return;
    }
  }
}

static int create_node(const pto_node_config *cfg, pto_node **out, pto_error_info *err) {
  node_set_err(err, 0, "%s", "");
  if (out) *out = NULL;
  if (!cfg || !out) {
    node_set_err(err, PTO_EINVAL, "pto_node_create: %s is NULL", !cfg ? "cfg" : "out");
    return PTO_EINVAL;
  }
  if (!config_ok(cfg, err)) return PTO_EINVAL;
  /* Under mpirun chip c is MPI rank c: ranks > 0 serve rank 0's nodes in
   * here and never return (node_mpi.h). */
  bool mpi = node_mpi_detect();
  if (mpi) {
    int mrc = node_mpi_enter(cfg, err);
    if (mrc) return mrc;
  }
  /* The chip configuration is checked here, where its details can be told,
   * not in the chip processes. */
  pto_chip *probe = NULL;
  int crc = pto_chip_create_ex(&cfg->chip, &probe, err);
  pto_chip_destroy(probe);
  if (crc) return crc;
  pto_node *n = calloc(1, sizeof *n);
  if (!n) return PTO_ENOMEM;
  n->cfg = *cfg;
  n->mpi = mpi;
  n->cfg.device_ids = NULL;
  n->cfg.trace_path = NULL; /* the caller's string; n->trace_path is ours */
  int src = node_sched_config(n, cfg, err);
  if (src) {
    free(n);
    return src;
  }
  for (int i = 0; i < cfg->nchips; i++) {
    n->device_ids[i] = cfg->device_ids ? cfg->device_ids[i] : i;
    n->lease_fds[i] = -1;
  }
  char why[256] = "";
  int rc = lease_acquire(n->device_ids, cfg->nchips, cfg->lease_wait_ms, cfg->quiet, n->lease_fds,
                         why, sizeof why);
  if (rc) {
    node_set_err(err, rc, "%s", why);
    goto fail_node;
  }
  run_guard_sweep(); /* objects of runs that are gone: see run_guard.h */
  static unsigned seq;
  n->parent_pid = getpid();
  snprintf(n->prefix, sizeof n->prefix, "/pto.%d.%u.%06" PRIx64, (int)getpid(), seq++,
           (pto_now_ns() ^ (uint64_t)(uintptr_t)n) & 0xffffff);
  rc = run_guard_begin(n->prefix, why, sizeof why);
  if (rc) {
    node_set_err(err, rc, "%s", why);
    goto fail_lease;
  }
  if (cfg->trace_path) {
    char probe[PATH_MAX];
    n->trace_path = strdup(cfg->trace_path);
    rc = !n->trace_path                                                            ? PTO_ENOMEM
         : !node_rank_trace_path(n, cfg->nchips - 1, INT_MAX, probe, sizeof probe) ? PTO_EINVAL
                                                                                   : 0;
    if (rc) {
      node_set_err(err, rc, "node config: cannot use trace path '%.200s'", cfg->trace_path);
      goto fail_guard;
    }
  }
  n->nchildren = cfg->nchips + cfg->nworkers;
  n->ctl_bytes = sizeof(node_ctl) + (size_t)n->nchildren * sizeof(node_mbox);
  /* anonymous shared memory: inherited by the children, gone with the last
   * process, so it can never outlive the run */
  n->ctl = mmap(NULL, n->ctl_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  n->host = MAP_FAILED;
  /* the map that failed, its size and errno (taken at once) */
  const char *what = NULL;
  uint64_t what_bytes = 0;
  int merr = 0;
  if (n->ctl == MAP_FAILED) {
    what = "the control block", what_bytes = n->ctl_bytes, merr = errno;
  } else if (mpi) { /* at addresses the other ranks can map too */
    if ((rc = node_mpi_map(n, why, sizeof why)) != 0) {
      node_set_err(err, rc, "%s", why);
      goto fail_maps;
    }
  } else {
    n->host = mmap(NULL, cfg->host_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (n->host == MAP_FAILED)
      what = "host memory (host_bytes)", what_bytes = cfg->host_bytes, merr = errno;
    else if (comm_space_reserve(cfg->window_space, &n->space) != 0)
      what = "the windows' address space (window_space)", what_bytes = cfg->window_space,
      merr = errno;
  }
  if (what) {
    node_set_err(err, PTO_ESYSTEM, "node: cannot map %s of %" PRIu64 " bytes: mmap: %s", what,
                 what_bytes, strerror(merr));
    rc = PTO_ESYSTEM;
    goto fail_maps;
  }
  pto_event_init(&n->ctl->parent_ev, true);
  for (int s = 0; s < n->nchildren; s++)
    mbox_init(&n->ctl->mbox[s]);
  comm_init(&n->observer, -1);
  if (mpi)
    start_mpi_children(n);
  else
    node_fork_children(n);
  if (!n->fatal) {
    rc = node_until(n, all_started, NULL, false, pto_deadline_ms(cfg->startup_timeout_ms),
                    PTO_ESTARTUP_TIMEOUT);
    if (rc == PTO_ESTARTUP_TIMEOUT) {
      int s = 0;
      while (s < n->nchildren && mbox_state(&n->ctl->mbox[s]) == CHILD_READY)
        s++;
      node_fatal(n, rc, "%s %d (pid %d) did not report ready within %" PRId64 " ms",
                 slot_kind(n, s), slot_index(n, s), (int)n->child[s].pid, cfg->startup_timeout_ms);
    }
  }
  if (n->fatal) {
    *err = n->fatal_err;
    rc = n->fatal;
    pto_node_destroy(n);
    return rc;
  }
  n->next_dom = 1;
  *out = n;
  return 0;
  /* a failed start: undone in reverse (the pieces not made yet are skipped) */
fail_maps:
  if (n->ctl != MAP_FAILED) munmap(n->ctl, n->ctl_bytes);
  if (n->host != MAP_FAILED) munmap(n->host, cfg->host_bytes);
  node_mpi_unmap(n); /* nothing unless node_mpi_map named its object */
fail_guard:
  free(n->trace_path);
  run_guard_end(n->prefix);
fail_lease:
  lease_release(n->lease_fds, cfg->nchips);
fail_node:
  node_sched_free_config(n);
  free(n);
  return rc;
}

static bool all_exited(pto_node *n, void *arg) {
  (void)arg;
  node_reap(n);
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].alive) return false;
  return true;
}

#define DESTROY_REFUSED                                                                            \
  "pto_node_destroy: called during the node's run; it did nothing (destroy the node after "        \
  "pto_node_run returns)"

void pto_node_destroy(pto_node *n) {
  if (!n) return;
  /* during the run (from its orchestration, or a thread of it): refused,
   * named. Before, it freed the node under pto_node_run, which then went
   * on with it. The caller destroys the node after the run returns. */
  pto_node_orch *live = atomic_load_explicit(&n->orch_live, memory_order_acquire);
  if (live && pthread_equal(pthread_self(), n->orch_owner)) {
    last_error_set(PTO_EINVAL, "%s", DESTROY_REFUSED);
    node_first_err(n, PTO_EINVAL,
                   "pto_node_destroy was called during the node's run (from its "
                   "orchestration); it did nothing: destroy the node after pto_node_run "
                   "returns");
    return;
  }
  /* from another thread: the owner latches it (the only thing another
   * thread writes), also in the run's last wait and its end */
  if (live && node_foreign_leave(n, live, "destroy")) {
    last_error_set(PTO_EINVAL, "%s", DESTROY_REFUSED);
    return;
  }
  /* and the node is claimed as a run claims it: a run without a live
   * orchestration (making its TensorMap, or past its last wait) is still a
   * run. Refused then without failing it: its owner latches nothing there.
   * Before, a destroy in those windows freed the node under the run. */
  if (!node_claim(n)) {
    last_error_set(PTO_EINVAL, "%s", DESTROY_REFUSED);
    return;
  }
  if (!n->fatal) {
    static node_frame f;
    memset(&f, 0, sizeof f);
    f.type = FRAME_EXIT;
    for (int s = 0; s < n->nchildren; s++)
      if (n->child[s].alive && !n->child[s].gen) node_post(n, s, &f, -1);
    /* children exiting is expected here: wait for that, not via step() */
    uint64_t dl = pto_deadline_ms(n->cfg.control_timeout_ms);
    while (!all_exited(n, NULL) && pto_now_ns() < dl)
      pto_wait(&n->ctl->parent_ev, node_anything, n, pto_now_ns() + 20000000ull);
  }
  node_kill_all(n);             /* whatever is left: stuck children, domains */
  if (n->mpi) node_mpi_stop(n); /* ends the job if the node failed or a rank is left */
  /* every object of the run, its guard last */
  node_mpi_unmap(n);
  run_guard_end(n->prefix);
  comm_fini(&n->observer, false);
  comm_space_release(n->space, n->cfg.window_space);
  if (!n->host_kept) munmap(n->host, n->cfg.host_bytes);
  munmap(n->ctl, n->ctl_bytes);
  lease_release(n->lease_fds, n->cfg.nchips);
  free(n->trace_path);
  node_tasks_free(n);
  node_check_free(n);
  node_sched_free_config(n);
  free(n);
}

/* ---- host memory ---- */

void *pto_node_host_keep(pto_node *n, size_t *bytes) {
  if (!n || !bytes || n->mpi) return NULL;
  n->host_kept = true;
  *bytes = n->cfg.host_bytes;
  return n->host;
}

void *pto_node_host_alloc(pto_node *n, size_t bytes) {
  if (!n || !bytes) return NULL;
  /* The count is shared by every process of the node (node_ctl): a host
   * task in a forked worker, a thread of rank 0 and the orchestrator take
   * their bytes from it alike (a worker's own copy of the count stood
   * where the fork left it, and handed out the parent's bytes again). */
  uint64_t used = atomic_load_explicit(&n->ctl->host_used, memory_order_relaxed);
  size_t at, end;
  do {
    /* used <= host_bytes, so `at` cannot wrap; at + bytes can */
    at = ((size_t)used + 63) & ~(size_t)63;
    if (at > n->cfg.host_bytes || __builtin_add_overflow(at, bytes, &end) ||
        end > n->cfg.host_bytes)
      return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&n->ctl->host_used, &used, end,
                                                  memory_order_relaxed, memory_order_relaxed));
  return n->host + at;
}

int pto_node_host_tensor(pto_node *n, pto_dtype dt, int ndims, const int64_t *shape,
                         pto_tensor *out) {
  if (!n || !shape || !out || ndims < 1 || ndims > PTO_MAX_DIMS || dt < 0 || dt >= PTO_DTYPE_COUNT)
    return PTO_EINVAL;
  size_t bytes = pto_dtype_size(dt);
  for (int i = 0; i < ndims; i++) {
    if (shape[i] < 1) return PTO_EINVAL;
    if (__builtin_mul_overflow(bytes, (uint64_t)shape[i], &bytes)) return PTO_ENOMEM;
  }
  void *p = pto_node_host_alloc(n, bytes);
  if (!p) return PTO_ENOMEM;
  return pto_tensor_init(out, p, bytes, dt, ndims, shape);
}

int pto_node_stats_get(const pto_node *n, pto_node_stats *out) {
  if (!n || !out) return PTO_EINVAL;
  *out = n->stats;
  return 0;
}

const char *pto_node_shm_prefix(const pto_node *n) { return n ? n->prefix + 1 : NULL; }

int pto_node_child_pids(const pto_node *n, int *pids, int max) {
  if (!n || !pids || max < 0) return PTO_EINVAL;
  int k = 0;
  for (int s = 0; s < n->nchildren && k < max; s++)
    pids[k++] = (int)n->child[s].pid;
  return k;
}

pto_node *pto_node_orch_node(pto_node_orch *no) {
  /* any thread may ask, during the run */
  return no && no->node && atomic_load_explicit(&no->node->orch_live, memory_order_acquire) == no
             ? no->node
             : NULL;
}

/* ---- runs ---- */

static int run_node(pto_node *n, pto_node_orch_fn fn, void *arg, pto_error_info *err) {
  node_set_err(err, 0, "%s", "");
  if (!n || !fn) {
    node_set_err(err, PTO_EINVAL, "pto_node_run: %s is NULL",
                 !n ? "node" : "orchestration function");
    return PTO_EINVAL;
  }
  /* one run at a time, whichever thread calls: taken before anything of
   * the run is made (before, a plain bool set after the bookkeeping let two
   * threads both pass and run over one TensorMap and task array) */
  if (!node_claim(n)) {
    node_set_err(err, PTO_EBUSY,
                 "pto_node_run: the node is already running (a run on another thread, or this "
                 "call came from the node's orchestration); it did nothing");
    last_error_set(PTO_EBUSY, "%s", err->details);
    return PTO_EBUSY;
  }
  if (n->fatal) {
    *err = n->fatal_err;
    atomic_store_explicit(&n->running, false, memory_order_release);
    return n->fatal;
  }
  int rc = node_tasks_begin(n);
  if (rc) {
    node_set_err(err, rc, "pto_node_run: cannot make the run's TensorMap (%u entries): %s",
                 n->cfg.tensormap_entries, pto_strerror(rc));
    atomic_store_explicit(&n->running, false, memory_order_release);
    return rc;
  }
  n->cancelled = false;
  atomic_store_explicit(&n->run_live, ++n->run_seq, memory_order_release);
  n->trace_origin_ns = pto_now_ns(); /* every rank's time zero (the clock is machine-wide) */
  memset(n->trace_runs, 0, sizeof n->trace_runs);
  atomic_store_explicit(&n->foreign_call, NULL, memory_order_relaxed);
  pto_node_orch *no = &n->orch[n->runs++ % NODE_ORCH_HANDLES];
  no->node = n;
  n->orch_owner = pthread_self();
  atomic_store_explicit(&n->orch_live, no, memory_order_release);
  uint64_t t0 = pto_now_ns();
  node_sched_begin(n); /* a bad replay record fails the run; it runs free */
  fn(no, arg);
  node_latch_foreign(n);
  node_until(n, node_all_finished, NULL, true, UINT64_MAX, 0);
  node_sched_end(n);
  node_release_domains(n);
  n->stats.run_us = (double)(pto_now_ns() - t0) / 1000.0;
  char why[400] = "";
  rc = node_trace_finish(n, why, sizeof why);
  if (rc)
    node_first_err(n, rc == PTO_ENOMEM ? rc : PTO_ESYSTEM,
                   "node trace: cannot merge the ranks' traces into '%.300s': %s", n->trace_path,
                   why[0] ? why : pto_strerror(rc));
  node_tasks_end(n);
  /* a call from another thread until here (the run's last wait, its
   * domains' release) fails the run as during the orchestration; before,
   * one after the orchestration returned was never latched (PTO_OK) */
  node_end_foreign(n);
  if (n->fatal) {
    *err = n->fatal_err;
    rc = n->fatal;
  } else {
    if (n->first_err) *err = n->first_info;
    rc = n->first_err;
  }
  atomic_store_explicit(&n->run_live, 0, memory_order_release); /* a cancel is no run's now */
  /* the next run (of any thread) may begin: the result is taken */
  atomic_store_explicit(&n->running, false, memory_order_release);
  return rc;
}

int pto_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(create_node(cfg, out, err), err->details);
}

int pto_node_run(pto_node *n, pto_node_orch_fn fn, void *arg, pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(run_node(n, fn, arg, err), err->details);
}

int pto_node_cancel(pto_node *n) {
  if (!n) return PTO_EINVAL;
  int saved = errno; /* in a signal handler: the futex wake may set it */
  /* the run in progress, by number: a cancel that comes as it ends names
   * a run that is over, never the next one */
  uint64_t run = atomic_load_explicit(&n->run_live, memory_order_acquire);
  if (run) {
    atomic_store_explicit(&n->cancel_req, run, memory_order_release);
    pto_event_signal(&n->ctl->parent_ev); /* its waits look (node_anything) */
  }
  errno = saved;
  return 0;
}
