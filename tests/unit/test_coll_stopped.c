/* test_coll_stopped.c — a collective on the call table whose chip the node
 * stopped (or whose run was cancelled) before its peers published: it ends
 * with PTO_ESHUTDOWN naming the stop, and compares no descriptor. Before,
 * a stop seen at the wait's first look went on to compare the peers' slots
 * as if they held the call, and a peer's slot then held the call two
 * before it: the chip failed with a "mismatched" call that was never made
 * (seen under ThreadSanitizer as "rank 0 called allreduce #763 ..., rank 1
 * called reduce_scatter #761 ..." when a watchdog cancelled a slow run),
 * hiding why the run ended. Two ranks of one shm domain in one process. */
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

#define SPACE (4u << 20)
#define DOM   9

typedef struct rank_arg {
  fixture *f;
  int r, calls, rc;
} rank_arg;

static int one_call(fixture *f, int r) {
  int64_t bytes = (int64_t)pto_coll_scratch_bytes(2, 64), one = 1;
  pto_tensor sc, src, dst;
  float in = (float)(r + 1), out = 0;
  assert_int_equal(pto_comm_window_tensor(&f->c[0], DOM, r, "scratch", PTO_U8, 1, &bytes, &sc), 0);
  assert_int_equal(pto_tensor_init(&src, &in, sizeof in, PTO_F32, 1, &one), 0);
  assert_int_equal(pto_tensor_init(&dst, &out, sizeof out, PTO_F32, 1, &one), 0);
  int rc = pto_allreduce(&f->k[r], DOM, &sc, &dst, &src, PTO_RED_SUM, PTO_COLL_AUTO);
  if (rc == 0 && out != 3.0f) return -1;
  return rc;
}

static void *calls(void *p) {
  rank_arg *a = p;
  for (int i = 0; i < a->calls && !a->rc; i++)
    a->rc = one_call(a->f, a->r);
  return NULL;
}

static void test_stopped_chip_compares_no_stale_slot(void **state) {
  (void)state;
  fixture f;
  pto_window_buffer bufs[] = {{"scratch", pto_coll_scratch_bytes(2, 64)}};
  comm_fixture_reserve(&f, SPACE, bufs, 1, DOM);
  comm_fixture_open(&f, 'c', 1);
  /* calls #1 and #2 on both ranks: rank 1's slot 1 holds its call #1 */
  rank_arg a[2] = {{&f, 0, 2, 0}, {&f, 1, 2, 0}};
  pthread_t th[2];
  for (int r = 0; r < 2; r++)
    assert_int_equal(pthread_create(&th[r], NULL, calls, &a[r]), 0);
  for (int r = 0; r < 2; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  assert_int_equal(a[0].rc, 0);
  assert_int_equal(a[1].rc, 0);
  /* the node stops chip 0; its call #3 must not read rank 1's slot 1 */
  static _Atomic uint32_t stopped = 1;
  f.c[0].stop = &stopped;
  int rc = one_call(&f, 0);
  char det[512] = "";
  comm_task_error(&f.c[0], det, sizeof det);
  if (rc != PTO_ESHUTDOWN) {
    print_error("call #3 of a stopped chip: %s: %s\n", pto_status_name(rc), det);
    fail();
  }
  assert_non_null(strstr(det, "stopped chip"));
  f.c[0].stop = NULL;
  comm_fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stopped_chip_compares_no_stale_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
