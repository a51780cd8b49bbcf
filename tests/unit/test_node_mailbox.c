/* test_node_mailbox.c — the node/child frame hand-off driven step by step
 * from one thread: post, take, reply; a reply of an old generation is never
 * taken for the current exchange; device leases are exclusive and released,
 * and machine-wide: a second Unix user (a child that setuid()s to nobody)
 * gets a free device, or "device busy" naming the holder's pid — never
 * "Permission denied" — and a lease object left at mode 0600 by an older
 * pto is fixed by its owner or named clearly to anyone else. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/lease.h"
#include "node/mailbox.h"

static void test_handoff_generations(void **state) {
  (void)state;
  node_mbox *mb = calloc(1, sizeof *mb);
  node_frame *f = calloc(1, sizeof *f), *got = calloc(1, sizeof *got);
  pto_event parent;
  pto_event_init(&parent, false);
  mbox_init(mb);
  assert_true(mbox_idle(mb));
  assert_false(mbox_take(mb, 0, got)); /* nothing posted */
  uint32_t last = 0;
  for (int round = 1; round <= 3; round++) {
    f->type = FRAME_TASK;
    f->task_id = round;
    uint32_t g = mbox_post(mb, f);
    assert_false(mbox_idle(mb));
    assert_false(mbox_taken(mb, g));
    node_reply r;
    assert_false(mbox_poll_reply(mb, g, &r)); /* the previous reply is not this one */
    assert_true(mbox_take(mb, last, got));
    assert_int_equal(got->gen, g);
    assert_int_equal(got->task_id, round);
    assert_true(mbox_taken(mb, g));
    assert_false(mbox_take(mb, g, got)); /* taken once */
    last = g;
    node_reply rep = {.gen = g, .status = -round};
    mbox_reply(mb, &rep, &parent);
    assert_false(mbox_poll_reply(mb, g + 1, &r)); /* a future gen never matches */
    assert_true(mbox_poll_reply(mb, g, &r));
    assert_int_equal(r.status, -round);
    assert_true(mbox_idle(mb));
  }
  mbox_set_state(mb, CHILD_READY, &parent);
  assert_int_equal(mbox_state(mb), CHILD_READY);
  free(mb);
  free(f);
  free(got);
}

/* The cancel word is kept until the next cancel, and frame generations
 * wrap after 2^32 - 1 posts (0 is skipped): the frame that comes
 * 2^32 - 1 posts after a cancelled one has its generation, and must not
 * read as cancelled (the word names that old frame, not this one). Before,
 * it did: its task failed with PTO_ESHUTDOWN as if a peer had failed. White
 * box: the post count jumps to just before the old frame's generation. */
static void test_cancel_of_a_wrapped_generation(void **state) {
  (void)state;
  node_mbox *mb = calloc(1, sizeof *mb);
  node_frame *f = calloc(1, sizeof *f), *got = calloc(1, sizeof *got);
  pto_event parent;
  pto_event_init(&parent, false);
  mbox_init(mb);
  uint32_t g = mbox_post(mb, f);
  assert_true(mbox_take(mb, 0, got));
  mbox_cancel(mb, g, 1); /* chip 1 of its group failed */
  assert_int_equal(comm_cancel_by(atomic_load(&mb->cancel), g), 1);
  node_reply rep = {.gen = g};
  mbox_reply(mb, &rep, &parent);
  /* 2^32 - 2 posts later (none cancelled), the next post reuses g */
  atomic_store(&mb->posted, g - 1 ? g - 1 : UINT32_MAX);
  atomic_store(&mb->done, atomic_load(&mb->posted));
  uint32_t again = mbox_post(mb, f);
  assert_int_equal(again, g);
  if (comm_cancel_by(atomic_load(&mb->cancel), again) != -1)
    fail_msg("frame %u, 2^32 - 1 posts after the cancelled frame of the same generation, reads "
             "as cancelled by chip %d",
             again, comm_cancel_by(atomic_load(&mb->cancel), again));
  /* a cancel of the new frame still reads as one */
  mbox_cancel(mb, again, 0);
  assert_int_equal(comm_cancel_by(atomic_load(&mb->cancel), again), 0);
  free(mb);
  free(f);
  free(got);
}

