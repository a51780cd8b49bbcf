/* test_tensormap.c — dependencies follow the bytes a view touches, and a
 * covering write drops an older TensorMap entry only when it is ordered
 * after it.
 *
 * Runs through the public API: a slow first task and a fast second task
 * over the same bytes, built in different ways (an interior pointer as
 * base, another dtype over the same bytes, a second buffer that lies
 * inside the first). A missing edge lets the fast task run first, which
 * shows as a wrong value. Then the manual-scope case: a covering writer in
 * a manual scope (no edge to the earlier reader) must not take the
 * reader's entry away from a later automatic writer. Last, the TensorMap
 * itself: entries compared by bytes, covering writes that drop entries
 * only when ordered after them, and views of every size (index levels). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chip/tensormap.h"
#include "pto/pto.h"

#define NA 64 /* u32 elements of the test buffer */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Element i of t = the low bytes of v (1..8 bytes). */
static void store(const pto_tensor *t, int64_t i, uint64_t v) {
  memcpy(pto_tensor_at_linear(t, i), &v, pto_dtype_size((pto_dtype)t->dtype));
}

/* tensors[0] = scalar 1 everywhere, after sleeping scalar 0 ms. */
static int fill_kernel(const pto_kctx *c) {
  sleep_ms((int64_t)c->scalars[0]);
  for (int64_t i = 0; i < pto_tensor_numel(&c->tensors[0]); i++)
    store(&c->tensors[0], i, c->scalars[1]);
  return 0;
}

/* The elements of tensors[0], packed, to the bytes of tensors[1] (which
 * holds them), after sleeping scalar 0 ms. */
static int copy_kernel(const pto_kctx *c) {
  sleep_ms((int64_t)c->scalars[0]);
  const pto_tensor *in = &c->tensors[0];
  size_t es = pto_dtype_size((pto_dtype)in->dtype);
  for (int64_t i = 0; i < pto_tensor_numel(in); i++)
    memcpy((char *)c->tensors[1].buf + (size_t)i * es, pto_tensor_at_linear(in, i), es);
  return 0;
}

/* ---- 1. dependencies follow memory, however the views were built ---- */

typedef struct order_case {
  const char *name;
  int first_is_write; /* 1: first task fills `first`; 0: first task copies `first` to y */
  int second_is_write;
} order_case;

typedef struct order_run {
  int fill, copy;
  pto_tensor first, second, y;
  uint64_t v1, v2;
} order_run;

static void submit_access(pto_orch *o, const order_run *r, const pto_tensor *t, bool write,
                          int64_t sleep, uint64_t value) {
  pto_args a;
  pto_args_init(&a);
  if (write) {
    pto_args_output_existing(&a, t);
  } else {
    pto_args_input(&a, t);
    pto_args_output_existing(&a, &r->y);
  }
  pto_args_scalar(&a, (uint64_t)sleep);
  pto_args_scalar(&a, value);
  pto_submit(o, write ? r->fill : r->copy, &a, NULL, NULL);
}

typedef struct order_pair {
  order_run *r;
  bool w1, w2;
} order_pair;

static void orch_pair(pto_orch *o, void *arg) {
  order_pair *p = arg;
  submit_access(o, p->r, &p->r->first, p->w1, 150, p->r->v1); /* slow */
  submit_access(o, p->r, &p->r->second, p->w2, 0, p->r->v2);  /* fast */
}

static uint32_t a_mem[NA + 16];
static uint32_t y_mem[NA];

/* Runs `first` then `second` (write = fill, read = copy into y) and compares
 * a_mem and y_mem with the sequential result. */
static bool run_pair(const char *what, const pto_tensor *first, bool w1, const pto_tensor *second,
                     bool w2) {
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 1;
  cfg.watchdog_ms = 5000;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  order_run r = {
      .first = *first, .second = *second, .v1 = 0x5555555555555555ull, .v2 = 0x7777777777777777ull};
  assert_int_equal(pto_kernel_register_aiv(chip, "fill", fill_kernel, &r.fill), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "copy", copy_kernel, &r.copy), PTO_OK);
  int64_t ny = NA;
  assert_int_equal(pto_tensor_init(&r.y, y_mem, sizeof y_mem, PTO_I32, 1, &ny), PTO_OK);
  /* the sequential result */
  static uint32_t want_a[NA + 16], want_y[NA];
  for (int i = 0; i < NA + 16; i++)
    a_mem[i] = 0x01010101u * (uint32_t)(i + 1);
  memset(y_mem, 0, sizeof y_mem);
  pto_kctx k = {0};
  pto_tensor ts[2];
  uint64_t sc[2] = {0, 0};
  const pto_tensor *views[2] = {first, second};
  bool writes[2] = {w1, w2};
  uint64_t vals[2] = {r.v1, r.v2};
  for (int s = 0; s < 2; s++) {
    ts[0] = *views[s];
    ts[1] = r.y;
    sc[1] = vals[s];
    k.tensors = ts;
    k.ntensors = writes[s] ? 1 : 2;
    k.scalars = sc;
    if (writes[s])
      fill_kernel(&k);
    else
      copy_kernel(&k);
  }
  memcpy(want_a, a_mem, sizeof want_a);
  memcpy(want_y, y_mem, sizeof want_y);
  /* pto */
  for (int i = 0; i < NA + 16; i++)
    a_mem[i] = 0x01010101u * (uint32_t)(i + 1);
  memset(y_mem, 0, sizeof y_mem);
  order_pair p = {&r, w1, w2};
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_pair, &p, NULL, &err);
  pto_chip_destroy(chip);
  if (rc != PTO_OK) {
    fprintf(stderr, "%s: run returned %s\n", what, pto_status_name(rc));
    return false;
  }
  for (int i = 0; i < NA + 16; i++)
    if (a_mem[i] != want_a[i]) {
      fprintf(stderr, "%s: a[%d] is %08x, sequential order gives %08x\n", what, i, a_mem[i],
              want_a[i]);
      return false;
    }
  for (int i = 0; i < NA; i++)
    if (y_mem[i] != want_y[i]) {
      fprintf(stderr, "%s: y[%d] is %08x, sequential order gives %08x\n", what, i, y_mem[i],
              want_y[i]);
      return false;
    }
  return true;
}

