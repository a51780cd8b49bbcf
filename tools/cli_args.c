/* cli_args.c — parsing the `pto` command line with getopt_long (see
 * cli_args.h). Each level (pto, pto run, pto trace) is one getopt_long
 * loop; options and operands may come in any order ("-" mode: operands are
 * returned in place, argv is never permuted). */
#include "cli_args.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/options.h"

static int bad(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return 2;
}

/* Starts a getopt_long scan of argv[1..argc) afresh (glibc: optind = 0
 * also resets its internal state); errors are reported by the caller. */
static void getopt_reset(void) {
  optind = 0;
  opterr = 0;
}

/* The option getopt_long just refused ('?', ':'): its name as written. */
static const char *refused(int argc, char *const *argv, const struct option *opts) {
  static char shortopt[3];
  for (int k = 0; opts[k].name; k++)
    if (optopt && opts[k].val == optopt) return opts[k].name; /* ':' on a long option */
  if (optopt) {
    shortopt[0] = '-', shortopt[1] = (char)optopt, shortopt[2] = '\0';
    return shortopt;
  }
  return optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "?";
}

/* The option getopt_long refused with '?' (cmd: "pto run"): unknown, or a
 * flag given a value (--check=yes: getopt_long refuses it naming the flag,
 * which "unknown option 'check'" had then called unknown). */
static int refused_opt(char *err, size_t n, const char *cmd, int argc, char *const *argv,
                       const struct option *opts) {
  for (int k = 0; optopt && opts[k].name; k++)
    if (opts[k].val == optopt && opts[k].has_arg == no_argument)
      return bad(err, n, "%s: --%s takes no value (got '%s')", cmd, opts[k].name,
                 optind - 1 < argc && optind >= 1 ? argv[optind - 1] : opts[k].name);
  return bad(err, n, "%s: unknown option '%s'", cmd, refused(argc, argv, opts));
}

const char *cli_int_range(cli_int which, int *min, int *max) {
  static const struct {
    const char *name;
    int max;
  } opts[CLI_INT_COUNT] = {
      [CLI_INT_CLUSTERS] = {"clusters", PTO_CLUSTERS_MAX},
      [CLI_INT_SCHEDULERS] = {"schedulers", PTO_SCHEDULERS_MAX},
      [CLI_INT_ROUNDS] = {"rounds", CLI_INT_MAX},
      [CLI_INT_SEED] = {"seed", CLI_INT_MAX},
      [CLI_INT_SCHEDULE_SEED] = {"schedule-seed", CLI_INT_MAX},
      [CLI_INT_FUZZ_SCHEDULES] = {"fuzz-schedules", CLI_INT_MAX},
  };
  *min = 1;
  *max = opts[which].max;
  return opts[which].name;
}

/* A decimal integer in the option's range, all of v: digits only (strtol
 * alone would take " 5", "+5"). */
static int int_arg(cli_int which, const char *v, int *out, char *err, size_t n) {
  int lo, hi;
  const char *opt = cli_int_range(which, &lo, &hi);
  char *end;
  errno = 0;
  long x = v[0] >= '0' && v[0] <= '9' ? strtol(v, &end, 10) : 0;
  if (x == 0 || *end || errno || x < lo || x > hi)
    return bad(err, n, "pto run: --%s needs an integer in %d..%d, got '%s'", opt, lo, hi, v);
  *out = (int)x;
  return 0;
}

enum {
  OPT_CLUSTERS = 256,
  OPT_SCHEDULERS,
  OPT_ROUNDS,
  OPT_SEED,
  OPT_TRACE,
  OPT_FAULT,
  OPT_LIST,
  OPT_CHECK,
  OPT_MERGE,
  OPT_SCHEDULE_SEED,
  OPT_FUZZ_SCHEDULES,
  OPT_RECORD,
  OPT_REPLAY,
};

static const struct option run_opts[] = {
    {"clusters", required_argument, NULL, OPT_CLUSTERS},
    {"schedulers", required_argument, NULL, OPT_SCHEDULERS},
    {"rounds", required_argument, NULL, OPT_ROUNDS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"fault-inject", no_argument, NULL, OPT_FAULT},
    {"list", no_argument, NULL, OPT_LIST},
    {"help", no_argument, NULL, 'h'},
    {"check", no_argument, NULL, OPT_CHECK},
    {"schedule-seed", required_argument, NULL, OPT_SCHEDULE_SEED},
    {"fuzz-schedules", required_argument, NULL, OPT_FUZZ_SCHEDULES},
    {"record", required_argument, NULL, OPT_RECORD},
    {"replay", required_argument, NULL, OPT_REPLAY},
    {NULL, 0, NULL, 0},
};

