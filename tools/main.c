/* main.c — the `pto` command line: run scenes and examples, summarise traces. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chip/config_mode.h"
#include "cli_args.h"
#include "cmd_trace.h"
#include "common/options.h"
#include "common/rec_file.h"
#include "scene.h"

static void exit_status(FILE *f) {
  fputs("Exit status: 0 done (a run matched its reference); 1 a run failed or differed, a trace\n"
        "failed its check, or writing failed; 2 a bad command line or PTO_* environment value.\n",
        f);
}

static void usage(FILE *f) {
  fputs("usage: pto [-h|--help] [-V|--version] COMMAND [ARGS]\n"
        "  pto run --list                 list scenes and examples\n"
        "  pto run NAME [--clusters N] [--schedulers N] [--rounds N] [--trace FILE.json]\n"
        "               [--fault-inject] [--seed N] [--check]\n"
        "               [--schedule-seed N | --fuzz-schedules N] [--record FILE] [--replay FILE]\n"
        "                                 run one, verify it against a sequential reference\n"
        "  pto trace [--check] FILE.json  summarise a trace (utilisation, gaps, critical path)\n"
        "  pto trace --merge OUT.json IN.json...\n"
        "                                 merge the traces of several ranks\n"
        "`pto COMMAND --help` tells more; options take `--opt value` or `--opt=value`.\n"
        "\nEnvironment (defaults of every chip and node; an invalid value is an error):\n",
        f);
  pto_options_print(f);
  fputs("  PTO_CHECK                contracts: checking mode for every chip (docs/contracts.md) "
        "(default off)\n"
        "  PTO_CHECK_SEED           the seed of checking mode's order (default 0: from the "
        "clock)\n"
        "  PTO_RECORD               a file: each chip (or node) run writes its schedule record "
        "there (docs/schedules.md)\n"
        "  PTO_REPLAY               a file: each chip (or node) run makes the scheduling choices "
        "recorded there\n",
        f);
  fputc('\n', f);
  exit_status(f);
}

static void run_usage(FILE *f) {
  int lo[CLI_INT_COUNT], hi[CLI_INT_COUNT];
  for (int i = 0; i < CLI_INT_COUNT; i++)
    cli_int_range((cli_int)i, &lo[i], &hi[i]);
  fprintf(
      f,
      "usage: pto run NAME [OPTIONS]\n"
      "       pto run --list\n"
      "Runs a scene or example (pto run --list names them) and verifies its result against a\n"
      "sequential reference; error scenes verify the error they expect.\n"
      "  --clusters N       clusters of the chip, %d..%d (default: the scene's)\n"
      "  --schedulers N     scheduler threads, %d..min(clusters, %d) (default: the scene's;\n"
      "                     a number the scene's chip cannot have is an error, not clamped)\n"
      "  --rounds N         run N times on one chip, %d..%d (default 1)\n"
      "  --seed N           seed of the inputs and of fault injection, %d..%d (default 1;\n"
      "                     only for scenes with random inputs or --fault-inject)\n"
      "  --trace FILE.json  write a Chrome/Perfetto trace of the run\n"
      "  --fault-inject     multi-chip scenes: late and reordered remote stores\n"
      "  --check            checking mode (PTO_CHECK=contracts, docs/contracts.md): blocks run\n"
      "                     one at a time in a random order the graph allows, each checked\n"
      "                     against its task's declared arguments (PTO_CHECK_SEED: the order);\n"
      "                     multi-chip: remote stores held to the declared window views\n"
      "  -h, --help         this text\n"
      "Controlled schedules (one chip; docs/schedules.md): blocks run one at a time, in an\n"
      "order that is chosen, not raced for.\n"
      "  --schedule-seed N  every scheduling choice drawn from seed N, %d..%d (PCT)\n"
      "  --fuzz-schedules N run with seeds 1..N (%d..%d), report the failing ones\n"
      "  --record FILE      write the run's choices to FILE (with --fuzz-schedules: the\n"
      "                     first failing seed's)\n"
      "  --replay FILE      make the choices FILE recorded; a departure is PTO_EREPLAY\n",
      lo[CLI_INT_CLUSTERS], hi[CLI_INT_CLUSTERS], lo[CLI_INT_SCHEDULERS], hi[CLI_INT_SCHEDULERS],
      lo[CLI_INT_ROUNDS], hi[CLI_INT_ROUNDS], lo[CLI_INT_SEED], hi[CLI_INT_SEED],
      lo[CLI_INT_SCHEDULE_SEED], hi[CLI_INT_SCHEDULE_SEED], lo[CLI_INT_FUZZ_SCHEDULES],
      hi[CLI_INT_FUZZ_SCHEDULES]);
  exit_status(f);
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
  if (s->pull_holds)
    printf("  pull holds %llu (an idle core waited before it looked for short blocks)\n",
           (unsigned long long)s->pull_holds);
  if (s->steals)
    printf("  steals %llu (an idle core ran a block pending on a busy one)\n",
           (unsigned long long)s->steals);
  if (s->handoffs)
    printf("  hand-offs %llu (a core ran a block its last one made ready, without the queue)\n",
           (unsigned long long)s->handoffs);
  if (s->head_yields)
    printf("  head yields %llu (a core left the queue's short blocks to another taking them)\n",
           (unsigned long long)s->head_yields);
}

/* Multi-chip scenes: per chip, what its node tasks did (the chip figures
 * of a node run are the chips', not the orchestrating process's). */
