/* trace_concat.c — the node run's trace: the files its ranks wrote, joined.
 *
 * Every rank writes its chip runs' files with trace_write, with the node
 * run's time origin and final task ids (trace_set_task_base), so nothing in
 * them needs rewriting: the merge is a concatenation of their event arrays
 * (no JSON reader in the library; `pto trace --merge` is the tool that
 * merges arbitrary files). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "pto/status.h"

static int concat_fail(char *why, size_t n, int rc, const char *path, const char *what, int err) {
  if (why && n)
    snprintf(why, n, "trace file %s: %s%s%s", path, what, err ? ": " : "",
             err ? strerror(err) : "");
  return rc;
}

/* The whole file into *buf (NUL-terminated), its length into *len. */
static int slurp(const char *path, char **buf, size_t *len, char *why, size_t n) {
  *buf = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return concat_fail(why, n, PTO_ESYSTEM, path, "cannot open", errno);
  size_t cap = 1 << 16, k = 0;
  char *b = malloc(cap);
  int rc = b ? 0 : PTO_ENOMEM;
  while (rc == 0) {
    if (k + 1 == cap) {
      char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
      if (!nb) {
        rc = PTO_ENOMEM;
        break;
      }
      b = nb;
      cap *= 2;
    }
    size_t got = fread(b + k, 1, cap - 1 - k, f);
    k += got;
    if (got == 0) break;
  }
  if (rc == 0 && ferror(f)) rc = concat_fail(why, n, PTO_ESYSTEM, path, "read failed", errno);
  if (rc == PTO_ENOMEM) concat_fail(why, n, rc, path, "out of memory reading it", 0);
  fclose(f);
  if (rc) {
    free(b);
    return rc;
  }
  b[k] = '\0';
  *buf = b;
  *len = k;
  return 0;
}

/* Where the events of a trace_write file are: body[0..*blen), and its
 * origin and dropped count; false when the file is not one of ours. */
static bool split(char *text, size_t len, const char **body, size_t *blen, uint64_t *origin,
                  uint64_t *dropped) {
  size_t h = strlen(TRACE_FILE_HEAD);
  if (len < h || memcmp(text, TRACE_FILE_HEAD, h) != 0) return false;
  char *tail = NULL;
  for (char *p = text; (p = strstr(p, TRACE_FILE_TAIL)) != NULL; p++)
    tail = p; /* the last one: a name could hold the text, escaped, not raw */
  if (!tail || tail < text + h) return false;
  if (sscanf(tail + strlen(TRACE_FILE_TAIL), "%" SCNu64 "\",\"dropped_events\":%" SCNu64, origin,
             dropped) != 2)
    return false;
  *body = text + h;
  *blen = (size_t)(tail - (text + h));
  return true;
}

/* The pid of a metadata line ("ph":"M", as put_meta writes them), or -1. */
static int meta_pid(const char *line, size_t len) {
  static const char key[] = "\"ph\":\"M\",\"pid\":";
  const char *m = memmem(line, len, key, sizeof key - 1);
  return m ? atoi(m + sizeof key - 1) : -1;
}

static bool has_pid(const int *named, int n, int pid) {
  for (int i = 0; i < n; i++)
    if (named[i] == pid) return true;
  return false;
}

/* body's events, one a line, the metadata of processes in named[0..*nnamed)
 * left out (a rank's later chip tasks show the same process and tracks as
 * its first); the processes body names are added to named. */
static void put_events(FILE *f, const char *body, size_t blen, int *named, int *nnamed, int cap,
                       bool *first) {
  int before = *nnamed;
  for (const char *p = body, *end = body + blen; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len && p[len - 1] == ',') len--; /* events are separated by ",\n" */
    int pid = meta_pid(p, len);
    bool skip = pid >= 0 && has_pid(named, before, pid);
    if (pid >= 0 && !has_pid(named, *nnamed, pid) && *nnamed < cap) named[(*nnamed)++] = pid;
    if (!skip && len) {
      if (!*first) fputs(",\n", f);
      *first = false;
      fwrite(p, 1, len, f);
    }
    p = nl ? nl + 1 : end;
  }
}

int trace_concat(const char *const *paths, int n, const char *out, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  if (!paths || n <= 0 || !out) {
    if (why && whylen)
      snprintf(why, whylen, "trace concat: %s", out ? "no input files" : "no output file");
    return PTO_EINVAL;
  }
  FILE *f = fopen(out, "w");
  if (!f) return concat_fail(why, whylen, PTO_ESYSTEM, out, "cannot open for writing", errno);
  uint64_t origin = 0, dropped = 0;
  int rc = 0, named[256], nnamed = 0;
  bool first = true;
  fputs(TRACE_FILE_HEAD, f);
  for (int i = 0; i < n && rc == 0; i++) {
    char *text;
    size_t len, blen;
    const char *body;
    uint64_t o, d;
    rc = slurp(paths[i], &text, &len, why, whylen);
    if (rc) break;
    if (!split(text, len, &body, &blen, &o, &d))
      rc = concat_fail(why, whylen, PTO_EINVAL, paths[i], "not a file trace_write wrote", 0);
    else if (i > 0 && o != origin)
      rc = concat_fail(why, whylen, PTO_EINVAL, paths[i],
                       "its time origin differs from the first file's (not one run's ranks)", 0);
    if (rc == 0) {
      origin = o;
      dropped += d;
      put_events(f, body, blen, named, &nnamed, (int)(sizeof named / sizeof *named), &first);
    }
    free(text);
  }
  fprintf(f, TRACE_FILE_TAIL "%" PRIu64 "\",\"dropped_events\":%" PRIu64 ",\"merged_files\":%d}}\n",
          origin, dropped, n);
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) {
    if (rc == 0)
      rc = concat_fail(why, whylen, PTO_ESYSTEM, out, "write failed", errno ? errno : EIO);
  }
  if (fclose(f) != 0 && rc == 0)
    rc = concat_fail(why, whylen, PTO_ESYSTEM, out, "close failed", errno);
  return rc;
}

bool trace_file_complete(const char *path) {
  char *text;
  size_t len, blen;
  const char *body;
  uint64_t o, d;
  if (slurp(path, &text, &len, NULL, 0)) return false;
  bool ok = split(text, len, &body, &blen, &o, &d);
  free(text);
  return ok;
}
