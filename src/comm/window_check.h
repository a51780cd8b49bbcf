/* window_check.h — checking mode on a node (docs/contracts.md, "Node
 * runs"): a remote store, atomic add or signal must land inside the window
 * targets its node task declared, and a remote load read only bytes one of
 * its views names. */
#ifndef PTO_COMM_WINDOW_CHECK_H
#define PTO_COMM_WINDOW_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"

/* Checking mode is on for c's node task (its declared views are set): one
 * predictable branch on the hot paths, which call the checks below only
 * then (each also returns 0 when it is off). */
static inline bool window_checking(const pto_comm *c) { return c->check_args != NULL; }

/* Before an op writes `remote` (a view whose buf lies at window offset
 * woff, inside buffer b) on rank `peer` of d from `local`: 0 when checking
 * mode is off (c->check_args NULL) or when every byte it would write lies
 * in a window view that the node task passes as OUTPUT_EXISTING, INOUT,
 * NO_DEP or COMMUTE (any rank's copy names the same offsets only on that
 * rank: the view must be of rank `peer`'s window). Else PTO_ECONTRACT,
 * latched with details naming the kernel's task, the peer, the buffer, the
 * first byte outside and its old and new values; nothing is written. */
int window_check_store(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer,
                       const char *op, const pto_tensor *remote, const pto_tensor *local,
                       uint64_t woff, const comm_buffer_desc *b, bool add);
/* Before an op reads `remote` (at window offset woff, in buffer b) on rank
 * `peer` of d into `local`: 0 when checking mode is off or every byte lies
 * in a view of rank `peer`'s window that the node task passes (any access:
 * INPUT declares a read). Else PTO_ECONTRACT naming the kernel's task, the
 * peer, the buffer and the first byte outside; nothing is read. */
int window_check_load(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer, const char *op,
                      const pto_tensor *remote, const pto_tensor *local, uint64_t woff,
                      const comm_buffer_desc *b);

/* Before a signal op (`op`, e.g. "notify") writes the cell at window
 * offset off (8 bytes, in buffer b) on rank `peer` of d: 0 when checking
 * mode is off or the cell lies in a window target of rank `peer` (as for a
 * store: a view the node task passes as OUTPUT_EXISTING, INOUT, NO_DEP or
 * COMMUTE). Else PTO_ECONTRACT naming the kernel's task, the op, the peer
 * and the cell; nothing is written. */
int window_check_signal(pto_comm *c, const pto_kctx *ctx, const comm_dom *d, int peer,
                        const char *op, uint64_t off, const comm_buffer_desc *b, pto_signal_op sop,
                        int32_t v);

#endif
