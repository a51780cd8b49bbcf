/* run_guard.h — the liveness of a node run's shared objects, and their
 * removal when the run ends in any way it can see.
 *
 * Every shared object of a run is named "/<run>.<rest>", where <run> is the
 * run-unique prefix "pto.<id>", <id> = "<pid>.<seq>.<nonce>"
 * (pto_node_shm_prefix). While the run lives, its parent holds an exclusive
 * flock on "/pto-live.<id>" (the guard; not under the run's prefix, which
 * names its windows only), taken before any other object of the run exists
 * and dropped by the kernel when the last process of the run is gone. A run's objects are
 * stale when its guard is unlocked (or gone): unlike `kill(pid, 0)` this
 * holds across PID namespaces sharing /dev/shm (containers), where a live
 * run's pid may look dead or belong to someone else.
 *
 * The guard also removes the run's objects when the parent is ended by
 * SIGINT, SIGTERM or SIGHUP whose disposition was the default: the handler
 * (async-signal-safe) kills and reaps the run's children, unlinks every
 * object of the run, restores the default action and re-raises, so the
 * process still ends with the signal. A signal the application handles (or
 * ignores) is left to it; pto_node_destroy cleans up then. */
#ifndef PTO_NODE_RUN_GUARD_H
#define PTO_NODE_RUN_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RUN_GUARD_MAX      32          /* nodes alive at once in one process */
#define RUN_GUARD_CHILDREN 80          /* children per run the signal cleanup kills */
#define RUN_GUARD_TAG      "pto-live." /* the guard of run "pto.<id>" is "/pto-live.<id>" */

/* Takes the guard of run `prefix` ("/pto.<pid>.<seq>.<nonce>") for the
 * calling process and installs the signal cleanup. PTO_ESYSTEM with `why`
 * when the guard object cannot be made or locked. */
int run_guard_begin(const char *prefix, char *why, size_t why_len);
/* The run forked child `pid`: the signal cleanup kills it before unlinking. */
void run_guard_child(const char *prefix, pid_t pid);
/* The run ended: unlinks every object of the run, the guard last, and
 * drops the guard (and the signal cleanup with the last guard). */
void run_guard_end(const char *prefix);
/* Unlinks the objects of runs whose guard is unlocked, or that have no
 * guard and whose pid is dead (an older pto's run, or leftovers); names of
 * another shape are never touched. Returns the number unlinked. */
int run_guard_sweep(void);
/* Unlinks every object of run `prefix` (leading '/' optional; the
 * prefix of a part of the run, such as a node domain's "<run>.d3", names
 * the same run), the guard last. Async-signal-safe. Returns the number
 * unlinked. */
int run_guard_unlink_all(const char *prefix);

#endif
