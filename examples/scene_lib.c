/* scene_lib.c — the scene harness: chip setup from options, rounds,
 * expected-error runs, and full-data mismatch printing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"

const pto_scene *pto_scene_find(const char *name) {
  for (int i = 0; name && pto_scenes[i]; i++)
    if (strcmp(pto_scenes[i]->name, name) == 0) return pto_scenes[i];
  return NULL;
}

void scene_chip_config(const pto_scene_opts *o, int clusters, int schedulers,
                       pto_chip_config *cfg) {
  pto_chip_config_init(cfg);
  if (clusters > 0) cfg->clusters = clusters;
  if (schedulers > 0) cfg->schedulers = schedulers;
  if (o && o->clusters > 0) cfg->clusters = o->clusters;
  /* A shape the command line asks for is not clamped: one the chip cannot
   * honour is refused by pto_chip_create, and pto run says why. */
  if (o && o->schedulers > 0)
    cfg->schedulers = o->schedulers;
  else if (cfg->schedulers > cfg->clusters)
    cfg->schedulers = cfg->clusters; /* the scene's or the environment's default */
}

int scene_chip_create(const pto_chip_config *cfg, pto_chip **chip, pto_scene_report *rep) {
  int rc = pto_chip_create_ex(cfg, chip, &rep->err);
  rep->config_refused = rc == PTO_EINVAL;
  return rc;
}

int scene_node_create(const pto_node_config *cfg, pto_node **node, pto_scene_report *rep) {
  int rc = pto_node_create(cfg, node, &rep->err);
  rep->config_refused = rc == PTO_EINVAL;
  return rc;
}

static void add_stats(pto_run_stats *sum, const pto_run_stats *s) {
  sum->tasks += s->tasks;
  sum->blocks += s->blocks;
  sum->host_us = s->host_us;
  sum->device_us = s->device_us;
  sum->orch_us = s->orch_us;
  sum->sched_us = s->sched_us;
  sum->effective_us = s->effective_us;
  sum->sync_tasks += s->sync_tasks;
  sum->sync_fast_launches += s->sync_fast_launches;
  sum->drains += s->drains;
  sum->drain_attempts += s->drain_attempts;
  if (s->drain_max_attempts > sum->drain_max_attempts)
    sum->drain_max_attempts = s->drain_max_attempts;
  if (s->cohort_spread_max_us > sum->cohort_spread_max_us)
    sum->cohort_spread_max_us = s->cohort_spread_max_us;
  sum->cohort_spread_sum_us += s->cohort_spread_sum_us;
  if (s->drain_latency_max_us > sum->drain_latency_max_us)
    sum->drain_latency_max_us = s->drain_latency_max_us;
  sum->drain_latency_sum_us += s->drain_latency_sum_us;
  sum->pull_holds += s->pull_holds;
}

int scene_run_rounds(pto_chip *chip, const pto_scene_opts *o, pto_orch_fn fn, void *arg,
                     pto_scene_report *rep) {
  int rounds = o && o->rounds > 0 ? o->rounds : 1;
  if (o && o->trace) pto_chip_set_trace(chip, o->trace);
  for (int i = 0; i < rounds; i++) {
    pto_run_stats st;
    rep->status = pto_chip_run(chip, fn, arg, &st, &rep->err);
    add_stats(&rep->stats, &st);
    if (rep->status) return rep->status;
  }
  return 0;
}

int scene_expect_error(pto_chip *chip, pto_orch_fn fn, void *arg, int expected,
                       pto_scene_report *rep) {
  rep->expected_status = expected;
  pto_run_stats st;
  rep->status = pto_chip_run(chip, fn, arg, &st, &rep->err);
  add_stats(&rep->stats, &st);
  rep->verified = rep->status == expected;
  snprintf(rep->message, sizeof rep->message, "expected %s, got %s", pto_status_name(expected),
           rep->status ? pto_status_name(rep->status) : "success");
  return rep->status;
}

void scene_print_f32(FILE *f, const char *label, const float *v, size_t n) {
  fprintf(f, "%s [%zu]:", label, n);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%g", i % 16 ? " " : "\n  ", (double)v[i]);
  fprintf(f, "\n");
}

void scene_print_i32(FILE *f, const char *label, const int32_t *v, size_t n) {
  fprintf(f, "%s [%zu]:", label, n);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%d", i % 16 ? " " : "\n  ", v[i]);
  fprintf(f, "\n");
}

bool scene_check_f32(pto_scene_report *rep, const char *label, const float *a, const float *e,
                     size_t n, float tol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    float d = fabsf(a[i] - e[i]), lim = tol * (1.0f + fabsf(e[i]));
    if (!(d <= lim)) {
      if (!bad) first = i;
      bad++;
    }
  }
  if (!bad) return true;
  snprintf(rep->message, sizeof rep->message,
           "%s: %zu of %zu elements differ; first at %zu: actual %g expected %g", label, bad, n,
           first, (double)a[first], (double)e[first]);
  fprintf(stderr, "MISMATCH %s\n", rep->message);
  char l[128];
  snprintf(l, sizeof l, "%s actual", label);
  scene_print_f32(stderr, l, a, n);
  snprintf(l, sizeof l, "%s expected", label);
  scene_print_f32(stderr, l, e, n);
  rep->verified = false;
  return false;
}

bool scene_check_i32(pto_scene_report *rep, const char *label, const int32_t *a, const int32_t *e,
                     size_t n) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (a[i] != e[i]) {
      if (!bad) first = i;
      bad++;
    }
  if (!bad) return true;
  snprintf(rep->message, sizeof rep->message,
           "%s: %zu of %zu elements differ; first at %zu: actual %d expected %d", label, bad, n,
           first, a[first], e[first]);
  fprintf(stderr, "MISMATCH %s\n", rep->message);
  char l[128];
  snprintf(l, sizeof l, "%s actual", label);
  scene_print_i32(stderr, l, a, n);
  snprintf(l, sizeof l, "%s expected", label);
  scene_print_i32(stderr, l, e, n);
  rep->verified = false;
  return false;
}
