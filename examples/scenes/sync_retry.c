/* sync_retry.c — the drain's retry, as the reference reproduced its ABA
 * bug: one long-running MIX task holds one cluster (300 ms) while a MIX
 * sync_start task as wide as all clusters waits. The orchestrator submits
 * the gang only once the long task is running, so the first drain attempt
 * finds one cluster short and must retry; the gang must start after the
 * long task finished, all blocks together, each block once. */
#include "sync_scenes.h"

#define SR_HOLD_US 300000

static void sync_retry_orch(pto_orch *o, void *arg) {
  ss_scene *sc = arg;
  if (ss_submit_task(o, sc, 0, NULL, 0) || ss_wait_started(o, sc, 0)) return;
  ss_submit_task(o, sc, 1, NULL, 0);
}

static int sync_retry_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_retry");
  int rc = ss_scene_open(sc, "sync_retry", opts, 0, 0, rep);
  if (!rc) rc = ss_add(sc, SS_MIX, 1, SS_STARTED | SS_DONE, SR_HOLD_US, false);
  if (!rc) rc = ss_add(sc, SS_MIX, sc->cfg->clusters, SS_WAIT_ALL | SS_PROBE, 0, true);
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++) {
    rc = ss_round(sc, opts, sync_retry_orch, rep);
    if (!rc && rep->verified)
      rep->verified = ss_check_probes_equal(rep, "sync_retry", &sc->task[1], 1);
    /* the long task's 3 cores each count themselves finished (in
     * checking mode the orchestrator waited for it to finish) */
    if (!rc && rep->verified && sc->task[1].probe[0] != ss_parts(SS_MIX))
      cs_fail(rep,
              "sync_retry: the gang started when %d cores of the long task had finished, "
              "not all %d",
              sc->task[1].probe[0], ss_parts(SS_MIX));
  }
  const pto_run_stats *s = &rep->stats;
  if (!rc && rep->verified &&
      ss_check_stats(rep, "sync_retry", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts)))) {
    if (!ss_checking(sc) && (s->drains < (uint64_t)ss_rounds(opts) || s->drain_max_attempts < 2))
      cs_fail(rep,
              "sync_retry: %llu drains with at most %llu attempts; expected a drain per "
              "round whose first attempt is one cluster short",
              (unsigned long long)s->drains, (unsigned long long)s->drain_max_attempts);
    else
      ss_message(rep, sc, "a full-width MIX gang waited for a 300 ms task on one cluster");
    if (ss_checking(sc))
      ss_note_unchecked(rep, "a drain per round whose first attempt is one cluster short");
  }
  return ss_finish(sc, rep, rc);
}

PTO_SCENE_WITH(sync_retry, "full-width sync_start MIX task waits for a long task: drain retries",
               sync_retry_run, PTO_SCENE_SCHEDULING);
