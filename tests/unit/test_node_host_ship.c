/* test_node_host_ship.c — host tensors carried to a chip on another host
 * (src/node/host_ship.c): the packed bytes of the views that lie in host
 * memory (a strided column and a row of one tensor, a tensor outside host
 * memory ignored) round-trip; the diff after a "task" holds exactly the
 * elements it changed, and applying it on the other side writes those and
 * nothing else, so values another chip wrote there meanwhile survive; a
 * malformed diff is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/host_ship.h"
#include "pto/orch.h"

#define R 4
#define C 6

typedef struct side {
  float host[R * C]; /* "node host memory" of one process */
  float outside[4];  /* not host memory: never carried */
  pto_args args;
} side;

/* args: column 1 (strided, INPUT), row 2 (OUTPUT_EXISTING), outside. */
static void make_args(side *s) {
  int64_t shape[2] = {R, C}, st[2] = {0, 1}, col[2] = {R, 1}, st2[2] = {2, 0}, row[2] = {1, C};
  pto_tensor whole, c, r, o;
  int64_t four = 4;
  assert_int_equal(pto_tensor_init(&whole, s->host, sizeof s->host, PTO_F32, 2, shape), 0);
  assert_int_equal(pto_tensor_slice(&whole, st, col, &c), 0);
  assert_int_equal(pto_tensor_slice(&whole, st2, row, &r), 0);
  assert_int_equal(pto_tensor_init(&o, s->outside, sizeof s->outside, PTO_F32, 1, &four), 0);
  pto_args_init(&s->args);
  pto_args_input(&s->args, &c);
  pto_args_output_existing(&s->args, &r);
  pto_args_input(&s->args, &o);
}

static uintptr_t base(side *s) { return (uintptr_t)s->host; }

static void test_ship(void **state) {
  (void)state;
  static side a, b; /* a: rank 0's host, b: the other host's private copy */
  for (int i = 0; i < R * C; i++)
    a.host[i] = (float)i;
  make_args(&a);
  size_t n = ship_bytes(&a.args, base(&a), sizeof a.host);
  assert_int_equal(n, (R + C) * sizeof(float)); /* the column and the row, not `outside` */
  unsigned char *packed = malloc(n);
  assert_non_null(packed);
  ship_pack(&a.args, base(&a), sizeof a.host, packed);
  /* the other side: same views at its own addresses, stale memory */
  for (int i = 0; i < R * C; i++)
    b.host[i] = -1.0f;
  make_args(&b);
  ship_unpack(&b.args, base(&b), sizeof b.host, packed);
  for (int r = 0; r < R; r++)
    assert_true(b.host[r * C + 1] == (float)(r * C + 1));
  for (int k = 0; k < C; k++)
    assert_true(b.host[2 * C + k] == (float)(2 * C + k));
  assert_true(b.host[0] == -1.0f); /* not an argument: not carried */
  /* the task on b writes row 2 elements 3 and 4 */
  b.host[2 * C + 3] = 100.0f;
  b.host[2 * C + 4] = 101.0f;
  unsigned char *diff = NULL;
  size_t dn = ship_diff(&b.args, base(&b), sizeof b.host, packed, &diff);
  assert_true(dn > 0 && dn != SIZE_MAX);
  /* meanwhile another chip wrote row 2 element 0 on a's host */
  a.host[2 * C + 0] = 55.0f;
  assert_int_equal(ship_apply(&a.args, base(&a), sizeof a.host, diff, dn), 0);
  for (int i = 0; i < R * C; i++) {
    float want = i == 2 * C + 3 ? 100.0f : i == 2 * C + 4 ? 101.0f : i == 2 * C ? 55.0f : (float)i;
    if (a.host[i] != want) fprintf(stderr, "host[%d] = %g, expected %g\n", i, a.host[i], want);
    assert_true(a.host[i] == want);
  }
  /* nothing changed: no diff */
  unsigned char *none = NULL;
  ship_pack(&b.args, base(&b), sizeof b.host, packed);
  assert_int_equal(ship_diff(&b.args, base(&b), sizeof b.host, packed, &none), 0);
  assert_null(none);
  /* malformed: truncated, a tensor index out of range */
  assert_int_equal(ship_apply(&a.args, base(&a), sizeof a.host, diff, dn - 1), PTO_EINVAL);
  diff[0] = 9;
  assert_int_equal(ship_apply(&a.args, base(&a), sizeof a.host, diff, dn), PTO_EINVAL);
  free(diff);
  free(packed);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ship)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
