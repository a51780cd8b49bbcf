/* run_guard.c — run liveness as a lock held on a guard object, the stale
 * sweep, and the signal-time cleanup (see run_guard.h).
 *
 * Guard protocol. The owner creates "/pto-live.<id>" with O_EXCL (size 0),
 * locks it (flock, exclusive) and only then gives it a size (it writes its
 * pid). A sweeper opens the guard of each run it finds and tries the lock
 * without blocking: held = live; free and sized = stale (the owner is
 * gone); free and empty = being created (left alone); no guard at all =
 * not a live run of this version (the guard exists before any other object
 * of its run and is unlinked after all of them): a leftover, or a run of an
 * older pto, judged by its pid as that version does. The sweeper holds the
 * lock while it unlinks, so an owner never locks a guard being swept.
 *
 * Signal cleanup. A fixed registry (no allocation) of the guards this
 * process owns; the handler only reads it (a slot's fields are written
 * before its `live` flag, seq_cst), and calls kill,
 * waitpid, nanosleep, open, getdents64, unlinkat, sigaction, sigprocmask
 * and raise — all async-signal-safe. */
#include "node/run_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node/lease.h"
#include "pto/status.h"

#define SHM_DIR          "/dev/shm"
#define NAME_MAX_RUN     64   /* "pto.<pid>.<seq>.<nonce>" fits easily */
#define GUARD_LOCK_MS    2000 /* most a sweeper can hold a new guard's lock */
#define REAP_DEADLINE_MS 2000 /* most the handler waits for a killed child */

typedef struct guard_slot {
  _Atomic int live;           /* 1 while registered; the fields below are set before */
  _Atomic int owner;          /* pid of the process that owns the run */
  int fd;                     /* the locked guard */
  char run[NAME_MAX_RUN + 8]; /* "pto.<pid>.<seq>.<nonce>", no leading '/' */
  _Atomic int nchild;
  _Atomic int child[RUN_GUARD_CHILDREN];
} guard_slot;

static guard_slot slots[RUN_GUARD_MAX];
static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSIG_HANDLED ((int)(sizeof signals / sizeof signals[0]))
static bool installed[NSIG_HANDLED]; /* by the main thread, under the create/destroy calls */
static int nlive;

/* ---- names ---- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Length of the run id "<pid>.<seq>.<nonce>" (digits, digits, hex) at the
 * start of `id`, followed by the end or a '.', or 0 for another shape. */
static size_t id_len(const char *id) {
  size_t i = 0;
  for (int field = 0; field < 3; field++) {
    size_t start = i;
    while (field < 2 ? is_digit(id[i]) : is_hex(id[i]))
      i++;
    if (i == start || i - start > 20) return 0;
    if (field < 2 && id[i++] != '.') return 0;
  }
  if (id[i] != 0 && id[i] != '.') return 0;
  return i < NAME_MAX_RUN ? i : 0;
}

/* The run id of a /dev/shm entry: an object "pto.<id>.<rest>" or a guard
 * "pto-live.<id>"; NULL (and *n = 0) for a name of another shape. */
static const char *entry_id(const char *name, size_t *n) {
  *n = 0;
  if (strncmp(name, "pto.", 4) == 0) {
    *n = id_len(name + 4);
    if (*n && name[4 + *n] == '.') return name + 4;
  } else if (strncmp(name, RUN_GUARD_TAG, sizeof RUN_GUARD_TAG - 1) == 0) {
    const char *id = name + sizeof RUN_GUARD_TAG - 1;
    *n = id_len(id);
    if (*n && id[*n] == 0) return id;
  }
  *n = 0;
  return NULL;
}

/* ---- async-signal-safe helpers ---- */

/* Is `name` an object "pto.<id>.<rest>" of run `id` (length n)? */
static bool of_run(const char *name, const char *id, size_t n) {
  if (name[0] != 'p' || name[1] != 't' || name[2] != 'o' || name[3] != '.') return false;
  for (size_t i = 0; i < n; i++)
    if (name[4 + i] != id[i]) return false;
  return name[4 + n] == '.';
}

struct linux_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