static pto_tensor vec_at(void *base, pto_dtype dt, int64_t n) {
  pto_tensor t;
  assert_int_equal(pto_tensor_init(&t, base, (size_t)n * pto_dtype_size(dt), dt, 1, &n), PTO_OK);
  return t;
}

static void test_interior_pointer_views_are_ordered(void **state) {
  (void)state;
  pto_tensor whole = vec_at(a_mem, PTO_I32, NA);
  pto_tensor inner = vec_at(a_mem + 8, PTO_I32, 8);            /* a + 8 */
  pto_tensor inner16 = vec_at((char *)a_mem + 74, PTO_I16, 5); /* bytes 74..83 as i16 */
  pto_tensor wide64 = vec_at(a_mem, PTO_I64, NA / 2);          /* the same bytes as i64 */
  pto_tensor tail64 = vec_at(a_mem + 6, PTO_I64, 8);           /* a + 6, as i64 */
  /* a buffer declared inside another: [a+16, a+48) as a 4x8 matrix */
  pto_tensor inside;
  int64_t sh[2] = {4, 8};
  assert_int_equal(pto_tensor_init(&inside, a_mem + 16, 32 * 4, PTO_I32, 2, sh), PTO_OK);
  pto_tensor col;
  int64_t cs[2] = {0, 3}, csh[2] = {4, 1};
  assert_int_equal(pto_tensor_slice(&inside, cs, csh, &col), PTO_OK);
  /* read-after-write: the reader must see the writer's bytes */
  int bad = 0;
  bad += !run_pair("RAW: write a+8, read a", &inner, true, &whole, false);
  bad += !run_pair("RAW: write a as i64, read a+8", &wide64, true, &inner, false);
  bad += !run_pair("RAW: write bytes 74..83 as i16, read a", &inner16, true, &whole, false);
  bad += !run_pair("RAW: write a column of a buffer inside a, read a", &col, true, &whole, false);
  /* write-after-read: the writer must wait for the slow reader */
  bad += !run_pair("WAR: read a+8, write a", &inner, false, &whole, true);
  bad += !run_pair("WAR: read a+6 as i64, write the inner buffer", &tail64, false, &inside, true);
  /* write-after-write: the last writer wins */
  bad += !run_pair("WAW: write a+8, then a as i64", &inner, true, &wide64, true);
  bad += !run_pair("WAW: write the inner column, then bytes 74..83", &col, true, &inner16, true);
  if (bad) fail_msg("%d of 8 pairs ran out of submission order", bad);
}

/* ---- 5. a covering write in a manual scope keeps older entries ---- */

static atomic_int x_started, r_done, r_done_seen;

/* The reader R: waits (at most 300 ms) for the later writer X to start; X
 * must not start before R completes, so R always waits the full time. */
static int r_kernel(const pto_kctx *c) {
  (void)c;
  for (int i = 0; i < 300 && !atomic_load(&x_started); i++)
    sleep_ms(1);
  atomic_store(&r_done, 1);
  return 0;
}
static int nop_kernel(const pto_kctx *c) {
  (void)c;
  return 0;
}
/* The later automatic writer X: records whether R had completed. */
static int x_kernel(const pto_kctx *c) {
  (void)c;
  atomic_store(&r_done_seen, atomic_load(&r_done));
  atomic_store(&x_started, 1);
  return 0;
}

typedef struct manual_run {
  int r, w, x;
  pto_tensor t;
  int rc[4];
} manual_run;

static void orch_manual(pto_orch *o, void *arg) {
  manual_run *m = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &m->t);
  m->rc[0] = pto_submit(o, m->r, &a, NULL, NULL); /* R (automatic) */
  m->rc[1] = pto_scope_begin(o, PTO_SCOPE_MANUAL);
  pto_args_init(&a);
  pto_args_output_existing(&a, &m->t);
  m->rc[2] = pto_submit(o, m->w, &a, NULL, NULL); /* W covers R's view, no edge */
  pto_scope_end(o);
  pto_args_init(&a);
  pto_args_output_existing(&a, &m->t);
  m->rc[3] = pto_submit(o, m->x, &a, NULL, NULL); /* X: write-after-read on R */
}

