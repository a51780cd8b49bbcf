/* trace.h — Chrome trace-event / Perfetto JSON recording.
 *
 * A trace has tracks (one per core thread, per scheduler thread, the
 * orchestrator; named before the run's threads start). Each track is
 * written by exactly one thread, so recording is a lock-free append to that
 * track's own buffer. The runtime holds a `pto_trace *` that is NULL when
 * tracing is off: every record site is `if (trace) trace_...`, so tracing
 * costs one predictable branch when off.
 *
 * Categories (docs/tracing.md): "block" kernel block slices (name = kernel
 * name, args task and block), "sched" scheduler phases ("dispatch",
 * "complete", "drain", "drain_attempt"), "orch" orchestrator spans ("submit"),
 * "comm" remote operations and waits. A MIX block occupies several cores:
 * one of them records the plain block slice, the others add args.part 1, 2
 * (trace_slice_arg with key "part"), so that each block is counted once. */
#ifndef PTO_TRACE_H
#define PTO_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pto_trace pto_trace;

/* pid: the process id shown in the trace (the rank for multi-chip runs).
 * The file shows it as pid + 1: viewers treat pid 0 as the kernel's idle
 * process. */
pto_trace *trace_create(int pid, const char *process_name);
/* Declares a track (a thread row); returns its index, or -1 when out of
 * memory (recording on -1 is a no-op). Before recording. */
int trace_track(pto_trace *t, const char *name);
/* A complete slice [t0_ns, t1_ns] on a track (monotonic-clock ns).
 * name must outlive the trace (kernel names, literals). task/block < 0: none. */
void trace_slice(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                 uint64_t t1_ns, int64_t task, int32_t block);
/* trace_slice plus the task's predecessor task ids, written as args.deps,
 * from which `pto trace` finds the critical path. Record them once per
 * task, on any slice carrying its id: the orchestrator's "submit" slice is
 * the natural place (dummy tasks included), or the first block slice.
 * deps is copied. */
void trace_slice_deps(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                      uint64_t t1_ns, int64_t task, int32_t block, const int64_t *deps, int ndeps);
/* trace_slice plus one named integer argument (e.g. key "peer" on a "comm"
 * slice); key must outlive the trace. */
void trace_slice_arg(pto_trace *t, int track, const char *name, const char *cat, uint64_t t0_ns,
                     uint64_t t1_ns, int64_t task, int32_t block, const char *key, int64_t val);
/* An instant event (e.g. a drain attempt, a signal); arg is args.arg. */
void trace_instant(pto_trace *t, int track, const char *name, const char *cat, uint64_t ts_ns,
                   int64_t arg);
/* Time zero of the file. By default the earliest event; ranks of one
 * multi-chip run pass the same origin (e.g. the launch time) so that their
 * files line up. An origin later than the earliest event is ignored. */
void trace_set_origin(pto_trace *t, uint64_t origin_ns);
/* Events dropped because a buffer could not grow (0 normally). */
uint64_t trace_dropped(const pto_trace *t);
/* Writes the JSON file (timestamps relative to the origin, in microseconds
 * with ns precision). Call once no thread records any more. Returns 0,
 * PTO_ESYSTEM when the file cannot be written, or PTO_ENOMEM when events
 * were dropped (the file is still written and says how many). */
int trace_write(const pto_trace *t, const char *path);
/* trace_write that on failure also puts into why[0..whylen) what was wrong:
 * the file's path and the cause (errno text, or the dropped events). */
int trace_write_ex(const pto_trace *t, const char *path, char *why, size_t whylen);
void trace_destroy(pto_trace *t);

/* Merges the per-rank files of a multi-chip run into one: their events are
 * concatenated, each file's timestamps shifted onto the earliest origin.
 * Returns 0, PTO_EINVAL (a file is not a trace), PTO_ESYSTEM or PTO_ENOMEM. */
int trace_merge(const char *const *paths, int n, const char *out);
/* trace_merge for the successive chip runs of a node run, where several
 * files show the same process (a rank that ran several chip tasks, one file
 * each, every one numbering its tasks from 0). A recurring process keeps the
 * metadata of its first file, and each later file's task ids (args.task and
 * args.deps) are moved past the highest id of its earlier files, so ids stay
 * unique per process and dependencies keep pointing at the right tasks. */
int trace_merge_runs(const char *const *paths, int n, const char *out);
/* trace_merge (repeat false) or trace_merge_runs (repeat true) that on
 * failure also puts into why[0..whylen) what was wrong: which input, or the
 * output file and the errno text. */
int trace_merge_ex(const char *const *paths, int n, const char *out, bool repeat, char *why,
                   size_t whylen);

#endif
