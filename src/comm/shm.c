/* shm.c — the POSIX shared-memory backend: each rank's window is a named
 * shm object mapped at the same address in every process of the run (the
 * address space was reserved before fork), so a put is a memcpy into the
 * peer's mapping and a signal is a release CAS on the peer's cell followed
 * by a futex wake. With fault injection on, puts and atomic adds are held
 * back in a fault_queue and land only where the contract forces them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/fault.h"
#include "comm/signal.h"
#include "common/clock.h"
#include "common/copy.h"
#include "common/half.h"
#include "common/options.h"
#include "common/wait.h"

#define SHM_MAGIC 0x70746f77696e3031ull /* "ptowin01" */
/* most the landings of one end of task are held for a reading peer (default 500) */
#define FAULT_GAP_MS pto_option_cached(PTO_OPT_FAULT_GAP_MS)

typedef struct shm_hdr {
  uint64_t magic;
  int32_t dom_id;
  int32_t rank;
  pto_event ev;               /* signalled by every notify to this rank and barrier arrival */
  _Atomic uint64_t arrive;    /* barrier: epoch << 32 | seq of the last barrier reached */
  _Atomic uint32_t task_done; /* last node task whose kernels finished on this rank */
  /* controlled runs (desc.controlled): held-back stores landed in this
   * window so far, and how many of them this rank had seen when it last
   * found what it waits for not there (a waiting rank reads nothing) */
  _Atomic uint64_t landed;
  _Atomic uint64_t seen;
  /* the CPUs this rank's process may use (wait.c's set), for the waits of
   * its peers: ranks that share CPUs must not spin past them */
  cpu_set_t cpus;
} shm_hdr;
_Static_assert(sizeof(shm_hdr) <= COMM_HEADER_BYTES, "window header too large");

struct comm_win {
  comm_domain_desc d;
  int my_rank;
  unsigned char *base[PTO_COMM_MAX_RANKS]; /* mapped windows, NULL = not mapped */
  fault_queue *fq;                         /* NULL unless fault injection is on */
  uint32_t epoch;                          /* current node task */
  uint64_t group;                          /* node chips of the current task */
  uint64_t gap_deadline;                   /* end of the pauses of this end of task */
  pto_wait_share share; /* the ranks sharing my CPUs (wait.c), counted at the first attach */
  bool counted;
};

static unsigned char *rank_addr(const comm_win *w, int r) {
  return (unsigned char *)(uintptr_t)(w->d.base + (uint64_t)r * w->d.win_bytes);
}
static shm_hdr *hdr(const comm_win *w, int r) { return (shm_hdr *)w->base[r]; }

void comm_shm_name(const comm_domain_desc *d, int rank, char *out, size_t n) {
  snprintf(out, n, "%s.r%d", d->prefix, rank);
}

void comm_shm_unlink(const comm_domain_desc *d, int rank) {
  int lo = rank < 0 ? 0 : rank, hi = rank < 0 ? d->nranks : rank + 1;
  for (int r = lo; r < hi; r++) {
    char name[COMM_PREFIX_MAX + 16];
    comm_shm_name(d, r, name, sizeof name);
    shm_unlink(name);
  }
}

/* ---- element-wise atomic add per dtype (relaxed: the notify that
 * publishes the result carries the release) ---- */

