/* fault.c — the held-back store queue of ordering fault injection. One
 * queue per (process, domain): "the caller" of the ordering contract is
 * the chip, so a notify from any core of the chip lands every store the
 * chip made to that peer (landing earlier than needed is always allowed;
 * landing later never is). Landing happens under the queue lock so that a
 * concurrent notify cannot overtake a batch that holds its stores. */
#include "comm/fault.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/delivery.h"
#include "pto/status.h"

struct fault_queue {
  pthread_mutex_t lock;
  fault_op *ops;
  size_t n, cap;
  uint64_t rng;
  uint64_t seq;
  fault_land_fn land;
  fault_gap_fn gap;
  void *arg;
  int dom; /* >= 0: a controlled node run's domain; orders go through delivery.c */
};

static uint64_t rng_next(uint64_t *s) { /* splitmix64: deterministic from the seed */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int fault_create(uint64_t seed, fault_land_fn land, fault_gap_fn gap, void *arg,
                 fault_queue **out) {
  fault_queue *q = calloc(1, sizeof *q);
  if (!q) return PTO_ENOMEM;
  pthread_mutex_init(&q->lock, NULL);
  q->rng = seed;
  q->land = land;
  q->gap = gap;
  q->arg = arg;
  q->dom = -1;
  *out = q;
  return 0;
}

void fault_set_controlled(fault_queue *q, int dom) { q->dom = dom; }

void fault_destroy(fault_queue *q) {
  if (!q) return;
  for (size_t i = 0; i < q->n; i++)
    free(q->ops[i].data);
  free(q->ops);
  pthread_mutex_destroy(&q->lock);
  free(q);
}

int fault_hold(fault_queue *q, int peer, fault_kind kind, pto_dtype dt, uint64_t off,
               const void *src, size_t bytes) {
  unsigned char *copy = malloc(bytes ? bytes : 1);
  if (!copy) return PTO_ENOMEM;
  memcpy(copy, src, bytes);
  pthread_mutex_lock(&q->lock);
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 16;
    fault_op *ops = realloc(q->ops, cap * sizeof *ops);
    if (!ops) {
      pthread_mutex_unlock(&q->lock);
      free(copy);
      return PTO_ENOMEM;
    }
    q->ops = ops;
    q->cap = cap;
  }
  q->ops[q->n++] = (fault_op){peer, kind, dt, off, bytes, q->seq++, copy};
  pthread_mutex_unlock(&q->lock);
  return 0;
}

void fault_flush(fault_queue *q, int peer, bool end_of_task) {
  pthread_mutex_lock(&q->lock);
  if (q->n == 0) { /* nothing held (ops may still be NULL) */
    pthread_mutex_unlock(&q->lock);
    return;
  }
  /* move the batch to the front, keeping the rest in issue order */
  size_t nb = 0;
  for (size_t i = 0; i < q->n; i++) {
    if (peer >= 0 && q->ops[i].peer != peer) continue;
    fault_op t = q->ops[i];
    if (i > nb) memmove(&q->ops[nb + 1], &q->ops[nb], (i - nb) * sizeof t);
    q->ops[nb++] = t;
  }
  fault_op *b = q->ops;
  /* the landing order, as issue positions in the batch: a seeded shuffle;
   * an identity order is turned into an inversion so a batch of two or
   * more always lands some later store first */
  size_t small[64], *order = nb <= 64 ? small : malloc(nb * sizeof *order);
  if (!order) { /* no memory for the order: the batch lands in issue order */
    for (size_t i = 0; i < nb; i++) {
      q->land(q->arg, &b[i]);
      free(b[i].data);
    }
  } else {
    for (size_t i = 0; i < nb; i++)
      order[i] = i;
    for (size_t i = nb; i > 1; i--) {
      size_t j = (size_t)(rng_next(&q->rng) % i), t = order[i - 1];
      order[i - 1] = order[j];
      order[j] = t;
    }
    bool inverted = false;
    for (size_t i = 1; i < nb; i++)
      inverted |= order[i - 1] > order[i];
    if (nb >= 2 && !inverted) {
      order[0] = 1;
      order[1] = 0;
    }
    /* a controlled node run records the order, or replays the record's */
    if (q->dom >= 0) delivery_order(q->dom, peer, nb, order);
    for (size_t i = 0; i < nb; i++) {
      q->land(q->arg, &b[order[i]]);
      if (end_of_task && q->gap && i + 1 < nb) q->gap(q->arg, &b[order[i]]);
    }
    for (size_t i = 0; i < nb; i++)
      free(b[i].data);
    if (order != small) free(order);
  }
  if (q->n > nb) memmove(q->ops, q->ops + nb, (q->n - nb) * sizeof *q->ops);
  q->n -= nb;
  pthread_mutex_unlock(&q->lock);
}

size_t fault_pending(fault_queue *q) {
  pthread_mutex_lock(&q->lock);
  size_t n = q->n;
  pthread_mutex_unlock(&q->lock);
  return n;
}
