/* test_node_two_ranks.c — the two-host check of scripts/two_hosts.sh, also
 * run on one host (ctest mpi.node_two_ranks.np2): under mpirun with 2 ranks,
 * the ring shuffle scene (rank r stores its row into its peer's window,
 * notifies, waits; out = [in[1], in[0]]) and a node-level allreduce (sum of
 * 4097 f32 per rank on host tensors, mesh and ring) are run and every
 * element is checked; a mismatch prints actual vs expected. Exit 0 when
 * both hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pto/coll.h"
#include "pto/node.h"
#include "scene.h"

#define DEV0  118 /* device ids of this program: 118, 119 */
#define COUNT 4097

static int init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  return pto_coll_register(chip);
}

typedef struct ar_io {
  pto_tensor src[2], dst[2][2]; /* dst[algo][rank] */
} ar_io;

static void ar_node(pto_node_orch *no, void *arg) {
  ar_io *io = arg;
  static const int pair[2] = {0, 1};
  pto_window_buffer b[] = {{"scratch", pto_coll_scratch_bytes(2, COUNT * sizeof(float))}};
  pto_domain dom;
  if (pto_node_domain_create(no, pair, 2, b, 1, &dom)) return;
  pto_node_allreduce(no, dom, "scratch", io->dst[0], io->src, PTO_RED_SUM, PTO_COLL_MESH);
  pto_node_allreduce(no, dom, "scratch", io->dst[1], io->src, PTO_RED_SUM, PTO_COLL_RING);
}

static float val(int r, int i) { return (float)((r + 1) * (i % 101)) * 0.5f; }

static int allreduce(void) {
  static const int devs[2] = {DEV0, DEV0 + 1};
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  cfg.nchips = 2;
  cfg.device_ids = devs;
  cfg.chip.clusters = 1;
  cfg.chip.schedulers = 1;
  cfg.chip.task_slots = 64;
  cfg.chip.heap_bytes = 1u << 20;
  cfg.chip_init = init;
  cfg.host_bytes = 4u << 20;
  cfg.window_space = 64u << 20;
  cfg.control_timeout_ms = 10000;
  cfg.lease_wait_ms = 60000;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rc) {
    fprintf(stderr, "allreduce: create: %s: %s\n", pto_status_name(rc), err.details);
    return 1;
  }
  static ar_io io;
  int64_t count = COUNT;
  for (int r = 0; r < 2; r++) {
    pto_node_host_tensor(n, PTO_F32, 1, &count, &io.src[r]);
    for (int a = 0; a < 2; a++)
      pto_node_host_tensor(n, PTO_F32, 1, &count, &io.dst[a][r]);
    for (int i = 0; i < COUNT; i++)
      ((float *)io.src[r].buf)[i] = val(r, i);
  }
  rc = pto_node_run(n, ar_node, &io, &err);
  int bad = 0;
  if (rc) fprintf(stderr, "allreduce: run: %s: %s\n", pto_status_name(rc), err.details);
  for (int a = 0; !rc && a < 2; a++)
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < COUNT; i++) {
        float got = ((float *)io.dst[a][r].buf)[i], want = val(0, i) + val(1, i);
        if (got != want && bad++ < 5)
          fprintf(stderr, "allreduce %s rank %d [%d]: %g, expected %g\n", a ? "ring" : "mesh", r,
                  i, got, want);
      }
  if (!rc && !bad) printf("allreduce: 2 ranks x %d f32, mesh and ring: verified\n", COUNT);
  pto_node_destroy(n);
  return rc || bad ? 1 : 0;
}

static int ring_shuffle(void) {
  const pto_scene *s = pto_scene_find("ring_shuffle");
  pto_scene_opts o = {0};
  o.rounds = 1;
  pto_scene_report rep = {0};
  int rc = s ? s->run(&o, &rep) : PTO_EINVAL;
  if (rc || !rep.verified) {
    fprintf(stderr, "ring_shuffle: %s: %s\n", pto_status_name(rc), rep.message);
    return 1;
  }
  printf("ring_shuffle: verified\n");
  return 0;
}

int main(void) {
  int bad = ring_shuffle();
  bad += allreduce();
  fflush(stdout);
  return bad ? 1 : 0;
}
