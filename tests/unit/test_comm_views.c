/* test_comm_views.c — the view checks of the in-kernel comm ops, on a
 * 2-rank shm domain driven from one thread (no chip, no node): strides
 * whose extent wraps 64 bits are refused and write nothing; local views are
 * held to their own buffer; an empty view (what pto_split_range gives a
 * surplus block) is a no-op for every op, chunked or not; a signal cell
 * whose offset wraps, or that reaches past its view's buffer, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm_fixture.h"

#include "comm/comm.h"
#include "pto/comm.h"

#define SPACE (16u << 20)

static void setup_dom(fixture *f) {
  pto_window_buffer bufs[] = {{"dst", 64 * 4}, {"sig", 8 * 8}, {"mat", 8 * 128 * 4}};
  comm_fixture_reserve(f, SPACE, bufs, 3, 7);
  comm_fixture_open(f, 'v', 1);
}

static void teardown_dom(fixture *f) { comm_fixture_close(f); }

static void win(fixture *f, int rank, const char *name, pto_dtype dt, int nd, const int64_t *sh,
                pto_tensor *t) {
  assert_int_equal(pto_comm_window_tensor(&f->c[0], 7, rank, name, dt, nd, sh, t), 0);
}

/* Bytes of either window that changed since the last snapshot(). */
static unsigned char g_snap[2 << 20];
static void snapshot(fixture *f) {
  assert_true(2 * f->d.win_bytes <= sizeof g_snap);
  memcpy(g_snap, f->space, 2 * f->d.win_bytes);
}
static size_t dirty(fixture *f) {
  const unsigned char *w = f->space;
  size_t n = 0;
  for (uint64_t i = 0; i < 2 * f->d.win_bytes; i++)
    n += w[i] != g_snap[i];
  return n;
}

static void expect_refused(fixture *f, int rc, int code, const char *needle, const char *what) {
  char det[384] = "";
  comm_task_error(&f->c[0], det, sizeof det);
  if (rc != code || !strstr(det, needle))
    fprintf(stderr, "%s: returned %s (expected %s), details: %s\n", what, pto_status_name(rc),
            pto_status_name(code), det);
  assert_int_equal(rc, code);
  assert_non_null(strstr(det, needle));
  comm_task_begin(&f->c[0], 1, 4); /* clear the latched error for the next case */
}

/* A 2x2 view of "dst" whose strides sum to 2^63 elements: its extent
 * computed in 64 bits wraps to one element, while [1][0] lies in the next
 * buffer and [0][1] before the window. */
static void test_wrapping_strides_write_nothing(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f);
  snapshot(&f);
  int64_t n64 = 64, one = 1, two[2] = {2, 2};
  pto_tensor dst, sig;
  win(&f, 0, "dst", PTO_F32, 1, &n64, &dst);
  win(&f, 0, "sig", PTO_I64, 1, &one, &sig);
  int64_t gap = ((char *)sig.buf - (char *)dst.buf) / 4; /* elements from dst to sig */
  pto_tensor bad = dst;
  bad.ndims = 2;
  bad.shape[0] = 2;
  bad.shape[1] = 2;
  bad.stride[0] = (INT64_C(1) << 62) + gap;
  bad.stride[1] = (INT64_C(1) << 62) - gap;
  float v[4] = {1, 2, 3, 4};
  pto_tensor src;
  pto_tensor_init(&src, v, sizeof v, PTO_F32, 2, two);
  int rc = pto_remote_store(&f.k[0], 7, 1, &bad, &src);
  size_t d = dirty(&f);
  if (rc == 0 || d)
    fprintf(stderr, "wrapping strides: store returned %d, %zu bytes of the peer's window written\n",
            rc, d);
  expect_refused(&f, rc, PTO_EINVAL, "overflows", "remote_store with wrapping strides");
  assert_int_equal(dirty(&f), 0);
  /* the same through put, get and store_add */
  pto_xfer_opts o = {1, 1, NULL, false};
  expect_refused(&f, pto_put(&f.k[0], 7, 1, &bad, &src, &o), PTO_EINVAL, "overflows", "put");
  expect_refused(&f, pto_remote_store_add(&f.k[0], 7, 1, &bad, &src), PTO_EINVAL, "overflows",
                 "store_add");
  expect_refused(&f, pto_get(&f.k[0], 7, 1, &src, &bad, NULL), PTO_EINVAL, "overflows", "get");
  assert_int_equal(dirty(&f), 0);
  teardown_dom(&f);
}

/* The local side of a transfer is held to its own buffer too. */
static void test_local_view_outside_its_buffer(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f);
  snapshot(&f);
  static float host[1024];
  int64_t n64 = 64;
  pto_tensor dst, src;
  win(&f, 0, "dst", PTO_F32, 1, &n64, &dst);
  pto_tensor_init(&src, host, sizeof host, PTO_F32, 1, &n64);
  src.buf_bytes = 16; /* the buffer holds 4 elements, the view reads 64 */
  int rc = pto_remote_store(&f.k[0], 7, 1, &dst, &src);
  expect_refused(&f, rc, PTO_EINVAL, "src", "remote_store from a view outside its buffer");
  assert_int_equal(dirty(&f), 0);
  teardown_dom(&f);
}

