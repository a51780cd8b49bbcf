/* chip.c — chip configuration, kernel registration and the run lifecycle:
 * set up a run, start schedulers/cores/watchdog, call the orchestration,
 * wait for the last task, shut down and join against one deadline. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/config_mode.h"
#include "chip/contract.h"
#include "chip/node_hooks.h"
#include "chip/run.h"
#include "chip/schedule.h"
#include "chip/steal.h"
#include "chip/trace_hooks.h"
#include "common/clock.h"
#include "common/last_error.h"
#include "common/options.h"
#include "common/rec_file.h"
#include "common/reg_name.h"
#include "common/thread_start.h"

void pto_chip_config_init(pto_chip_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  /* Defaults and their environment variables: src/common/options.c. */
  cfg->clusters = (int)pto_option(PTO_OPT_CLUSTERS);
  cfg->aic_per_cluster = 1;
  cfg->aiv_per_cluster = 2;
  cfg->schedulers = (int)pto_option(PTO_OPT_SCHEDULERS); /* 0: min(3, clusters) */
  cfg->task_slots = (uint32_t)pto_option(PTO_OPT_TASK_SLOTS);
  cfg->heap_bytes = (size_t)pto_option(PTO_OPT_HEAP_MB) << 20;
  cfg->dep_entries = (uint32_t)pto_option(PTO_OPT_DEP_ENTRIES);
  cfg->tensormap_entries = (uint32_t)pto_option(PTO_OPT_TENSORMAP_ENTRIES);
  cfg->alloc_timeout_ms = pto_option(PTO_OPT_ALLOC_TIMEOUT_MS);
  cfg->watchdog_ms = pto_option(PTO_OPT_WATCHDOG_MS);
  cfg->shutdown_ms = pto_option(PTO_OPT_SHUTDOWN_MS);
  cfg->async_slots = (uint32_t)pto_option(PTO_OPT_ASYNC_SLOTS);
  cfg->sched_threads = (int)pto_option(PTO_OPT_SCHED_THREADS);
  cfg->spread_cores = (int)pto_option(PTO_OPT_SPREAD_CORES);
  contract_config_env(cfg); /* PTO_CHECK, PTO_CHECK_SEED */
  cfg->schedule_seed = (uint64_t)pto_option(PTO_OPT_SCHEDULE_SEED);
  const char *rec = getenv("PTO_RECORD"), *rep = getenv("PTO_REPLAY");
  cfg->record_path = rec && rec[0] ? rec : NULL;
  cfg->replay_path = rep && rep[0] ? rep : NULL;
}

/* The run mode's settings (pto/chip.h: checking mode and a controlled
 * schedule), which pto_chip_config_init takes from PTO_CHECK,
 * PTO_CHECK_SEED, PTO_SCHEDULE_SEED, PTO_RECORD and PTO_REPLAY: what is
 * wrong with them, or NULL. */
const char *chip_config_mode_problem(const pto_chip_config *c) {
  static _Thread_local char why[600];
#define BAD(cond, ...)                                                                             \
  if (cond) return snprintf(why, sizeof why, __VA_ARGS__), why
  const char *check_problem = contract_config_problem(c);
  BAD(check_problem, "%s", check_problem);
  /* both run the blocks one at a time on the orchestrator's thread, each
   * by its own order: one run cannot follow both */
  BAD(c->check && (c->schedule_seed || c->record_path || c->replay_path),
      "check = %d with a controlled schedule (schedule_seed, record_path or replay_path): "
      "checking mode and controlled schedules cannot be combined; use one at a time",
      c->check);
  /* a record keeps the seed as a signed 64-bit number: one above could
   * be recorded, never replayed */
  BAD(c->schedule_seed > INT64_MAX, "schedule_seed = %llu, must be 0..%lld",
      (unsigned long long)c->schedule_seed, (long long)INT64_MAX);
  /* a replay makes the record's choices, drawn from the seed it holds: a
   * seed beside it would be ignored (a run taken for that seed's) */
  BAD(c->schedule_seed && c->replay_path,
      "schedule_seed = %llu (PTO_SCHEDULE_SEED) with replay_path '%s' (PTO_REPLAY): a replay "
      "makes the record's choices, from the seed the record holds; give one of them",
      (unsigned long long)c->schedule_seed, c->replay_path);
  BAD(c->record_path && c->replay_path && rec_file_same(c->record_path, c->replay_path),
      "record_path '%s' and replay_path '%s' are the same file: the record would overwrite the "
      "one being replayed; record to another file",
      c->record_path, c->replay_path);
#undef BAD
  return NULL;
}

/* pto_chip_create_ex's failure: the code and one sentence naming the field. */
static int create_fail(pto_error_info *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err->code = code;
  vsnprintf(err->details, sizeof err->details, fmt, ap);
  va_end(ap);
  return code;
}

