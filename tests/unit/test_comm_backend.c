/* test_comm_backend.c — comm_domain_open picks the backend from the domain
 * descriptor (comm_domain_desc.backend): an unknown backend is refused with
 * PTO_EINVAL naming it; in a build without MPI (PTO_MPI=OFF, as the ASan
 * and TSan builds of scripts/test.sh are) the MPI backend is refused with
 * PTO_EMPI saying pto was built without MPI. Nothing is left open. (The MPI
 * backend itself is tested under mpiexec: tests/mpi/.)
 *
 * The shared-memory backend's windows that cannot be made or reached say
 * which object, which call and the system's reason: a name taken (a stale
 * object), a peer's window missing, a file-size limit, and a shared-memory
 * file system too small for the window (a container's 64 MiB /dev/shm),
 * which is refused at once instead of the chip dying of SIGBUS when its
 * window is zeroed. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/comm.h"
#include "comm_fixture.h"

static void open_fails(uint8_t backend, int want, const char *want_text) {
  pto_window_buffer b[1] = {{"cells", 64}};
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  assert_int_equal(comm_desc_layout(&d, b, 1), 0);
  d.id = 3;
  d.nranks = 2;
  d.chips[1] = 1;
  d.backend = backend;
  pto_comm c;
  comm_init(&c, 0);
  int rc = comm_domain_open(&c, &d, 0);
  char det[400];
  int latched = comm_task_error(&c, det, sizeof det);
  if (rc != want || latched != want || !strstr(det, want_text))
    fail_msg("backend %d: open returned %s (latched %s, \"%s\"), expected %s with \"%s\"", backend,
             pto_status_name(rc), pto_status_name(latched), det, pto_status_name(want), want_text);
  assert_null(comm_find(&c, 3));
  comm_fini(&c, true);
}

static void test_unknown_backend(void **state) {
  (void)state;
  open_fails(7, PTO_EINVAL, "domain 3: unknown communication backend 7");
}

#ifndef PTO_HAVE_MPI
static void test_built_without_mpi(void **state) {
  (void)state;
  open_fails(COMM_BACKEND_MPI, PTO_EMPI, "pto was built without MPI");
}
#endif

/* A 2-rank shm domain of one buffer of `bytes` in reserved space, its
 * prefix unique to this process, its call and `tag`. */
static void *shm_desc(comm_domain_desc *d, size_t bytes, char tag) {
  pto_window_buffer b[1] = {{"cells", bytes}};
  memset(d, 0, sizeof *d);
  assert_int_equal(comm_desc_layout(d, b, 1), 0);
  d->id = 5;
  d->nranks = 2;
  d->chips[1] = 1;
  d->wait_timeout_ms = 2000;
  comm_fixture_prefix(d->prefix, sizeof d->prefix, tag);
  void *space = NULL;
  assert_int_equal(comm_space_reserve(2 * d->win_bytes, &space), 0);
  d->base = (uint64_t)(uintptr_t)space;
  return space;
}

/* rc and the latched details of rank `rank` opening d ("" when it opened). */
static int shm_open_rank(pto_comm *c, const comm_domain_desc *d, int rank, char *det, size_t n) {
  comm_init(c, rank);
  int rc = comm_domain_open(c, d, rank);
  det[0] = '\0';
  if (rc) comm_task_error(c, det, n);
  return rc;
}

static void expect_why(int rc, const char *det, const char *const *want, int nwant) {
  for (int i = 0; i < nwant; i++)
    if (rc != PTO_ESYSTEM || !strstr(det, want[i]))
      fail_msg("returned %s with \"%s\"; expected PTO_ESYSTEM naming \"%s\"", pto_status_name(rc),
               det, want[i]);
}

static void test_shm_name_taken(void **state) {
  (void)state;
  comm_domain_desc d;
  void *space = shm_desc(&d, 4096, 'a');
  char name[COMM_PREFIX_MAX + 16], det[400], size[64];
  comm_shm_name(&d, 0, name, sizeof name);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600); /* a stale window */
  assert_true(fd >= 0);
  close(fd);
  pto_comm c;
  int rc = shm_open_rank(&c, &d, 0, det, sizeof det);
  shm_unlink(name);
  snprintf(size, sizeof size, "%llu bytes", (unsigned long long)d.win_bytes);
  const char *want[] = {name, size, "shm_open", "File exists"};
  expect_why(rc, det, want, 4);
  assert_null(comm_find(&c, d.id));
  comm_fini(&c, true);
  comm_space_release(space, 2 * d.win_bytes);
}

/* comm_peer_copy tells a peer's copy of any open domain's window, with a
 * first test against the span of every open domain's windows (the
 * collectives' src and dst checks): a byte of rank 1's copy in each of two
 * domains is found and named by its domain, rank 0's own copy and memory
 * outside the windows are not, and once a domain closes its range is
 * memory like any other while the other domain's still is found. */
