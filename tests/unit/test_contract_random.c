/* test_contract_random.c — checking mode (docs/contracts.md) on random
 * graphs (diff_graph.h), run with PTO_CHECK's checks on and a seed per
 * graph. Even graphs are correct programs: they must pass and equal the
 * sequential reference (no false positive). In odd graphs one random
 * kernel task runs a broken kernel that, in its block 0, after (or, for a
 * read, before) its normal work, does one of:
 *   - an extra write: stores 0xA5 into a random byte of one of its
 *     arguments' buffers;
 *   - an INPUT write: the same into a random element of an INPUT view;
 *   - an undeclared read: adds a random byte of one of its arguments'
 *     buffers (+1) to output element 0.
 * It touched memory outside its contract when the stored byte lies outside
 * its OUTPUT/INOUT views and held another value, or the read byte lies
 * outside its INPUT/INOUT/OUTPUT_EXISTING views; every such graph must
 * fail with PTO_ECONTRACT naming the broken kernel, every other one pass.
 * The bytes are chosen inside the task's own arguments' buffers: memory
 * pto does not know (another task's private scratch) is not checked.
 * PTO_CONTRACT_GRAPHS overrides the count (1000; 100 under sanitizers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pto/pto.h"

#include "diff_graph.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEFAULT_GRAPHS 100
#else
#define DEFAULT_GRAPHS 1000
#endif

enum { BRK_WRITE = 0, BRK_INPUT_WRITE, BRK_READ, BRK_KINDS };
static const char *const brk_names[] = {"extra write", "INPUT write", "undeclared read"};

/* The breakage of this graph: chosen by the kernel from `pick` on its
 * first run, recorded for the oracle. */
static struct {
  int kind;
  uint64_t pick;
  bool done;    /* recorded (block 0's first run: the checked one) */
  bool breach;  /* it touched memory outside its contract */
  bool none;    /* nothing to break (an INPUT write without an INPUT) */
  unsigned old; /* the stored byte's value before */
} brk;

static bool in_view(const pto_tensor *t, const uint8_t *p) {
  size_t es = pto_dtype_size((pto_dtype)t->dtype);
  for (int64_t i = 0; i < pto_tensor_numel(t); i++) {
    const uint8_t *e = pto_tensor_at_linear(t, i);
    if (p >= e && p < e + es) return true;
  }
  return false;
}

static bool in_views(const pto_kctx *c, const uint8_t *p, bool want_write) {
  /* the graph's modes: tensors[0] is the output, INOUT (scalar 1 is 1),
   * OUTPUT (the runtime tagged its allocation) or OUTPUT_EXISTING, which
   * checking mode counts as read too; the others are INPUT */
  for (int k = 0; k < c->ntensors; k++) {
    bool w = k == 0;
    bool r = k > 0 || c->scalars[1] || c->tensors[0].alloc_tag == 0;
    if ((want_write ? w : r) && in_view(&c->tensors[k], p)) return true;
  }
  return false;
}

static uint8_t *pick_byte(const pto_kctx *c, bool input_only) {
  int first = input_only ? 1 : 0;
  if (c->ntensors <= first) return NULL;
  int k = first + (int)(brk.pick % (uint64_t)(c->ntensors - first));
  const pto_tensor *t = &c->tensors[k];
  if (input_only) {
    int64_t n = pto_tensor_numel(t);
    size_t es = pto_dtype_size((pto_dtype)t->dtype);
    return (uint8_t *)pto_tensor_at_linear(t, (int64_t)((brk.pick >> 8) % (uint64_t)n)) +
           (brk.pick >> 40) % es;
  }
  return (uint8_t *)t->buf + (brk.pick >> 8) % t->buf_bytes;
}

static int broken_kernel(const pto_kctx *c) {
  if (c->block_idx != 0) return mix_kernel(c);
  if (brk.kind == BRK_READ) {
    uint8_t *p = pick_byte(c, false);
    unsigned v = *p + 1u;
    if (!brk.done) brk.breach = !in_views(c, p, false), brk.done = true;
    mix_kernel(c);
    store(&c->tensors[0], 0, load(&c->tensors[0], 0) + v);
    return 0;
  }
  mix_kernel(c);
  uint8_t *p = pick_byte(c, brk.kind == BRK_INPUT_WRITE);
  if (!p) {
    brk.none = brk.done = true;
    return 0;
  }
  if (!brk.done) {
    brk.old = *p;
    brk.breach = !in_views(c, p, true) && brk.old != 0xA5;
    brk.done = true;
  }
  *p = 0xA5;
  return 0;
}

