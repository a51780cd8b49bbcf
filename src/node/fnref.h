/* fnref.h — a code or data address as it can travel to another process of
 * the same program: the loaded object that holds it (a hash of its path;
 * the main program's is "") and the offset from that object's load base.
 * Processes started separately (MPI ranks) load objects at different
 * addresses (ASLR), so a function pointer in a node frame is sent as a
 * fnref and turned back into an address of the receiving process. A code
 * reference also carries the first bytes of the function, so a rank whose
 * object differs (another build on another host) is refused, not jumped
 * into. Pure: dl_iterate_phdr only, no state. */
#ifndef PTO_NODE_FNREF_H
#define PTO_NODE_FNREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fnref {
  uint64_t object; /* FNV-1a hash of the object's path ("" = main program); 0 = NULL */
  uint64_t offset; /* from the object's load base */
  uint64_t check;  /* code: its first 8 bytes; data: 0 */
  uint8_t code;    /* 1: a function, 0: data */
} fnref;

/* Encodes p (NULL encodes as "no address"). Fails with PTO_EINVAL when p
 * lies in no loaded object (heap, stack, JIT code), why[n] naming it. */
int fnref_encode(const void *p, bool code, fnref *out, char *why, size_t n);
/* The address in this process; PTO_EINVAL when no loaded object matches or
 * the code differs, why[n] saying which. */
int fnref_decode(const fnref *r, void **out, char *why, size_t n);

#endif