int run_guard_unlink_all(const char *prefix) {
  if (!prefix) return 0;
  if (prefix[0] == '/') prefix++;
  if (prefix[0] != 'p' || prefix[1] != 't' || prefix[2] != 'o' || prefix[3] != '.') return 0;
  /* the run id: prefix may name a part of the run ("<run>.d3", a domain) */
  const char *id = prefix + 4;
  size_t n = id_len(id);
  if (n == 0) return 0;
  int dfd = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  int count = 0;
  /* unlinking while reading the directory may hide entries from this
   * pass: repeat until a pass finds none */
  for (int pass = 0; pass < 4; pass++) {
    int found = 0;
    lseek(dfd, 0, SEEK_SET);
    _Alignas(8) char buf[4096];
    for (;;) {
      long got = syscall(SYS_getdents64, dfd, buf, sizeof buf);
      if (got <= 0) break;
      for (long off = 0; off < got;) {
        struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
        off += e->d_reclen;
        if (of_run(e->d_name, id, n) && unlinkat(dfd, e->d_name, 0) == 0) {
          count++;
          found++;
        }
      }
    }
    if (!found) break;
  }
  char guard[sizeof RUN_GUARD_TAG + NAME_MAX_RUN];
  memcpy(guard, RUN_GUARD_TAG, sizeof RUN_GUARD_TAG - 1);
  memcpy(guard + sizeof RUN_GUARD_TAG - 1, id, n);
  guard[sizeof RUN_GUARD_TAG - 1 + n] = 0;
  if (unlinkat(dfd, guard, 0) == 0) count++; /* last */
  close(dfd);
  return count;
}

static void sleep_1ms(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

/* Kills and reaps the children of a run this process owns; only children
 * not reaped yet (waitpid says "still mine"), so a reused pid is never hit. */
static void kill_children(guard_slot *g) {
  int n = atomic_load(&g->nchild);
  for (int i = 0; i < n && i < RUN_GUARD_CHILDREN; i++) {
    pid_t pid = atomic_load(&g->child[i]);
    if (pid > 0 && waitpid(pid, NULL, WNOHANG) == 0) kill(pid, SIGKILL);
  }
  for (int i = 0; i < n && i < RUN_GUARD_CHILDREN; i++) {
    pid_t pid = atomic_load(&g->child[i]);
    for (int ms = 0; pid > 0 && ms < REAP_DEADLINE_MS; ms++) {
      if (waitpid(pid, NULL, WNOHANG) != 0) break; /* reaped, or not (any more) mine */
      sleep_1ms();
    }
  }
}

static void on_signal(int sig) {
  int saved = errno;
  pid_t me = getpid();
  for (int i = 0; i < RUN_GUARD_MAX; i++) {
    guard_slot *g = &slots[i];
    if (!atomic_load(&g->live) || atomic_load(&g->owner) != me)
      continue; /* a forked child's copy */
    kill_children(g);
    run_guard_unlink_all(g->run);
  }
  /* end the way the signal would have ended us */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
  errno = saved; /* not reached unless the signal is blocked elsewhere */
}

static void install(void) {
  for (int k = 0; k < NSIG_HANDLED; k++) {
    struct sigaction old;
    if (sigaction(signals[k], NULL, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue; /* the app's */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int j = 0; j < NSIG_HANDLED; j++)
      sigaddset(&sa.sa_mask, signals[j]); /* one cleanup at a time */
    sa.sa_flags = SA_RESTART;
    installed[k] = sigaction(signals[k], &sa, NULL) == 0;
  }
}

static void uninstall(void) {
  for (int k = 0; k < NSIG_HANDLED; k++) {
    if (!installed[k]) continue;
    installed[k] = false;
    struct sigaction cur;
    if (sigaction(signals[k], NULL, &cur) != 0) continue;
    if (cur.sa_handler != on_signal) continue; /* replaced since: not ours to touch */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signals[k], &dfl, NULL);
  }
}

/* ---- the guard ---- */

static guard_slot *find(const char *run) {
  for (int i = 0; i < RUN_GUARD_MAX; i++)
    if (atomic_load(&slots[i].live) && atomic_load(&slots[i].owner) == getpid() &&
        strcmp(slots[i].run, run) == 0)
      return &slots[i];
  return NULL;
}

static const char *run_of(const char *prefix) {
  return !prefix ? "" : prefix[0] == '/' ? prefix + 1 : prefix;
}

int run_guard_begin(const char *prefix, char *why, size_t why_len) {
  const char *run = run_of(prefix);
  if (strncmp(run, "pto.", 4) != 0 || id_len(run + 4) == 0 || id_len(run + 4) != strlen(run + 4)) {
    snprintf(why, why_len, "run guard: bad run prefix '%.60s'", prefix ? prefix : "(null)");
    return PTO_EINVAL;
  }
  guard_slot *g = NULL;
  for (int i = 0; i < RUN_GUARD_MAX && !g; i++)
    if (!atomic_load(&slots[i].live)) g = &slots[i];
  if (!g) {
    snprintf(why, why_len, "run guard: more than %d nodes alive in this process", RUN_GUARD_MAX);
    return PTO_ESYSTEM;
  }
  char name[NAME_MAX_RUN + 16];
  snprintf(name, sizeof name, "/" RUN_GUARD_TAG "%s", run + 4);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(why, why_len, "run guard %s: %s", name, strerror(errno));
    return PTO_ESYSTEM;
  }
  /* a sweeper may hold the new, empty guard's lock for a moment */
  int err = lease_flock(fd, GUARD_LOCK_MS);
  char pid[24];
  int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (err || pwrite(fd, pid, (size_t)len, 0) != len) {
    snprintf(why, why_len, "run guard %s: cannot %s it: %s", name, err ? "lock" : "write",
             strerror(err ? err : errno));
    close(fd);
    shm_unlink(name);
    return PTO_ESYSTEM;
  }
  g->fd = fd;
  snprintf(g->run, sizeof g->run, "%s", run);
  atomic_store(&g->nchild, 0);
  atomic_store(&g->owner, (int)getpid());
  atomic_store(&g->live, 1); /* seq_cst: the fields above are set when the handler sees it */
  if (nlive++ == 0) install();
  return 0;
}

