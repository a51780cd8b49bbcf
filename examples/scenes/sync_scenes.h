/* sync_scenes.h — what the sync_start (gang start) scenes share: one kernel
 * for AIC, AIV and MIX (AIC + 2 AIV) blocks that marks its visit, can check
 * that its whole cohort is resident at once, can record a chip-wide counter
 * when it starts, and can hold its cores for a while; per-task buffers;
 * submit and verification helpers. Header-only: every .c file here is a
 * scene of its own.
 *
 * The co-residency check ("arrive and wait"): every core of every block
 * increments its task's arrival counter and waits until all block_num x
 * parts cores have arrived. A cohort that is not resident at once can only
 * pass it if the missing blocks start while the others wait; the wait is
 * cancellation-aware and has a deadline, so a broken gang start ends in a
 * named error instead of a hang. */
#ifndef PTO_SYNC_SCENES_H
#define PTO_SYNC_SCENES_H

#include <stdlib.h>

#include "chip_scenes.h"

/* Kernel flags (scalar 0). */
#define SS_WAIT_ALL 1u /* arrive and wait for the whole cohort */
#define SS_PROBE    2u /* record global[SS_G_DONE] at start */
#define SS_DONE     4u /* add 1 to global[SS_G_DONE] at the end (per core) */
#define SS_STARTED  8u /* set global[SS_G_STARTED] at start */

/* Chip-wide counters shared by the tasks of a scene (passed NO_DEP). */
#define SS_G_DONE    0
#define SS_G_STARTED 1
#define SS_G_WORDS   4

#define SS_WAIT_MS 10000 /* co-residency deadline; the watchdog fires earlier */

typedef enum ss_kind { SS_AIC = 0, SS_AIV, SS_MIX, SS_KINDS } ss_kind;

static inline const char *ss_kind_name(ss_kind k) {
  return k == SS_AIC ? "AIC" : k == SS_AIV ? "AIV" : "MIX";
}
static inline int ss_parts(ss_kind k) { return k == SS_MIX ? 3 : 1; }
static inline int ss_has_aic(ss_kind k) { return k != SS_AIV; }

/* Widest sync_start task of a kind the chip accepts: AIV tasks at most the
 * number of AIV cores, AIC and MIX tasks at most the number of clusters. */
static inline int ss_max_width(const pto_chip_config *cfg, ss_kind k) {
  return k == SS_AIV ? cfg->clusters * cfg->aiv_per_cluster : cfg->clusters;
}

static inline int32_t *ss_i32(const pto_tensor *t) { return (int32_t *)t->buf + t->offset; }

typedef struct ss_wait_arg {
  const pto_kctx *ctx;
  const int32_t *word;
  int32_t target;
} ss_wait_arg;

static inline bool ss_reached(void *p) {
  ss_wait_arg *w = p;
  /* acquire: pairs with the other cores' release increments */
  return __atomic_load_n(w->word, __ATOMIC_ACQUIRE) >= w->target || pto_kctx_cancelled(w->ctx);
}

/* Waits until *word >= target; PTO_EWAIT_TIMEOUT after the deadline. */
static inline int ss_wait_at_least(const pto_kctx *ctx, const int32_t *word, int32_t target) {
  ss_wait_arg w = {ctx, word, target};
  /* a cancelled run has its error already; the kernel just returns */
  return pto_wait(NULL, ss_reached, &w, pto_deadline_ms(SS_WAIT_MS)) ? PTO_OK : PTO_EWAIT_TIMEOUT;
}

/* t0 marks [block][3] (visits), t1 arrival counter [1], t2 global counters
 * (NO_DEP), t3 probes [block][3]; s0 flags, s1 hold time in us, s2 kind. */
