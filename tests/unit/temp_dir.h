/* temp_dir.h — a cmocka group's scratch directory (tests that write files):
 * made under $TMPDIR (else /tmp) by temp_dir_setup, removed with what it
 * holds by temp_dir_teardown; in_dir names a file in it. Include once per
 * test program. */
#ifndef PTO_TEST_TEMP_DIR_H
#define PTO_TEST_TEMP_DIR_H

#include <stdio.h>
#include <stdlib.h>

static char dir[128];

/* dir/name, in one of four buffers (four names may be held at once). */
static const char *in_dir(const char *name) {
  static char buf[4][256];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, 256, "%s/%s", dir, name);
  return b;
}

static int temp_dir_setup(void **state) {
  (void)state;
  const char *t = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/pto_test_XXXXXX", t && *t ? t : "/tmp");
  return mkdtemp(dir) ? 0 : -1;
}

static int temp_dir_teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

#endif
