/* cmd_trace.c — `pto trace FILE.json`: summary of a trace (per-track
 * utilisation, longest idle gaps, critical path), an optional strict schema
 * check, and merging the per-rank files of a multi-chip run. */
#include "cmd_trace.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "pto/status.h"
#include "trace_json.h"
#include "trace_read.h"

void pto_cmd_trace_usage(FILE *f) {
  fputs("usage: pto trace [--check] FILE.json\n"
        "       pto trace --merge OUT.json RANK0.json RANK1.json ...\n"
        "Prints per-track utilisation, the longest idle gaps and the critical path of a\n"
        "trace written by `pto run NAME --trace FILE.json`. --check also fails (exit 1)\n"
        "unless the file passes pto's trace schema with every block slice unique.\n",
        f);
}

static void track_label(char *buf, size_t n, const trace_summary *s, const trace_track_stat *t) {
  bool multi = s->ntracks && s->tracks[0].pid != s->tracks[s->ntracks - 1].pid;
  char pid[32] = "";
  if (multi) snprintf(pid, sizeof pid, "pid %" PRId64 " ", t->pid);
  if (t->name)
    snprintf(buf, n, "%s%s", pid, t->name);
  else
    snprintf(buf, n, "%stid %" PRId64, pid, t->tid);
}

static void print_summary(const char *path, const trace_summary *s) {
  char label[96];
  printf("trace %s\n", path);
  printf("  span %.3f us; %zu tracks, %" PRIu64 " slices, %" PRIu64 " tasks, %" PRIu64 " blocks\n",
         s->span_us, s->ntracks, s->slices, s->tasks, s->blocks);
  if (s->dup_blocks)
    printf("  warning: %" PRIu64 " block slices repeat an earlier (task, block)\n", s->dup_blocks);
  printf("  utilisation (busy time / span of the track's process):\n");
  for (size_t i = 0; i < s->ntracks; i++) {
    const trace_track_stat *t = &s->tracks[i];
    track_label(label, sizeof label, s, t);
    double u = t->span_us > 0 ? 100.0 * t->busy_us / t->span_us : 0.0;
    printf("    %-28s %6.1f%%  busy %12.3f us  %8" PRIu64 " slices\n", label, u, t->busy_us,
           t->slices);
  }
  printf("  longest idle gaps%s:\n", s->gaps_on_cores ? " on cores" : "");
  if (!s->ngaps) printf("    none\n");
  for (int g = 0; g < s->ngaps; g++) {
    track_label(label, sizeof label, s, &s->tracks[s->gaps[g].track]);
    printf("    %d. %-28s %12.3f us idle from +%.3f us\n", g + 1, label, s->gaps[g].dur_us,
           s->gaps[g].start_us);
  }
  if (!s->critical_tasks) {
    printf("  critical path: no tasks in the trace\n");
  } else {
    printf("  critical path %.3f us (%.1f%% of the span) through %" PRIu64
           " tasks, ending at task %" PRId64 "\n",
           s->critical_us, s->span_us > 0 ? 100.0 * s->critical_us / s->span_us : 0.0,
           s->critical_tasks, s->critical_last);
    if (!s->edges)
      printf("    (the trace records no dependencies: this is the longest single task)\n");
    else if (s->missing_deps)
      printf("    (%" PRIu64 " of %" PRIu64 " dependency edges point to tasks not in the "
             "trace)\n",
             s->missing_deps, s->edges);
  }
}

int pto_cmd_trace(const cli_args *a) {
  if (a->cmd == CLI_TRACE_HELP) {
    pto_cmd_trace_usage(stdout);
    return 0;
  }
  if (a->cmd == CLI_TRACE_MERGE) {
    char why[512];
    int rc = trace_merge_ex((const char *const *)a->in, a->nin, a->out, why, sizeof why);
    if (rc) {
      fprintf(stderr, "pto trace: merging into %s failed: %s\n", a->out,
              why[0] ? why : pto_strerror(rc));
      return 1;
    }
    printf("merged %d files into %s\n", a->nin, a->out);
    return 0;
  }
  bool check = a->check;
  const char *path = a->path;
  char err[256];
  trace_json_doc *doc;
  int rc = trace_json_load(path, &doc, err, sizeof err);
  if (rc) {
    fprintf(stderr, "pto trace: %s: %s\n", path, err[0] ? err : pto_strerror(rc));
    return 1;
  }
  const trace_json *root = trace_json_root(doc);
  trace_summary s;
  rc = trace_summarize(root, &s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "pto trace: %s: %s\n", path, err);
    trace_json_free(doc);
    return 1;
  }
  print_summary(path, &s);
  int status = 0;
  double dropped = 0;
  if (check) {
    rc = trace_validate(root, err, sizeof err);
    if (rc) {
      fprintf(stderr, "pto trace: %s: schema: FAILED: %s\n", path, err);
      status = 1;
    } else if (trace_json_num(trace_json_get(root, "otherData"), "dropped_events", &dropped) &&
               dropped > 0) {
      fprintf(stderr,
              "pto trace: %s: schema: FAILED: the run dropped %.0f events (out of memory)\n", path,
              dropped);
      status = 1;
    } else if (s.dup_blocks) {
      fprintf(stderr, "pto trace: %s: schema: FAILED: duplicate block slices\n", path);
      status = 1;
    } else {
      trace_flow_counts fc;
      trace_check_flows(root, &fc, NULL, 0); /* trace_validate passed it */
      printf("  arrows: %llu dependency flows (%llu edges), %llu notify-to-wait flows",
             (unsigned long long)fc.deps, (unsigned long long)fc.edges,
             (unsigned long long)fc.signals);
      if (fc.unmatched)
        printf(" (%llu wait ends without a start: released by adds)",
               (unsigned long long)fc.unmatched);
      printf("\n  schema: ok\n");
    }
  }
  trace_summary_free(&s);
  trace_json_free(doc);
  return status;
}