static inline int ss_kernel(const pto_kctx *ctx) {
  if (ctx->ntensors != 4 || ctx->nscalars != 3) return PTO_EINVAL;
  const uint64_t flags = ctx->scalars[0];
  const int64_t hold_us = (int64_t)ctx->scalars[1];
  const ss_kind kind = (ss_kind)ctx->scalars[2];
  const int part = cs_part(ctx, ss_has_aic(kind));
  const int me = ctx->block_idx * 3 + part;
  int32_t *marks = ss_i32(&ctx->tensors[0]), *arrive = ss_i32(&ctx->tensors[1]);
  int32_t *global = ss_i32(&ctx->tensors[2]), *probe = ss_i32(&ctx->tensors[3]);
  /* release: the orchestrator polls this flag (acquire) before submitting */
  if (flags & SS_STARTED) __atomic_store_n(&global[SS_G_STARTED], 1, __ATOMIC_RELEASE);
  /* acquire: pairs with the release increment of finished tasks */
  if (flags & SS_PROBE) probe[me] = __atomic_load_n(&global[SS_G_DONE], __ATOMIC_ACQUIRE);
  cs_mark(&marks[me]);
  if (flags & SS_WAIT_ALL) {
    /* release: pairs with the acquire in ss_reached of the other cores */
    __atomic_fetch_add(arrive, 1, __ATOMIC_RELEASE);
    int rc = ss_wait_at_least(ctx, arrive, ctx->block_num * ss_parts(kind));
    if (rc) return rc;
  }
  if (hold_us >= 1000)
    cs_block_until_cancelled(ctx, hold_us / 1000);
  else if (hold_us > 0)
    cs_sleep_us(hold_us);
  /* release: pairs with the acquire probe of later tasks */
  if (flags & SS_DONE) __atomic_fetch_add(&global[SS_G_DONE], 1, __ATOMIC_RELEASE);
  return PTO_OK;
}

typedef struct ss_kernels {
  int id[SS_KINDS];
} ss_kernels;

static inline int ss_register(pto_chip *chip, ss_kernels *k) {
  pto_kernel_desc mix = {.name = "sync_mix", .aic = ss_kernel, .aiv = ss_kernel, .aiv_count = 2};
  int rc = pto_kernel_register_aic(chip, "sync_aic", ss_kernel, &k->id[SS_AIC]);
  if (!rc) rc = pto_kernel_register_aiv(chip, "sync_aiv", ss_kernel, &k->id[SS_AIV]);
  if (!rc) rc = pto_kernel_register(chip, &mix, &k->id[SS_MIX]);
  return rc;
}

/* One task of a scene with its own buffers (so tasks never depend on each
 * other through data). */
typedef struct ss_task {
  ss_kind kind;
  int width;
  uint64_t flags;
  int64_t hold_us;
  bool sync;
  int32_t *marks, *probe, arrive;
  pto_tensor tmarks, tarrive, tprobe;
  pto_task_id id;
  int submit_rc;
} ss_task;

static inline int ss_task_init(ss_task *t, ss_kind kind, int width, uint64_t flags, int64_t hold_us,
                               bool sync) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->width = width;
  t->flags = flags;
  t->hold_us = hold_us;
  t->sync = sync;
  t->id = PTO_TASK_NONE;
  int n = (width > 0 ? width : 1) * 3;
  t->marks = calloc((size_t)n, sizeof *t->marks);
  t->probe = calloc((size_t)n, sizeof *t->probe);
  if (!t->marks || !t->probe) return PTO_ENOMEM;
  int rc = cs_view2(&t->tmarks, t->marks, PTO_I32, n / 3, 3);
  if (!rc) rc = cs_view2(&t->tprobe, t->probe, PTO_I32, n / 3, 3);
  if (!rc) rc = cs_view2(&t->tarrive, &t->arrive, PTO_I32, 1, 1);
  return rc;
}

static inline void ss_task_free(ss_task *t) {
  free(t->marks);
  free(t->probe);
  t->marks = t->probe = NULL;
}

/* Before each run: visits and arrivals count one run. */
static inline void ss_task_reset(ss_task *t) {
  memset(t->marks, 0, sizeof *t->marks * (size_t)t->width * 3);
  memset(t->probe, 0xff, sizeof *t->probe * (size_t)t->width * 3);
  t->arrive = 0;
  t->id = PTO_TASK_NONE;
  t->submit_rc = 0;
}

static inline int ss_submit(pto_orch *o, const ss_kernels *k, ss_task *t, const pto_tensor *global,
                            const pto_task_id *deps, int ndeps) {
  pto_args a;
  pto_args_init(&a);
  pto_args_output_existing(&a, &t->tmarks);
  pto_args_output_existing(&a, &t->tarrive);
  pto_args_nodep(&a, global);
  pto_args_output_existing(&a, &t->tprobe);
  pto_args_scalar(&a, t->flags);
  pto_args_scalar(&a, (uint64_t)t->hold_us);
  pto_args_scalar(&a, (uint64_t)t->kind);
  pto_submit_opts so = {.block_num = t->width, .sync_start = t->sync, .deps = deps, .ndeps = ndeps};
  t->submit_rc = pto_submit(o, k->id[t->kind], &a, &so, &t->id);
  return t->submit_rc;
}

