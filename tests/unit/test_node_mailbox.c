/* test_node_mailbox.c — the node/child frame hand-off driven step by step
 * from one thread: post, take, reply; a reply of an old generation is never
 * taken for the current exchange; device leases are exclusive and released. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handoff_generations),
      cmocka_unit_test(test_lease_exclusive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
