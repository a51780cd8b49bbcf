/* paged_attention.c — the flagship scene: one decode step of paged
 * attention built as a task graph, checked against a sequential attention.
 *
 * Each request b has a query [heads, head_dim] and a context of ctx_len[b]
 * tokens whose keys and values live in fixed-size blocks of a shared KV
 * cache [num_blocks, block_size, kv_heads, head_dim], found through the
 * request's block table (blocks are scattered over the cache in random
 * order). For every (request, KV head) the orchestrator submits, inside one
 * scope:
 *
 *   fill m=-inf, l=0, o=0                      (AIV, OUTPUT intermediates)
 *   per KV block j (valid = tokens in block j):
 *     S_j = Q_g · K_j^T           [hg, valid]   (AIC matmul, OUTPUT S_j)
 *     P_j = online_softmax(S_j)   [hg, valid]   (AIV, INOUT m, l, o; OUTPUT P_j)
 *     o  += P_j · V_j             [hg, D]       (AIC matmul_acc, INOUT o)
 *   out[b, g] = o / l                          (AIV, OUTPUT_EXISTING)
 *
 * where hg = heads / kv_heads query heads share KV head g (hg = heads for
 * MQA). K_j^T and V_j are strided views straight into the cache: no copy.
 * The runtime infers the chain S_j -> P_j -> o from the tensor regions;
 * the QK^T matmuls of a request only depend on the inputs and run ahead,
 * and requests run in parallel. */
#include "paged_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pto/kernels.h"

typedef struct pa_state {
  pa_config cfg;
  int ctx_len[PA_MAX_BATCH];
  int nblocks[PA_MAX_BATCH]; /* KV blocks of each request */
  int32_t *block_table;      /* [batch, max_blocks] physical block ids */
  int max_blocks;
  int64_t cache_blocks;
  float *query, *key_cache, *value_cache, *out;
  pto_tensor tq, tk, tv, tout; /* whole-buffer views */
  pto_kernel_ids ids;
  float scale;
} pa_state;

/* ---- inputs ---- */

