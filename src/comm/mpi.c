/* mpi.c — the MPI backend: each domain is an MPI communicator of its
 * ranks (MPI_COMM_WORLD rank chips[r] is domain rank r) with one MPI-3 RMA
 * window, locked once for the window's life (passive target, lock_all).
 *
 * Windows: when every rank of the domain is on this host (and
 * PTO_MPI_SHARED_WINDOWS is 1), one MPI_Win_allocate_shared segment, so the
 * peers' windows are mapped here too and RMA on them is a memcpy / a CPU
 * atomic (Open MPI's osc/sm); otherwise MPI_Win_create on this rank's
 * slot of a reserved address range (peers' slots stay inaccessible: their
 * addresses only name offsets). The range is desc.base when the caller
 * placed the windows (the node: its window space, reserved at one address
 * in every rank, so views passed by address agree; always this RMA
 * layout), else one reserved here. Either way rank r's window is at
 * window_base() + r * win_bytes in this process.
 *
 * Ordering (docs/comm.md, "The MPI backend"): put = MPI_Put, accumulate =
 * MPI_Accumulate (f16/bf16: get, add and put under a lock word in the
 * target's header, cas_add_half), both
 * completed locally before returning (the caller may reuse its buffer);
 * signal = MPI_Win_flush(peer) — every earlier put/accumulate of this
 * process to peer is complete at the target — then the epoch-tagged update
 * of the cell by MPI_Compare_and_swap; signal_load = MPI_Fetch_and_op
 * (MPI_NO_OP) on my own cell, then MPI_Win_sync, so the data a seen signal
 * published is visible to this process's loads (unified memory model,
 * checked at creation). Barrier: arrival words in each rank's header,
 * written with MPI_Accumulate(MPI_REPLACE) after a flush of everything.
 * Every wait has a deadline; MPI errors return (MPI_ERRORS_RETURN on the
 * communicator and the window) as PTO_EMPI. */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/comm.h"
#include "comm/fault.h"
#include "comm/mpi_win.h"
#include "comm/signal.h"
#include "common/clock.h"
#include "common/copy.h"
#include "common/half.h"
#include "common/options.h"
#include "common/wait.h"

#define MPI_CHUNK ((size_t)1 << 30) /* bytes per MPI call: counts are int */

static mpi_hdr *hdr(const comm_win *w, int r) {
  return (mpi_hdr *)(w->base + (uint64_t)r * w->d.win_bytes);
}

static int64_t wait_ms(const comm_win *w) {
  return w->d.wait_timeout_ms > 0 ? w->d.wait_timeout_ms : pto_option(PTO_OPT_NODE_WAIT_MS);
}

/* An RMA layout's MPI calls take turns per process: Open MPI 4.1's osc/ucx
 * over TCP, with several threads of a process in RMA calls at once, spins
 * in UCX's locks without getting anywhere (across hosts the 4-thread rounds
 * of tests/mpi ops never finished). Held for a call sequence, never across
 * a wait; recursive (held-back fault-injection stores land under it). The
 * shared layout (CPU stores and atomics) does not take it.
 *
 * A thread stuck inside MPI in its RMA calls (call_guard.h): as a
 * collective's call (mpi_coll.c, guard_begin), every hold of the
 * window's lock, which brackets the RMA layout's MPI calls (one thread's
 * at a time), arms the window's guard: its allowance the domain's wait
 * deadline, PTO_MPI_COLL_GRACE_MS and STUCK_MARGIN_MS (mpi_win.h, set at
 * creation: op_allow_ms); a hold is one call sequence, never a wait but
 * an f16/bf16 add's for the target's add lock (cas_add_half), which arms
 * the guard anew for each of its chunks (op_renew). The lock is
 * recursive: the outermost hold arms and disarms. */
static void lock(comm_win *w) {
  if (w->shared) return;
  pthread_mutex_lock(&w->mu);
  if (w->op_depth++ == 0) call_guard_arm(&w->op_guard, w->op_allow_ms);
}
static void unlock(comm_win *w) {
  if (w->shared) return;
  if (--w->op_depth == 0) call_guard_disarm(&w->op_guard);
  pthread_mutex_unlock(&w->mu);
}

/* A new allowance for the hold: the next of several bounded steps. */
static void op_renew(comm_win *w) {
  if (w->shared || w->op_depth == 0) return;
  call_guard_disarm(&w->op_guard);
  call_guard_arm(&w->op_guard, w->op_allow_ms);
}

static void op_stuck(call_guard *g, double stuck_ms) {
  comm_win *w = g->arg;
  mpi_end_job(w,
              "an RMA call sequence on its windows did not come back from MPI in %.0f ms (the "
              "domain's wait deadline %lld ms, PTO_MPI_COLL_GRACE_MS %lld and %d ms more): the "
              "thread is stuck inside MPI. MPI may still write this process's memory: ending the "
              "MPI job (MPI_Abort)",
              stuck_ms, (long long)wait_ms(w),
              (long long)pto_option_cached(PTO_OPT_MPI_COLL_GRACE_MS), STUCK_MARGIN_MS);
}

/* Wakes rank r's waiters when its window is mapped here (shared layout);
 * an RMA layout's waiters poll. */
static void wake(comm_win *w, int r) {
  if (w->shared) pto_event_signal(&hdr(w, r)->ev);
}

/* What my waiters park on: the event of my header (shared layout), else
 * nothing — pto_wait then polls with a growing sleep. */
static pto_event *my_ev(comm_win *w) { return w->shared ? &hdr(w, w->my_rank)->ev : NULL; }

static void mpi_why(char *why, size_t n, const char *call, int err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(err, msg, &len);
  snprintf(why, n, "%s failed: %s", call, msg);
}

/* ---- MPI itself: initialised with MPI_THREAD_MULTIPLE ---- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pto_initialised_mpi;

static void finalize_at_exit(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

static const char *thread_level_name(int l) {
  return l == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
         : l == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
         : l == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
         : l == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                      : "an unknown level";
}

/* MPI ready for the backend: initialises it (MPI_THREAD_MULTIPLE,
 * finalised at exit) unless the program did; the thread level must be
 * MPI_THREAD_MULTIPLE, since the core threads of a chip call concurrently. */
static int mpi_ready(char *why, size_t n) {
  pthread_mutex_lock(&init_lock);
  int init = 0, fin = 0, provided = MPI_THREAD_SINGLE, rc = 0;
  MPI_Finalized(&fin);
  MPI_Initialized(&init);
  if (fin) {
    snprintf(why, n, "MPI was already finalised");
    rc = PTO_EMPI;
  } else if (!init) {
    int err = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (err != MPI_SUCCESS) {
      mpi_why(why, n, "MPI_Init_thread", err);
      rc = PTO_EMPI;
    } else {
      pto_initialised_mpi = true;
      atexit(finalize_at_exit);
    }
  } else {
    MPI_Query_thread(&provided);
  }
  if (!rc && provided != MPI_THREAD_MULTIPLE) {
    snprintf(why, n,
             "MPI provides %s; pto's MPI backend needs MPI_THREAD_MULTIPLE (the core threads of "
             "a chip call MPI concurrently)%s",
             thread_level_name(provided),
             pto_initialised_mpi ? ""
                                 : ": initialise MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE)");
    rc = PTO_EMPI;
  }
  pthread_mutex_unlock(&init_lock);
  return rc;
}