/* err: never NULL (pto_chip_create_ex gives its own). */
static int create_chip(const pto_chip_config *cfg, pto_chip **out, pto_error_info *err) {
  error_info_reset(err);
  if (out) *out = NULL;
  if (!cfg || !out)
    return create_fail(err, PTO_EINVAL, "pto_chip_create: %s is NULL", cfg ? "out" : "cfg");
  /* An invalid PTO_* environment value is an error, not silently ignored. */
  if (pto_options_check(err->details, sizeof err->details)) return err->code = PTO_EINVAL;
  pto_chip_config c = *cfg;
  if (c.schedulers == 0) c.schedulers = c.clusters < 3 ? c.clusters : 3;
#define BAD(cond, ...)                                                                             \
  if (cond) return create_fail(err, PTO_EINVAL, "pto_chip_config: " __VA_ARGS__)
  BAD(c.clusters < 1 || c.clusters > PTO_CLUSTERS_MAX, "clusters = %d, must be 1..%d", c.clusters,
      PTO_CLUSTERS_MAX);
  BAD(c.schedulers < 1 || c.schedulers > c.clusters || c.schedulers > PTO_SCHEDULERS_MAX,
      "schedulers = %d, must be 1..min(clusters = %d, %d) (0: min(3, clusters))", c.schedulers,
      c.clusters, PTO_SCHEDULERS_MAX);
  BAD(c.aic_per_cluster < 0 || c.aic_per_cluster > 1, "aic_per_cluster = %d, must be 0 or 1",
      c.aic_per_cluster);
  BAD(c.aiv_per_cluster < 0 || c.aiv_per_cluster > 2, "aiv_per_cluster = %d, must be 0..2",
      c.aiv_per_cluster);
  BAD(c.aic_per_cluster + c.aiv_per_cluster == 0,
      "aic_per_cluster and aiv_per_cluster are both 0: a cluster needs a core");
  BAD(c.task_slots < 2 || c.task_slots > PTO_TASK_SLOTS_MAX,
      "task_slots = %u, must be 2..%d (a slot index must fit a ready queue's cell)", c.task_slots,
      PTO_TASK_SLOTS_MAX);
  BAD(c.dep_entries < 1 || c.dep_entries > INT32_MAX - 1,
      "dep_entries = %u, must be 1..%d (a task's dependencies are counted in an int32)",
      c.dep_entries, INT32_MAX - 1);
  BAD(c.tensormap_entries < 1 || c.tensormap_entries > TMAP_ENTRIES_MAX,
      "tensormap_entries = %u, must be 1..%d (the TensorMap counts its entries in an int32)",
      c.tensormap_entries, TMAP_ENTRIES_MAX);
  BAD(c.heap_bytes < RING_ALIGN, "heap_bytes = %zu, must be at least %zu", c.heap_bytes,
      (size_t)RING_ALIGN);
  BAD(c.watchdog_ms <= 0 || c.watchdog_ms > PTO_DAY_MS,
      "watchdog_ms = %lld, must be 1..%lld (a day, as PTO_WATCHDOG_MS)", (long long)c.watchdog_ms,
      PTO_DAY_MS);
  BAD(c.alloc_timeout_ms <= 0, "alloc_timeout_ms = %lld, must be positive",
      (long long)c.alloc_timeout_ms);
  BAD(c.shutdown_ms <= 0, "shutdown_ms = %lld, must be positive", (long long)c.shutdown_ms);
  BAD(c.sched_threads < 0 || c.sched_threads > 1, "sched_threads = %d, must be 0 or 1",
      c.sched_threads);
  BAD(c.spread_cores < 0 || c.spread_cores > 2, "spread_cores = %d, must be 0, 1 or 2",
      c.spread_cores);
  BAD(c.async_slots > PTO_ASYNC_SLOTS_MAX,
      "async_slots = %u, must be 0..%d (a completion token holds the slot in 16 bits)",
      c.async_slots, PTO_ASYNC_SLOTS_MAX);
  const char *mode_problem = chip_config_mode_problem(&c);
  BAD(mode_problem, "%s", mode_problem);
#undef BAD
  pto_chip *chip = calloc(1, sizeof *chip);
  if (!chip)
    return create_fail(err, PTO_ENOMEM, "pto_chip_create: out of memory for the chip (%zu bytes)",
                       sizeof *chip);
  chip->nasync = c.async_slots;
  chip->async = calloc(c.async_slots ? c.async_slots : 1, sizeof *chip->async);
  if (!chip->async) {
    free(chip);
    return create_fail(err, PTO_ENOMEM, "pto_chip_create: out of memory for %u async slots",
                       c.async_slots);
  }
  /* the paths are the chip's own copies */
  chip->cfg = c;
  chip->cfg.record_path = c.record_path ? strdup(c.record_path) : NULL;
  chip->cfg.replay_path = c.replay_path ? strdup(c.replay_path) : NULL;
  if ((c.record_path && !chip->cfg.record_path) || (c.replay_path && !chip->cfg.replay_path)) {
    free((char *)chip->cfg.record_path);
    free((char *)chip->cfg.replay_path);
    free(chip->async);
    free(chip);
    return create_fail(err, PTO_ENOMEM, "pto_chip_create: out of memory for the record paths");
  }
  redux_kernel_init(&chip->kernels[KERNEL_REDUX_COMBINE], c.aiv_per_cluster);
  static _Atomic uint64_t chips_made;
  chip->uid = atomic_fetch_add_explicit(&chips_made, 1, memory_order_relaxed) + 1;
  *out = chip;
  return PTO_OK;
}

int pto_chip_create_ex(const pto_chip_config *cfg, pto_chip **out, pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(create_chip(cfg, out, err), err->details);
}

int pto_chip_create(const pto_chip_config *cfg, pto_chip **out) {
  return pto_chip_create_ex(cfg, out, NULL);
}

static void run_quit(pto_run *r);
static void chip_release(pto_chip *chip);
static void chip_free(pto_chip *chip);

/* Joins the chip's threads (against shutdown_ms) and frees it. A thread
 * stuck in a kernel is left behind and frees the chip when it returns; a
 * chip whose async completer never left a run is leaked (it may still use
 * it). */
/* The chip whose orchestration function this thread is running, if any
 * (pto_chip_run; nested runs of other chips save and restore it). */
static _Thread_local pto_chip *orchestrating;

void pto_chip_destroy(pto_chip *chip) {
  if (!chip) return;
  /* held as a run holds it: during a run (from its orchestration, a
   * kernel or another thread) it would free the chip under the run */
  int idle = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &idle, 1)) {
    last_error_set(PTO_EBUSY, "pto_chip_destroy: the chip is running (or being changed on "
                              "another thread); it did nothing: destroy it after pto_chip_run "
                              "returns");
    if (orchestrating == chip) /* another thread's call only reads `running`, not the run */
      run_fail(chip->run, PTO_EBUSY, PTO_TASK_NONE, -1,
               "pto_chip_destroy was called during the run; it did nothing: destroy the chip "
               "after pto_chip_run returns");
    return;
  }
  if (!chip->run) {
    chip_free(chip);
    return;
  }
  run_quit(chip->run);
  if (!chip->broken) chip_release(chip);
}

const pto_chip_config *pto_chip_get_config(const pto_chip *chip) {
  return chip ? &chip->cfg : NULL;
}

int pto_chip_set_trace(pto_chip *chip, const char *path) {
  if (!chip) return last_error_set(PTO_EINVAL, "pto_chip_set_trace: chip is NULL");
  /* refused here, not by the run's end, which would fail after all its work */
  if (path && !path[0])
    return last_error_set(PTO_EINVAL, "pto_chip_set_trace: the path is empty (NULL turns "
                                      "tracing off); the setting stays as it was");
  /* a run reads the path at its end: it is held as a run is */
  int idle = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &idle, 1))
    return last_error_set(PTO_EBUSY, "pto_chip_set_trace: the chip is running (set the trace "
                                     "between runs); the setting stays as it was");
  free(chip->trace_path);
  chip->trace_path = path ? strdup(path) : NULL;
  int rc = path && !chip->trace_path ? PTO_ENOMEM : PTO_OK;
  atomic_store(&chip->running, 0);
  return rc;
}

void chip_set_trace_process(pto_chip *chip, int pid, const char *name, uint64_t origin_ns) {
  chip->trace_pid = pid;
  snprintf(chip->trace_name, sizeof chip->trace_name, "%s", name ? name : "");
  chip->trace_origin_ns = origin_ns;
}

void chip_set_cpu_first(pto_chip *chip, int first) { chip->cpu_first = first; }

void chip_keep_queue_order(pto_chip *chip) { chip->queue_order = true; }

void chip_set_fail_wake(pto_chip *chip, void (*wake)(void *arg), void *arg) {
  chip->fail_wake = wake;
  chip->fail_wake_arg = arg;
}

void chip_set_node_cancel(pto_chip *chip, const _Atomic uint64_t *word, uint32_t gen,
                          const char *(*why)(void *arg, char *buf, size_t n), void *arg) {
  chip->node_cancel = gen ? word : NULL; /* gen 0 would match no word at all (0) */
  chip->node_cancel_gen = gen;
  chip->node_cancel_why = why;
  chip->node_cancel_arg = arg;
}