static void test_manual_scope_covering_write_keeps_war_edge(void **state) {
  (void)state;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  cfg.schedulers = 1;
  cfg.watchdog_ms = 5000;
  pto_chip *chip;
  assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
  manual_run m = {0};
  assert_int_equal(pto_kernel_register_aiv(chip, "r", r_kernel, &m.r), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "w", nop_kernel, &m.w), PTO_OK);
  assert_int_equal(pto_kernel_register_aiv(chip, "x", x_kernel, &m.x), PTO_OK);
  m.t = vec_at(a_mem, PTO_I32, NA);
  atomic_store(&x_started, 0);
  atomic_store(&r_done, 0);
  atomic_store(&r_done_seen, -1);
  pto_error_info err;
  int rc = pto_chip_run(chip, orch_manual, &m, NULL, &err);
  pto_chip_destroy(chip);
  assert_int_equal(rc, PTO_OK);
  for (int i = 0; i < 4; i++)
    assert_int_equal(m.rc[i], PTO_OK);
  if (atomic_load(&r_done_seen) != 1)
    fail_msg("the writer after the manual scope started while the earlier reader was still "
             "running (r_done seen %d, want 1)",
             atomic_load(&r_done_seen));
}

/* ---- the TensorMap itself ---- */

typedef struct seen {
  int64_t ids[16];
  int n;
  bool ordered; /* what the callback answers */
} seen;

static bool on_dep(void *arg, int64_t producer) {
  seen *s = arg;
  for (int i = 0; i < s->n; i++)
    if (s->ids[i] == producer) return s->ordered;
  if (s->n < 16) s->ids[s->n++] = producer;
  return s->ordered;
}

/* Producers reported for (view, mode) by task `task`, tasks below
 * `oldest` retired, as a bit set. */
static unsigned access_deps_at(tmap *m, const pto_tensor *v, tmap_mode mode, int64_t task,
                               int64_t oldest, bool ordered) {
  seen s = {.n = 0, .ordered = ordered};
  assert_int_equal(tmap_access(m, v, mode, task, oldest, on_dep, &s), PTO_OK);
  unsigned bits = 0;
  for (int i = 0; i < s.n; i++)
    bits |= 1u << s.ids[i];
  return bits;
}

/* The same, nothing retired. */
static unsigned access_deps(tmap *m, const pto_tensor *v, tmap_mode mode, int64_t task,
                            bool ordered) {
  return access_deps_at(m, v, mode, task, 0, ordered);
}

static void test_tmap_by_bytes_and_ordered_covering(void **state) {
  (void)state;
  tmap m;
  assert_int_equal(tmap_init(&m, 64), PTO_OK);
  pto_tensor whole = vec_at(a_mem, PTO_I32, NA), inner = vec_at(a_mem + 8, PTO_I32, 8);
  pto_tensor as64 = vec_at(a_mem, PTO_I64, NA / 2);
  /* 1 reads a; 2 writes a + 8: write-after-read through another base */
  assert_int_equal(access_deps(&m, &whole, TMAP_READ, 1, true), 0u);
  assert_int_equal(access_deps(&m, &inner, TMAP_WRITE, 2, true), 1u << 1);
  /* 3 writes all of a as i64 but takes no edge (manual scope): entries stay */
  assert_int_equal(access_deps(&m, &as64, TMAP_WRITE, 3, false), (1u << 1) | (1u << 2));
  assert_int_equal(m.used, 3u);
  /* 4 writes a (automatic): waits for 1, 2 and 3, and covering them by
   * bytes (other base, other dtype) replaces all three */
  assert_int_equal(access_deps(&m, &whole, TMAP_WRITE, 4, true), (1u << 1) | (1u << 2) | (1u << 3));
  assert_int_equal(m.used, 1u);
  assert_int_equal(access_deps(&m, &inner, TMAP_READ, 5, true), 1u << 4);
  /* a partial write covers nothing: 6 writes a + 8 .. a + 15 as i16 halves */
  int64_t n4 = 4;
  pto_tensor half;
  assert_int_equal(pto_tensor_init(&half, a_mem + 8, 8, PTO_I16, 1, &n4), PTO_OK);
  assert_int_equal(access_deps(&m, &half, TMAP_WRITE, 6, true), (1u << 4) | (1u << 5));
  assert_int_equal(m.used, 3u); /* 4 (a), 5 (a + 8 ..) and 6 */
  tmap_destroy(&m);
}

/* Views of every size find each other: a huge view is one entry at a
 * coarse level; small views inside it, at either end, still meet it. */
static void test_tmap_levels(void **state) {
  (void)state;
  static uint8_t big[(8 << 20) + 64];
  tmap m;
  assert_int_equal(tmap_init(&m, 256), PTO_OK);
  int64_t nbig = 8 << 20, one = 1, n100k = 100000;
  pto_tensor all = vec_at(big, PTO_U8, nbig);
  pto_tensor first = vec_at(big, PTO_U8, one), last = vec_at(big + nbig - 1, PTO_U8, one);
  pto_tensor mid = vec_at(big + 3000000, PTO_U8, n100k);
  pto_tensor after = vec_at(big + nbig, PTO_U8, 64);
  assert_int_equal(access_deps(&m, &last, TMAP_WRITE, 1, true), 0u);
  assert_int_equal(access_deps(&m, &mid, TMAP_WRITE, 2, true), 0u);
  assert_int_equal(access_deps(&m, &all, TMAP_READ, 3, true), (1u << 1) | (1u << 2));
  assert_int_equal(access_deps(&m, &first, TMAP_WRITE, 4, true), 1u << 3);
  assert_int_equal(access_deps(&m, &last, TMAP_WRITE, 5, true), (1u << 1) | (1u << 3));
  assert_int_equal(access_deps(&m, &after, TMAP_WRITE, 6, true), 0u);
  int64_t n2 = 2;
  pto_tensor straddle = vec_at(big + nbig - 1, PTO_U8, n2); /* last byte and the next */
  assert_int_equal(access_deps(&m, &straddle, TMAP_READ, 7, true), (1u << 5) | (1u << 6));
  /* a malformed view claims all of memory: it meets everything */
  pto_tensor bad = first;
  bad.stride[0] = 0;
  assert_int_equal(access_deps(&m, &bad, TMAP_READ, 8, true),
                   (1u << 2) | (1u << 4) | (1u << 5) | (1u << 6));
  assert_int_equal(access_deps(&m, &after, TMAP_WRITE, 9, true), (1u << 6) | (1u << 7) | (1u << 8));
  tmap_destroy(&m);
}

