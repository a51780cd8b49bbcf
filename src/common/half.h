/* half.h — f16 (IEEE binary16) and bf16 conversions to and from f32, round
 * to nearest even; shared by the backend's atomic add, the collectives'
 * reductions and the chip's REDUX ops. */
#ifndef PTO_COMMON_HALF_H
#define PTO_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

static inline float half_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    if (m == 0) {
      u = s;
    } else { /* subnormal: normalise */
      e = 113;
      while (!(m & 0x400)) {
        m <<= 1;
        e--;
      }
      u = s | e << 23 | (m & 0x3ff) << 13;
    }
  } else if (e == 31) {
    u = s | 0x7f800000u | m << 13;
  } else {
    u = s | (e + 112) << 23 | m << 13;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t f32_to_half(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t s = (u >> 16) & 0x8000;
  int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
  uint32_t m = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
  if (e >= 31) return (uint16_t)(s | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)s;
    m |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (hm & 1))) hm++;
    return (uint16_t)(s | hm);
  }
  uint32_t hm = m >> 13, rem = m & 0x1fff;
  uint32_t r = s | (uint32_t)e << 10 | hm;
  if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) r++;
  return (uint16_t)r;
}

static inline float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

#endif
