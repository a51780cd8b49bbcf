/* test_graph_modes.c — PTO_REDUX and PTO_COMMUTE inside captured graphs
 * (pto/graph.h, docs/graphs.md).
 *
 * REDUX: every launch sets the private copies to the op's identity again
 * and folds them in the capture's fixed order, so a replayed reduction
 * equals the sequential fold exactly (floats too, bit for bit) and equals
 * a dynamic run of the same orchestration on the same data byte for byte.
 * The program: four targets (f32 sum, i32 sum, i32 max, f32 max), each
 * updated by an INOUT task before and (but the last) after a group of NT contributions
 * of BLOCKS blocks each (NT x BLOCKS private copies: more than one slab,
 * so several combine tasks fold each target in turn). The f32 terms mix
 * magnitudes so that another fold order gives another sum. Launches bind
 * new data (new terms, new targets, new scalars), half of them in moved
 * memory, and a dynamic run of unrelated multi-block tasks between
 * launches reuses the task slots the replay fills.
 *
 * COMMUTE: a replay excludes COMMUTE tasks on the same bytes from each
 * other, also after another run has used the task slots (a launch must
 * not take a slot's COMMUTE views from whatever ran there last); and its
 * tasks keep their captured priorities (the trace marks them).
 *
 * Nothing depends on timing: the COMMUTE kernels sleep so that tasks left
 * unexcluded would overlap, but the test asserts only that none did. */
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

#define NT     100 /* contributions */
#define BLOCKS 3   /* blocks of each: one private copy per block */
#define NE     8   /* elements of each target */
#define NTGT   4

/* target t's op and dtype */
static const int tgt_op[NTGT] = {PTO_REDUX_SUM, PTO_REDUX_SUM, PTO_REDUX_MAX, PTO_REDUX_MAX};
static const int tgt_f32[NTGT] = {1, 0, 0, 1};

/* One data set: the bound buffers of the program. Targets are f32 or i32
 * (4 bytes); terms are given per dtype. */
typedef struct data {
  float tf[NT][BLOCKS][NE];
  int32_t ti[NT][BLOCKS][NE];
  uint32_t tgt[NTGT][NE]; /* f32 bits or i32 */
} data;

typedef struct prog {
  data *d;
  uint64_t s_pre, s_post; /* scalars of the INOUT tasks around the group */
} prog;

static int k_contrib_id, k_affine_id, k_plain_id;

/* tensors 0..3: the REDUX copies (targets' order); 4: f32 terms, 5: i32
 * terms of this contribution (BLOCKS x NE). copy op= term[block]. */
static int k_contrib(const pto_kctx *c) {
  const float *tf = (const float *)c->tensors[4].buf + c->tensors[4].offset;
  const int32_t *ti = (const int32_t *)c->tensors[5].buf + c->tensors[5].offset;
  for (int t = 0; t < NTGT; t++)
    for (int i = 0; i < NE; i++) {
      void *p = pto_tensor_at_linear(&c->tensors[t], i);
      int64_t k = (int64_t)c->block_idx * NE + i;
      if (tgt_f32[t]) {
        float *x = p, y = tf[k];
        *x = tgt_op[t] == PTO_REDUX_SUM ? *x + y : (y > *x ? y : *x);
      } else {
        int32_t *x = p, y = ti[k];
        *x = tgt_op[t] == PTO_REDUX_SUM ? (int32_t)((uint32_t)*x + (uint32_t)y) : (y > *x ? y : *x);
      }
    }
  return 0;
}

/* One step of the sequential oracle and of k_affine: x = 2x + s. (2x is
 * exact, so a fused multiply-add gives the same float.) */
static uint32_t affine(int f32, uint32_t x, uint64_t s) {
  if (f32) {
    float v;
    memcpy(&v, &x, 4);
    v = v * 2.0f + (float)(int64_t)s;
    memcpy(&x, &v, 4);
    return x;
  }
  return x * 2u + (uint32_t)s;
}

/* tensors 0.. (INOUT): the first targets; scalar 0: s. x = 2x + s. */
static int k_affine(const pto_kctx *c) {
  for (int t = 0; t < c->ntensors; t++)
    for (int i = 0; i < NE; i++) {
      uint32_t *p = pto_tensor_at_linear(&c->tensors[t], i);
      *p = affine(tgt_f32[t], *p, c->scalars[0]);
    }
  return 0;
}

/* A plain multi-block task (INOUT i32, block's element += 1): fills task
 * slots with fields unlike a contribution's. */
