/* small_node.h — the node the MPI node test programs create: nchips chips
 * of one cluster and one scheduler with small rings, 4 MiB of host memory,
 * 64 MiB of window space, a rank named after 10 s without an answer, and
 * leases waited for (another run of the suite may hold the devices). Each
 * program changes what it needs after. */
#ifndef PTO_TESTS_MPI_SMALL_NODE_H
#define PTO_TESTS_MPI_SMALL_NODE_H

#include "pto/node.h"

static inline pto_node_config small_node(int nchips, const int *devs, pto_chip_init_fn init) {
  pto_node_config cfg;
  pto_node_config_init(&cfg);
  cfg.nchips = nchips;
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
  return cfg;
}

#endif
