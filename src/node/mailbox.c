/* mailbox.c — the generation-tagged frame hand-off (see mailbox.h). */
#include "node/mailbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void mbox_init(node_mbox *mb) {
  memset(mb, 0, sizeof *mb);
  pto_event_init(&mb->to_child, true);
}

bool mbox_idle(node_mbox *mb) {
  /* acquire pairs with the child's release of `done` (its reply is read next) */
  return atomic_load_explicit(&mb->done, memory_order_acquire) ==
         atomic_load_explicit(&mb->posted, memory_order_relaxed); /* only the parent writes it */
}

uint32_t mbox_post(node_mbox *mb, node_frame *f) {
  uint32_t gen = atomic_load_explicit(&mb->posted, memory_order_relaxed) + 1;
  if (gen == 0) gen = 1; /* 0 is "nothing yet" */
  /* The cancel word stays until the next cancel; one that names gen is of
   * the frame 2^32 - 1 posts before, and must not cancel this one. Only
   * the poster writes the word (mbox_cancel: the parent, or the relay
   * that posts here), and the frame's release below publishes the 0. */
  if (comm_cancel_by(atomic_load_explicit(&mb->cancel, memory_order_relaxed), gen) != -1)
    atomic_store_explicit(&mb->cancel, 0, memory_order_relaxed);
  f->gen = gen;
  mb->frame = *f;
  /* release pairs with the child's acquire in mbox_take: the frame is written */
  atomic_store_explicit(&mb->posted, gen, memory_order_release);
  pto_event_signal(&mb->to_child);
  return gen;
}

bool mbox_taken(node_mbox *mb, uint32_t gen) {
  /* acquire pairs with the release in mbox_take: the child has finished
   * copying frame gen, so a later post cannot tear it */
  return atomic_load_explicit(&mb->taken, memory_order_acquire) == gen;
}

bool mbox_poll_reply(node_mbox *mb, uint32_t gen, node_reply *r) {
  /* acquire pairs with the release in mbox_reply: the reply is complete */
  if (atomic_load_explicit(&mb->done, memory_order_acquire) != gen) return false;
  *r = mb->reply;
  return r->gen == gen;
}

bool mbox_take(node_mbox *mb, uint32_t last, node_frame *f) {
  /* acquire pairs with the release in mbox_post */
  uint32_t gen = atomic_load_explicit(&mb->posted, memory_order_acquire);
  if (gen == last) return false;
  *f = mb->frame;
  if (f->gen != gen) return false; /* torn by a newer post: impossible while we owe a reply */
  /* release pairs with mbox_taken: my copy of the frame is complete (the
   * parent may post over it), and a liveness hint for its control deadline */
  atomic_store_explicit(&mb->taken, gen, memory_order_release);
  return true;
}

bool mbox_peek(node_mbox *mb, uint32_t last, node_frame *f) {
  /* acquire pairs with the release in mbox_post: the frame is written (and
   * stays as it is until its reply, which this relay delivers) */
  uint32_t gen = atomic_load_explicit(&mb->posted, memory_order_acquire);
  if (gen == last) return false;
  *f = mb->frame;
  return f->gen == gen;
}

void mbox_mark_taken(node_mbox *mb, uint32_t gen) {
  /* release pairs with mbox_taken, as in mbox_take */
  atomic_store_explicit(&mb->taken, gen, memory_order_release);
}

void mbox_reply(node_mbox *mb, const node_reply *r, pto_event *parent) {
  mb->reply = *r;
  /* release pairs with the parent's acquire in mbox_poll_reply / mbox_idle */
  atomic_store_explicit(&mb->done, r->gen, memory_order_release);
  pto_event_signal(parent);
}

void mbox_cancel(node_mbox *mb, uint32_t gen, int failed) {
  /* relaxed: the word is the whole message; nothing is published with it */
  atomic_store_explicit(&mb->cancel, comm_cancel_word(gen, failed), memory_order_relaxed);
}

bool mbox_cancel_relay(node_mbox *mb, uint64_t w, uint32_t remote, uint32_t local, bool replied) {
  int failed = comm_cancel_by(w, remote);
  if (failed == -1 || !local || replied) return false;
  mbox_cancel(mb, local, failed);
  return true;
}

void mbox_set_state(node_mbox *mb, child_state s, pto_event *parent) {
  /* release: everything the child set up before reporting is visible */
  atomic_store_explicit(&mb->state, (uint32_t)s, memory_order_release);
  pto_event_signal(parent);
}

void mbox_set_failed(node_mbox *mb, pto_event *parent, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mb->start_why, sizeof mb->start_why, fmt, ap);
  va_end(ap);
  mbox_set_state(mb, CHILD_FAILED, parent); /* release: start_why is written */
}

child_state mbox_state(node_mbox *mb) {
  /* acquire pairs with mbox_set_state */
  return (child_state)atomic_load_explicit(&mb->state, memory_order_acquire);
}
