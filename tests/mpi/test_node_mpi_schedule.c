/* test_node_mpi_schedule.c — controlled schedules of a node whose chips are
 * MPI ranks (docs/schedules.md, "Under mpirun"), run under mpiexec -np 2
 * (ctest mpi.node_schedule.np2 on shared-memory windows, and
 * mpi.node_schedule_rma.np2 on MPI RMA windows, PTO_MPI_SHARED_WINDOWS=0).
 * Every run is a scene of examples/scenes with its configuration read from
 * the environment, as under `pto run`; ranks > 0 serve rank 0's nodes one
 * after the other, and write their own chip tasks' files:
 *   - correct programs pass under seeds 1..SEEDS, with fault injection
 *     (ring_shuffle, dist_separate_reader, and dist_epochs, whose blocks
 *     wait for the other rank's publisher block);
 *   - a correct program recorded, then replayed while recording, gives the
 *     verified result and the same files on every rank, rank 1's written
 *     by rank 1;
 *   - the seed's race (dist_race_publisher) fails under some seed of 20,
 *     and the record of the first failing one, replayed 20 times, prints
 *     exactly that seed's wrong values 20 of 20;
 *   - a departure from rank 1's chip record, or from rank 0's landing
 *     order, stops the replay with PTO_EREPLAY naming the rank, the file
 *     and the line.
 * Nothing depends on timing: every choice is the seed's or the record's. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scene.h"

#define SEEDS   8  /* seeds of the correct programs */
#define FUZZ    20 /* seeds tried on the race */
#define REPLAYS 20

static int failures;
static char dir[64];

#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      printf("FAILED: " __VA_ARGS__);                                                              \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void set(const char *var, const char *v) { v ? setenv(var, v, 1) : unsetenv(var); }

/* The scene under seed / record / replay (NULL: unset); with `out`, what it
 * printed to stderr goes to that file. */
static pto_scene_report run(const char *scene, const char *seed, const char *record,
                            const char *replay, const char *out) {
  set("PTO_SCHEDULE_SEED", seed);
  set("PTO_RECORD", record);
  set("PTO_REPLAY", replay);
  const pto_scene *sc = pto_scene_find(scene);
  pto_scene_opts o = {.rounds = 1, .fault_inject = true};
  pto_scene_report rep;
  memset(&rep, 0, sizeof rep);
  int saved = -1;
  if (out) {
    fflush(stderr);
    saved = dup(2);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  sc->run(&o, &rep);
  if (out) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
  }
  return rep;
}

static bool ok(const pto_scene_report *r) { return r->status == 0 && r->verified; }

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *s = calloc(1, 1 << 16);
  size_t n = s ? fread(s, 1, (1 << 16) - 1, f) : 0;
  (void)n;
  fclose(f);
  return s;
}

static void spit(const char *path, const char *s) {
  FILE *f = fopen(path, "w");
  if (f) fputs(s, f), fclose(f);
}

/* The values printed from the line "... actual [" to the next "expected": the
 * wrong result itself. */
static char *actual_values(const char *path) {
  char *s = slurp(path);
  char *a = s ? strstr(s, " actual [") : NULL, *e = a ? strstr(a, " expected [") : NULL;
  char *v = a && e ? strndup(a, (size_t)(e - a)) : NULL;
  free(s);
  return v;
}

static char *path(const char *name) {
  static char p[4][128];
  static int i;
  char *s = p[i++ % 4];
  snprintf(s, sizeof p[0], "%s/%s", dir, name);
  return s;
}

/* The files of a node record at a and at b are equal, byte for byte: the
 * node's and those of every chip task named in it (tasks 0..3, chips 0..1). */
static int same_files(const char *a, const char *b, int *chip1) {
  int n = 0;
  for (int k = -1; k < 4; k++)
    for (int c = 0; c < 2; c++)
      for (int land = 0; land < 2; land++) {
        if (k < 0 && (c || land)) continue;
        char fa[192], fb[192], sfx[32] = "";
        if (k >= 0) snprintf(sfx, sizeof sfx, ".t%d.c%d%s", k, c, land ? ".land" : "");
        snprintf(fa, sizeof fa, "%s%s", a, sfx);
        snprintf(fb, sizeof fb, "%s%s", b, sfx);
        char *x = slurp(fa), *y = slurp(fb);
        if (x || y) {
          CHECK(x && y && strcmp(x, y) == 0, "%s and %s differ", fa, fb);
          n++;
          if (c == 1 && x) ++*chip1;
        }
        free(x);
        free(y);
      }
  return n;
}

