/* node_hooks.h — private: what the node runtime tells a chip about its
 * place among the node's ranks (its trace's part is trace_hooks.h). */
#ifndef PTO_CHIP_NODE_HOOKS_H
#define PTO_CHIP_NODE_HOOKS_H

#include <stdint.h>

#include "pto/chip.h"

/* Its core threads are spread from the first-th CPU on (spread_cores), so
 * that the ranks of a node spread their cores over the CPUs instead of
 * stacking each rank's first core on the same one [chip.c]. */
void chip_set_cpu_first(pto_chip *chip, int first);

/* Between runs: the controlled schedule of the chip's next runs (seed 0
 * and no files: none). A node under a controlled schedule gives each of
 * its chip tasks its own seed and files (node_schedule.h) [chip.c]. */
int chip_set_schedule(pto_chip *chip, uint64_t seed, const char *record, const char *replay);

#endif
