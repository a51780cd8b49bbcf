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
#include <stdio.h>

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

/* Final task ids: base is added to every task id the file shows (args.task,
 * args.deps, the flows' ends), so that the successive chip runs of one
 * node rank, each numbering its tasks from 0, write ids that are unique in
 * the rank's process and their files merge by concatenation. Default 0. */
void trace_set_task_base(pto_trace *t, int64_t base);
/* base + 1 + the highest task id recorded (base when none): the base of
 * the next run of the same process. */
int64_t trace_task_end(const pto_trace *t);
/* One end of a flow arrow between processes (a notify and the wait it
 * released, on two ranks): ph 's' (start, on the notify) or 'f' (finish, on
 * the wait), at ts_ns on a track, inside the slice the arrow binds to.
 * Both ends compute the same id (trace_flow_id) from what each knows. */
void trace_flow(pto_trace *t, int track, char ph, uint64_t ts_ns, uint64_t id);
/* A flow id from six numbers (FNV-1a over them, cut to 52 bits so that a
 * JSON reader with doubles keeps it exact; never 0). */
uint64_t trace_flow_id(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f);

/* Writes s as a JSON string literal (also the tools' JSON writer). */
void trace_json_write_str(FILE *f, const char *s);

/* The fixed text before a trace file's events and after them, up to its
 * origin: what trace_write writes and trace_concat looks for. */
#define TRACE_FILE_HEAD "{\"traceEvents\":[\n"
#define TRACE_FILE_TAIL "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"pto_origin_ns\":\""

/* The trace files of one multi-chip run, written by trace_write with the
 * same origin and final task ids, concatenated into one: their event
 * arrays are joined, their dropped events summed. Returns 0, PTO_EINVAL (a
 * file is not one of trace_write's, or its origin differs; why says which),
 * PTO_ESYSTEM (why: the file and the errno text) or PTO_ENOMEM. */
int trace_concat(const char *const *paths, int n, const char *out, char *why, size_t whylen);
/* Whether path holds a whole file as trace_write writes them (a chip
 * killed while writing leaves half of one). */
bool trace_file_complete(const char *path);

#endif
