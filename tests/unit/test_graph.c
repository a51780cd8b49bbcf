/* test_graph.c — captured graphs (pto/graph.h): a capture is a real run
 * and records the graph; launches with new buffers and scalars compute
 * what a fresh run would; every refusal is PTO_EGRAPH naming what, starts
 * nothing, and the chip runs correctly afterwards; a replay's trace holds
 * every task's blocks and its edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pto/pto.h"
#include "trace_json.h"
#include "trace_read.h"

#define N 256

/* out = (rw ? out : 0) * 2 + in * 3 + k over the block's share of out,
 * wrapping: a chain of them (the refused capture's 70 extra tasks, as many
 * as ran before the refusal) doubles past INT32_MAX */
static int k_affine(const pto_kctx *c) {
  const pto_tensor *out = &c->tensors[0], *in = &c->tensors[1];
  int64_t n = pto_tensor_numel(out);
  int64_t lo = n * c->block_idx / c->block_num, hi = n * (c->block_idx + 1) / c->block_num;
  for (int64_t i = lo; i < hi; i++) {
    int32_t *o = pto_tensor_at_linear(out, i);
    int32_t x = *(int32_t *)pto_tensor_at_linear(in, i);
    uint32_t prev = c->scalars[1] ? (uint32_t)*o : 0;
    *o = (int32_t)(prev * 2u + (uint32_t)x * 3u + (uint32_t)c->scalars[0]);
  }
  return 0;
}

static int kid;

/* The program captured: tmp = f(x); y = g(tmp) in a scope; y (+)= h(x)
 * in 4 blocks started as one cohort; z = f(y) once more; scalars k0..k3. */
typedef struct prog {
  int32_t *x, *y, *z;
  uint64_t k[4];
  int host;   /* 1: a host read in the orchestration (refused while capturing) */
  int ntasks; /* chain this many extra tasks onto z (ring limits) */
} prog;

static void view(pto_tensor *t, int32_t *p) {
  int64_t shape[1] = {N};
  pto_tensor_init(t, p, sizeof(int32_t) * N, PTO_I32, 1, shape);
}

/* blocks < 0: -blocks blocks started as one cohort (sync_start) */
static void submit(pto_orch *o, pto_access out_mode, pto_tensor *out, const pto_tensor *in,
                   uint64_t k, int blocks) {
  pto_args a;
  pto_args_init(&a);
  if (out_mode == PTO_OUTPUT)
    pto_args_output(&a, out);
  else
    pto_args_add(&a, out_mode, out);
  pto_args_input(&a, in);
  pto_args_scalar(&a, k);
  pto_args_scalar(&a, out_mode == PTO_INOUT);
  pto_submit_opts op = {.block_num = blocks < 0 ? -blocks : blocks, .sync_start = blocks < 0};
  pto_submit(o, kid, &a, &op, NULL);
}

static void orchestrate(pto_orch *o, void *arg) {
  prog *p = arg;
  pto_tensor x, y, z, tmp;
  view(&x, p->x);
  view(&y, p->y);
  view(&z, p->z);
  int64_t shape[1] = {N};
  pto_scope_begin(o, PTO_SCOPE_AUTO);
  pto_tensor_desc(&tmp, PTO_I32, 1, shape);
  submit(o, PTO_OUTPUT, &tmp, &x, p->k[0], 1);
  submit(o, PTO_OUTPUT_EXISTING, &y, &tmp, p->k[1], 2);
  pto_scope_end(o);
  submit(o, PTO_INOUT, &y, &x, p->k[2], -4); /* a gang */
  if (p->host) {
    int32_t first[N];
    pto_orch_read(o, &y, first, -1);
  }
  submit(o, PTO_OUTPUT_EXISTING, &z, &y, p->k[3], 1);
  for (int i = 0; i < p->ntasks; i++)
    submit(o, PTO_INOUT, &z, &y, 1, 1);
}

/* The same, sequentially. */
static void reference(const int32_t *x, int32_t *y, int32_t *z, const uint64_t *k) {
  for (int i = 0; i < N; i++) {
    int32_t tmp = x[i] * 3 + (int32_t)k[0];
    y[i] = tmp * 3 + (int32_t)k[1];
    y[i] = y[i] * 2 + x[i] * 3 + (int32_t)k[2];
    z[i] = y[i] * 3 + (int32_t)k[3];
  }
}