/* Polls a request until it completes (0), the deadline passes
 * (PTO_EWAIT_TIMEOUT: the request is left behind — a barrier cannot be
 * cancelled) or MPI fails (PTO_EMPI). */
typedef struct req_wait {
  MPI_Request *req;
  int err;
  comm_cancel_fn give_up; /* NULL: never */
  void *give_up_arg;
  bool gave_up;
} req_wait;

static bool req_done(void *arg) {
  req_wait *r = arg;
  int flag = 0;
  r->err = MPI_Test(r->req, &flag, MPI_STATUS_IGNORE);
  if (flag || r->err != MPI_SUCCESS) return true;
  r->gave_up = r->give_up && r->give_up(r->give_up_arg);
  return r->gave_up;
}

/* give_up (NULL: never): the wait ends at once with PTO_ESHUTDOWN when it
 * says so (the request is left behind, as at the deadline). */
static int ibarrier(comm_win *w, const char *what, comm_cancel_fn give_up, void *give_up_arg,
                    char *why, size_t n) {
  MPI_Request req;
  int err = MPI_Ibarrier(w->comm, &req);
  if (err != MPI_SUCCESS) {
    mpi_why(why, n, "MPI_Ibarrier", err);
    return PTO_EMPI;
  }
  req_wait r = {&req, MPI_SUCCESS, give_up, give_up_arg, false};
  if (!pto_wait(NULL, req_done, &r, pto_deadline_ms(wait_ms(w)))) {
    snprintf(why, n, "rank %d: not every rank of the domain reached %s within %lld ms", w->my_rank,
             what, (long long)wait_ms(w));
    return PTO_EWAIT_TIMEOUT;
  }
  if (r.gave_up) {
    snprintf(why, n, "rank %d: %s abandoned: a rank of the domain may never reach it", w->my_rank,
             what);
    return PTO_ESHUTDOWN;
  }
  if (r.err != MPI_SUCCESS) {
    mpi_why(why, n, "MPI_Ibarrier", r.err);
    return PTO_EMPI;
  }
  return 0;
}

/* ---- moving bytes ---- */

static MPI_Datatype acc_type(pto_dtype dt) {
  switch (dt) {
  case PTO_F32: return MPI_FLOAT;
  case PTO_I32: return MPI_INT32_T;
  case PTO_I16: return MPI_INT16_T;
  case PTO_I8: return MPI_INT8_T;
  default: return MPI_DATATYPE_NULL; /* f16, bf16: no MPI type */
  }
}

/* An RMA layout's put or accumulate to peer was issued: the next get from,
 * signal to or quiet of peer must flush it. Under the window's lock, as
 * every use of the bits: plain stores, no locked instruction. On the
 * shared layout (an accumulate: its puts are stores) every later flush
 * goes to MPI. */
static void mark_dirty(comm_win *w, int peer) {
  if (!w->shared)
    w->dirty |= 1ull << peer;
  else if (!atomic_load_explicit(&w->acc_issued, memory_order_relaxed))
    atomic_store_explicit(&w->acc_issued, true, memory_order_relaxed);
}

/* Completes my earlier puts and accumulates to peer at the target (peer <
 * 0: to every peer). On an RMA layout only when some were issued since the
 * last flush: MPI_Win_flush costs a round trip through the transport even
 * with nothing to complete (a small get took two, 3.2 us against
 * MPI_Get + flush's 1.9 on osc/rdma, one host). The caller holds the
 * window's lock, so a flush that cleared a bit has completed before
 * another thread sees the bit clear. The shared layout fences, and calls
 * MPI's flush only after an MPI accumulate (mark_dirty). */
static int flush_dirty(comm_win *w, int peer) {
  int err = MPI_SUCCESS;
  if (w->shared) {
    /* puts there are CPU stores: a full fence completes them, which is
     * what osc/sm's flush makes, behind MPI_THREAD_MULTIPLE's lock; only
     * MPI's accumulates need MPI's flush */
    if (!atomic_load_explicit(&w->acc_issued, memory_order_relaxed)) {
      atomic_thread_fence(memory_order_seq_cst);
      return 0;
    }
    err = peer < 0 ? MPI_Win_flush_all(w->win) : MPI_Win_flush(peer, w->win);
  } else if (peer >= 0) {
    uint64_t bit = 1ull << peer;
    if (w->dirty & bit) {
      w->dirty &= ~bit;
      err = MPI_Win_flush(peer, w->win);
    }
  } else {
    /* a few peers one by one: MPI_Win_flush_all visits every rank */
    uint64_t bits = w->dirty, rest = bits & (bits - 1);
    w->dirty = 0;
    if (rest & (rest - 1)) /* more than two bits; no popcount (a libgcc call without -mpopcnt) */
      return MPI_Win_flush_all(w->win) == MPI_SUCCESS ? 0 : PTO_EMPI;
    for (; bits && err == MPI_SUCCESS; bits &= bits - 1)
      err = MPI_Win_flush(__builtin_ctzll(bits), w->win);
  }
  return err == MPI_SUCCESS ? 0 : PTO_EMPI;
}

/* A small put on an RMA layout: from a copy in the bounce buffer, with no
 * MPI_Win_flush_local (the caller's buffer is free at once anyway). The
 * copies are free again once every dirty peer was flushed (a flush
 * completes a put at the origin too); a full buffer flushes them all. The
 * window's lock is held (puts, and held stores landing, run under it).
 * Measured: a small put + quiet took 2.8 us against MPI_Put +
 * MPI_Win_flush's 1.8 with the flush_local (osc/rdma, one host). */
static int bounce_put(comm_win *w, int peer, uint64_t off, const void *src, size_t n) {
  if (w->dirty == 0) w->bounce_used = 0;
  if (w->bounce_used + n > MPI_BOUNCE_BYTES) {
    if (flush_dirty(w, -1)) return PTO_EMPI;
    w->bounce_used = 0;
  }
  unsigned char *b = w->bounce + w->bounce_used;
  memcpy(b, src, n);
  w->bounce_used += (n + 63) & ~(size_t)63;
  if (MPI_Put(b, (int)n, MPI_BYTE, peer, (MPI_Aint)off, (int)n, MPI_BYTE, w->win) != MPI_SUCCESS)
    return PTO_EMPI;
  mark_dirty(w, peer);
  return 0;
}

/* My put or accumulate to peer is complete at the origin: the caller may
 * reuse its buffer once this returns. rq: the operation's request where
 * the window takes them (w->rput), else MPI_Win_flush_local. */
static int local_done(comm_win *w, int peer, MPI_Request *rq) {
  int err = w->rput ? MPI_Wait(rq, MPI_STATUS_IGNORE) : MPI_Win_flush_local(peer, w->win);
  return err == MPI_SUCCESS ? 0 : PTO_EMPI;
}

