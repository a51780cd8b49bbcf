/* fnref.c — addresses that travel between processes of one program (see
 * fnref.h). */
#include "node/fnref.h"

#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "pto/status.h"

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h | 1; /* never 0, which stands for NULL */
}

typedef struct find_ctx {
  uintptr_t addr;  /* encode: the address to place */
  uint64_t object; /* decode: the object hash to find */
  uint64_t found;  /* encode: hash of the holder */
  uintptr_t base;  /* the holder's load base */
  bool in_segment; /* decode: base + offset lies in one of its segments */
  uint64_t offset; /* decode: the offset to check */
  bool executable; /* that segment is executable */
  int hits;
} find_ctx;

static const char *obj_name(const struct dl_phdr_info *info) {
  return info->dlpi_name ? info->dlpi_name : "";
}

static bool segment_of(const struct dl_phdr_info *info, uintptr_t a, bool *exec) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (a >= lo && a < lo + ph->p_memsz) {
      *exec = (ph->p_flags & PF_X) != 0;
      return true;
    }
  }
  return false;
}

static int on_encode(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_ctx *c = arg;
  bool exec;
  if (!segment_of(info, c->addr, &exec)) return 0;
  c->found = fnv1a(obj_name(info));
  c->base = info->dlpi_addr;
  c->executable = exec;
  c->hits++;
  return 1;
}

static int on_decode(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_ctx *c = arg;
  if (fnv1a(obj_name(info)) != c->object) return 0;
  c->hits++;
  c->base = info->dlpi_addr;
  c->in_segment = segment_of(info, info->dlpi_addr + c->offset, &c->executable);
  return 1;
}

int fnref_encode(const void *p, bool code, fnref *out, char *why, size_t n) {
  memset(out, 0, sizeof *out);
  if (!p) return 0;
  find_ctx c = {.addr = (uintptr_t)p};
  dl_iterate_phdr(on_encode, &c);
  if (!c.hits || (code && !c.executable)) {
    snprintf(why, n,
             "%s %p lies in no loaded %s of this program, so no other process can find it (%s)",
             code ? "function" : "address", p, code ? "code segment" : "object",
             code ? "a function must be one of the program or its libraries, not generated code"
                  : "it must be the address of a global of the program or its libraries");
    return PTO_EINVAL;
  }
  out->object = c.found;
  out->offset = (uint64_t)((uintptr_t)p - c.base);
  out->code = code;
  if (code) memcpy(&out->check, p, sizeof out->check);
  return 0;
}

int fnref_decode(const fnref *r, void **out, char *why, size_t n) {
  *out = NULL;
  if (!r->object) return 0;
  find_ctx c = {.object = r->object, .offset = r->offset};
  dl_iterate_phdr(on_decode, &c);
  if (!c.hits || !c.in_segment || (r->code && !c.executable)) {
    snprintf(why, n,
             "%s at offset 0x%" PRIx64 " of object %016" PRIx64
             " is not loaded in this process (a different program or library set)",
             r->code ? "function" : "address", r->offset, r->object);
    return PTO_EINVAL;
  }
  void *p = (void *)(c.base + (uintptr_t)r->offset);
  if (r->code && memcmp(p, &r->check, sizeof r->check) != 0) {
    snprintf(why, n,
             "function at offset 0x%" PRIx64 " of object %016" PRIx64
             " differs in this process (another build of the program or library)",
             r->offset, r->object);
    return PTO_EINVAL;
  }
  *out = p;
  return 0;
}
