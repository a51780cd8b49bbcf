/* sync_spill.c — a gang must not spill onto pending slots. A core holds one
 * running and one pending task; here every cluster has a running MIX task
 * and one more waiting in its pending slot (two waves of one-block tasks,
 * each holding its cores 3 ms and counting itself finished at the end) when
 * a MIX sync_start task as wide as the chip arrives; then the same with AIV
 * tasks and an AIV sync_start task as wide as all AIV cores. A block staged
 * into a pending slot would start only after the task in front of it, later
 * than its cohort: so every core of each cohort records, at its start, how
 * many tasks had finished, and all must have seen the same count (no task
 * can run beside a full-width cohort). */
#include "sync_scenes.h"

#define SP_HOLD_US 3000

static int sync_spill_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_spill");
  int rc = ss_scene_open(sc, "sync_spill", opts, 0, 0, rep);
  int gang[2] = {-1, -1};
  for (int g = 0; g < 2 && !rc; g++) {
    const ss_kind kind = g == 0 ? SS_MIX : SS_AIV;
    const int full = ss_max_width(sc->cfg, kind);
    for (int i = 0; i < 2 * full && !rc; i++) /* running + pending on every core */
      rc = ss_add(sc, kind, 1, SS_DONE, SP_HOLD_US, false);
    gang[g] = sc->ntasks;
    if (!rc) rc = ss_add(sc, kind, full, SS_WAIT_ALL | SS_PROBE, 0, true);
  }
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++) {
    rc = ss_round(sc, opts, ss_orch_all, rep);
    for (int g = 0; g < 2 && !rc && rep->verified; g++)
      rep->verified = ss_check_probes_equal(rep, "sync_spill", &sc->task[gang[g]], gang[g]);
  }
  if (!rc && rep->verified &&
      ss_check_stats(rep, "sync_spill", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts))))
    ss_message(rep, sc,
               "full-width MIX and AIV cohorts behind running and pending tasks started "
               "together");
  return ss_finish(sc, rep, rc);
}

PTO_SCENE(sync_spill, "full-width sync_start cohorts never spill onto busy cores' pending slots",
          sync_spill_run);
