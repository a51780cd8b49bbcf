/* lease.c — device leases as flock()s on "/pto-lease.dev<N>" objects.
 *
 * Device ids are machine-wide, as the devices of a real machine: every
 * Unix user of the machine leases from the same objects, which are made
 * mode 0666 (whatever the umask), so a second user gets a free device or
 * "device busy: device N is leased by pid P (uid U)", never "Permission
 * denied". An object is opened without O_CREAT when it exists (O_CREAT on
 * another user's file in sticky /dev/shm fails under
 * fs.protected_regular), and read-only when it is not writable to us (a
 * flock needs no write access). An object an older pto left at mode 0600
 * is made 0666 by its owner's (or root's) next lease; anyone else gets an
 * error naming its owner, its mode and the remedy.
 *
 * The objects are never unlinked: unlinking while another run holds or
 * opens the lock would let two runs lock two different files for one
 * device. */
#include "node/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/wait.h"
#include "pto/status.h"

#define LEASE_MODE 0666

/* "pid P (uid U)" of the holder, as it wrote them after locking. */
static const char *holder(int fd, char *buf, size_t len) {
  char text[48] = {0};
  int pid = 0, uid = -1;
  if (pread(fd, text, sizeof text - 1, 0) > 0) sscanf(text, "%d %d", &pid, &uid);
  if (uid >= 0)
    snprintf(buf, len, "pid %d (uid %d)", pid, uid);
  else
    snprintf(buf, len, "pid %d", pid);
  return buf;
}

/* Opens (or makes) the lease object of device id; PTO_ESYSTEM with `why`
 * when it cannot. */
static int open_lease(int id, const char *name, int *out, char *why, size_t why_len) {
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0 && errno == ENOENT) {
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, LEASE_MODE);
    if (fd < 0 && errno == EEXIST) fd = shm_open(name, O_RDWR | O_CLOEXEC, 0); /* raced */
  }
  if (fd < 0 && errno == EACCES) fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    if (err == EACCES && stat(path, &st) == 0)
      snprintf(why, why_len,
               "lease of device %d: cannot open %s, owned by uid %u with mode %04o (left by an "
               "older pto?): %s; its owner or root can run `chmod 666 %s` (or remove it while "
               "no run uses device %d)",
               id, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), strerror(err), path,
               id);
    else
      snprintf(why, why_len, "lease of device %d: %s: %s", id, name, strerror(err));
    return PTO_ESYSTEM;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && (st.st_mode & 0777) != LEASE_MODE &&
      (st.st_uid == geteuid() || geteuid() == 0))
    (void)!fchmod(fd, LEASE_MODE); /* made under a umask, or by an older pto */
  *out = fd;
  return 0;
}

/* Is the flock on fd's object (busy for fd) held by this process, through
 * another of its descriptors (a node not destroyed)? Then waiting for it
 * would never free it: a flock belongs to an open file description, so
 * this process's second one waits for its first like any other. Read from
 * /proc/locks, which names each flock's process (a forked child's lock
 * is its parent's) and object; false when it cannot be read. */
static bool held_here(int fd) {
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 ? fopen("/proc/locks", "re") : NULL;
  if (!f) return false;
  char line[256], type[16];
  bool mine = false;
  int pid;
  unsigned maj, min;
  unsigned long ino;
  while (!mine && fgets(line, sizeof line, f))
    mine = sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", type, &pid, &maj, &min, &ino) == 5 &&
           strcmp(type, "FLOCK") == 0 && pid == (int)getpid() && ino == (unsigned long)st.st_ino &&
           maj == major(st.st_dev) && min == minor(st.st_dev);
  fclose(f);
  return mine;
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

int lease_flock(int fd, int64_t wait_ms) {
  lock_try t = {fd, 0};
  if (!try_lock(&t) && wait_ms > 0) pto_wait(NULL, try_lock, &t, pto_deadline_ms(wait_ms));
  return t.err == EINTR ? EWOULDBLOCK : t.err;
}

static int lease_one(int id, int64_t wait_ms, bool quiet, int *out, char *why, size_t why_len) {
  char name[48], who[48];
  snprintf(name, sizeof name, "/pto-lease.dev%d", id);
  int fd;
  int rc = open_lease(id, name, &fd, why, why_len);
  if (rc) return rc;
  int err = lease_flock(fd, 0);
  if (err == EWOULDBLOCK && held_here(fd)) { /* waiting would never free it */
    snprintf(why, why_len,
             "device busy: device %d is leased by this process (pid %d): a node of it still "
             "holds it (pto_node_destroy that node first)",
             id, (int)getpid());
    close(fd);
    return PTO_EDEVICE_BUSY;
  }
  if (err == EWOULDBLOCK && wait_ms > 0) {
    if (!quiet)
      fprintf(stderr, "pto: device %d is leased by %s; waiting up to %lld ms\n", id,
              holder(fd, who, sizeof who), (long long)wait_ms);
    err = lease_flock(fd, wait_ms);
  }
  if (err) {
    bool busy = err == EWOULDBLOCK;
    if (busy)
      snprintf(why, why_len, "device busy: device %d is leased by %s", id,
               holder(fd, who, sizeof who));
    else
      snprintf(why, why_len, "lease of device %d: %s", id, strerror(err));
    close(fd);
    return busy ? PTO_EDEVICE_BUSY : PTO_ESYSTEM;
  }
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%d %d\n", (int)getpid(), (int)geteuid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    /* the pid is only for messages (read-only: an older pto's object); the lock is what counts */
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