int chip_set_schedule(pto_chip *chip, uint64_t seed, const char *record, const char *replay) {
  char *rec = record ? strdup(record) : NULL, *rep = replay ? strdup(replay) : NULL;
  if ((record && !rec) || (replay && !rep)) {
    free(rec);
    free(rep);
    return PTO_ENOMEM;
  }
  free((char *)chip->cfg.record_path);
  free((char *)chip->cfg.replay_path);
  chip->cfg.schedule_seed = seed;
  chip->cfg.record_path = rec;
  chip->cfg.replay_path = rep;
  return 0;
}

void chip_set_trace_task_base(pto_chip *chip, int64_t base) { chip->trace_task_base = base; }

int64_t chip_trace_task_end(const pto_chip *chip) { return chip->trace_task_end; }

/* Registration refusals say why through pto_last_error (the calls take no
 * pto_error_info). */
#define REG_FAIL(code, ...) last_error_set(code, "pto_kernel_register: " __VA_ARGS__)

static int kernel_add(pto_chip *chip, const pto_kernel_desc *d, int *kernel_id) {
  int aiv = d->aiv ? (d->aiv_count ? d->aiv_count : 1) : 0;
  if (!d->aic && !d->aiv)
    return REG_FAIL(PTO_EINVAL, "'%s' has no function (aic and aiv are NULL)", d->name);
  if (!d->aiv && d->aiv_count)
    return REG_FAIL(PTO_EINVAL, "'%s': aiv_count = %d without an aiv function", d->name,
                    d->aiv_count);
  if (aiv < 0 || aiv > 2)
    return REG_FAIL(PTO_EINVAL, "'%s': aiv_count = %d, must be 0, 1 or 2", d->name, d->aiv_count);
  for (int i = 0; i < chip->nkernels; i++)
    if (strncmp(chip->kernels[i].name, d->name, sizeof chip->kernels[i].name) == 0)
      return REG_FAIL(PTO_EINVAL,
                      "a kernel named '%s' is already registered (id %d): names tell kernels "
                      "apart in traces and schedule records",
                      d->name, i);
  if (chip->nkernels >= PTO_MAX_KERNELS)
    return REG_FAIL(PTO_EINVAL, "'%s': a chip holds at most %d kernels", d->name, PTO_MAX_KERNELS);
  kernel_rec *k = &chip->kernels[chip->nkernels];
  snprintf(k->name, sizeof k->name, "%s", d->name);
  k->aic = d->aic;
  k->aiv = d->aiv;
  k->aiv_count = aiv;
  k->skip_read_check = false;
  if (d->aic)
    k->shape = aiv == 0 ? SHAPE_AIC : aiv == 1 ? SHAPE_AIC_AIV : SHAPE_AIC_AIV2;
  else
    k->shape = aiv == 1 ? SHAPE_AIV : SHAPE_AIV2;
  chip->mix_kernels |= shape_aic(k->shape) + shape_aiv(k->shape) > 1;
  *kernel_id = chip->nkernels++;
  return PTO_OK;
}

int pto_kernel_register(pto_chip *chip, const pto_kernel_desc *d, int *kernel_id) {
  if (!chip) return REG_FAIL(PTO_EINVAL, "chip is NULL");
  if (!d) return REG_FAIL(PTO_EINVAL, "desc is NULL");
  if (!d->name) return REG_FAIL(PTO_EINVAL, "name is NULL");
  char why[200];
  if (reg_name_check(d->name, sizeof chip->kernels[0].name, why, sizeof why))
    return REG_FAIL(PTO_EINVAL, "%s: names tell kernels apart in traces and schedule records", why);
  if (!kernel_id) return REG_FAIL(PTO_EINVAL, "'%s': kernel_id is NULL", d->name);
  /* the cores read the table during a run: it is held as a run is */
  int idle = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &idle, 1))
    return REG_FAIL(PTO_EBUSY, "'%s': the chip is running; register kernels before the run",
                    d->name);
  int rc = kernel_add(chip, d, kernel_id);
  atomic_store(&chip->running, 0);
  return rc;
}

int pto_kernel_register_aic(pto_chip *chip, const char *name, pto_kernel_fn fn, int *id) {
  pto_kernel_desc d = {.name = name, .aic = fn};
  return pto_kernel_register(chip, &d, id);
}

int pto_kernel_register_aiv(pto_chip *chip, const char *name, pto_kernel_fn fn, int *id) {
  pto_kernel_desc d = {.name = name, .aiv = fn};
  return pto_kernel_register(chip, &d, id);
}
#undef REG_FAIL

const char *pto_stall_class_name(pto_stall_class c) {
  switch (c) {
  case PTO_STALL_NONE: return "none";
  case PTO_STALL_TASK_STUCK: return "running task stuck";
  case PTO_STALL_NO_DISPATCH: return "ready work not dispatched";
  case PTO_STALL_DEP_DEADLOCK: return "dependency deadlock";
  case PTO_STALL_ORCH_STARVED: return "orchestrator starves the schedulers";
  }
  return "?";
}

void pto_error_print(const pto_error_info *e, FILE *stream) {
  FILE *f = stream ? stream : stderr;
  if (!e || e->code == 0) return;
  fprintf(f, "%s: %s\n", pto_status_name(e->code), pto_strerror(e->code));
  if (e->code == PTO_ESCHED_TIMEOUT) fprintf(f, "  class: %s\n", pto_stall_class_name(e->stall));
  if (e->task_id >= 0)
    fprintf(f, "  task %lld (%s)%s", (long long)e->task_id, e->kernel[0] ? e->kernel : "?",
            e->core_id >= 0 ? "" : "\n");
  if (e->core_id >= 0) fprintf(f, "%score %d\n", e->task_id >= 0 ? " on " : "  ", e->core_id);
  if (e->details[0]) fprintf(f, "  %s\n", e->details);
}

/* ---- the chip's run state and threads ----
 * Made at the chip's first run (run_create, make_threads), reset by every
 * run in time proportional to what the previous run used (run_reset), and
 * freed by pto_chip_destroy, or by the last thread to return when destroy
 * had to leave a thread stuck in a kernel behind (chip_release). */

static void run_free(pto_run *r) {
  orch_teardown(r);
  for (int q = 0; q < SHAPE_COUNT; q++) {
    free(r->queues[q].items);
    free(r->queues[q].up_cells);
  }
  free(r->sync_queue.items);
  free(r->slots);
  free(r->deps);
  free(r->dep_from);
  if (r->scheds)
    for (int s = 0; s < r->nsched; s++) {
      free(r->scheds[s].cores);
      free(r->scheds[s].clusters);
      free(r->scheds[s].spots);
      free(r->scheds[s].parked);
      free(r->scheds[s].claim_tasks);
      free(r->scheds[s].claim_blocks);
      free(r->scheds[s].sets[0].at);
      free(r->scheds[s].sets[0].pos);
      free(r->scheds[s].sets[1].at);
      free(r->scheds[s].cl_mark);
    }
  free(r->scheds);
  free(r->cores);
  pthread_mutex_destroy(&r->err_lock);
  if (r->trace) trace_destroy(r->trace);
  free(r);
}