/* Readers and writers of one chunk (kept in separate chains): a read meets
 * every writer, including a read-write access, and no reader; a write
 * meets both; a covering ordered write leaves only itself. */
static void test_tmap_readers_and_writers(void **state) {
  (void)state;
  tmap m;
  assert_int_equal(tmap_init(&m, 64), PTO_OK);
  pto_tensor row0 = vec_at(a_mem, PTO_I32, 8), row1 = vec_at(a_mem + 8, PTO_I32, 8);
  pto_tensor both = vec_at(a_mem, PTO_I32, 16);
  assert_int_equal(access_deps(&m, &row0, TMAP_WRITE, 1, true), 0u);
  assert_int_equal(access_deps(&m, &row0, TMAP_READ, 2, true), 1u << 1);
  assert_int_equal(access_deps(&m, &row0, TMAP_READ, 3, true), 1u << 1);
  assert_int_equal(access_deps(&m, &row0, TMAP_READ_WRITE, 4, true),
                   (1u << 1) | (1u << 2) | (1u << 3));
  assert_int_equal(m.used, 1u); /* 4 covers 1, 2 and 3 and is ordered after them */
  assert_int_equal(access_deps(&m, &row0, TMAP_READ, 5, true), 1u << 4);
  assert_int_equal(access_deps(&m, &row1, TMAP_WRITE, 6, true), 0u);
  assert_int_equal(access_deps(&m, &both, TMAP_READ, 7, true), (1u << 4) | (1u << 6));
  assert_int_equal(access_deps(&m, &row1, TMAP_READ, 8, true), 1u << 6);
  assert_int_equal(access_deps(&m, &both, TMAP_WRITE, 9, true),
                   (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8));
  assert_int_equal(m.used, 1u);
  assert_int_equal(access_deps(&m, &row1, TMAP_READ, 10, true), 1u << 9);
  tmap_destroy(&m);
}

/* A sole writer (tensormap.c): a dense view updated again (READ_WRITE)
 * by a task ordered after its only writer is taken without a lookup, the
 * entry replaced in place. Every way another entry comes to meet it must
 * end that, or a later access misses a producer or reports a dropped one. */
