/* test_dist_crash.c — failure of a chip process: a kernel that aborts in
 * chip 1 ends the run within its deadline with PTO_ECHIP_DIED naming rank
 * 1, and afterwards no process and no shared-memory object of that run
 * remains. Also: a chip that hangs (PTO_ECONTROL_TIMEOUT naming the rank),
 * a chip process that is stopped outright (no task deadline set: its
 * missing heartbeat ends the run),
 * a chip that fails to start, a chip that aborts while its peer waits
 * inside a small collective (the shared-memory call table's wait), a chip
 * that aborts in a program that ignores SIGCHLD (the kernel reaps the
 * children: no status to wait for), and leftovers of a crashed run that
 * the next run sweeps without being disturbed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "pto/coll.h"
#include "scenes/dist_scene.h"

static int k_crash, k_coll_crash;
/* the kernels' ids in every chip (registered in this order): the node's
 * parent, which submits, registers none */
enum { K_CRASH = 0, K_COLL_CRASH = 1 };
enum { MODE_ABORT = 1, MODE_HANG = 2, MODE_STOP = 3, MODE_COLL_ABORT = 4 };

static int crash_kernel(const pto_kctx *ctx) {
  int mode = (int)DIST_SCALAR(ctx, 0);
  pto_comm *c = pto_kctx_comm(ctx);
  if (pto_comm_chip(c) != 1) return 0;
  if (mode == MODE_ABORT) abort();
  if (mode == MODE_STOP) raise(SIGSTOP); /* the whole process freezes, heartbeat too */
  for (;;)
    pause(); /* a hang that ignores cancellation */
}

/* Chip 0 allreduces 16 floats over the domain (scalar 1) and waits in the
 * call table for chip 1, which aborts 100 ms into its block instead. */
static int coll_crash_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)DIST_SCALAR(ctx, 1);
  if (pto_comm_chip(pto_kctx_comm(ctx)) == 1) {
    usleep(100000);
    abort();
  }
  float in[16] = {1}, out[16];
  int64_t n = 16;
  pto_tensor src, dst;
  pto_tensor_init(&src, in, sizeof in, PTO_F32, 1, &n);
  pto_tensor_init(&dst, out, sizeof out, PTO_F32, 1, &n);
  return pto_allreduce(ctx, dom, &ctx->tensors[0], &dst, &src, PTO_RED_SUM, PTO_COLL_AUTO);
}

static int crash_init(pto_chip *chip, int rank, void *arg) {
  if (arg == (void *)1 && rank == 1) return PTO_EFATAL; /* "fails to start" */
  if (arg == (void *)2 && rank == 1)                    /* a registration refused, saying why */
    return pto_kernel_register_aiv(chip, "crash", NULL, &k_crash);
  int rc = pto_kernel_register_aiv(chip, "crash", crash_kernel, &k_crash);
  if (!rc) rc = pto_kernel_register_aiv(chip, "coll_crash", coll_crash_kernel, &k_coll_crash);
  return rc ? rc : k_crash == K_CRASH && k_coll_crash == K_COLL_CRASH ? 0 : PTO_EFATAL;
}