/* pto_split_range gives surplus blocks lo == hi: a view with 0 rows. */
static void test_empty_views_are_noops(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f);
  snapshot(&f);
  static float host[8 * 128], stage[4 * 64];
  int64_t sh[2] = {8, 128}, st = 4 * 64;
  pto_tensor mat, loc, tst;
  win(&f, 0, "mat", PTO_F32, 2, sh, &mat);
  pto_tensor_init(&loc, host, sizeof host, PTO_F32, 2, sh);
  pto_tensor_init(&tst, stage, sizeof stage, PTO_F32, 1, &st);
  pto_tensor em = mat, el = loc;
  em.shape[0] = el.shape[0] = 0; /* rows [0, 0) */
  pto_xfer_opts chunked = {4, 64, NULL, false}, staged = {4, 64, &tst, false};
  assert_int_equal(pto_put(&f.k[0], 7, 1, &em, &el, &chunked), 0);
  em.offset = el.offset = 8 * 128; /* rows [8, 8): one past the end */
  assert_int_equal(pto_put(&f.k[0], 7, 1, &em, &el, &chunked), 0);
  assert_int_equal(pto_get(&f.k[0], 7, 1, &el, &em, &chunked), 0);
  assert_int_equal(pto_put(&f.k[0], 7, 1, &em, &el, &staged), 0);
  assert_int_equal(pto_get(&f.k[0], 7, 1, &el, &em, &staged), 0);
  assert_int_equal(pto_put(&f.k[0], 7, 1, &em, &el, NULL), 0);
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &em, &el), 0);
  assert_int_equal(pto_remote_store_add(&f.k[0], 7, 1, &em, &el), 0);
  assert_int_equal(pto_remote_load(&f.k[0], 7, 1, &el, &em), 0);
  em.shape[0] = 8; /* empty columns instead */
  em.shape[1] = el.shape[1] = 0;
  el.shape[0] = 8;
  em.offset = el.offset = 0;
  assert_int_equal(pto_put(&f.k[0], 7, 1, &em, &el, &chunked), 0);
  assert_int_equal(pto_get(&f.k[0], 7, 1, &el, &em, &staged), 0);
  assert_int_equal(dirty(&f), 0);
  char det[384] = "";
  assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), 0);
  /* an empty view is still checked for what it is: a negative extent is not empty */
  em.shape[1] = -1;
  expect_refused(&f, pto_put(&f.k[0], 7, 1, &em, &el, &chunked), PTO_EINVAL, "shape[1]",
                 "put with shape -1");
  teardown_dom(&f);
}

/* The domain opened and its windows snapshot, *sig a view of the first
 * `cells` cells of rank 0's "sig". */
static void setup_sig(fixture *f, int64_t cells, pto_tensor *sig) {
  setup_dom(f);
  snapshot(f);
  win(f, 0, "sig", PTO_I64, 1, &cells, sig);
}

/* A notify from rank 0 to rank 1 on `cell`: refused with PTO_EINVAL and
 * details holding `needle`, nothing written. */
static void expect_notify_refused(fixture *f, const pto_tensor *cell, const char *needle,
                                  const char *what) {
  int rc = pto_notify(&f->k[0], 7, 1, cell, PTO_SIGNAL_ADD, 1);
  size_t d = dirty(f);
  if (rc == 0 || d) fprintf(stderr, "%s: notify returned %d, %zu bytes written\n", what, rc, d);
  expect_refused(f, rc, PTO_EINVAL, needle, what);
  assert_int_equal(dirty(f), 0);
}

/* A signal cell whose byte offset wraps to an in-bounds cell. */
static void test_signal_cell_offset_wraps(void **s) {
  (void)s;
  fixture f;
  pto_tensor sig;
  setup_sig(&f, 1, &sig);
  pto_tensor bad = sig;
  bad.offset = (INT64_C(1) << 61) + 1; /* 8 * offset wraps to byte 8: cell 1 */
  expect_notify_refused(&f, &bad, "signal cell", "notify on a wrapping cell offset");
  teardown_dom(&f);
}

/* A signal cell is held to its own view's buffer, as a transfer's views
 * are: cell 8 of the 8 cells of "sig" reaches past the buffer the view
 * was made of (into the next window buffer, "mat"), and a cell view
 * that is no view at all (NULL, a negative offset, no dims) is named for
 * what is wrong with it. */
static void test_signal_cell_outside_its_buffer(void **s) {
  (void)s;
  fixture f;
  pto_tensor sig;
  setup_sig(&f, 8, &sig);
  pto_tensor past = sig;
  past.offset = 8; /* the first byte past "sig" */
  expect_notify_refused(&f, &past, "reaches byte 72 but the buffer has 64 bytes",
                        "notify on a cell past its buffer");
  int32_t v = 7;
  expect_refused(&f, pto_signal_read(&f.k[0], 7, &past, &v), PTO_EINVAL, "reaches byte 72",
                 "signal_read on a cell past its buffer");
  expect_refused(&f, pto_signal_wait(&f.k[0], 7, &past, PTO_CMP_GE, 1, 10), PTO_EINVAL,
                 "reaches byte 72", "signal_wait on a cell past its buffer");
  expect_refused(&f, pto_notify(&f.k[0], 7, 1, NULL, PTO_SIGNAL_ADD, 1), PTO_EINVAL,
                 "the tensor is NULL", "notify on a NULL cell");
  pto_tensor neg = sig;
  neg.offset = -1;
  expect_refused(&f, pto_notify(&f.k[0], 7, 1, &neg, PTO_SIGNAL_ADD, 1), PTO_EINVAL,
                 "offset -1 is negative", "notify on a negative cell offset");
  pto_tensor nodims = sig;
  nodims.ndims = 0;
  expect_refused(&f, pto_signal_read(&f.k[0], 7, &nodims, &v), PTO_EINVAL, "ndims 0",
                 "signal_read on a cell of no dims");
  assert_int_equal(dirty(&f), 0);
  teardown_dom(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrapping_strides_write_nothing),
      cmocka_unit_test(test_local_view_outside_its_buffer),
      cmocka_unit_test(test_empty_views_are_noops),
      cmocka_unit_test(test_signal_cell_offset_wraps),
      cmocka_unit_test(test_signal_cell_outside_its_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
