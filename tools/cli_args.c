/* cli_args.c — parsing the `pto` command line (see cli_args.h). */
#include "cli_args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return 2;
}

/* A decimal integer in 1..CLI_INT_MAX, all of v: digits only (strtol alone
 * would take " 5", "+5"). */
static int int_arg(const char *opt, const char *v, int *out, char *err, size_t n) {
  if (!v) return bad(err, n, "pto run: %s needs a positive integer", opt);
  char *end;
  errno = 0;
  long x = v[0] >= '0' && v[0] <= '9' ? strtol(v, &end, 10) : 0;
  if (x == 0 || *end || errno || x < 1 || x > CLI_INT_MAX)
    return bad(err, n, "pto run: %s needs an integer in 1..%d, got '%s'", opt, CLI_INT_MAX, v);
  *out = (int)x;
  return 0;
}

static int parse_run(int argc, char *const *argv, cli_args *a, char *err, size_t n) {
  a->cmd = CLI_RUN;
  for (int i = 0; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0, seed;
    if (!strcmp(o, "--list")) {
      a->cmd = CLI_RUN_LIST; /* lists at once, whatever follows */
      return 0;
    } else if (!strcmp(o, "--clusters")) {
      rc = int_arg(o, v, &a->clusters, err, n), i++;
    } else if (!strcmp(o, "--schedulers")) {
      rc = int_arg(o, v, &a->schedulers, err, n), i++;
    } else if (!strcmp(o, "--rounds")) {
      rc = int_arg(o, v, &a->rounds, err, n), i++;
    } else if (!strcmp(o, "--seed")) {
      rc = int_arg(o, v, &seed, err, n), i++;
      if (!rc) a->seed = (unsigned)seed;
    } else if (!strcmp(o, "--trace")) {
      if (!v) return bad(err, n, "pto run: --trace needs a file name");
      a->trace = v, i++;
    } else if (!strcmp(o, "--fault-inject")) {
      a->fault_inject = true;
    } else if (o[0] == '-') {
      return bad(err, n, "pto run: unknown option '%s'", o);
    } else if (a->name) {
      return bad(err, n, "pto run: unexpected argument '%s' (the scene is '%s')", o, a->name);
    } else {
      a->name = o;
    }
    if (rc) return rc;
  }
  if (!a->name) return bad(err, n, "pto run: which scene or example? (pto run --list)");
  return 0;
}

static int parse_trace(int argc, char *const *argv, cli_args *a, char *err, size_t n) {
  if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
    a->cmd = CLI_TRACE_HELP;
    return 0;
  }
  if (argc >= 1 && !strcmp(argv[0], "--merge")) {
    if (argc < 3) return bad(err, n, "pto trace --merge: needs OUT.json and at least one input");
    a->cmd = CLI_TRACE_MERGE;
    a->out = argv[1];
    a->in = argv + 2;
    a->nin = argc - 2;
    return 0;
  }
  a->cmd = CLI_TRACE;
  int i = 0;
  if (i < argc && !strcmp(argv[i], "--check")) {
    a->check = true;
    i++;
  }
  if (i >= argc) return bad(err, n, "pto trace: which trace file?");
  if (argv[i][0] == '-') return bad(err, n, "pto trace: unknown option '%s'", argv[i]);
  if (i + 1 < argc) return bad(err, n, "pto trace: unexpected argument '%s'", argv[i + 1]);
  a->path = argv[i];
  return 0;
}

int cli_parse(int argc, char *const *argv, cli_args *a, cli_usage *usage, char *err,
              size_t errlen) {
  memset(a, 0, sizeof *a);
  a->rounds = 1;
  a->seed = 1;
  if (err && errlen) err[0] = '\0';
  *usage = CLI_USAGE_MAIN;
  if (argc >= 2 && !strcmp(argv[1], "run")) return parse_run(argc - 2, argv + 2, a, err, errlen);
  if (argc >= 2 && !strcmp(argv[1], "trace")) {
    *usage = CLI_USAGE_TRACE;
    return parse_trace(argc - 2, argv + 2, a, err, errlen);
  }
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    a->cmd = CLI_HELP;
    return 0;
  }
  if (argc < 2) return bad(err, errlen, "pto: which command? (run or trace)");
  return bad(err, errlen, "pto: unknown command '%s' (run or trace)", argv[1]);
}
