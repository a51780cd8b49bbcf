/* trace_json.c — the JSON reader and value writer behind `pto trace` and
 * trace_merge(). Recursive descent with a depth limit; values are built on
 * a scratch stack and copied into the document's arena once a container
 * closes, so a document is a handful of large allocations however many
 * events it holds. */
#include "trace_json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pto/status.h"

#define TJ_MAX_DEPTH 128
#define TJ_CHUNK     (1u << 20)

typedef struct tj_chunk {
  struct tj_chunk *next;
  size_t used, cap;
  max_align_t data[]; /* aligned for trace_json and doubles */
} tj_chunk;

struct trace_json_doc {
  tj_chunk *chunks;
  trace_json root;
};

/* Short strings repeat in every event (keys, phases, categories, kernel
 * names): the parser keeps one copy of each. Open addressing, power-of-two
 * capacity, at most half full. */
#define TJ_INTERN_MAX 32

typedef struct tj_intern {
  const char **slot;
  size_t cap, n;
} tj_intern;

typedef struct tj_parser {
  const char *p, *begin, *end;
  trace_json_doc *doc;
  trace_json *stack; /* children of the containers being parsed */
  size_t sn, scap;
  tj_intern strs;
  int depth;
  int rc;
  char *err;
  size_t errlen;
} tj_parser;

/* align: 1 for strings, sizeof(max_align_t) for values. */
static void *arena_alloc(trace_json_doc *d, size_t n, size_t align) {
  tj_chunk *c = d->chunks;
  if (c) c->used = (c->used + align - 1) / align * align;
  if (!c || c->used > c->cap || c->cap - c->used < n) {
    size_t cap = n > TJ_CHUNK ? n : TJ_CHUNK;
    c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = 0;
    c->next = d->chunks;
    d->chunks = c;
  }
  void *r = (char *)c->data + c->used;
  c->used += n;
  return r;
}

