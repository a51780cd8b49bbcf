/* fuzz_input.h — what every libFuzzer target here reads its bytes with:
 * an input that yields zeros once it is used up (so any input decodes to
 * a whole case), and the trap a failed check ends in. */
#ifndef PTO_FUZZ_INPUT_H
#define PTO_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct input {
  const uint8_t *p;
  size_t n;
} input;

/* The next byte, or 0 once the input is used up. */
static inline uint8_t u8(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

/* The next `bytes` bytes (at most 8), big-endian. */
static inline uint64_t take(input *in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++)
    v = v << 8 | u8(in);
  return v;
}

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) __builtin_trap();                                                                    \
  } while (0)

#endif
