/* wait.h — the one way pto waits: spin briefly, then yield, then park on
 * an event (futex) until a deadline. Every blocking wait in pto goes
 * through pto_wait(), so a chip with many more threads than CPUs stays
 * correct and reasonably fast.
 *
 * An event is a generation counter: a waker changes the state it guards,
 * then calls pto_event_signal(), which (only if someone waits) bumps the
 * counter and wakes parked waiters. A waiter reads the counter, announces
 * itself, then re-checks its condition before parking on that counter
 * value, so a signal between check and park is never lost. */
#ifndef PTO_WAIT_H
#define PTO_WAIT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pto_event {
  _Atomic uint32_t seq;     /* bumped by every signal */
  _Atomic uint32_t waiters; /* parked (or about to park) waiters */
  uint32_t shared;          /* nonzero: lives in memory shared between processes */
} pto_event;

void pto_event_init(pto_event *ev, bool process_shared);
void pto_event_signal(pto_event *ev);

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

/* For a thread with nothing to do until cond(arg) holds (a chip's thread
 * between runs): waits as pto_wait for up to the park maximum, then parks
 * with no timeout, so an idle thread costs no CPU. No deadline: only for
 * waits whose waker always signals ev (a lost wake-up would never end). */
void pto_wait_idle(pto_event *ev, pto_cond_fn cond, void *arg);

/* Waits as pto_wait, for a waiter whose process shares its CPUs with other
 * processes of pto's that pto's count of runnable threads does not see
 * (the ranks of a shared-memory domain on one host): `procs` processes
 * like this one, itself included, over `cpus` CPUs. It spins only while
 * each of them could have as many runnable threads as this process on a
 * CPU of its own; else it yields, then parks (4 ranks on 2 CPUs: a spinning
 * rank took the time slice of the peer it waited for). */
bool pto_wait_shared(pto_event *ev, pto_cond_fn cond, void *arg, uint64_t deadline_ns, int procs,
                     int cpus);

/* CPUs a spinner may count on: the first asker's affinity (wait.c), and
 * that set itself (read once, never changed). */
int pto_wait_cpus(void);
const cpu_set_t *pto_wait_cpu_set(void);

/* For pto_wait_shared: the processes among `theirs` (the CPU sets of n
 * peer processes, as each read pto_wait_cpu_set; NULL entries skipped)
 * whose CPUs meet this process's, itself included (*procs), and the CPUs
 * they cover together (*cpus). */
void pto_wait_sharers(const cpu_set_t *const *theirs, int n, int *procs, int *cpus);

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