/* Gives back what a run that ended with a thread inside lent (run_loan),
 * once that thread has left. */
static void chip_give_back(pto_chip *chip) {
  if (!chip->held_release) return;
  chip->held_release(chip->held);
  chip->held_release = NULL;
  chip->held = NULL;
}

static void chip_free(pto_chip *chip) {
  chip_give_back(chip); /* the last thread has left */
  if (chip->run) run_free(chip->run);
  free(chip->trace_path);
  free((char *)chip->cfg.record_path);
  free((char *)chip->cfg.replay_path);
  free(chip->async);
  free(chip);
}

/* Drops one reference (a thread's, or the chip's own at destroy); the last
 * one frees the chip. */
static void chip_release(pto_chip *chip) {
  /* acq_rel: every thread's last touch happens-before the free */
  if (atomic_fetch_sub_explicit(&chip->run->alive, 1, memory_order_acq_rel) == 1) chip_free(chip);
}

static void *core_thread(void *arg) {
  core *c = arg;
  core_main(c);
  chip_release(c->run->chip);
  return NULL;
}

static void *sched_thread(void *arg) {
  sched *s = arg;
  sched_main(s);
  chip_release(s->run->chip);
  return NULL;
}

static void *watchdog_thread(void *arg) {
  pto_run *r = arg;
  watchdog_main(r);
  chip_release(r->chip);
  return NULL;
}

/* On failure `why` names the part that could not be set up. */
static int run_create(pto_chip *chip, pto_run **out, char *why, size_t n) {
  const pto_chip_config *c = &chip->cfg;
  pto_run *r = cacheline_calloc(1, sizeof *r);
  if (!r) {
    snprintf(why, n, "the run's state (%zu bytes)", sizeof *r);
    return PTO_ENOMEM;
  }
  r->chip = chip;
  r->cfg = c;
  for (int i = 0; i < ORCH_HANDLES; i++)
    r->orch[i].run = r;
  pthread_mutex_init(&r->err_lock, NULL);
  pto_event_init(&r->orch_ev, false);
  pto_event_init(&r->watchdog_ev, false);
  pto_event_init(&r->ended_ev, false);
  atomic_init(&r->phase, 0);
  atomic_init(&r->quit, 0);
  atomic_init(&r->alive, 1); /* the chip's own reference */
  r->nslots = c->task_slots;
  r->ndeps = c->dep_entries;
  r->slot_mask = (uint32_t)rq_cap_for(r->nslots) - 1;
  r->slots = cacheline_calloc((size_t)r->slot_mask + 1, sizeof *r->slots);
  /* written now, as the argument ring (ring_populate): calloc would leave
   * a large block's pages to be faulted in at first use */
  r->deps = malloc(sizeof *r->deps * r->ndeps);
  if (r->deps) memset(r->deps, 0, sizeof *r->deps * r->ndeps);
  r->dep_from = malloc(sizeof *r->dep_from * r->ndeps);
  r->nasync = chip->nasync;
  r->async = chip->async;
  int per_cluster = c->aic_per_cluster + c->aiv_per_cluster;
  r->ncores = c->clusters * per_cluster;
  r->nsched = c->schedulers;
  r->sched_threads = c->sched_threads != 0;
  r->cores = cacheline_calloc((size_t)r->ncores, sizeof *r->cores);
  r->scheds = cacheline_calloc((size_t)r->nsched, sizeof *r->scheds);
  snprintf(why, n, "the task slots (task_slots = %u)", c->task_slots);
  if (!r->slots) goto nomem;
  snprintf(why, n, "the dependency entries (dep_entries = %u)", c->dep_entries);
  if (!r->deps || !r->dep_from) goto nomem;
  snprintf(why, n, "the cores and schedulers (clusters = %d, schedulers = %d)", c->clusters,
           c->schedulers);
  if (!r->cores || !r->scheds) goto nomem;
  snprintf(why, n, "the ready queues (task_slots = %u)", c->task_slots);
  for (int q = 0; q <= SHAPE_COUNT; q++) {
    ready_queue *rq = q < SHAPE_COUNT ? &r->queues[q] : &r->sync_queue;
    uint64_t cap = (uint64_t)r->slot_mask + 1; /* room for every live task and slot index */
    /* zeroed, as rq_init needs: pages of cells no push reaches are never
     * touched (ready_queue.h); the shape queues' priority levels
     * (priority.h) are 3 x cap words each that a run without priorities
     * never touches */
    task **items = calloc(cap, sizeof(task *));
    _Atomic uint64_t *up = q < SHAPE_COUNT ? calloc(cap * PTO_PRIORITY_MAX, sizeof *up) : NULL;
    if (!items || (q < SHAPE_COUNT && !up)) {
      free(items);
      free(up);
      goto nomem;
    }
    ready_queue_init(rq, (uint32_t)cap, items, up);
  }
  snprintf(why, n, "the schedulers' core lists (clusters = %d, schedulers = %d)", c->clusters,
           c->schedulers);
  for (int s = 0; s < r->nsched; s++) {
    sched *sc = &r->scheds[s];
    sc->id = s;
    sc->run = r;
    pto_event_init(&sc->ev, false);
    atomic_init(&sc->entered, 0);
    sc->cores = calloc((size_t)r->ncores, sizeof(core *));
    sc->clusters = calloc((size_t)c->clusters, sizeof(int));
    sc->spots = calloc((size_t)r->ncores, sizeof(core *));
    sc->parked = calloc((size_t)r->ncores, sizeof(core *));
    sc->claim_tasks = calloc((size_t)r->ncores, sizeof(task *));
    sc->claim_blocks = calloc((size_t)r->ncores, sizeof(int32_t));
    /* the two core sets share one position array (items: indexes in cores) */
    int own = (c->clusters + r->nsched - 1) / r->nsched * per_cluster;
    sc->sets[0].at = malloc(sizeof(_Atomic int) * (size_t)own);
    sc->sets[1].at = malloc(sizeof(_Atomic int) * (size_t)own);
    sc->sets[0].pos = sc->sets[1].pos = malloc(sizeof(int) * (size_t)own);
    sc->cl_mark = calloc((size_t)c->clusters, sizeof(uint32_t));
    if (!sc->cores || !sc->clusters || !sc->spots || !sc->parked || !sc->claim_tasks ||
        !sc->claim_blocks || !sc->sets[0].at || !sc->sets[1].at || !sc->sets[0].pos || !sc->cl_mark)
      goto nomem;
  }
  for (int cl = 0; cl < c->clusters; cl++) {
    sched *sc = &r->scheds[cl % r->nsched];
    sc->clusters[sc->nclusters++] = cl;
    for (int k = 0; k < per_cluster; k++) {
      int id = cl * per_cluster + k;
      core *co = &r->cores[id];
      co->id = id;
      co->cluster = cl;
      co->sched = sc->id;
      co->type = k < c->aic_per_cluster ? PTO_CORE_AIC : PTO_CORE_AIV;
      co->run = r;
      pto_event_init(&co->ev, false);
      atomic_init(&co->entered, 0);
      co->sched_idx = sc->ncores;
      cs_add(&sc->sets[co->type], co->sched_idx);
      sc->cores[sc->ncores++] = co;
    }
  }
  int rc = orch_setup(r, why, n);
  if (rc) {
    run_free(r);
    return rc;
  }
  *out = r;
  return PTO_OK;
nomem:
  run_free(r);
  return PTO_ENOMEM;
}