static int k_plain(const pto_kctx *c) {
  int32_t *p = pto_tensor_at_linear(&c->tensors[0], c->block_idx);
  *p += 1;
  return 0;
}

static void vec(pto_tensor *t, void *p, pto_dtype dt, int64_t n) {
  pto_tensor_init(t, p, (size_t)n * 4, dt, 1, &n);
}

static void target_views(pto_tensor *v, data *d) {
  for (int t = 0; t < NTGT; t++)
    vec(&v[t], d->tgt[t], tgt_f32[t] ? PTO_F32 : PTO_I32, NE);
}

static void submit_affine(pto_orch *o, pto_tensor *v, int n, uint64_t s) {
  pto_args a;
  pto_args_init(&a);
  for (int t = 0; t < n; t++)
    pto_args_inout(&a, &v[t]);
  pto_args_scalar(&a, s);
  pto_submit(o, k_affine_id, &a, NULL, NULL);
}

static void orchestrate(pto_orch *o, void *arg) {
  prog *p = arg;
  pto_tensor v[NTGT], tf, ti;
  target_views(v, p->d);
  submit_affine(o, v, NTGT, p->s_pre);
  for (int k = 0; k < NT; k++) {
    pto_args a;
    pto_args_init(&a);
    for (int t = 0; t < NTGT; t++)
      pto_args_redux(&a, &v[t], tgt_op[t]);
    int64_t n = BLOCKS * NE;
    pto_tensor_init(&tf, p->d->tf, sizeof p->d->tf, PTO_F32, 1, &n);
    tf.offset = (int64_t)k * BLOCKS * NE;
    pto_tensor_init(&ti, p->d->ti, sizeof p->d->ti, PTO_I32, 1, &n);
    ti.offset = (int64_t)k * BLOCKS * NE;
    pto_args_input(&a, &tf);
    pto_args_input(&a, &ti);
    pto_submit_opts so = {.block_num = BLOCKS};
    pto_submit(o, k_contrib_id, &a, &so, NULL);
  }
  /* the last target's contributions are folded by the orchestration's end */
  submit_affine(o, v, NTGT - 1, p->s_post);
}

static void orch_plain(pto_orch *o, void *arg) {
  pto_tensor t;
  vec(&t, arg, PTO_I32, 64);
  for (int k = 0; k < 300; k++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    pto_submit_opts so = {.block_num = 64};
    pto_submit(o, k_plain_id, &a, &so, NULL);
  }
}

/* ---- data and the sequential oracle ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)rng;
}

static void fill(data *d) {
  static const float mags[] = {1e8f, 1.0f, 3e-3f, 7e4f};
  for (int k = 0; k < NT; k++)
    for (int b = 0; b < BLOCKS; b++)
      for (int i = 0; i < NE; i++) {
        d->tf[k][b][i] = mags[rnd() % 4] * ((float)(rnd() % 2001) - 1000.0f) / 997.0f;
        d->ti[k][b][i] = (int32_t)rnd(); /* sums wrap */
      }
  for (int t = 0; t < NTGT; t++)
    for (int i = 0; i < NE; i++) {
      float f = (float)(rnd() % 1000) - 500.0f;
      int32_t v = (int32_t)(rnd() % 100000) - 50000;
      if (tgt_f32[t])
        memcpy(&d->tgt[t][i], &f, 4);
      else
        memcpy(&d->tgt[t][i], &v, 4);
    }
}

/* The targets after the program, folding in submission order, then block
 * order: what the runtime's combine order promises. */
static void oracle(const data *d, uint64_t s_pre, uint64_t s_post, uint32_t out[NTGT][NE]) {
  for (int t = 0; t < NTGT; t++)
    for (int i = 0; i < NE; i++) {
      uint32_t x = affine(tgt_f32[t], d->tgt[t][i], s_pre);
      for (int k = 0; k < NT; k++)
        for (int b = 0; b < BLOCKS; b++) {
          if (tgt_f32[t]) {
            float v, y = d->tf[k][b][i];
            memcpy(&v, &x, 4);
            v = tgt_op[t] == PTO_REDUX_SUM ? v + y : (y > v ? y : v);
            memcpy(&x, &v, 4);
          } else {
            int32_t v = (int32_t)x, y = d->ti[k][b][i];
            v = tgt_op[t] == PTO_REDUX_SUM ? (int32_t)((uint32_t)v + (uint32_t)y) : (y > v ? y : v);
            x = (uint32_t)v;
          }
        }
      out[t][i] = t == NTGT - 1 ? x : affine(tgt_f32[t], x, s_post);
    }
}

