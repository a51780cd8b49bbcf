/* read_probe.h — the two byte-level steps of checking mode's read check
 * (docs/contracts.md), shared by a chip's blocks (chip/contract.c) and a
 * node's host tasks (node/node_check.c): the code runs a second time on
 * memory whose undeclared bytes are flipped, and wherever either run
 * changed a byte both must have left the same value. Pure; no state. */
#ifndef PTO_COMMON_READ_PROBE_H
#define PTO_COMMON_READ_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t probe_word(const uint8_t *p) {
  uint64_t w;
  memcpy(&w, p, sizeof w);
  return w;
}

/* dst = src with every byte flipped (a word at a time). */
static inline void probe_flip_copy(uint8_t *dst, const uint8_t *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = ~probe_word(src + i);
    memcpy(dst + i, &w, sizeof w);
  }
  for (; i < n; i++)
    dst[i] = (uint8_t)~src[i];
}

/* The first byte of n where the runs disagree (real[i] != scr[i]) while
 * either changed it (real from pre; scr from pre, or from ~pre where the
 * bytes were flipped), or -1. A word at a time: most words neither run
 * changed. */
static inline int64_t probe_first_disagreement(const uint8_t *real, const uint8_t *pre,
                                               const uint8_t *scr, size_t n, bool flipped) {
  const uint64_t inv = flipped ? ~0ull : 0;
  for (size_t i = 0; i < n;) {
    if (i + 8 <= n) {
      uint64_t rw = probe_word(real + i), pw = probe_word(pre + i), sw = probe_word(scr + i);
      if (((rw ^ pw) | (sw ^ pw ^ inv)) == 0 || rw == sw) {
        i += 8;
        continue;
      }
    }
    for (size_t end = i + 8 < n ? i + 8 : n; i < end; i++) {
      uint8_t before = flipped ? (uint8_t)~pre[i] : pre[i];
      if (real[i] != scr[i] && (real[i] != pre[i] || scr[i] != before)) return (int64_t)i;
    }
  }
  return -1;
}

#endif
