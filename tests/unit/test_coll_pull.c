/* test_coll_pull.c — the mesh's pulled blocks on direct windows (coll.c,
 * coll_exchange): allreduce, allgather and broadcast of blocks above the
 * call table's data copy each rank's block once into its own mesh slot,
 * where the peers read it; reduce-scatter still puts a block into each
 * peer's scratch. Two ranks of one shm domain in one process, back to
 * back on one scratch, mixing the pulled calls with the pushed one, in
 * place (src inside dst: a rank's own block is the copy its peers read)
 * and not, every result checked against the sequential values. The
 * protocol itself is explored in test_coll_table_explorer.
 *
 * test_auto_mesh_then_ring: PTO_COLL_AUTO's allreduce takes the mesh
 * while nranks x block stays within PTO_COLL_MESH_MAX_BYTES (2 x 256 KiB
 * here) and the ring one element beyond, told apart by the scratch's RING
 * cell, which only the ring sets (coll.c, ring_allreduce). */
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

#define SPACE  (8u << 20)
#define DOM    13
#define CNT    2048 /* f32: 8 KiB, above the table's data and below the ring */
#define ROUNDS 60

typedef struct rank_arg {
  fixture *f;
  int r, rc, bad;
  char what[160];
  float in[2 * CNT], out[2 * CNT];
} rank_arg;

static float val(int r, int round, int i) { return (float)(r * 1000 + round * 7 + i % 113); }

static void vec(pto_tensor *t, float *p, int64_t n) {
  assert_int_equal(pto_tensor_init(t, p, (size_t)n * sizeof(float), PTO_F32, 1, &n), 0);
}

static bool expect(rank_arg *a, const char *what, int round, const float *got, int64_t i,
                   float want) {
  if (got[i] == want) return true;
  if (a->bad++) return false; /* the first one is named */
  snprintf(a->what, sizeof a->what, "rank %d round %d %s: [%lld] = %g, expected %g", a->r, round,
           what, (long long)i, (double)got[i], (double)want);
  return false;
}

static void *calls(void *p) {
  rank_arg *a = p;
  fixture *f = a->f;
  pto_kctx *k = &f->k[a->r];
  int64_t bytes = (int64_t)pto_coll_scratch_bytes(2, 2 * CNT * sizeof(float));
  pto_tensor sc;
  assert_int_equal(pto_comm_window_tensor(&f->c[0], DOM, a->r, "scratch", PTO_U8, 1, &bytes, &sc),
                   0);
  for (int round = 0; round < ROUNDS && !a->rc && !a->bad; round++) {
    pto_tensor src, dst;
    bool inplace = round % 2;
    /* allreduce (mesh), in place on odd rounds */
    for (int i = 0; i < CNT; i++)
      a->in[i] = val(a->r, round, i);
    vec(&src, a->in, CNT);
    vec(&dst, inplace ? a->in : a->out, CNT);
    if ((a->rc = pto_allreduce(k, DOM, &sc, &dst, &src, PTO_RED_SUM, PTO_COLL_MESH))) break;
    for (int i = 0; i < CNT; i++)
      if (!expect(a, "allreduce", round, (float *)dst.buf, i, val(0, round, i) + val(1, round, i)))
        break;
    /* allgather, in place on odd rounds (src is my block of dst) */
    float *ag = inplace ? a->in : a->out;
    for (int i = 0; i < CNT; i++)
      (inplace ? ag + a->r * CNT : a->in)[i] = val(a->r, round + 1, i);
    vec(&src, inplace ? ag + a->r * CNT : a->in, CNT);
    vec(&dst, ag, 2 * CNT);
    if ((a->rc = pto_allgather(k, DOM, &sc, &dst, &src))) break;
    for (int i = 0; i < 2 * CNT; i++)
      if (!expect(a, "allgather", round, ag, i, val(i / CNT, round + 1, i % CNT))) break;
    /* reduce-scatter: pushed blocks, on the same scratch */
    for (int i = 0; i < 2 * CNT; i++)
      a->in[i] = val(a->r, round + 2, i);
    vec(&src, a->in, 2 * CNT);
    vec(&dst, a->out, CNT);
    if ((a->rc = pto_reduce_scatter(k, DOM, &sc, &dst, &src, PTO_RED_SUM))) break;
    for (int i = 0; i < CNT; i++)
      if (!expect(a, "reduce_scatter", round, a->out, i,
                  val(0, round + 2, a->r * CNT + i) + val(1, round + 2, a->r * CNT + i)))
        break;
    /* broadcast from the root of the round */
    int root = round % 2;
    for (int i = 0; i < CNT; i++)
      a->in[i] = a->r == root ? val(root, round + 3, i) : -1.0f;
    vec(&src, a->in, CNT);
    vec(&dst, a->out, CNT);
    if ((a->rc = pto_broadcast(k, DOM, &sc, &dst, a->r == root ? &src : NULL, root))) break;
    for (int i = 0; i < CNT; i++)
      if (!expect(a, "broadcast", round, a->out, i, val(root, round + 3, i))) break;
  }
  return NULL;
}

/* Fails the test naming rank r's error (rc, with its task's details) or
 * its first wrong value (`what`, when `bad`). */
