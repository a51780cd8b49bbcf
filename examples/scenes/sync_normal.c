/* sync_normal.c — sync_start (gang start) tasks of every width class the
 * chip allows, derived from its cluster count: MIX (AIC + 2 AIV) cohorts of
 * 1, 2, half, all-but-one and all clusters, and AIC cohorts of half and all
 * clusters, all in flight together. Every core of every block waits in the
 * kernel until its whole cohort has arrived, which only finishes if the
 * cohort is resident at once; every block must run exactly once, and the
 * runtime must account each task as launched once (fast path or drain). */
#include "sync_scenes.h"

static int sync_normal_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_normal");
  int rc = ss_scene_open(sc, "sync_normal", opts, 0, 0, rep);
  const int c = rc ? 0 : sc->cfg->clusters;
  const int mix[] = {1, 2, c / 2, c - 1, c};
  for (size_t i = 0; i < sizeof mix / sizeof mix[0] && !rc; i++)
    rc = ss_add(sc, SS_MIX, mix[i], SS_WAIT_ALL, 0, true);
  if (!rc) rc = ss_add(sc, SS_AIC, c / 2, SS_WAIT_ALL, 0, true);
  if (!rc) rc = ss_add(sc, SS_AIC, c, SS_WAIT_ALL, 0, true);
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++)
    rc = ss_round(sc, opts, ss_orch_all, rep);
  if (!rc && rep->verified &&
      ss_check_stats(rep, "sync_normal", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts))))
    ss_message(rep, sc, "MIX cohorts of 1, 2, C/2, C-1, C clusters and AIC cohorts of C/2, C");
  return ss_finish(sc, rep, rc);
}

PTO_SCENE(sync_normal, "sync_start MIX and AIC tasks of widths 1..all clusters, all in flight",
          sync_normal_run);
