/* role_loop_model.h — role.h's loop as explorer steps, shared by the
 * explorers whose threads run a scheduler's passes (test_role_explorer.c,
 * test_pull_explorer.c, test_busy_skip_explorer.c):
 *
 *   PEEK  role_peek_free -> XCHG, else leave
 *   XCHG  role_exchange  -> SNAP, else leave
 *   SNAP  seen = role_snapshot
 *   PASS  the model's own pass (not here): it sets `did`, then MORE
 *   MORE  did || role_more(seen) -> SNAP, else REL
 *   REL   role_release
 *   CHECK role_recheck(seen) -> PEEK, else leave
 *
 * A model numbers these seven steps consecutively from its PEEK, in this
 * order; a thread leaves the loop to the pc it was given (`ret`). Each
 * step is one atomic operation of role.h on the explored role words.
 * Include after role.h. */
#ifndef PTO_TEST_ROLE_LOOP_MODEL_H
#define PTO_TEST_ROLE_LOOP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

enum { RL_PEEK, RL_XCHG, RL_SNAP, RL_PASS, RL_MORE, RL_REL, RL_CHECK };

/* Whether pc is one of the loop's steps other than PASS (the model's). */
static inline bool role_loop_at(int pc, int peek) {
  return pc >= peek && pc <= peek + RL_CHECK && pc != peek + RL_PASS;
}

/* One step of a thread at pc (role_loop_at): returns its next pc, `ret`
 * when it leaves the loop. `seen` is the thread's snapshot; `did`, whether
 * its last pass did anything. */
static inline int role_loop_step(role *r, int pc, int peek, int ret, uint8_t *seen, bool did) {
  switch (pc - peek) {
  case RL_PEEK: return role_peek_free(r) ? peek + RL_XCHG : ret;
  case RL_XCHG: return role_exchange(r) ? peek + RL_SNAP : ret;
  case RL_SNAP: *seen = (uint8_t)role_snapshot(r); return peek + RL_PASS;
  case RL_MORE: return did || role_more(r, *seen) ? peek + RL_SNAP : peek + RL_REL;
  case RL_REL: role_release(r); return peek + RL_CHECK;
  case RL_CHECK: return role_recheck(r, *seen) ? peek : ret;
  default: return pc;
  }
}

#endif