static void test_contract_random(void **state) {
  (void)state;
  int graphs = env_count("PTO_CONTRACT_GRAPHS", DEFAULT_GRAPHS);
  static graph g;
  static uint32_t got[NBUF][BUFELEMS], want[NBUF][BUFELEMS];
  int clean = 0, breaches[BRK_KINDS] = {0}, harmless[BRK_KINDS] = {0};
  for (int gi = 0; gi < graphs; gi++) {
    rng_state = 20261201u * 1000003u + (uint64_t)gi;
    random_graph(&g);
    fix_blocks(&g);
    pto_chip_config cfg;
    random_chip_config(&cfg);
    cfg.check = 1;
    cfg.check_seed = (uint64_t)gi + 1;
    cfg.heap_bytes = 1 << 20; /* a small heap's back-pressure adds nothing here */
    pto_chip *chip;
    assert_int_equal(pto_chip_create(&cfg, &chip), PTO_OK);
    int kid, bad_kid;
    assert_int_equal(pto_kernel_register_aiv(chip, "mix", mix_kernel, &kid), PTO_OK);
    assert_int_equal(pto_kernel_register_aiv(chip, "broken", broken_kernel, &bad_kid), PTO_OK);
    pto_graph_run pr = {.g = &g, .bufs = got, .kid = kid, .fail_at = -1, .fail_kid = bad_kid};
    memset(&brk, 0, sizeof brk);
    bool broken = gi % 2 == 1;
    if (broken) {
      int kernels[MAX_TASKS], nk = kernel_tasks(&g, kernels);
      if (nk) pr.fail_at = kernels[rnd() % (uint32_t)nk];
      brk.kind = (int)(rnd() % BRK_KINDS);
      brk.pick = (uint64_t)rnd() << 32 | rnd();
    }
    memcpy(got, g.init, sizeof got);
    pto_error_info err;
    int rc = pto_chip_run(chip, orchestrate, &pr, NULL, &err);
    pto_chip_destroy(chip);
    if (!broken || pr.fail_at < 0) {
      run_reference(&g, want);
      if (rc != PTO_OK || memcmp(got, want, sizeof got)) {
        pto_error_print(&err, stderr);
        print_buffers("actual", got, g.row_stride);
        print_buffers("expected", want, g.row_stride);
        fail_msg("graph %d, a correct program: %s, or its result differs", gi, pto_status_name(rc));
      }
      clean++;
      continue;
    }
    assert_true(brk.done);
    if (brk.breach) {
      breaches[brk.kind]++;
      if (rc != PTO_ECONTRACT || strcmp(err.kernel, "broken")) {
        pto_error_print(&err, stderr);
        fail_msg("graph %d: the %s of task %d (byte 0x%02x before) was not caught: %s", gi,
                 brk_names[brk.kind], pr.fail_at, brk.old, pto_status_name(rc));
      }
    } else {
      harmless[brk.kind]++;
      if (rc != PTO_OK) {
        pto_error_print(&err, stderr);
        fail_msg("graph %d: the %s of task %d stayed inside its contract, but the run failed: "
                 "%s",
                 gi, brk_names[brk.kind], pr.fail_at, pto_status_name(rc));
      }
    }
  }
  printf("contracts: %d graphs: %d correct passed; caught %d extra writes, %d INPUT writes, %d "
         "undeclared reads; %d, %d, %d breakages inside the contract passed\n",
         graphs, clean, breaches[BRK_WRITE], breaches[BRK_INPUT_WRITE], breaches[BRK_READ],
         harmless[BRK_WRITE], harmless[BRK_INPUT_WRITE], harmless[BRK_READ]);
  assert_true(breaches[BRK_WRITE] > 0 && breaches[BRK_INPUT_WRITE] > 0 && breaches[BRK_READ] > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_contract_random)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
