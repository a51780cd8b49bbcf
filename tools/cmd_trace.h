/* cmd_trace.h — the `pto trace` sub-command. */
#ifndef PTO_CMD_TRACE_H
#define PTO_CMD_TRACE_H

/* argv[0] is "trace". Returns the process exit status. */
int pto_cmd_trace(int argc, char **argv);

#endif