static void print_node_stats(const pto_node_stats *s) {
  printf("  node: %d chips  node tasks %llu (host %llu)  last round %.1f us\n", s->nchips,
         (unsigned long long)s->node_tasks, (unsigned long long)s->host_tasks, s->run_us);
  for (int c = 0; c < s->nchips && c < PTO_NODE_MAX_CHIPS; c++) {
    const pto_node_chip_stats *k = &s->chip[c];
    printf("  chip %d: node tasks %llu  tasks %llu  blocks %llu  Host %.1f us  Device %.1f us\n", c,
           (unsigned long long)k->node_tasks, (unsigned long long)k->tasks,
           (unsigned long long)k->blocks, k->host_us, k->device_us);
  }
}

/* Options the scene would ignore are refused (exit 2), naming why. */
static int check_scene_options(const cli_args *a, const pto_scene *sc) {
  const bool multi = sc->flags & PTO_SCENE_MULTI_CHIP;
  if (a->fault_inject && !multi) {
    fprintf(stderr,
            "pto run: --fault-inject: %s runs one chip, there are no remote stores to delay\n",
            sc->name);
    return CLI_EXIT_USAGE;
  }
  if (a->seed_set && !(sc->flags & PTO_SCENE_RANDOM) && !(multi && a->fault_inject)) {
    fprintf(stderr, "pto run: --seed: %s has no random inputs%s, nothing to seed\n", sc->name,
            multi ? " (and --fault-inject is off)" : "");
    return CLI_EXIT_USAGE;
  }
  return 0;
}

/* The files the run writes (--trace, --record) are opened before it, and
 * the one it replays (--replay) is read, so that a path that cannot be
 * written or read is reported at once, naming the option, not after the
 * run (or by the chip, naming neither). A file that was not there is
 * removed again: the run writes it. */
static int check_write_path(const char *opt, const char *path) {
  struct stat st;
  const bool existed = stat(path, &st) == 0;
  FILE *f = fopen(path, "a");
  if (!f) {
    fprintf(stderr, "pto run: --%s %s: cannot write it: %s\n", opt, path, strerror(errno));
    return CLI_EXIT_FAILED;
  }
  fclose(f);
  if (!existed) remove(path);
  return 0;
}