static pto_chip *new_chip(int clusters) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = clusters;
  cfg.schedulers = clusters < 2 ? 1 : 2;
  cfg.task_slots = 64;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "affine", k_affine, &kid), PTO_OK);
  return chip;
}

static void fill(int32_t *x, int seed) {
  for (int i = 0; i < N; i++)
    x[i] = (i * 7 + seed * 13) % 101 - 50;
}

static int32_t X[N], Y[N], Z[N];

static pto_graph *capture(pto_chip *chip) {
  prog p = {X, Y, Z, {1, 2, 3, 4}, 0, 0};
  fill(X, 1);
  pto_graph *g = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orchestrate, &p, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_non_null(g);
  return g;
}

/* buffers in order of first use: x, y, z */
static void bind3(pto_tensor b[3], int32_t *x, int32_t *y, int32_t *z) {
  view(&b[0], x);
  view(&b[1], y);
  view(&b[2], z);
}

/* A launch with new memory and scalars equals the sequential program. */
static void launch_check(pto_chip *chip, pto_graph *g, int seed) {
  int32_t *x = malloc(sizeof X), *y = malloc(sizeof X), *z = malloc(sizeof X);
  int32_t wy[N], wz[N];
  fill(x, seed);
  memset(y, 0x5a, sizeof X);
  memset(z, 0x5a, sizeof X);
  uint64_t k[4] = {(uint64_t)seed, (uint64_t)seed * 5u, 7, (uint64_t)seed + 9u};
  uint64_t scalars[10] = {k[0], 0, k[1], 0, k[2], 1, k[3], 0};
  pto_tensor b[3];
  bind3(b, x, y, z);
  pto_graph_bindings gb = {b, 3, 8, scalars};
  pto_run_stats st;
  pto_error_info err;
  int rc = pto_graph_launch(chip, g, &gb, &st, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(st.tasks, 4);
  assert_int_equal(st.blocks, 8);
  assert_int_equal(st.sync_tasks, 1);
  reference(x, wy, wz, k);
  assert_memory_equal(y, wy, sizeof wy);
  assert_memory_equal(z, wz, sizeof wz);
  free(x);
  free(y);
  free(z);
}

static void test_capture_and_replay(void **state) {
  (void)state;
  pto_chip *chip = new_chip(3);
  pto_graph *g = capture(chip);
  /* the capture ran: its results are those of the program */
  int32_t wy[N], wz[N];
  uint64_t k[4] = {1, 2, 3, 4};
  reference(X, wy, wz, k);
  assert_memory_equal(Y, wy, sizeof wy);
  assert_memory_equal(Z, wz, sizeof wz);
  pto_graph_info info;
  assert_int_equal(pto_graph_get_info(g, &info), PTO_OK);
  assert_int_equal(info.tasks, 4);
  assert_int_equal(info.buffers, 3);
  assert_int_equal(info.scalars, 8);
  assert_true(info.heap_bytes >= sizeof(int32_t) * N);
  /* edges: t0->t1 (tmp), t1->t2 (y WAW), t2->t3 (y RAW) */
  assert_int_equal(info.edges, 3);
  pto_tensor b;
  assert_int_equal(pto_graph_buffer(g, 1, &b), PTO_OK);
  assert_ptr_equal(b.buf, Y);
  assert_int_equal(b.buf_bytes, sizeof Y);
  for (int i = 0; i < 3; i++)
    launch_check(chip, g, 10 + i);
  /* as captured: the captured buffers and scalars again */
  memset(Y, 0, sizeof Y);
  memset(Z, 0, sizeof Z);
  assert_int_equal(pto_graph_launch(chip, g, NULL, NULL, NULL), PTO_OK);
  assert_memory_equal(Y, wy, sizeof wy);
  assert_memory_equal(Z, wz, sizeof wz);
  /* an ordinary run between launches, and launches after it */
  prog p = {X, Y, Z, {1, 2, 3, 4}, 0, 0};
  assert_int_equal(pto_chip_run(chip, orchestrate, &p, NULL, NULL), PTO_OK);
  launch_check(chip, g, 20);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* A refused launch: PTO_EGRAPH, details naming `what`, nothing ran (the
 * output untouched), and the chip's next launch is correct. */
static void refused(pto_chip *chip, pto_graph *g, const pto_graph_bindings *b, const char *what) {
  memset(Z, 0x77, sizeof Z);
  pto_error_info err;
  pto_run_stats st;
  int rc = pto_graph_launch(chip, g, b, &st, &err);
  if (rc != PTO_EGRAPH || !strstr(err.details, what))
    fprintf(stderr, "expected a refusal naming '%s': %s, %s\n", what, pto_status_name(rc),
            err.details);
  assert_int_equal(rc, PTO_EGRAPH);
  assert_int_equal(err.code, PTO_EGRAPH);
  assert_non_null(strstr(err.details, what));
  assert_int_equal(st.tasks, 0);
  for (int i = 0; i < N; i++)
    assert_int_equal(Z[i], 0x77777777);
  launch_check(chip, g, 30);
}

/* Hands out the heap address of an OUTPUT buffer of N i32. */
static void orch_heap_view(pto_orch *o, void *arg) {
  pto_tensor *t = arg, x;
  int64_t shape[1] = {N};
  view(&x, X);
  pto_tensor_desc(t, PTO_I32, 1, shape);
  submit(o, PTO_OUTPUT, t, &x, 0, 1);
}

static void test_refusals(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2);
  pto_graph *g = capture(chip);
  int32_t *mem = calloc(4 * N, sizeof(int32_t));
  pto_tensor b[3];
  pto_graph_bindings gb = {b, 3, 0, NULL};

  /* size */
  bind3(b, mem, mem + N, mem + 2 * N);
  b[1].buf_bytes -= 4;
  refused(chip, g, &gb, "buffer 1 is bound to 1020 bytes, captured with 1024");
  /* dtype */
  bind3(b, mem, mem + N, mem + 2 * N);
  b[2].dtype = PTO_F32;
  refused(chip, g, &gb, "buffer 2 is bound as f32, captured as i32");
  /* aliasing: y and z disjoint at capture, the same memory now */
  bind3(b, mem, mem + N, mem + N);
  refused(chip, g, &gb, "bound buffers 1 and 2 overlap (0 bytes apart) but were disjoint");
  /* aliasing: partly overlapping */
  bind3(b, mem, mem + N, mem + N + N / 2);
  refused(chip, g, &gb, "bound buffers 1 and 2 overlap (512 bytes apart) but were disjoint");
  /* a refusal after a buffer moved, then the same bindings mended: the
   * launch must read the moved buffer (a rebase the refusal left half done
   * must not pass for done) */
  uint64_t k1[4] = {1, 2, 3, 4};
  int32_t wy1[N], wz1[N];
  bind3(b, mem, mem + N, mem + 2 * N);
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, NULL), PTO_OK);
  fill(mem + 3 * N, 33);
  b[0].buf = mem + 3 * N; /* x moves; y is refused; z stays */
  b[1].dtype = PTO_F32;
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, NULL), PTO_EGRAPH);
  b[1].dtype = PTO_I32;
  reference(mem + 3 * N, wy1, wz1, k1);
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, NULL), PTO_OK);
  assert_memory_equal(mem + N, wy1, sizeof wy1);
  assert_memory_equal(mem + 2 * N, wz1, sizeof wz1);
  /* a buffer in the chip's heap, where a launch puts the OUTPUT buffers */
  pto_tensor heap_view;
  assert_int_equal(pto_chip_run(chip, orch_heap_view, &heap_view, NULL, NULL), PTO_OK);
  bind3(b, mem, mem + N, heap_view.buf);
  refused(chip, g, &gb, "buffer 2 is bound inside the chip's heap");
  /* counts */
  gb.nbuffers = 2;
  refused(chip, g, &gb, "bindings give 2 buffers, the graph has 3");
  uint64_t sc[3] = {1, 2, 3};
  gb = (pto_graph_bindings){NULL, 0, 3, sc};
  refused(chip, g, &gb, "bindings give 3 scalars, the graph has 8");
  /* another chip (of the same configuration) */
  pto_chip *other = new_chip(2);
  pto_error_info err;
  assert_int_equal(pto_graph_launch(other, g, NULL, NULL, &err), PTO_EGRAPH);
  assert_non_null(strstr(err.details, "captured on another chip"));
  assert_int_equal(pto_graph_launch(chip, NULL, NULL, NULL, &err), PTO_EGRAPH);
  assert_non_null(strstr(err.details, "graph is NULL"));
  /* both chips still run correctly */
  int32_t wy[N], wz[N];
  uint64_t k[4] = {1, 2, 3, 4};
  prog p = {X, Y, Z, {1, 2, 3, 4}, 0, 0};
  fill(X, 1);
  memset(Z, 0, sizeof Z);
  assert_int_equal(pto_chip_run(other, orchestrate, &p, NULL, NULL), PTO_OK);
  reference(X, wy, wz, k);
  assert_memory_equal(Z, wz, sizeof wz);
  launch_check(chip, g, 31);
  pto_chip_destroy(other);
  free(mem);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* Buffers that overlap at capture: a view from an interior pointer of A. */
