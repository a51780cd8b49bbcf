/* pto/version.h — the version of pto, kept here only: CMakeLists.txt reads
 * these three lines for the project version, the CMake package
 * (ptoConfigVersion.cmake) and the pkg-config file (pto.pc). */
#ifndef PTO_VERSION_H
#define PTO_VERSION_H

#include "pto/export.h"

#define PTO_VERSION_MAJOR 0
#define PTO_VERSION_MINOR 1
#define PTO_VERSION_PATCH 0

/* The version as one number, for #if: PTO_VERSION >= PTO_VERSION_NUM(0, 2, 0). */
#define PTO_VERSION_NUM(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define PTO_VERSION                          PTO_VERSION_NUM(PTO_VERSION_MAJOR, PTO_VERSION_MINOR, PTO_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked at run time, "MAJOR.MINOR.PATCH" (it may
 * differ from the header's when a newer libpto.so is installed). */
PTO_API const char *pto_version(void);

#ifdef __cplusplus
}
#endif

#endif
