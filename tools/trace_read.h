/* trace_read.h — reading trace files back: the schema check that tests run
 * on pto's own traces, and the summary that `pto trace` prints (which also
 * accepts other tools' Chrome traces: B/E pairs, traces without tracks'
 * names, a bare event array).
 *
 * The summary's strings point into the parsed document: free the summary
 * before the document. */
#ifndef PTO_TRACE_READ_H
#define PTO_TRACE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_json.h"

/* Strict check of the format trace_write() emits: a traceEvents array of
 * objects that each have ph, pid, tid and ts; X events have a name and
 * dur >= 0; every (pid, tid) that holds events is named by a thread_name
 * metadata event and every pid by a process_name; "block" slices carry
 * integer args task and block, and "drain" slices (cat sched) task. Returns 0 or PTO_EINVAL (err
 * says which event and why). */
int trace_validate(const trace_json *root, char *err, size_t errlen);

/* The flow events (arrows; docs/tracing.md): "dep" flows from a producer
 * task to a consumer, "signal" flows from a notify to the wait it released
 * on another rank. */
typedef struct trace_flow_counts {
  uint64_t deps;      /* dep flows (one start and one finish each) */
  uint64_t edges;     /* distinct args.deps edges whose producer is in the file */
  uint64_t signals;   /* signal flow ids with a start and a finish */
  uint64_t unmatched; /* signal flow ends without their other end */
} trace_flow_counts;
/* Checks the flows: a dep flow has exactly one start, inside a slice of
 * its producer task on that track, and one finish inside a slice of its
 * consumer; the dep flows draw exactly the edges of args.deps whose
 * producer the file shows (each once); a signal flow's start lies in a
 * "notify" slice, its finish in a "wait" slice. trace_validate runs it.
 * Returns 0 (counts in *out when out is not NULL) or PTO_EINVAL. */
int trace_check_flows(const trace_json *root, trace_flow_counts *out, char *err, size_t errlen);

typedef struct trace_track_stat {
  int64_t pid, tid;
  const char *name; /* thread_name, or NULL */
  int64_t sort;     /* thread_sort_index, else tid */
  uint64_t slices;  /* complete slices (X, or B/E pairs) */
  uint64_t blocks;  /* of which "block" slices (MIX parts included) */
  double busy_us;   /* union of the slices' intervals */
  double span_us;   /* the span of the track's process */
} trace_track_stat;

typedef struct trace_gap {
  size_t track;    /* index into trace_summary.tracks */
  double start_us; /* from the trace's first event */
  double dur_us;
} trace_gap;

#define TRACE_TOP_GAPS 5

typedef struct trace_summary {
  double t0_us, t1_us; /* first slice start, last slice end */
  double span_us;
  uint64_t events; /* events in the file, metadata included */
  uint64_t slices;
  uint64_t blocks;     /* blocks: "block" slices without args.part, or part 0 */
  uint64_t dup_blocks; /* "block" slices repeating an earlier (pid, task, block, part) */
  uint64_t tasks;      /* distinct (pid, task) among "block" slices */
  size_t ntracks;      /* tracks holding slices, by pid then sort index */
  trace_track_stat *tracks;
  int ngaps; /* longest idle gaps, longest first */
  trace_gap gaps[TRACE_TOP_GAPS];
  bool gaps_on_cores; /* gaps were taken over tracks with "block" slices only */
  /* Critical path: the longest chain through args.deps, each task weighing
   * its span (first block start to last block end). */
  uint64_t edges;        /* dependency edges read */
  uint64_t missing_deps; /* edges to tasks that are not in the trace */
  double critical_us;
  uint64_t critical_tasks;             /* tasks on that chain */
  int64_t critical_pid, critical_last; /* where it ends (file pid, task id) */
} trace_summary;

/* Summarises a parsed trace. Returns 0, PTO_EINVAL (no event array) or
 * PTO_ENOMEM. */
int trace_summarize(const trace_json *root, trace_summary *s, char *err, size_t errlen);
void trace_summary_free(trace_summary *s);

/* Merges trace files recorded separately (e.g. one per rank, from other
 * runs or other tools) into one: their events are
 * concatenated, each file's timestamps shifted onto the earliest origin.
 * Returns 0, PTO_EINVAL (a file is not a trace), PTO_ESYSTEM or PTO_ENOMEM. */
int trace_merge(const char *const *paths, int n, const char *out);
/* trace_merge that on failure also puts into why[0..whylen) what was
 * wrong: which input, or the output file and the errno text. (The chip runs
 * of a node run need no merge: their files concatenate, trace_concat.) */
int trace_merge_ex(const char *const *paths, int n, const char *out, char *why, size_t whylen);

#endif
