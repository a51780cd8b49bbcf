/* pto/status.h — status codes shared by every layer, with names and hints.
 *
 * Every pto call returns 0 (PTO_OK) or a negative PTO_E* code.
 * pto_status_name() gives the code's name, pto_strerror() a one-line hint. */
#ifndef PTO_STATUS_H
#define PTO_STATUS_H

#include "pto/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pto_status {
  PTO_OK = 0,
  /* chip (L2) */
  PTO_EINVAL = -1,               /* invalid arguments (details name which) */
  PTO_ENOMEM = -2,               /* host allocation failed */
  PTO_ESCOPE_DEADLOCK = -3,      /* open scopes hold more OUTPUT buffers than the heap */
  PTO_EHEAP_DEADLOCK = -4,       /* heap ring cannot satisfy an OUTPUT allocation */
  PTO_ETASK_RING_DEADLOCK = -5,  /* task ring full and no reclamation progress */
  PTO_EDEP_OVERFLOW = -6,        /* dependency entry pool exhausted */
  PTO_ESYNC_WIDTH = -7,          /* sync_start task wider than the chip can hold */
  PTO_ETENSOR_WAIT_TIMEOUT = -8, /* orchestrator read/write of tensor data timed out */
  PTO_EFATAL = -9,               /* orchestration called pto_orch_fatal() */
  PTO_ESCOPE_OVERFLOW = -10,     /* scope nesting deeper than PTO_MAX_SCOPE_DEPTH */
  PTO_ETENSORMAP_OVERFLOW = -11, /* TensorMap entry pool exhausted */
  PTO_ESCHED_TIMEOUT = -12,      /* watchdog: no progress within the deadline */
  PTO_EASYNC_INVALID = -13,      /* async completion of a token that is not pending */
  PTO_EASYNC_OVERFLOW = -14,     /* more outstanding async completions than slots */
  PTO_EKERNEL = -15,             /* a kernel returned an error */
  PTO_ESHUTDOWN = -16,           /* a thread did not exit within the shutdown deadline */
  PTO_EBUSY = -17,               /* the chip is already running */
  PTO_EINTERNAL = -18,           /* pto's own state is inconsistent: a defect in pto */
  PTO_EGRAPH = -19,              /* a captured graph's replay was refused, or graph misuse */
  PTO_ECONTRACT = -20, /* checking mode: a kernel touched memory its task did not declare */
  PTO_EREPLAY = -21,   /* schedule replay diverged, or the record is unreadable */
  /* comm and node (L3+) */
  PTO_EDEVICE_BUSY = -30,     /* device id leased by another run */
  PTO_ECHIP_DIED = -31,       /* a chip process exited or crashed */
  PTO_ESTARTUP_TIMEOUT = -32, /* a chip process did not report ready in time */
  PTO_ECONTROL_TIMEOUT = -33, /* a chip did not answer a control message in time */
  PTO_EWAIT_TIMEOUT = -34,    /* an in-kernel signal wait timed out */
  PTO_EBOUNDS = -35,          /* a remote region lies outside the peer's buffer */
  PTO_EPEER = -36,            /* peer index outside the domain */
  PTO_EPOISONED = -37,        /* a node task was skipped because a dependency failed */
  PTO_ESYSTEM = -38,          /* an OS call failed (details carry errno text) */
  PTO_EMPI = -39,             /* the MPI backend reported an error */
  PTO_EALIGN = -40,           /* unaligned or mistyped atomic operation */
  PTO_ECANCELLED = -41,       /* the node run was cancelled (pto_node_cancel) */
} pto_status;

/* Name of a code, e.g. "PTO_EHEAP_DEADLOCK"; "PTO_E?" for unknown codes. */
PTO_API const char *pto_status_name(int status);
/* One-line hint saying what the code means and what usually fixes it. */
PTO_API const char *pto_strerror(int status);
/* Why this thread's most recent refused or failed call failed: "kernel_register:
 * a kernel named 'add' is already registered (id 0)". Every call that
 * fails says why here, those that take a pto_error_info too (its details,
 * also when the caller passed NULL: pto_chip_create, pto_chip_run, graph
 * capture and launch, pto_node_create, pto_node_run). "" until a call
 * fails; a later success leaves it as it is, so read it right after the
 * failing call. */
PTO_API const char *pto_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