static void test_peer_copy_across_domains(void **state) {
  (void)state;
  comm_domain_desc d[2];
  void *space[2];
  pto_comm c;
  comm_init(&c, 0);
  for (int i = 0; i < 2; i++) {
    space[i] = shm_desc(&d[i], 4096, (char)('p' + i));
    d[i].id = 20 + i;
    assert_int_equal(comm_domain_open(&c, &d[i], 0), 0);
  }
  static unsigned char outside[64];
  for (int i = 0; i < 2; i++) {
    uintptr_t mine = (uintptr_t)d[i].base, peer = mine + d[i].win_bytes;
    comm_copy_at at;
    assert_true(comm_peer_copy(&c, peer + 8, peer + 16, &at));
    assert_int_equal(at.dom->desc.id, d[i].id);
    assert_int_equal(at.rank, 1);
    assert_false(comm_peer_copy(&c, mine + 8, mine + 16, &at)); /* my own copy */
  }
  assert_false(comm_peer_copy(&c, (uintptr_t)outside, (uintptr_t)outside + 64, &(comm_copy_at){0}));
  comm_domain_close(&c, d[0].id, true);
  uintptr_t gone = (uintptr_t)d[0].base + d[0].win_bytes,
            kept = (uintptr_t)d[1].base + d[1].win_bytes;
  comm_copy_at at;
  assert_false(comm_peer_copy(&c, gone + 8, gone + 16, &at));
  assert_true(comm_peer_copy(&c, kept + 8, kept + 16, &at));
  assert_int_equal(at.dom->desc.id, d[1].id);
  comm_domain_close(&c, d[1].id, true);
  assert_false(comm_peer_copy(&c, kept + 8, kept + 16, &at));
  comm_fini(&c, true);
  for (int i = 0; i < 2; i++)
    comm_space_release(space[i], 2 * d[i].win_bytes);
}

static void test_shm_peer_missing(void **state) {
  (void)state;
  comm_domain_desc d;
  void *space = shm_desc(&d, 4096, 'b');
  char name[COMM_PREFIX_MAX + 16], det[400];
  comm_shm_name(&d, 1, name, sizeof name);
  pto_comm c;
  assert_int_equal(shm_open_rank(&c, &d, 0, det, sizeof det), 0);
  int rc = comm_domain_attach(&c, d.id); /* rank 1 never made its window */
  comm_task_error(&c, det, sizeof det);
  const char *want[] = {"rank 1's window", name, "shm_open", "No such file or directory"};
  expect_why(rc, det, want, 4);
  comm_fini(&c, true);
  comm_space_release(space, 2 * d.win_bytes);
}

/* Runs fn in a child process and checks that it exited 0 (a failed check
 * exits 1 and prints why; a signal is reported as such). */
static void in_child(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* cmocka's handlers would carry on with the next test in here */
    const int sigs[] = {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
      signal(sigs[i], SIG_DFL);
    fn();
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (WIFSIGNALED(st))
    fail_msg("the child was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) skip();
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("the child failed (its message above)");
}

static void child_check(int rc, const char *det, const char *const *want, int nwant) {
  for (int i = 0; i < nwant; i++)
    if (rc != PTO_ESYSTEM || !strstr(det, want[i])) {
      fprintf(stderr, "returned %s with \"%s\"; expected PTO_ESYSTEM naming \"%s\"\n",
              pto_status_name(rc), det, want[i]);
      _exit(1);
    }
}

/* A 1 MiB window under a 64 KiB file-size limit: ftruncate fails (EFBIG). */
static void over_fsize(void) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = {64 << 10, 64 << 10};
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(77);
  comm_domain_desc d;
  shm_desc(&d, 1 << 20, 'c');
  char name[COMM_PREFIX_MAX + 16], det[400], size[64];
  comm_shm_name(&d, 0, name, sizeof name);
  snprintf(size, sizeof size, "%llu bytes", (unsigned long long)d.win_bytes);
  pto_comm c;
  int rc = shm_open_rank(&c, &d, 0, det, sizeof det);
  int gone = shm_unlink(name) != 0 && errno == ENOENT; /* a failed window is not left */
  const char *want[] = {name, size, "File too large"};
  child_check(rc, det, want, 3);
  if (!gone) {
    fprintf(stderr, "the failed window %s was left behind\n", name);
    _exit(1);
  }
}

static void test_shm_over_file_size_limit(void **state) {
  (void)state;
  in_child(over_fsize);
}

/* A 4 MiB window on a 1 MiB /dev/shm (a private mount in a mount namespace
 * of its own: as a container's small /dev/shm). Before, ftruncate made the
 * object sparse and zeroing it killed the process with SIGBUS. */
static void shm_full(void) {
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
    fprintf(stderr, "skipped: cannot mount a small /dev/shm here: %s\n", strerror(errno));
    _exit(77);
  }
  comm_domain_desc d;
  shm_desc(&d, 4 << 20, 'd');
  char name[COMM_PREFIX_MAX + 16], det[400], size[64];
  comm_shm_name(&d, 0, name, sizeof name);
  snprintf(size, sizeof size, "%llu bytes", (unsigned long long)d.win_bytes);
  pto_comm c;
  int rc = shm_open_rank(&c, &d, 0, det, sizeof det);
  const char *want[] = {name, size, "No space left on device", "/dev/shm"};
  child_check(rc, det, want, 4);
}

static void test_shm_file_system_full(void **state) {
  (void)state;
  in_child(shm_full);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_backend),      cmocka_unit_test(test_shm_name_taken),
      cmocka_unit_test(test_shm_peer_missing),     cmocka_unit_test(test_shm_over_file_size_limit),
      cmocka_unit_test(test_shm_file_system_full), cmocka_unit_test(test_peer_copy_across_domains),
#ifndef PTO_HAVE_MPI
      cmocka_unit_test(test_built_without_mpi),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