/* Starts the threads not started yet (all of them at the first run; after
 * a failed pthread_create, the rest at a later run). They park at once. On
 * a failure, why names the thread, how many of the run's threads are
 * started and pthread_create's error. */
static int make_threads(pto_run *r, char *why, size_t len) {
  int rc = 0;
  char what[300];
  for (int i = 0; i < r->ncores && !rc; i++) {
    if (r->cores[i].started) continue;
    atomic_fetch_add_explicit(&r->alive, 1, memory_order_relaxed);
    rc = thread_start(&r->cores[i].thread, core_thread, &r->cores[i], what, sizeof what,
                      "the thread of core %d of %d", i, r->ncores);
    r->cores[i].started = rc == 0;
  }
  for (int s = 0; s < r->nsched && !rc && r->sched_threads; s++) {
    if (r->scheds[s].started) continue;
    atomic_fetch_add_explicit(&r->alive, 1, memory_order_relaxed);
    rc = thread_start(&r->scheds[s].thread, sched_thread, &r->scheds[s], what, sizeof what,
                      "the thread of scheduler %d of %d", s, r->nsched);
    r->scheds[s].started = rc == 0;
  }
  if (!rc && !r->watchdog_started) {
    atomic_fetch_add_explicit(&r->alive, 1, memory_order_relaxed);
    rc = thread_start(&r->watchdog, watchdog_thread, r, what, sizeof what, "the watchdog thread");
    r->watchdog_started = rc == 0;
  }
  if (rc) {
    atomic_fetch_sub_explicit(&r->alive, 1, memory_order_relaxed); /* not started */
    int started = r->watchdog_started, total = r->ncores + 1;
    for (int i = 0; i < r->ncores; i++)
      started += r->cores[i].started;
    if (r->sched_threads) {
      total += r->nsched;
      for (int s = 0; s < r->nsched; s++)
        started += r->scheds[s].started;
    }
    snprintf(why, len, "%s (%d of the run's %d threads started)", what, started, total);
  } else {
    pto_wait_reserve(atomic_load_explicit(&r->alive, memory_order_relaxed));
  }
  return rc;
}

/* Everything a run changes, back to its state before the first run. Runs
 * only while no thread is inside a run (run_enter/run_leave), so plain
 * stores suffice; the publication of the next phase orders them. O(cores +
 * schedulers + async slots), plus what the orchestrator's state used. */
static void run_reset(pto_run *r) {
  atomic_store_explicit(&r->submitted, 0, memory_order_relaxed);
  atomic_store_explicit(&r->completed, 0, memory_order_relaxed);
  atomic_store_explicit(&r->status, 0, memory_order_relaxed);
  atomic_store_explicit(&r->stop, 0, memory_order_relaxed);
  atomic_store_explicit(&r->orch_done, 0, memory_order_relaxed);
  r->node_cancel = r->chip->node_cancel; /* the node task this run belongs to */
  r->node_cancel_gen = r->chip->node_cancel_gen;
  atomic_store_explicit(&r->async_done, 0, memory_order_relaxed);
  atomic_store_explicit(&r->ready_gen, 0, memory_order_relaxed);
  atomic_store_explicit(&r->drain_gen, 0, memory_order_relaxed);
  wb_reset(&r->wake, pto_wait_cpus());
  /* a failed run may leave ready tasks queued: none of them is run N+1's */
  for (int q = 0; q <= SHAPE_COUNT; q++) {
    ready_queue *rq = q < SHAPE_COUNT ? &r->queues[q] : &r->sync_queue;
    rq_discard(&rq->lf);
    for (int l = 0; l < PTO_PRIORITY_MAX && rq->up_cells; l++)
      rq_discard(&rq->up[l]);
    atomic_store_explicit(&rq->up_used, 0, memory_order_relaxed);
    rq->head = 0;
    rq->last_taker = -1;
    atomic_store_explicit(&rq->count, 0, memory_order_relaxed);
  }
  error_info_reset(&r->err);
  atomic_store_explicit(&r->orch_wake_at, INT64_MAX, memory_order_relaxed);
  r->orch_start_ns = r->orch_end_ns = 0;
  atomic_store_explicit(&r->sync_fast, 0, memory_order_relaxed);
  atomic_store_explicit(&r->sync_tasks, 0, memory_order_relaxed);
  atomic_store_explicit(&r->spread_max_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&r->spread_sum_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&r->drain_lat_max_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&r->drain_lat_sum_ns, 0, memory_order_relaxed);
  r->orch_track = 0;
  r->loan = (run_loan){0};
  /* the chip's async slots: one left busy by an earlier run (its
   * completion never came) is free again; its generation stays stale */
  for (uint32_t i = 0; i < r->nasync; i++)
    atomic_fetch_and_explicit(&r->async[i].state, ~1ull, memory_order_relaxed);
  r->async_gen0 =
      atomic_load_explicit(&r->chip->async_gen, memory_order_relaxed) & ((1ull << 48) - 1);
  drain_init(&r->drain, r->nsched);
  for (int s = 0; s < r->nsched; s++) {
    sched *sc = &r->scheds[s];
    role_init(&sc->role);
    sc->wake_pending = false;
    sc->starved = false;
    drain_part_init(&sc->drain, s);
    sc->trace_att = 0;
    sc->first_ns = sc->last_ns = 0;
    sc->steals = 0;
    /* a run may end before the pass that would look (sched_lone_ask) */
    atomic_store_explicit(&sc->lone_for, NULL, memory_order_relaxed);
    atomic_store_explicit(&sc->lone_any, 0, memory_order_relaxed);
    sc->trace_track = 0;
    /* every core idle */
    for (int t = 0; t < 2; t++) { /* PTO_CORE_AIC, PTO_CORE_AIV */
      cs_reset(&sc->sets[t]);
      steal_reset_counts(&sc->idle[t], &sc->pending[t], (uint32_t)cs_idle(&sc->sets[t]));
    }
  }
  /* the blocks' length in the run before, for the orchestrator's look
   * (orch.c, orch_unstarted_look): most of the blocks the cores timed
   * were long (a vote, not an average: a block timed across a
   * preemption counts once), of enough of them (short blocks are timed
   * one in 256: a run of 512 timed 2 or 3) */
  uint32_t timed = 0, timed_long = 0;
  for (int i = 0; i < r->ncores; i++) {
    timed += r->cores[i].timed;
    timed_long += r->cores[i].timed_long;
  }
  r->prev_blocks_long = timed >= UNSTARTED_MIN_TIMED && 2 * timed_long > timed;
  for (int i = 0; i < r->ncores; i++) {
    core *co = &r->cores[i];
    co->defer_current = false;
    co->left_heads = false;
    atomic_store_explicit(&co->dispatched, 0, memory_order_relaxed);
    atomic_store_explicit(&co->finished, 0, memory_order_relaxed);
    steal_reset_claim(&co->claim);
    atomic_store_explicit(&co->woken, 0, memory_order_relaxed);
    for (int k = 0; k < 2; k++)
      payload_set(&co->slot[k], NULL, 0, 0);
    co->issued = co->seen = 0;
    atomic_store_explicit(&co->cur_task, PTO_TASK_NONE, memory_order_relaxed);
    co->first_ns = 0;
    co->nblocks = 0;
    co->ran = 0;
    atomic_store_explicit(&co->block_ns, 0, memory_order_relaxed);
    co->timed = co->timed_long = 0;
    co->holds = 0;
    co->running = NULL;
    co->handoffs = 0;
    co->head_yields = 0;
    co->trace_track = 0;
  }
  orch_reset(r);
}