static void test_tmap_sole_writer(void **state) {
  (void)state;
  const tmap_mode RW = TMAP_READ_WRITE;
  tmap m;
  assert_int_equal(tmap_init(&m, 64), PTO_OK);
  pto_tensor row = vec_at(a_mem, PTO_I32, 8), as16 = vec_at(a_mem, PTO_I16, 16);
  pto_tensor head = vec_at(a_mem, PTO_I32, 4), tail = vec_at(a_mem + 4, PTO_I32, 4);
  /* a chain of updates of one row: each waits for the last, one entry */
  assert_int_equal(access_deps(&m, &row, RW, 1, true), 0u);
  assert_int_equal(access_deps(&m, &row, RW, 2, true), 1u << 1);
  assert_int_equal(access_deps(&m, &as16, RW, 3, true), 1u << 2); /* the same bytes */
  assert_int_equal(m.used, 1u);
  /* the same task reads it too (a second argument): the next update is
   * ordered after both entries of task 3 and replaces them */
  assert_int_equal(access_deps(&m, &row, TMAP_READ, 3, true), 0u);
  assert_int_equal(m.used, 2u);
  assert_int_equal(access_deps(&m, &row, RW, 4, true), 1u << 3);
  assert_int_equal(m.used, 1u);
  assert_int_equal(access_deps(&m, &head, TMAP_WRITE, 5, true), 1u << 4);
  /* 5 covers the head only: 4 keeps the tail, and an update of the row
   * waits for both */
  assert_int_equal(access_deps(&m, &row, RW, 6, true), (1u << 4) | (1u << 5));
  assert_int_equal(m.used, 1u);
  /* an update not ordered after it (a manual scope) stays beside it */
  assert_int_equal(access_deps(&m, &row, RW, 7, false), 1u << 6);
  assert_int_equal(m.used, 2u);
  assert_int_equal(access_deps(&m, &row, RW, 8, true), (1u << 6) | (1u << 7));
  assert_int_equal(m.used, 1u);
  /* a reader of part of it: the next update waits for both */
  assert_int_equal(access_deps(&m, &tail, TMAP_READ, 9, true), 1u << 8);
  assert_int_equal(access_deps(&m, &row, RW, 10, true), (1u << 8) | (1u << 9));
  assert_int_equal(m.used, 1u);
  /* readers of the row itself: each waits for the writer only, the next
   * update for the writer and both readers */
  assert_int_equal(access_deps(&m, &row, TMAP_READ, 11, true), 1u << 10);
  assert_int_equal(access_deps(&m, &row, TMAP_READ, 12, true), 1u << 10);
  assert_int_equal(access_deps(&m, &row, RW, 13, true), (1u << 10) | (1u << 11) | (1u << 12));
  assert_int_equal(m.used, 1u);
  /* retired: the next update does not wait for 13, the one after for 14 */
  assert_int_equal(access_deps_at(&m, &row, RW, 14, 14, true), 0u);
  assert_int_equal(access_deps_at(&m, &row, RW, 15, 14, true), 1u << 14);
  assert_int_equal(m.used, 1u);
  /* a strided view over the same range (every other element) is no
   * dense view: it meets the writer, and an update of the row after it
   * waits for both */
  int64_t n4 = 4, s2 = 2;
  pto_tensor odd;
  assert_int_equal(pto_tensor_init_strided(&odd, a_mem, 8 * 4, PTO_I32, 1, &n4, &s2, 1), PTO_OK);
  assert_int_equal(access_deps(&m, &odd, TMAP_READ, 16, true), 1u << 15);
  assert_int_equal(access_deps(&m, &row, RW, 17, true), (1u << 15) | (1u << 16));
  assert_int_equal(m.used, 1u);
  /* nor is an update of its first and last elements, which covers the
   * range and not the bytes: the row's writer stays for the middle */
  int64_t n2 = 2, s7 = 7;
  pto_tensor ends;
  assert_int_equal(pto_tensor_init_strided(&ends, a_mem, 8 * 4, PTO_I32, 1, &n2, &s7, 0), PTO_OK);
  assert_int_equal(access_deps(&m, &ends, RW, 18, true), 1u << 17);
  pto_tensor mid = vec_at(a_mem + 2, PTO_I32, 2);
  assert_int_equal(access_deps(&m, &mid, TMAP_READ, 19, true), 1u << 17);
  assert_int_equal(access_deps(&m, &row, RW, 20, true), (1u << 17) | (1u << 18) | (1u << 19));
  assert_int_equal(m.used, 1u);
  /* a write of more than the row drops the row's entry: a later update of
   * the row waits for that writer alone */
  pto_tensor two_rows = vec_at(a_mem, PTO_I32, 16);
  assert_int_equal(access_deps(&m, &two_rows, TMAP_WRITE, 21, true), 1u << 20);
  assert_int_equal(m.used, 1u);
  assert_int_equal(access_deps(&m, &row, RW, 22, true), 1u << 21);
  assert_int_equal(m.used, 2u); /* 21 keeps the second row */
  /* a plain write of the row, then an update: not a sole writer's (only
   * updates are), the lookup's answer */
  assert_int_equal(access_deps(&m, &row, TMAP_WRITE, 23, true), 1u << 22);
  assert_int_equal(access_deps(&m, &row, RW, 24, true), 1u << 23);
  assert_int_equal(access_deps(&m, &row, RW, 25, true), 1u << 24);
  assert_int_equal(m.used, 2u);
  tmap_destroy(&m);
  /* one task updates the row twice (two arguments): the second entry is
   * no sole writer, the next task's update waits for that task and
   * replaces both entries */
  assert_int_equal(tmap_init(&m, 64), PTO_OK);
  assert_int_equal(access_deps(&m, &row, RW, 1, true), 0u);
  assert_int_equal(access_deps(&m, &row, RW, 1, true), 0u);
  assert_int_equal(m.used, 2u);
  assert_int_equal(access_deps(&m, &row, RW, 2, true), 1u << 1);
  assert_int_equal(m.used, 1u);
  tmap_destroy(&m);
  /* two sole writers, retired, dropped by the lookup of one write of both
   * rows (and the row before): one entry is taken again for it, the other
   * stays free; the first update of either row after it (each in turn:
   * the free one depends on the walk's order) waits for that writer, and
   * is not taken for an update of the freed entry. Row pairs at 8 places,
   * so that the free entry's hint is not also the new writer's in every
   * one (hints are hashed) */
  static _Alignas(64) uint32_t rows[8 * 64];
  for (int at = 0; at < 8; at++)
    for (int first = 0; first < 2; first++) {
      uint32_t *b = rows + at * 64 + 8 + at;
      pto_tensor c = vec_at(b, PTO_I32, 8), d = vec_at(b + 8, PTO_I32, 8);
      pto_tensor bcd = vec_at(b - 8, PTO_I32, 24);
      assert_int_equal(tmap_init(&m, 64), PTO_OK);
      assert_int_equal(access_deps(&m, &c, RW, 1, true), 0u);
      assert_int_equal(access_deps(&m, &d, RW, 2, true), 0u);
      assert_int_equal(access_deps_at(&m, &bcd, RW, 3, 3, true), 0u);
      assert_int_equal(m.used, 1u);
      assert_int_equal(access_deps_at(&m, first ? &d : &c, RW, 4, 3, true), 1u << 3);
      assert_int_equal(m.used, 2u);
      tmap_destroy(&m);
    }
}

/* tmap_clear between runs: in time proportional to the entries used
 * (few: only their buckets are emptied) or every bucket (many); either way
 * no entry of before the clear is found after it, at any level, and the
 * map works as new. Task ids restart after a clear, as in a chip's runs. */
