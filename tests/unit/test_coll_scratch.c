/* test_coll_scratch.c — what a collective finds about its scratch view
 * (coll.c, coll_open: the window buffer it lies in, its layout) is
 * remembered per thread for the view and the domain as attached, and
 * only for them. Two ranks of one shm domain in one process; rank 0 on
 * the test's own thread, so that its memo lives from one domain to the
 * next.
 *
 * test_memo_follows_the_domain: an allreduce on the scratch view of a
 * domain whose buffer "scratch" holds it, then the domain closed and
 * opened again at the same addresses with that space cut into two
 * buffers. The same view, the same bytes, now crosses a buffer's end:
 * the call must refuse it (PTO_EINVAL, naming it), not reuse the first
 * domain's layout and wait for a peer that never calls. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "comm_fixture.h"

#include "comm/comm.h"
#include "pto/coll.h"
#include "pto/comm.h"

#define SPACE (8u << 20)
#define DOM   21

typedef struct rank_arg {
  fixture *f;
  int r, rc;
  pto_tensor sc;
  int32_t in, out;
} rank_arg;

static void i32(pto_tensor *t, int32_t *p) {
  int64_t n = 1;
  assert_int_equal(pto_tensor_init(t, p, sizeof *p, PTO_I32, 1, &n), 0);
}

static void *sum(void *p) {
  rank_arg *a = p;
  pto_tensor src, dst;
  i32(&src, &a->in);
  i32(&dst, &a->out);
  a->rc = pto_allreduce(&a->f->k[a->r], DOM, &a->sc, &dst, &src, PTO_RED_SUM, PTO_COLL_AUTO);
  return NULL;
}

static void test_memo_follows_the_domain(void **state) {
  (void)state;
  const size_t half = pto_coll_scratch_bytes(2, 64), whole = 2 * half;
  assert_int_equal(half % PTO_COMM_ALIGN, 0); /* so that both layouts have one window size */
  fixture f;
  pto_window_buffer one[] = {{"scratch", whole}};
  comm_fixture_reserve(&f, SPACE, one, 1, DOM);
  const uint64_t win_bytes = f.d.win_bytes;
  comm_fixture_open(&f, 'm', 1);
  static rank_arg a[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (rank_arg){.f = &f, .r = r, .in = 10 + r};
    int64_t bytes = (int64_t)whole;
    assert_int_equal(
        pto_comm_window_tensor(&f.c[0], DOM, r, "scratch", PTO_U8, 1, &bytes, &a[r].sc), 0);
  }
  pthread_t peer;
  assert_int_equal(pthread_create(&peer, NULL, sum, &a[1]), 0);
  sum(&a[0]);
  assert_int_equal(pthread_join(peer, NULL), 0);
  for (int r = 0; r < 2; r++) {
    comm_fixture_ok(&f, r, a[r].rc, "the allreduce on the first domain");
    assert_int_equal(a[r].out, 21);
  }

  /* the same window space, cut into two buffers of half the size each */
  for (int r = 0; r < 2; r++)
    comm_fini(&f.c[r], true);
  pto_window_buffer two[] = {{"scratch", half}, {"rest", half}};
  assert_int_equal(comm_desc_layout(&f.d, two, 2), 0);
  assert_int_equal(f.d.win_bytes, win_bytes);
  comm_fixture_open(&f, 'n', 1);
  uint64_t t0 = pto_now_ns();
  sum(&a[0]);
  char det[400] = "";
  comm_task_error(&f.c[0], det, sizeof det);
  if (a[0].rc != PTO_EINVAL || !strstr(det, "is not inside one window buffer"))
    fail_msg("the first domain's scratch view on the second: %s (%s), expected PTO_EINVAL "
             "naming the view",
             pto_status_name(a[0].rc), det);
  assert_true(pto_now_ns() - t0 <
              (uint64_t)f.d.wait_timeout_ms * 1000000); /* refused, not timed out */
  comm_fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memo_follows_the_domain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
