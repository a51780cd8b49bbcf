/* reg_name.c — the names things are registered by (reg_name.h). */
#include "common/reg_name.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pto/status.h"

static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

/* The first bytes of name, control characters escaped, "..." after a cut. */
static void name_shown(const char *name, char *out, size_t len) {
  size_t o = 0, i = 0;
  for (; name[i] && o + 8 < len && i < 64; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!is_control(c))
      out[o++] = (char)c;
    else if (c == '\n' || c == '\t' || c == '\r')
      o += (size_t)snprintf(out + o, len - o, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
    else
      o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
  }
  if (name[i]) o += (size_t)snprintf(out + o, len - o, "...");
  out[o] = '\0';
}

int reg_name_check(const char *name, size_t max, char *why, size_t whylen) {
  size_t n = strlen(name), bad = 0;
  while (bad < n && !is_control((unsigned char)name[bad]))
    bad++;
  if (n < max && bad == n) return PTO_OK;
  char s[96];
  name_shown(name, s, sizeof s);
  if (bad < n)
    snprintf(why, whylen, "name '%s' has a control character (0x%02x) at byte %zu (from 0)", s,
             (unsigned char)name[bad], bad);
  else
    snprintf(why, whylen, "name '%s' is %zu bytes long, more than the %zu a name may have", s, n,
             max - 1);
  return PTO_EINVAL;
}
