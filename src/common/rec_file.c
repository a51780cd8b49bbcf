/* rec_file.c — the files of a controlled schedule's records (rec_file.h). */
#include "common/rec_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool rec_file_same(const char *a, const char *b) {
  struct stat x, y;
  if (stat(a, &x) == 0 && stat(b, &y) == 0) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  return strcmp(a, b) == 0;
}

int rec_file_open(rec_file *w, const char *path) {
  static _Atomic unsigned seq; /* two records of one process never share a name */
  w->f = NULL;
  w->tmp[0] = '\0';
  struct stat st;
  if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) {
    int k = snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%d.%u", path, (int)getpid(),
                     atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed));
    int fd = k > 0 && (size_t)k < sizeof w->tmp
                 ? open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)
                 : -1;
    if (fd >= 0) {
      w->f = fdopen(fd, "w");
      if (w->f) return 0;
      close(fd);
      unlink(w->tmp);
    }
    w->tmp[0] = '\0'; /* no file beside it: in place, whose error names path */
  }
  w->f = fopen(path, "w");
  return w->f ? 0 : -1;
}

int rec_file_close(rec_file *w, const char *path) {
  int e = 0;
  if (fflush(w->f) != 0)
    e = errno;
  else if (ferror(w->f))
    e = EIO;
  if (fclose(w->f) != 0 && !e) e = errno;
  w->f = NULL;
  if (!e && w->tmp[0] && rename(w->tmp, path) != 0) e = errno;
  if (e && w->tmp[0]) unlink(w->tmp);
  errno = e;
  return e ? -1 : 0;
}
