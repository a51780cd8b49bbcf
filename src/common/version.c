/* version.c — pto_version(): the library's own version string. */
#include "pto/version.h"

#define PTO_STR_(x) #x
#define PTO_STR(x)  PTO_STR_(x)

const char *pto_version(void) {
  return PTO_STR(PTO_VERSION_MAJOR) "." PTO_STR(PTO_VERSION_MINOR) "." PTO_STR(PTO_VERSION_PATCH);
}
