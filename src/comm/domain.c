/* domain.c — domains and windows in one process: the layout of named
 * buffers, the table of domains this process mapped, the life cycle the
 * node drives (open, attach, close), the per-task epoch and the first
 * error of a task with its details. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/comm.h"
#include "comm/signal.h"

#define PAGE 4096u

/* Says in why[n] (when given) what was wrong; returns code. */
static int why_is(int code, char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int why_is(int code, char *why, size_t n, const char *fmt, ...) {
  if (why && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
  }
  return code;
}
#define WHY(code, ...) return why_is((code), why, n, __VA_ARGS__)

int comm_desc_layout_why(comm_domain_desc *d, const pto_window_buffer *bufs, int nbufs, char *why,
                         size_t n) {
  if (nbufs < 0 || nbufs > PTO_COMM_MAX_BUFFERS)
    WHY(PTO_EINVAL, "%d window buffers: 0..%d", nbufs, PTO_COMM_MAX_BUFFERS);
  if (nbufs > 0 && !bufs) WHY(PTO_EINVAL, "%d window buffers, but buffers is NULL", nbufs);
  uint64_t off = COMM_HEADER_BYTES;
  for (int i = 0; i < nbufs; i++) {
    const char *nm = bufs[i].name;
    if (!nm || !*nm) WHY(PTO_EINVAL, "window buffer %d has no name", i);
    if (strlen(nm) >= PTO_COMM_NAME_MAX)
      WHY(PTO_EINVAL, "window buffer %d's name '%.40s...' is longer than %d characters", i, nm,
          PTO_COMM_NAME_MAX - 1);
    if (bufs[i].bytes == 0) WHY(PTO_EINVAL, "window buffer '%s' has 0 bytes", nm);
    for (int j = 0; j < i; j++)
      if (strcmp(d->buffers[j].name, nm) == 0)
        WHY(PTO_EINVAL, "window buffers %d and %d are both named '%s'", j, i, nm);
    snprintf(d->buffers[i].name, sizeof d->buffers[i].name, "%s", nm);
    d->buffers[i].offset = off;
    d->buffers[i].bytes = bufs[i].bytes;
    /* checked: a huge buffer must not wrap the window size to a small one */
    if (__builtin_add_overflow(off, (uint64_t)bufs[i].bytes, &off) ||
        __builtin_add_overflow(off, PTO_COMM_ALIGN - 1, &off))
      WHY(PTO_ENOMEM, "window buffer '%s' of %zu bytes: the window's size overflows", nm,
          bufs[i].bytes);
    off = off / PTO_COMM_ALIGN * PTO_COMM_ALIGN;
  }
  d->nbuffers = nbufs;
  if (__builtin_add_overflow(off, PAGE - 1, &off)) WHY(PTO_ENOMEM, "the window's size overflows");
  d->win_bytes = off / PAGE * PAGE;
  return 0;
}

int comm_desc_layout(comm_domain_desc *d, const pto_window_buffer *bufs, int nbufs) {
  return comm_desc_layout_why(d, bufs, nbufs, NULL, 0);
}

void comm_init(pto_comm *c, int chip) {
  memset(c, 0, sizeof *c);
  c->chip = chip;
  pthread_mutex_init(&c->err_lock, NULL);
  pthread_mutex_init(&c->pend_lock, NULL);
}

void comm_fini(pto_comm *c, bool unlink) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++)
    if (c->doms[i]) comm_domain_close(c, c->doms[i]->desc.id, unlink);
  pthread_mutex_destroy(&c->err_lock);
  pthread_mutex_destroy(&c->pend_lock);
}

static bool stopped(const pto_comm *c) {
  /* acquire pairs with the node's release store when it stops the chip */
  return c->stop && atomic_load_explicit(c->stop, memory_order_acquire) != 0;
}

/* The chip whose failure cancelled this chip's task, COMM_CANCEL_RUN,
 * COMM_CANCEL_STOP, or -1. */
static int cancelled_by(const pto_comm *c) {
  /* relaxed: the word carries its whole meaning; nothing is published with it */
  return comm_cancel_by(c->cancel ? atomic_load_explicit(c->cancel, memory_order_relaxed) : 0,
                        c->task_gen);
}

bool comm_stopping(const pto_comm *c) { return c && (stopped(c) || cancelled_by(c) != -1); }

