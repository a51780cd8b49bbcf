/* wait.c — spin-then-yield-then-park waiting with a deadline. */
#include "common/wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cpu_bind.h"
#include "common/options.h"

/* A parked waiter re-checks its condition at least every park_max_ms, and
 * spins about spin_ns before yielding (src/common/options.c; the park
 * maximum is a build-time option too). The park maximum is a safety net
 * only, never the mechanism: every waker signals the event, so no wait may
 * depend on it (the park10s test build sets 10 s to prove that). */
#define YIELDS 4

/* The park maximum in ns, read from the options table once. */
static uint64_t park_max_ns(void) {
  static _Atomic uint64_t ns; /* racing first callers store the same value */
  uint64_t v = atomic_load_explicit(&ns, memory_order_relaxed);
  if (v == 0) {
    v = (uint64_t)pto_option(PTO_OPT_PARK_MAX_MS) * 1000000ull;
    atomic_store_explicit(&ns, v, memory_order_relaxed);
  }
  return v;
}

/* ---- the waiter makes the signaller's fence: membarrier(2) ----
 * A signal orders its caller's state change before its look at `waiters`,
 * and a waiter its announcement before its re-check of the condition
 * (Dekker, below). With a fence on each side, every signal waits for its
 * store buffer to drain: after a store to a line that another process
 * reads (a collective's call table slot), a cross-CPU round trip, about a
 * third of an 8-byte broadcast's time on 2 ranks of shared windows. A
 * waiter parks far less often than signals are made, and a park is a
 * syscall anyway; so on an event shared between processes (a window's),
 * where the kernel has membarrier's expedited global command, the waiter
 * makes the fence of every thread of every registered process
 * (MEMBARRIER_CMD_GLOBAL_EXPEDITED) and a signal orders its two accesses
 * for the compiler only: either its state change was made before that
 * barrier on its CPU, and the waiter's re-check sees it, or its load of
 * `waiters` comes after the barrier, and sees the announcement. Every
 * process of pto's that signals such an event registers first (asym_ready;
 * a fork inherits the registration). The process that initialises an
 * event decides for all (asym): a waiter in a process that cannot make the
 * call polls instead of parking. Events of one process (a chip's) keep
 * both fences. tests/unit/test_wait_model.c explores both rules. */
static long sys_membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

/* Whether this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
 * (registering it the first time). Racing first callers both register:
 * the call is idempotent. */
static bool asym_ready(void) {
  static _Atomic int state; /* 0: not asked yet, 1: registered, -1: cannot */
  int st = atomic_load_explicit(&state, memory_order_relaxed);
  if (st == 0) {
    long q = sys_membarrier(MEMBARRIER_CMD_QUERY);
    st = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                 sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0
             ? 1
             : -1;
    atomic_store_explicit(&state, st, memory_order_relaxed);
  }
  return st > 0;
}

void pto_event_init(pto_event *ev, bool process_shared) {
  atomic_init(&ev->seq, 0);
  atomic_init(&ev->waiters, 0);
  atomic_init(&ev->armed, 0);
  ev->shared = process_shared ? 1u : 0u;
  ev->asym = process_shared && pto_option(PTO_OPT_WAIT_MEMBARRIER) && asym_ready();
}

/* The waiter's fence: the signallers' too on an asym event. False when
 * that call failed: the caller must not park (no signal fenced for it).
 * noinline: gcc 12 -fsanitize=thread rejects (-Wtsan) the fence inlined
 * in announce. */
static __attribute__((noinline)) bool waiter_fence(const pto_event *ev) {
  if (ev->asym) return sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
  atomic_thread_fence(memory_order_seq_cst);
  return true;
}

static void futex_wake_all(pto_event *ev) {
  int op = ev->shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  syscall(SYS_futex, (uint32_t *)&ev->seq, op, 0x7fffffff, NULL, NULL, 0);
}

/* Parks on ev while its seq is still `seen`, for at most ns (UINT64_MAX:
 * no timeout). */
