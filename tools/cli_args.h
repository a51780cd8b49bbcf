/* cli_args.h — the `pto` command line, parsed: a function of argc/argv
 * that runs nothing and prints nothing, so that it can be tested and fuzzed
 * (tests/fuzz/fuzz_cli.c). main.c runs what it returns. */
#ifndef PTO_CLI_ARGS_H
#define PTO_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum cli_cmd {
  CLI_HELP,        /* pto --help: usage on stdout */
  CLI_VERSION,     /* pto --version */
  CLI_RUN_HELP,    /* pto run --help */
  CLI_RUN_LIST,    /* pto run --list */
  CLI_RUN,         /* pto run NAME [options] */
  CLI_TRACE_HELP,  /* pto trace --help */
  CLI_TRACE,       /* pto trace [--check] FILE */
  CLI_TRACE_MERGE, /* pto trace --merge OUT IN... */
} cli_cmd;

/* Bound of --rounds and --seed. */
#define CLI_INT_MAX (1 << 20)

/* The integer options of `pto run`. Their ranges come from one place,
 * cli_int_range: --clusters and --schedulers take the chip's
 * (PTO_CLUSTERS_MAX, PTO_SCHEDULERS_MAX of src/common/options.h, which
 * pto_chip_create checks against), --rounds and --seed 1..CLI_INT_MAX. */
typedef enum cli_int {
  CLI_INT_CLUSTERS,
  CLI_INT_SCHEDULERS,
  CLI_INT_ROUNDS,
  CLI_INT_SEED,
  CLI_INT_SCHEDULE_SEED,
  CLI_INT_FUZZ_SCHEDULES,
  CLI_INT_COUNT
} cli_int;

/* The option's name (without "--") and its range, min..max. */
const char *cli_int_range(cli_int which, int *min, int *max);

typedef struct cli_args {
  cli_cmd cmd;
  /* CLI_RUN; 0 = not given (the scene's default) for clusters/schedulers */
  const char *name;
  int clusters, schedulers, rounds; /* rounds 1 when not given */
  unsigned seed;                    /* 1 when not given */
  bool seed_set;                    /* --seed given */
  const char *trace;                /* --trace FILE, or NULL */
  bool fault_inject;
  /* CLI_TRACE */
  bool check;
  const char *path;
  /* CLI_TRACE_MERGE: out, then nin input files */
  const char *out;
  char *const *in;
  int nin;
  bool run_check; /* CLI_RUN: --check, checking mode (PTO_CHECK=contracts) */
  /* CLI_RUN, controlled schedules (docs/schedules.md); 0 / NULL: not given */
  int schedule_seed;  /* --schedule-seed N */
  int fuzz_schedules; /* --fuzz-schedules N: seeds 1..N */
  const char *record; /* --record FILE */
  const char *replay; /* --replay FILE */
} cli_args;

/* Which usage an error points to (pto, pto run or pto trace --help). */
typedef enum cli_usage { CLI_USAGE_MAIN, CLI_USAGE_RUN, CLI_USAGE_TRACE } cli_usage;

/* Exit statuses of `pto` (documented in its --help and in pto.1). */
enum {
  CLI_EXIT_OK = 0,     /* done; a run matched its reference */
  CLI_EXIT_FAILED = 1, /* a run failed or differed, a trace failed its check, I/O failed */
  CLI_EXIT_USAGE = 2,  /* a bad command line or PTO_* environment value */
};

/* Parses argv[0..argc) (argv[0] is the program) with getopt_long:
 * `--opt value` and `--opt=value`, -h/--help at every level, --version.
 * Returns 0 with *a filled (its strings point into argv), or 2 (a usage
 * error) with err naming the argument that is wrong and *usage saying which
 * usage text applies. Not reentrant (getopt's state is global). */
int cli_parse(int argc, char *const *argv, cli_args *a, cli_usage *usage, char *err, size_t errlen);

#endif
