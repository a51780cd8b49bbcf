/* test_node_cleanup.c — a node run's shared objects never outlive it and
 * are never taken from a live run (src/node/run_guard.c):
 *  - Ctrl-C (SIGINT to the run's process group) and SIGTERM/SIGHUP to the
 *    parent alone, mid-task with a domain open: the parent still ends with
 *    that signal, its chip processes are gone and no /dev/shm object of the
 *    run is left;
 *  - the stale sweep of a new run leaves a live run's objects alone even
 *    when the pid in their names looks dead (a run in another PID
 *    namespace sharing /dev/shm), removes those of a run whose guard is
 *    free or gone, and never touches names of another shape; and for real:
 *    a run living as pid N of a new PID namespace, N dead here, keeps its
 *    objects through another run's sweep and ends well;
 *  - the signal cleanup is installed only over the default action and
 *    removed with the last node;
 *  - a second Unix user (uid 65534) is told "device busy" while root holds
 *    the devices, then gets a working run (leases are machine-wide). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "node/run_guard.h"
#include "pto/comm.h"
#include "pto/node.h"

#define DEV0 44 /* device ids of this file's nodes: 44, 45 */

static int g_pipe = -1; /* set in the forked run before its node forks its chips */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Is /dev/shm entry `name` of run `prefix` ("pto.<id>"): one of its
 * windows "pto.<id>.*", or its guard "pto-live.<id>"? */
static bool of_run(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) == 0) return true;
  return strncmp(name, "pto-live.", 9) == 0 && strcmp(name + 9, prefix + 4) == 0;
}

/* /dev/shm objects of run `prefix` (no leading '/'). */
static int count_objects(const char *prefix, char *names, size_t len) {
  DIR *d = opendir("/dev/shm");
  assert_non_null(d);
  int n = 0;
  size_t at = 0;
  if (names && len) names[0] = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (of_run(e->d_name, prefix)) {
      n++;
      if (names && at < len) at += (size_t)snprintf(names + at, len - at, " %s", e->d_name);
    }
  closedir(d);
  return n;
}

static void unlink_objects(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (of_run(e->d_name, prefix)) {
      char name[300];
      snprintf(name, sizeof name, "/%s", e->d_name);
      shm_unlink(name);
    }
  closedir(d);
}

/* Running (not gone, not a zombie)? */
static bool running(int pid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[k] = 0;
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void config(pto_node_config *cfg, int nchips) {
  static const int devs[2] = {DEV0, DEV0 + 1};
  pto_node_config_init(cfg);
  cfg->nchips = nchips;
  cfg->device_ids = devs;
  cfg->chip.clusters = 1;
  cfg->chip.schedulers = 1;
  cfg->chip.task_slots = 64;
  cfg->chip.heap_bytes = 1u << 20;
  cfg->host_bytes = 1u << 20;
  cfg->window_space = 16u << 20;
  cfg->startup_timeout_ms = 20000;
  cfg->control_timeout_ms = 10000;
  cfg->lease_wait_ms = 20000;
  cfg->quiet = true;
}

/* ---- the interrupted run (a forked process) ---- */

/* Chip side: says it runs, then sleeps until the run is interrupted. */
static void sleepy_chip(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
  if (write(g_pipe, "R", 1) != 1) _exit(9);
  for (int i = 0; i < 300; i++)
    sleep_ms(100);
}

static void interrupted_orch(pto_node_orch *no, void *arg) {
  (void)arg;
  static const int chips[2] = {0, 1};
  pto_window_buffer buf = {"data", 4096};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, &buf, 1, &dom) != 0) _exit(7);
  if (pto_node_submit_group(no, chips, 2, sleepy_chip, NULL, NULL) != 0) _exit(8);
}

static void __attribute__((noreturn)) interrupted_run(int fd) {
  setpgid(0, 0);           /* its own process group, as a shell job: Ctrl-C reaches all of it */
  signal(SIGINT, SIG_DFL); /* as in an interactive shell (a background job may inherit SIG_IGN) */
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  g_pipe = fd;
  pto_node_config cfg;
  config(&cfg, 2);
  pto_node *n = NULL;
  pto_error_info err;
  if (pto_node_create(&cfg, &n, &err) != 0) {
    fprintf(stderr, "node create: %s\n", err.details);
    _exit(5);
  }
  int pids[2];
  pto_node_child_pids(n, pids, 2);
  char line[128];
  int len = snprintf(line, sizeof line, "%s %d %d\n", pto_node_shm_prefix(n), pids[0], pids[1]);
  if (write(fd, line, (size_t)len) != len) _exit(6);
  pto_node_run(n, interrupted_orch, NULL, &err);
  _exit(4); /* not reached: the signal ends the run first */
}