static int32_t A[2 * N];
static void orch_overlap(pto_orch *o, void *arg) {
  int32_t *a = arg;
  pto_tensor lo, hi;
  int64_t shape[1] = {N};
  pto_tensor_init(&lo, a, sizeof(int32_t) * 2 * N, PTO_I32, 1, shape);
  pto_tensor_init(&hi, a + N / 2, sizeof(int32_t) * 3 * N / 2, PTO_I32, 1, shape);
  submit(o, PTO_INOUT, &hi, &lo, 1, 1); /* reads and writes the shared half */
  submit(o, PTO_INOUT, &lo, &hi, 2, 1);
}

/* one block each, in element order, in place (each reads its own writes) */
static void overlap_reference(int32_t *a) {
  for (int i = 0; i < N; i++)
    a[N / 2 + i] = a[N / 2 + i] * 2 + a[i] * 3 + 1;
  for (int i = 0; i < N; i++)
    a[i] = a[i] * 2 + a[N / 2 + i] * 3 + 2;
}

static void test_overlap_refusals(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2);
  pto_graph *g;
  fill(A, 3);
  fill(A + N, 4);
  assert_int_equal(pto_graph_capture(chip, orch_overlap, A, &g, NULL, NULL), PTO_OK);
  pto_graph_info info;
  pto_graph_get_info(g, &info);
  assert_int_equal(info.buffers, 2);
  int32_t *mem = calloc(4 * N, sizeof(int32_t)), want[2 * N];
  pto_tensor b[2];
  pto_graph_buffer(g, 0, &b[0]);
  pto_graph_buffer(g, 1, &b[1]);
  /* buffers in order of first use: hi (task 0's output), then lo */
  assert_ptr_equal(b[0].buf, A + N / 2);
  assert_ptr_equal(b[1].buf, A);
  /* the same overlap at a new place: runs, correctly */
  b[1].buf = mem + N;
  b[0].buf = mem + N + N / 2;
  fill(mem + N, 5);
  fill(mem + 2 * N, 6);
  memcpy(want, mem + N, sizeof want);
  overlap_reference(want);
  pto_graph_bindings gb = {b, 2, 0, NULL};
  pto_error_info err;
  int rc = pto_graph_launch(chip, g, &gb, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_memory_equal(mem + N, want, sizeof want);
  /* another distance, then disjoint: refused, nothing ran */
  int32_t before[4 * N];
  b[0].buf = mem + N + N / 2 + 1;
  memcpy(before, mem, sizeof before);
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, &err), PTO_EGRAPH);
  assert_non_null(strstr(err.details, "overlap -516 bytes apart, but were -512 bytes apart"));
  b[1].buf = mem;
  b[0].buf = mem + 2 * N;
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, &err), PTO_EGRAPH);
  assert_non_null(strstr(err.details, "1 bound buffer pairs that overlapped at capture no longer"));
  assert_memory_equal(mem, before, sizeof before);
  /* and the graph still replays where it may */
  b[1].buf = mem + N;
  b[0].buf = mem + N + N / 2;
  memcpy(want, mem + N, sizeof want);
  overlap_reference(want);
  assert_int_equal(pto_graph_launch(chip, g, &gb, NULL, NULL), PTO_OK);
  assert_memory_equal(mem + N, want, sizeof want);
  free(mem);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* Captures the record cannot hold fail the run as PTO_EGRAPH, leave no
 * graph, and the chip's next run is correct. */
