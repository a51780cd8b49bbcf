/* paged_attention_small.c — paged attention at tiny shapes (2 requests,
 * 4 heads over 2 KV heads, head_dim 16, blocks of 8 tokens): quick to run
 * and to read when the flagship scene fails. More SPMD blocks than rows
 * leaves some blocks idle. */
#include "paged_attention.h"

static int paged_attention_small_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  static const int ctx[2] = {5, 37};
  const pa_config cfg = {
      .batch = 2,
      .heads = 4,
      .kv_heads = 2,
      .head_dim = 16,
      .block_size = 8,
      .ctx_lens = ctx,
      .sm_blocks = 3,
      .mm_blocks = 2,
      .clusters = 2,
  };
  return paged_attention_scene(&cfg, opts, rep);
}

PTO_SCENE_WITH(paged_attention_small,
               "paged attention, tiny shapes (2 requests, GQA 4:2, blocks of 8)",
               paged_attention_small_run, PTO_SCENE_RANDOM);