const char *comm_stop_why(const pto_comm *c, char *buf, size_t n) {
  /* the stop as the cancel word names it too: the word may be seen first */
  if (stopped(c) || cancelled_by(c) == COMM_CANCEL_STOP)
    snprintf(buf, n, "the node stopped chip %d (the node failed)", c->chip);
  else if (cancelled_by(c) == COMM_CANCEL_RUN)
    snprintf(buf, n, "the node cancelled chip %d's task: the node run was cancelled", c->chip);
  else
    snprintf(buf, n, "the node cancelled chip %d's task: chip %d of its group failed", c->chip,
             cancelled_by(c));
  return buf;
}

void comm_wake(pto_comm *c, int chip) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    for (int r = 0; d && r < d->desc.nranks; r++)
      if (d->desc.chips[r] == chip) d->be->wake(d->win, r);
  }
}

void comm_wake_mine(pto_comm *c) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    if (d && d->my_rank >= 0) d->be->wake(d->win, d->my_rank);
  }
}

static _Atomic(comm_job_end_fn) job_end;

void comm_set_job_end(comm_job_end_fn fn) { atomic_store(&job_end, fn); }

void comm_job_end(const char *domain_prefix) {
  comm_job_end_fn fn = atomic_load(&job_end);
  if (fn) fn(domain_prefix);
}

comm_dom *comm_find(const pto_comm *c, int32_t id) {
  if (!c) return NULL;
  for (int i = 0; i < COMM_MAX_DOMAINS; i++)
    if (c->doms[i] && c->doms[i]->desc.id == id) return c->doms[i];
  return NULL;
}

static void dom_locks_destroy(comm_dom *d) {
  pthread_mutex_destroy(&d->barrier_lock);
  for (int i = 0; i < PTO_COMM_MAX_BUFFERS; i++)
    pthread_mutex_destroy(&d->coll_lock[i]);
}

/* c->win_lo, win_hi: the span of every open domain's windows
 * (comm_dom_windows, as comm_peer_copy reads each one's). */
static void windows_span(pto_comm *c) {
  uintptr_t lo = UINTPTR_MAX, hi = 0, dlo, dhi;
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    if (!c->doms[i] || !comm_dom_windows(c->doms[i], &dlo, &dhi)) continue;
    if (dlo < lo) lo = dlo;
    if (dhi > hi) hi = dhi;
  }
  c->win_lo = lo <= hi ? lo : 0;
  c->win_hi = hi;
}

int comm_domain_open(pto_comm *c, const comm_domain_desc *d, int my_rank) {
  if (d->nranks < 1 || d->nranks > PTO_COMM_MAX_RANKS || my_rank >= d->nranks) return PTO_EINVAL;
  if (comm_find(c, d->id)) return PTO_EINVAL;
  int slot = -1;
  for (int i = 0; i < COMM_MAX_DOMAINS && slot < 0; i++)
    if (!c->doms[i]) slot = i;
  if (slot < 0) return PTO_EINVAL;
  const comm_backend *be = NULL;
  switch (d->backend) {
  case COMM_BACKEND_SHM: be = &comm_backend_shm; break;
  case COMM_BACKEND_MPI:
#ifdef PTO_HAVE_MPI
    be = &comm_backend_mpi;
    break;
#else
    return comm_fail(c, PTO_EMPI,
                     "domain %d asks for the MPI backend, but pto was built without MPI "
                     "(configure with -DPTO_MPI=ON, Open MPI installed)",
                     d->id);
#endif
  default:
    return comm_fail(c, PTO_EINVAL, "domain %d: unknown communication backend %d", d->id,
                     (int)d->backend);
  }
  comm_dom *dom = calloc(1, sizeof *dom);
  if (!dom) return PTO_ENOMEM;
  dom->desc = *d;
  dom->my_rank = my_rank;
  dom->be = be;
  pthread_mutex_init(&dom->barrier_lock, NULL);
  for (int i = 0; i < PTO_COMM_MAX_BUFFERS; i++)
    pthread_mutex_init(&dom->coll_lock[i], NULL);
  char why[256] = "";
  int rc = dom->be->create(d, my_rank, &dom->win, why, sizeof why);
  if (rc) {
    dom_locks_destroy(dom);
    free(dom);
    return comm_fail(c, rc, "domain %d rank %d: %s backend: %s", d->id, my_rank, be->name,
                     why[0] ? why : "creating the window failed");
  }
  if (be->window_base) dom->desc.base = be->window_base(dom->win);
  c->doms[slot] = dom;
  windows_span(c);
  return 0;
}