static void test_lease_exclusive(void **state) {
  (void)state;
  int ids[2] = {901, 900}, fds[2], fds2[2], one[1];
  char why[256];
  assert_int_equal(lease_acquire(ids, 2, 0, true, fds, why, sizeof why), 0);
  /* a second lease of an overlapping set fails fast, holding nothing */
  int other[2] = {902, 900};
  assert_int_equal(lease_acquire(other, 2, 0, true, fds2, why, sizeof why), PTO_EDEVICE_BUSY);
  assert_non_null(strstr(why, "device busy: device 900"));
  /* ... and a bounded wait ends the same way */
  assert_int_equal(lease_acquire(other, 2, 30, true, fds2, why, sizeof why), PTO_EDEVICE_BUSY);
  one[0] = 902; /* 902 was released by the failed attempts */
  assert_int_equal(lease_acquire(one, 1, 0, true, fds2, why, sizeof why), 0);
  lease_release(fds2, 1);
  int dup[2] = {5, 5};
  assert_int_equal(lease_acquire(dup, 2, 0, true, fds2, why, sizeof why), PTO_EINVAL);
  lease_release(fds, 2);
  assert_int_equal(lease_acquire(other, 2, 0, true, fds2, why, sizeof why), 0);
  lease_release(fds2, 2);
}

/* ---- a second user ---- */

#define NOBODY 65534

typedef struct other_user {
  pid_t pid;
  int to_child, from_child; /* pipes */
} other_user;

/* In a child that became uid/gid `NOBODY`: leases device `id` (no wait)
 * and reports "<rc> <why>" on the pipe; if it got it, holds it until the
 * parent writes a byte, then releases and exits. */
static other_user as_other_user(int id) {
  int down[2], up[2];
  assert_int_equal(pipe(down), 0);
  assert_int_equal(pipe(up), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    char line[320];
    int rc, fds[1];
    char why[256] = "";
    if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0 || getuid() != NOBODY) {
      rc = -9999;
      snprintf(why, sizeof why, "cannot become uid %d: %s", NOBODY, strerror(errno));
    } else {
      rc = lease_acquire(&id, 1, 0, true, fds, why, sizeof why);
    }
    int len = snprintf(line, sizeof line, "%d %s\n", rc, why);
    if (write(up[1], line, (size_t)len) != len) _exit(3);
    char c;
    if (rc == 0 && read(down[0], &c, 1) == 1) lease_release(fds, 1);
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  return (other_user){pid, down[1], up[0]};
}

/* The other user's lease result; *why gets its message. */
static int other_result(other_user *u, char *why, size_t len) {
  char line[320] = "";
  size_t got = 0;
  while (got < sizeof line - 1 && read(u->from_child, line + got, 1) == 1 && line[got] != '\n')
    got++;
  line[got] = 0;
  int rc = -10000, at = 0;
  sscanf(line, "%d %n", &rc, &at);
  snprintf(why, len, "%s", line + at);
  return rc;
}

/* Lets a child that holds its lease release it and exit; reaps it. */
static void other_done(other_user *u) {
  if (write(u->to_child, "x", 1) != 1) { /* it did not get the lease: gone already */
  }
  close(u->to_child);
  close(u->from_child);
  int st;
  waitpid(u->pid, &st, 0);
}

