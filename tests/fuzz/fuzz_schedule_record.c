/* fuzz_schedule_record.c — libFuzzer target for the schedule record's
 * reader (src/chip/schedule_record.c), which a replay runs on a file
 * that may be truncated, corrupt or made up.
 *
 * Oracles: a refused record or line says why, naming the record or the
 * line; the items read are written back by the record's own writer
 * (rec_buf_item) behind the same header, and that text reads back to the
 * same items (written again, byte for byte the same), every item of it
 * valid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/schedule_record.h"
#include "fuzz_input.h"

#define MAX_ITEMS 4096

/* Reads every item of an opened record into out's text; returns whether
 * it reached the end without a bad line. */
static bool read_items(rec_reader *rd, rec_buf *out, int *count) {
  char why[300];
  *count = 0;
  for (int k = 0; k < MAX_ITEMS; k++) {
    rec_item it;
    memset(why, 0x55, sizeof why);
    if (rec_next(rd, &it, why, sizeof why)) {
      CHECK(memchr(why, 0, sizeof why) != NULL);
      CHECK(strncmp(why, "line ", 5) == 0);
      return false;
    }
    if (it.kind == REC_END) return true;
    CHECK(it.kind >= REC_ORCH && it.kind <= REC_RESUME);
    if (it.kind == REC_START) {
      CHECK(it.nblocks >= 1 && it.first[0] == 0);
      for (int i = 0; i < it.nblocks; i++)
        CHECK(it.first[i] <= it.first[i + 1]);
    }
    rec_buf_item(out, &it);
    ++*count;
  }
  return true; /* long enough: the rest is not looked at */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rec_reader rd;
  char why[300];
  memset(why, 0x55, sizeof why);
  if (rec_open_text(&rd, (const char *)data, size, "in", why, sizeof why)) {
    CHECK(memchr(why, 0, sizeof why) != NULL);
    CHECK(strncmp(why, "schedule record in", 18) == 0);
    rec_close(&rd);
    return 0;
  }
  CHECK(rd.h.nkernels >= 0 && rd.h.clusters >= 1 && rd.h.aic <= 1 && rd.h.aiv <= 2);
  size_t header = rd.pos; /* the header's bytes, kept as they are */
  rec_buf first = {0}, second = {0};
  int n1, n2;
  read_items(&rd, &first, &n1);
  rec_close(&rd);
  CHECK(!first.oom);
  /* header + the items written back + "end" */
  size_t len = header + first.len + 4;
  char *text = malloc(len);
  CHECK(text != NULL);
  memcpy(text, data, header);
  if (first.len) memcpy(text + header, first.data, first.len);
  memcpy(text + header + first.len, "end\n", 4);
  int rc = rec_open_text(&rd, text, len, "again", why, sizeof why);
  if (rc) fprintf(stderr, "written back, refused: %s\n", why);
  CHECK(rc == 0);
  bool whole = read_items(&rd, &second, &n2);
  if (!whole) fprintf(stderr, "written back, a bad line\n");
  CHECK(whole && n2 == n1);
  CHECK(second.len == first.len && (!first.len || !memcmp(first.data, second.data, first.len)));
  rec_close(&rd);
  free(text);
  rec_buf_free(&first);
  rec_buf_free(&second);
  return 0;
}