int comm_domain_attach(pto_comm *c, int32_t id) {
  comm_dom *d = comm_find(c, id);
  if (!d) return PTO_EINVAL;
  char why[256] = "";
  int rc = d->be->attach(d->win, why, sizeof why);
  if (rc)
    return comm_fail(c, rc, "domain %d rank %d: %s backend: %s", id, d->my_rank, d->be->name,
                     why[0] ? why : "reaching the peers' windows failed");
  /* direct_base: rank p's window at direct_base + p * win_bytes, as both
   * backends map them (checked): the call table's loads then need no call
   * through the backend (an indirect call per slot access was 3-6% of the
   * samples of an 8-byte broadcast on 2 ranks) */
  unsigned char *w0 = d->be->direct ? d->be->direct(d->win, 0) : NULL;
  d->direct_all = w0 != NULL;
  d->direct_base = w0;
  for (int p = 1; d->direct_all && p < d->desc.nranks; p++) {
    unsigned char *wp = d->be->direct(d->win, p);
    d->direct_all = wp != NULL;
    if (wp != w0 + (uint64_t)p * d->desc.win_bytes) d->direct_base = NULL;
  }
  if (!d->direct_all) d->direct_base = NULL;
  d->settle_run = d->be->settle && d->be->settle_run ? d->be->settle_run(d->win) : 0;
  for (int k = 0; k <= COMM_ALLTOALL; k++)
    d->record_max[k] = d->be->exchange ? d->be->record_max(d->win, k) : 0;
  static _Atomic uint64_t attached;
  d->uid = atomic_fetch_add_explicit(&attached, 1, memory_order_relaxed) + 1;
  if (c->epoch) d->be->task_mark(d->win, c->epoch, c->group, false);
  return 0;
}

/* The backend's give_up at a domain's close: the node stopped this chip
 * (its node failed: a chip died or stopped answering), so a peer may
 * never come to a collective release of the window. Not a cancel of the
 * task (comm_stopping): the node's other chips are then all alive, and
 * close their windows with this one. */
static bool stopped_cb(void *arg) { return stopped(arg); }

void comm_domain_close(pto_comm *c, int32_t id, bool unlink) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    if (!d || d->desc.id != id) continue;
    d->be->destroy(d->win, unlink, stopped_cb, c);
    dom_locks_destroy(d);
    free(d);
    c->doms[i] = NULL;
    windows_span(c);
  }
}

void comm_task_begin(pto_comm *c, uint32_t epoch, uint64_t group) {
  c->epoch = epoch;
  c->group = group;
  comm_coll_unchecked_drop(c); /* what a failed task left unchecked is no later task's */
  pthread_mutex_lock(&c->err_lock);
  c->err_code = 0;
  c->err_details[0] = 0;
  pthread_mutex_unlock(&c->err_lock);
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    if (!d || d->my_rank < 0) continue;
    /* relaxed: the chip run that follows orders it for the core threads */
    atomic_store_explicit(&d->barrier_seq, 0, memory_order_relaxed);
    d->be->task_mark(d->win, epoch, group, false);
  }
}

int comm_epoch_check(pto_comm *c, const char *op, int32_t dom, int rank) {
  if (c->epoch != SIG_EPOCH_NONE) return 0;
  return comm_fail(c, PTO_EINVAL,
                   "%s: this node task has no epoch: it started after the first %u tasks of its "
                   "node run, as many as the 32-bit epoch of a signal cell tells apart; the "
                   "signals, waits, barriers and collectives of later tasks fail (the next "
                   "pto_node_run starts again at epoch 1) (domain %d rank %d)",
                   op, SIG_EPOCH_MAX, dom, rank);
}

int comm_task_end(pto_comm *c) {
  /* the one-way broadcasts not yet checked against the peers' calls:
   * their kernels have returned, the peers' tables still hold the calls */
  bool records = atomic_load_explicit(&c->coll_records, memory_order_relaxed);
  int rc = (c->npend || records) && c->coll_settle ? c->coll_settle(c) : 0;
  /* first say, in every domain, that this rank's kernels finished (they
   * read nothing more), then land what is held: peers landing their own
   * stores for us meanwhile need not wait for us, nor we for them */
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    if (d && d->my_rank >= 0) d->be->task_mark(d->win, c->epoch, c->group, true);
  }
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    comm_dom *d = c->doms[i];
    if (!d || d->my_rank < 0) continue;
    int r = d->be->quiet(d->win, -1, true);
    if (r && !rc) rc = r;
  }
  return rc;
}