static int check_read_path(const char *opt, const char *path) {
  struct stat st;
  FILE *f = NULL;
  const char *why = NULL;
  if (stat(path, &st) != 0)
    why = strerror(errno);
  else if (S_ISDIR(st.st_mode))
    why = strerror(EISDIR);
  else if (!S_ISREG(st.st_mode))
    why = "not a regular file";
  else if (!(f = fopen(path, "r")))
    why = strerror(errno);
  if (f) fclose(f);
  if (!why) return 0;
  fprintf(stderr, "pto run: --%s %s: cannot read it: %s\n", opt, path, why);
  return CLI_EXIT_FAILED;
}

/* Whether a scene's run did what it should (what cmd_run reports as exit 0). */
static bool scene_passed(const pto_scene_report *rep) {
  if (rep->status && rep->status != rep->expected_status) return false;
  return rep->verified;
}

static void scene_run(const pto_scene *sc, const pto_scene_opts *o, pto_scene_report *rep) {
  memset(rep, 0, sizeof *rep);
  rep->err.task_id = PTO_TASK_NONE;
  rep->err.core_id = -1;
  sc->run(o, rep);
}

/* The controlled-schedule options reach the scene's chips through the
 * environment their pto_chip_config_init reads (PTO_SCHEDULE_SEED,
 * PTO_RECORD, PTO_REPLAY); under mpirun rank 0 sends them to the other
 * ranks with the node's config. */
static int schedule_env(const cli_args *a, const pto_scene *sc) {
  if (!a->schedule_seed && !a->fuzz_schedules && !a->record && !a->replay) return 0;
  char v[32];
  snprintf(v, sizeof v, "%d", a->schedule_seed);
  if ((a->schedule_seed && setenv("PTO_SCHEDULE_SEED", v, 1)) ||
      (a->record && setenv("PTO_RECORD", a->record, 1)) ||
      (a->replay && setenv("PTO_REPLAY", a->replay, 1))) {
    fprintf(stderr, "pto run: setenv: %s\n", strerror(errno));
    return CLI_EXIT_FAILED;
  }
  return 0;
}

/* The run mode every chip of the scene will have, from the options
 * (--check, and schedule_env's variables) and the environment together,
 * checked before anything runs: one that no chip accepts is a usage
 * error, not runs that each fail (--fuzz-schedules listed every seed as
 * failing) or a setting silently ignored. */
static int check_run_mode(const cli_args *a) {
  pto_chip_config probe;
  pto_chip_config_init(&probe);
  if (a->fuzz_schedules) probe.schedule_seed = 1; /* as each of its runs has one */
  const char *why = chip_config_mode_problem(&probe);
  if (!why) return 0;
  char opts[96] = "";
  const struct {
    bool given;
    const char *name;
  } o[] = {{a->run_check, "--check"},
           {a->schedule_seed, "--schedule-seed"},
           {a->fuzz_schedules, "--fuzz-schedules"},
           {a->record, "--record"},
           {a->replay, "--replay"}};
  for (size_t i = 0, len = 0; i < sizeof o / sizeof o[0] && len < sizeof opts; i++)
    if (o[i].given)
      len += (size_t)snprintf(opts + len, sizeof opts - len, "%s%s", len ? ", " : "", o[i].name);
  fprintf(stderr, "pto run: %s with the environment: %s\n", opts, why);
  return CLI_EXIT_USAGE;
}

/* A node's record is PATH and its chip tasks' PATH.t<k>.c<c> and
 * PATH.t<k>.c<c>.land (docs/schedules.md), named by PATH's "T k s slots"
 * lines (slots below its "chips N" are chips): calls fn on each file of
 * the record at path, with what follows path in its name ("" for path). */
