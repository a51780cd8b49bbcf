/* heap_rebase.c — the heap ring rebases to its start when it is empty.
 * The heap is 4 KiB; each step allocates one OUTPUT buffer (fill) and
 * consumes it (row sum into out[k]) inside its own scope. Sizes alternate
 * between a part of the ring and the whole ring, so every whole-ring
 * allocation comes after an allocation that left less than it needs at
 * the tail: it only fits if the emptied ring starts over at offset 0.
 * Even steps drain explicitly (pto_orch_read of the result) before the
 * next allocation; odd steps let back-pressure wait for the drain. */
#include <stdlib.h>

#include "chip_scenes.h"

#define HR_HEAP  4096
#define HR_STEPS 10

static const int64_t hr_elems[HR_STEPS] = {768, 1024, 256, 1024, 640, 1024, 1000, 1024, 16, 1024};

typedef struct hr_state {
  pto_kernel_ids k;
  float out[HR_STEPS];
  pto_tensor tout;
} hr_state;

static int hr_step(pto_orch *o, const hr_state *st, int k) {
  pto_tensor t, ok;
  int64_t start[1] = {k}, one[1] = {1};
  if (cs_desc2(&t, 1, hr_elems[k]) || pto_tensor_slice(&st->tout, start, one, &ok))
    return pto_orch_fatal(o, "heap_rebase: bad view");
  int rc;
  if ((rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) return rc;
  pto_args a;
  pto_args_init(&a);
  pto_args_output(&a, &t);
  pto_args_scalar_f32(&a, (float)(k + 1));
  if ((rc = pto_submit(o, st->k.fill, &a, NULL, NULL))) return rc;
  pto_args_init(&a);
  pto_args_input(&a, &t);
  pto_args_output_existing(&a, &ok);
  if ((rc = pto_submit(o, st->k.row_sum, &a, NULL, NULL))) return rc;
  if ((rc = pto_scope_end(o))) return rc;
  if (k % 2 == 0) {
    float v;
    if ((rc = pto_orch_read(o, &ok, &v, -1))) return rc;
  }
  return PTO_OK;
}

static void hr_orch(pto_orch *o, void *arg) {
  const hr_state *st = arg;
  for (int k = 0; k < HR_STEPS; k++)
    if (hr_step(o, st, k)) return;
}

static int heap_rebase_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  hr_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "heap_rebase");
  int64_t shape[1] = {HR_STEPS};
  int rc = pto_tensor_init(&st->tout, st->out, sizeof st->out, PTO_F32, 1, shape);
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.heap_bytes = HR_HEAP;
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  if (!rc) rc = scene_run_rounds(chip, opts, hr_orch, st, rep);
  if (rc) {
    cs_run_failed(rep, rc, "heap_rebase");
  } else {
    float ref[HR_STEPS];
    for (int k = 0; k < HR_STEPS; k++)
      ref[k] = (float)(hr_elems[k] * (k + 1));
    rep->verified = scene_check_f32(rep, "row sums", st->out, ref, HR_STEPS, 0);
    if (rep->verified)
      snprintf(rep->message, sizeof rep->message,
               "%d allocations alternating partial and whole-ring (%d B) sizes: each whole-ring "
               "allocation after a drain fits, results match",
               HR_STEPS, HR_HEAP);
  }
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE(heap_rebase, "heap ring rebase when empty: whole-ring allocations after partial ones",
          heap_rebase_run);