static void clear_case(int nfill) {
  static uint8_t big[(8 << 20) + 64];
  tmap m;
  assert_int_equal(tmap_init(&m, 1024), PTO_OK); /* 256 buckets */
  int64_t nbig = 8 << 20, n100k = 100000, one = 1;
  pto_tensor all = vec_at(big, PTO_U8, nbig), mid = vec_at(big + 3000000, PTO_U8, n100k);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(access_deps(&m, &all, TMAP_WRITE, 1, true), 0u);
    assert_int_equal(access_deps(&m, &mid, TMAP_READ, 2, true), 1u << 1);
    for (int i = 0; i < nfill; i++) { /* a 4 KiB chunk of its own each */
      pto_tensor v = vec_at(big + (size_t)i * 4096 % (size_t)nbig, PTO_U8, one);
      seen sn = {.n = 0, .ordered = false}; /* no edge: every entry stays */
      assert_int_equal(tmap_access(&m, &v, TMAP_READ, 3, 0, on_dep, &sn), PTO_OK);
    }
    unsigned used = m.used;
    tmap_clear(&m);
    /* a new task (id 7) writes one byte: nothing of before meets it; then
     * a write of the whole buffer (more chunks than buckets: every bucket
     * is scanned) meets task 7 alone */
    int64_t one_b = 1;
    pto_tensor last = vec_at(big + nbig - 1, PTO_U8, one_b);
    unsigned first = access_deps(&m, &last, TMAP_WRITE, 7, true);
    seen sn = {.n = 0, .ordered = true};
    tmap_conflicts(&m, &all, TMAP_WRITE, 0, on_dep, &sn);
    if (first || sn.n != 1 || sn.ids[0] != 7)
      fail_msg("round %d, %d entries filled (%u in use): after tmap_clear a new write met "
               "tasks 0x%x and a write of the whole buffer met %d task(s), first %lld (expected "
               "none, then task 7 alone)",
               round, nfill, used, first, sn.n, sn.n ? (long long)sn.ids[0] : -1LL);
    tmap_clear(&m);
  }
  tmap_destroy(&m);
}

static void test_tmap_clear_few_and_many(void **state) {
  (void)state;
  clear_case(10);  /* 12 entries < 256 buckets: only theirs are emptied */
  clear_case(400); /* 402 entries: every bucket */
}

/* ---- fine chunks, levels and the per-level entry lists ---- */

#define NT 1100 /* task ids of the tests below */

typedef struct set {
  bool has[NT];
  bool ordered;
  int n; /* distinct producers */
} set;

static bool on_set(void *arg, int64_t producer) {
  set *s = arg;
  if (producer < 0 || producer >= NT) fail_msg("producer %lld out of range", (long long)producer);
  if (!s->has[producer]) s->n++;
  s->has[producer] = true;
  return s->ordered;
}

/* Fails naming the first task where the reported set differs from want. */
static void expect_set(const char *what, const set *got, const bool *want) {
  for (int t = 0; t < NT; t++)
    if (got->has[t] != want[t])
      fail_msg("%s: task %d %s (reported %d producers)", what, t,
               want[t] ? "expected but not reported" : "reported but not expected", got->n);
}

/* Views whose ends lie on, just before and just after the chunk bounds of
 * the first levels (64 B, 256 B, 1 KiB, 4 KiB, 16 KiB), each recorded as a
 * write that takes no edge (so every entry stays), then every view probed
 * as a read and as a write: the producers are exactly the recorded views
 * that share a byte with it (brute force over byte ranges). */
static void test_tmap_fine_chunks_at_level_bounds(void **state) {
  (void)state;
  static _Alignas(65536) uint8_t buf[65536];
  static const int64_t bounds[] = {64, 256, 1024, 4096, 16384};
  int64_t lo[NT], len[NT];
  int n = 0;
  for (int b = 0; b < 5; b++)
    for (int k = 1; k <= 3; k++)
      for (int d = -1; d <= 1; d++) {
        int64_t at = bounds[b] * k + d; /* a bound, or a byte either side of it */
        /* ending there, starting there, and straddling it */
        int64_t l1 = bounds[b] / 2 + 1, l2 = bounds[b] + 3;
        int64_t s[3][2] = {{at - l1, l1}, {at, l2}, {at - l2 / 2, l2}};
        for (int v = 0; v < 3 && n < NT - 1; v++)
          if (s[v][0] >= 0 && s[v][0] + s[v][1] <= (int64_t)sizeof buf) {
            lo[n] = s[v][0];
            len[n] = s[v][1];
            n++;
          }
      }
  tmap m;
  assert_int_equal(tmap_init(&m, 1024), PTO_OK);
  for (int i = 0; i < n; i++) {
    pto_tensor v = vec_at(buf + lo[i], PTO_U8, len[i]);
    set s = {.ordered = false};
    assert_int_equal(tmap_access(&m, &v, TMAP_WRITE, i, 0, on_set, &s), PTO_OK);
  }
  assert_int_equal(m.used, (unsigned)n);
  for (int i = 0; i < n; i++)
    for (int mode = TMAP_READ; mode <= TMAP_WRITE; mode++) {
      pto_tensor v = vec_at(buf + lo[i], PTO_U8, len[i]);
      set s = {.ordered = true};
      tmap_conflicts(&m, &v, (tmap_mode)mode, 0, on_set, &s);
      bool want[NT] = {false};
      for (int j = 0; j < n; j++)
        want[j] = lo[j] < lo[i] + len[i] && lo[i] < lo[j] + len[j];
      char what[96];
      snprintf(what, sizeof what, "%s of [%lld, +%lld)", mode == TMAP_READ ? "read" : "write",
               (long long)lo[i], (long long)len[i]);
      expect_set(what, &s, want);
    }
  tmap_destroy(&m);
}