typedef void (*record_file_fn)(const char *file, const char *suffix, void *arg);
static void record_files(const char *path, record_file_fn fn, void *arg) {
  FILE *f = fopen(path, "r");
  char line[512];
  int nchips = 0;
  bool node = f && fgets(line, sizeof line, f) && strncmp(line, "pto-node-schedule ", 18) == 0;
  char(*suffix)[48] = NULL;
  size_t n = 0, cap = 0;
  while (node && fgets(line, sizeof line, f)) {
    long long k;
    int used;
    if (sscanf(line, "chips %d", &nchips) == 1) continue;
    if (sscanf(line, "T %lld %*d%n", &k, &used) != 1) continue;
    for (char *p = line + used, *e; *p == ' '; p = e) {
      long c = strtol(p, &e, 10);
      if (e == p) break;
      if (c < 0 || c >= nchips) continue; /* a host worker: no files */
      for (int land = 0; land < 2; land++) {
        if (n == cap) {
          cap = cap ? 2 * cap : 16;
          char(*more)[48] = realloc(suffix, cap * sizeof *suffix);
          if (!more) break;
          suffix = more;
        }
        if (n < cap)
          snprintf(suffix[n++], sizeof *suffix, ".t%lld.c%ld%s", k, c, land ? ".land" : "");
      }
    }
  }
  if (f) fclose(f);
  fn(path, "", arg);
  for (size_t i = 0; i < n; i++) {
    char file[8192];
    snprintf(file, sizeof file, "%s%s", path, suffix[i]);
    fn(file, suffix[i], arg);
  }
  free(suffix);
}

static void add_size(const char *file, const char *suffix, void *arg) {
  (void)suffix;
  struct stat st;
  if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) *(long long *)arg += (long long)st.st_size;
}

/* The record's size per task: a node's counts its chip tasks and node
 * tasks (every one a line or more of it). Nothing when no record was
 * written there (a directory: the run's error names it). */
static void print_record_size(const char *path, const pto_scene_report *rep) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
  long long bytes = 0;
  record_files(path, add_size, &bytes);
  uint64_t tasks = rep->stats.tasks;
  if (rep->node.nchips > 0) {
    tasks = rep->node.node_tasks;
    for (int c = 0; c < rep->node.nchips; c++)
      tasks += rep->node.chip[c].tasks;
  }
  printf("  schedule record %s: %lld bytes, %.1f bytes per task\n", path, bytes,
         tasks ? (double)bytes / (double)tasks : 0.0);
}

/* The first rename that failed: its files and its own errno (a later
 * rename of the node's other files may fail too, with another). */
typedef struct rename_ctx {
  const char *to;
  int err; /* 0: none failed */
  char from_file[8192], to_file[8192];
} rename_ctx;

static void rename_one(const char *file, const char *suffix, void *arg) {
  rename_ctx *r = arg;
  char to[8192];
  snprintf(to, sizeof to, "%s%s", r->to, suffix);
  if (rename(file, to) == 0 || r->err) return;
  r->err = errno;
  snprintf(r->from_file, sizeof r->from_file, "%s", file);
  snprintf(r->to_file, sizeof r->to_file, "%s", to);
}

static void remove_one(const char *file, const char *suffix, void *arg) {
  (void)suffix;
  (void)arg;
  remove(file);
}

/* --fuzz-schedules N: the scene under seeds 1..N; the failing ones are
 * listed, and with --record the first failing seed's record is kept. */
