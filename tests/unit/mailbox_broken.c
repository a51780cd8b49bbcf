/* mailbox_broken.c — a deliberately broken mailbox, kept only in the test
 * tree so that the interleaving explorer can show it catches what the
 * generation on the reply prevents. It is src/node/mailbox.c with one
 * change: the reply carries no generation. The child says "a reply is
 * there" with a flag the parent clears when it posts, and the parent takes
 * whatever reply is there for the exchange it waits on. The late reply of
 * an abandoned exchange then passes for the reply to the next one.
 * Included by test_mailbox_explorer.c (the test glob builds only test_*.c);
 * every symbol is static and prefixed broken_. */
#include "node/mailbox.h"

static bool broken_mbox_idle(node_mbox *mb) {
  return atomic_load_explicit(&mb->done, memory_order_acquire) == 1 ||
         atomic_load_explicit(&mb->posted, memory_order_relaxed) == 0;
}

static uint32_t broken_mbox_post(node_mbox *mb, node_frame *f) {
  uint32_t gen = atomic_load_explicit(&mb->posted, memory_order_relaxed) + 1;
  if (gen == 0) gen = 1;
  f->gen = gen;
  mb->frame = *f;
  atomic_store_explicit(&mb->done, 0, memory_order_relaxed); /* no reply yet */
  atomic_store_explicit(&mb->posted, gen, memory_order_release);
  pto_event_signal(&mb->to_child);
  return gen;
}

static bool broken_mbox_taken(node_mbox *mb, uint32_t gen) {
  return atomic_load_explicit(&mb->taken, memory_order_acquire) == gen;
}

/* THE BUG: "a reply is there", not "the reply of gen is there". */
static bool broken_mbox_poll_reply(node_mbox *mb, uint32_t gen, node_reply *r) {
  if (atomic_load_explicit(&mb->done, memory_order_acquire) != 1) return false;
  *r = mb->reply;
  r->gen = gen; /* assumed to be the one waited for */
  return true;
}

static bool broken_mbox_take(node_mbox *mb, uint32_t last, node_frame *f) {
  uint32_t gen = atomic_load_explicit(&mb->posted, memory_order_acquire);
  if (gen == last) return false;
  *f = mb->frame;
  if (f->gen != gen) return false;
  atomic_store_explicit(&mb->taken, gen, memory_order_release);
  return true;
}

static void broken_mbox_reply(node_mbox *mb, const node_reply *r, pto_event *parent) {
  mb->reply = *r;
  mb->reply.gen = 0; /* no generation on the reply */
  atomic_store_explicit(&mb->done, 1, memory_order_release);
  pto_event_signal(parent);
}
