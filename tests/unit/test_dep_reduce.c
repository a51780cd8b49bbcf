/* test_dep_reduce.c — a task links only the producers that no other of its
 * producers implies (src/chip/dep_reduce.c), white box: the orchestrator's
 * side of submit (list the producers as collect_dep marks them, reduce,
 * record the task's nodes, pre and count) on a bare run of 256 slots.
 *
 * W4's round (a producer writing `a`, 64 consumers reading `a` and each
 * rewriting its row of `b`, a reducer reading `b` whole and writing `r`,
 * which the next producer reads) with nothing retired: what the TensorMap
 * reports and what is left. Before the reduction every producer linked
 * its 64 readers of `a`, and each consumer every reducer still live. Then
 * the sound-drop cases: a producer behind a gap is kept, a recorded
 * producer of a producer is dropped, and retired tasks count as done.
 * Producers reported after one that implies them are not listed at all
 * (dep_ordered): their slots, on lines the cores write, are not
 * touched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "chip/run.h"

#define SLOTS 256
#define FAN   64

typedef struct fake {
  pto_run r;
  uint64_t dep_head;
} fake;

static fake *fake_new(void) {
  fake *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->r.slots = calloc(SLOTS, sizeof(task));
  f->r.slot_mask = SLOTS - 1;
  f->r.ndeps = 4096;
  f->r.dep_from = calloc(f->r.ndeps, sizeof(pto_task_id));
  assert_non_null(f->r.slots);
  assert_non_null(f->r.dep_from);
  return f;
}

static void fake_free(fake *f) {
  free(f->r.slots);
  free(f->r.dep_from);
  free(f);
}

/* Submits task `id` with the producers the TensorMap would report; returns
 * how many it links, and the kept ones in `kept` (if not NULL). */
static uint32_t submit(fake *f, pto_task_id id, const pto_task_id *reported, uint32_t n,
                       pto_task_id *kept) {
  pto_run *r = &f->r;
  task *t = run_slot(r, id);
  t->dep_mark = PTO_TASK_NONE;
  pto_task_id preds[512];
  uint32_t np = 0;
  int64_t cover = r->retired - 1;
  for (uint32_t i = 0; i < n; i++) { /* collect_dep: retired, implied, or listed once */
    if (dep_ordered(r, id, cover, reported[i])) continue;
    dep_list(r, id, &cover, reported[i]);
    preds[np++] = reported[i];
  }
  int64_t pre;
  np = dep_reduce(r, id, preds, np, cover, &pre);
  pto_task_id dep_max = -1;
  for (uint32_t i = 0; i < np; i++) {
    r->dep_from[f->dep_head % r->ndeps] = preds[i];
    f->dep_head++;
    if (preds[i] > dep_max) dep_max = preds[i];
    if (kept) kept[i] = preds[i];
  }
  t->dep_end = f->dep_head;
  t->ndeps = np;
  t->dep_max = dep_max;
  t->pre = pre;
  return np;
}

static void test_w4_rounds_link_what_orders_them(void **state) {
  (void)state;
  fake *f = fake_new();
  pto_task_id next = 0, prev_reducer = -1, prev_producer = -1, readers_of_a[FAN],
              rowners[FAN] = {0};
  uint32_t links = 0, reported_total = 0, tasks = 0;
  for (int round = 0; round < 3; round++) {
    /* the producer: reads r (the last reducer), rewrites a (its readers and its writer) */
    pto_task_id rep[FAN + 2];
    uint32_t n = 0;
    if (prev_reducer >= 0) rep[n++] = prev_reducer;
    if (round > 0)
      for (int q = 0; q < FAN; q++)
        rep[n++] = readers_of_a[q];
    if (prev_producer >= 0) rep[n++] = prev_producer;
    pto_task_id producer = next++, kept[FAN + 2];
    uint32_t k = submit(f, producer, rep, n, kept);
    if (round > 0) {
      assert_int_equal(k, 1);
      assert_int_equal(kept[0], prev_reducer);
      /* the readers of `a` come before the last reducer, which waited for
       * them: not listed, their slots not written (before: each marked,
       * then dropped) */
      for (int q = 0; q < FAN; q++)
        assert_int_not_equal(run_slot(&f->r, readers_of_a[q])->dep_mark, producer);
    }
    links += k, reported_total += n, tasks++;
    /* the consumers: read a, rewrite their row of b (its last writer, and
     * every reducer still live: each read b whole) */
    for (int q = 0; q < FAN; q++) {
      n = 0;
      rep[n++] = producer;
      if (round > 0) rep[n++] = rowners[q];
      for (pto_task_id red = FAN + 1; red < producer; red += FAN + 2)
        rep[n++] = red; /* every earlier reducer: the TensorMap keeps whole readers */
      pto_task_id c = next++;
      k = submit(f, c, rep, n, kept);
      assert_int_equal(k, 1);
      assert_int_equal(kept[0], producer);
      for (uint32_t i = 1; i < n; i++) /* behind the producer: not listed */
        assert_int_not_equal(run_slot(&f->r, rep[i])->dep_mark, c);
      links += k, reported_total += n, tasks++;
      readers_of_a[q] = rowners[q] = c;
    }
    /* the reducer: reads b (the 64 rows' writers), writes r (its reader, the producer; its
     * last writer) */
    n = 0;
    for (int q = 0; q < FAN; q++)
      rep[n++] = rowners[q];
    rep[n++] = producer;
    if (prev_reducer >= 0) rep[n++] = prev_reducer;
    pto_task_id red = next++;
    k = submit(f, red, rep, n, kept);
    assert_int_equal(k, FAN);
    links += k, reported_total += n, tasks++;
    prev_reducer = red, prev_producer = producer;
    /* every task up to the reducer is behind it */
    assert_int_equal(run_slot(&f->r, red)->pre, red - 1);
  }
  print_message("W4, 3 rounds: %u producers reported, %u linked (%.2f a task)\n", reported_total,
                links, (double)links / tasks);
  fake_free(f);
}

