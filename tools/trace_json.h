/* trace_json.h — a small JSON reader (and value writer) for trace files.
 *
 * Enough JSON for Chrome trace-event files, ours or another tool's: strings
 * with every escape (\uXXXX and surrogate pairs become UTF-8), numbers,
 * literals, nested objects and arrays. A parsed document owns all its
 * values in one arena, freed at once. Objects keep their members in file
 * order; a lookup is a linear scan (trace events have a handful of keys). */
#ifndef PTO_TRACE_JSON_H
#define PTO_TRACE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/trace.h" /* trace_json_write_str: the writer's */

typedef enum trace_json_type {
  TJ_NULL = 0,
  TJ_BOOL,
  TJ_NUM,
  TJ_STR,
  TJ_ARR,
  TJ_OBJ,
} trace_json_type;

typedef struct trace_json trace_json;
struct trace_json {
  const char *key; /* member name when this value is an object member */
  union {
    double num;        /* TJ_NUM */
    bool b;            /* TJ_BOOL */
    const char *str;   /* TJ_STR: NUL-terminated UTF-8 (may hold \u0000 as a cut) */
    trace_json *items; /* TJ_ARR, TJ_OBJ: n values (members carry key) */
  } u;
  uint32_t n;
  uint8_t type;
};

typedef struct trace_json_doc trace_json_doc;

/* Parses text[0..len). Returns 0, PTO_EINVAL (syntax; err says where) or
 * PTO_ENOMEM. */
int trace_json_parse(const char *text, size_t len, trace_json_doc **out, char *err, size_t errlen);
/* Reads and parses a file; PTO_ESYSTEM when it cannot be read. */
int trace_json_load(const char *path, trace_json_doc **out, char *err, size_t errlen);
void trace_json_free(trace_json_doc *d);
const trace_json *trace_json_root(const trace_json_doc *d);

/* The member `key` of an object, or NULL (also when obj is not an object). */
const trace_json *trace_json_get(const trace_json *obj, const char *key);
/* Typed member access: true and *out set when the member exists with that type. */
bool trace_json_num(const trace_json *obj, const char *key, double *out);
const char *trace_json_str(const trace_json *obj, const char *key); /* NULL if absent */

/* Writes v as compact JSON. */
void trace_json_write(FILE *f, const trace_json *v);
/* Writes a number so that it reads back to the same double. */
void trace_json_write_num(FILE *f, double x);

#endif