int comm_task_error(pto_comm *c, char *details, size_t n) {
  pthread_mutex_lock(&c->err_lock);
  int code = c->err_code;
  if (n) snprintf(details, n, "%s", c->err_details);
  pthread_mutex_unlock(&c->err_lock);
  return code;
}

bool comm_task_error_secondary(pto_comm *c) {
  pthread_mutex_lock(&c->err_lock);
  bool secondary = c->err_code && c->err_secondary;
  pthread_mutex_unlock(&c->err_lock);
  return secondary;
}

static int latch(pto_comm *c, int code, bool secondary, const char *fmt, va_list ap) {
  if (!c) return code;
  pthread_mutex_lock(&c->err_lock);
  if (c->err_code == 0) {
    c->err_code = code;
    c->err_secondary = secondary;
    vsnprintf(c->err_details, sizeof c->err_details, fmt, ap);
  }
  pthread_mutex_unlock(&c->err_lock);
  return code;
}

int comm_fail(pto_comm *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  latch(c, code, false, fmt, ap);
  va_end(ap);
  return code;
}

int comm_fail_secondary(pto_comm *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  latch(c, code, true, fmt, ap);
  va_end(ap);
  return code;
}

int comm_space_reserve(size_t bytes, void **base) {
  void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return PTO_ESYSTEM;
  *base = p;
  return 0;
}

void comm_space_release(void *base, size_t bytes) {
  if (base) munmap(base, bytes);
}

void comm_space_unmap(uint64_t addr, uint64_t len) {
  /* back to an inaccessible reservation, so nothing else lands there and a
   * stray access faults instead of reading another object */
  mmap((void *)(uintptr_t)addr, len, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

/* ---- public queries ---- */

int pto_comm_chip(const pto_comm *c) { return c ? c->chip : -1; }

int pto_comm_rank(const pto_comm *c, pto_domain dom) {
  comm_dom *d = comm_find(c, dom);
  if (!d) return PTO_EINVAL;
  return d->my_rank >= 0 ? d->my_rank : PTO_EPEER;
}

int pto_comm_size(const pto_comm *c, pto_domain dom) {
  comm_dom *d = comm_find(c, dom);
  return d ? d->desc.nranks : PTO_EINVAL;
}

int comm_window_tensor_why(const pto_comm *c, pto_domain dom, int rank, const char *name,
                           pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out,
                           char *why, size_t n) {
  comm_dom *d = comm_find(c, dom);
  if (!d) WHY(PTO_EINVAL, "no domain %d here (pto_node_domain_create makes one)", (int)dom);
  if (!name) WHY(PTO_EINVAL, "the buffer's name is NULL");
  if (!out) WHY(PTO_EINVAL, "out is NULL");
  if (rank < 0 || rank >= d->desc.nranks)
    WHY(PTO_EPEER, "rank %d is outside domain %d's ranks 0..%d", rank, (int)dom,
        d->desc.nranks - 1);
  for (int i = 0; i < d->desc.nbuffers; i++) {
    const comm_buffer_desc *b = &d->desc.buffers[i];
    if (strcmp(b->name, name) != 0) continue;
    void *p = (void *)(uintptr_t)(d->desc.base + (uint64_t)rank * d->desc.win_bytes + b->offset);
    if (pto_tensor_init(out, p, b->bytes, dt, ndims, shape) == PTO_OK) return 0;
    char bad[160];
    WHY(PTO_EINVAL, "a view of window buffer '%s' of domain %d (%llu bytes): %s", name, (int)dom,
        (unsigned long long)b->bytes, pto_tensor_problem(out, bad, sizeof bad));
  }
  WHY(PTO_EINVAL, "domain %d has no window buffer named '%s'", (int)dom, name);
#undef WHY
}

int pto_comm_window_tensor(const pto_comm *c, pto_domain dom, int rank, const char *name,
                           pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out) {
  char why[300];
  int rc = comm_window_tensor_why(c, dom, rank, name, dt, ndims, shape, out, why, sizeof why);
  /* its details go with the node task's error, as every operation's
   * (pto/comm.h): the chip's comm state, which the handle names */
  return rc ? comm_fail((pto_comm *)c, rc, "window_tensor: %s", why) : 0;
}