static void capture_refused(pto_chip *chip, prog *p, const char *what) {
  pto_graph *g = (pto_graph *)1;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orchestrate, p, &g, NULL, &err);
  if (rc != PTO_EGRAPH || !strstr(err.details, what))
    fprintf(stderr, "expected a refusal naming '%s': %s, %s\n", what, pto_status_name(rc),
            err.details);
  assert_int_equal(rc, PTO_EGRAPH);
  assert_null(g);
  assert_non_null(strstr(err.details, what));
  prog ok = {X, Y, Z, {1, 2, 3, 4}, 0, 0};
  int32_t wy[N], wz[N];
  fill(X, 2);
  memset(Z, 0, sizeof Z);
  assert_int_equal(pto_chip_run(chip, orchestrate, &ok, NULL, NULL), PTO_OK);
  reference(X, wy, wz, ok.k);
  assert_memory_equal(Z, wz, sizeof wz);
}

static void test_capture_refusals(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2); /* task_slots 64 */
  prog p = {X, Y, Z, {1, 2, 3, 4}, 1, 0};
  capture_refused(chip, &p, "pto_orch_read");
  p.host = 0;
  p.ntasks = 70;
  capture_refused(chip, &p, "task ring full");
  pto_graph *g = NULL;
  assert_int_equal(pto_graph_capture(chip, NULL, NULL, &g, NULL, NULL), PTO_EGRAPH);
  assert_int_equal(pto_graph_capture(chip, orchestrate, &p, NULL, NULL, NULL), PTO_EGRAPH);
  /* a NULL chip is named (before: a segmentation fault in the capture,
   * and a launch said the graph was captured on another chip) */
  pto_error_info err;
  int rc = pto_graph_capture(NULL, orchestrate, &p, &g, NULL, &err);
  if (rc != PTO_EGRAPH || !strstr(err.details, "pto_graph_capture: chip is NULL"))
    fail_msg("capture on a NULL chip: %s, '%s'; expected PTO_EGRAPH naming the chip",
             pto_status_name(rc), err.details);
  assert_null(g);
  g = capture(chip);
  rc = pto_graph_launch(NULL, g, NULL, NULL, &err);
  if (rc != PTO_EGRAPH || !strstr(err.details, "pto_graph_launch refused: chip is NULL"))
    fail_msg("launch on a NULL chip: %s, '%s'; expected PTO_EGRAPH naming the chip",
             pto_status_name(rc), err.details);
  launch_check(chip, g, 5);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* Rounds of producer -> FANQ consumers (rows of one buffer) -> reducer
 * reading the whole buffer: nothing retires while capturing, so the
 * TensorMap keeps every reducer's read of the buffer (no consumer's write
 * covers it), and each consumer conflicts with all the reducers before
 * it. The record keeps only the edges no other edge implies: a consumer
 * waits for its producer and its row's last writer, and the replay is
 * still ordered (the counts). */
