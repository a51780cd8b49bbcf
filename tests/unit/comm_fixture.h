/* comm_fixture.h — two ranks of one domain in one process, for unit tests
 * of the in-kernel comm operations: a reserved window space, the domain
 * descriptor, each rank's comm state and a kernel context per rank.
 *
 *   fixture f;
 *   comm_fixture_reserve(&f, bufs, nbufs, id);  // then set f.d fields
 *   comm_fixture_open(&f, 'x', epoch);          // both ranks open, attach
 *   ... f.k[0], f.k[1] as kernel contexts ...
 *   comm_fixture_close(&f);
 *
 * Include after cmocka.h. */
#ifndef PTO_TEST_COMM_FIXTURE_H
#define PTO_TEST_COMM_FIXTURE_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "pto/comm.h"

typedef struct fixture {
  void *space;
  uint64_t space_bytes;
  comm_domain_desc d;
  pto_comm c[2];
  pto_kctx k[2];
} fixture;

/* Reserves `space_bytes` of window space and lays out the buffers of a
 * 2-rank domain `id` (wait deadline 2 s); the caller may set more of f->d. */
static inline void comm_fixture_reserve(fixture *f, uint64_t space_bytes,
                                        const pto_window_buffer *bufs, int nbufs, int32_t id) {
  memset(f, 0, sizeof *f);
  f->space_bytes = space_bytes;
  assert_int_equal(comm_space_reserve(space_bytes, &f->space), 0);
  assert_int_equal(comm_desc_layout(&f->d, bufs, nbufs), 0);
  f->d.id = id;
  f->d.nranks = 2;
  f->d.base = (uint64_t)(uintptr_t)f->space;
  f->d.wait_timeout_ms = 2000;
}

/* A window prefix "/pto.<pid>.<tag><seq>.<nonce>" no earlier process
 * used: the nonce keeps a test clear of a window left in /dev/shm by a
 * killed process that had the same pid (the shm backend creates windows
 * O_EXCL and fails on such a name). Not the shape of a node run's names,
 * so the node's stale sweep (run_guard.c) leaves it alone. */
static inline void comm_fixture_prefix(char *out, size_t n, char tag) {
  static unsigned seq;
  unsigned nonce =
      (unsigned)((pto_now_ns() ^ (uint64_t)(uintptr_t)out) & 0xffffff); /* as node.c's */
  snprintf(out, n, "/pto.%d.%c%u.%06x", (int)getpid(), tag, seq++, nonce);
}

/* Fails the test with rank r's latched details when rc is not 0. */
static inline void comm_fixture_ok(fixture *f, int r, int rc, const char *what) {
  if (!rc) return;
  char det[400] = "";
  comm_task_error(&f->c[r], det, sizeof det);
  fail_msg("rank %d: %s returned %s: %s", r, what, pto_status_name(rc), det);
}

/* Both ranks open and attach the domain and begin task `epoch`. Once both
 * have mapped every window, the windows' names are unlinked: a test that
 * fails or is killed later leaves nothing in /dev/shm. */
static inline void comm_fixture_open(fixture *f, char tag, uint32_t epoch) {
  comm_fixture_prefix(f->d.prefix, sizeof f->d.prefix, tag);
  for (int r = 0; r < 2; r++) {
    comm_init(&f->c[r], r);
    comm_fixture_ok(f, r, comm_domain_open(&f->c[r], &f->d, r), "comm_domain_open");
  }
  for (int r = 0; r < 2; r++) {
    comm_fixture_ok(f, r, comm_domain_attach(&f->c[r], f->d.id), "comm_domain_attach");
    comm_task_begin(&f->c[r], epoch, 3); /* one group task on chips 0 and 1 */
    memset(&f->k[r], 0, sizeof f->k[r]);
    f->k[r].env = &f->c[r];
    f->k[r].core_id = r;
  }
  comm_shm_unlink(&f->d, -1);
}

static inline void comm_fixture_close(fixture *f) {
  for (int r = 0; r < 2; r++)
    comm_fini(&f->c[r], true);
  comm_space_release(f->space, f->space_bytes);
}

#endif
