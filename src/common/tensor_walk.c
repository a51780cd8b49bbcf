/* tensor_walk.c — walking views as contiguous runs, two at once, and
 * cutting a view into tiles of its last two dims. */
#include "common/tensor_walk.h"

int64_t tensor_walk_numel(const pto_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndims; i++)
    n *= t->shape[i]; /* bounded: the view was checked */
  return n;
}

/* Walks a view in row-major order as contiguous runs of elements. */
typedef struct view_it {
  const pto_tensor *t;
  int64_t idx[PTO_MAX_DIMS];
} view_it;

static int64_t it_off(const view_it *it) { /* element offset from buf */
  int64_t o = it->t->offset;
  for (int i = 0; i < it->t->ndims; i++)
    o += it->idx[i] * it->t->stride[i];
  return o;
}

static int64_t it_run(const view_it *it) {
  int l = it->t->ndims - 1;
  return it->t->stride[l] == 1 ? it->t->shape[l] - it->idx[l] : 1;
}

static void it_adv(view_it *it, int64_t k) {
  int l = it->t->ndims - 1;
  it->idx[l] += k;
  for (int i = l; i > 0 && it->idx[i] >= it->t->shape[i]; i--) {
    it->idx[i] = 0;
    it->idx[i - 1]++;
  }
}

int tensor_lockstep(const pto_tensor *a, const pto_tensor *b, tensor_run_fn fn, void *arg) {
  view_it ia = {a, {0}}, ib = {b, {0}};
  for (int64_t left = tensor_walk_numel(a); left > 0;) {
    int64_t k = it_run(&ia), kb = it_run(&ib);
    if (kb < k) k = kb;
    int rc = fn(arg, it_off(&ia), it_off(&ib), k);
    if (rc) return rc;
    it_adv(&ia, k);
    it_adv(&ib, k);
    left -= k;
  }
  return 0;
}

static int64_t clamp_chunk(int64_t want, int64_t whole) {
  return want > 0 && want < whole ? want : whole;
}

void tensor_tiles_init(tensor_tiles *g, const pto_tensor *t, int64_t chunk_rows,
                       int64_t chunk_cols) {
  int l = t->ndims - 1;
  g->rows = l > 0 ? t->shape[l - 1] : 1;
  g->cols = t->shape[l];
  g->lead = 1;
  for (int i = 0; i < l - 1; i++)
    g->lead *= t->shape[i];
  g->cr = clamp_chunk(chunk_rows, g->rows);
  g->cc = clamp_chunk(chunk_cols, g->cols);
  g->r0 = g->c0 = 0;
  if (g->lead == 0) g->rows = 0; /* empty: no tiles */
}

int64_t tensor_tiles_max_elems(const tensor_tiles *g) { return g->lead * g->cr * g->cc; }

bool tensor_tiles_next(tensor_tiles *g, int64_t *r0, int64_t *nr, int64_t *c0, int64_t *nc) {
  if (g->c0 >= g->cols) { /* next row of tiles */
    g->c0 = 0;
    g->r0 += g->cr;
  }
  if (g->r0 >= g->rows || g->cols == 0) return false;
  *r0 = g->r0;
  *c0 = g->c0;
  *nr = g->rows - g->r0 < g->cr ? g->rows - g->r0 : g->cr;
  *nc = g->cols - g->c0 < g->cc ? g->cols - g->c0 : g->cc;
  g->c0 += g->cc;
  return true;
}

pto_tensor tensor_tile_of(const pto_tensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  pto_tensor v = *t;
  int l = t->ndims - 1;
  v.offset += c0 * t->stride[l];
  v.shape[l] = nc;
  if (l > 0) {
    v.offset += r0 * t->stride[l - 1];
    v.shape[l - 1] = nr;
  }
  return v;
}
