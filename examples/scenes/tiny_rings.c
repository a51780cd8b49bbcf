/* tiny_rings.c — rings far smaller than the graph: 4 task slots, a 1 KiB
 * heap, 8 dependency entries and 32 TensorMap entries, for 200 iterations
 * (800 tasks) of, inside nested scopes (depth 2):
 *
 *   tmp  = 2 x_i            (OUTPUT, 256 B)
 *   tmp2 = tmp + y_(i%8)    (OUTPUT, 256 B)
 *   out_i = tmp2 + tmp      (OUTPUT_EXISTING, row i of out)
 *   acc  += tmp2            (INOUT: a chain through all iterations)
 *
 * Each scope holds exactly as many tasks as the ring has slots, so every
 * submit waits for reclamation of the previous scope: slots, heap ranges,
 * dependency entries and TensorMap entries all rotate many times. */
#include <stdlib.h>

#include "chip_scenes.h"

#define TR_ITERS 200
#define TR_C     64
#define TR_Y     8
#define TR_GROUP 10 /* iterations per outer scope */

typedef struct tr_state {
  pto_kernel_ids k;
  float x[TR_ITERS * TR_C], y[TR_Y * TR_C], out[TR_ITERS * TR_C], acc[TR_C];
  pto_tensor tx, ty, tout, tacc;
} tr_state;

static int tr_row(const pto_tensor *t, int i, pto_tensor *row) {
  int64_t start[2] = {i, 0}, shape[2] = {1, TR_C};
  return pto_tensor_slice(t, start, shape, row);
}

static int tr_iteration(pto_orch *o, const tr_state *st, int i) {
  pto_tensor xi, yi, oi, tmp, tmp2;
  if (tr_row(&st->tx, i, &xi) || tr_row(&st->ty, i % TR_Y, &yi) || tr_row(&st->tout, i, &oi) ||
      cs_desc2(&tmp, 1, TR_C) || cs_desc2(&tmp2, 1, TR_C))
    return pto_orch_fatal(o, "tiny_rings: bad view at iteration %d", i);
  int rc;
  if ((rc = pto_scope_begin(o, PTO_SCOPE_AUTO))) return rc;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &xi);
  pto_args_output(&a, &tmp);
  pto_args_scalar_f32(&a, 2.0f);
  if ((rc = pto_submit(o, st->k.scale, &a, NULL, NULL))) return rc;
  pto_args_init(&a);
  pto_args_input(&a, &tmp);
  pto_args_input(&a, &yi);
  pto_args_output(&a, &tmp2);
  if ((rc = pto_submit(o, st->k.add, &a, NULL, NULL))) return rc;
  pto_args_init(&a);
  pto_args_input(&a, &tmp2);
  pto_args_input(&a, &tmp);
  pto_args_output_existing(&a, &oi);
  if ((rc = pto_submit(o, st->k.add, &a, NULL, NULL))) return rc;
  pto_args_init(&a);
  pto_args_inout(&a, &st->tacc);
  pto_args_input(&a, &tmp2);
  pto_args_nodep(&a, &st->tacc); /* the output: already tracked as INOUT above */
  if ((rc = pto_submit(o, st->k.add, &a, NULL, NULL))) return rc;
  return pto_scope_end(o);
}

static void tr_orch(pto_orch *o, void *arg) {
  const tr_state *st = arg;
  for (int g = 0; g < TR_ITERS / TR_GROUP; g++) {
    if (pto_scope_begin(o, PTO_SCOPE_AUTO)) return;
    for (int i = g * TR_GROUP; i < (g + 1) * TR_GROUP; i++)
      if (tr_iteration(o, st, i)) return;
    if (pto_scope_end(o)) return;
  }
}

static int tiny_rings_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  tr_state *st = calloc(1, sizeof *st);
  if (!st) return cs_run_failed(rep, PTO_ENOMEM, "tiny_rings");
  cs_fill_rand(st->x, TR_ITERS * TR_C, 17 + opts->seed);
  cs_fill_rand(st->y, TR_Y * TR_C, 19 + opts->seed);
  int rc = cs_view2(&st->tx, st->x, PTO_F32, TR_ITERS, TR_C);
  rc |= cs_view2(&st->ty, st->y, PTO_F32, TR_Y, TR_C);
  rc |= cs_view2(&st->tout, st->out, PTO_F32, TR_ITERS, TR_C);
  rc |= cs_view2(&st->tacc, st->acc, PTO_F32, 1, TR_C);
  pto_chip_config cfg;
  scene_chip_config(opts, 2, 0, &cfg);
  cfg.task_slots = 4;
  cfg.heap_bytes = 1024;
  cfg.dep_entries = 8;
  cfg.tensormap_entries = 32;
  pto_chip *chip = NULL;
  if (!rc) rc = scene_chip_create(&cfg, &chip, rep);
  if (!rc) rc = pto_kernels_register(chip, &st->k);
  const int rounds = opts->rounds > 0 ? opts->rounds : 1;
  pto_scene_opts one = *opts;
  one.rounds = 1;
  static float ro[TR_ITERS * TR_C];
  float ra[TR_C] = {0};
  for (int i = 0; i < TR_ITERS; i++)
    for (int c = 0; c < TR_C; c++) {
      const float tmp = 2.0f * st->x[i * TR_C + c], tmp2 = tmp + st->y[(i % TR_Y) * TR_C + c];
      ro[i * TR_C + c] = tmp2 + tmp;
      ra[c] += tmp2;
    }
  for (int r = 0; r < rounds && !rc; r++) {
    memset(st->acc, 0, sizeof st->acc);
    memset(st->out, 0, sizeof st->out);
    rc = scene_run_rounds(chip, &one, tr_orch, st, rep);
    if (!rc && !(rep->verified = scene_check_f32(rep, "out", st->out, ro, TR_ITERS * TR_C, 0) &&
                                 scene_check_f32(rep, "acc", st->acc, ra, TR_C, 0)))
      break;
  }
  if (rc)
    cs_run_failed(rep, rc, "tiny_rings");
  else if (rep->verified && rep->stats.tasks != (uint64_t)rounds * 4 * TR_ITERS)
    cs_fail(rep, "stats count %llu tasks, submitted %d", (unsigned long long)rep->stats.tasks,
            rounds * 4 * TR_ITERS);
  else if (rep->verified)
    snprintf(rep->message, sizeof rep->message,
             "%d tasks through 4 task slots, a 1 KiB heap, 8 dependency entries and 32 TensorMap "
             "entries: out and the accumulation chain match the sequential reference",
             4 * TR_ITERS);
  pto_chip_destroy(chip);
  free(st);
  return rc;
}

PTO_SCENE_WITH(tiny_rings,
               "tiny rings (4 slots, 1 KiB heap, 8 deps) forcing rotation and reclamation",
               tiny_rings_run, PTO_SCENE_RANDOM);
