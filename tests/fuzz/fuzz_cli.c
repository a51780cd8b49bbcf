/* fuzz_cli.c — libFuzzer target for the `pto` command line's parser
 * (tools/cli_args.c). The input is split at NUL bytes into argv[1..]
 * (argv[0] is "pto"); cli_parse runs nothing and prints nothing.
 *
 * Oracles: a failure is status 2 with a message naming the problem; a
 * success has every field in range, its strings pointing into argv, integer
 * options equal to the digits given (computed here independently, reading
 * --opt V, --opt=V and abbreviations as getopt_long does); and the
 * parsed command written back as a canonical argv parses to the same
 * command. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "fuzz_cli: check failed at line %d: %s\n", __LINE__, #c);                    \
      __builtin_trap();                                                                            \
    }                                                                                              \
  } while (0)

enum { MAXARGS = 24 };

static bool in_argv(const char *s, int argc, char *const *argv) {
  for (int i = 0; i < argc; i++)
    if (s == argv[i]) return true;
  return false;
}

/* s lies inside one of argv's strings (--trace=FILE: after the '='). */
static bool into_argv(const char *s, int argc, char *const *argv) {
  for (int i = 0; i < argc; i++)
    if (s >= argv[i] && s <= argv[i] + strlen(argv[i])) return true;
  return false;
}

static bool same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_args(const cli_args *a, const cli_args *b) {
  if (a->cmd != b->cmd) return false;
  switch (a->cmd) {
  case CLI_HELP:
  case CLI_VERSION:
  case CLI_RUN_HELP:
  case CLI_RUN_LIST:
  case CLI_TRACE_HELP: return true;
  case CLI_RUN:
    return same_str(a->name, b->name) && a->clusters == b->clusters &&
           a->schedulers == b->schedulers && a->rounds == b->rounds && a->seed == b->seed &&
           a->seed_set == b->seed_set && same_str(a->trace, b->trace) &&
           a->fault_inject == b->fault_inject && a->schedule_seed == b->schedule_seed &&
           a->fuzz_schedules == b->fuzz_schedules && same_str(a->record, b->record) &&
           same_str(a->replay, b->replay);
  case CLI_TRACE: return a->check == b->check && same_str(a->path, b->path);
  case CLI_TRACE_MERGE:
    if (!same_str(a->out, b->out) || a->nin != b->nin) return false;
    for (int i = 0; i < a->nin; i++)
      if (!same_str(a->in[i], b->in[i])) return false;
    return true;
  }
  return false;
}

/* Where the command word is: argv[1], or argv[2] after a leading "--"
 * (top-level options other than "--" end the parse at once). */
static int command_at(int argc, char *const *argv) {
  return argc > 2 && !strcmp(argv[1], "--") ? 2 : 1;
}

/* The long options of `pto run`, and whether each takes a value. */
static const char *const run_long[] = {"clusters",      "schedulers",     "rounds", "seed",
                                       "trace",         "fault-inject",   "list",   "help",
                                       "schedule-seed", "fuzz-schedules", "record", "replay"};
static const bool run_takes[] = {true,  true,  true, true, true, false,
                                 false, false, true, true, true, true};
enum { NRUN = sizeof run_long / sizeof run_long[0] };

/* The option a word "--NAME" or "--NAME=V" names, as getopt_long decides:
 * an exact name, else the one option NAME abbreviates; -1 otherwise. */
static int run_match(const char *word) {
  const char *name = word + 2;
  size_t len = strcspn(name, "=");
  int found = -1, n = 0;
  for (int k = 0; k < NRUN; k++) {
    if (strncmp(run_long[k], name, len)) continue;
    if (strlen(run_long[k]) == len) return k;
    found = k, n++;
  }
  return n == 1 ? found : -1;
}

/* Reference scan of `pto run ...` as getopt_long reads it (written here
 * independently of the parser): the value of the last occurrence of the
 * option `opt`, given as --opt V, --opt=V or an abbreviation of either; an
 * accepted V had digits only, so this is what the parser must have read.
 * -1 when the option is absent. */
static long last_int(const char *opt, int argc, char *const *argv) {
  long v = -1;
  for (int i = command_at(argc, argv) + 1; i < argc; i++) {
    const char *w = argv[i];
    if (!strcmp(w, "--")) break;       /* operands only from here */
    if (strncmp(w, "--", 2)) continue; /* an operand or short options (-h) */
    int k = run_match(w);
    if (k < 0 || !run_takes[k]) continue;
    const char *eq = strchr(w, '=');
    const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!val || strcmp(run_long[k], opt + 2)) continue;
    long x = 0;
    for (const char *p = val; *p && x <= CLI_INT_MAX; p++)
      x = x * 10 + (*p - '0');
    v = x;
  }
  return v;
}