static int cmd_fuzz(const cli_args *a, const pto_scene *sc, const pto_scene_opts *o) {
  char part[4096] = "";
  if (a->record) {
    snprintf(part, sizeof part, "%s.part", a->record);
    if (setenv("PTO_RECORD", part, 1)) return CLI_EXIT_FAILED;
  }
  int failed = 0, first = 0;
  bool kept = false; /* the first failing seed's record is whole at a->record */
  for (int seed = 1; seed <= a->fuzz_schedules; seed++) {
    char v[32];
    snprintf(v, sizeof v, "%d", seed);
    if (setenv("PTO_SCHEDULE_SEED", v, 1)) return CLI_EXIT_FAILED;
    pto_scene_report rep;
    scene_run(sc, o, &rep);
    if (scene_passed(&rep)) continue;
    failed++;
    fprintf(stderr, "schedule seed %d: FAILED: %s%s%s\n", seed,
            rep.status && rep.status != rep.expected_status ? pto_status_name(rep.status) : "",
            rep.status && rep.status != rep.expected_status ? ": " : "",
            rep.status && rep.status != rep.expected_status ? rep.err.details : rep.message);
    if (!first) {
      first = seed;
      rename_ctx rn = {.to = a->record};
      if (a->record) record_files(part, rename_one, &rn);
      if (rn.err)
        fprintf(stderr, "pto run: --record %s: cannot rename %s to %s: %s\n", a->record,
                rn.from_file, rn.to_file, strerror(rn.err));
      kept = a->record && !rn.err;
    }
  }
  if (a->record) record_files(part, remove_one, NULL);
  /* after the runs, as cmd_run: under mpirun only rank 0 gets here */
  printf("%s: %s\n", sc->name, sc->summary);
  printf("fuzz-schedules: %d seeds, %d failed", a->fuzz_schedules, failed);
  if (!failed) {
    printf("\n");
    return CLI_EXIT_OK;
  }
  printf(" (the first: seed %d; pto run %s --schedule-seed %d reproduces it)\n", first, sc->name,
         first);
  if (kept)
    printf("  the record of seed %d is %s: pto run %s --replay %s\n", first, a->record, sc->name,
           a->record);
  else if (a->record)
    printf("  the record of seed %d could not be kept at %s (the error above): rerun with "
           "--schedule-seed %d --record PATH\n",
           first, a->record, first);
  return CLI_EXIT_FAILED;
}

static int cmd_run(const cli_args *a) {
  if (a->cmd == CLI_RUN_LIST) {
    for (int k = 0; pto_scenes[k]; k++)
      printf("%-28s %s\n", pto_scenes[k]->name, pto_scenes[k]->summary);
    return 0;
  }
  pto_scene_opts o = {.clusters = a->clusters,
                      .schedulers = a->schedulers,
                      .rounds = a->rounds,
                      .trace = a->trace,
                      .fault_inject = a->fault_inject,
                      .seed = a->seed};
  const char *name = a->name;
  const pto_scene *sc = pto_scene_find(name);
  if (!sc) {
    fprintf(stderr, "pto run: no scene or example named '%s' (see pto run --list)\n", name);
    return CLI_EXIT_USAGE;
  }
  /* checking mode for every chip the scene makes, as the variable would
   * (a node's chip processes inherit it) */
  if (a->run_check) setenv("PTO_CHECK", "contracts", 1);
  int rc = check_scene_options(a, sc);
  if (!rc && a->trace) rc = check_write_path("trace", a->trace);
  if (!rc && a->replay) rc = check_read_path("replay", a->replay);
  if (!rc && a->record && a->replay && rec_file_same(a->record, a->replay)) {
    fprintf(stderr,
            "pto run: --record %s and --replay %s are the same file: the record would overwrite "
            "the one being replayed; record to another file\n",
            a->record, a->replay);
    rc = CLI_EXIT_USAGE;
  }
  if (!rc && a->record) rc = check_write_path("record", a->record);
  if (!rc) rc = schedule_env(a, sc);
  if (!rc) rc = check_run_mode(a);
  if (rc) return rc;
  if (a->fuzz_schedules) return cmd_fuzz(a, sc, &o);
  pto_scene_report rep;
  scene_run(sc, &o, &rep);
  /* The title comes after the run: under mpirun the ranks > 0 of a
   * multi-chip scene never return from pto_node_create (they serve rank 0
   * and exit), so only rank 0 prints. */
  const bool failed = rep.status && rep.status != rep.expected_status;
  if (failed && rep.config_refused && (a->clusters || a->schedulers)) {
    /* the shape the command line asked for: a usage error */
    fprintf(stderr, "pto run: %s cannot run with", sc->name);
    if (a->clusters) fprintf(stderr, " --clusters %d", a->clusters);
    if (a->schedulers) fprintf(stderr, " --schedulers %d", a->schedulers);
    fprintf(stderr, ": %s\n", rep.err.details);
    return CLI_EXIT_USAGE;
  }
  printf("%s: %s\n", sc->name, sc->summary);
  /* Failures go to stderr, the report of a run that did what it should
   * (statistics included) to stdout. */
  if (a->schedule_seed && !scene_passed(&rep))
    fprintf(stderr, "%s: the run's schedule seed was %d\n", sc->name, a->schedule_seed);
  if (a->record) print_record_size(a->record, &rep);
  if (failed) {
    fprintf(stderr, "%s: FAILED with %s\n", sc->name, pto_status_name(rep.status));
    pto_error_print(&rep.err, stderr);
    return CLI_EXIT_FAILED;
  }
  if (rep.node.nchips > 0)
    print_node_stats(&rep.node);
  else
    print_stats(&rep.stats, o.rounds);
  if (rep.expected_status) {
    if (!rep.verified) {
      fprintf(stderr, "%s: FAILED: %s\n", sc->name, rep.message);
      return CLI_EXIT_FAILED;
    }
    printf("verified: the run failed as expected with %s\n", pto_status_name(rep.status));
    pto_error_print(&rep.err, stdout);
    return 0;
  }
  if (!rep.verified) {
    fprintf(stderr, "%s: FAILED: result differs from the sequential reference: %s\n", sc->name,
            rep.message[0] ? rep.message : "(no detail)");
    return CLI_EXIT_FAILED;
  }
  printf("verified: %s\n", rep.message[0] ? rep.message : "matches the sequential reference");
  if (rep.unchecked[0]) printf("  %s\n", rep.unchecked);
  if (o.trace) printf("  trace written to %s\n", o.trace);
  return 0;
}

