/* paged_attention_varlen.c — paged attention with grouped KV heads (16
 * query heads over 4 KV heads) and ragged contexts: one single-token
 * request, one that fills its blocks exactly, the rest drawn from the seed
 * in [1, 1536]; both matmuls are split across 2 blocks. */
#include <stdint.h>

#include "paged_attention.h"

static int paged_attention_varlen_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  int ctx[6] = {1, 3 * 64};
  uint64_t s = 0x7a11e5ull + opts->seed;
  for (int b = 2; b < 6; b++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    ctx[b] = 1 + (int)((s >> 33) % 1536);
  }
  const pa_config cfg = {
      .batch = 6,
      .heads = 16,
      .kv_heads = 4,
      .head_dim = 64,
      .block_size = 64,
      .ctx_lens = ctx,
      .sm_blocks = 2,
      .mm_blocks = 2,
  };
  return paged_attention_scene(&cfg, opts, rep);
}

PTO_SCENE_WITH(paged_attention_varlen, "paged attention, GQA 16:4, ragged context lengths 1..1536",
               paged_attention_varlen_run, PTO_SCENE_RANDOM);