static void futex_park(pto_event *ev, uint32_t seen, uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  int op = ev->shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  syscall(SYS_futex, (uint32_t *)&ev->seq, op, seen, ns == UINT64_MAX ? NULL : &ts, NULL, 0);
}

/* The waiter's half of the event protocol: reads the seq to park on,
 * announces itself in `waiters`, then re-checks cond. True (and announced
 * no more) when cond holds; else the caller parks on *seen and then leaves
 * `waiters` (retreat). The fence pairs with the one in pto_event_signal
 * (Dekker): the loads in cond() are relaxed or acquire, and without it they
 * may be served before our increment is visible (StoreLoad reordering,
 * allowed by C11 and done by weakly ordered CPUs even after a seq_cst RMW):
 * the waker would read waiters == 0 and skip the wake while we read the old
 * state and park. tests/unit/test_wait_model.c explores it. */
static bool announce(pto_event *ev, pto_cond_fn cond, void *arg, uint32_t *seen, bool *fenced) {
  *seen = atomic_load_explicit(&ev->seq, memory_order_seq_cst);
  atomic_fetch_add_explicit(&ev->waiters, 1, memory_order_seq_cst);
  /* Before the fence, as `waiters`: a signal whose state change this
   * re-check misses finds armed set and wakes (test_wait_model.c finds
   * the lost wake-up when armed is set after the re-check). */
  atomic_store_explicit(&ev->armed, 1, memory_order_seq_cst);
  *fenced = waiter_fence(ev);
  if (!cond(arg)) return false;
  atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
  return true;
}
static void retreat(pto_event *ev) {
  atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
}

void pto_event_signal(pto_event *ev) {
  /* The fence orders the caller's state change before the load of
   * `waiters`; it pairs with the waiter's seq_cst increment of `waiters`
   * followed by its re-check of the condition (Dekker): either we see the
   * waiter and wake it, or it sees the new state and does not park. On an
   * asym event the waiter makes it for us (above), once this process is
   * registered. */
  if (ev->asym && asym_ready())
    atomic_signal_fence(memory_order_seq_cst);
  else
    atomic_thread_fence(memory_order_seq_cst);
  pto_event_signal_fenced(ev);
}

void pto_event_signal_fenced(pto_event *ev) {
  if (atomic_load_explicit(&ev->waiters, memory_order_relaxed) == 0) return;
  /* Only the first signal after an announcement wakes: a woken waiter
   * stays in `waiters` until it runs again (on a busy machine, for
   * milliseconds), and meanwhile every signal made a futex call of its
   * own. The waiter re-checks its condition after it announces itself
   * again, so the signals that find armed cleared lose nothing. */
  if (!atomic_exchange_explicit(&ev->armed, 0, memory_order_seq_cst)) return;
  /* A waiter parks on the seq value it read before announcing itself, so
   * the bump makes its futex wait return at once if it has not slept yet. */
  atomic_fetch_add_explicit(&ev->seq, 1, memory_order_seq_cst);
  futex_wake_all(ev);
}

/* Spin iterations before yielding: about spin_ns. */
static unsigned spin_budget(void) {
  /* Calibrated once: a pause costs from ~1 ns to ~40 ns depending on the
   * CPU, so the budget is set in time, not in iterations. */
  static _Atomic unsigned budget; /* racing first callers store similar values */
  unsigned b = atomic_load_explicit(&budget, memory_order_relaxed);
  if (b == 0) {
    uint64_t t0 = pto_now_ns();
    for (int i = 0; i < 1000; i++)
      pto_cpu_relax();
    uint64_t per = (pto_now_ns() - t0) / 1000;
    uint64_t spin_ns = (uint64_t)pto_option(PTO_OPT_SPIN_NS);
    b = (unsigned)(per ? spin_ns / per : spin_ns);
    if (b < 16) b = 16;
    atomic_store_explicit(&budget, b, memory_order_relaxed);
  }
  return b;
}