static int rma_put(comm_win *w, int peer, uint64_t off, const void *src, size_t n) {
  if (w->shared) {
    /* every window is mapped here: a store, which MPI allows on shared
     * windows (unified model); the MPI_Win_sync before a signal orders it
     * as it does my stores to my own window. MPI_Put + MPI_Win_flush_local
     * cost osc/sm's call overhead twice for the same memcpy (8 bytes: pto's
     * put + quiet 0.22 us against MPI_Put + MPI_Win_flush's 0.11). */
    pto_copy((unsigned char *)hdr(w, peer) + off, src, n);
    return 0;
  }
  if (n <= MPI_BOUNCE_PUT) return bounce_put(w, peer, off, src, n);
  const unsigned char *p = src;
  for (size_t at = 0; at < n; at += MPI_CHUNK) {
    int c = (int)(n - at < MPI_CHUNK ? n - at : MPI_CHUNK);
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Aint to = (MPI_Aint)(off + at);
    int err = w->rput ? MPI_Rput(p + at, c, MPI_BYTE, peer, to, c, MPI_BYTE, w->win, &rq)
                      : MPI_Put(p + at, c, MPI_BYTE, peer, to, c, MPI_BYTE, w->win);
    if (err != MPI_SUCCESS) return PTO_EMPI;
    mark_dirty(w, peer);
    if (local_done(w, peer, &rq)) return PTO_EMPI;
  }
  return 0;
}

/* Incoming RMA that the target applies itself (osc/ucx over TCP: the
 * peers' puts and atomics arrive as active messages) needs this process to
 * progress MPI while it waits. Open MPI 4.1's osc/ucx gives each thread a
 * UCX worker of its own, and a thread's RMA calls progress that worker
 * only; an MPI call that runs the general progress engine (MPI_Iprobe)
 * drives the window's main worker too, where the peers' operations land.
 * Without it a rank whose threads only wait on their cells never applies
 * the peer's notify (tests/mpi: mpi.ops_osc_ucx.np2 timed out). */
static void progress(comm_win *w) {
  int flag = 0;
  if (!w->shared) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w->comm, &flag, MPI_STATUS_IGNORE);
}

/* f16/bf16 add (MPI has no type for them): under the target window's add
 * lock, get the elements, add, put exactly their bytes back, flush, release.
 * Atomic with every other f16/bf16 add (all take the lock), and never
 * writes a byte outside the elements: a compare-and-swap of the 32-bit word
 * around an element wrote its neighbour back, undoing a peer's concurrent
 * MPI_Put to it (MPI makes accumulate operations atomic with each other
 * only, and osc/sm and osc/rdma over vader compare-and-swap by a get and a
 * put); a 16-bit MPI_Compare_and_swap would not, but osc/ucx cannot do
 * one (UCX has no 16-bit atomics: it retries for ever). */
static uint16_t half_add(pto_dtype dt, uint16_t a, uint16_t b) {
  return dt == PTO_F16 ? f32_to_half(half_to_f32(a) + half_to_f32(b))
                       : f32_to_bf16(bf16_to_f32(a) + bf16_to_f32(b));
}

#define ADD_LOCK_OFF ((MPI_Aint)offsetof(mpi_hdr, add_lock))
#define HALF_CHUNK   2048 /* elements per hold of the lock */

/* Compare-and-swap of peer's add lock word: *seen = the word before. To
 * myself on an RMA window a CPU compare-and-swap, as a signal to myself
 * (signal_u says why). */
static int add_lock_cas(comm_win *w, int peer, uint64_t expect, uint64_t want, uint64_t *seen) {
  if (peer == w->my_rank && !w->shared) {
    *seen = expect;
    atomic_compare_exchange_strong((_Atomic uint64_t *)&hdr(w, peer)->add_lock, seen, want);
    MPI_Win_sync(w->win);
    return 0;
  }
  if (MPI_Compare_and_swap(&want, &expect, seen, MPI_UINT64_T, peer, ADD_LOCK_OFF, w->win) !=
          MPI_SUCCESS ||
      MPI_Win_flush(peer, w->win) != MPI_SUCCESS)
    return PTO_EMPI;
  return 0;
}

typedef struct add_lock_wait {
  comm_win *w;
  int peer, err;
} add_lock_wait;

static bool add_lock_taken(void *arg) {
  add_lock_wait *a = arg;
  uint64_t seen = 1;
  progress(a->w); /* the holder's release may need this process to progress */
  a->err = add_lock_cas(a->w, a->peer, 0, (uint64_t)a->w->my_rank + 1, &seen);
  return a->err || seen == 0;
}

static int cas_add_half(comm_win *w, int peer, uint64_t off, pto_dtype dt, const uint16_t *src,
                        size_t count) {
  uint16_t cur[HALF_CHUNK];
  for (size_t at = 0; at < count; at += HALF_CHUNK) {
    size_t n = count - at < HALF_CHUNK ? count - at : HALF_CHUNK;
    MPI_Aint where = (MPI_Aint)(off + 2 * at);
    op_renew(w); /* each chunk waits up to the deadline for the lock */
    add_lock_wait a = {w, peer, 0};
    if (!pto_wait(NULL, add_lock_taken, &a, pto_deadline_ms(wait_ms(w)))) return PTO_EWAIT_TIMEOUT;
    if (a.err) return a.err;
    int err = MPI_Get(cur, (int)n, MPI_UINT16_T, peer, where, (int)n, MPI_UINT16_T, w->win);
    if (err == MPI_SUCCESS) err = MPI_Win_flush(peer, w->win);
    for (size_t i = 0; err == MPI_SUCCESS && i < n; i++)
      cur[i] = half_add(dt, cur[i], src[at + i]);
    if (err == MPI_SUCCESS)
      err = MPI_Put(cur, (int)n, MPI_UINT16_T, peer, where, (int)n, MPI_UINT16_T, w->win);
    /* complete at the target before the next holder reads */
    if (err == MPI_SUCCESS) err = MPI_Win_flush(peer, w->win);
    uint64_t seen;
    int rc = add_lock_cas(w, peer, (uint64_t)w->my_rank + 1, 0, &seen);
    if (err != MPI_SUCCESS) return PTO_EMPI;
    if (rc) return rc;
  }
  return 0;
}

static int rma_accumulate(comm_win *w, int peer, uint64_t off, pto_dtype dt, const void *src,
                          size_t count) {
  MPI_Datatype t = acc_type(dt);
  if (t == MPI_DATATYPE_NULL) return cas_add_half(w, peer, off, dt, src, count);
  size_t es = pto_dtype_size(dt), per = MPI_CHUNK / es;
  const unsigned char *p = src;
  for (size_t at = 0; at < count; at += per) {
    int c = (int)(count - at < per ? count - at : per);
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Aint to = (MPI_Aint)(off + at * es);
    int err = w->rput ? MPI_Raccumulate(p + at * es, c, t, peer, to, c, t, MPI_SUM, w->win, &rq)
                      : MPI_Accumulate(p + at * es, c, t, peer, to, c, t, MPI_SUM, w->win);
    if (err != MPI_SUCCESS) return PTO_EMPI;
    mark_dirty(w, peer);
    if (local_done(w, peer, &rq)) return PTO_EMPI;
  }
  return 0;
}