/* The canonical argv of a parsed command. */
static int canonical(const cli_args *a, char **out, char *nums) {
  int n = 0;
  out[n++] = "pto";
  switch (a->cmd) {
  case CLI_HELP: out[n++] = "--help"; break;
  case CLI_VERSION: out[n++] = "--version"; break;
  case CLI_RUN_HELP:
    out[n++] = "run";
    out[n++] = "--help";
    break;
  case CLI_RUN_LIST:
    out[n++] = "run";
    out[n++] = "--list";
    break;
  case CLI_RUN: {
    out[n++] = "run";
    const char *opt[] = {"--clusters", "--schedulers",    "--rounds",
                         "--seed",     "--schedule-seed", "--fuzz-schedules"};
    long val[] = {a->clusters,   a->schedulers,    a->rounds,
                  (long)a->seed, a->schedule_seed, a->fuzz_schedules};
    for (int i = 0; i < 6; i++) {
      if (!val[i] || (i == 3 && !a->seed_set)) continue;
      out[n++] = (char *)opt[i];
      snprintf(nums + 16 * i, 16, "%ld", val[i]);
      out[n++] = nums + 16 * i;
    }
    const char *sopt[] = {"--trace", "--record", "--replay"};
    const char *sval[] = {a->trace, a->record, a->replay};
    for (int i = 0; i < 3; i++)
      if (sval[i]) {
        out[n++] = (char *)sopt[i];
        out[n++] = (char *)sval[i];
      }
    if (a->fault_inject) out[n++] = "--fault-inject";
    out[n++] = "--"; /* the name may start with '-' */
    out[n++] = (char *)a->name;
    break;
  }
  case CLI_TRACE_HELP:
    out[n++] = "trace";
    out[n++] = "--help";
    break;
  case CLI_TRACE:
    out[n++] = "trace";
    if (a->check) out[n++] = "--check";
    out[n++] = "--";
    out[n++] = (char *)a->path;
    break;
  case CLI_TRACE_MERGE:
    out[n++] = "trace";
    out[n++] = "--merge";
    out[n++] = "--";
    out[n++] = (char *)a->out;
    for (int i = 0; i < a->nin; i++)
      out[n++] = a->in[i];
    break;
  }
  out[n] = NULL;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  char *argv[MAXARGS + 1];
  int argc = 0;
  argv[argc++] = "pto";
  for (char *p = buf; p <= buf + size && argc < MAXARGS; p += strlen(p) + 1)
    argv[argc++] = p;
  if (size == 0) argc = 1; /* no input: no arguments */
  argv[argc] = NULL;

  cli_args a;
  cli_usage usage = (cli_usage)-1;
  char err[256];
  memset(err, 0x55, sizeof err);
  int rc = cli_parse(argc, argv, &a, &usage, err, sizeof err);
  CHECK(usage == CLI_USAGE_MAIN || usage == CLI_USAGE_RUN || usage == CLI_USAGE_TRACE);
  if (rc) {
    CHECK(rc == 2);
    CHECK(memchr(err, 0, sizeof err) != NULL);
    CHECK(strncmp(err, "pto", 3) == 0 && strlen(err) > 10);
    free(buf);
    return 0;
  }
  const int at = command_at(argc, argv);
  switch (a.cmd) {
  case CLI_HELP:
  case CLI_VERSION: CHECK(argc >= 2); break;
  case CLI_RUN_HELP:
  case CLI_RUN_LIST: CHECK(argc >= at + 2 && !strcmp(argv[at], "run")); break;
  case CLI_RUN: {
    CHECK(!strcmp(argv[at], "run"));
    CHECK(a.name && in_argv(a.name, argc, argv) && a.name[0]);
    CHECK(!a.trace || into_argv(a.trace, argc, argv));
    CHECK(!a.record || (into_argv(a.record, argc, argv) && a.record[0]));
    CHECK(!a.replay || (into_argv(a.replay, argc, argv) && a.replay[0]));
    /* a replay makes the record's choices: no seed beside it, nor two */
    CHECK(!a.replay || (!a.schedule_seed && !a.fuzz_schedules));
    CHECK(!a.schedule_seed || !a.fuzz_schedules);
    const char *opt[] = {"--clusters", "--schedulers",    "--rounds",
                         "--seed",     "--schedule-seed", "--fuzz-schedules"};
    long got[] = {a.clusters,   a.schedulers,    a.rounds,
                  (long)a.seed, a.schedule_seed, a.fuzz_schedules};
    long dflt[] = {0, 0, 1, 1, 0, 0};
    for (int i = 0; i < 6; i++) { /* given: in the option's range; else the default */
      int lo, hi;
      cli_int_range((cli_int)i, &lo, &hi);
      CHECK(got[i] == dflt[i] || (got[i] >= lo && got[i] <= hi));
    }
    for (int i = 0; i < 6; i++) {
      long want = last_int(opt[i], argc, argv);
      if (got[i] != (want < 0 ? dflt[i] : want))
        fprintf(stderr, "%s: parsed %ld, the arguments say %ld\n", opt[i], got[i], want);
      CHECK(got[i] == (want < 0 ? dflt[i] : want));
    }
    break;
  }
  case CLI_TRACE_HELP: CHECK(!strcmp(argv[at], "trace")); break;
  case CLI_TRACE:
    CHECK(!strcmp(argv[at], "trace"));
    CHECK(a.path && in_argv(a.path, argc, argv) && a.path[0]);
    break;
  case CLI_TRACE_MERGE:
    /* OUT and the inputs: consecutive words of argv, at least one input */
    CHECK(!strcmp(argv[at], "trace") && a.nin >= 1);
    CHECK(a.in > argv + at + 1 && a.in + a.nin <= argv + argc && a.in[-1] == a.out);
    break;
  default: CHECK(!"unknown command");
  }

  char *again[MAXARGS + 8];
  char nums[96];
  int n = canonical(&a, again, nums);
  cli_args b;
  rc = cli_parse(n, again, &b, &usage, err, sizeof err);
  if (rc) fprintf(stderr, "canonical argv rejected: %s\n", err);
  CHECK(rc == 0);
  CHECK(same_args(&a, &b));
  free(buf);
  return 0;
}
