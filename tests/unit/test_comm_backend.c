/* test_comm_backend.c — comm_domain_open picks the backend from the domain
 * descriptor (comm_domain_desc.backend): an unknown backend is refused with
 * PTO_EINVAL naming it; in a build without MPI (PTO_MPI=OFF, as the ASan
 * and TSan builds of scripts/test.sh are) the MPI backend is refused with
 * PTO_EMPI saying pto was built without MPI. Nothing is left open. (The MPI
 * backend itself is tested under mpiexec: tests/mpi/.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "comm/comm.h"

static void open_fails(uint8_t backend, int want, const char *want_text) {
  pto_window_buffer b[1] = {{"cells", 64}};
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  assert_int_equal(comm_desc_layout(&d, b, 1), 0);
  d.id = 3;
  d.nranks = 2;
  d.chips[1] = 1;
  d.backend = backend;
  pto_comm c;
  comm_init(&c, 0);
  int rc = comm_domain_open(&c, &d, 0);
  char det[400];
  int latched = comm_task_error(&c, det, sizeof det);
  if (rc != want || latched != want || !strstr(det, want_text))
    fail_msg("backend %d: open returned %s (latched %s, \"%s\"), expected %s with \"%s\"", backend,
             pto_status_name(rc), pto_status_name(latched), det, pto_status_name(want), want_text);
  assert_null(comm_find(&c, 3));
  comm_fini(&c, true);
}

static void test_unknown_backend(void **state) {
  (void)state;
  open_fails(7, PTO_EINVAL, "domain 3: unknown communication backend 7");
}

#ifndef PTO_HAVE_MPI
static void test_built_without_mpi(void **state) {
  (void)state;
  open_fails(COMM_BACKEND_MPI, PTO_EMPI, "pto was built without MPI");
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_backend),
#ifndef PTO_HAVE_MPI
      cmocka_unit_test(test_built_without_mpi),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