static void rank_check(fixture *f, int r, int rc, int bad, const char *what) {
  if (rc) {
    char det[384] = "";
    comm_task_error(&f->c[r], det, sizeof det);
    fail_msg("rank %d: %s: %s", r, pto_status_name(rc), det);
  }
  if (bad) fail_msg("%s", what);
}

static void test_pulled_and_pushed_calls(void **state) {
  (void)state;
  fixture f;
  pto_window_buffer bufs[] = {{"scratch", pto_coll_scratch_bytes(2, 2 * CNT * sizeof(float))}};
  comm_fixture_reserve(&f, SPACE, bufs, 1, DOM);
  comm_fixture_open(&f, 'p', 1);
  static rank_arg a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    memset(&a[r], 0, sizeof a[r]);
    a[r].f = &f;
    a[r].r = r;
    assert_int_equal(pthread_create(&th[r], NULL, calls, &a[r]), 0);
  }
  for (int r = 0; r < 2; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  for (int r = 0; r < 2; r++)
    rank_check(&f, r, a[r].rc, a[r].bad, a[r].what);
  comm_fixture_close(&f);
}

#define AUTO_CNT ((int64_t)PTO_COLL_MESH_MAX_BYTES / 2 / sizeof(float)) /* 2 ranks */

typedef struct auto_arg {
  fixture *f;
  int r, rc, bad;
  int64_t cnt;
  char what[160];
  float *in, *out;
} auto_arg;

static void *auto_call(void *p) {
  auto_arg *a = p;
  pto_kctx *k = &a->f->k[a->r];
  int64_t bytes = (int64_t)pto_coll_scratch_bytes(2, (size_t)(AUTO_CNT + 1) * sizeof(float));
  pto_tensor sc, src, dst;
  assert_int_equal(
      pto_comm_window_tensor(&a->f->c[0], DOM, a->r, "scratch", PTO_U8, 1, &bytes, &sc), 0);
  for (int64_t i = 0; i < a->cnt; i++)
    a->in[i] = val(a->r, 0, (int)i);
  vec(&src, a->in, a->cnt);
  vec(&dst, a->out, a->cnt);
  if ((a->rc = pto_allreduce(k, DOM, &sc, &dst, &src, PTO_RED_SUM, PTO_COLL_AUTO))) return NULL;
  for (int64_t i = 0; i < a->cnt && !a->bad; i++)
    if (a->out[i] != val(0, 0, (int)i) + val(1, 0, (int)i)) {
      a->bad = 1;
      snprintf(a->what, sizeof a->what, "rank %d, allreduce of %lld f32: [%lld] = %g, expected %g",
               a->r, (long long)a->cnt, (long long)i, (double)a->out[i],
               (double)(val(0, 0, (int)i) + val(1, 0, (int)i)));
    }
  return NULL;
}

/* The RING cell of rank r's scratch (the fourth 8-byte word of its
 * 64-byte-aligned start, coll.c's cell()). */
static int64_t ring_cell(fixture *f, int r) {
  int64_t bytes = (int64_t)pto_coll_scratch_bytes(2, (size_t)(AUTO_CNT + 1) * sizeof(float));
  pto_tensor sc;
  assert_int_equal(pto_comm_window_tensor(&f->c[0], DOM, r, "scratch", PTO_U8, 1, &bytes, &sc), 0);
  uintptr_t at = ((uintptr_t)sc.buf + 63) & ~(uintptr_t)63;
  return ((const int64_t *)at)[3];
}

static void test_auto_mesh_then_ring(void **state) {
  (void)state;
  fixture f;
  pto_window_buffer bufs[] = {
      {"scratch", pto_coll_scratch_bytes(2, (size_t)(AUTO_CNT + 1) * sizeof(float))}};
  comm_fixture_reserve(&f, SPACE, bufs, 1, DOM);
  comm_fixture_open(&f, 'a', 1);
  static auto_arg a[2];
  static float in[2][AUTO_CNT + 1], out[2][AUTO_CNT + 1];
  for (int call = 0; call < 2; call++) {
    int64_t cnt = AUTO_CNT + call; /* 2 x 256 KiB: the mesh; 4 bytes more: the ring */
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
      a[r] = (auto_arg){.f = &f, .r = r, .cnt = cnt, .in = in[r], .out = out[r]};
      assert_int_equal(pthread_create(&th[r], NULL, auto_call, &a[r]), 0);
    }
    for (int r = 0; r < 2; r++)
      assert_int_equal(pthread_join(th[r], NULL), 0);
    for (int r = 0; r < 2; r++) {
      rank_check(&f, r, a[r].rc, a[r].bad, a[r].what);
      int64_t ring = ring_cell(&f, r);
      if (call == 0 && ring != 0)
        fail_msg("rank %d: an allreduce of 2 x %lld bytes (PTO_COLL_MESH_MAX_BYTES) took the "
                 "ring (RING cell %lld), expected the mesh",
                 r, (long long)(cnt * 4), (long long)ring);
      if (call == 1 && ring == 0)
        fail_msg("rank %d: an allreduce of 2 x %lld bytes, beyond PTO_COLL_MESH_MAX_BYTES, took "
                 "the mesh (RING cell 0), expected the ring",
                 r, (long long)(cnt * 4));
    }
  }
  comm_fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pulled_and_pushed_calls),
      cmocka_unit_test(test_auto_mesh_then_ring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