void run_guard_child(const char *prefix, pid_t pid) {
  guard_slot *g = find(run_of(prefix));
  if (!g) return;
  int n = atomic_load(&g->nchild);
  if (n >= RUN_GUARD_CHILDREN) return;
  atomic_store(&g->child[n], (int)pid);
  atomic_store(&g->nchild, n + 1); /* after the pid: the handler reads [0, nchild) */
}

void run_guard_end(const char *prefix) {
  guard_slot *g = find(run_of(prefix));
  if (!g) return;
  run_guard_unlink_all(g->run); /* the guard last, still locked */
  atomic_store(&g->live, 0);
  close(g->fd);
  if (--nlive == 0) uninstall();
}

/* ---- the stale sweep ---- */

typedef enum { RUN_LIVE, RUN_STALE, RUN_ORPHAN } run_state;

/* Opens and tries the guard of run `id` (n chars); on RUN_STALE *fd holds
 * its lock. */
static run_state probe(const char *id, size_t n, int *fd) {
  char name[NAME_MAX_RUN + 16];
  snprintf(name, sizeof name, "/" RUN_GUARD_TAG "%.*s", (int)n, id);
  *fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
  if (*fd < 0 && errno != ENOENT) return RUN_LIVE; /* unreadable: not ours to judge */
  if (*fd < 0) {
    /* No guard: a run of a pto before guards (or leftovers of a run whose
     * guard is gone). A live run of this version always has its guard, so
     * only an older run can be live here; judge it as that version would,
     * by its pid (never worse than before; the guard is what makes it
     * namespace-safe). */
    int pid = atoi(id);
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH ? RUN_ORPHAN : RUN_LIVE;
  }
  struct stat st;
  if (flock(*fd, LOCK_EX | LOCK_NB) != 0 || fstat(*fd, &st) != 0 || st.st_size == 0) {
    close(*fd); /* held (live), or still being created */
    *fd = -1;
    return RUN_LIVE;
  }
  return RUN_STALE;
}

int run_guard_sweep(void) {
  DIR *d = opendir(SHM_DIR);
  if (!d) return 0;
  int count = 0;
  char last[NAME_MAX_RUN] = ""; /* the run judged last, and how */
  run_state last_state = RUN_LIVE;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n;
    const char *id = entry_id(e->d_name, &n);
    if (!id) continue;
    bool own = false;
    for (int i = 0; i < RUN_GUARD_MAX && !own; i++)
      own = atomic_load(&slots[i].live) && strncmp(slots[i].run + 4, id, n) == 0 &&
            slots[i].run[4 + n] == 0;
    if (own) continue;
    run_state s;
    if (strlen(last) == n && strncmp(last, id, n) == 0) {
      s = last_state;
    } else {
      int fd;
      s = probe(id, n, &fd);
      if (s == RUN_STALE) { /* the whole run, while holding its guard's lock */
        char run[NAME_MAX_RUN + 8];
        snprintf(run, sizeof run, "pto.%.*s", (int)n, id);
        count += run_guard_unlink_all(run);
        close(fd);
        s = RUN_ORPHAN; /* what is left of it (hidden from that pass) goes too */
      }
      snprintf(last, sizeof last, "%.*s", (int)n, id);
      last_state = s;
    }
    if (s == RUN_ORPHAN) {
      char name[300];
      snprintf(name, sizeof name, "/%s", e->d_name);
      if (shm_unlink(name) == 0) count++;
    }
  }
  closedir(d);
  return count;
}
