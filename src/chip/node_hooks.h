/* node_hooks.h — private: what the node runtime tells a chip about its
 * place among the node's ranks (its trace's part is trace_hooks.h). */
#ifndef PTO_CHIP_NODE_HOOKS_H
#define PTO_CHIP_NODE_HOOKS_H

#include "pto/chip.h"

/* Its core threads are spread from the first-th CPU on (spread_cores), so
 * that the ranks of a node spread their cores over the CPUs instead of
 * stacking each rank's first core on the same one [chip.c]. */
void chip_set_cpu_first(pto_chip *chip, int first);

#endif
