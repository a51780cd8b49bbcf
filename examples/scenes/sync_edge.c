/* sync_edge.c — edge widths of sync_start tasks. Width 1 and the widest the
 * chip accepts (AIV: every AIV core; AIC and MIX: every cluster) must run,
 * each cohort resident at once. One more block than that can never be
 * co-resident: pto_submit() must reject it with PTO_ESYNC_WIDTH and the run
 * must fail with that code, once for each of AIC, AIV and MIX. */
#include "sync_scenes.h"

typedef struct se_reject {
  ss_scene *sc;
  ss_kind kind;
  int width;
  int submit_rc;
} se_reject;

static void se_reject_orch(pto_orch *o, void *arg) {
  se_reject *rj = arg;
  ss_task t;
  rj->submit_rc = ss_task_init(&t, rj->kind, rj->width, 0, 0, true);
  if (!rj->submit_rc) rj->submit_rc = ss_submit(o, &rj->sc->k, &t, &rj->sc->tglobal, NULL, 0);
  ss_task_free(&t);
}

/* One run that submits a too-wide task; true if both the submit and the run
 * report PTO_ESYNC_WIDTH. */
static bool se_expect_reject(ss_scene *sc, ss_kind kind, pto_scene_report *rep) {
  se_reject rj = {sc, kind, ss_max_width(sc->cfg, kind) + 1, 0};
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_chip_run(sc->chip, se_reject_orch, &rj, &st, &err);
  if (rj.submit_rc == PTO_ESYNC_WIDTH && rc == PTO_ESYNC_WIDTH && err.code == PTO_ESYNC_WIDTH)
    return true;
  cs_fail(rep,
          "sync_edge: a %s sync_start task of %d blocks (limit %d): submit returned %s, "
          "the run %s (error info %s)",
          ss_kind_name(kind), rj.width, rj.width - 1, pto_status_name(rj.submit_rc),
          rc ? pto_status_name(rc) : "succeeded", pto_status_name(err.code));
  if (rc) pto_error_print(&err, stderr);
  return false;
}

static int sync_edge_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_edge");
  int rc = ss_scene_open(sc, "sync_edge", opts, 0, 0, rep);
  for (int k = 0; k < SS_KINDS && !rc; k++) {
    rc = ss_add(sc, (ss_kind)k, 1, SS_WAIT_ALL, 0, true);
    if (!rc) rc = ss_add(sc, (ss_kind)k, ss_max_width(sc->cfg, (ss_kind)k), SS_WAIT_ALL, 0, true);
  }
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++)
    rc = ss_round(sc, opts, ss_orch_all, rep);
  if (!rc && rep->verified)
    rep->verified =
        ss_check_stats(rep, "sync_edge", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts)));
  for (int k = 0; k < SS_KINDS && !rc && rep->verified; k++)
    rep->verified = se_expect_reject(sc, (ss_kind)k, rep);
  if (!rc && rep->verified) {
    char what[160];
    snprintf(what, sizeof what,
             "widths 1 and max (AIC %d, AIV %d, MIX %d) ran; max+1 rejected with "
             "PTO_ESYNC_WIDTH for each",
             ss_max_width(sc->cfg, SS_AIC), ss_max_width(sc->cfg, SS_AIV),
             ss_max_width(sc->cfg, SS_MIX));
    ss_message(rep, sc, what);
  }
  return ss_finish(sc, rep, rc);
}

PTO_SCENE(sync_edge, "sync_start widths 1 and max run; max+1 is rejected with PTO_ESYNC_WIDTH",
          sync_edge_run);