/* Runnable pto threads, process-wide: registered threads (cores,
 * schedulers, the orchestrator during a run) count while they are not
 * parked. Spinning only pays while a CPU is free for the thread that will
 * satisfy the condition; when every CPU is taken, a spinner would steal the
 * time slice of the very thread it waits for, so it yields and parks
 * instead. Relaxed throughout: a heuristic count, no data is published
 * through it. */
static _Atomic int runnable;
static _Thread_local bool registered;

/* The CPUs pto's threads may run on: the affinity of the first thread that
 * asks, not the machine's online count, which under taskset or a
 * container's cpuset promises CPUs that are not ours: pinned to one CPU, a
 * waiter then spun away its waker's time slice (a one-task run on 8
 * clusters took 52-58 us; 35-37 with the right count). The first to ask
 * is a thread pto never bound: the first registration (the orchestrator's,
 * at a run's start, on the user's thread) or a chip thread's first wait
 * (it inherited its creator's affinity); spread.c binds threads only
 * later. Read once: later changes of the process's affinity are not seen.
 * A CPU quota (cgroup cpu.max) is not an affinity and is not seen either. */
static cpu_set_t wait_set;
static int wait_ncpus; /* CPU_COUNT(&wait_set), at least 1 */
static pthread_once_t wait_set_once = PTHREAD_ONCE_INIT;

static void read_wait_set(void) {
  if (cpu_set_of_self(&wait_set) != 0) {
    CPU_ZERO(&wait_set);
    for (int c = 0, n = cpu_online(); c < n && c < CPU_SETSIZE; c++)
      CPU_SET(c, &wait_set);
  }
  int n = CPU_COUNT(&wait_set);
  wait_ncpus = n > 1 ? n : 1;
}

const cpu_set_t *pto_wait_cpu_set(void) {
  pthread_once(&wait_set_once, read_wait_set);
  return &wait_set;
}

int pto_wait_cpus(void) {
  pthread_once(&wait_set_once, read_wait_set);
  return wait_ncpus;
}

/* Linux 6.16 and later give a threaded process a futex hash of its own,
 * of 4 buckets per online CPU (at least 16), which never grows with the
 * threads: on 2 CPUs a chip of 12288 cores parked 768 waiters per bucket,
 * and each futex wake walked its bucket (44% of a 4096-cluster run's
 * samples in futex_wake). */
#ifndef PR_FUTEX_HASH
#define PR_FUTEX_HASH           78
#define PR_FUTEX_HASH_SET_SLOTS 1
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif
#define FUTEX_SLOTS_MAX (1 << 16)

void pto_wait_reserve(int threads) {
  int cur = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0);
  /* -1: no such hash (an older kernel); 0: the global hash, sized for
   * the machine, which the process keeps */
  if (cur <= 0) return;
  /* a resize costs 30-40 ms (the kernel waits for every futex user to
   * leave the old hash): only when buckets would average more than 4
   * waiters, so a small chip's first run pays nothing (8 clusters: 24 ms
   * for its create and first run with a resize, 6 without) */
  if (threads <= 4 * cur) return;
  int want = 16;
  while (want < threads && want < FUTEX_SLOTS_MAX)
    want *= 2;
  /* a hint: a size the kernel refuses is tried smaller, down to the
   * current one */
  for (; want > cur; want /= 2)
    if (prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, want, 0, 0) == 0) return;
}

void pto_wait_thread_begin(void) {
  (void)pto_wait_cpus(); /* read before anything of pto's is bound */
  registered = true;
  atomic_fetch_add_explicit(&runnable, 1, memory_order_relaxed);
}

void pto_wait_thread_end(void) {
  registered = false;
  atomic_fetch_sub_explicit(&runnable, 1, memory_order_relaxed);
}

int pto_wait_runnable(void) { return atomic_load_explicit(&runnable, memory_order_relaxed); }

/* Parking takes a registered thread off the CPU count until it wakes. */
static void park_begin(void) {
  if (registered) atomic_fetch_sub_explicit(&runnable, 1, memory_order_relaxed);
}
static void park_end(void) {
  if (registered) atomic_fetch_add_explicit(&runnable, 1, memory_order_relaxed);
}