#define FANQ   8
#define ROUNDS 40
static int k_count(const pto_kctx *c) {
  (*(int32_t *)pto_tensor_at_linear(&c->tensors[c->ntensors - 1], 0))++;
  return 0;
}
static int count_kid;
static int32_t F[(2 + FANQ) * 16];
static void orch_fan(pto_orch *o, void *arg) {
  (void)arg;
  pto_tensor r, a, b, row[FANQ];
  int64_t one[1] = {16}, shape[2] = {FANQ, 16};
  pto_tensor_init(&r, F, sizeof(int32_t) * 16, PTO_I32, 1, one);
  pto_tensor_init(&a, F + 16, sizeof(int32_t) * 16, PTO_I32, 1, one);
  pto_tensor_init(&b, F + 32, sizeof(int32_t) * 16 * FANQ, PTO_I32, 2, shape);
  for (int q = 0; q < FANQ; q++) {
    int64_t start[2] = {q, 0}, sh[2] = {1, 16};
    pto_tensor_slice(&b, start, sh, &row[q]);
  }
  for (int k = 0; k < ROUNDS; k++) {
    pto_submit_v(o, count_kid, PTO_IN(&r), PTO_INOUT(&a));
    for (int q = 0; q < FANQ; q++)
      pto_submit_v(o, count_kid, PTO_IN(&a), PTO_INOUT(&row[q]));
    pto_submit_v(o, count_kid, PTO_IN(&b), PTO_INOUT(&r));
  }
}

