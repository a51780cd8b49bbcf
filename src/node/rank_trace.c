/* rank_trace.c — the chip ranks' trace files of a node run: where each rank
 * writes the trace of each chip task it runs (the child names its file, the
 * parent probes and joins them), and their concatenation into the node's
 * trace at the end of a run. Ranks write final task ids and the run's time
 * origin, so the files need no rewriting. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/trace.h"
#include "node/node_internal.h"

bool node_rank_trace_path(const pto_node *n, int rank, int run, char *buf, size_t len) {
  int k = snprintf(buf, len, "%s.%s.rank%d.%d", n->trace_path, n->prefix + 1, rank, run);
  return k > 0 && (size_t)k < len;
}

/* End of a run: concatenates the files of the chip tasks the ranks ran (one
 * file per chip task, several per rank, whose task ids continue one another:
 * chip_set_trace_task_base) into trace_path and removes them, whatever
 * happened. A task that
 * failed before its chip ran wrote none; after a fatal error a killed chip
 * may have left half a file: it is left out. Returns 0, or the merge's
 * error. */
int node_trace_finish(pto_node *n, char *why, size_t whylen) {
  if (!n->trace_path) return 0;
  int nfiles = 0, k = 0;
  for (int r = 0; r < n->cfg.nchips; r++)
    nfiles += n->trace_runs[r];
  if (!nfiles) return 0;
  size_t stride = strlen(n->trace_path) + sizeof n->prefix + 32; /* ".rank<r>.<run>" fits */
  size_t bytes;
  bool big = __builtin_mul_overflow((size_t)nfiles, stride, &bytes);
  char *path = big ? NULL : malloc(bytes);
  const char **in = malloc((size_t)nfiles * sizeof *in);
  int rc = path && in ? 0 : PTO_ENOMEM;
  for (int r = 0, i = 0; r < n->cfg.nchips; r++)
    for (int run = 0; run < n->trace_runs[r]; run++, i++) {
      char *p = path ? path + (size_t)i * stride : NULL;
      if (!p || !node_rank_trace_path(n, r, run, p, stride)) continue;
      if (in && access(p, F_OK) == 0 && (!n->fatal || trace_file_complete(p))) in[k++] = p;
    }
  if (rc == 0 && k) rc = trace_concat(in, k, n->trace_path, why, whylen);
  free(path);
  free(in);
  char p[PATH_MAX]; /* also when out of memory above */
  for (int r = 0; r < n->cfg.nchips; r++)
    for (int run = 0; run < n->trace_runs[r]; run++)
      if (node_rank_trace_path(n, r, run, p, sizeof p)) unlink(p);
  return rc;
}