/* A 1 MiB probe over 1024 live 64-byte entries (16384 level-0 chunks, far
 * more than entries: the level's entry list is walked): it meets exactly
 * the live writers; entries of retired tasks are dropped on the way; a
 * covering ordered write then drops every live one; the lists stay sound
 * (the map keeps working, and a second round gives the same answers). */
static void test_tmap_big_probe_over_fine_entries(void **state) {
  (void)state;
  static _Alignas(64) uint8_t mib[1 << 20];
  tmap m;
  assert_int_equal(tmap_init(&m, 2048), PTO_OK);
  pto_tensor all = vec_at(mib, PTO_U8, 1 << 20);
  for (int round = 0; round < 2; round++) {
    for (int t = 0; t < 1024; t++) { /* line 16 t + t / 64 + round: scattered, distinct */
      size_t line = ((size_t)t * 16 + (size_t)t / 64 + (size_t)round) % 16384;
      pto_tensor v = vec_at(mib + line * 64, PTO_U8, 64);
      set s = {.ordered = true};
      assert_int_equal(tmap_access(&m, &v, TMAP_WRITE, t, 0, on_set, &s), PTO_OK);
      if (s.n) fail_msg("round %d: line of task %d met %d earlier writers", round, t, s.n);
    }
    assert_int_equal(m.used, 1024u);
    /* tasks below 300 retired: dropped while the list is walked, not reported */
    set r = {.ordered = true};
    assert_int_equal(tmap_access(&m, &all, TMAP_READ, 1024, 300, on_set, &r), PTO_OK);
    bool want[NT] = {false};
    for (int t = 300; t < 1024; t++)
      want[t] = true;
    expect_set("1 MiB read", &r, want);
    assert_int_equal(m.used, 1024u - 300u + 1u);
    /* a byte inside line of task 500 meets it (and the reader 1024) alone */
    size_t line500 = ((size_t)500 * 16 + 500 / 64 + (size_t)round) % 16384;
    pto_tensor b = vec_at(mib + line500 * 64 + 63, PTO_U8, 1);
    set w = {.ordered = false};
    tmap_conflicts(&m, &b, TMAP_WRITE, 300, on_set, &w);
    memset(want, 0, sizeof want);
    want[500] = want[1024] = true;
    expect_set("a byte of line 500", &w, want);
    /* a covering write ordered after all: only itself remains */
    set c = {.ordered = true};
    assert_int_equal(tmap_access(&m, &all, TMAP_WRITE, 1025, 300, on_set, &c), PTO_OK);
    want[1025] = false;
    for (int t = 300; t < 1025; t++)
      want[t] = true;
    expect_set("1 MiB write", &c, want);
    assert_int_equal(m.used, 1u);
    uint32_t at_levels = 0;
    for (int l = 0; l < TMAP_LEVELS; l++)
      at_levels += m.level_used[l];
    assert_int_equal(at_levels, 1u);
    assert_int_equal(m.level_used[0], 0u); /* level 0 emptied: it is skipped now */
    assert_int_equal(m.levels & 1u, 0u);
    tmap_clear(&m);
  }
  tmap_destroy(&m);
}

/* Entries of many levels and tasks dropped in any order, from chains and
 * from level lists, while the map keeps answering exactly: a small pool
 * (64 entries) overflows and purges retired tasks through the level
 * lists; after each access the producers equal a brute-force replay. */
static void test_tmap_drops_keep_lists_sound(void **state) {
  (void)state;
  static _Alignas(4096) uint8_t buf[1 << 16];
  enum { CAP = 64, STEPS = 1000 };
  struct rec {
    int64_t lo, len, task;
    int mode;
    bool live;
  } recs[STEPS];
  int nrec = 0;
  tmap m;
  assert_int_equal(tmap_init(&m, CAP), PTO_OK);
  uint32_t x = 12345;
  for (int t = 0; t < STEPS; t++) {
    x = x * 1103515245u + 12345u;
    int64_t len = (int64_t)1 << ((x >> 8) % 17);   /* 1 B .. 64 KiB */
    int64_t lo = (int64_t)((x >> 4) % (1u << 16)); /* anywhere, clipped */
    if (lo + len > (1 << 16)) lo = (1 << 16) - len;
    int mode = 1 + (int)((x >> 28) % 3);
    bool ordered = (x >> 27) & 1;
    int64_t oldest = t - 40;
    pto_tensor v = vec_at(buf + lo, PTO_U8, len);
    set s = {.ordered = ordered};
    int rc = tmap_access(&m, &v, (tmap_mode)mode, t, oldest, on_set, &s);
    bool want[NT] = {false};
    for (int j = 0; j < nrec; j++) {
      struct rec *e = &recs[j];
      if (!e->live || e->task < oldest) continue;
      bool meet = e->lo < lo + len && lo < e->lo + e->len;
      if (meet && ((e->mode | mode) & TMAP_WRITE)) want[e->task] = true;
    }
    if (rc == PTO_ETENSORMAP_OVERFLOW) { /* nothing recorded, nothing reported */
      if (s.n) fail_msg("task %d: overflow but %d producers reported", t, s.n);
      continue;
    }
    assert_int_equal(rc, PTO_OK);
    char what[64];
    snprintf(what, sizeof what, "task %d: %d bytes at %lld", t, (int)len, (long long)lo);
    expect_set(what, &s, want);
    for (int j = 0; j < nrec; j++) { /* covered and ordered after: gone; an end: trimmed */
      struct rec *e = &recs[j];
      if (!e->live || !want[e->task] || !ordered || !(mode & TMAP_WRITE)) continue;
      int64_t end = e->lo + e->len;
      if (lo <= e->lo && end <= lo + len) {
        e->live = false;
      } else if (lo <= e->lo && lo + len > e->lo && lo + len < end) {
        e->lo = lo + len;
        e->len = end - e->lo;
      } else if (lo + len >= end && lo > e->lo && lo < end) {
        e->len = lo - e->lo;
      }
    }
    recs[nrec++] = (struct rec){lo, len, t, mode, true};
    uint32_t at_levels = 0;
    for (int l = 0; l < TMAP_LEVELS; l++)
      at_levels += m.level_used[l];
    if (at_levels != m.used)
      fail_msg("task %d: %u entries in level lists, %u in use", t, at_levels, m.used);
  }
  tmap_destroy(&m);
}