static void test_capture_keeps_needed_edges(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.dep_entries = 1024; /* the reduced edges fit; one per reducer read each would not */
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "count", k_count, &count_kid), PTO_OK);
  memset(F, 0, sizeof F);
  pto_graph *g = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orch_fan, NULL, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  pto_graph_info info;
  pto_graph_get_info(g, &info);
  printf("fan-out/fan-in, %d rounds: %lld tasks, %lld edges\n", ROUNDS, (long long)info.tasks,
         (long long)info.edges);
  /* producer: 1 (r) + FANQ (readers of a); consumer: 2; reducer: FANQ */
  assert_true(info.edges <= (int64_t)ROUNDS * (1 + 3 * FANQ));
  for (int rep = 1; rep <= 3; rep++) {
    memset(F, 0, sizeof F);
    assert_int_equal(pto_graph_launch(chip, g, NULL, NULL, NULL), PTO_OK);
    assert_int_equal(F[0], ROUNDS);
    assert_int_equal(F[16], ROUNDS);
    for (int q = 0; q < FANQ; q++)
      assert_int_equal(F[32 + 16 * q], ROUNDS);
  }
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* A graph launched again while its launch runs (here from its own
 * kernel, so without timing) is refused, and the running launch is not
 * disturbed. */
static pto_chip *busy_chip;
static pto_graph *busy_graph;
static int busy_rc;
static char busy_why[512];
static int k_relaunch(const pto_kctx *c) {
  (void)c;
  pto_error_info err;
  busy_rc = pto_graph_launch(busy_chip, busy_graph, NULL, NULL, &err);
  snprintf(busy_why, sizeof busy_why, "%s", err.details);
  return 0;
}
static void orch_relaunch_none(pto_orch *o, void *arg) {
  (void)o;
  (void)arg;
}
static void orch_relaunch(pto_orch *o, void *arg) {
  int kid_relaunch = *(int *)arg;
  pto_submit_v(o, kid_relaunch);
}

/* A graph destroyed during its own launch, by its first task's kernel:
 * the launch goes on (its later tasks' views and scalars live in the
 * graph) and frees it as it ends. Before, pto_graph_destroy freed it at
 * once, and the later tasks read freed memory (ASan: heap-use-after-free
 * in their arguments; Python's Graph.close from a kernel). */
static pto_graph *doomed_graph;
static int k_doom(const pto_kctx *c) {
  if (c->scalars[0]) pto_graph_destroy(doomed_graph);
  return 0;
}
static void orch_doom(pto_orch *o, void *arg) {
  const int *ids = arg; /* the doomer's kernel id; its flag is launch scalar 0 */
  pto_tensor y, x;
  view(&x, X);
  view(&y, Y);
  pto_args a;
  pto_args_init(&a);
  pto_args_inout(&a, &y);
  pto_args_scalar(&a, 0);
  pto_submit(o, ids[0], &a, NULL, NULL);
  for (int i = 0; i < 6; i++) /* y = y * 2 + x * 3 + i, after it */
    submit(o, PTO_INOUT, &y, &x, (uint64_t)i, 1);
}

static void test_destroy_during_its_launch(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2);
  int ids[1];
  assert_int_equal(pto_kernel_register_aiv(chip, "doom", k_doom, &ids[0]), PTO_OK);
  fill(X, 3);
  memset(Y, 0, sizeof Y);
  assert_int_equal(pto_graph_capture(chip, orch_doom, ids, &doomed_graph, NULL, NULL), PTO_OK);
  for (int i = 0; i < N; i++)
    Y[i] = 1;
  /* the doomer's flag, set: this launch destroys the graph; then each
   * affine task's (k, rw) as captured */
  uint64_t sc[13] = {1};
  for (int i = 0; i < 6; i++)
    sc[1 + 2 * i] = (uint64_t)i, sc[2 + 2 * i] = 1;
  pto_graph_bindings b = {.scalars = sc, .nscalars = 13};
  pto_error_info err;
  int rc = pto_graph_launch(chip, doomed_graph, &b, NULL, &err);
  if (rc) fail_msg("the launch that destroyed its graph: %s: %s", pto_status_name(rc), err.details);
  for (int i = 0; i < N; i++) {
    int32_t want = 1;
    for (int k = 0; k < 6; k++)
      want = want * 2 + X[i] * 3 + k;
    if (Y[i] != want) fail_msg("y[%d] = %d, expected %d", i, Y[i], want);
  }
  pto_chip_destroy(chip); /* the graph is gone: ASan reports it if it leaked */
}

