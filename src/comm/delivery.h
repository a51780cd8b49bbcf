/* delivery.h — the delivery order of held-back remote stores in a node run
 * under a controlled schedule (docs/schedules.md, "Several chips").
 *
 * With ordering fault injection, a rank's remote stores are held back and
 * land in batches (fault.c), each batch in an order drawn from the
 * domain's seed. Under a controlled node run, each chip process records
 * the order of every batch it landed during a node task, or, replaying,
 * takes it from the record instead of the seed. One chip process serves
 * one chip, so the state is the process's; the node child brackets each
 * chip task with delivery_begin / delivery_end.
 *
 * The record's text (a file per chip task):
 *   pto-delivery 1
 *   L 2 1 3 2 0 1     domain 2, to rank 1 (-1: every peer), 3 stores,
 *                     landed in issue positions 2, 0, 1
 *   end
 */
#ifndef PTO_COMM_DELIVERY_H
#define PTO_COMM_DELIVERY_H

#include <stdbool.h>
#include <stddef.h>

/* Starts a chip task's deliveries: take them from replay_path (read whole
 * now; a bad file: PTO_EREPLAY with why), record them to record_path
 * (with both, the replayed orders are recorded). Both NULL: nothing is
 * controlled. */
int delivery_begin(const char *record_path, const char *replay_path, char *why, size_t n);
/* A batch of nb stores to `peer` of domain `dom` is about to land in the
 * order order[0..nb) (issue positions, drawn from the seed). Replaying:
 * replaces it with the record's (a departure is kept
 * for delivery_end, and the drawn order stands); with both, the order
 * used is recorded. */
void delivery_order(int dom, int peer, size_t nb, size_t *order);
/* Ends the chip task: writes the record, or checks that the replay used
 * all of it. 0, or PTO_EREPLAY / PTO_ESYSTEM with why. */
int delivery_end(char *why, size_t n);

#endif