static void correct_seeds(void) {
  const char *scenes[] = {"ring_shuffle", "dist_separate_reader", "dist_epochs"};
  int passed = 0;
  for (int i = 0; i < 3; i++)
    for (int s = 1; s <= SEEDS; s++) {
      char seed[16];
      snprintf(seed, sizeof seed, "%d", s);
      pto_scene_report r = run(scenes[i], seed, NULL, NULL, NULL);
      CHECK(ok(&r), "%s, seed %d: status %d, %s %s", scenes[i], s, r.status, r.message,
            r.err.details);
      passed += ok(&r);
    }
  printf("correct programs: %d of %d seeded runs passed (seeds 1..%d, fault injection)\n", passed,
         3 * SEEDS, SEEDS);
}

static void record_replay(void) {
  char a[128], b[128];
  snprintf(a, sizeof a, "%s", path("a"));
  snprintf(b, sizeof b, "%s", path("b"));
  pto_scene_report r = run("dist_separate_reader", "7", a, NULL, NULL);
  CHECK(ok(&r), "dist_separate_reader, seed 7, recorded: status %d %s", r.status, r.err.details);
  r = run("dist_separate_reader", NULL, b, a, NULL);
  CHECK(ok(&r), "dist_separate_reader, replayed: status %d %s", r.status, r.err.details);
  int chip1 = 0, n = same_files(a, b, &chip1);
  CHECK(n >= 5 && chip1 >= 2, "the record has %d files, %d of rank 1", n, chip1);
  printf("record and replay: verified both times; %d record files (%d of rank 1) alike\n", n,
         chip1);
}

static void race(void) {
  int first = 0, failed = 0;
  for (int s = 1; s <= FUZZ; s++) {
    char seed[16];
    snprintf(seed, sizeof seed, "%d", s);
    pto_scene_report r = run("dist_race_publisher", seed, NULL, NULL, path("out"));
    CHECK(r.status == 0, "race, seed %d: status %d %s", s, r.status, r.err.details);
    if (r.status == 0 && !r.verified) failed++, first = first ? first : s;
  }
  CHECK(first, "the race was not caught under seeds 1..%d", FUZZ);
  if (!first) return;
  char seed[16];
  snprintf(seed, sizeof seed, "%d", first);
  pto_scene_report r = run("dist_race_publisher", seed, path("r"), NULL, path("out"));
  char *want = actual_values(path("out"));
  CHECK(!r.verified && want, "race, seed %d recorded: no wrong values", first);
  if (!want) return;
  int same = 0;
  for (int i = 0; i < REPLAYS; i++) {
    pto_scene_report p = run("dist_race_publisher", NULL, NULL, path("r"), path("out"));
    char *got = actual_values(path("out"));
    same += p.status == 0 && !p.verified && strcmp(p.message, r.message) == 0 && got &&
            strcmp(got, want) == 0;
    free(got);
  }
  CHECK(same == REPLAYS, "race: %d of %d replays gave seed %d's values", same, REPLAYS, first);
  printf("race: %d of %d seeds fail, the first is %d (%s); %d of %d replays of its record gave "
         "its wrong values\n",
         failed, FUZZ, first, r.message, same, REPLAYS);
  free(want);
}

/* A replay departing from rank `rank`'s file `sfx` (changed by replacing
 * `from` with `to`): PTO_EREPLAY naming the rank, file and line. */
static void departure(const char *sfx, const char *from, const char *to, int rank,
                      const char *line) {
  char file[160];
  snprintf(file, sizeof file, "%s%s", path("r"), sfx);
  char *text = slurp(file), *at = text ? strstr(text, from) : NULL;
  CHECK(at, "%s has no \"%s\"", file, from);
  if (!at) {
    free(text);
    return;
  }
  char *changed = calloc(1, strlen(text) + strlen(to) + 1);
  memcpy(changed, text, (size_t)(at - text));
  strcat(strcat(changed, to), at + strlen(from));
  spit(file, changed);
  pto_scene_report r = run("dist_race_publisher", NULL, NULL, path("r"), NULL);
  char who[64];
  snprintf(who, sizeof who, "chip rank %d", rank);
  CHECK(r.status == PTO_EREPLAY && strstr(r.err.details, who) && strstr(r.err.details, sfx) &&
            strstr(r.err.details, line),
        "a changed %s: status %d, \"%s\"", sfx, r.status, r.err.details);
  printf("a changed %s: %s: %s\n", sfx, pto_status_name(r.status), r.err.details);
  spit(file, text);
  free(text);
  free(changed);
}

int main(void) {
  /* the first node makes ranks > 0 serve (they never return): nothing
   * before it leaves anything behind */
  correct_seeds();
  snprintf(dir, sizeof dir, "/tmp/pto_mpi_sched.XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  record_replay();
  race();
  departure(".t0.c1", "kernel 0 race_publisher", "kernel 0 race_other", 1, "line 4");
  departure(".t0.c0.land", "L 0 -1 5 ", "L 0 -1 4 ", 0, "line 2");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) printf("could not remove %s\n", dir);
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
