/* wait.h — the one way pto waits: spin briefly, then yield, then park on
 * an event (futex) until a deadline. Every blocking wait in pto goes
 * through pto_wait() (but a lock around a few loads and stores:
 * common/spinlock.h), so a chip with many more threads than CPUs stays
 * correct and reasonably fast.
 *
 * An event is a generation counter: a waker changes the state it guards,
 * then calls pto_event_signal(), which (only if someone waits, and has
 * announced itself since the last wake) bumps the counter and wakes parked
 * waiters. A waiter reads the counter, announces itself, then re-checks
 * its condition before parking on that counter value, so a signal between
 * check and park is never lost. */
#ifndef PTO_WAIT_H
#define PTO_WAIT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pto_event {
  _Atomic uint32_t seq;     /* bumped by a signal that wakes */
  _Atomic uint32_t waiters; /* parked (or about to park) waiters */
  _Atomic uint32_t armed;   /* 1: a waiter announced itself since the last wake */
  uint32_t shared;          /* nonzero: lives in memory shared between processes */
  uint32_t asym;            /* nonzero: its waiters fence for its signallers (wait.c) */
} pto_event;

void pto_event_init(pto_event *ev, bool process_shared);
void pto_event_signal(pto_event *ev);
/* pto_event_signal for a caller that ran a seq_cst fence between its
 * state change and this call (one fence before waking several events). */
void pto_event_signal_fenced(pto_event *ev);

typedef bool (*pto_cond_fn)(void *arg);

/* Waits until cond(arg) is true (returns true) or the monotonic clock
 * passes deadline_ns (returns false; UINT64_MAX = no deadline). With ev ==
 * NULL the wait polls with a growing sleep (up to 1 ms) instead of parking. */
bool pto_wait(pto_event *ev, pto_cond_fn cond, void *arg, uint64_t deadline_ns);

/* Waits as pto_wait but never parks: spins while a CPU is free, else
 * yields, until cond(arg) (true) or the deadline (false). For a short
 * window in which a waker must not pay a futex wake (an idle core that
 * pulls work, core.c); the caller then waits as usual. */
bool pto_wait_unparked(pto_cond_fn cond, void *arg, uint64_t deadline_ns);

/* As pto_wait_unparked, counting this process's threads only, not the
 * processes registered as sharing its CPUs: for a caller that yields to
 * those itself between its spins (mpi_coll.c's poll of MPI requests, as
 * Open MPI's own waits do). */
bool pto_wait_unparked_own(pto_cond_fn cond, void *arg, uint64_t deadline_ns);

/* One spin of pto_wait_unparked_own, reading no clock: true once
 * cond(arg), false when the spin ended first or no CPU is free for it. For
 * a caller that reads the clock for its deadline only when a wait is not
 * over at once (mpi_coll.c's poll). */
bool pto_wait_spin_own(pto_cond_fn cond, void *arg);

/* For a thread with nothing to do until cond(arg) holds (a chip's thread
 * between runs): waits as pto_wait for up to the park maximum, then parks
 * with no timeout, so an idle thread costs no CPU. No deadline: only for
 * waits whose waker always signals ev (a lost wake-up would never end). */
void pto_wait_idle(pto_event *ev, pto_cond_fn cond, void *arg);

/* The processes of pto's sharing this one's CPUs that a window counts
 * (the ranks of a shared-memory domain on one host), registered with
 * wait.c while the window is open. */
typedef struct pto_wait_share {
  int procs, cpus; /* the processes, this one included, and the CPUs they cover */
  bool on;         /* registered: pto_wait_share_end takes it back */
  uint64_t id;     /* which registration (never reused; a forked child's are gone) */
} pto_wait_share;

/* Counts the processes among `theirs` (the CPU sets of n peer processes,
 * as each read pto_wait_cpu_set; NULL entries skipped) whose CPUs meet
 * this process's, itself included, and the CPUs they cover together,
 * into *sh, and registers them until pto_wait_share_end(sh): meanwhile
 * every wait of this process spins only while each of those processes
 * could have as many runnable threads as this one on a CPU of its own,
 * else yields and parks (wait.c). */
void pto_wait_share_begin(const cpu_set_t *const *theirs, int n, pto_wait_share *sh);
void pto_wait_share_end(pto_wait_share *sh);

/* Whether a spinner would steal no one's time slice: every runnable
 * thread of pto's, in this process and in those registered as sharing its
 * CPUs, has a CPU (a heuristic: relaxed counts). */
bool pto_wait_cpu_free(void);

/* CPUs a spinner may count on: the first asker's affinity (wait.c), and
 * that set itself (read once, never changed). */
int pto_wait_cpus(void);
const cpu_set_t *pto_wait_cpu_set(void);

/* pto's registered threads in this process that are runnable now (not
 * parked): the count pto_wait's spin looks at (a relaxed read). */
int pto_wait_runnable(void);

/* Makes the process's futex wake-ups cost O(1) with `threads` of pto's
 * threads parked: grows a per-process futex hash (Linux 6.16+) to a
 * bucket per thread, never shrinking it; a hint, without effect on older
 * kernels or a process on the global hash. */
void pto_wait_reserve(int threads);

/* Registers the calling thread as one of pto's own (a core, a scheduler,
 * the orchestrator during a run) until the matching end: pto_wait spins
 * only while no more registered threads are runnable than there are CPUs. */
void pto_wait_thread_begin(void);
void pto_wait_thread_end(void);

static inline void pto_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