static void amo_add(void *dst, pto_dtype dt, const void *src, size_t count) {
  for (size_t i = 0; i < count; i++) {
    switch (dt) {
    case PTO_F32: {
      uint32_t *p = (uint32_t *)dst + i, old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
      float a, b;
      memcpy(&b, (const float *)src + i, 4);
      do {
        memcpy(&a, &old, 4);
        a += b;
        memcpy(&nw, &a, 4);
      } while (!__atomic_compare_exchange_n(p, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
      break;
    }
    case PTO_F16:
    case PTO_BF16: {
      uint16_t *p = (uint16_t *)dst + i, old = __atomic_load_n(p, __ATOMIC_RELAXED), nw, sv;
      memcpy(&sv, (const uint16_t *)src + i, 2);
      do {
        nw = dt == PTO_F16 ? f32_to_half(half_to_f32(old) + half_to_f32(sv))
                           : f32_to_bf16(bf16_to_f32(old) + bf16_to_f32(sv));
      } while (!__atomic_compare_exchange_n(p, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
      break;
    }
    case PTO_I32: {
      int32_t v;
      memcpy(&v, (const int32_t *)src + i, 4);
      __atomic_fetch_add((int32_t *)dst + i, v, __ATOMIC_RELAXED);
      break;
    }
    case PTO_I16: {
      int16_t v;
      memcpy(&v, (const int16_t *)src + i, 2);
      __atomic_fetch_add((int16_t *)dst + i, v, __ATOMIC_RELAXED);
      break;
    }
    case PTO_I8:
      __atomic_fetch_add((int8_t *)dst + i, ((const int8_t *)src)[i], __ATOMIC_RELAXED);
      break;
    default: return; /* rejected by ops.c before it gets here */
    }
  }
}

/* ---- fault-injection callbacks ---- */

static void land(void *arg, const fault_op *op) {
  comm_win *w = arg;
  unsigned char *dst = w->base[op->peer] + op->off;
  if (op->kind == FAULT_PUT)
    memcpy(dst, op->data, op->bytes);
  else
    amo_add(dst, op->dt, op->data, op->bytes / pto_dtype_size(op->dt));
  /* release pairs with the acquire in seen_publish: the landing is visible
   * to whatever the peer does after it counted it */
  if (w->d.controlled)
    atomic_fetch_add_explicit(&hdr(w, op->peer)->landed, 1, memory_order_release);
  pto_event_signal(&hdr(w, op->peer)->ev); /* the peer may wait on any word it owns */
}

typedef struct gap_wait {
  shm_hdr *peer;
  uint32_t epoch;
  uint64_t landed; /* controlled: the landings the peer must have seen, else 0 */
} gap_wait;

static bool gap_over(void *arg) {
  gap_wait *g = arg;
  /* acquire pairs with the peer's release store at the end of its task.
   * "At or after my epoch": a peer that finished a task started later
   * finished this one too (epochs grow in the order tasks start, and do
   * not wrap within a run: comm/signal.h). */
  uint32_t done = atomic_load_explicit(&g->peer->task_done, memory_order_acquire);
  /* acquire pairs with seen_publish: the peer waits again, having looked
   * at everything landed before it */
  return done >= g->epoch ||
         (g->landed && atomic_load_explicit(&g->peer->seen, memory_order_acquire) >= g->landed);
}

/* Controlled runs: this rank's waits (signal, barrier) go through here.
 * Before it looks at what it waits for, it takes the count of landings in
 * its window; when that is not there yet, it publishes the count as seen
 * and wakes the landers waiting for it (gap): it reads nothing until the
 * next landing wakes it, so a lander may go on. */
typedef struct seen_wait {
  shm_hdr *me;
  bool (*cond)(void *);
  void *arg;
} seen_wait;

static bool seen_publish(void *arg) {
  seen_wait *s = arg;
  uint64_t landed = atomic_load_explicit(&s->me->landed, memory_order_acquire);
  if (s->cond(s->arg)) return true;
  /* only this rank's waiting threads write it, but a block parked at a
   * wait (docs/schedules.md, "Blocks that wait") may wait beside another:
   * the count only grows. release on success pairs with gap_over's
   * acquire; a failed exchange rereads relaxed */
  uint64_t seen = atomic_load_explicit(&s->me->seen, memory_order_relaxed);
  while (landed > seen &&
         !atomic_compare_exchange_weak_explicit(&s->me->seen, &seen, landed, memory_order_release,
                                                memory_order_relaxed)) {
  }
  if (landed > seen) pto_event_signal(&s->me->ev);
  return false;
}

/* pto_wait on my event, publishing what I saw in a controlled run. */
static bool wait_mine(comm_win *w, bool (*cond)(void *), void *arg, uint64_t deadline_ns) {
  shm_hdr *me = hdr(w, w->my_rank);
  if (!w->d.controlled) return pto_wait(&me->ev, cond, arg, deadline_ns);
  seen_wait s = {me, cond, arg};
  return pto_wait(&me->ev, seen_publish, &s, deadline_ns);
}

/* End of task: the rest of the batch is held back while a peer of the same
 * (group) task still runs its kernels — it is the only party that could
 * read the data without pto's ordering — until its kernels finished, for at
 * most FAULT_GAP_MS in all per end of task (the deadline is the batch's, so
 * pauses never add up). Peers in other tasks are ordered after this task by
 * node dependencies. A peer that is itself landing its end-of-task batch
 * has marked its task done first (comm_task_end), so two ranks holding
 * stores for each other never wait for each other. */
static void gap(void *arg, const fault_op *landed) {
  comm_win *w = arg;
  int chip = w->d.chips[landed->peer];
  if (chip < 0 || chip >= 64 || !(w->group >> chip & 1)) return;
  gap_wait g = {hdr(w, landed->peer), w->epoch, 0};
  uint64_t deadline = w->gap_deadline;
  if (w->d.controlled) {
    /* each landing, not only the first, waits until the peer has seen it
     * (it waits again) or is done: what the peer reads is then a function
     * of the landing order alone. Bounded by the signal wait timeout: a
     * peer that polls its window by its own means never waits in pto. */
    g.landed = atomic_load_explicit(&g.peer->landed, memory_order_relaxed);
    deadline = pto_deadline_ms(w->d.wait_timeout_ms);
  }
  pto_wait(&g.peer->ev, gap_over, &g, deadline);
}

/* ---- backend ---- */

/* "rank R's window NAME (N bytes): CALL: errno text" into why[n]: the
 * object, the call and the system's reason of a window not made or not
 * reached; returns PTO_ESYSTEM. err is the call's errno, taken before any
 * other call (close, shm_unlink) could change it. */
static int window_fail(const comm_win *w, int r, const char *name, const char *call, int err,
                       char *why, size_t n) {
  snprintf(why, n, "rank %d's window %s (%llu bytes): %s: %s%s", r, name,
           (unsigned long long)w->d.win_bytes, call, strerror(err),
           err == ENOSPC ? " (the shared-memory file system, /dev/shm, has no room for it)" : "");
  return PTO_ESYSTEM;
}

static int map_window(comm_win *w, int r, bool create, char *why, size_t n) {
  char name[COMM_PREFIX_MAX + 16];
  comm_shm_name(&w->d, r, name, sizeof name);
  int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) return window_fail(w, r, name, create ? "shm_open (new)" : "shm_open", errno, why, n);
  const char *call = NULL;
  int err = 0;
  if (create) {
    /* the object's memory is taken now: a sparse object on a full /dev/shm
     * (a container's 64 MiB) would kill the process with SIGBUS at the
     * first store to a page it cannot have, the zeroing below */
    if (ftruncate(fd, (off_t)w->d.win_bytes) != 0) {
      call = "ftruncate", err = errno;
    } else {
      do
        err = posix_fallocate(fd, 0, (off_t)w->d.win_bytes);
      while (err == EINTR);
      if (err) call = "posix_fallocate";
    }
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      call = "fstat", err = errno;
    } else if ((uint64_t)st.st_size != w->d.win_bytes) {
      snprintf(why, n, "rank %d's window %s has %lld bytes, the domain's windows %llu", r, name,
               (long long)st.st_size, (unsigned long long)w->d.win_bytes);
      close(fd);
      return PTO_ESYSTEM;
    }
  }
  void *p = MAP_FAILED;
  if (!call) {
    p = mmap(rank_addr(w, r), w->d.win_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             0);
    if (p == MAP_FAILED) call = "mmap", err = errno;
  }
  close(fd);
  if (call) {
    if (create) shm_unlink(name);
    return window_fail(w, r, name, call, err, why, n);
  }
  w->base[r] = p;
  return 0;
}

static int shm_create(const comm_domain_desc *d, int my_rank, comm_win **out, char *why,
                      size_t why_len) {
  comm_win *w = calloc(1, sizeof *w);
  if (!w) return PTO_ENOMEM;
  w->d = *d;
  w->my_rank = my_rank;
  if (my_rank >= 0) {
    int rc = map_window(w, my_rank, true, why, why_len);
    if (rc) {
      free(w);
      return rc;
    }
    /* my own window is zero: a new object (O_EXCL), its bytes ftruncate's
     * zeros. Nothing zeroes it again: a peer may signal me as soon as it
     * is past the allocation barrier, and zeroing then would erase that;
     * and writing every page here faulted in the whole window in every
     * domain's creation (under TSan, its shadow too: 3.6 million faults
     * in test_dist_coll), where a run touches the pages it uses. */
    shm_hdr *h = hdr(w, my_rank);
    h->dom_id = d->id;
    h->rank = my_rank;
    h->cpus = *pto_wait_cpu_set();
    pto_event_init(&h->ev, true);
    /* release: a peer that attaches after the barrier and sees the magic
     * sees an initialised header (the barrier orders it anyway) */
    __atomic_store_n(&h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    if (d->fault_inject) {
      uint32_t name = (uint32_t)(d->controlled ? d->run_index : d->id);
      uint64_t seed = d->fault_seed ^ ((uint64_t)name << 32) ^ (uint64_t)my_rank;
      rc = fault_create(seed, land, gap, w, &w->fq);
      if (rc) {
        comm_backend_shm.destroy(w, true, NULL, NULL);
        return rc;
      }
      if (d->controlled) fault_set_controlled(w->fq, d->run_index);
    }
  }
  *out = w;
  return 0;
}

/* The ranks whose processes share a CPU with mine, and the CPUs they
 * share: pto's count of runnable threads sees only this process, so with
 * more ranks than CPUs (4 ranks on 2 CPUs under mpirun --oversubscribe)
 * every waiter believed a CPU free and spun, taking the time slice of the
 * peer it waited for (an 8-byte broadcast: 28-34 us, 4.8 without the
 * spin). Ranks bound to CPUs of their own (mpirun's binding to cores)
 * share nothing and spin as before. */
static void count_sharers(comm_win *w) {
  if (w->counted || w->my_rank < 0) return; /* an observer waits on no window */
  w->counted = true;
  const cpu_set_t *theirs[PTO_COMM_MAX_RANKS];
  for (int r = 0; r < w->d.nranks; r++)
    theirs[r] = r == w->my_rank ? NULL : &hdr(w, r)->cpus;
  pto_wait_share_begin(theirs, w->d.nranks, &w->share);
}

static int shm_attach(comm_win *w, char *why, size_t why_len) {
  for (int r = 0; r < w->d.nranks; r++) {
    if (w->base[r]) continue;
    int rc = map_window(w, r, false, why, why_len);
    if (rc) return rc;
    /* acquire pairs with the owner's release store of the magic */
    if (__atomic_load_n(&hdr(w, r)->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC) {
      char name[COMM_PREFIX_MAX + 16];
      comm_shm_name(&w->d, r, name, sizeof name);
      snprintf(why, why_len, "rank %d's window %s has no pto window header (not made by rank %d)",
               r, name, r);
      return PTO_ESYSTEM;
    }
  }
  count_sharers(w);
  return 0;
}

static void shm_destroy(comm_win *w, bool unlink, comm_cancel_fn give_up, void *give_up_arg) {
  (void)give_up; /* no collective release: each rank unmaps and unlinks its own */
  (void)give_up_arg;
  if (!w) return;
  pto_wait_share_end(&w->share);
  if (w->fq) {
    fault_flush(w->fq, -1, false);
    fault_destroy(w->fq);
  }
  for (int r = 0; r < w->d.nranks; r++)
    if (w->base[r]) comm_space_unmap((uint64_t)(uintptr_t)w->base[r], w->d.win_bytes);
  if (unlink && w->my_rank >= 0) comm_shm_unlink(&w->d, w->my_rank);
  free(w);
}

static int shm_put(comm_win *w, int peer, uint64_t off, const void *src, size_t n) {
  if (w->fq) return fault_hold(w->fq, peer, FAULT_PUT, PTO_U8, off, src, n);
  /* no wake: a store lands, for the peer's waiters too, at my next
   * notify to it, quiet, barrier or task end, which wake it (shm_quiet) */
  pto_copy(w->base[peer] + off, src, n);
  return 0;
}

static int shm_get(comm_win *w, int peer, uint64_t off, void *dst, size_t n) {
  if (w->fq) fault_flush(w->fq, peer, false);
  /* my earlier stores land before the load (pto/comm.h): without the
   * fence a store still in this CPU's store buffer could be passed by it,
   * and two ranks that each put then get could both read the old value */
  atomic_thread_fence(memory_order_seq_cst);
  pto_copy(dst, w->base[peer] + off, n);
  return 0;
}

static int shm_accumulate(comm_win *w, int peer, uint64_t off, pto_dtype dt, const void *src,
                          size_t count) {
  if (w->fq) return fault_hold(w->fq, peer, FAULT_ACC, dt, off, src, count * pto_dtype_size(dt));
  amo_add(w->base[peer] + off, dt, src, count); /* no wake: as shm_put's */
  return 0;
}

static int shm_signal(comm_win *w, int peer, uint64_t off, pto_signal_op op, int32_t v,
                      uint32_t epoch, uint64_t *written) {
  if (w->fq) fault_flush(w->fq, peer, false);
  *written = sig_update((_Atomic uint64_t *)(w->base[peer] + off), op, v, epoch);
  pto_event_signal(&hdr(w, peer)->ev);
  return 0;
}

static uint64_t shm_signal_load(comm_win *w, uint64_t off) {
  /* acquire pairs with the release CAS in sig_update of the notifier */
  return atomic_load_explicit((_Atomic uint64_t *)(w->base[w->my_rank] + off),
                              memory_order_acquire);
}

static bool shm_signal_park(comm_win *w, bool (*cond)(void *), void *arg, uint64_t deadline_ns) {
  return wait_mine(w, cond, arg, deadline_ns);
}

static void shm_wake(comm_win *w, int rank) {
  if (w->base[rank]) pto_event_signal(&hdr(w, rank)->ev);
}

static unsigned char *shm_direct(comm_win *w, int rank) {
  return w->fq || w->d.controlled ? NULL : w->base[rank];
}

static void shm_task_mark(comm_win *w, uint32_t epoch, uint64_t group, bool end) {
  if (w->my_rank < 0) return;
  shm_hdr *h = hdr(w, w->my_rank);
  w->epoch = epoch;
  w->group = group;
  if (!end) return;
  /* release pairs with gap_over of a peer holding stores back for me: my
   * kernels finished, I read nothing more of this task */
  atomic_store_explicit(&h->task_done, epoch, memory_order_release);
  pto_event_signal(&h->ev);
}

/* My stores are complete once the fence drained them; then the waiters
 * of the peers they went to re-check: a put or add wakes no one itself
 * (its wake's fence was a tenth of a small put + quiet), so a wait on a
 * word that one wrote ends here, or at a notify, barrier or the task's
 * end, where stores land (pto/comm.h). */
static int shm_quiet(comm_win *w, int peer, bool end_of_task) {
  if (end_of_task) w->gap_deadline = pto_deadline_ms(FAULT_GAP_MS); /* one for the whole batch */
  if (w->fq) fault_flush(w->fq, peer, end_of_task);
  atomic_thread_fence(memory_order_seq_cst);
  for (int r = peer < 0 ? 0 : peer; r < (peer < 0 ? w->d.nranks : peer + 1); r++)
    if (w->base[r]) pto_event_signal_fenced(&hdr(w, r)->ev);
  return 0;
}

typedef struct barrier_wait {
  comm_win *w;
  uint64_t want;
  comm_cancel_fn cancel;
  void *cancel_arg;
  int laggard;
} barrier_wait;

static bool barrier_done(void *arg) {
  barrier_wait *b = arg;
  for (int r = 0; r < b->w->d.nranks; r++) {
    /* acquire pairs with each rank's release store of its arrival */
    uint64_t a = atomic_load_explicit(&hdr(b->w, r)->arrive, memory_order_acquire);
    if (sig_epoch(a) != sig_epoch(b->want) || (uint32_t)a < (uint32_t)b->want) {
      b->laggard = r;
      return b->cancel && b->cancel(b->cancel_arg);
    }
  }
  b->laggard = -1;
  return true;
}

static int shm_barrier(comm_win *w, uint32_t epoch, uint32_t seq, uint64_t deadline_ns,
                       comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  if (w->fq) fault_flush(w->fq, -1, false);
  uint64_t want = (uint64_t)epoch << 32 | seq;
  /* release: my earlier stores are visible to whoever sees me arrive */
  atomic_store_explicit(&hdr(w, w->my_rank)->arrive, want, memory_order_release);
  for (int r = 0; r < w->d.nranks; r++)
    pto_event_signal(&hdr(w, r)->ev);
  barrier_wait b = {w, want, cancel, cancel_arg, -1};
  wait_mine(w, barrier_done, &b, deadline_ns);
  if (b.laggard < 0) return 0;
  uint64_t a = atomic_load_explicit(&hdr(w, b.laggard)->arrive, memory_order_relaxed);
  snprintf(why, why_len,
           "rank %d waited at barrier %u of task epoch %u; rank %d is at "
           "barrier %u of epoch %u",
           w->my_rank, seq, epoch, b.laggard, (unsigned)(uint32_t)a, (unsigned)sig_epoch(a));
  return PTO_EWAIT_TIMEOUT;
}

const comm_backend comm_backend_shm = {
    .name = "shm",
    .create = shm_create,
    .attach = shm_attach,
    .destroy = shm_destroy,
    .put = shm_put,
    .get = shm_get,
    .accumulate = shm_accumulate,
    .signal = shm_signal,
    .signal_load = shm_signal_load,
    .signal_park = shm_signal_park,
    .wake = shm_wake,
    .task_mark = shm_task_mark,
    .quiet = shm_quiet,
    .barrier = shm_barrier,
    .direct = shm_direct,
};