/* ---- controlled node runs (desc.controlled; docs/schedules.md) ----
 *
 * As on shared-memory windows (shm.c), each landing of an end-of-task batch
 * waits until the reading peer has seen it: until the peer waits again in
 * pto, having taken the count of landings in its window before it found
 * its condition false, or has finished its task. The three words live in
 * the peer's window header and go through MPI's atomics. A landing is
 * complete at the peer (MPI_Win_flush) before the peer's count grows, so
 * a count the peer took covers the bytes of those landings. */

#define HDR_WORD(f) ((MPI_Aint)offsetof(mpi_hdr, f))

/* Rank r's header word at off, atomic with the peers' updates; 0 when MPI
 * fails (a wait then ends at its deadline, named). The window's lock is held. */
static uint64_t word_load(comm_win *w, int r, MPI_Aint off) {
  uint64_t v = 0;
  if (MPI_Fetch_and_op(NULL, &v, MPI_UINT64_T, r, off, MPI_NO_OP, w->win) != MPI_SUCCESS ||
      MPI_Win_flush(r, w->win) != MPI_SUCCESS)
    return 0;
  MPI_Win_sync(w->win);
  return v;
}

/* op (MPI_SUM, MPI_REPLACE) v into rank r's header word at off, complete
 * there when this returns; the word before. The window's lock is held. */
static uint64_t word_update(comm_win *w, int r, MPI_Aint off, uint64_t v, MPI_Op op) {
  uint64_t old = 0;
  if (MPI_Fetch_and_op(&v, &old, MPI_UINT64_T, r, off, op, w->win) == MPI_SUCCESS)
    MPI_Win_flush(r, w->win);
  return old;
}

typedef struct seen_wait {
  comm_win *w;
  bool (*cond)(void *);
  void *arg;
} seen_wait;

/* My waits' condition in a controlled run: the count of landings in my
 * window first, then the condition; not there yet, the count is published
 * as seen. Only this rank's waiting threads publish, but a block parked at
 * a wait may wait beside another: the count only grows (MPI_MAX). */
static bool seen_publish(void *arg) {
  seen_wait *s = arg;
  comm_win *w = s->w;
  lock(w);
  uint64_t landed = word_load(w, w->my_rank, HDR_WORD(landed));
  unlock(w);
  if (s->cond(s->arg)) return true;
  /* relaxed: a cache of what was published, to skip the RMA call; the
   * header's word is the one that counts */
  uint64_t seen = atomic_load_explicit(&w->seen, memory_order_relaxed);
  while (landed > seen &&
         !atomic_compare_exchange_weak_explicit(&w->seen, &seen, landed, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  if (landed > seen) {
    lock(w);
    word_update(w, w->my_rank, HDR_WORD(seen), landed, MPI_MAX);
    unlock(w);
    wake(w, w->my_rank);
  }
  return false;
}

/* pto_wait on my event (or polling), publishing what I saw in a controlled run. */
static bool wait_mine(comm_win *w, bool (*cond)(void *), void *arg, uint64_t deadline_ns) {
  if (!w->d.controlled) return pto_wait(my_ev(w), cond, arg, deadline_ns);
  seen_wait s = {w, cond, arg};
  return pto_wait(my_ev(w), seen_publish, &s, deadline_ns);
}

typedef struct gap_wait {
  comm_win *w;
  int peer;
  uint64_t landed; /* the landings the peer must have seen */
} gap_wait;

static bool gap_over(void *arg) {
  gap_wait *g = arg;
  comm_win *w = g->w;
  lock(w);
  uint64_t done = word_load(w, g->peer, HDR_WORD(task_done));
  uint64_t seen = word_load(w, g->peer, HDR_WORD(seen));
  unlock(w);
  /* "at or after my epoch", as shm.c's gap_over */
  return (uint32_t)done >= w->epoch || seen >= g->landed;
}

/* Between the landings of an end-of-task batch (fault.c): in a controlled
 * run, until the peer, if it runs in this node task, has seen the landing
 * or finished, for at most the signal wait timeout (a peer that polls its
 * window by its own means never waits in pto). Free runs land the batch
 * at once, as before. Never under the window's lock (mpi_quiet). */
static void gap(void *arg, const fault_op *landed) {
  comm_win *w = arg;
  int chip = w->d.chips[landed->peer];
  if (!w->d.controlled || chip < 0 || chip >= 64 || !(w->group >> chip & 1)) return;
  gap_wait g = {w, landed->peer, w->landed_at};
  /* the peer's seen and finish wake its event (shared layout), else poll */
  pto_wait(w->shared ? &hdr(w, g.peer)->ev : NULL, gap_over, &g, pto_deadline_ms(wait_ms(w)));
}

/* ---- fault injection: held-back stores land here ---- */

static void land(void *arg, const fault_op *op) {
  comm_win *w = arg;
  lock(w); /* recursive: most callers hold it already */
  /* an MPI failure here shows as the data missing at the next wait: the
   * held store has no caller left to return it to */
  if (op->kind == FAULT_PUT)
    rma_put(w, op->peer, op->off, op->data, op->bytes);
  else
    rma_accumulate(w, op->peer, op->off, op->dt, op->data, op->bytes / pto_dtype_size(op->dt));
  /* controlled: complete at the peer, then counted there, so landings
   * reach it in the order drawn (MPI orders no two puts) */
  if (w->d.controlled && !flush_dirty(w, op->peer))
    w->landed_at = word_update(w, op->peer, HDR_WORD(landed), 1, MPI_SUM) + 1;
  unlock(w);
  wake(w, op->peer);
}

/* ---- windows ---- */

/* The domain's communicator: world ranks chips[0..nranks) in domain order. */
static int make_comm(comm_win *w, char *why, size_t n) {
  const comm_domain_desc *d = &w->d;
  int wsize, wrank;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  for (int r = 0; r < d->nranks; r++) {
    if (d->chips[r] < 0 || d->chips[r] >= wsize) {
      snprintf(why, n, "domain rank %d is chip %d, outside MPI_COMM_WORLD (ranks 0..%d)", r,
               d->chips[r], wsize - 1);
      return PTO_EINVAL;
    }
    for (int q = 0; q < r; q++)
      if (d->chips[q] == d->chips[r]) {
        snprintf(why, n, "domain ranks %d and %d are both chip %d", q, r, d->chips[r]);
        return PTO_EINVAL;
      }
  }
  if (w->my_rank >= 0 && d->chips[w->my_rank] != wrank) {
    snprintf(why, n, "domain rank %d is chip %d, but this process is MPI_COMM_WORLD rank %d",
             w->my_rank, d->chips[w->my_rank], wrank);
    return PTO_EINVAL;
  }
  MPI_Group world, g;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int err = MPI_Group_incl(world, d->nranks, d->chips, &g);
  MPI_Group_free(&world);
  if (err != MPI_SUCCESS) {
    mpi_why(why, n, "MPI_Group_incl", err);
    return PTO_EMPI;
  }
  /* collective over the domain's ranks only; the tag keeps concurrent
   * creations of different domains apart */
  err = MPI_Comm_create_group(MPI_COMM_WORLD, g, d->id & 0x7fff, &w->comm);
  MPI_Group_free(&g);
  if (err != MPI_SUCCESS) {
    mpi_why(why, n, "MPI_Comm_create_group", err);
    return PTO_EMPI;
  }
  MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  return 0;
}

/* Every rank of the domain on this host (and shared windows allowed)?
 * The same answer on every rank: the peers on this host (mpi_coll_open,
 * xnear) are all of them, or some are not. */
static bool on_one_host(const comm_win *w) {
  return pto_option(PTO_OPT_MPI_SHARED_WINDOWS) &&
         __builtin_popcountll(w->xnear) == w->d.nranks - 1;
}

static int alloc_shared(comm_win *w, char *why, size_t n) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "false");
  void *mine;
  int err = MPI_Win_allocate_shared((MPI_Aint)w->d.win_bytes, 1, info, w->comm, &mine, &w->win);
  MPI_Info_free(&info);
  if (err != MPI_SUCCESS) {
    mpi_why(why, n, "MPI_Win_allocate_shared", err);
    return PTO_EMPI;
  }
  w->have_win = true;
  /* rank r's window must be at rank 0's + r * win_bytes: views name
   * windows by address (comm_view_locate) */
  for (int r = 0; r < w->d.nranks; r++) {
    MPI_Aint sz;
    int du;
    void *p;
    MPI_Win_shared_query(w->win, r, &sz, &du, &p);
    if (r == 0) w->base = p;
    if ((unsigned char *)p != w->base + (uint64_t)r * w->d.win_bytes ||
        (uint64_t)sz != w->d.win_bytes) {
      snprintf(why, n,
               "MPI_Win_allocate_shared placed rank %d's window at offset %td of %zu bytes, "
               "expected %llu of %llu (set PTO_MPI_SHARED_WINDOWS=0 for RMA windows)",
               r, (unsigned char *)p - w->base, (size_t)sz,
               (unsigned long long)(r * w->d.win_bytes), (unsigned long long)w->d.win_bytes);
      return PTO_EMPI;
    }
  }
  return 0;
}