/* This run's trace and its tracks, when the chip records one. */
static int run_trace_begin(pto_run *r) {
  pto_chip *chip = r->chip;
  if (!chip->trace_path) return PTO_OK;
  r->trace = trace_create(chip->trace_pid, chip->trace_name[0] ? chip->trace_name : "chip");
  if (!r->trace) return PTO_ENOMEM;
  r->orch_track = trace_track(r->trace, "orchestrator");
  trace_set_task_base(r->trace, chip->trace_task_base);
  for (int s = 0; s < r->nsched; s++) {
    char name[32];
    snprintf(name, sizeof name, "scheduler %d", s);
    r->scheds[s].trace_track = trace_track(r->trace, name);
  }
  int per_cluster = r->cfg->aic_per_cluster + r->cfg->aiv_per_cluster;
  for (int i = 0; i < r->ncores; i++) {
    core *co = &r->cores[i];
    int k = i % per_cluster;
    char name[48];
    snprintf(name, sizeof name, "cluster %d %s%d", co->cluster,
             co->type == PTO_CORE_AIC ? "AIC" : "AIV",
             co->type == PTO_CORE_AIC ? 0 : k - r->cfg->aic_per_cluster);
    co->trace_track = trace_track(r->trace, name);
  }
  return PTO_OK;
}

/* Threads still inside run `gen`, scanned from `from` on. */
typedef struct left_wait {
  pto_run *r;
  uint64_t gen;
  int from; /* cores [0, from) and then schedulers have left */
} left_wait;

static bool all_left(void *p) {
  left_wait *w = p;
  pto_run *r = w->r;
  /* acquire (seq_cst): each thread's last touch of the run happens-before */
  for (; w->from < r->ncores + r->nsched; w->from++) {
    _Atomic uint64_t *e =
        w->from < r->ncores ? &r->cores[w->from].entered : &r->scheds[w->from - r->ncores].entered;
    if (atomic_load_explicit(e, memory_order_seq_cst) == w->gen) return false;
  }
  return atomic_load_explicit(&r->wd_busy, memory_order_seq_cst) == 0;
}

/* Ends run `phase`: no thread enters it any more, those inside are told to
 * stop and woken, and are waited for against shutdown_ms. Returns false
 * when one is still inside (a kernel that ignores pto_kctx_cancelled): the
 * run's state then stays as it is until that thread has left. */
static bool run_end(pto_run *r, uint64_t phase) {
  atomic_store_explicit(&r->stop, 1, memory_order_release); /* pairs with run_stopping() */
  atomic_store_explicit(&r->phase, phase & ~1ull, memory_order_seq_cst);
  uint64_t gen = run_phase_gen(phase);
  /* wake only the threads inside: parked ones stay parked (no syscall) */
  for (int i = 0; i < r->ncores; i++)
    if (atomic_load_explicit(&r->cores[i].entered, memory_order_seq_cst) == gen)
      pto_event_signal(&r->cores[i].ev);
  for (int s = 0; s < r->nsched; s++)
    if (atomic_load_explicit(&r->scheds[s].entered, memory_order_seq_cst) == gen)
      pto_event_signal(&r->scheds[s].ev);
  left_wait w = {r, gen, 0};
  if (pto_wait(&r->ended_ev, all_left, &w, pto_deadline_ms(r->cfg->shutdown_ms))) return true;
  int stuck = w.from < r->ncores ? w.from : -1;
  pto_task_id id =
      stuck >= 0 ? atomic_load_explicit(&r->cores[stuck].cur_task, memory_order_relaxed) : -1;
  char who[64];
  if (stuck >= 0 && id >= 0)
    snprintf(who, sizeof who, "core %d (task %lld)", stuck, (long long)id);
  else if (stuck >= 0) /* its kernel returned; it has not left yet */
    snprintf(who, sizeof who, "core %d (its kernel just returned)", stuck);
  else if (w.from < r->ncores + r->nsched)
    snprintf(who, sizeof who, "scheduler thread %d", w.from - r->ncores);
  else
    snprintf(who, sizeof who, "the watchdog");
  char what[200];
  snprintf(what, sizeof what,
           "%s did not leave the run within shutdown_ms=%lld (a kernel that ignores "
           "pto_kctx_cancelled?); the chip runs again once it has left",
           who, (long long)r->cfg->shutdown_ms);
  pthread_mutex_lock(&r->err_lock);
  bool latched = atomic_load_explicit(&r->status, memory_order_relaxed) != 0;
  if (latched) { /* the run's cause stays first; the chip's state is said after it */
    size_t n = strlen(r->err.details);
    snprintf(r->err.details + n, sizeof r->err.details - n, "%s%s", n ? "; then " : "", what);
  }
  pthread_mutex_unlock(&r->err_lock);
  if (!latched) run_fail(r, PTO_ESHUTDOWN, id, stuck, "%s", what);
  return false;
}

/* A run that ended with a thread still inside: has it left since? */
static bool stragglers_left(pto_run *r, char *why, size_t n) {
  left_wait w = {r, run_phase_gen(atomic_load_explicit(&r->phase, memory_order_relaxed)), 0};
  if (all_left(&w)) return true;
  if (w.from < r->ncores) {
    core *c = &r->cores[w.from];
    snprintf(why, n,
             "core %d is still running task %lld of an earlier run (its kernel ignores "
             "pto_kctx_cancelled); this chip runs again once it returns, or create a new chip",
             c->id, (long long)atomic_load_explicit(&c->cur_task, memory_order_relaxed));
  } else {
    snprintf(why, n,
             "a thread of an earlier run has not left it; this chip runs again once it "
             "has, or create a new chip");
  }
  return false;
}

