/* test_dist_concurrent.c — two runs of the ring-shuffle scene started at
 * the same moment, asking for the same device ids, 50 times: every run is
 * either correct or fails loudly with "device busy" (PTO_EDEVICE_BUSY);
 * no run ever returns a wrong value. Each run is its own process (as two
 * users' programs would be). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "scenes/dist_scene.h"

#define REPEATS 50
enum { RUN_OK = 0, RUN_BUSY = 10, RUN_WRONG = 11 };

static int one_run(int go_fd) {
  char c;
  if (read(go_fd, &c, 1) < 0) return 12; /* blocks until the parent closes the pipe: EOF */
  pto_scene_opts o = {0};
  o.rounds = 1;
  pto_scene_report rep = {0};
  /* device ids of its own: no other test or user of this machine asks for them */
  static const int devices[2] = {60, 61};
  int rc = ring_shuffle_leased(&o, devices, 0, &rep);
  if (rc == PTO_EDEVICE_BUSY && strstr(rep.err.details, "device busy")) {
    fprintf(stderr, "run %d: %s\n", (int)getpid(), rep.err.details); /* loudly */
    return RUN_BUSY;
  }
  if (rc == 0 && rep.verified) return RUN_OK;
  fprintf(stderr, "run %d: %s %s\n", (int)getpid(), pto_status_name(rc), rep.message);
  return RUN_WRONG;
}

static void test_two_runs_same_devices(void **state) {
  (void)state;
  int ok = 0, busy = 0;
  for (int i = 0; i < REPEATS; i++) {
    int go[2];
    assert_int_equal(pipe(go), 0);
    fflush(NULL);
    pid_t p[2];
    for (int k = 0; k < 2; k++) {
      p[k] = fork();
      assert_true(p[k] >= 0);
      if (p[k] == 0) {
        close(go[1]);
        _exit(one_run(go[0]));
      }
    }
    close(go[0]);
    close(go[1]); /* both start now */
    for (int k = 0; k < 2; k++) {
      int st;
      assert_int_equal(waitpid(p[k], &st, 0), p[k]);
      assert_true(WIFEXITED(st));
      int code = WEXITSTATUS(st);
      if (code != RUN_OK && code != RUN_BUSY) fail_msg("run %d ended with code %d", k, code);
      ok += code == RUN_OK;
      busy += code == RUN_BUSY;
    }
  }
  fprintf(stderr, "%d runs correct, %d failed with device busy\n", ok, busy);
  assert_true(ok >= REPEATS); /* at least one of each pair got the devices */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_runs_same_devices),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
