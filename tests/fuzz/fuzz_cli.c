/* fuzz_cli.c — libFuzzer target for the `pto` command line's parser
 * (tools/cli_args.c). The input is split at NUL bytes into argv[1..]
 * (argv[0] is "pto"); cli_parse runs nothing and prints nothing.
 *
 * Oracles: a failure is status 2 with a message naming the problem; a
 * success has every field in range, its strings pointing into argv, integer
 * options equal to the digits given (computed here independently); and the
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

static bool same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_args(const cli_args *a, const cli_args *b) {
  if (a->cmd != b->cmd) return false;
  switch (a->cmd) {
  case CLI_HELP:
  case CLI_RUN_LIST:
  case CLI_TRACE_HELP: return true;
  case CLI_RUN:
    return same_str(a->name, b->name) && a->clusters == b->clusters &&
           a->schedulers == b->schedulers && a->rounds == b->rounds && a->seed == b->seed &&
           same_str(a->trace, b->trace) && a->fault_inject == b->fault_inject;
  case CLI_TRACE: return a->check == b->check && same_str(a->path, b->path);
  case CLI_TRACE_MERGE:
    if (!same_str(a->out, b->out) || a->nin != b->nin) return false;
    for (int i = 0; i < a->nin; i++)
      if (!same_str(a->in[i], b->in[i])) return false;
    return true;
  }
  return false;
}

/* Reference scan of `pto run ...`: the value of the last `opt V`, where V
 * is taken only when opt is an option (not another option's value); an
 * accepted V had digits only, so this is what the parser must have read.
 * -1 when the option is absent. */
static long last_int(const char *opt, int argc, char *const *argv) {
  static const char *const valued[] = {"--clusters", "--schedulers", "--rounds", "--seed",
                                       "--trace"};
  long v = -1;
  for (int i = 2; i < argc; i++) {
    bool takes = false;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
      takes |= strcmp(argv[i], valued[k]) == 0;
    if (!takes || i + 1 >= argc) continue;
    if (!strcmp(argv[i], opt)) {
      long x = 0;
      for (const char *p = argv[i + 1]; *p && x <= CLI_INT_MAX; p++)
        x = x * 10 + (*p - '0');
      v = x;
    }
    i++; /* the value is not an option */
  }
  return v;
}

/* The canonical argv of a parsed command. */
static int canonical(const cli_args *a, char **out, char *nums) {
  int n = 0;
  out[n++] = "pto";
  switch (a->cmd) {
  case CLI_HELP: out[n++] = "--help"; break;
  case CLI_RUN_LIST:
    out[n++] = "run";
    out[n++] = "--list";
    break;
  case CLI_RUN: {
    out[n++] = "run";
    out[n++] = (char *)a->name;
    const char *opt[] = {"--clusters", "--schedulers", "--rounds", "--seed"};
    long val[] = {a->clusters, a->schedulers, a->rounds, (long)a->seed};
    for (int i = 0; i < 4; i++) {
      if (!val[i]) continue;
      out[n++] = (char *)opt[i];
      snprintf(nums + 16 * i, 16, "%ld", val[i]);
      out[n++] = nums + 16 * i;
    }
    if (a->trace) {
      out[n++] = "--trace";
      out[n++] = (char *)a->trace;
    }
    if (a->fault_inject) out[n++] = "--fault-inject";
    break;
  }
  case CLI_TRACE_HELP:
    out[n++] = "trace";
    out[n++] = "--help";
    break;
  case CLI_TRACE:
    out[n++] = "trace";
    if (a->check) out[n++] = "--check";
    out[n++] = (char *)a->path;
    break;
  case CLI_TRACE_MERGE:
    out[n++] = "trace";
    out[n++] = "--merge";
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
  CHECK(usage == CLI_USAGE_MAIN || usage == CLI_USAGE_TRACE);
  if (rc) {
    CHECK(rc == 2);
    CHECK(memchr(err, 0, sizeof err) != NULL);
    CHECK(strncmp(err, "pto", 3) == 0 && strlen(err) > 10);
    free(buf);
    return 0;
  }
  switch (a.cmd) {
  case CLI_HELP: CHECK(argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))); break;
  case CLI_RUN_LIST: CHECK(argc >= 3 && !strcmp(argv[1], "run")); break;
  case CLI_RUN: {
    CHECK(!strcmp(argv[1], "run"));
    CHECK(a.name && in_argv(a.name, argc, argv) && a.name[0] != '-');
    CHECK(!a.trace || in_argv(a.trace, argc, argv));
    CHECK(a.clusters >= 0 && a.clusters <= CLI_INT_MAX);
    CHECK(a.schedulers >= 0 && a.schedulers <= CLI_INT_MAX);
    CHECK(a.rounds >= 1 && a.rounds <= CLI_INT_MAX);
    CHECK(a.seed >= 1 && a.seed <= CLI_INT_MAX);
    const char *opt[] = {"--clusters", "--schedulers", "--rounds", "--seed"};
    long got[] = {a.clusters, a.schedulers, a.rounds, (long)a.seed};
    long dflt[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
      long want = last_int(opt[i], argc, argv);
      if (got[i] != (want < 0 ? dflt[i] : want))
        fprintf(stderr, "%s: parsed %ld, the arguments say %ld\n", opt[i], got[i], want);
      CHECK(got[i] == (want < 0 ? dflt[i] : want));
    }
    break;
  }
  case CLI_TRACE_HELP: CHECK(!strcmp(argv[1], "trace")); break;
  case CLI_TRACE:
    CHECK(!strcmp(argv[1], "trace"));
    CHECK(a.path && in_argv(a.path, argc, argv) && a.path[0] != '-');
    break;
  case CLI_TRACE_MERGE:
    CHECK(!strcmp(argv[1], "trace") && !strcmp(argv[2], "--merge"));
    CHECK(a.out == argv[3] && a.in == argv + 4 && a.nin == argc - 4 && a.nin >= 1);
    break;
  default: CHECK(!"unknown command");
  }

  char *again[MAXARGS + 8];
  char nums[64];
  int n = canonical(&a, again, nums);
  cli_args b;
  rc = cli_parse(n, again, &b, &usage, err, sizeof err);
  if (rc) fprintf(stderr, "canonical argv rejected: %s\n", err);
  CHECK(rc == 0);
  CHECK(same_args(&a, &b));
  free(buf);
  return 0;
}
