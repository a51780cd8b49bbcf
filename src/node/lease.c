/* lease.c — device leases as flock()s on "/pto-lease.dev<N>" objects. The
 * objects are never unlinked: unlinking while another run holds or opens
 * the lock would let two runs lock two different files for one device. */
#include "node/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/wait.h"
#include "pto/status.h"

static int holder_pid(int fd) {
  char buf[24] = {0};
  if (pread(fd, buf, sizeof buf - 1, 0) <= 0) return 0;
  return atoi(buf);
}

typedef struct lock_try {
  int fd;
  int err;
} lock_try;

static bool try_lock(void *arg) {
  lock_try *t = arg;
  if (flock(t->fd, LOCK_EX | LOCK_NB) == 0) {
    t->err = 0;
    return true;
  }
  t->err = errno;
  return t->err != EWOULDBLOCK && t->err != EINTR; /* a real error ends the wait */
}

static int lease_one(int id, int64_t wait_ms, bool quiet, int *out, char *why, size_t why_len) {
  char name[48];
  snprintf(name, sizeof name, "/pto-lease.dev%d", id);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(why, why_len, "lease of device %d: %s", id, strerror(errno));
    return PTO_ESYSTEM;
  }
  lock_try t = {fd, 0};
  if (!try_lock(&t) && wait_ms > 0) {
    if (!quiet)
      fprintf(stderr, "pto: device %d is leased by pid %d; waiting up to %lld ms\n", id,
              holder_pid(fd), (long long)wait_ms);
    pto_wait(NULL, try_lock, &t, pto_deadline_ms(wait_ms));
  }
  if (t.err) {
    bool busy = t.err == EWOULDBLOCK || t.err == EINTR;
    if (busy)
      snprintf(why, why_len, "device busy: device %d is leased by pid %d", id, holder_pid(fd));
    else
      snprintf(why, why_len, "lease of device %d: %s", id, strerror(t.err));
    close(fd);
    return busy ? PTO_EDEVICE_BUSY : PTO_ESYSTEM;
  }
  char pid[24];
  int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    /* the pid is only for messages; the lock is what counts */
  }
  *out = fd;
  return 0;
}

int lease_acquire(const int *ids, int n, int64_t wait_ms, bool quiet, int *fds, char *why,
                  size_t why_len) {
  int order[64];
  if (n < 0 || n > 64) return PTO_EINVAL;
  for (int i = 0; i < n; i++) {
    order[i] = i;
    fds[i] = -1;
  }
  for (int i = 1; i < n; i++) /* insertion sort by device id */
    for (int j = i; j > 0 && ids[order[j]] < ids[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int i = 0; i < n; i++) {
    if (i > 0 && ids[order[i]] == ids[order[i - 1]]) {
      snprintf(why, why_len, "device id %d given twice", ids[order[i]]);
      lease_release(fds, n);
      return PTO_EINVAL;
    }
    int rc = lease_one(ids[order[i]], wait_ms, quiet, &fds[order[i]], why, why_len);
    if (rc) {
      lease_release(fds, n);
      return rc;
    }
  }
  return 0;
}

void lease_release(int *fds, int n) {
  for (int i = 0; i < n; i++) {
    if (fds[i] < 0) continue;
    flock(fds[i], LOCK_UN);
    close(fds[i]);
    fds[i] = -1;
  }
}

void lease_close_inherited(int *fds, int n) {
  for (int i = 0; i < n; i++) {
    if (fds[i] < 0) continue;
    close(fds[i]); /* the parent's descriptor keeps the lock */
    fds[i] = -1;
  }
}