/* Holding the chip (running): a run that ended with a thread inside is
 * over once that thread has left; its state, its trace and the graph it
 * launched are given back. False while it is still inside (why: who). */
static bool chip_unstick(pto_chip *chip, char *why, size_t n) {
  if (!chip->stuck) return true;
  pto_run *r = chip->run;
  if (!stragglers_left(r, why, n)) return false;
  chip->stuck = false; /* it has left: the run's state is ours again */
  if (r->trace) trace_destroy(r->trace);
  r->trace = NULL;
  chip_give_back(chip);
  return true;
}

void chip_settle(pto_chip *chip) {
  int idle = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &idle, 1)) return;
  char why[8];
  (void)chip_unstick(chip, why, sizeof why);
  atomic_store(&chip->running, 0);
}

bool pto_chip_stuck(pto_chip *chip) {
  if (!chip || !chip->stuck || !chip->run || atomic_load(&chip->running)) return false;
  char why[8];
  return !stragglers_left(chip->run, why, sizeof why);
}

static bool join_deadline(pthread_t th, uint64_t deadline) {
  uint64_t now = pto_now_ns();
  uint64_t ns = deadline > now ? deadline - now : 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec += (long)(ns % 1000000000ull);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return pthread_timedjoin_np(th, NULL, &ts) == 0;
}

/* Destroy's side: every thread is told to return and joined against one
 * deadline; one that does not return in time (stuck in a kernel) is
 * detached and frees the chip itself when it finally returns. */
static void run_quit(pto_run *r) {
  atomic_store_explicit(&r->quit, 1, memory_order_release);
  for (int i = 0; i < r->ncores; i++)
    pto_event_signal(&r->cores[i].ev);
  for (int s = 0; s < r->nsched; s++)
    pto_event_signal(&r->scheds[s].ev);
  pto_event_signal(&r->watchdog_ev);
  uint64_t deadline = pto_deadline_ms(r->cfg->shutdown_ms);
  for (int s = 0; s < r->nsched; s++)
    if (r->scheds[s].started && !join_deadline(r->scheds[s].thread, deadline))
      pthread_detach(r->scheds[s].thread);
  for (int i = 0; i < r->ncores; i++)
    if (r->cores[i].started && !join_deadline(r->cores[i].thread, deadline))
      pthread_detach(r->cores[i].thread);
  if (r->watchdog_started && !join_deadline(r->watchdog, deadline)) pthread_detach(r->watchdog);
}

static bool no_async_calls(void *p) {
  /* pairs with the completer's decrement: it is done with the run */
  return atomic_load_explicit((_Atomic int32_t *)p, memory_order_seq_cst) == 0;
}

static double span_us(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1000.0 : 0.0; }

/* The run's figures; `whole`: no thread is left inside it, else only the
 * orchestrator's own (the threads' counters may still change). */
static void run_stats(pto_run *r, uint64_t host0, uint64_t host1, bool whole, pto_run_stats *st) {
  memset(st, 0, sizeof *st);
  st->tasks = (uint64_t)atomic_load(&r->submitted);
  st->host_us = span_us(host0, host1);
  st->orch_us = span_us(r->orch_start_ns, r->orch_end_ns);
  if (!whole) return;
  uint64_t s0 = UINT64_MAX, s1 = 0, d0 = UINT64_MAX, d1 = 0;
  for (int s = 0; s < r->nsched; s++) {
    st->steals += r->scheds[s].steals;
    if (!r->scheds[s].first_ns) continue;
    if (r->scheds[s].first_ns < s0) s0 = r->scheds[s].first_ns;
    if (r->scheds[s].last_ns > s1) s1 = r->scheds[s].last_ns;
  }
  /* the schedulers see every block end, so their last activity ends the device span */
  d0 = s0;
  d1 = s1;
  for (int i = 0; i < r->ncores; i++) {
    if (!r->cores[i].first_ns) continue;
    if (r->cores[i].first_ns < d0) d0 = r->cores[i].first_ns;
  }
  if (s0 != UINT64_MAX) st->sched_us = span_us(s0, s1);
  if (d0 != UINT64_MAX) st->device_us = span_us(d0, d1);
  uint64_t e0 = r->orch_start_ns < s0 ? r->orch_start_ns : s0;
  uint64_t e1 = r->orch_end_ns > s1 ? r->orch_end_ns : s1;
  st->effective_us = span_us(e0, e1);
  st->sync_tasks = atomic_load(&r->sync_tasks);
  st->sync_fast_launches = atomic_load(&r->sync_fast);
  drain_stats ds;
  drain_get_stats(&r->drain, &ds);
  st->drains = ds.drains;
  st->drain_attempts = ds.attempts;
  st->drain_max_attempts = ds.max_attempts;
  st->cohort_spread_max_us = (double)atomic_load(&r->spread_max_ns) / 1000.0;
  st->cohort_spread_sum_us = (double)atomic_load(&r->spread_sum_ns) / 1000.0;
  st->drain_latency_max_us = (double)atomic_load(&r->drain_lat_max_ns) / 1000.0;
  st->drain_latency_sum_us = (double)atomic_load(&r->drain_lat_sum_ns) / 1000.0;
  for (int i = 0; i < r->ncores; i++) {
    st->pull_holds += r->cores[i].holds;
    st->handoffs += r->cores[i].handoffs;
    st->head_yields += r->cores[i].head_yields;
    /* counted where they run: a block placed and then dropped by a failed
     * run is no block executed */
    st->blocks += r->cores[i].ran;
  }
  st->gathered = r->gathered;
  st->blocks += r->contract_blocks; /* checking mode ran them (contract.c) */
}

