/* sync_starvation.c — 18 normal MIX tasks and 2 sync_start MIX tasks as
 * wide as the chip, submitted as N x6, S, N x6, S, N x6, the first gang only
 * once normal work is running. Normal tasks keep the cores busy (half the
 * clusters each, 1 ms per block); sync_start tasks are served first and a
 * drain stops new dispatch, so each gang starts before any normal task
 * submitted after it has finished: the first after at most 6 normal tasks
 * finished, the second after at most 12 (counted in finished cores). */
#include "sync_scenes.h"

#define SV_NORMAL 18
#define SV_EVERY  6

static void sync_starvation_orch(pto_orch *o, void *arg) {
  ss_scene *sc = arg;
  for (int i = 0; i < sc->ntasks; i++) {
    /* the normal task before the gang is running (task 0 is normal) */
    if (sc->task[i].sync && ss_wait_started(o, sc, i - 1)) return;
    if (ss_submit_task(o, sc, i, NULL, 0)) return;
  }
}

static int sync_starvation_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  ss_scene *sc = calloc(1, sizeof *sc);
  if (!sc) return cs_run_failed(rep, PTO_ENOMEM, "sync_starvation");
  int rc = ss_scene_open(sc, "sync_starvation", opts, 0, 0, rep);
  const int c = rc ? 1 : sc->cfg->clusters;
  int gang[2], ng = 0;
  for (int i = 0; i < SV_NORMAL && !rc; i++) {
    rc = ss_add(sc, SS_MIX, c / 2, SS_STARTED | SS_DONE, 1000, false);
    if (!rc && (i + 1) % SV_EVERY == 0 && ng < 2) {
      gang[ng++] = sc->ntasks;
      rc = ss_add(sc, SS_MIX, c, SS_WAIT_ALL | SS_PROBE, 0, true);
    }
  }
  for (int r = 0; r < ss_rounds(opts) && !rc && (r == 0 || rep->verified); r++) {
    rc = ss_round(sc, opts, sync_starvation_orch, rep);
    for (int g = 0; g < ng && !rc && rep->verified; g++) {
      const ss_task *t = &sc->task[gang[g]];
      rep->verified = ss_check_probes_equal(rep, "sync_starvation", t, gang[g]);
      const int per = sc->task[0].width * ss_parts(SS_MIX); /* cores per normal task */
      if (rep->verified && !ss_checking(sc) && t->probe[0] > SV_EVERY * (g + 1) * per) {
        cs_fail(rep,
                "sync_starvation: sync_start task %d started after %d cores of normal "
                "tasks had finished; only the %d normal tasks (%d cores) submitted before "
                "it may finish first",
                gang[g], t->probe[0], SV_EVERY * (g + 1), SV_EVERY * (g + 1) * per);
      }
    }
  }
  if (!rc && rep->verified &&
      ss_check_stats(rep, "sync_starvation", (uint64_t)(ss_count_sync(sc) * ss_rounds(opts)))) {
    char what[160];
    snprintf(what, sizeof what,
             "18 normal + 2 full-width sync_start MIX tasks; the gangs started after %d and %d "
             "of %d normal cores had finished",
             sc->task[gang[0]].probe[0], sc->task[gang[1]].probe[0],
             SV_NORMAL * sc->task[0].width * ss_parts(SS_MIX));
    ss_message(rep, sc, what);
    if (ss_checking(sc))
      ss_note_unchecked(rep, "each gang starting before the normal tasks submitted after it "
                             "finish (blocks run in a random order the graph allows)");
  }
  return ss_finish(sc, rep, rc);
}

PTO_SCENE_WITH(sync_starvation, "18 normal + 2 sync_start MIX tasks: gangs are not starved",
               sync_starvation_run, PTO_SCENE_SCHEDULING);