/* Every core of every block ran exactly once; the others never. */
static inline bool ss_check_marks(pto_scene_report *rep, const char *scene, const ss_task *t,
                                  int index) {
  const int n = t->width * 3, parts = ss_parts(t->kind);
  int32_t *exp = calloc((size_t)n, sizeof *exp);
  if (!exp) {
    cs_fail(rep, "%s: out of memory", scene);
    return false;
  }
  for (int b = 0; b < t->width; b++)
    for (int p = 0; p < parts; p++)
      exp[b * 3 + p] = 1;
  char label[128];
  snprintf(label, sizeof label, "%s: visits of task %d (%s%s, %d blocks) [block][core]", scene,
           index, t->sync ? "sync_start " : "", ss_kind_name(t->kind), t->width);
  bool ok = scene_check_i32(rep, label, t->marks, exp, (size_t)n);
  free(exp);
  return ok;
}

/* Every core of a full-width cohort saw the same number of finished tasks
 * when it started: no task ran (or finished) on any core while the cohort
 * was starting, so no block waited behind other work. */
static inline bool ss_check_probes_equal(pto_scene_report *rep, const char *scene, const ss_task *t,
                                         int index) {
  const int parts = ss_parts(t->kind);
  const int32_t first = t->probe[0];
  for (int b = 0; b < t->width; b++)
    for (int p = 0; p < parts; p++)
      if (t->probe[b * 3 + p] != first) {
        scene_print_i32(stderr, "finished-task count seen at start [block][core]", t->probe,
                        (size_t)t->width * 3);
        cs_fail(rep,
                "%s: task %d: block %d core %d started after %d other tasks had finished, "
                "block 0 after %d: the cohort did not start together",
                scene, index, b, p, t->probe[b * 3 + p], first);
        return false;
      }
  return true;
}

/* The runtime's own gang-start accounting: every sync_start task launched
 * once, by the fast path or by a drain. */
static inline bool ss_check_stats(pto_scene_report *rep, const char *scene, uint64_t nsync) {
  const pto_run_stats *s = &rep->stats;
  if (s->sync_tasks != nsync || s->sync_fast_launches + s->drains != nsync) {
    cs_fail(rep,
            "%s: %llu sync_start tasks submitted; runtime counted %llu, launched %llu on the "
            "fast path and %llu by drains",
            scene, (unsigned long long)nsync, (unsigned long long)s->sync_tasks,
            (unsigned long long)s->sync_fast_launches, (unsigned long long)s->drains);
    return false;
  }
  return true;
}

/* ---- a scene: its chip, kernels, chip-wide counters and tasks ---- */

#define SS_MAX_TASKS 256

typedef struct ss_scene {
  const char *name;
  pto_chip *chip;
  const pto_chip_config *cfg; /* the chip's actual shape */
  ss_kernels k;
  int32_t global[SS_G_WORDS];
  pto_tensor tglobal;
  int ntasks;
  ss_task task[SS_MAX_TASKS];
  void *user; /* the scene's own data */
} ss_scene;

/* Creates the chip (scene defaults: clusters, schedulers; 0 = pto's) and
 * registers the kernels. */
static inline int ss_scene_open(ss_scene *sc, const char *name, const pto_scene_opts *opts,
                                int clusters, int schedulers, pto_scene_report *rep) {
  memset(sc, 0, sizeof *sc);
  sc->name = name;
  pto_chip_config cfg;
  scene_chip_config(opts, clusters, schedulers, &cfg);
  int rc = scene_chip_create(&cfg, &sc->chip, rep);
  if (rc) return rc;
  sc->cfg = pto_chip_get_config(sc->chip);
  rc = ss_register(sc->chip, &sc->k);
  if (!rc) rc = cs_view2(&sc->tglobal, sc->global, PTO_I32, 1, SS_G_WORDS);
  return rc;
}

static inline void ss_scene_close(ss_scene *sc) {
  for (int i = 0; i < sc->ntasks; i++)
    ss_task_free(&sc->task[i]);
  pto_chip_destroy(sc->chip);
}

/* Adds a task; its width is clamped to 1..the chip's limit for its kind
 * (so scenes can derive widths from the chip without special cases). */
static inline int ss_add(ss_scene *sc, ss_kind kind, int width, uint64_t flags, int64_t hold_us,
                         bool sync) {
  if (sc->ntasks == SS_MAX_TASKS) return PTO_EINVAL;
  int max = ss_max_width(sc->cfg, kind);
  width = width < 1 ? 1 : width > max ? max : width;
  return ss_task_init(&sc->task[sc->ntasks++], kind, width, flags, hold_us, sync);
}