/* ---- processes sharing this one's CPUs ----
 * The count of runnable threads sees this process only. The ranks of a
 * shared-memory domain on one host are processes like this one, and with
 * more of them than CPUs (4 ranks on 2 CPUs under mpirun --oversubscribe)
 * every waiter believed a CPU free and spun, taking the time slice of the
 * peer it waited for. So a window that finds ranks sharing its CPUs
 * (shm.c; mpi.c on shared windows) registers them while it is open, and
 * every wait of the process (a signal wait's learnt spin, a core's pull, a
 * gap wait; not pto_wait_unparked_own's) counts the most crowded
 * registration: `procs` processes, this one included, over
 * `cpus` CPUs, packed in one word (procs << 32 | cpus; 0: none). A forked
 * child starts with none: its windows register their own. */
#define SHARE_MAX 64
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int procs, cpus;
  uint64_t id;
} shares[SHARE_MAX];
static int nshares;
static uint64_t share_ids; /* under share_lock: the last registration's id */
static _Atomic uint64_t share_word;
static pthread_once_t share_once = PTHREAD_ONCE_INIT;

static void share_fork_prepare(void) { pthread_mutex_lock(&share_lock); }
static void share_fork_parent(void) { pthread_mutex_unlock(&share_lock); }
static void share_fork_child(void) {
  nshares = 0;
  atomic_store_explicit(&share_word, 0, memory_order_relaxed);
  pthread_mutex_unlock(&share_lock);
}
static void share_init(void) {
  pthread_atfork(share_fork_prepare, share_fork_parent, share_fork_child);
}

/* Under share_lock: the most crowded registration (procs per CPU). */
static void share_publish(void) {
  uint64_t w = 0;
  int bp = 0, bc = 1;
  for (int i = 0; i < nshares; i++)
    if ((long)shares[i].procs * bc > (long)bp * shares[i].cpus) {
      bp = shares[i].procs;
      bc = shares[i].cpus;
    }
  if (bp > 1) w = (uint64_t)bp << 32 | (uint32_t)bc;
  atomic_store_explicit(&share_word, w, memory_order_relaxed);
}

void pto_wait_share_begin(const cpu_set_t *const *theirs, int n, pto_wait_share *sh) {
  const cpu_set_t *mine = pto_wait_cpu_set();
  cpu_set_t all = *mine, both;
  sh->procs = 1;
  for (int r = 0; r < n; r++) {
    if (!theirs[r]) continue;
    CPU_AND(&both, theirs[r], mine);
    if (CPU_COUNT(&both) == 0) continue;
    sh->procs++;
    CPU_OR(&all, &all, theirs[r]);
  }
  sh->cpus = CPU_COUNT(&all);
  sh->on = false;
  if (sh->procs <= 1) return; /* no one shares: nothing to count */
  pthread_once(&share_once, share_init);
  pthread_mutex_lock(&share_lock);
  if (nshares < SHARE_MAX) { /* beyond: a window more of the same host, not counted */
    shares[nshares].procs = sh->procs;
    shares[nshares].cpus = sh->cpus;
    shares[nshares].id = sh->id = ++share_ids;
    nshares++;
    sh->on = true;
    share_publish();
  }
  pthread_mutex_unlock(&share_lock);
}

void pto_wait_share_end(pto_wait_share *sh) {
  if (!sh->on) return;
  sh->on = false;
  pthread_mutex_lock(&share_lock);
  for (int i = 0; i < nshares; i++)
    if (shares[i].id == sh->id) { /* its own: one inherited by a fork is gone */
      shares[i] = shares[--nshares];
      share_publish();
      break;
    }
  pthread_mutex_unlock(&share_lock);
}

/* True while every runnable pto thread has a CPU of its own, so that a
 * spinner steals nobody's time slice (the caller counts as runnable), in
 * this process and in each process registered as sharing its CPUs. */