/* Reads until `want` bytes of 'R' after the header line, or the deadline. */
static bool read_run(int fd, char *prefix, int *pids, int want_r) {
  char buf[256];
  size_t got = 0;
  int rs = 0;
  bool header = false;
  uint64_t dl = pto_deadline_ms(30000);
  while (pto_now_ns() < dl && (!header || rs < want_r)) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (!header) {
      if (got < sizeof buf - 1) buf[got++] = c;
      if (c == '\n') {
        buf[got] = 0;
        header = sscanf(buf, "%63s %d %d", prefix, &pids[0], &pids[1]) == 3;
        if (!header) return false;
      }
    } else if (c == 'R') {
      rs++;
    }
  }
  return header && rs >= want_r;
}

static int wait_exit(pid_t pid, int ms) {
  int st = -1;
  for (int i = 0; i < ms; i += 10) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

static void interrupt_run(int sig, bool whole_group) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    close(fds[0]);
    interrupted_run(fds[1]);
  }
  close(fds[1]);
  setpgid(c, c); /* either side may win the race; both set the same group */
  char prefix[64] = "";
  int pids[2] = {0, 0};
  bool started = read_run(fds[0], prefix, pids, 2);
  close(fds[0]);
  if (!started) {
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    fail_msg("the run did not start its chip task");
  }
  char names[512];
  int before = count_objects(prefix, names, sizeof names);
  printf("%s: run %s mid-task with objects%s\n", strsignal(sig), prefix, names);
  assert_true(before >= 2); /* its two windows at least: the test is not vacuous */
  assert_int_equal(kill(whole_group ? -c : c, sig), 0);
  int st = wait_exit(c, 10000);
  /* the chip processes go with it (killed by the parent or by the signal) */
  for (int i = 0; i < 2; i++)
    for (int ms = 0; ms < 3000 && running(pids[i]); ms += 10)
      sleep_ms(10);
  int left = count_objects(prefix, names, sizeof names);
  printf("%s to the %s: exit %s %d (want killed by signal %d), chips running: %d %d, objects "
         "left: %d%s\n",
         strsignal(sig), whole_group ? "process group" : "parent",
         st >= 0 && WIFSIGNALED(st) ? "killed by signal" : "status",
         st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st)
         : st >= 0                  ? WEXITSTATUS(st)
                                    : -1,
         sig, running(pids[0]), running(pids[1]), left, names);
  unlink_objects(prefix); /* whatever happened, leave nothing behind */
  assert_true(st >= 0 && WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), sig);
  assert_false(running(pids[0]));
  assert_false(running(pids[1]));
  assert_int_equal(left, 0);
}

static void test_ctrl_c_mid_run(void **state) {
  (void)state;
  interrupt_run(SIGINT, true);
}

static void test_sigterm_to_parent(void **state) {
  (void)state;
  interrupt_run(SIGTERM, false);
  interrupt_run(SIGHUP, false);
}

/* ---- the stale sweep ---- */

static int make_object(const char *name, const char *content) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  if (content) assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
  return fd;
}