/* err: never NULL (pto_chip_run gives its own). */
static int run_chip(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *stats,
                    pto_error_info *err) {
  if (stats) memset(stats, 0, sizeof *stats);
  error_info_reset(err);
#define EARLY_FAIL(rc_, ...)                                                                       \
  do {                                                                                             \
    err->code = (rc_);                                                                             \
    snprintf(err->details, sizeof err->details, __VA_ARGS__);                                      \
    return (rc_);                                                                                  \
  } while (0)
  if (!chip) EARLY_FAIL(PTO_EINVAL, "pto_chip_run: chip is NULL");
  if (!fn) EARLY_FAIL(PTO_EINVAL, "pto_chip_run: orchestration function is NULL");
  if (chip->broken)
    EARLY_FAIL(PTO_ESHUTDOWN, "an async completer never left an earlier run of this chip; "
                              "create a new chip");
  int expected = 0;
  if (!atomic_compare_exchange_strong(&chip->running, &expected, 1))
    EARLY_FAIL(PTO_EBUSY, "pto_chip_run: this chip is already running");
  uint64_t host0 = pto_now_ns();
  int rc = PTO_OK;
  if (!chip->run) {
    char why[256] = "";
    rc = run_create(chip, &chip->run, why, sizeof why);
    if (rc) {
      atomic_store(&chip->running, 0);
      EARLY_FAIL(rc, "could not set up the run: %s: %s", why,
                 rc == PTO_ENOMEM ? "out of memory" : pto_status_name(rc));
    }
  }
  pto_run *r = chip->run;
  char why_stuck[sizeof err->details];
  if (!chip_unstick(chip, why_stuck, sizeof why_stuck)) {
    atomic_store(&chip->running, 0);
    EARLY_FAIL(PTO_ESHUTDOWN, "%s", why_stuck);
  }
  run_reset(r);
  schedule_begin(r); /* before any thread enters: they read r->ctl */
  chip->run_seq++;
  rc = run_trace_begin(r);
  if (rc) r->trace = NULL;
  int trc = rc;
  char thread_why[400] = "";
  if (!rc) rc = make_threads(r, thread_why, sizeof thread_why);
  uint64_t phase =
      (run_phase_gen(atomic_load_explicit(&r->phase, memory_order_relaxed)) + 1) << 1 | 1;
  /* the states this run stores are its own (run.h, task_state): a tag
   * repeats after 2^29 runs, and only the run right before is ever read
   * (a warm launch, graph.c); every other run writes its tasks' states */
  r->state_tag =
      (int32_t)((run_phase_gen(phase) & ((1u << (31 - TASK_STATE_BITS)) - 1)) << TASK_STATE_BITS);
  atomic_store_explicit(&chip->cur_run, r, memory_order_release); /* async completers */
  /* seq_cst: the reset happens-before any thread's entry (run_enter), and
   * against the watchdog's store of wd_idle (it parks only after) */
  atomic_store_explicit(&r->phase, phase, memory_order_seq_cst);
  if (atomic_load_explicit(&r->wd_idle, memory_order_seq_cst)) pto_event_signal(&r->watchdog_ev);
  if (trc) {
    run_fail(r, trc, PTO_TASK_NONE, -1, "could not set up the run's trace (out of memory)");
  } else if (rc) {
    run_fail(r, PTO_ESYSTEM, PTO_TASK_NONE, -1, "%s", thread_why);
  } else if (r->ctl && atomic_load(&r->status)) {
    /* a controlled schedule that could not begin (a bad record): no orchestration */
  } else {
    /* the orchestrator is this thread: calls on orch are made here
     * (orch_gate), until its tasks are waited for; a handle of this run's
     * own, not the one an earlier run handed out (run.h) */
    pto_orch *orch = &r->orch[chip->run_seq % ORCH_HANDLES];
    r->orch_owner = pthread_self();
    atomic_store_explicit(&r->orch_live, orch, memory_order_release);
    pto_wait_thread_begin(); /* the orchestrator counts as one of the run's threads */
    spread_end(r);           /* the OS places the cores while the orchestrator submits */
    r->orch_start_ns = pto_now_ns();
    if (r->cfg->check == 1) contract_begin(r); /* fails the run itself */
    pto_chip *outer = orchestrating;
    orchestrating = chip;
    fn(orch, arg);
    orchestrating = outer;
    r->orch_end_ns = pto_now_ns();
    spread_orch_share(r);
    spread_begin(r); /* until the last task: a CPU per core */
    if (r->trace)
      trace_slice(r->trace, r->orch_track, "orchestration", "orch", r->orch_start_ns,
                  r->orch_end_ns, -1, -1);
    orch_finish(r); /* waits for every task, or the latched error */
    atomic_store_explicit(&r->orch_live, NULL, memory_order_release);
    pto_wait_thread_end();
  }
  if (!run_end(r, phase)) {
    chip->stuck = true;
    if (r->loan.hold) { /* the thread inside may read it */
      chip->held = r->loan.hold(r->loan.arg);
      chip->held_release = r->loan.release;
    }
  } else if (!atomic_load(&r->status))
    run_books_broken(r, true, 0); /* what it leaves is proven empty, or named */
  contract_end(r);                /* a failed run's details get the seed */
  /* No run, flip the phase, wait for the old phase's calls (all seq_cst,
   * against pto_chip_async_complete): a completer either sees no run or
   * is counted in the old phase, and the run is reset only after it left */
  atomic_store_explicit(&chip->cur_run, NULL, memory_order_seq_cst);
  uint32_t aphase = atomic_fetch_add_explicit(&chip->async_phase, 1, memory_order_seq_cst) & 1u;
  if (!pto_wait(NULL, no_async_calls, &chip->async_calls[aphase],
                pto_deadline_ms(r->cfg->shutdown_ms))) {
    run_fail(r, PTO_ESHUTDOWN, PTO_TASK_NONE, -1,
             "pto_chip_async_complete did not return within shutdown_ms=%lld",
             (long long)r->cfg->shutdown_ms);
    chip->broken = true; /* the run is never reset or freed: a completer still uses it */
  }
  schedule_end(r, chip->stuck || chip->broken); /* the record, whatever the result */
  orch_end(r);
  uint64_t host1 = pto_now_ns();
  /* A thread still inside (stuck) may still write the trace and its
   * counters: neither is read (a late kernel's slice reallocated its
   * track while the file was written). The stats then carry the
   * orchestrator's figures only, and no trace file is written. */
  const bool whole = !chip->stuck;
  if (r->trace && whole && chip->trace_origin_ns) trace_set_origin(r->trace, chip->trace_origin_ns);
  if (r->trace && whole) chip->trace_task_end = trace_task_end(r->trace);
  if (r->trace && whole && chip->trace_path) {
    /* A trace that cannot be written fails a run that succeeded, and says
     * which file and why (the first error of a failed run stays its cause).
     * Dropped events (PTO_ENOMEM) do not: the file says how many
     * (docs/tracing.md). */
    char why[sizeof r->err.details];
    int wrc = trace_write_ex(r->trace, chip->trace_path, why, sizeof why);
    if (wrc && wrc != PTO_ENOMEM) run_fail(r, wrc, PTO_TASK_NONE, -1, "%s", why);
  }
  rc = atomic_load(&r->status);
  if (stats) run_stats(r, host0, host1, whole, stats);
  *err = r->err;
  if (r->trace && !whole && chip->trace_path) { /* its cause stays first */
    size_t n = strlen(err->details);
    snprintf(err->details + n, sizeof err->details - n,
             "; no trace written to %s (a thread was still inside the run)", chip->trace_path);
  }
  if (r->trace && !chip->stuck) { /* a thread still inside may write to it */
    trace_destroy(r->trace);
    r->trace = NULL;
  }
  atomic_store(&chip->running, 0);
  return rc ? rc : chip->stuck || chip->broken ? PTO_ESHUTDOWN : PTO_OK;
#undef EARLY_FAIL
}

int pto_chip_run(pto_chip *chip, pto_orch_fn fn, void *arg, pto_run_stats *stats,
                 pto_error_info *err) {
  pto_error_info own;
  if (!err) err = &own;
  return last_error_keep(run_chip(chip, fn, arg, stats, err), err->details);
}