static void expect(const char *what, int rep, uint32_t got[NTGT][NE], uint32_t want[NTGT][NE]) {
  for (int t = 0; t < NTGT; t++)
    for (int i = 0; i < NE; i++)
      if (got[t][i] != want[t][i]) {
        float g, w;
        memcpy(&g, &got[t][i], 4);
        memcpy(&w, &want[t][i], 4);
        fail_msg("%s, launch %d: target %d (%s %s) element %d = %.9g / %d, expected %.9g / %d",
                 what, rep, t, tgt_f32[t] ? "f32" : "i32",
                 tgt_op[t] == PTO_REDUX_SUM ? "sum" : "max", i, (double)g, (int32_t)got[t][i],
                 (double)w, (int32_t)want[t][i]);
      }
}

static void run_ok(pto_chip *chip, pto_orch_fn fn, void *arg) {
  pto_error_info err;
  int rc = pto_chip_run(chip, fn, arg, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
}

/* The oracle's order matters for the f32 sum of these terms (else the
 * bit-exact checks would prove nothing about the order). */
static void assert_order_matters(const data *d) {
  bool differs = false;
  for (int i = 0; i < NE && !differs; i++) {
    float fwd = 0, rev = 0;
    for (int k = 0; k < NT; k++)
      for (int b = 0; b < BLOCKS; b++) {
        fwd += d->tf[k][b][i];
        rev += d->tf[NT - 1 - k][BLOCKS - 1 - b][i];
      }
    differs = fwd != rev;
  }
  assert_true(differs);
}

static void test_replayed_redux(void **state) {
  (void)state;
  static const int shapes[][2] = {{1, 1}, {4, 2}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    pto_chip_config cfg;
    pto_chip_config_init(&cfg);
    cfg.clusters = shapes[sh][0];
    cfg.schedulers = shapes[sh][1];
    cfg.watchdog_ms = 20000;
    pto_chip *chip = NULL;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "contrib", k_contrib, &k_contrib_id), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "affine", k_affine, &k_affine_id), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "plain", k_plain, &k_plain_id), PTO_OK);

    static data mem[2], keep;
    static int32_t plain[64];
    uint32_t want[NTGT][NE], dyn[NTGT][NE];
    fill(&mem[0]);
    assert_order_matters(&mem[0]);
    prog p = {&mem[0], 3, 5};
    oracle(&mem[0], p.s_pre, p.s_post, want);
    keep = mem[0];
    pto_graph *g = NULL;
    pto_error_info err;
    int rc = pto_graph_capture(chip, orchestrate, &p, &g, NULL, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    expect("capture", 0, mem[0].tgt, want);
    /* the scalars a launch binds are the program's: its two INOUT tasks'
     * (the combine tasks' own are not numbered) */
    pto_graph_info info;
    assert_int_equal(pto_graph_get_info(g, &info), PTO_OK);
    assert_int_equal(info.scalars, 2);
    assert_int_equal(info.buffers, NTGT + 2);

    for (int rep = 1; rep <= 6; rep++) {
      data *d = &mem[rep % 2]; /* odd launches move every buffer */
      fill(d);
      keep = *d;
      uint64_t sc[2] = {(uint64_t)rep, (uint64_t)(7 * rep)};
      oracle(d, sc[0], sc[1], want);
      pto_tensor bufs[NTGT + 2];
      for (int b = 0; b < NTGT + 2; b++)
        assert_int_equal(pto_graph_buffer(g, b, &bufs[b]), PTO_OK);
      for (int b = 0; b < NTGT + 2; b++) { /* rebased by where buffer b is in the data */
        uint8_t *base = (uint8_t *)&mem[0];
        bufs[b].buf = (uint8_t *)d + ((uint8_t *)bufs[b].buf - base);
      }
      pto_graph_bindings bind = {bufs, NTGT + 2, 2, sc};
      rc = pto_graph_launch(chip, g, &bind, NULL, &err);
      if (rc) pto_error_print(&err, stderr);
      assert_int_equal(rc, PTO_OK);
      expect("replay", rep, d->tgt, want);
      /* the same data through a dynamic run: the same bytes */
      memcpy(dyn, d->tgt, sizeof dyn);
      *d = keep;
      prog q = {d, sc[0], sc[1]};
      run_ok(chip, orchestrate, &q);
      expect("dynamic run", rep, d->tgt, dyn);
      if (rep == 3) run_ok(chip, orch_plain, plain); /* slots filled with other tasks */
    }
    pto_graph_destroy(g);
    pto_chip_destroy(chip);
  }
}

/* ---- COMMUTE ---- */

#define NCM 24 /* COMMUTE adds into one bin */

