/* pto/export.h — PTO_API marks the functions of the public API.
 *
 * libpto is built with hidden visibility: only what a public header marks
 * PTO_API is exported from libpto.so (and kept global in libpto.a), so an
 * application's own symbols (say, its `ring_init`) never clash with pto's
 * internals. Every exported symbol starts with `pto_`. */
#ifndef PTO_EXPORT_H
#define PTO_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define PTO_API __attribute__((visibility("default")))
#else
#define PTO_API
#endif

#endif