/* A graph outlives its chip, and a chip made afterwards, likely where the
 * destroyed one was (malloc gives the freed block back), is another chip:
 * the launch is refused. Before, a chip at the same address passed for
 * the capture's: a launch ran its own kernels by the captured ids (or
 * none, and crashed), and filled more task slots than it has. */
static void test_launch_on_a_chip_made_in_place(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2);
  pto_graph *g = capture(chip);
  const void *was = chip;
  pto_chip_destroy(chip);
  pto_chip *other = new_chip(1);
  printf("the new chip is %sat the destroyed one's address\n",
         (const void *)other == was ? "" : "not ");
  memset(Z, 0x77, sizeof Z);
  pto_error_info err;
  int rc = pto_graph_launch(other, g, NULL, NULL, &err);
  if (rc != PTO_EGRAPH) fprintf(stderr, "launch: %s, %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, PTO_EGRAPH);
  assert_non_null(strstr(err.details, "captured on another chip"));
  for (int i = 0; i < N; i++)
    assert_int_equal(Z[i], 0x77777777);
  pto_graph_destroy(g);
  pto_chip_destroy(other);
}

static void test_launch_while_launched(void **state) {
  (void)state;
  pto_chip *chip = new_chip(1);
  int k;
  assert_int_equal(pto_kernel_register_aiv(chip, "relaunch", k_relaunch, &k), PTO_OK);
  busy_chip = chip;
  busy_graph = NULL;
  assert_int_equal(pto_graph_capture(chip, orch_relaunch, &k, &busy_graph, NULL, NULL), PTO_OK);
  /* the capture's own run launched a NULL graph */
  assert_int_equal(busy_rc, PTO_EGRAPH);
  busy_rc = 0;
  assert_int_equal(pto_graph_launch(chip, busy_graph, NULL, NULL, NULL), PTO_OK);
  assert_int_equal(busy_rc, PTO_EGRAPH);
  assert_non_null(strstr(busy_why, "the graph is being launched by another thread"));
  /* and once it ended, it launches again */
  assert_int_equal(pto_graph_launch(chip, busy_graph, NULL, NULL, NULL), PTO_OK);
  pto_graph_destroy(busy_graph);
  pto_chip_destroy(chip);
}

/* A launch whose run ends with a thread still inside (a kernel that
 * ignores pto_kctx_cancelled past shutdown_ms) leaves the graph to its
 * chip: that thread still reads the graph's views and scalars. Until it
 * has left, a relaunch is refused naming it (before: it passed the checks,
 * rewrote the scalars under the kernel, which read the relaunch's 7 for
 * its launch's 42, then the run was refused), and a destroy is deferred
 * (before: freed at once, the kernel read freed memory: ASan
 * heap-use-after-free); once it has left, the graph launches again, or
 * the chip frees it. */
static _Atomic int straggler_seen, straggler_in;
static int k_straggler(const pto_kctx *c) { /* sleeps scalar 0 ms, ignoring cancellation */
  atomic_store(&straggler_in, 1);
  usleep((useconds_t)c->scalars[0] * 1000);
  atomic_store(&straggler_seen, (int)c->scalars[1]);
  return 0;
}
static int k_fail_if(const pto_kctx *c) { /* once the straggler is inside */
  for (int i = 0; c->scalars[0] && i < 500 && !atomic_load(&straggler_in); i++)
    usleep(2000);
  return c->scalars[0] ? PTO_EKERNEL : 0;
}
static int strag_ids[2];
static void orch_straggler(pto_orch *o, void *arg) {
  (void)arg;
  pto_submit_v(o, strag_ids[0], PTO_SCALAR(0), PTO_SCALAR(7));
  pto_submit_v(o, strag_ids[1], PTO_SCALAR(0));
}

static void wait_unstuck(pto_chip *chip) {
  for (int i = 0; i < 500 && pto_chip_stuck(chip); i++)
    usleep(10000);
  assert_false(pto_chip_stuck(chip));
}