static bool exists(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

/* One scenario; false when the canary (a name of another shape, which this
 * sweep never touches) vanished: a pid-based sweep of an older pto in
 * another process interfered, and the outcome says nothing. */
static bool sweep_scenario(void) {
  pid_t dead = fork(); /* a pid that is surely gone once reaped: what a run in
                          another PID namespace looks like from here */
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  char live_g[64], live_w[64], stale_g[64], stale_w[64], orphan_w[64], other[64];
  snprintf(live_g, sizeof live_g, "/pto-live.%d.0.abc123", (int)dead);
  snprintf(live_w, sizeof live_w, "/pto.%d.0.abc123.d1.r0", (int)dead);
  snprintf(stale_g, sizeof stale_g, "/pto-live.%d.1.abc123", (int)dead);
  snprintf(stale_w, sizeof stale_w, "/pto.%d.1.abc123.d1.r0", (int)dead);
  snprintf(orphan_w, sizeof orphan_w, "/pto.%d.2.abc123.d1.r1", (int)dead);
  snprintf(other, sizeof other, "/pto.%d.t0.r0", (int)dead); /* not a node run's name */
  /* the live run: its guard is locked (here by this process, for the run
   * living in another namespace) and sized */
  int lg = make_object(live_g, "1\n");
  assert_int_equal(flock(lg, LOCK_EX | LOCK_NB), 0);
  close(make_object(live_w, NULL));
  close(make_object(stale_g, "1\n")); /* its owner is gone: lock free */
  close(make_object(stale_w, NULL));
  close(make_object(orphan_w, NULL)); /* its guard is gone */
  close(make_object(other, NULL));
  run_guard_sweep(); /* what pto_node_create runs first */
  bool kept_live = exists(live_g) && exists(live_w);
  bool stale_gone = !exists(stale_g) && !exists(stale_w) && !exists(orphan_w);
  bool other_kept = exists(other);
  printf("sweep: live run %s, stale run %s, orphan %s, other name %s\n",
         kept_live ? "kept" : "UNLINKED", exists(stale_g) || exists(stale_w) ? "KEPT" : "unlinked",
         exists(orphan_w) ? "KEPT" : "unlinked", other_kept ? "kept" : "UNLINKED");
  /* the live run ends: its objects are stale now */
  close(lg);
  run_guard_sweep();
  bool live_gone_after = !exists(live_g) && !exists(live_w);
  other_kept = other_kept && exists(other);
  const char *all[] = {live_g, live_w, stale_g, stale_w, orphan_w, other};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    shm_unlink(all[i]);
  if (!other_kept) {
    printf("the canary %s vanished: another process's pid-based sweep interfered; again\n", other);
    return false;
  }
  assert_true(kept_live);
  assert_true(stale_gone);
  assert_true(live_gone_after);
  return true;
}

static void test_sweep_spares_live_runs(void **state) {
  (void)state;
  bool done = false;
  for (int i = 0; i < 5 && !done; i++)
    done = sweep_scenario();
  assert_true(done);
}

/* ---- a live run in another PID namespace, for real ---- */

/* run_guard_unlink_all given the prefix of a part of a run (a node
 * domain's "<run>.d3", what the comm layer's end of the job passes, comm.h
 * comm_job_end) unlinks every object of that run and its guard, and
 * nothing of another run whose id starts the same. */
static void test_unlink_all_by_a_domain_prefix(void **state) {
  (void)state;
  char guard[64], dom_obj[64], run_obj[64], other[64], prefix[64];
  int pid = (int)getpid();
  snprintf(guard, sizeof guard, "/pto-live.%d.7.abc", pid);
  snprintf(dom_obj, sizeof dom_obj, "/pto.%d.7.abc.d3.r0", pid);
  snprintf(run_obj, sizeof run_obj, "/pto.%d.7.abc.host", pid);
  snprintf(other, sizeof other, "/pto.%d.7.abcd.d3.r0", pid); /* another run */
  snprintf(prefix, sizeof prefix, "/pto.%d.7.abc.d3", pid);
  const char *all[] = {guard, dom_obj, run_obj, other};
  for (size_t i = 0; i < 4; i++)
    close(make_object(all[i], NULL));
  int n = run_guard_unlink_all(prefix);
  bool gone = !exists(guard) && !exists(dom_obj) && !exists(run_obj), kept = exists(other);
  for (size_t i = 0; i < 4; i++)
    shm_unlink(all[i]);
  if (n != 3 || !gone || !kept)
    fail_msg("run_guard_unlink_all(%s): %d unlinked (expected 3), the run's objects %s, the other "
             "run's %s",
             prefix, n, gone ? "gone" : "LEFT", kept ? "kept" : "UNLINKED");
}

static int g_down = -1; /* the inner run's chip task waits for a byte on it */

static void waiting_chip(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
  if (write(g_pipe, "R", 1) != 1) _exit(9);
  struct pollfd p = {g_down, POLLIN, 0};
  poll(&p, 1, 20000); /* bounded: the outer test says when */
}

static void waiting_orch(pto_node_orch *no, void *arg) {
  (void)arg;
  static const int chips[2] = {0, 1};
  pto_window_buffer buf = {"data", 4096};
  pto_domain dom;
  pto_node_domain_create(no, chips, 2, &buf, 1, &dom);
  pto_node_submit_group(no, chips, 2, waiting_chip, NULL, NULL);
}

/* The run, as pid `want` of a new PID namespace: 0 = it ran to the end. */
static int __attribute__((noreturn)) ns_run(int want, int up, int down) {
  if (unshare(CLONE_NEWPID) != 0) {
    if (write(up, "skip\n", 5) != 5) _exit(6);
    _exit(0);
  }
  pid_t init = fork(); /* pid 1 of the namespace */
  if (init < 0) _exit(5);
  if (init > 0) {
    int st;
    waitpid(init, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
  }
  for (;;) { /* pids are handed out in order: fork until one gets `want` */
    pid_t r = fork();
    if (r < 0) _exit(5);
    if (r == 0) {
      if (getpid() == want) break;
      _exit(0);
    }
    int st = 0;
    waitpid(r, &st, 0);
    if (r == want) _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
    if (r > want) { /* passed it (a sanitizer's helper took it): cannot test */
      if (write(up, "skip\n", 5) != 5) _exit(6);
      _exit(0);
    }
  }
  /* pid `want` here; in the test's namespace, pid `want` is dead */
  g_pipe = up;
  g_down = down;
  static const int devs[2] = {DEV0 + 2, DEV0 + 3};
  pto_node_config cfg;
  config(&cfg, 2);
  cfg.device_ids = devs;
  pto_node *n = NULL;
  pto_error_info err;
  if (pto_node_create(&cfg, &n, &err) != 0) _exit(7);
  char line[96];
  int len = snprintf(line, sizeof line, "%s %d\n", pto_node_shm_prefix(n), (int)getpid());
  if (write(up, line, (size_t)len) != len) _exit(6);
  int rc = pto_node_run(n, waiting_orch, NULL, &err);
  pto_node_destroy(n);
  _exit(rc ? 8 : 0);
}

static void test_live_run_in_other_pid_namespace(void **state) {
  (void)state;
  if (geteuid() != 0) skip();
  int want = 0; /* a pid that is dead here */
  for (int p = 300; p < 30000 && !want; p++)
    if (kill(p, 0) != 0 && errno == ESRCH) want = p;
  assert_true(want > 0);
  int up[2], down[2];
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(down), 0);
  fflush(NULL);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    close(up[0]);
    close(down[1]);
    ns_run(want, up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  char head[96] = "", prefix[64] = "";
  size_t got = 0;
  struct pollfd p = {up[0], POLLIN, 0};
  while (got < sizeof head - 1 && poll(&p, 1, 20000) > 0 && read(up[0], head + got, 1) == 1 &&
         head[got] != '\n')
    got++;
  head[got] = 0;
  if (strcmp(head, "skip") == 0) {
    waitpid(c, NULL, 0);
    printf("cannot run as pid %d of a new PID namespace here (unshare refused, or the pid was "
           "taken): skipped\n",
           want);
    skip();
  }
  int inner = 0;
  bool started = sscanf(head, "%63s %d", prefix, &inner) == 2;
  char r1 = 0, r2 = 0;
  started = started && poll(&p, 1, 20000) > 0 && read(up[0], &r1, 1) == 1 &&
            poll(&p, 1, 20000) > 0 && read(up[0], &r2, 1) == 1;
  char names[512];
  int before = count_objects(prefix, names, sizeof names);
  errno = 0;
  bool looks_dead = kill(inner, 0) != 0 && errno == ESRCH;
  printf("run %s lives as pid %d of another PID namespace; pid %d here is %s; objects%s\n", prefix,
         inner, inner, looks_dead ? "dead" : "ALIVE", names);
  /* another run starts here and sweeps */
  pto_node_config cfg;
  config(&cfg, 1);
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  pto_node_destroy(n);
  int after = count_objects(prefix, names, sizeof names);
  if (write(down[1], "x", 1) != 1) {
  }
  int st = wait_exit(c, 20000);
  close(up[0]);
  close(down[1]);
  printf("after another run's sweep: %d of %d objects left%s; the run ended with exit %d (want "
         "%d of %d left, exit 0)\n",
         after, before, names, st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, before, before);
  unlink_objects(prefix);
  assert_true(started);
  assert_true(looks_dead);
  assert_int_equal(rc, 0);
  assert_true(before >= 2); /* its two windows (and its guard) */
  assert_int_equal(after, before);
  assert_true(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- the handler is ours only over the default action ---- */

static void app_handler(int sig) { (void)sig; }

static void test_handler_only_over_default(void **state) {
  (void)state;
  struct sigaction sa, saved;
  assert_int_equal(sigaction(SIGINT, NULL, &saved), 0);
  signal(SIGINT, SIG_DFL); /* whatever the test runner left */
  pto_node_config cfg;
  config(&cfg, 1);
  pto_node *n = NULL;
  pto_error_info err;
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  assert_int_equal(sigaction(SIGINT, NULL, &sa), 0);
  assert_true(sa.sa_handler != SIG_DFL); /* the cleanup */
  pto_node_destroy(n);
  assert_int_equal(sigaction(SIGINT, NULL, &sa), 0);
  assert_true(sa.sa_handler == SIG_DFL); /* removed with the last node */
  /* an application's own handler is left alone */
  struct sigaction app;
  memset(&app, 0, sizeof app);
  app.sa_handler = app_handler;
  sigemptyset(&app.sa_mask);
  assert_int_equal(sigaction(SIGTERM, &app, NULL), 0);
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  assert_int_equal(sigaction(SIGTERM, NULL, &sa), 0);
  assert_true(sa.sa_handler == app_handler);
  pto_node_destroy(n);
  assert_int_equal(sigaction(SIGTERM, NULL, &sa), 0);
  assert_true(sa.sa_handler == app_handler);
  signal(SIGTERM, SIG_DFL);
  sigaction(SIGINT, &saved, NULL);
}

/* ---- a second Unix user ---- */

static void domain_orch(pto_node_orch *no, void *arg) {
  (void)arg;
  static const int chips[2] = {0, 1};
  pto_window_buffer buf = {"data", 4096};
  pto_domain dom;
  pto_node_domain_create(no, chips, 2, &buf, 1, &dom); /* a failure fails the run */
}

/* In a child that becomes uid 65534: a node on this file's devices, with
 * no lease wait; exit 0 = a run with a domain worked, 10 + k = create
 * failed with status -k (details on stderr). */
static int node_as_other_user(void) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    pto_node_config cfg;
    config(&cfg, 2);
    cfg.lease_wait_ms = 0;
    pto_node *n = NULL;
    pto_error_info err;
    int rc = pto_node_create(&cfg, &n, &err);
    if (rc) {
      fprintf(stderr, "uid 65534: node create: %s: %s\n", pto_status_name(rc), err.details);
      _exit(10 - rc);
    }
    rc = pto_node_run(n, domain_orch, NULL, &err);
    if (rc) fprintf(stderr, "uid 65534: node run: %s: %s\n", pto_status_name(rc), err.details);
    pto_node_destroy(n);
    _exit(rc ? 3 : 0);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_second_user_run(void **state) {
  (void)state;
  if (geteuid() != 0) skip();
  /* the lease objects as root's earlier runs of an older pto left them */
  for (int d = DEV0; d <= DEV0 + 1; d++) {
    char name[32];
    snprintf(name, sizeof name, "/pto-lease.dev%d", d);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 0, 0), 0);
    assert_int_equal(fchmod(fd, 0600), 0);
    close(fd);
  }
  pto_node_config cfg;
  config(&cfg, 2);
  pto_node *n = NULL;
  pto_error_info err;
  assert_int_equal(pto_node_create(&cfg, &n, &err), 0);
  int busy = node_as_other_user(); /* root holds the devices */
  pto_node_destroy(n);
  int free_run = node_as_other_user();
  printf("uid 65534 while uid 0 holds the devices: exit %d (want %d: PTO_EDEVICE_BUSY); once "
         "free: exit %d (want 0: a run with a domain)\n",
         busy, 10 - PTO_EDEVICE_BUSY, free_run);
  assert_int_equal(busy, 10 - PTO_EDEVICE_BUSY);
  assert_int_equal(free_run, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ctrl_c_mid_run),
      cmocka_unit_test(test_sigterm_to_parent),
      cmocka_unit_test(test_sweep_spares_live_runs),
      cmocka_unit_test(test_unlink_all_by_a_domain_prefix),
      cmocka_unit_test(test_live_run_in_other_pid_namespace),
      cmocka_unit_test(test_handler_only_over_default),
      cmocka_unit_test(test_second_user_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