static inline int ss_submit_task(pto_orch *o, ss_scene *sc, int i, const pto_task_id *deps,
                                 int ndeps) {
  return ss_submit(o, &sc->k, &sc->task[i], &sc->tglobal, deps, ndeps);
}

/* Checking mode (docs/contracts.md) runs the blocks one at a time, on the
 * orchestrator's thread, whenever it waits: nothing runs beside it, and no
 * scheduler launches gangs, so a scene asserts only its data there (every
 * core ran once, a gang's cores together), not how the scheduler placed
 * blocks in time. */
static inline bool ss_checking(const ss_scene *sc) { return sc->cfg->check != 0; }

static inline bool ss_started(void *p) {
  /* acquire: pairs with the kernel's release store of the flag */
  return __atomic_load_n((const int32_t *)p, __ATOMIC_ACQUIRE) != 0;
}

/* Waits until task `i`, already submitted, has started on a core (its
 * flags include SS_STARTED). In checking mode no block runs while the
 * orchestrator polls, so it waits for the task to finish instead (which
 * runs it). PTO_OK, or the run fails naming what never came. */
static inline int ss_wait_started(pto_orch *o, ss_scene *sc, int i) {
  if (ss_checking(sc)) return pto_orch_wait_task(o, sc->task[i].id, -1);
  if (pto_wait(NULL, ss_started, &sc->global[SS_G_STARTED], pto_deadline_ms(5000))) return PTO_OK;
  return pto_orch_fatal(o, "%s: tasks 0..%d submitted, none started within 5 s", sc->name, i);
}

/* In checking mode: says, on the report's line of its own, which of the
 * scene's assertions (about the scheduler's timing) the run left out. */
static inline void ss_note_unchecked(pto_scene_report *rep, const char *what) {
  snprintf(rep->unchecked, sizeof rep->unchecked,
           "checking mode runs blocks one at a time, so the scheduler's timing is not asserted: "
           "%s",
           what);
}

/* Orchestration that submits every task in order. */
static inline void ss_orch_all(pto_orch *o, void *arg) {
  ss_scene *sc = arg;
  for (int i = 0; i < sc->ntasks; i++)
    if (ss_submit_task(o, sc, i, NULL, 0)) return;
}

/* One run: reset the buffers, run `fn`, check that every task's cores ran
 * exactly once. Returns the run's status; rep->verified says the rest. */
static inline int ss_round(ss_scene *sc, const pto_scene_opts *opts, pto_orch_fn fn,
                           pto_scene_report *rep) {
  for (int i = 0; i < sc->ntasks; i++)
    ss_task_reset(&sc->task[i]);
  memset(sc->global, 0, sizeof sc->global);
  pto_scene_opts one = *opts;
  one.rounds = 1;
  int rc = scene_run_rounds(sc->chip, &one, fn, sc, rep);
  if (rc) return rc;
  rep->verified = true;
  for (int i = 0; i < sc->ntasks && rep->verified; i++)
    rep->verified = ss_check_marks(rep, sc->name, &sc->task[i], i);
  return 0;
}

static inline int ss_rounds(const pto_scene_opts *opts) {
  return opts->rounds > 0 ? opts->rounds : 1;
}

static inline int ss_count_sync(const ss_scene *sc) {
  int n = 0;
  for (int i = 0; i < sc->ntasks; i++)
    n += sc->task[i].sync;
  return n;
}

/* Appends the gang-start figures of the run(s) to the message. */
static inline void ss_message(pto_scene_report *rep, const ss_scene *sc, const char *what) {
  const pto_run_stats *s = &rep->stats;
  snprintf(rep->message, sizeof rep->message,
           "%s on %d clusters, %d schedulers: every cohort resident at once, every core of every "
           "block ran once; %llu sync_start tasks: %llu fast path, %llu drains (%llu attempts, "
           "at most %llu per drain)",
           what, sc->cfg->clusters, sc->cfg->schedulers, (unsigned long long)s->sync_tasks,
           (unsigned long long)s->sync_fast_launches, (unsigned long long)s->drains,
           (unsigned long long)s->drain_attempts, (unsigned long long)s->drain_max_attempts);
}

/* The common ending of a scene's run function; frees the (heap) scene. */
static inline int ss_finish(ss_scene *sc, pto_scene_report *rep, int rc) {
  if (rc) cs_run_failed(rep, rc, sc->name);
  ss_scene_close(sc);
  free(sc);
  return rc;
}

#endif