/* `own`: this process's threads only, not the processes sharing its CPUs
 * (pto_wait_unparked_own). */
static bool cpu_free(bool own) {
  int r = atomic_load_explicit(&runnable, memory_order_relaxed);
  uint64_t w = own ? 0 : atomic_load_explicit(&share_word, memory_order_relaxed);
  long procs = w ? (long)(w >> 32) : 1;
  int cpus = w ? (int)(uint32_t)w : pto_wait_cpus();
  return (long)(r > 1 ? r : 1) * procs <= cpus;
}

bool pto_wait_cpu_free(void) { return cpu_free(false); }

/* Spins about spin_ns while cond is false and a CPU stays free for every
 * runnable pto thread; re-checks the count every few iterations, so that a
 * thread woken meanwhile gets the CPU instead of the spinner. */
static bool spin(pto_cond_fn cond, void *arg, bool own) {
  unsigned spins = spin_budget();
  for (unsigned i = 0; i < spins; i++) {
    if (cond(arg)) return true;
    if ((i & 63) == 63 && !cpu_free(own)) return false;
    pto_cpu_relax();
  }
  return false;
}

static bool unparked(pto_cond_fn cond, void *arg, uint64_t deadline_ns, bool own) {
  for (;;) {
    if (cond(arg)) return true;
    if (cpu_free(own) ? spin(cond, arg, own) : (sched_yield(), cond(arg))) return true;
    if (pto_now_ns() >= deadline_ns) return false;
  }
}

bool pto_wait_unparked(pto_cond_fn cond, void *arg, uint64_t deadline_ns) {
  return unparked(cond, arg, deadline_ns, false);
}

bool pto_wait_unparked_own(pto_cond_fn cond, void *arg, uint64_t deadline_ns) {
  return unparked(cond, arg, deadline_ns, true);
}

bool pto_wait_spin_own(pto_cond_fn cond, void *arg) {
  return cpu_free(true) && spin(cond, arg, true);
}

bool pto_wait(pto_event *ev, pto_cond_fn cond, void *arg, uint64_t deadline_ns) {
  if (cond(arg)) return true;
  if (cpu_free(false) && spin(cond, arg, false)) return true;
  /* Then yield: with more runnable pto threads than CPUs, a yield is the
   * cheapest hand-off to the thread that will satisfy the condition (one
   * context switch each way, no syscall for the waker). Measured against
   * parking at once (which makes every hand-off a futex wake-up and a
   * preemption of the waker): W2 1.3-1.9x slower, W4 1.1-1.3x, 2-4x the
   * context switches on 2 CPUs (bench/results/history.md). */
  for (int i = 0; i < YIELDS; i++) {
    if (cond(arg)) return true;
    sched_yield();
  }
  uint64_t sleep_ns = 1000;
  for (;;) {
    uint32_t seen = 0;
    bool fenced = true;
    if (ev ? announce(ev, cond, arg, &seen, &fenced) : cond(arg)) return true;
    uint64_t now = pto_now_ns();
    if (now >= deadline_ns) {
      if (ev) retreat(ev);
      return cond(arg);
    }
    uint64_t left = deadline_ns - now;
    park_begin();
    if (ev && fenced) {
      uint64_t park = park_max_ns();
      futex_park(ev, seen, left < park ? left : park);
      retreat(ev);
    } else {
      if (ev) retreat(ev);
      uint64_t ns = left < sleep_ns ? left : sleep_ns;
      struct timespec ts = {0, (long)ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < 1000000) sleep_ns *= 2;
    }
    park_end();
  }
}

void pto_wait_idle(pto_event *ev, pto_cond_fn cond, void *arg) {
  if (pto_wait(ev, cond, arg, pto_now_ns() + park_max_ns())) return;
  uint32_t seen;
  bool fenced;
  while (!announce(ev, cond, arg, &seen, &fenced)) { /* as pto_wait's park, no timeout */
    park_begin();
    futex_park(ev, seen, fenced ? UINT64_MAX : park_max_ns());
    retreat(ev);
    park_end();
  }
}
