/* test_node_no_mpi.c — a build without MPI (PTO_MPI=OFF) asked to run a
 * node under mpirun (ctest sets OMPI_COMM_WORLD_SIZE, as mpirun would):
 * pto_node_create fails with PTO_EMPI saying pto was built without MPI and
 * what to do, and starts nothing. */
#include <stdio.h>
#include <string.h>

#include "pto/node.h"

int main(void) {
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  cfg.nchips = 2;
  cfg.chip.clusters = 1;
  cfg.host_bytes = 1u << 20;
  cfg.window_space = 16u << 20;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  const char *want = "but pto was built without MPI: configure pto with -DPTO_MPI=ON";
  printf("pto_node_create: %s: %s\n", pto_status_name(rc), err.details);
  if (rc != PTO_EMPI || !strstr(err.details, want) || n) {
    printf("FAILED: expected PTO_EMPI with \"...%s...\" and no node, got %s\n", want,
           pto_status_name(rc));
    pto_node_destroy(n);
    return 1;
  }
  return 0;
}
