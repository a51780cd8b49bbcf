/* sync_aiv.c — sync_start AIV tasks on the fast path and through a drain.
 * Task 0 (1 block) and task 1 (as many blocks as the smallest scheduler has
 * AIV cores) run on an idle chip one after the other, so whichever
 * scheduler serves them can hold the whole cohort and launches it directly.
 * Task 2 is as wide as all AIV cores of the chip: with more than one
 * scheduler no single one can hold it, so the schedulers drain and stage it
 * together. Every block waits in the kernel for its whole cohort. */
#include "sync_scenes.h"

static void sync_aiv_orch(pto_orch *o, void *arg) {
  ss_scene *sc = arg;
  for (int i = 0; i < sc->ntasks; i++) {
    if (ss_submit_task(o, sc, i, NULL, 0)) return;
    /* the next task finds the chip idle (fast path needs one scheduler's room) */
    if (i + 1 < sc->ntasks && pto_orch_wait_task(o, sc->task[i].id, -1)) return;
  }
}

static int sync_aiv_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_aiv");
  int rc = ss_scene_open(sc, "sync_aiv", opts, 0, 0, rep);
  const int c = rc ? 1 : sc->cfg->clusters, ns = rc ? 1 : sc->cfg->schedulers;
  const int aiv = rc ? 1 : sc->cfg->aiv_per_cluster;
  const int share = c / ns * aiv; /* AIV cores of the smallest scheduler */
  if (!rc) rc = ss_add(sc, SS_AIV, 1, SS_WAIT_ALL, 0, true);
  if (!rc) rc = ss_add(sc, SS_AIV, share, SS_WAIT_ALL, 0, true);
  if (!rc) rc = ss_add(sc, SS_AIV, c * aiv, SS_WAIT_ALL, 0, true);
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++)
    rc = ss_round(sc, opts, sync_aiv_orch, rep);
  const uint64_t nsync = (uint64_t)(ss_count_sync(sc) * ss_rounds(opts));
  if (!rc && rep->verified && ss_check_stats(rep, "sync_aiv", nsync)) {
    const pto_run_stats *s = &rep->stats;
    const bool timed = !ss_checking(sc);
    if (timed && s->sync_fast_launches < (uint64_t)(2 * ss_rounds(opts)))
      cs_fail(rep,
              "sync_aiv: %llu fast-path launches, expected at least %d (tasks 0 and 1 fit "
              "one scheduler of an idle chip)",
              (unsigned long long)s->sync_fast_launches, 2 * ss_rounds(opts));
    else if (timed && ns > 1 && s->drains < (uint64_t)ss_rounds(opts))
      cs_fail(rep,
              "sync_aiv: %llu drains, expected at least %d (task 2 spans all %d AIV cores "
              "of %d schedulers)",
              (unsigned long long)s->drains, ss_rounds(opts), c * aiv, ns);
    else
      ss_message(rep, sc, "AIV cohorts of 1, one scheduler's share and all AIV cores");
    if (!timed) ss_note_unchecked(rep, "tasks 0 and 1 on the fast path, task 2 through a drain");
  }
  return ss_finish(sc, rep, rc);
}

PTO_SCENE_WITH(sync_aiv, "sync_start AIV tasks: fast path on one scheduler, drain across all",
               sync_aiv_run, PTO_SCENE_SCHEDULING);