static void test_stuck_launch_holds_the_graph(void **state) {
  (void)state;
  for (int destroy = 0; destroy < 2; destroy++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = 2;
    cfg.schedulers = 1;
    cfg.shutdown_ms = 50;
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "straggler", k_straggler, &strag_ids[0]),
                     PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "fail_if", k_fail_if, &strag_ids[1]), PTO_OK);
    pto_graph *g = NULL;
    assert_int_equal(pto_graph_capture(chip, orch_straggler, NULL, &g, NULL, NULL), PTO_OK);
    atomic_store(&straggler_seen, -1);
    atomic_store(&straggler_in, 0);
    uint64_t sc[3] = {600, 42, 1}; /* sleep 600 ms, then read 42; the other task fails */
    pto_graph_bindings b = {.nscalars = 3, .scalars = sc};
    pto_error_info err;
    int rc = pto_graph_launch(chip, g, &b, NULL, &err);
    if (rc == PTO_OK || !strstr(err.details, "did not leave the run"))
      fail_msg("the launch: %s, '%s'; expected a failure naming the core that did not leave",
               pto_status_name(rc), err.details);
    assert_true(pto_chip_stuck(chip));
    if (destroy) {
      pto_graph_destroy(g); /* deferred: the kernel still reads its scalars */
    } else {
      rc = pto_graph_launch(chip, g, NULL, NULL, &err);
      if (rc != PTO_EGRAPH || !strstr(err.details, "a thread of its last launch is still inside"))
        fail_msg("relaunch while a thread is inside: %s, '%s'; expected PTO_EGRAPH naming it",
                 pto_status_name(rc), err.details);
    }
    wait_unstuck(chip);
    if (atomic_load(&straggler_seen) != 42)
      fail_msg("the straggler read scalar %d, expected its launch's 42",
               atomic_load(&straggler_seen));
    if (!destroy) { /* it has left: the graph launches again */
      rc = pto_graph_launch(chip, g, NULL, NULL, &err);
      if (rc)
        fail_msg("relaunch after the thread left: %s, '%s'", pto_status_name(rc), err.details);
      pto_graph_info gi;
      assert_int_equal(pto_graph_get_info(g, &gi), PTO_OK);
      if (gi.launches != 2 || gi.warm_launches != 0)
        fail_msg("launches %lld (warm %lld), expected 2 (warm 0)", (long long)gi.launches,
                 (long long)gi.warm_launches);
      pto_graph_destroy(g);
    } else { /* the next run gives the destroyed graph back: freed (ASan: no leak) */
      assert_int_equal(pto_chip_run(chip, orch_relaunch_none, NULL, NULL, NULL), PTO_OK);
    }
    pto_chip_destroy(chip);
  }
}

/* A replay's trace: every block of every task once, and the edges. */
static void test_replay_trace(void **state) {
  (void)state;
  pto_chip *chip = new_chip(2);
  pto_graph *g = capture(chip);
  char path[256];
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/pto_test_graph_%d.json", dir && *dir ? dir : "/tmp",
           (int)getpid());
  assert_int_equal(pto_chip_set_trace(chip, path), PTO_OK);
  assert_int_equal(pto_graph_launch(chip, g, NULL, NULL, NULL), PTO_OK);
  assert_int_equal(pto_chip_set_trace(chip, NULL), PTO_OK);
  trace_json_doc *d = NULL;
  char err[256] = "";
  assert_int_equal(trace_json_load(path, &d, err, sizeof err), 0);
  assert_int_equal(trace_validate(trace_json_root(d), err, sizeof err), 0);
  trace_summary s;
  assert_int_equal(trace_summarize(trace_json_root(d), &s, err, sizeof err), 0);
  assert_int_equal(s.tasks, 4);
  assert_int_equal(s.blocks, 8);
  assert_int_equal(s.dup_blocks, 0);
  assert_int_equal(s.edges, 3);
  assert_int_equal(s.missing_deps, 0);
  trace_summary_free(&s);
  trace_json_free(d);
  unlink(path);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_capture_and_replay),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_overlap_refusals),
      cmocka_unit_test(test_capture_refusals),
      cmocka_unit_test(test_replay_trace),
      cmocka_unit_test(test_capture_keeps_needed_edges),
      cmocka_unit_test(test_launch_on_a_chip_made_in_place),
      cmocka_unit_test(test_launch_while_launched),
      cmocka_unit_test(test_destroy_during_its_launch),
      cmocka_unit_test(test_stuck_launch_holds_the_graph),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