int main(int argc, char **argv) {
  cli_args a;
  cli_usage which;
  char err[512];
  if (cli_parse(argc, argv, &a, &which, err, sizeof err)) {
    /* the error and where the usage is: the whole usage would scroll the
     * error away */
    fprintf(stderr, "%s\n%s\n", err,
            which == CLI_USAGE_TRACE ? "(pto trace --help for usage)"
            : which == CLI_USAGE_RUN ? "(pto run --help for usage)"
                                     : "(pto --help lists the commands)");
    return CLI_EXIT_USAGE;
  }
  switch (a.cmd) {
  case CLI_HELP: usage(stdout); return CLI_EXIT_OK;
  case CLI_VERSION: printf("pto %s\n", pto_version()); return CLI_EXIT_OK;
  case CLI_RUN_HELP: run_usage(stdout); return CLI_EXIT_OK;
  default: break;
  }
  /* A bad PTO_* variable would fail every chip: say so once, up front. */
  if (pto_options_check(err, sizeof err)) {
    fprintf(stderr, "pto: %s\n", err);
    return CLI_EXIT_USAGE;
  }
  /* PTO_CHECK, PTO_CHECK_SEED (outside the options table) and the
   * controlled schedule's variables, alone and together */
  pto_chip_config probe;
  pto_chip_config_init(&probe);
  const char *mode_problem = chip_config_mode_problem(&probe);
  if (mode_problem) {
    fprintf(stderr, "pto: %s\n", mode_problem);
    return CLI_EXIT_USAGE;
  }
  switch (a.cmd) {
  case CLI_RUN_LIST:
  case CLI_RUN: return cmd_run(&a);
  case CLI_TRACE_HELP:
  case CLI_TRACE:
  case CLI_TRACE_MERGE: return pto_cmd_trace(&a);
  default: return CLI_EXIT_USAGE;
  }
}