static void crash_node(pto_node_orch *no, void *arg) {
  const int chips[2] = {0, 1};
  int64_t scratch = (int64_t)pto_coll_scratch_bytes(2, 16 * sizeof(float));
  const pto_window_buffer bufs[] = {{"dst", 256}, {"scratch", (size_t)scratch}};
  pto_domain dom;
  if (pto_node_domain_create(no, chips, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  bool coll = (intptr_t)arg == MODE_COLL_ABORT;
  for (int r = 0; coll && r < 2; r++) { /* each rank's scratch */
    pto_tensor t;
    if (pto_node_window_tensor(no, dom, r, "scratch", PTO_U8, 1, &scratch, &t)) return;
    pto_args_inout(&a, &t);
  }
  dist_scalars(&a, coll ? K_COLL_CRASH : K_CRASH, coll ? 1 : 0, 1);
  pto_args_scalar(&a, (uint64_t)(intptr_t)arg);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, chips, 2, dist_chip_orch, &a, NULL);
}

static int count_objects(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  if (d) closedir(d);
  return n;
}

static void no_leftovers(const char *prefix, const int *pids, int npids) {
  assert_int_equal(count_objects(prefix), 0);
  for (int i = 0; i < npids; i++) {
    errno = 0;
    assert_int_equal(kill(pids[i], 0), -1);
    assert_int_equal(errno, ESRCH);
  }
}

/* fail_start: 0, or how chip 1's chip_init fails (crash_init's arg) */
static pto_node *make_node(int64_t task_timeout_ms, int fail_start, pto_error_info *err, int *rc,
                           int64_t control_timeout_ms) {
  pto_scene_opts o = {0};
  pto_node_config cfg;
  dist_config(&o, 2, crash_init, &cfg);
  cfg.task_timeout_ms = task_timeout_ms;
  if (control_timeout_ms > 0) cfg.control_timeout_ms = control_timeout_ms;
  cfg.chip.watchdog_ms = 60000; /* the node's deadline must be the one that fires */
  cfg.chip_init_arg = (void *)(intptr_t)fail_start;
  cfg.quiet = true;
  pto_node *n = NULL;
  *rc = pto_node_create(&cfg, &n, err);
  return n;
}

static void crash_run(int mode, int expect, int64_t budget_ms) {
  pto_error_info err;
  int rc;
  /* the hang's task deadline leaves chip 0's part of the task time to
   * finish under a sanitizer on a loaded machine (with 500 ms it once did
   * not, and the node named chip 0) */
  pto_node *n = make_node(mode == MODE_HANG ? 1500 : -1, 0, &err, &rc, mode == MODE_STOP ? 400 : 0);
  assert_int_equal(rc, 0);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s", pto_node_shm_prefix(n));
  int pids[8], np = pto_node_child_pids(n, pids, 8);
  uint64_t t0 = pto_now_ns();
  rc = pto_node_run(n, crash_node, (void *)(intptr_t)mode, &err);
  int64_t ms = (int64_t)((pto_now_ns() - t0) / 1000000u);
  fprintf(stderr, "%s after %lld ms: %s\n", pto_status_name(rc), (long long)ms, err.details);
  assert_int_equal(rc, expect);
  assert_non_null(strstr(err.details, "chip rank 1"));
  assert_true(ms < budget_ms);
  no_leftovers(prefix, pids, np); /* cleaned up when the run ended */
  /* the node stays failed, and says why */
  assert_int_equal(pto_node_run(n, crash_node, (void *)0, &err), expect);
  pto_node_destroy(n);
  no_leftovers(prefix, pids, np);
}

static void test_abort_in_chip1(void **state) {
  (void)state;
  crash_run(MODE_ABORT, PTO_ECHIP_DIED, 5000);
}

static void test_abort_in_chip1_during_a_collective(void **state) {
  (void)state;
  crash_run(MODE_COLL_ABORT, PTO_ECHIP_DIED, 5000);
}

static void test_hang_in_chip1(void **state) {
  (void)state;
  crash_run(MODE_HANG, PTO_ECONTROL_TIMEOUT, 5000);
}

static void test_chip1_stopped(void **state) {
  (void)state;
  crash_run(MODE_STOP, PTO_ECONTROL_TIMEOUT, 5000);
}

/* A program that ignores SIGCHLD (a daemon's usual setting): the kernel
 * reaps the chip processes itself, so waitpid finds no child to report.
 * The death is still named at once, as a death, and a good node's destroy
 * does not wait for children that are gone. Before, the dead chip was seen
 * only when its heartbeat ran out, after control_timeout_ms (30 s), and
 * called "stopped responding ... (process stopped or frozen)"; and every
 * pto_node_destroy waited control_timeout_ms for exits it never saw. */
static void test_abort_in_chip1_sigchld_ignored(void **state) {
  (void)state;
  struct sigaction ign = {.sa_handler = SIG_IGN};
  sigemptyset(&ign.sa_mask);
  assert_int_equal(sigaction(SIGCHLD, &ign, NULL), 0);
  crash_run(MODE_ABORT, PTO_ECHIP_DIED, 5000);
  pto_error_info err;
  int rc;
  pto_node *n = make_node(-1, 0, &err, &rc, 0);
  assert_int_equal(rc, 0);
  uint64_t t0 = pto_now_ns();
  pto_node_destroy(n);
  int64_t ms = (int64_t)((pto_now_ns() - t0) / 1000000u);
  fprintf(stderr, "destroy of a good node with SIGCHLD ignored: %lld ms\n", (long long)ms);
  assert_true(ms < 5000);
}

static int sigchld_default(void **state) {
  (void)state;
  signal(SIGCHLD, SIG_DFL);
  return 0;
}

static void test_chip1_fails_to_start(void **state) {
  (void)state;
  pto_error_info err;
  int rc;
  pto_node *n = make_node(-1, 1, &err, &rc, 0);
  assert_null(n);
  assert_int_equal(rc, PTO_ECHIP_DIED);
  /* the code chip_init returned, not "chip creation or chip_init failed" */
  const char *want[] = {"chip rank 1", "failed to start", "chip_init returned", "PTO_EFATAL"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (!strstr(err.details, want[i]))
      fail_msg("details \"%s\" should name \"%s\"", err.details, want[i]);
}

/* chip_init fails with a call's refusal: its pto_last_error() reaches the
 * node's error. */
static void test_chip1_start_failure_says_why(void **state) {
  (void)state;
  pto_error_info err;
  int rc;
  pto_node *n = make_node(-1, 2, &err, &rc, 0);
  assert_null(n);
  assert_int_equal(rc, PTO_ECHIP_DIED);
  const char *want[] = {"chip rank 1", "chip_init returned", "PTO_EINVAL",
                        "pto_kernel_register: 'crash' has no function"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (!strstr(err.details, want[i]))
      fail_msg("details \"%s\" should name \"%s\"", err.details, want[i]);
}

static void test_stale_objects_are_swept(void **state) {
  (void)state;
  pid_t dead = fork(); /* a pid that is surely gone once reaped */
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  char name[64];
  snprintf(name, sizeof name, "/pto.%d.0.dead.d1.r0", (int)dead);
  int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
  assert_true(fd >= 0);
  close(fd);
  pto_scene_opts o = {0};
  pto_scene_report rep = {0};
  assert_int_equal(ring_shuffle_leased(&o, NULL, 60000, &rep), 0); /* undisturbed, and sweeps it */
  assert_true(rep.verified);
  char left[64];
  snprintf(left, sizeof left, "pto.%d.", (int)dead);
  assert_int_equal(count_objects(left), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abort_in_chip1),
      cmocka_unit_test(test_abort_in_chip1_during_a_collective),
      cmocka_unit_test(test_hang_in_chip1),
      cmocka_unit_test(test_chip1_stopped),
      cmocka_unit_test_teardown(test_abort_in_chip1_sigchld_ignored, sigchld_default),
      cmocka_unit_test(test_chip1_fails_to_start),
      cmocka_unit_test(test_chip1_start_failure_says_why),
      cmocka_unit_test(test_stale_objects_are_swept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
