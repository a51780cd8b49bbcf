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

/* Both ranks open and attach the domain and begin task `epoch` (shm names
 * made unique per process by `tag` and a counter). */
static inline void comm_fixture_open(fixture *f, char tag, uint32_t epoch) {
  static unsigned run_seq;
  snprintf(f->d.prefix, sizeof f->d.prefix, "/pto.%d.%c%u", (int)getpid(), tag, run_seq++);
  for (int r = 0; r < 2; r++) {
    comm_init(&f->c[r], r);
    assert_int_equal(comm_domain_open(&f->c[r], &f->d, r), 0);
  }
  for (int r = 0; r < 2; r++) {
    assert_int_equal(comm_domain_attach(&f->c[r], f->d.id), 0);
    comm_task_begin(&f->c[r], epoch, 3); /* one group task on chips 0 and 1 */
    memset(&f->k[r], 0, sizeof f->k[r]);
    f->k[r].env = &f->c[r];
    f->k[r].core_id = r;
  }
}

static inline void comm_fixture_close(fixture *f) {
  for (int r = 0; r < 2; r++)
    comm_fini(&f->c[r], true);
  comm_space_release(f->space, f->space_bytes);
}

#endif
