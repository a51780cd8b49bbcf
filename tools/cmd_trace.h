/* cmd_trace.h — the `pto trace` sub-command. */
#ifndef PTO_CMD_TRACE_H
#define PTO_CMD_TRACE_H

#include <stdio.h>

#include "cli_args.h"

/* Runs a parsed `pto trace` (CLI_TRACE, CLI_TRACE_MERGE, CLI_TRACE_HELP).
 * Returns the process exit status. */
int pto_cmd_trace(const cli_args *a);
/* The usage text of `pto trace`. */
void pto_cmd_trace_usage(FILE *f);

#endif