static int parse_run(int argc, char *const *argv, cli_args *a, char *err, size_t n) {
  a->cmd = CLI_RUN;
  bool list = false, help = false;
  unsigned given = 0; /* the long options given, by their index in run_opts */
  getopt_reset();
  for (int c, rc = 0, seed = 0, at = 0;
       (c = getopt_long(argc, argv, "-:h", run_opts, &at)) != -1;) {
    if (c >= OPT_CLUSTERS) given |= 1u << at; /* a long option only: `at` is its index */
    switch (c) {
    case OPT_CLUSTERS: rc = int_arg(CLI_INT_CLUSTERS, optarg, &a->clusters, err, n); break;
    case OPT_SCHEDULERS: rc = int_arg(CLI_INT_SCHEDULERS, optarg, &a->schedulers, err, n); break;
    case OPT_ROUNDS: rc = int_arg(CLI_INT_ROUNDS, optarg, &a->rounds, err, n); break;
    case OPT_SEED:
      rc = int_arg(CLI_INT_SEED, optarg, &seed, err, n);
      if (!rc) a->seed = (unsigned)seed, a->seed_set = true;
      break;
    case OPT_TRACE: a->trace = optarg; break;
    case OPT_SCHEDULE_SEED:
      rc = int_arg(CLI_INT_SCHEDULE_SEED, optarg, &a->schedule_seed, err, n);
      break;
    case OPT_FUZZ_SCHEDULES:
      rc = int_arg(CLI_INT_FUZZ_SCHEDULES, optarg, &a->fuzz_schedules, err, n);
      break;
    case OPT_RECORD:
    case OPT_REPLAY:
      if (!optarg[0])
        return bad(err, n, "pto run: --%s needs a file name",
                   c == OPT_RECORD ? "record" : "replay");
      *(c == OPT_RECORD ? &a->record : &a->replay) = optarg;
      break;
    case OPT_FAULT: a->fault_inject = true; break;
    case OPT_LIST: list = true; break;
    case 'h': help = true; break;
    case OPT_CHECK: a->run_check = true; break;
    case 1: /* an operand: the scene */
      if (optarg[0] == '-') return bad(err, n, "pto run: unexpected argument '%s'", optarg);
      if (a->name)
        return bad(err, n, "pto run: unexpected argument '%s' (the scene is '%s')", optarg,
                   a->name);
      a->name = optarg;
      break;
    case ':':
      if (optopt == OPT_TRACE) return bad(err, n, "pto run: --trace needs a file name");
      if (optopt == OPT_RECORD || optopt == OPT_REPLAY)
        return bad(err, n, "pto run: --%s needs a file name",
                   optopt == OPT_RECORD ? "record" : "replay");
      return bad(err, n, "pto run: --%s needs a positive integer", refused(argc, argv, run_opts));
    default: return refused_opt(err, n, "pto run", argc, argv, run_opts);
    }
    if (rc) return rc;
  }
  for (int i = optind; i < argc; i++) { /* operands after "--" */
    if (a->name) return bad(err, n, "pto run: unexpected argument '%s'", argv[i]);
    a->name = argv[i];
  }
  if (help) {
    a->cmd = CLI_RUN_HELP;
  } else if (list) {
    if (a->name) return bad(err, n, "pto run --list: unexpected argument '%s'", a->name);
    char ignored[256] = ""; /* the options --list would ignore, named */
    for (int k = 0, len = 0; run_opts[k].name; k++)
      if ((given >> k & 1) && run_opts[k].val != OPT_LIST && len < (int)sizeof ignored)
        len += snprintf(ignored + len, sizeof ignored - (size_t)len, "%s--%s", len ? ", " : "",
                        run_opts[k].name);
    if (ignored[0])
      return bad(err, n, "pto run --list: %s would do nothing (--list runs no scene)", ignored);
    a->cmd = CLI_RUN_LIST;
  } else if (!a->name || !a->name[0]) {
    return bad(err, n, "pto run: which scene or example? (pto run --list)");
  }
  if (a->replay && (a->schedule_seed || a->fuzz_schedules))
    return bad(err, n, "pto run: --replay makes the record's choices: no --%s with it",
               a->schedule_seed ? "schedule-seed" : "fuzz-schedules");
  /* both order the blocks one at a time, each its own way */
  if (a->run_check && (a->schedule_seed || a->fuzz_schedules || a->record || a->replay))
    return bad(err, n,
               "pto run: --check and --%s do not go together (checking mode and controlled "
               "schedules each choose the order of the blocks: use one at a time)",
               a->schedule_seed    ? "schedule-seed"
               : a->fuzz_schedules ? "fuzz-schedules"
               : a->record         ? "record"
                                   : "replay");
  if (a->schedule_seed && a->fuzz_schedules)
    return bad(err, n,
               "pto run: --schedule-seed and --fuzz-schedules do not go together "
               "(--fuzz-schedules N tries seeds 1..N)");
  return 0;
}

