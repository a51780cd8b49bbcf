/* lease.h — exclusive leases of device ids between runs on one machine.
 * A lease is an exclusive flock on a per-device lock object; the kernel
 * drops it when the holder dies, so a crashed run never leaves a lease
 * behind. A run asking for a leased device waits a bounded time (saying
 * so on stderr) or fails with PTO_EDEVICE_BUSY; it never shares it. Device
 * ids are machine-wide: every Unix user leases from the same objects. */
#ifndef PTO_NODE_LEASE_H
#define PTO_NODE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Leases ids[0..n) (in ascending order, so two runs never deadlock);
 * fds[i] receives the lock of ids[i]. On failure nothing stays leased. */
int lease_acquire(const int *ids, int n, int64_t wait_ms, bool quiet, int *fds, char *why,
                  size_t why_len);
void lease_release(int *fds, int n);
/* In a forked child: closes its copies of the lock descriptors without
 * unlocking. A flock belongs to the open file description the child shares
 * with the parent, so LOCK_UN here would drop the parent's lease. */
void lease_close_inherited(int *fds, int n);
/* An exclusive flock on fd, waiting up to wait_ms (0: one try). Returns 0,
 * EWOULDBLOCK when it is still held by another at the deadline, or the
 * errno of a real failure. */
int lease_flock(int fd, int64_t wait_ms);

#endif
