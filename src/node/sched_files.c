/* sched_files.c — what a chip task of a node run under a controlled
 * schedule gets (node_schedule.h): its own seed, drawn from the node's,
 * and its own record and replay files, named after the node record's. */
#include <inttypes.h>
#include <stdio.h>

#include "node/node_internal.h"

uint64_t node_sched_mix(uint64_t z) { /* splitmix64's finaliser */
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool node_sched_chip_task(const pto_node *n, const struct node_frame *f, int slot, uint64_t *seed,
                          char *rec, char *rep, size_t len) {
  rec[0] = rep[0] = 0;
  if (f->sched_task < 0) return false;
  uint64_t s = n->cfg.chip.schedule_seed;
  /* each chip task its own stream; a record's seed is at most INT64_MAX */
  *seed = s ? (node_sched_mix(s ^ node_sched_mix((uint64_t)f->sched_task << 8 | (uint64_t)slot)) &
               INT64_MAX) |
                  1
            : 0;
  if (n->sched_record)
    snprintf(rec, len, "%s.t%" PRId64 ".c%d", n->sched_record, f->sched_task, slot);
  if (n->sched_replay)
    snprintf(rep, len, "%s.t%" PRId64 ".c%d", n->sched_replay, f->sched_task, slot);
  return true;
}
