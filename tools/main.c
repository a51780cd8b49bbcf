/* main.c — the `pto` command line: run scenes and examples, summarise traces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_trace.h"
#include "scene.h"

static void usage(FILE *f) {
  fprintf(
      f, "usage:\n"
         "  pto run --list                 list scenes and examples\n"
         "  pto run NAME [--clusters N] [--schedulers N] [--rounds N] [--trace FILE.json]\n"
         "               [--fault-inject] [--seed N]\n"
         "                                 run one, verify it against a sequential reference\n"
         "  pto trace FILE.json            summarise a trace (utilisation, gaps, critical path)\n");
}

static int int_arg(const char *opt, const char *v) {
  char *end;
  long n = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || n < 1 || n > 1 << 20) {
    fprintf(stderr, "pto: %s needs a positive integer, got '%s'\n", opt, v ? v : "");
    exit(2);
  }
  return (int)n;
}

static void print_stats(const pto_run_stats *s, int rounds) {
  printf("  tasks %llu  blocks %llu  (over %d round%s)\n", (unsigned long long)s->tasks,
         (unsigned long long)s->blocks, rounds, rounds == 1 ? "" : "s");
  printf("  last round: Host %.1f us  Device %.1f us  Orch %.1f us  Sched %.1f us  Effective %.1f "
         "us\n",
         s->host_us, s->device_us, s->orch_us, s->sched_us, s->effective_us);
  if (s->sync_tasks)
    printf("  sync_start: tasks %llu  fast-path %llu  drains %llu  attempts %llu (max %llu per "
           "drain)  cohort start spread max %.1f us, mean %.1f us\n",
           (unsigned long long)s->sync_tasks, (unsigned long long)s->sync_fast_launches,
           (unsigned long long)s->drains, (unsigned long long)s->drain_attempts,
           (unsigned long long)s->drain_max_attempts, s->cohort_spread_max_us,
           s->sync_tasks ? s->cohort_spread_sum_us / (double)s->sync_tasks : 0.0);
  if (s->drains)
    printf("  drain latency (entry to cohort start): mean %.1f us, max %.1f us\n",
           s->drain_latency_sum_us / (double)s->drains, s->drain_latency_max_us);
}

static int cmd_run(int argc, char **argv) {
  pto_scene_opts o = {.rounds = 1, .seed = 1};
  const char *name = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--list")) {
      for (int k = 0; pto_scenes[k]; k++)
        printf("%-28s %s\n", pto_scenes[k]->name, pto_scenes[k]->summary);
      return 0;
    } else if (!strcmp(a, "--clusters")) {
      o.clusters = int_arg(a, i + 1 < argc ? argv[++i] : NULL);
    } else if (!strcmp(a, "--schedulers")) {
      o.schedulers = int_arg(a, i + 1 < argc ? argv[++i] : NULL);
    } else if (!strcmp(a, "--rounds")) {
      o.rounds = int_arg(a, i + 1 < argc ? argv[++i] : NULL);
    } else if (!strcmp(a, "--seed")) {
      o.seed = (unsigned)int_arg(a, i + 1 < argc ? argv[++i] : NULL);
    } else if (!strcmp(a, "--trace")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "pto: --trace needs a file name\n");
        return 2;
      }
      o.trace = argv[++i];
    } else if (!strcmp(a, "--fault-inject")) {
      o.fault_inject = true;
    } else if (a[0] == '-' || name) {
      fprintf(stderr, "pto run: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    } else {
      name = a;
    }
  }
  if (!name) {
    usage(stderr);
    return 2;
  }
  const pto_scene *sc = pto_scene_find(name);
  if (!sc) {
    fprintf(stderr, "pto run: no scene or example named '%s' (see pto run --list)\n", name);
    return 2;
  }
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  rep.err.task_id = PTO_TASK_NONE;
  rep.err.core_id = -1;
  printf("%s: %s\n", sc->name, sc->summary);
  sc->run(&o, &rep);
  print_stats(&rep.stats, o.rounds);
  if (rep.status && rep.status != rep.expected_status) {
    printf("FAILED with %s\n", pto_status_name(rep.status));
    pto_error_print(&rep.err, stdout);
    return 1;
  }
  if (rep.expected_status) {
    if (!rep.verified) {
      printf("FAILED: %s\n", rep.message);
      return 1;
    }
    printf("verified: the run failed as expected with %s\n", pto_status_name(rep.status));
    pto_error_print(&rep.err, stdout);
    return 0;
  }
  if (!rep.verified) {
    printf("FAILED: result differs from the sequential reference: %s\n",
           rep.message[0] ? rep.message : "(no detail)");
    return 1;
  }
  printf("verified: %s\n", rep.message[0] ? rep.message : "matches the sequential reference");
  if (o.trace) printf("  trace written to %s\n", o.trace);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (argc >= 2 && !strcmp(argv[1], "trace")) return pto_cmd_trace(argc - 1, argv + 1);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
