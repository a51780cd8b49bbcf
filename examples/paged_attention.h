/* paged_attention.h — the decode-step paged attention scene, shared by the
 * flagship scene (paged_attention.c, which owns the implementation) and its
 * variants in scenes/ (which only choose shapes). */
#ifndef PTO_PAGED_ATTENTION_H
#define PTO_PAGED_ATTENTION_H

#include "scene.h"

#define PA_MAX_BATCH 64

typedef struct pa_config {
  int batch;    /* requests, 1..PA_MAX_BATCH */
  int heads;    /* query heads per request */
  int kv_heads; /* KV heads (divides heads; heads/kv_heads query heads share one) */
  int head_dim;
  int block_size;      /* tokens per KV cache block */
  const int *ctx_lens; /* context length (tokens, >= 1) of each request */
  int sm_blocks;       /* SPMD blocks of the online-softmax and normalise tasks */
  int mm_blocks;       /* SPMD blocks of the two matmuls */
  int clusters;        /* scene default chip shape (0 = library default) */
} pa_config;

/* Builds the inputs, runs the task graph opts->rounds times, checks the
 * output against a sequential attention and fills rep. Returns 0 when the
 * scene ran (verdict in rep), or the first error. */
int paged_attention_scene(const pa_config *cfg, const pto_scene_opts *opts, pto_scene_report *rep);

/* The flagship scene's decode step, for measurements (bench/graph_bench.c):
 * its inputs, with the kernels registered on chip (NULL: out of memory or
 * a registration failed); pa_step(orch, st), the orchestration of one
 * step; pa_clear_output fills the output with NaN; pa_verify checks it
 * against the sequential attention (1e-4). */
typedef struct pa_state pa_state;
pa_state *pa_flagship_new(pto_chip *chip, unsigned seed);
void pa_step(pto_orch *o, void *st);
void pa_clear_output(pa_state *st);
bool pa_verify(pa_state *st);
void pa_flagship_delete(pa_state *st);

#endif
