/* sync_stress.c — 54 sync_start tasks over 6 rounds, MIX and AIV mixed.
 * Each round has 5 MIX cohorts (all, half, 1, all-but-one and 2 clusters)
 * and 4 AIV cohorts (all, half, 3 and all-but-one AIV cores); the tasks of
 * a round are in flight together and hold their cores briefly, so cohorts
 * compete for cores, several wait for drains while others take the fast
 * path; every task of round r+1 depends on every task of round r. Every
 * block waits in the kernel for its whole cohort. */
#include "sync_scenes.h"

#define ST_ROUNDS    6
#define ST_PER_ROUND 9

static void sync_stress_orch(pto_orch *o, void *arg) {
  ss_scene *sc = arg;
  pto_task_id prev[ST_PER_ROUND];
  for (int r = 0; r < ST_ROUNDS; r++) {
    pto_task_id cur[ST_PER_ROUND];
    for (int j = 0; j < ST_PER_ROUND; j++) {
      if (ss_submit_task(o, sc, r * ST_PER_ROUND + j, r ? prev : NULL, r ? ST_PER_ROUND : 0))
        return;
      cur[j] = sc->task[r * ST_PER_ROUND + j].id;
    }
    memcpy(prev, cur, sizeof prev);
  }
}

static int sync_stress_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_stress");
  int rc = ss_scene_open(sc, "sync_stress", opts, 0, 0, rep);
  const int c = rc ? 1 : ss_max_width(sc->cfg, SS_MIX), a = rc ? 1 : ss_max_width(sc->cfg, SS_AIV);
  const int mix[] = {c, c / 2, 1, c - 1, 2}, aiv[] = {a, a / 2, 3, a - 1};
  for (int r = 0; r < ST_ROUNDS && !rc; r++) {
    for (int j = 0; j < 5 && !rc; j++)
      rc = ss_add(sc, SS_MIX, mix[j], SS_WAIT_ALL, 100 * (j % 3), true);
    for (int j = 0; j < 4 && !rc; j++)
      rc = ss_add(sc, SS_AIV, aiv[j], SS_WAIT_ALL, 100 * (j % 2), true);
  }
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++)
    rc = ss_round(sc, opts, sync_stress_orch, rep);
  if (!rc && rep->verified &&
      ss_check_stats(rep, "sync_stress", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts))))
    ss_message(rep, sc, "54 MIX and AIV cohorts in 6 dependent rounds of 9");
  return ss_finish(sc, rep, rc);
}

PTO_SCENE(sync_stress, "54 sync_start tasks (MIX + AIV) over 6 rounds competing for cores",
          sync_stress_run);
