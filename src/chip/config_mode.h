/* config_mode.h — private: the part of pto_chip_create's checks that
 * concerns a chip's run mode, checking mode and a controlled schedule
 * (docs/contracts.md, docs/schedules.md). pto_chip_config_init takes
 * those settings from the environment for every chip of a process, so
 * the command line checks them once, before it runs anything, and a
 * setting no chip accepts is a usage error, not a run that fails. */
#ifndef PTO_CHIP_CONFIG_MODE_H
#define PTO_CHIP_CONFIG_MODE_H

#include "pto/chip.h"

/* What is wrong with cfg's check, check_seed, schedule_seed, record_path
 * and replay_path (naming them and their variables), or NULL; the text
 * is the calling thread's until its next call [chip.c]. */
const char *chip_config_mode_problem(const pto_chip_config *cfg);

#endif