static int fail(tj_parser *ps, int rc, const char *fmt, ...) {
  if (ps->rc) return ps->rc;
  ps->rc = rc;
  if (ps->err && ps->errlen) {
    /* Say where, as a line number: trace files have one event per line. */
    size_t line = 1;
    for (const char *q = ps->begin; q < ps->p && q < ps->end; q++)
      line += *q == '\n';
    int k =
        snprintf(ps->err, ps->errlen, "line %zu (byte %zu): ", line, (size_t)(ps->p - ps->begin));
    if (k >= 0 && (size_t)k < ps->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ps->err + k, ps->errlen - (size_t)k, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

static void skip_ws(tj_parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static int push(tj_parser *ps, const trace_json *v) {
  if (ps->sn == ps->scap) {
    size_t cap = ps->scap ? 2 * ps->scap : 256;
    trace_json *s = realloc(ps->stack, cap * sizeof *s);
    if (!s) return fail(ps, PTO_ENOMEM, "out of memory");
    ps->stack = s;
    ps->scap = cap;
  }
  ps->stack[ps->sn++] = *v;
  return 0;
}

static int hex4(tj_parser *ps, unsigned *out) {
  if (ps->end - ps->p < 4) return fail(ps, PTO_EINVAL, "truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *ps->p++;
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return fail(ps, PTO_EINVAL, "bad hex digit in \\u escape");
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static uint64_t str_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* The interned copy of s[0..n) (NUL-terminated, no NUL inside), or NULL
 * when out of memory. */
static const char *intern(tj_parser *ps, const char *s, size_t n) {
  tj_intern *in = &ps->strs;
  if (2 * (in->n + 1) > in->cap) {
    size_t cap = in->cap ? 2 * in->cap : 256;
    const char **slot = calloc(cap, sizeof *slot);
    if (!slot) return NULL;
    for (size_t i = 0; i < in->cap; i++) {
      if (!in->slot[i]) continue;
      size_t j = str_hash(in->slot[i], strlen(in->slot[i])) & (cap - 1);
      while (slot[j])
        j = (j + 1) & (cap - 1);
      slot[j] = in->slot[i];
    }
    free(in->slot);
    in->slot = slot;
    in->cap = cap;
  }
  size_t j = str_hash(s, n) & (in->cap - 1);
  for (; in->slot[j]; j = (j + 1) & (in->cap - 1))
    if (strncmp(in->slot[j], s, n) == 0 && in->slot[j][n] == '\0') return in->slot[j];
  char *c = arena_alloc(ps->doc, n + 1, 1);
  if (!c) return NULL;
  memcpy(c, s, n);
  c[n] = '\0';
  in->slot[j] = c;
  in->n++;
  return c;
}

/* Parses a string literal at ps->p (the opening quote) into the arena. The
 * decoded text is never longer than the literal, which bounds the copy. */
static int parse_str(tj_parser *ps, const char **out) {
  const char *q = ++ps->p;
  bool plain = true; /* no escapes: the literal is the text */
  while (q < ps->end && *q != '"') {
    if (*q == '\\') {
      plain = false;
      q++;
    } else if ((unsigned char)*q < 0x20) {
      plain = false; /* reported by the decoding loop */
    }
    q++;
  }
  if (q >= ps->end) return fail(ps, PTO_EINVAL, "unterminated string");
  if (plain && q - ps->p <= TJ_INTERN_MAX) {
    if (!(*out = intern(ps, ps->p, (size_t)(q - ps->p))))
      return fail(ps, PTO_ENOMEM, "out of memory");
    ps->p = q + 1;
    return 0;
  }
  char *o = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1, 1);
  if (!o) return fail(ps, PTO_ENOMEM, "out of memory");
  *out = o;
  while (*ps->p != '"') {
    unsigned char c = (unsigned char)*ps->p++;
    if (c < 0x20) return fail(ps, PTO_EINVAL, "control character in string");
    if (c != '\\') {
      *o++ = (char)c;
      continue;
    }
    c = (unsigned char)*ps->p++;
    switch (c) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      unsigned cp;
      if (hex4(ps, &cp)) return ps->rc;
      if (cp >= 0xD800 && cp < 0xDC00) {
        unsigned lo;
        if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
          return fail(ps, PTO_EINVAL, "unpaired surrogate in \\u escape");
        ps->p += 2;
        if (hex4(ps, &lo)) return ps->rc;
        if (lo < 0xDC00 || lo > 0xDFFF)
          return fail(ps, PTO_EINVAL, "bad low surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return fail(ps, PTO_EINVAL, "unpaired surrogate in \\u escape");
      }
      /* \uXXXX is 6 bytes of input, at most 4 of output (12 -> 4 for pairs). */
      o += put_utf8(o, cp);
      break;
    }
    default: ps->p--; return fail(ps, PTO_EINVAL, "bad escape '\\%c' in string", c);
    }
  }
  ps->p++;
  *o = '\0';
  return 0;
}

static int parse_num(tj_parser *ps, double *out) {
  const char *s = ps->p;
  if (s < ps->end && *s == '-') s++;
  if (s >= ps->end || *s < '0' || *s > '9') return fail(ps, PTO_EINVAL, "bad number");
  while (s < ps->end && ((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' ||
                         *s == '+' || *s == '-'))
    s++;
  char tmp[64];
  size_t n = (size_t)(s - ps->p);
  if (n >= sizeof tmp) return fail(ps, PTO_EINVAL, "number too long");
  memcpy(tmp, ps->p, n);
  tmp[n] = '\0';
  char *e;
  errno = 0;
  *out = strtod(tmp, &e);
  if (e != tmp + n) return fail(ps, PTO_EINVAL, "bad number '%s'", tmp);
  ps->p = s;
  return 0;
}

static int parse_value(tj_parser *ps, trace_json *v);

/* Arrays and objects: children go onto the scratch stack, then move to the
 * arena in one piece. */
static int parse_container(tj_parser *ps, trace_json *v, bool obj) {
  char close = obj ? '}' : ']';
  if (++ps->depth > TJ_MAX_DEPTH)
    return fail(ps, PTO_EINVAL, "nesting deeper than %d", TJ_MAX_DEPTH);
  ps->p++;
  size_t base = ps->sn;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
  } else {
    for (;;) {
      trace_json child = {0};
      skip_ws(ps);
      if (obj) {
        if (ps->p >= ps->end || *ps->p != '"')
          return fail(ps, PTO_EINVAL, "expected a member name");
        if (parse_str(ps, &child.key)) return ps->rc;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') return fail(ps, PTO_EINVAL, "expected ':'");
        ps->p++;
      }
      const char *key = child.key;
      if (parse_value(ps, &child)) return ps->rc;
      child.key = key;
      if (push(ps, &child)) return ps->rc;
      skip_ws(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        continue;
      }
      if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        break;
      }
      return fail(ps, PTO_EINVAL, "expected ',' or '%c'", close);
    }
  }
  size_t n = ps->sn - base;
  if (n > UINT32_MAX) return fail(ps, PTO_EINVAL, "container too large");
  v->type = obj ? TJ_OBJ : TJ_ARR;
  v->n = (uint32_t)n;
  v->u.items = NULL;
  if (n) {
    v->u.items = arena_alloc(ps->doc, n * sizeof(trace_json), sizeof(max_align_t));
    if (!v->u.items) return fail(ps, PTO_ENOMEM, "out of memory");
    memcpy(v->u.items, ps->stack + base, n * sizeof(trace_json));
  }
  ps->sn = base;
  ps->depth--;
  return 0;
}

static int literal(tj_parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
    return fail(ps, PTO_EINVAL, "unexpected character '%c'", *ps->p);
  ps->p += n;
  return 0;
}

static int parse_value(tj_parser *ps, trace_json *v) {
  skip_ws(ps);
  v->key = NULL;
  if (ps->p >= ps->end) return fail(ps, PTO_EINVAL, "unexpected end of input");
  switch (*ps->p) {
  case '{': return parse_container(ps, v, true);
  case '[': return parse_container(ps, v, false);
  case '"': v->type = TJ_STR; return parse_str(ps, &v->u.str);
  case 't':
    v->type = TJ_BOOL;
    v->u.b = true;
    return literal(ps, "true");
  case 'f':
    v->type = TJ_BOOL;
    v->u.b = false;
    return literal(ps, "false");
  case 'n': v->type = TJ_NULL; return literal(ps, "null");
  default: v->type = TJ_NUM; return parse_num(ps, &v->u.num);
  }
}

int trace_json_parse(const char *text, size_t len, trace_json_doc **out, char *err, size_t errlen) {
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  trace_json_doc *d = calloc(1, sizeof *d);
  if (!d) return PTO_ENOMEM;
  tj_parser ps = {
      .p = text, .begin = text, .end = text + len, .doc = d, .err = err, .errlen = errlen};
  if (parse_value(&ps, &d->root) == 0) {
    skip_ws(&ps);
    if (ps.p != ps.end) fail(&ps, PTO_EINVAL, "trailing data after the JSON value");
  }
  free(ps.stack);
  free(ps.strs.slot);
  if (ps.rc) {
    trace_json_free(d);
    return ps.rc;
  }
  *out = d;
  return 0;
}

int trace_json_load(const char *path, trace_json_doc **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (err && errlen) snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return PTO_ESYSTEM;
  }
  struct stat st; /* a directory opens, and its "size" was taken for the file's */
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    if (err && errlen) snprintf(err, errlen, "cannot read %s: %s", path, strerror(EISDIR));
    return PTO_ESYSTEM;
  }
  /* One allocation when the size is known; growth covers pipes. */
  size_t cap = 1 << 16, n = 0;
  if (fseek(f, 0, SEEK_END) == 0) {
    long sz = ftell(f);
    if (sz > 0) cap = (size_t)sz + 1;
    rewind(f);
  }
  char *buf = malloc(cap);
  int rc = buf ? 0 : PTO_ENOMEM;
  while (rc == 0) {
    if (n == cap) {
      char *b = realloc(buf, cap * 2);
      if (!b) {
        rc = PTO_ENOMEM;
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) {
      if (ferror(f)) {
        rc = PTO_ESYSTEM;
        if (err && errlen) snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
      }
      break;
    }
  }
  fclose(f);
  /* A trace is a JSON object or array: text that starts otherwise (a log,
   * a record) is named as not a trace, not as a bad number at byte 0. */
  size_t at = 0;
  while (at < n && (buf[at] == ' ' || buf[at] == '\t' || buf[at] == '\r' || buf[at] == '\n'))
    at++;
  if (rc == 0 && (at == n || (buf[at] != '{' && buf[at] != '['))) {
    rc = PTO_EINVAL;
    const unsigned char c = at < n ? (unsigned char)buf[at] : 0;
    if (err && errlen && at == n)
      snprintf(err, errlen, "not a JSON trace: the file is empty");
    else if (err && errlen)
      snprintf(err, errlen,
               isprint(c) ? "not a JSON trace: it starts with '%c', not '{' or '['"
                          : "not a JSON trace: it starts with byte 0x%02x, not '{' or '['",
               c);
  }
  if (rc == 0)
    rc = trace_json_parse(buf, n, out, err, errlen);
  else if (rc == PTO_ENOMEM && err && errlen)
    snprintf(err, errlen, "out of memory reading %s", path);
  free(buf);
  return rc;
}

void trace_json_free(trace_json_doc *d) {
  if (!d) return;
  for (tj_chunk *c = d->chunks, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(d);
}

const trace_json *trace_json_root(const trace_json_doc *d) { return d ? &d->root : NULL; }

const trace_json *trace_json_get(const trace_json *obj, const char *key) {
  if (!obj || obj->type != TJ_OBJ) return NULL;
  for (uint32_t i = 0; i < obj->n; i++)
    if (strcmp(obj->u.items[i].key, key) == 0) return &obj->u.items[i];
  return NULL;
}

bool trace_json_num(const trace_json *obj, const char *key, double *out) {
  const trace_json *v = trace_json_get(obj, key);
  if (!v || v->type != TJ_NUM) return false;
  *out = v->u.num;
  return true;
}

const char *trace_json_str(const trace_json *obj, const char *key) {
  const trace_json *v = trace_json_get(obj, key);
  return v && v->type == TJ_STR ? v->u.str : NULL;
}

void trace_json_write_num(FILE *f, double x) {
  if (!isfinite(x)) {
    fputs("null", f); /* JSON has no inf/nan */
    return;
  }
  /* range first: converting a double outside int64_t's range is undefined */
  if (fabs(x) < 9007199254740992.0 && x == (double)(int64_t)x) {
    fprintf(f, "%lld", (long long)x);
    return;
  }
  char b[40];
  snprintf(b, sizeof b, "%.15g", x);
  if (strtod(b, NULL) != x) snprintf(b, sizeof b, "%.17g", x);
  fputs(b, f);
}

void trace_json_write(FILE *f, const trace_json *v) {
  switch (v->type) {
  case TJ_NULL: fputs("null", f); break;
  case TJ_BOOL: fputs(v->u.b ? "true" : "false", f); break;
  case TJ_NUM: trace_json_write_num(f, v->u.num); break;
  case TJ_STR: trace_json_write_str(f, v->u.str); break;
  case TJ_ARR:
  case TJ_OBJ:
    fputc(v->type == TJ_OBJ ? '{' : '[', f);
    for (uint32_t i = 0; i < v->n; i++) {
      if (i) fputc(',', f);
      if (v->type == TJ_OBJ) {
        trace_json_write_str(f, v->u.items[i].key);
        fputc(':', f);
      }
      trace_json_write(f, &v->u.items[i]);
    }
    fputc(v->type == TJ_OBJ ? '}' : ']', f);
    break;
  }
}
