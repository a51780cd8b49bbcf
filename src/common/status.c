/* status.c — names and one-line hints for every pto_status code.
 * One table keeps name and hint together so a new code cannot get one
 * without the other. */
#include "pto/status.h"

#include <stddef.h>

typedef struct status_info {
  int code;
  const char *name;
  const char *hint;
} status_info;

#define S(code, hint)                                                                              \
  { code, #code, hint }

static const status_info status_table[] = {
    S(PTO_OK, "success"),
    S(PTO_EINVAL, "invalid argument: the details (pto_last_error(), and pto_error_info where "
                  "the call takes one) name which one and why"),
    S(PTO_ENOMEM, "host memory allocation failed: lower ring/heap sizes or free memory"),
    S(PTO_ESCOPE_DEADLOCK, "open scopes hold more OUTPUT buffers than the heap ring holds: "
                           "raise heap_bytes or split the work into smaller scopes"),
    S(PTO_EHEAP_DEADLOCK, "heap ring too small for the OUTPUT buffers of one task, or never "
                          "reclaimed: raise heap_bytes or close scopes sooner"),
    S(PTO_ETASK_RING_DEADLOCK, "task ring full and no task can retire: raise the task ring size "
                               "or close scopes sooner so finished tasks are reclaimed"),
    S(PTO_EDEP_OVERFLOW, "dependency entry pool exhausted: raise the dependency pool size or "
                         "give tasks fewer overlapping inputs"),
    S(PTO_ESYNC_WIDTH, "a sync_start task needs more cores than the chip has: lower the task's "
                       "block count or configure more cores"),
    S(PTO_ETENSOR_WAIT_TIMEOUT, "orchestrator get/set of tensor data waited too long for its "
                                "producer: check for a stuck kernel or raise the timeout"),
    S(PTO_EFATAL, "the orchestration called pto_orch_fatal(): see its message"),
    S(PTO_ESCOPE_OVERFLOW, "scopes nested deeper than PTO_MAX_SCOPE_DEPTH: close scopes "
                           "before opening new ones"),
    S(PTO_ETENSORMAP_OVERFLOW, "TensorMap entry pool exhausted: raise the TensorMap size or "
                               "reuse fewer distinct regions per scope"),
    S(PTO_ESCHED_TIMEOUT, "watchdog saw no progress before the deadline: a kernel hangs or a "
                          "dependency is never satisfied; raise the timeout if work is just slow"),
    S(PTO_EASYNC_INVALID, "async completion for a token that is not pending: complete each "
                          "token exactly once, after it was issued"),
    S(PTO_EASYNC_OVERFLOW, "more outstanding async completions than slots: raise the async "
                           "slot count or complete tokens sooner"),
    S(PTO_EKERNEL, "a kernel returned an error: see the kernel name and code in the details"),
    S(PTO_ESHUTDOWN, "a thread did not exit within the shutdown deadline: a kernel is still "
                     "running or blocked"),
    S(PTO_EBUSY, "the chip is already running: wait for the current run to finish"),
    S(PTO_EINTERNAL, "pto's own bookkeeping is inconsistent (a defect in pto, not in the "
                     "program): the details say what; please report them"),
    S(PTO_EGRAPH, "a captured graph cannot run as asked (a binding of another size or dtype, "
                  "bound buffers that overlap differently from capture, another chip, a host "
                  "access while capturing, a graph larger than the rings): the details say "
                  "which; capture again for the new case"),
    S(PTO_ECONTRACT, "a kernel touched memory its task did not declare (checking mode): declare "
                     "what it writes as OUTPUT/INOUT and what it reads as INPUT/INOUT; the "
                     "details name the task, argument and byte"),
    S(PTO_EREPLAY, "the run departed from the schedule record it replays, or the record is "
                   "unreadable: the details name the line; replay the same program, inputs "
                   "and chip configuration, or record again"),
    S(PTO_EDEVICE_BUSY, "device id already leased by another run: pick another device or wait "
                        "for the other run to end"),
    S(PTO_ECHIP_DIED, "a chip process exited or crashed: see its log for the cause"),
    S(PTO_ESTARTUP_TIMEOUT, "a chip process did not report ready in time: check that it starts "
                            "and raise the startup timeout on a loaded machine"),
    S(PTO_ECONTROL_TIMEOUT, "a chip did not answer a control message in time: it may be hung "
                            "or overloaded; raise the control timeout"),
    S(PTO_EWAIT_TIMEOUT, "an in-kernel signal wait timed out: the peer never signalled; check "
                         "the signal protocol or raise the wait timeout"),
    S(PTO_EBOUNDS, "remote region lies outside the peer's buffer: fix the offset/size or "
                   "enlarge the shared buffer"),
    S(PTO_EPEER, "peer index outside the domain: use a rank below the domain size"),
    S(PTO_EPOISONED, "node task skipped because one of its dependencies failed: fix the "
                     "first failure"),
    S(PTO_ESYSTEM, "an OS call failed: see the errno text in the details"),
    S(PTO_EMPI, "the MPI backend reported an error: see the MPI message in the details"),
    S(PTO_EALIGN, "unaligned or mistyped atomic operation: align the address to the "
                  "operand size and use a supported dtype"),
    S(PTO_ECANCELLED, "the node run was cancelled (pto_node_cancel, or Ctrl-C in Python): the "
                      "tasks not started were skipped"),
};

#undef S

static const status_info *status_find(int status) {
  for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
    if (status_table[i].code == status) return &status_table[i];
  return NULL;
}

const char *pto_status_name(int status) {
  const status_info *s = status_find(status);
  return s ? s->name : "PTO_E?";
}

const char *pto_strerror(int status) {
  const status_info *s = status_find(status);
  return s ? s->hint : "unknown status";
}
