/* scene.h — the harness shared by every scene and example that `pto run`
 * knows. A scene builds its inputs, runs pto, checks the result against a
 * sequential reference and fills a report; it never prints the verdict
 * itself (the CLI does), but on a mismatch it prints the whole actual and
 * expected data with scene_report_mismatch*(). */
#ifndef PTO_SCENE_H
#define PTO_SCENE_H

#include <stdbool.h>
#include <stdio.h>

#include "pto/node.h"
#include "pto/pto.h"

typedef struct pto_scene_opts {
  int clusters;      /* 0 = scene default */
  int schedulers;    /* 0 = scene default */
  int rounds;        /* >= 1 */
  const char *trace; /* write a trace JSON here (NULL = off) */
  bool fault_inject; /* comm scenes: late/out-of-order remote stores */
  unsigned seed;
} pto_scene_opts;

typedef struct pto_scene_report {
  bool verified;       /* the result matched the reference */
  int status;          /* run status (0, or the error seen) */
  int expected_status; /* error-trigger scenes: the code they expect */
  pto_error_info err;  /* details of `status` */
  pto_run_stats stats; /* summed over rounds (times: of the last round) */
  pto_node_stats node; /* multi-chip scenes (node.nchips > 0): of the last round */
  bool config_refused; /* the chip or node refused its configuration (err says why) */
  char message[512];   /* what was checked, or what differed */
  /* what the scene did not assert in this run, and why (checking mode);
   * the CLI prints it on a line of its own */
  char unchecked[256];
} pto_scene_report;

/* What a scene's options act on (pto run refuses --seed and --fault-inject
 * where they would do nothing). */
enum {
  PTO_SCENE_RANDOM = 1,     /* --seed seeds its inputs */
  PTO_SCENE_MULTI_CHIP = 2, /* a node of chips: --fault-inject applies, --seed seeds it */
  /* it verifies how the scheduler runs blocks in time (fast path, drains,
   * a kernel the orchestrator waits to see start): under checking mode,
   * which runs blocks one at a time instead, it asserts only its data and
   * says in rep->unchecked what it left out */
  PTO_SCENE_SCHEDULING = 4,
};

typedef struct pto_scene {
  const char *name;
  const char *summary;
  int (*run)(const pto_scene_opts *opts, pto_scene_report *rep);
  unsigned flags; /* PTO_SCENE_* */
} pto_scene;

#define PTO_SCENE_WITH(NAME, SUMMARY, FN, FLAGS)                                                   \
  const pto_scene pto_scene__##NAME = {#NAME, SUMMARY, FN, FLAGS}
#define PTO_SCENE(NAME, SUMMARY, FN) PTO_SCENE_WITH(NAME, SUMMARY, FN, 0)

extern const pto_scene *const pto_scenes[]; /* NULL-terminated, sorted */
const pto_scene *pto_scene_find(const char *name);

/* Chip config for a scene: defaults, then the scene's cluster/scheduler
 * overrides, then the command line's. */
void scene_chip_config(const pto_scene_opts *opts, int clusters, int schedulers,
                       pto_chip_config *cfg);
/* pto_chip_create_ex and pto_node_create with the details in rep->err, and
 * rep->config_refused set when the configuration was refused (PTO_EINVAL). */
int scene_chip_create(const pto_chip_config *cfg, pto_chip **chip, pto_scene_report *rep);
int scene_node_create(const pto_node_config *cfg, pto_node **node, pto_scene_report *rep);
/* Runs `fn` opts->rounds times on `chip`, summing stats into rep; stops at
 * the first failed round. Returns that round's status. */
int scene_run_rounds(pto_chip *chip, const pto_scene_opts *opts, pto_orch_fn fn, void *arg,
                     pto_scene_report *rep);
/* For error-trigger scenes: one run expected to fail with `expected`. */
int scene_expect_error(pto_chip *chip, pto_orch_fn fn, void *arg, int expected,
                       pto_scene_report *rep);

/* Compare arrays; on mismatch print both in full (label, actual, expected)
 * to stderr, set rep->message and return false. */
bool scene_check_f32(pto_scene_report *rep, const char *label, const float *actual,
                     const float *expected, size_t n, float tol);
bool scene_check_i32(pto_scene_report *rep, const char *label, const int32_t *actual,
                     const int32_t *expected, size_t n);
void scene_print_f32(FILE *f, const char *label, const float *v, size_t n);
void scene_print_i32(FILE *f, const char *label, const int32_t *v, size_t n);

#endif