static uint64_t pa_rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static float pa_frand(uint64_t *s) {
  return (float)(pa_rng(s) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f; /* [-1, 1) */
}

static void pa_free(pa_state *st) {
  free(st->block_table);
  free(st->query);
  free(st->key_cache);
  free(st->value_cache);
  free(st->out);
}

static int pa_setup(pa_state *st, const pa_config *cfg, unsigned seed) {
  memset(st, 0, sizeof *st);
  st->cfg = *cfg;
  const int bsz = cfg->batch, h = cfg->heads, d = cfg->head_dim, bs = cfg->block_size;
  if (bsz < 1 || bsz > PA_MAX_BATCH || cfg->kv_heads < 1 || h % cfg->kv_heads || d < 1 || bs < 1 ||
      !cfg->ctx_lens)
    return PTO_EINVAL;
  uint64_t rng = 0x5eed0000ull + seed;
  for (int b = 0; b < bsz; b++) {
    st->ctx_len[b] = cfg->ctx_lens[b];
    if (st->ctx_len[b] < 1) return PTO_EINVAL;
    st->nblocks[b] = (st->ctx_len[b] + bs - 1) / bs;
    if (st->nblocks[b] > st->max_blocks) st->max_blocks = st->nblocks[b];
    st->cache_blocks += st->nblocks[b];
  }
  st->cache_blocks += 3; /* a few blocks no request owns */

  /* Block tables: a random permutation of the cache's blocks, dealt out. */
  int64_t *perm = malloc((size_t)st->cache_blocks * sizeof *perm);
  st->block_table = calloc((size_t)bsz * (size_t)st->max_blocks, sizeof *st->block_table);
  const int64_t kv_elems = st->cache_blocks * bs * cfg->kv_heads * d;
  st->query = malloc((size_t)bsz * h * d * sizeof(float));
  st->out = malloc((size_t)bsz * h * d * sizeof(float));
  st->key_cache = malloc((size_t)kv_elems * sizeof(float));
  st->value_cache = malloc((size_t)kv_elems * sizeof(float));
  if (!perm || !st->block_table || !st->query || !st->out || !st->key_cache || !st->value_cache) {
    free(perm);
    pa_free(st);
    return PTO_ENOMEM;
  }
  for (int64_t i = 0; i < st->cache_blocks; i++)
    perm[i] = i;
  for (int64_t i = st->cache_blocks - 1; i > 0; i--) {
    int64_t j = (int64_t)(pa_rng(&rng) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int64_t next = 0;
  for (int b = 0; b < bsz; b++) {
    for (int j = 0; j < st->nblocks[b]; j++) {
      st->block_table[b * st->max_blocks + j] = (int32_t)perm[next++];
    }
  }
  free(perm);
  /* Queries twice as wide as keys so some rows are peaked, some flat. */
  for (int64_t i = 0; i < (int64_t)bsz * h * d; i++)
    st->query[i] = 2.0f * pa_frand(&rng);
  for (int64_t i = 0; i < kv_elems; i++)
    st->key_cache[i] = pa_frand(&rng);
  for (int64_t i = 0; i < kv_elems; i++)
    st->value_cache[i] = pa_frand(&rng);

  int64_t qshape[3] = {bsz, h, d};
  int64_t cshape[4] = {st->cache_blocks, bs, cfg->kv_heads, d};
  if (pto_tensor_init(&st->tq, st->query, (size_t)bsz * h * d * sizeof(float), PTO_F32, 3,
                      qshape) ||
      pto_tensor_init(&st->tout, st->out, (size_t)bsz * h * d * sizeof(float), PTO_F32, 3,
                      qshape) ||
      pto_tensor_init(&st->tk, st->key_cache, (size_t)kv_elems * sizeof(float), PTO_F32, 4,
                      cshape) ||
      pto_tensor_init(&st->tv, st->value_cache, (size_t)kv_elems * sizeof(float), PTO_F32, 4,
                      cshape)) {
    pa_free(st);
    return PTO_EINVAL;
  }
  st->scale = 1.0f / sqrtf((float)d);
  return PTO_OK;
}

/* ---- the task graph ---- */

static int pa_fill(pto_orch *o, const pa_state *st, pto_tensor *t, float v) {
  return pto_submit_v(o, st->ids.fill, PTO_OUT(t), PTO_SCALAR(v));
}

/* The tasks of request b, KV head g (call inside a scope). */
static int pa_group(pto_orch *o, const pa_state *st, int b, int g) {
  const pa_config *c = &st->cfg;
  const int64_t hg = c->heads / c->kv_heads, d = c->head_dim, bs = c->block_size;
  const int64_t tok_stride = (int64_t)c->kv_heads * d; /* between tokens in the cache */
  int rc;

  pto_tensor m, l, acc;
  int64_t vshape[1] = {hg}, oshape[2] = {hg, d};
  if ((rc = pto_tensor_desc(&m, PTO_F32, 1, vshape)) ||
      (rc = pto_tensor_desc(&l, PTO_F32, 1, vshape)) ||
      (rc = pto_tensor_desc(&acc, PTO_F32, 2, oshape)))
    return rc;
  if ((rc = pa_fill(o, st, &m, -INFINITY)) || (rc = pa_fill(o, st, &l, 0.0f)) ||
      (rc = pa_fill(o, st, &acc, 0.0f)))
    return rc;

  pto_tensor q, out;
  int64_t rows_stride[2] = {d, 1};
  const int64_t row0 = ((int64_t)b * c->heads + g * hg) * d;
  if ((rc = pto_tensor_view(&st->tq, 2, oshape, rows_stride, row0, &q)) ||
      (rc = pto_tensor_view(&st->tout, 2, oshape, rows_stride, row0, &out)))
    return rc;

  for (int j = 0; j < st->nblocks[b]; j++) {
    const int64_t left = st->ctx_len[b] - (int64_t)j * bs;
    const int64_t valid = left < bs ? left : bs; /* tokens in block j */
    const int64_t phys = st->block_table[b * st->max_blocks + j];
    const int64_t base = phys * bs * tok_stride + g * d;
    int64_t kshape[2] = {valid, d}, kstride[2] = {tok_stride, 1}, sshape[2] = {hg, valid};
    pto_tensor k, kt, v, s, p;
    if ((rc = pto_tensor_view(&st->tk, 2, kshape, kstride, base, &k)) ||
        (rc = pto_tensor_transpose(&k, 0, 1, &kt)) ||
        (rc = pto_tensor_view(&st->tv, 2, kshape, kstride, base, &v)) ||
        (rc = pto_tensor_desc(&s, PTO_F32, 2, sshape)) ||
        (rc = pto_tensor_desc(&p, PTO_F32, 2, sshape)))
      return rc;

    /* S = Q · K^T */
    if ((rc = pto_submit_v(o, st->ids.matmul, PTO_IN(&q), PTO_IN(&kt), PTO_OUT(&s),
                           PTO_BLOCKS(c->mm_blocks))))
      return rc;
    /* P = exp(scale*S - m'), rescale l and o */
    if ((rc = pto_submit_v(o, st->ids.online_softmax, PTO_IN(&s), PTO_INOUT(&m), PTO_INOUT(&l),
                           PTO_INOUT(&acc), PTO_OUT(&p), PTO_SCALAR(st->scale),
                           PTO_BLOCKS(c->sm_blocks))))
      return rc;
    /* o += P · V */
    if ((rc = pto_submit_v(o, st->ids.matmul_acc, PTO_IN(&p), PTO_IN(&v), PTO_INOUT(&acc),
                           PTO_BLOCKS(c->mm_blocks))))
      return rc;
  }
  /* out = o / l */
  return pto_submit_v(o, st->ids.normalize_rows, PTO_IN(&acc), PTO_IN(&l), PTO_OUT_EXISTING(&out),
                      PTO_BLOCKS(c->sm_blocks));
}

/* One scope per (request, KV head): its S, P, m, l, o are reclaimed as
 * soon as its normalise task has run. A failed submit has latched the run's
 * error, so the orchestration just stops; a view that could not be built
 * has not, so it fails the run here rather than leave the output unwritten. */
static void pa_orch(pto_orch *o, void *arg) {
  const pa_state *st = arg;
  for (int b = 0; b < st->cfg.batch; b++) {
    for (int g = 0; g < st->cfg.kv_heads; g++) {
      if (pto_scope_begin(o, PTO_SCOPE_AUTO) != PTO_OK) return;
      int rc = pa_group(o, st, b, g);
      int rc_end = pto_scope_end(o);
      if (rc != PTO_OK && pto_orch_status(o) == PTO_OK)
        pto_orch_fatal(o, "paged attention: request %d, KV head %d: %s", b, g, pto_status_name(rc));
      if (rc != PTO_OK || rc_end != PTO_OK) return;
    }
  }
}

/* ---- sequential reference ---- */

/* out[b, h, :] = softmax(scale * q_bh · K_b^T) · V_b in double, gathering
 * the request's keys and values through its block table. */
static void pa_reference(const pa_state *st, float *ref) {
  const pa_config *c = &st->cfg;
  const int d = c->head_dim, bs = c->block_size, hg = c->heads / c->kv_heads;
  double *sc = malloc((size_t)st->max_blocks * bs * sizeof *sc);
  double *acc = malloc((size_t)d * sizeof *acc);
  if (!sc || !acc) abort();
  for (int b = 0; b < c->batch; b++) {
    for (int h = 0; h < c->heads; h++) {
      const int g = h / hg;
      const float *q = st->query + ((int64_t)b * c->heads + h) * d;
      double mx = -INFINITY, sum = 0.0;
      for (int t = 0; t < st->ctx_len[b]; t++) {
        const int64_t phys = st->block_table[b * st->max_blocks + t / bs];
        const float *k = st->key_cache + ((phys * bs + t % bs) * c->kv_heads + g) * d;
        double dot = 0.0;
        for (int i = 0; i < d; i++)
          dot += (double)q[i] * k[i];
        sc[t] = dot * st->scale;
        if (sc[t] > mx) mx = sc[t];
      }
      memset(acc, 0, (size_t)d * sizeof *acc);
      for (int t = 0; t < st->ctx_len[b]; t++) {
        const int64_t phys = st->block_table[b * st->max_blocks + t / bs];
        const float *v = st->value_cache + ((phys * bs + t % bs) * c->kv_heads + g) * d;
        const double w = exp(sc[t] - mx);
        sum += w;
        for (int i = 0; i < d; i++)
          acc[i] += w * v[i];
      }
      float *o = ref + ((int64_t)b * c->heads + h) * d;
      for (int i = 0; i < d; i++)
        o[i] = (float)(acc[i] / sum);
    }
  }
  free(sc);
  free(acc);
}

/* ---- the scene ---- */

int paged_attention_scene(const pa_config *cfg, const pto_scene_opts *opts, pto_scene_report *rep) {
  pa_state st;
  int rc = pa_setup(&st, cfg, opts->seed);
  if (rc != PTO_OK) {
    rep->status = rc;
    snprintf(rep->message, sizeof rep->message, "paged attention: bad configuration");
    return rc;
  }
  const size_t n = (size_t)cfg->batch * cfg->heads * cfg->head_dim;
  float *ref = malloc(n * sizeof *ref);
  pto_chip *chip = NULL;
  pto_chip_config cc;
  scene_chip_config(opts, cfg->clusters, 0, &cc);
  if (!ref) {
    rc = PTO_ENOMEM;
  } else if ((rc = scene_chip_create(&cc, &chip, rep)) == PTO_OK &&
             (rc = pto_kernels_register(chip, &st.ids)) == PTO_OK) {
    memset(st.out, 0xff, n * sizeof *st.out); /* NaN: an unwritten output cannot pass */
    rc = scene_run_rounds(chip, opts, pa_orch, &st, rep);
  }
  if (rc != PTO_OK) {
    rep->status = rc;
    if (!rep->message[0])
      snprintf(rep->message, sizeof rep->message, "paged attention: run failed (%s)",
               pto_status_name(rc));
  } else {
    pa_reference(&st, ref);
    rep->verified = scene_check_f32(rep, "out", st.out, ref, n, 1e-4f);
    if (rep->verified) {
      int lo = st.ctx_len[0], hi = st.ctx_len[0];
      int64_t kv_blocks = 0;
      for (int b = 0; b < cfg->batch; b++) {
        if (st.ctx_len[b] < lo) lo = st.ctx_len[b];
        if (st.ctx_len[b] > hi) hi = st.ctx_len[b];
        kv_blocks += st.nblocks[b];
      }
      snprintf(rep->message, sizeof rep->message,
               "batch %d, heads %d (kv %d), head_dim %d, block %d, ctx %d..%d (%lld KV blocks): "
               "output matches sequential attention within 1e-4",
               cfg->batch, cfg->heads, cfg->kv_heads, cfg->head_dim, cfg->block_size, lo, hi,
               (long long)kv_blocks);
    }
  }
  if (chip) pto_chip_destroy(chip);
  free(ref);
  pa_free(&st);
  return rc;
}

/* Variable lengths: partial last blocks, an exact multiple of the block
 * size, and a single block. */
static const int pa_flagship_ctx[8] = {1024, 513, 2048, 77, 1500, 128, 1999, 900};
static const pa_config pa_flagship = {
    .batch = 8,
    .heads = 16,
    .kv_heads = 1,
    .head_dim = 128,
    .block_size = 128,
    .ctx_lens = pa_flagship_ctx,
    .sm_blocks = 2,
    .mm_blocks = 1,
};

static int paged_attention_run(const pto_scene_opts *opts, pto_scene_report *rep) {
  return paged_attention_scene(&pa_flagship, opts, rep);
}

/* ---- the flagship's step, for measurements ---- */

pa_state *pa_flagship_new(pto_chip *chip, unsigned seed) {
  pa_state *st = malloc(sizeof *st);
  if (!st) return NULL;
  if (pa_setup(st, &pa_flagship, seed) != PTO_OK) {
    free(st);
    return NULL;
  }
  if (pto_kernels_register(chip, &st->ids) != PTO_OK) {
    pa_flagship_delete(st);
    return NULL;
  }
  return st;
}

void pa_step(pto_orch *o, void *st) { pa_orch(o, st); }

void pa_clear_output(pa_state *st) {
  const pa_config *c = &st->cfg;
  memset(st->out, 0xff, (size_t)c->batch * c->heads * c->head_dim * sizeof(float)); /* NaN */
}

bool pa_verify(pa_state *st) {
  const pa_config *c = &st->cfg;
  const size_t n = (size_t)c->batch * c->heads * c->head_dim;
  float *ref = malloc(n * sizeof *ref);
  if (!ref) return false;
  pa_reference(st, ref);
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++)
    ok = fabsf(st->out[i] - ref[i]) <= 1e-4f; /* false for NaN: an unwritten output */
  free(ref);
  return ok;
}

void pa_flagship_delete(pa_state *st) {
  if (!st) return;
  pa_free(st);
  free(st);
}

PTO_SCENE_WITH(paged_attention,
               "decode-step paged attention: 8 requests x 16 heads x 128, KV blocks of 128",
               paged_attention_run, PTO_SCENE_RANDOM);