/* A part-writer after a whole-buffer reader (W4's consumers after its
 * reducer): each ordered write of an end of the reader's bytes trims them
 * off the reader's entry, so the next writer of that part waits for the
 * last writer only, the reader stays for the rest, and goes when the rest
 * is written. A write inside the reader's bytes (no end) and a strided
 * reader are not trimmed. Before the trim, every write of a part reported
 * the reader again: "task 2: task 0 reported but not expected". */
static void test_tmap_part_writes_trim_a_whole_reader(void **state) {
  (void)state;
  static _Alignas(64) uint8_t buf[256];
  tmap m;
  assert_int_equal(tmap_init(&m, 64), PTO_OK);
  struct step {
    int64_t lo, len;
    tmap_mode mode;
    int want[3]; /* producers, -1 ended */
  } steps[] = {
      {0, 64, TMAP_READ, {-1}},         /* 0: the reader of [0, 64) */
      {0, 16, TMAP_WRITE, {0, -1}},     /* 1: its first part: trims [0, 16) off */
      {0, 16, TMAP_WRITE, {1, -1}},     /* 2: the same part: task 1 only */
      {24, 8, TMAP_WRITE, {0, -1}},     /* 3: inside [16, 64), no end: no trim */
      {16, 8, TMAP_WRITE, {0, -1}},     /* 4: the next end: [24, 64) left */
      {48, 16, TMAP_WRITE, {0, -1}},    /* 5: the last end: [24, 48) left */
      {60, 4, TMAP_WRITE, {5, -1}},     /* 6: task 5's bytes only */
      {24, 24, TMAP_WRITE, {0, 3, -1}}, /* 7: the rest: the reader goes */
      {0, 64, TMAP_WRITE, {2, 4, 5}},   /* 8: never task 0 again (nor 3, 6, 7: not shown) */
  };
  int n = (int)(sizeof steps / sizeof steps[0]);
  for (int t = 0; t < n; t++) {
    pto_tensor v = vec_at(buf + steps[t].lo, PTO_U8, steps[t].len);
    set s = {.ordered = true};
    assert_int_equal(tmap_access(&m, &v, steps[t].mode, t, 0, on_set, &s), PTO_OK);
    bool want[NT] = {false};
    for (int k = 0; k < 3 && steps[t].want[k] >= 0; k++)
      want[steps[t].want[k]] = true;
    if (t == n - 1) { /* the last write meets tasks 6 and 7 too */
      want[6] = want[7] = true;
      want[3] = false; /* covered by 7, which was ordered after it */
    }
    char what[48];
    snprintf(what, sizeof what, "task %d", t);
    expect_set(what, &s, want);
  }
  /* a strided reader keeps all its bytes: its rows are not one range */
  tmap_clear(&m);
  pto_tensor rows;
  int64_t shape[2] = {4, 8}, stride[2] = {32, 1};
  assert_int_equal(pto_tensor_init_strided(&rows, buf, sizeof buf, PTO_U8, 2, shape, stride, 0),
                   PTO_OK);
  set s0 = {.ordered = true};
  assert_int_equal(tmap_access(&m, &rows, TMAP_READ, 0, 0, on_set, &s0), PTO_OK);
  for (int t = 1; t <= 2; t++) {
    pto_tensor first = vec_at(buf, PTO_U8, 16);
    set s = {.ordered = true};
    assert_int_equal(tmap_access(&m, &first, TMAP_WRITE, t, 0, on_set, &s), PTO_OK);
    bool want[NT] = {false};
    want[0] = true; /* the strided reader, untrimmed, every time */
    if (t == 2) want[1] = true;
    char what[48];
    snprintf(what, sizeof what, "strided reader, task %d", t);
    expect_set(what, &s, want);
  }
  tmap_destroy(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tmap_part_writes_trim_a_whole_reader),
      cmocka_unit_test(test_interior_pointer_views_are_ordered),
      cmocka_unit_test(test_manual_scope_covering_write_keeps_war_edge),
      cmocka_unit_test(test_tmap_by_bytes_and_ordered_covering),
      cmocka_unit_test(test_tmap_levels),
      cmocka_unit_test(test_tmap_readers_and_writers),
      cmocka_unit_test(test_tmap_sole_writer),
      cmocka_unit_test(test_tmap_clear_few_and_many),
      cmocka_unit_test(test_tmap_fine_chunks_at_level_bounds),
      cmocka_unit_test(test_tmap_big_probe_over_fine_entries),
      cmocka_unit_test(test_tmap_drops_keep_lists_sound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