static atomic_int inside, most_inside;
static int k_commute_id;

/* tensor 0 (COMMUTE, i32 1): bin += scalar 0, with a count of the
 * tasks inside. */
static int k_commute(const pto_kctx *c) {
  int now = atomic_fetch_add(&inside, 1) + 1;
  int m = atomic_load(&most_inside);
  while (now > m && !atomic_compare_exchange_weak(&most_inside, &m, now)) {
  }
  int32_t *bin = pto_tensor_at_linear(&c->tensors[0], 0);
  int32_t v = *bin;
  usleep(200); /* unexcluded tasks would meet here */
  *bin = v + (int32_t)c->scalars[0];
  atomic_fetch_sub(&inside, 1);
  return 0;
}

static void orch_commute(pto_orch *o, void *arg) {
  pto_tensor t;
  vec(&t, arg, PTO_I32, 1);
  for (int k = 0; k < NCM; k++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_commute(&a, &t);
    pto_args_scalar(&a, (uint64_t)(k + 1));
    pto_submit(o, k_commute_id, &a, NULL, NULL);
  }
}

static void test_replayed_commute(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 4;
  cfg.schedulers = 2;
  cfg.watchdog_ms = 20000;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "commute", k_commute, &k_commute_id), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "plain", k_plain, &k_plain_id), PTO_OK);
  static int32_t bin, plain[64];
  pto_graph *g = NULL;
  pto_error_info err;
  int rc = pto_graph_capture(chip, orch_commute, &bin, &g, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  assert_int_equal(rc, PTO_OK);
  assert_int_equal(bin, NCM * (NCM + 1) / 2);
  for (int rep = 0; rep < 3; rep++) {
    run_ok(chip, orch_plain, plain); /* slots filled with other tasks */
    bin = rep;
    atomic_store(&most_inside, 0);
    rc = pto_graph_launch(chip, g, NULL, NULL, &err);
    if (rc) pto_error_print(&err, stderr);
    assert_int_equal(rc, PTO_OK);
    if (atomic_load(&most_inside) != 1)
      fail_msg("launch %d: %d COMMUTE tasks on one bin ran at once", rep,
               atomic_load(&most_inside));
    assert_int_equal(bin, rep + NCM * (NCM + 1) / 2);
  }
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

/* ---- priorities ---- */

#define NPRIO 12 /* tasks, every other one of priority 2 */

static void orch_prio(pto_orch *o, void *arg) {
  pto_tensor t;
  vec(&t, arg, PTO_I32, 64);
  for (int k = 0; k < NPRIO; k++) {
    pto_args a;
    pto_args_init(&a);
    pto_args_inout(&a, &t);
    pto_submit_opts so = {.block_num = 2, .priority = k % 2 ? 2 : 0};
    pto_submit(o, k_plain_id, &a, &so, NULL);
  }
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
    n++;
  return n;
}

/* A replay's tasks keep their captured priorities after another run has
 * used their slots: the trace marks each block of a prioritised task. */
static void test_replayed_priority(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  pto_chip *chip = NULL;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "plain", k_plain, &k_plain_id), PTO_OK);
  static int32_t buf[64], plain[64];
  pto_graph *g = NULL;
  assert_int_equal(pto_graph_capture(chip, orch_prio, buf, &g, NULL, NULL), PTO_OK);
  run_ok(chip, orch_plain, plain); /* slots filled with tasks of priority 0 */
  char path[] = "/tmp/pto_test_graph_modes_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(pto_chip_set_trace(chip, path), PTO_OK);
  assert_int_equal(pto_graph_launch(chip, g, NULL, NULL, NULL), PTO_OK);
  assert_int_equal(pto_chip_set_trace(chip, NULL), PTO_OK);
  FILE *in = fopen(path, "r");
  assert_non_null(in);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, in);
  text[n] = '\0';
  fclose(in);
  unlink(path);
  assert_int_equal(count(text, "\"name\":\"plain\""), 2 * NPRIO);
  if (count(text, "\"priority\":2") != NPRIO) /* 2 blocks of NPRIO / 2 tasks */
    fail_msg("the replay marked %d blocks with priority 2, the graph has %d",
             count(text, "\"priority\":2"), NPRIO);
  for (int i = 0; i < 64; i++)
    assert_int_equal(buf[i], i < 2 ? 2 * NPRIO : 0);
  pto_graph_destroy(g);
  pto_chip_destroy(chip);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_replayed_redux),
                                     cmocka_unit_test(test_replayed_commute),
                                     cmocka_unit_test(test_replayed_priority)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