static void test_lease_second_user(void **state) {
  (void)state;
  if (geteuid() != 0) {
    printf("not root: cannot become a second user; skipped\n");
    skip();
  }
  int id = 903, fds[1];
  char why[256], owhy[320], want[64];
  shm_unlink("/pto-lease.dev903"); /* the first lease of this device makes it */
  /* root holds it: the other user is told who */
  assert_int_equal(lease_acquire(&id, 1, 0, true, fds, why, sizeof why), 0);
  other_user u = as_other_user(id);
  int rc = other_result(&u, owhy, sizeof owhy);
  other_done(&u);
  snprintf(want, sizeof want, "device busy: device 903 is leased by pid %d", (int)getpid());
  printf("uid %d while uid 0 holds device 903: %s (%s); want PTO_EDEVICE_BUSY, \"%s\"\n", NOBODY,
         rc > -10000 ? pto_status_name(rc) : "?", owhy, want);
  assert_int_equal(rc, PTO_EDEVICE_BUSY);
  assert_non_null(strstr(owhy, want));
  lease_release(fds, 1);
  /* free: the other user gets it, and root is told who holds it */
  u = as_other_user(id);
  rc = other_result(&u, owhy, sizeof owhy);
  printf("uid %d, device 903 free: %s (%s); want 0\n", NOBODY,
         rc > -10000 ? pto_status_name(rc) : "?", owhy);
  assert_int_equal(rc, 0);
  int rc2 = lease_acquire(&id, 1, 0, true, fds, why, sizeof why);
  snprintf(want, sizeof want, "leased by pid %d", (int)u.pid);
  printf("uid 0 while uid %d holds device 903: %s (%s)\n", NOBODY, pto_status_name(rc2), why);
  other_done(&u);
  assert_int_equal(rc2, PTO_EDEVICE_BUSY);
  assert_non_null(strstr(why, want));
  assert_int_equal(lease_acquire(&id, 1, 0, true, fds, why, sizeof why), 0); /* released at exit */
  lease_release(fds, 1);
}

static void test_lease_left_by_older_pto(void **state) {
  (void)state;
  if (geteuid() != 0) skip();
  int id = 904, fds[1];
  char why[256], owhy[320];
  /* what an older pto left: mode 0600, owned by the user who ran it (root) */
  shm_unlink("/pto-lease.dev904");
  int fd = shm_open("/pto-lease.dev904", O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(fchmod(fd, 0600), 0);
  close(fd);
  other_user u = as_other_user(id);
  int rc = other_result(&u, owhy, sizeof owhy);
  other_done(&u);
  printf("uid %d, device 904's object is uid 0's, mode 0600: %s (%s)\n", NOBODY,
         rc > -10000 ? pto_status_name(rc) : "?", owhy);
  assert_int_equal(rc, PTO_ESYSTEM);
  assert_non_null(strstr(owhy, "owned by uid 0"));
  assert_non_null(strstr(owhy, "mode 0600"));
  /* its owner's next lease makes it usable by everyone */
  assert_int_equal(lease_acquire(&id, 1, 0, true, fds, why, sizeof why), 0);
  lease_release(fds, 1);
  u = as_other_user(id);
  rc = other_result(&u, owhy, sizeof owhy);
  other_done(&u);
  printf("uid %d after uid 0 leased device 904 once: %s (%s)\n", NOBODY,
         rc > -10000 ? pto_status_name(rc) : "?", owhy);
  assert_int_equal(rc, 0);
  /* and one owned by another user (mode 0600): root opens it all the same */
  fd = shm_open("/pto-lease.dev904", O_RDWR, 0);
  assert_true(fd >= 0);
  assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
  assert_int_equal(fchmod(fd, 0600), 0);
  close(fd);
  rc = lease_acquire(&id, 1, 0, true, fds, why, sizeof why);
  printf("uid 0, device 904's object is uid %d's, mode 0600: %s (%s)\n", NOBODY,
         pto_status_name(rc), rc ? why : "");
  assert_int_equal(rc, 0);
  lease_release(fds, 1);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* other_done writes to a child that may be gone */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handoff_generations),
      cmocka_unit_test(test_cancel_of_a_wrapped_generation),
      cmocka_unit_test(test_lease_exclusive),
      cmocka_unit_test(test_lease_second_user),
      cmocka_unit_test(test_lease_left_by_older_pto),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
