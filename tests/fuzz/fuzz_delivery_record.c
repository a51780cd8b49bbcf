/* fuzz_delivery_record.c — libFuzzer target for the delivery record's
 * reader (src/comm/delivery.c), which a node replay runs on a chip task's
 * .land file that may be truncated, corrupt or made up (a NUL byte inside
 * a line once made it write through NULL).
 *
 * Oracles: a refused record says why, naming the file; an accepted one is
 * replayed against the batches its own "L" lines describe (as far as they
 * parse), every order it gives being a permutation of its batch, and its
 * end is PTO_OK or PTO_EREPLAY saying where the replay diverged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/delivery.h"
#include "fuzz_input.h"
#include "pto/status.h"

#define MAX_BATCH 256

static char path[64];

static void remove_path(void) { unlink(path); }

static void is_permutation(const size_t *order, size_t nb) {
  static bool seen[MAX_BATCH];
  memset(seen, 0, nb * sizeof *seen);
  for (size_t i = 0; i < nb; i++) {
    CHECK(order[i] < nb && !seen[order[i]]);
    seen[order[i]] = true;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/pto_fuzz_delivery.%d", (int)getpid());
    atexit(remove_path);
  }
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(data, 1, size, f) == size);
  CHECK(fclose(f) == 0);
  char why[400];
  memset(why, 0x55, sizeof why);
  if (delivery_begin(NULL, path, why, sizeof why)) {
    CHECK(memchr(why, 0, sizeof why) != NULL);
    CHECK(strncmp(why, "delivery record ", 16) == 0 && strstr(why, path) == why + 16);
    return 0;
  }
  /* the batches the record's lines name (an accepted record has no NUL) */
  char *text = malloc(size + 1);
  CHECK(text != NULL);
  memcpy(text, data, size);
  text[size] = 0;
  CHECK(strlen(text) == size);
  size_t order[MAX_BATCH];
  for (char *s = text; (s = strstr(s, "\nL ")) != NULL; s++) {
    char *e;
    long d = strtol(s + 3, &e, 10), p = strtol(e, &e, 10), k = strtol(e, &e, 10);
    size_t nb = k >= 1 && k <= MAX_BATCH ? (size_t)k : 1;
    for (size_t i = 0; i < nb; i++)
      order[i] = i;
    delivery_order((int)d, (int)p, nb, order);
    is_permutation(order, nb);
  }
  free(text);
  memset(why, 0x55, sizeof why);
  int rc = delivery_end(why, sizeof why);
  CHECK(rc == 0 || rc == PTO_EREPLAY);
  if (rc) {
    CHECK(memchr(why, 0, sizeof why) != NULL);
    CHECK(strncmp(why, "replay of ", 10) == 0 && strstr(why, " diverged at line ") != NULL);
  }
  return 0;
}