static void test_only_implied_producers_go(void **state) {
  (void)state;
  fake *f = fake_new();
  pto_task_id kept[8];
  /* 0, 1 independent; 2 after 0; 3 after 1 and 2 */
  assert_int_equal(submit(f, 0, NULL, 0, NULL), 0);
  assert_int_equal(submit(f, 1, NULL, 0, NULL), 0);
  assert_int_equal(submit(f, 2, (pto_task_id[]){0}, 1, NULL), 1);
  /* 3 is reported 0, 1 and 2: 0 is behind 2 (2's pre covers it), 1 is
   * not (a gap: 2 does not wait for 1) */
  assert_int_equal(submit(f, 3, (pto_task_id[]){0, 1, 2}, 3, kept), 2);
  assert_true((kept[0] == 1 && kept[1] == 2) || (kept[0] == 2 && kept[1] == 1));
  /* the same reported the other way round: 0 comes after 2, which covers
   * it, and is not listed at all */
  fake *g = fake_new();
  assert_int_equal(submit(g, 0, NULL, 0, NULL), 0);
  assert_int_equal(submit(g, 1, NULL, 0, NULL), 0);
  assert_int_equal(submit(g, 2, (pto_task_id[]){0}, 1, NULL), 1);
  assert_int_equal(submit(g, 3, (pto_task_id[]){2, 0, 1}, 3, kept), 2);
  assert_true((kept[0] == 1 && kept[1] == 2) || (kept[0] == 2 && kept[1] == 1));
  assert_int_not_equal(run_slot(&g->r, 0)->dep_mark, 3);
  assert_int_equal(run_slot(&g->r, 3)->pre, 2); /* 0 behind 2, then 1 and 2 listed */
  fake_free(g);
  /* 4 is reported 1 and 3: 3's pre covers 1 (rule 1) */
  assert_int_equal(submit(f, 4, (pto_task_id[]){1, 3}, 2, kept), 1);
  assert_int_equal(kept[0], 3);
  /* rule 2 alone: 0 and 1 independent, 2 after 1 (its pre covers nothing:
   * it does not wait for 0), 3 reported 1 and 2: 1 is 2's recorded
   * producer, so only 2 is linked; with 4 reported 0 and 2 both stay (0 is
   * no producer of 2: dep_max says so without reading 2's nodes) */
  fake *h = fake_new();
  assert_int_equal(submit(h, 0, NULL, 0, NULL), 0);
  assert_int_equal(submit(h, 1, NULL, 0, NULL), 0);
  assert_int_equal(submit(h, 2, (pto_task_id[]){1}, 1, NULL), 1);
  assert_true(dep_covered(&h->r, 2) < 1);
  assert_int_equal(submit(h, 3, (pto_task_id[]){1, 2}, 2, kept), 1);
  assert_int_equal(kept[0], 2);
  assert_int_equal(submit(h, 4, (pto_task_id[]){0, 2}, 2, kept), 2);
  fake_free(h);
  /* independent 5 and 6, then 7 is reported both: neither implies the other */
  assert_int_equal(submit(f, 5, NULL, 0, NULL), 0);
  assert_int_equal(submit(f, 6, NULL, 0, NULL), 0);
  assert_int_equal(submit(f, 7, (pto_task_id[]){5, 6}, 2, kept), 2);
  /* with 0..5 retired, 8 is reported 5 (done) and 6: it links 6 only, and
   * its pre reaches 6 (5 retired, 6 its producer) */
  f->r.retired = 6;
  assert_int_equal(submit(f, 8, (pto_task_id[]){5, 6}, 2, kept), 1);
  assert_int_equal(kept[0], 6);
  assert_int_equal(run_slot(&f->r, 8)->pre, 6);
  fake_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_w4_rounds_link_what_orders_them),
      cmocka_unit_test(test_only_implied_producers_go),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