static const struct option trace_opts[] = {
    {"check", no_argument, NULL, OPT_CHECK},
    {"merge", no_argument, NULL, OPT_MERGE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_trace(int argc, char *const *argv, cli_args *a, char *err, size_t n) {
  bool merge = false, help = false;
  int first = 0, nops = 0; /* operands: argv[first .. first + nops), contiguous */
  getopt_reset();
  for (int c; (c = getopt_long(argc, argv, "-:h", trace_opts, NULL)) != -1;) {
    switch (c) {
    case OPT_CHECK: a->check = true; break;
    case OPT_MERGE: merge = true; break;
    case 'h': help = true; break;
    case 1:
      if (nops && optind - 1 != first + nops)
        return bad(err, n, "pto trace: options go before the files ('%s' follows one)", optarg);
      if (!nops) first = optind - 1;
      nops++;
      break;
    default: return refused_opt(err, n, "pto trace", argc, argv, trace_opts);
    }
  }
  if (optind < argc) { /* operands after "--": all of them there, or none */
    if (nops)
      return bad(err, n, "pto trace: unexpected argument '%s' (files go on one side of '--')",
                 argv[optind]);
    first = optind;
    nops = argc - optind;
  }
  if (help) {
    a->cmd = CLI_TRACE_HELP;
    return 0;
  }
  if (merge) {
    if (a->check) return bad(err, n, "pto trace: --merge and --check do not go together");
    if (nops < 2) return bad(err, n, "pto trace --merge: needs OUT.json and at least one input");
    a->cmd = CLI_TRACE_MERGE;
    a->out = argv[first];
    a->in = argv + first + 1;
    a->nin = nops - 1;
    return 0;
  }
  a->cmd = CLI_TRACE;
  if (nops == 0) return bad(err, n, "pto trace: which trace file?");
  if (nops > 1) return bad(err, n, "pto trace: unexpected argument '%s'", argv[first + 1]);
  a->path = argv[first];
  if (!a->path[0]) return bad(err, n, "pto trace: the trace file name is empty");
  return 0;
}

static const struct option main_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

int cli_parse(int argc, char *const *argv, cli_args *a, cli_usage *usage, char *err,
              size_t errlen) {
  memset(a, 0, sizeof *a);
  a->rounds = 1;
  a->seed = 1;
  if (err && errlen) err[0] = '\0';
  *usage = CLI_USAGE_MAIN;
  /* "+": stop at the command; what follows is the command's. */
  getopt_reset();
  for (int c; (c = getopt_long(argc, argv, "+:hV", main_opts, NULL)) != -1;) {
    switch (c) {
    case 'h': a->cmd = CLI_HELP; return 0;
    case 'V':
      if (optind < argc)
        return bad(err, errlen, "pto --version: unexpected argument '%s'", argv[optind]);
      a->cmd = CLI_VERSION;
      return 0;
    default: return refused_opt(err, errlen, "pto", argc, argv, main_opts);
    }
  }
  int at = optind;
  if (at >= argc) return bad(err, errlen, "pto: which command? (run or trace)");
  const char *cmd = argv[at];
  if (!strcmp(cmd, "run")) {
    *usage = CLI_USAGE_RUN;
    return parse_run(argc - at, argv + at, a, err, errlen);
  }
  if (!strcmp(cmd, "trace")) {
    *usage = CLI_USAGE_TRACE;
    return parse_trace(argc - at, argv + at, a, err, errlen);
  }
  if (!strcmp(cmd, "help")) { /* `pto help` as git's */
    a->cmd = CLI_HELP;
    return 0;
  }
  return bad(err, errlen, "pto: unknown command '%s' (run or trace)", cmd);
}