/* The one-sided components the job allows: Open MPI's MCA parameter
 * "osc" (a control variable of the MPI tool interface, set by --mca osc
 * or OMPI_MCA_osc); "" when it is not set (Open MPI then tries all it has)
 * or cannot be read. Only when a window could not be made: the tool
 * interface's init and finalize took 206 ms. */
static void osc_selection(char *buf, size_t n) {
  buf[0] = 0;
  int level = MPI_THREAD_MULTIPLE, provided, idx, count;
  /* MPI's own level: Open MPI 4.1's MPI_T_init_thread sets the level
   * MPI_Query_thread says to the one asked for here, and the backend's
   * later checks of it would then fail */
  MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return;
  MPI_T_cvar_handle h;
  char val[256] = "";
  if (MPI_T_cvar_get_index("osc", &idx) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
    if (count > 0 && (size_t)count <= sizeof val && MPI_T_cvar_read(h, val) == MPI_SUCCESS)
      snprintf(buf, n, "%s", val);
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  const char *env = getenv("OMPI_MCA_osc");
  if (!buf[0] && env) snprintf(buf, n, "%s", env);
}

/* Why MPI_Win_create may have failed, naming the components that refused
 * when the job chose them (kept short: the reason travels in 256 bytes). */
static void win_create_hint(const comm_win *w, char *hint, size_t n) {
  char osc[96];
  osc_selection(osc, sizeof osc);
  if (!osc[0] && w->d.nranks == 1)
    /* Open MPI 4.1 on one host: osc/ucx, asked for, makes it (a node gives
     * such a domain on rank 0's host plain memory instead: node_domain.c) */
    snprintf(hint, n,
             "MCA parameter osc not set, a window of one rank: Open MPI's osc/rdma makes none "
             "(no RDMA to its own process), osc/pt2pt refuses MPI_THREAD_MULTIPLE");
  else if (!osc[0]) /* Open MPI 4.1 over TCP then picks osc/pt2pt */
    snprintf(hint, n,
             "MCA parameter osc not set: Open MPI's default one-sided components refused; over "
             "TCP: osc/pt2pt, which refuses MPI_THREAD_MULTIPLE");
  else if (strcmp(osc, "sm") == 0)
    snprintf(hint, n,
             "the job allows osc=sm only (MCA parameter osc): osc/sm makes shared windows "
             "(MPI_Win_allocate_shared), not MPI_Win_create's");
  else
    snprintf(hint, n,
             "the job allows osc=%s (MCA parameter osc): none of those made an RMA window with "
             "MPI_THREAD_MULTIPLE here",
             osc);
}

/* Whether the window's one-sided component completes a put at the origin
 * (and a get) while issuing it, so that waiting on MPI_Rput's (MPI_Rget's)
 * request costs nothing more: Open MPI's osc/rdma, whose windows it names
 * "rdma window N" (over vader the transport copies the data in the call).
 * There MPI_Win_flush_local and MPI_Win_flush always enter Open MPI's
 * progress, which yields the CPU when the ranks outnumber the CPUs: with
 * 4 ranks on 2 CPUs a 32 KiB put + quiet took 1.72-1.79x MPI_Put +
 * MPI_Win_flush with MPI_Win_flush_local, 1.03-1.05x with the request; an
 * 8-byte get 2.6 us by its request, 13 with MPI_Win_flush. Elsewhere, the
 * flushes: osc/ucx's request completes only once a fetch from the target
 * came back (a put on one host 2.18x against 1.02x with
 * MPI_Win_flush_local; across hosts over TCP, 1.28x against 1.01x). */
static bool completes_at_issue(MPI_Win win) {
  char name[MPI_MAX_OBJECT_NAME] = "";
  int len = 0;
  MPI_Win_get_name(win, name, &len);
  return strncmp(name, "rdma window ", 12) == 0;
}

static int alloc_rma(comm_win *w, char *why, size_t n) {
  if (w->d.base) {
    /* placed by the caller (the node): [base, base + nranks * win_bytes)
     * is reserved (PROT_NONE) at the same address in every process, so
     * window views passed between processes by address agree */
    w->base = (unsigned char *)(uintptr_t)w->d.base;
  } else if (__builtin_mul_overflow((uint64_t)w->d.nranks, w->d.win_bytes, &w->space_bytes)) {
    snprintf(why, n, "cannot reserve %d windows of %llu bytes of address space: the size overflows",
             w->d.nranks, (unsigned long long)w->d.win_bytes);
    return PTO_ESYSTEM;
  } else if (comm_space_reserve(w->space_bytes, &w->space) != 0) {
    int e = errno; /* mmap's, before any other call */
    w->space = NULL;
    snprintf(why, n, "cannot reserve %d windows of %llu bytes of address space: mmap: %s",
             w->d.nranks, (unsigned long long)w->d.win_bytes, strerror(e));
    return PTO_ESYSTEM;
  } else {
    w->base = w->space;
  }
  if (w->my_rank < 0) return 0; /* an observer names offsets, maps nothing */
  unsigned char *mine = w->base + (uint64_t)w->my_rank * w->d.win_bytes;
  w->mapped = true;
  if (mmap(mine, w->d.win_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
           -1, 0) == MAP_FAILED) {
    int e = errno; /* before any other call */
    snprintf(why, n, "cannot map a window of %llu bytes: mmap: %s",
             (unsigned long long)w->d.win_bytes, strerror(e));
    return PTO_ESYSTEM;
  }
  int err = MPI_Win_create(mine, (MPI_Aint)w->d.win_bytes, 1, MPI_INFO_NULL, w->comm, &w->win);
  if (err != MPI_SUCCESS) {
    char msg[200], hint[300];
    mpi_why(msg, sizeof msg, "MPI_Win_create", err);
    win_create_hint(w, hint, sizeof hint);
    snprintf(why, n, "%s (%s: ask for osc/ucx, --mca osc ucx; UCX_TLS=tcp,self across hosts)", msg,
             hint);
    return PTO_EMPI;
  }
  w->have_win = true;
  return 0;
}

static void mpi_destroy(comm_win *w, bool unlink, comm_cancel_fn give_up, void *give_up_arg);

static int mpi_create(const comm_domain_desc *d, int my_rank, comm_win **out, char *why,
                      size_t why_len) {
  int rc = mpi_ready(why, why_len);
  if (rc) return rc;
  comm_win *w = calloc(1, sizeof *w);
  if (!w) return PTO_ENOMEM;
  w->d = *d;
  w->my_rank = my_rank;
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&w->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  w->op_allow_ms = mpi_stuck_allow_ms(wait_ms(w));
  w->op_guard.arg = w;
  if (my_rank >= 0 && call_guard_watch(&w->op_guard, op_stuck) != 0) {
    pthread_mutex_destroy(&w->mu);
    free(w);
    snprintf(why, why_len, "cannot start the thread that watches for calls stuck in MPI");
    return PTO_ESYSTEM;
  }
  w->comm = MPI_COMM_NULL;
  for (int i = 0; i < PTO_COMM_MAX_BUFFERS; i++)
    w->bcomm[i] = MPI_COMM_NULL;
  w->win = MPI_WIN_NULL;
  if (my_rank < 0) { /* observer: the collective creation is the members' only */
    rc = alloc_rma(w, why, why_len);
    goto done;
  }
  bool shared = false;
  rc = make_comm(w, why, why_len);
  if (!rc) rc = mpi_coll_open(w, why, why_len);
  /* windows placed at desc.base cannot be MPI_Win_allocate_shared's */
  if (!rc && !d->base) shared = on_one_host(w);
  if (!rc) {
    w->shared = shared;
    rc = shared ? alloc_shared(w, why, why_len) : alloc_rma(w, why, why_len);
  }
  if (!rc) {
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    w->rput = !shared && completes_at_issue(w->win);
    int *model = NULL, flag = 0;
    MPI_Win_get_attr(w->win, MPI_WIN_MODEL, &model, &flag);
    if (!flag || *model != MPI_WIN_UNIFIED) {
      snprintf(why, why_len,
               "the MPI window uses the separate memory model; pto's MPI backend needs "
               "MPI_WIN_UNIFIED (loads of a window must see completed RMA)");
      rc = PTO_EMPI;
    }
  }
  if (!rc) {
    /* my own window is zero before the allocation barrier: a peer may
     * signal me as soon as it is past it. An RMA window is a mapping
     * alloc_rma just made (MAP_ANONYMOUS: zero, and no page touched until
     * used); a shared one is MPI's memory, which MPI does not promise
     * zeroed, so it is cleared here. */
    mpi_hdr *h = hdr(w, my_rank);
    if (shared) memset(h, 0, d->win_bytes);
    pto_event_init(&h->ev, true);
    h->cpus = *pto_wait_cpu_set();
    if (d->fault_inject) {
      /* a controlled run names the domain by its index in the run, as shm.c */
      uint32_t name = (uint32_t)(d->controlled ? d->run_index : d->id);
      uint64_t seed = d->fault_seed ^ ((uint64_t)name << 32) ^ (uint64_t)my_rank;
      rc = fault_create(seed, land, gap, w, &w->fq);
      if (!rc && d->controlled) fault_set_controlled(w->fq, d->run_index);
    }
  }
done:
  if (rc) {
    mpi_destroy(w, false, NULL, NULL);
    return rc;
  }
  *out = w;
  return 0;
}

/* Shared windows: the ranks whose processes share a CPU with mine, and
 * their CPUs, as shm.c's (pto's count of runnable threads sees only this
 * process; with more ranks than CPUs a waiter that spun took the time
 * slice of the peer it waited for). RMA layouts poll with a sleep. */
static void count_sharers(comm_win *w) {
  const cpu_set_t *theirs[PTO_COMM_MAX_RANKS];
  for (int r = 0; r < w->d.nranks; r++)
    theirs[r] = r == w->my_rank ? NULL : &hdr(w, r)->cpus;
  pto_wait_share_begin(theirs, w->d.nranks, &w->share);
}

static int mpi_attach(comm_win *w, char *why, size_t why_len) {
  if (w->my_rank < 0) return 0;
  int err = MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
  if (err != MPI_SUCCESS) {
    mpi_why(why, why_len, "MPI_Win_lock_all", err);
    return PTO_EMPI;
  }
  w->locked = true;
  /* every rank zeroed its window and holds the lock before anyone writes */
  int rc = ibarrier(w, "the window attach", NULL, NULL, why, why_len);
  if (!rc && w->shared) count_sharers(w);
  return rc;
}

static uint64_t mpi_window_base(const comm_win *w) { return (uint64_t)(uintptr_t)w->base; }

/* My slot of an RMA layout back to an inaccessible reservation (the
 * caller's range stays reserved; a range of my own is released after). */
static void unmap_mine(comm_win *w) {
  if (!w->mapped) return;
  comm_space_unmap((uint64_t)(uintptr_t)(w->base + (uint64_t)w->my_rank * w->d.win_bytes),
                   w->d.win_bytes);
  w->mapped = false;
}

static void mpi_destroy(comm_win *w, bool unlink, comm_cancel_fn give_up, void *give_up_arg) {
  (void)unlink; /* MPI's windows have no names */
  if (!w) return;
  pto_wait_share_end(&w->share);
  int fin = 0;
  MPI_Finalized(&fin);
  bool all_here = true;
  /* fin: the program finalised MPI first, its windows went with it */
  if (!fin) {
    if (w->fq) fault_flush(w->fq, -1, false);
    if (w->locked) MPI_Win_unlock_all(w->win);
    if (w->have_win) {
      /* MPI_Win_free is collective and cannot time out: free only when every
       * rank is here within the deadline (else the window is leaked — a peer
       * that died took the job with it, see docs/comm.md). Once a peer is
       * known gone (give_up: the node stopped this chip as its node failed)
       * the release is not waited for at all: MPI cannot release a window
       * whose group lost a member, and waiting out the deadline only held
       * the failed node's report back (30 s of a 40 s deadline: the node's
       * wait for this thread). The window is left as at the deadline; the
       * failed node ends the MPI job (node_mpi_stop). */
      char why[200];
      all_here = !(give_up && give_up(give_up_arg)) &&
                 ibarrier(w, "the window release", give_up, give_up_arg, why, sizeof why) == 0;
      if (all_here) MPI_Win_free(&w->win);
    }
    if (w->comm != MPI_COMM_NULL && all_here) MPI_Comm_free(&w->comm);
  }
  mpi_coll_close(w, all_here, fin);
  if (w->fq) fault_destroy(w->fq);
  /* a window MPI_Win_free did not take (a peer missing) stays mapped, and
   * so does a range reserved here around it: the library may still write
   * into it */
  if (all_here) {
    unmap_mine(w);
    comm_space_release(w->space, w->space_bytes);
  }
  call_guard_unwatch(&w->op_guard);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

static int put_u(comm_win *w, int peer, uint64_t off, const void *src, size_t n) {
  if (w->fq) return fault_hold(w->fq, peer, FAULT_PUT, PTO_U8, off, src, n);
  /* no wake: the peer's waiters re-check at my next notify to it, quiet,
   * barrier or task end, where the store lands (quiet_u) */
  return rma_put(w, peer, off, src, n);
}

static int get_u(comm_win *w, int peer, uint64_t off, void *dst, size_t n) {
  if (w->fq) fault_flush(w->fq, peer, false);
  /* earlier puts to peer complete first: MPI orders none of them */
  if (flush_dirty(w, peer)) return PTO_EMPI;
  if (w->shared) { /* mapped here: a load, as rma_put's store (flush_dirty fenced) */
    pto_copy(dst, (const unsigned char *)hdr(w, peer) + off, n);
    return 0;
  }
  unsigned char *p = dst;
  for (size_t at = 0; at < n; at += MPI_CHUNK) {
    int c = (int)(n - at < MPI_CHUNK ? n - at : MPI_CHUNK);
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Aint from = (MPI_Aint)(off + at);
    int err = w->rput ? MPI_Rget(p + at, c, MPI_BYTE, peer, from, c, MPI_BYTE, w->win, &rq)
                      : MPI_Get(p + at, c, MPI_BYTE, peer, from, c, MPI_BYTE, w->win);
    if (err == MPI_SUCCESS && w->rput) err = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return PTO_EMPI;
  }
  return w->rput || MPI_Win_flush(peer, w->win) == MPI_SUCCESS ? 0 : PTO_EMPI;
}

static int accumulate_u(comm_win *w, int peer, uint64_t off, pto_dtype dt, const void *src,
                        size_t count) {
  if (w->fq) return fault_hold(w->fq, peer, FAULT_ACC, dt, off, src, count * pto_dtype_size(dt));
  return rma_accumulate(w, peer, off, dt, src, count); /* no wake: as put_u's */
}

static int signal_u(comm_win *w, int peer, uint64_t off, pto_signal_op op, int32_t v,
                    uint32_t epoch, uint64_t *written) {
  *written = 0;
  if (w->fq) fault_flush(w->fq, peer, false);
  /* my own stores to my window (plain CPU stores) become visible to the
   * peers' MPI_Get before they see the signal */
  MPI_Win_sync(w->win);
  /* the founding rule: every earlier put/accumulate of this process to peer
   * is complete at the target before the signal can be seen there */
  if (flush_dirty(w, peer)) return PTO_EMPI;
  if (peer == w->my_rank && !w->shared) {
    /* to myself on an RMA window: a CPU compare-and-swap on my own memory
     * (Open MPI 4.1's osc/rdma crashes on MPI_Compare_and_swap to self
     * over the vader transport). Atomic with the peers' updates where the
     * transport's atomics are the target's CPU atomics (vader and tcp
     * emulate them at the target); see docs/comm.md, limits. */
    *written = sig_update((_Atomic uint64_t *)((unsigned char *)hdr(w, peer) + off), op, v, epoch);
    MPI_Win_sync(w->win);
    return 0;
  }
  /* sig_update (signal.h) as a compare-and-swap loop; the first guess is
   * a cell of this epoch holding 0, the CAS returns the real word */
  uint64_t old = sig_pack(epoch, 0), res, nw;
  for (;;) {
    nw = sig_next(old, op, v, epoch);
    if (!nw) break;           /* stale signal: dropped */
    if (nw == SIG_OVERFLOW) { /* nothing written: the notify fails, named (ops.c) */
      *written = nw;
      break;
    }
    if (MPI_Compare_and_swap(&nw, &old, &res, MPI_UINT64_T, peer, (MPI_Aint)off, w->win) !=
            MPI_SUCCESS ||
        MPI_Win_flush(peer, w->win) != MPI_SUCCESS)
      return PTO_EMPI;
    if (res == old) {
      *written = nw;
      break;
    }
    old = res;
  }
  wake(w, peer);
  return 0;
}

static uint64_t signal_load_u(comm_win *w, uint64_t off) {
  uint64_t v = 0;
  progress(w);
  /* atomic with respect to the peers' compare-and-swap (same type);
   * MPI_Win_sync then orders this process's later loads of the window
   * after it (the public and private copies are one: unified model) */
  if (MPI_Fetch_and_op(NULL, &v, MPI_UINT64_T, w->my_rank, (MPI_Aint)off, MPI_NO_OP, w->win) !=
          MPI_SUCCESS ||
      MPI_Win_flush_local(w->my_rank, w->win) != MPI_SUCCESS)
    return 0; /* reads as "not yet": the wait then times out, named */
  MPI_Win_sync(w->win);
  return v;
}

static bool mpi_signal_park(comm_win *w, bool (*cond)(void *), void *arg, uint64_t deadline_ns) {
  return wait_mine(w, cond, arg, deadline_ns);
}

/* The call table (coll.c) on shared windows, as shm.c's: every window is
 * mapped here and loads and stores of it are allowed (unified model); not
 * with fault injection or a controlled run, whose stores go through put. */
static unsigned char *mpi_direct(comm_win *w, int rank) {
  return w->shared && !w->fq && !w->d.controlled ? (unsigned char *)hdr(w, rank) : NULL;
}

/* Only a controlled run keeps state per task: the task for its gaps, and,
 * at its end, that my kernels read nothing more of it (before the batch
 * of the end of task lands: comm_task_end). */
static void mpi_task_mark(comm_win *w, uint32_t epoch, uint64_t group, bool end) {
  if (!w->d.controlled || w->my_rank < 0) return;
  w->epoch = epoch;
  w->group = group;
  if (!end) return;
  lock(w);
  word_update(w, w->my_rank, HDR_WORD(task_done), epoch, MPI_REPLACE);
  unlock(w);
  wake(w, w->my_rank);
}

/* As shm_quiet on the shared layout: the flush (a full fence there, or
 * MPI's, which makes one) completes my stores, then the waiters of the
 * peers re-check (a put wakes no one itself). */
static int quiet_u(comm_win *w, int peer, bool end_of_task) {
  if (w->my_rank < 0) return 0;
  if (w->fq) fault_flush(w->fq, peer, end_of_task);
  int rc = flush_dirty(w, peer);
  if (w->shared)
    for (int r = peer < 0 ? 0 : peer; r < (peer < 0 ? w->d.nranks : peer + 1); r++)
      pto_event_signal_fenced(&hdr(w, r)->ev);
  return rc;
}

typedef struct barrier_wait {
  comm_win *w;
  uint64_t want;
  comm_cancel_fn cancel;
  void *cancel_arg;
  int laggard;
  uint64_t seen; /* the laggard's arrival word */
  int err;
} barrier_wait;

/* Rank r arrived at (epoch, seq) or later: the same epoch and seq >= mine,
 * or a later epoch (a task started after mine: epochs do not wrap within
 * a run, comm/signal.h). As one number: epoch << 32 | seq. */
static bool arrived(uint64_t a, uint64_t want) { return a >= want; }

static bool barrier_done(void *arg) {
  barrier_wait *b = arg;
  comm_win *w = b->w;
  uint64_t a[PTO_COMM_MAX_RANKS];
  /* one atomic read of every arrival word of my header */
  lock(w);
  progress(w);
  b->err = MPI_Get_accumulate(NULL, 0, MPI_UINT64_T, a, w->d.nranks, MPI_UINT64_T, w->my_rank,
                              (MPI_Aint)offsetof(mpi_hdr, arrive), w->d.nranks, MPI_UINT64_T,
                              MPI_NO_OP, w->win);
  if (b->err == MPI_SUCCESS) b->err = MPI_Win_flush_local(w->my_rank, w->win);
  if (b->err == MPI_SUCCESS) MPI_Win_sync(w->win);
  unlock(w);
  if (b->err != MPI_SUCCESS) return true;
  for (int r = 0; r < w->d.nranks; r++) {
    if (!arrived(a[r], b->want)) {
      b->laggard = r;
      b->seen = a[r];
      return b->cancel && b->cancel(b->cancel_arg);
    }
  }
  b->laggard = -1;
  return true;
}

/* locks around its arrival, barrier_done around each look */
static int mpi_barrier(comm_win *w, uint32_t epoch, uint32_t seq, uint64_t deadline_ns,
                       comm_cancel_fn cancel, void *cancel_arg, char *why, size_t why_len) {
  lock(w);
  if (w->fq) fault_flush(w->fq, -1, false);
  uint64_t want = (uint64_t)epoch << 32 | seq;
  /* my earlier stores are complete everywhere before anyone sees me arrive
   * (plain stores to my own window: MPI_Win_sync) */
  MPI_Win_sync(w->win);
  int err = flush_dirty(w, -1) ? MPI_ERR_OTHER : MPI_SUCCESS;
  MPI_Aint at = (MPI_Aint)(offsetof(mpi_hdr, arrive) + sizeof(uint64_t) * (size_t)w->my_rank);
  for (int r = 0; r < w->d.nranks && err == MPI_SUCCESS; r++)
    err = MPI_Accumulate(&want, 1, MPI_UINT64_T, r, at, 1, MPI_UINT64_T, MPI_REPLACE, w->win);
  if (err == MPI_SUCCESS) err = MPI_Win_flush_all(w->win);
  unlock(w);
  if (err != MPI_SUCCESS) {
    mpi_why(why, why_len, "barrier arrival (MPI_Accumulate)", err);
    return PTO_EMPI;
  }
  for (int r = 0; r < w->d.nranks; r++)
    wake(w, r);
  barrier_wait b = {w, want, cancel, cancel_arg, -1, 0, MPI_SUCCESS};
  wait_mine(w, barrier_done, &b, deadline_ns);
  if (b.err != MPI_SUCCESS) {
    mpi_why(why, why_len, "barrier (MPI_Get_accumulate)", b.err);
    return PTO_EMPI;
  }
  if (b.laggard < 0) return 0;
  snprintf(why, why_len,
           "rank %d waited at barrier %u of task epoch %u; rank %d is at barrier %u of epoch %u",
           w->my_rank, seq, epoch, b.laggard, (unsigned)(uint32_t)b.seen,
           (unsigned)sig_epoch(b.seen));
  return PTO_EWAIT_TIMEOUT;
}

/* ---- the operations, under the window's lock (RMA layout) ---- */

static int mpi_put(comm_win *w, int peer, uint64_t off, const void *src, size_t n) {
  lock(w);
  int rc = put_u(w, peer, off, src, n);
  unlock(w);
  return rc;
}
static int mpi_get(comm_win *w, int peer, uint64_t off, void *dst, size_t n) {
  lock(w);
  int rc = get_u(w, peer, off, dst, n);
  unlock(w);
  return rc;
}
static int mpi_accumulate(comm_win *w, int peer, uint64_t off, pto_dtype dt, const void *src,
                          size_t count) {
  lock(w);
  int rc = accumulate_u(w, peer, off, dt, src, count);
  unlock(w);
  return rc;
}
static int mpi_signal(comm_win *w, int peer, uint64_t off, pto_signal_op op, int32_t v,
                      uint32_t epoch, uint64_t *written) {
  lock(w);
  int rc = signal_u(w, peer, off, op, v, epoch, written);
  unlock(w);
  return rc;
}
static uint64_t mpi_signal_load(comm_win *w, uint64_t off) {
  lock(w);
  uint64_t v = signal_load_u(w, off);
  unlock(w);
  return v;
}
static int mpi_quiet(comm_win *w, int peer, bool end_of_task) {
  /* the end of a task lands its batch first, without the window's lock:
   * a controlled run's gaps wait between the landings */
  if (w->fq && end_of_task && w->my_rank >= 0) fault_flush(w->fq, peer, true);
  lock(w);
  int rc = quiet_u(w, peer, end_of_task);
  unlock(w);
  return rc;
}

const comm_backend comm_backend_mpi = {
    .name = "mpi",
    .create = mpi_create,
    .attach = mpi_attach,
    .window_base = mpi_window_base,
    .destroy = mpi_destroy,
    .put = mpi_put,
    .get = mpi_get,
    .accumulate = mpi_accumulate,
    .signal = mpi_signal,
    .signal_load = mpi_signal_load,
    .signal_park = mpi_signal_park,
    .wake = wake,
    .task_mark = mpi_task_mark,
    .quiet = mpi_quiet,
    .barrier = mpi_barrier,
    .coll = mpi_coll,
    .exchange = mpi_exchange,
    .settle = mpi_settle,
    .settle_run = mpi_settle_run,
    .record_max = mpi_record_max,
    .direct = mpi_direct,
};
