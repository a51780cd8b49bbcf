/* spread.c — which CPUs a run's threads may use (pto_chip_config.
 * spread_cores): two placements, each while it pays (docs/chip.md "Where
 * the threads run"; measured in bench/results/history.md, "Core threads on
 * CPUs of their own" and "The orchestrator on a CPU of its own").
 *
 * The orchestrator alone, while it runs far ahead of the cores. Once more
 * than max(64, 4 x cores) tasks are live, the ready queues hold a block
 * per core (the cores have a backlog: the orchestrator's pace does not
 * gate them) and the cores' blocks are short (every core that timed some
 * this run, pull_hold.h, averages under a quarter of PTO_PULL_HOLD_NS:
 * with real kernels the cores need every CPU more than the orchestrator
 * needs one, as paged_attention showed), the orchestrator is bound to the
 * CPU it is on and the cores to the others, so that its submissions no
 * longer share a CPU with cores that wake, yield and park around them. It ends, at most once per
 * run, as soon as that CPU may idle: at the orchestrator's first wait (for ring room, a task, the
 * end of the run), or, should it stop submitting in its own code, at the watchdog's second tick
 * without a submit. Either thread ends it (a compare-and-swap picks one; the other waits the few
 * system calls it takes), so it is over when the orchestrator's wait begins.
 *
 * A CPU per core, once the orchestration function has returned. Left to
 * the OS, the core threads of a run often end up stacked on one CPU while
 * another idles: a core that hands a block to a parked one wakes it on its
 * own CPU, and neither then looks idle enough to be moved (on 2 CPUs,
 * about one run in seven of a fine-grained graph ran at half speed).
 * Binding every core for good costs as much the other way: the
 * orchestrator, a thread of the user's, then shares a CPU with a bound
 * core while a parked core's CPU idles. So the cores are bound only once
 * the orchestration function has returned (the orchestrator then waits,
 * parked, for the last tasks), and let go when the next run's
 * orchestration starts. Only the cores that took part in the run are
 * moved: a run costs two system calls per such core.
 *
 * Every bind is best effort: a thread that cannot be bound runs where it
 * may. The orchestrator's own CPUs are restored before its function
 * returns to pto; a thread it created while bound inherited the one CPU
 * and keeps it (documented in pto/chip.h, spread_cores: pto cannot know
 * those threads). */
#include "chip/pull_hold.h"
#include "chip/run.h"
#include "common/cpu_bind.h"
#include "common/options.h"
#include "common/wait.h"

/* Whether the CPUs in `mine` are left to pto's threads: the threads
 * runnable on the machine now that are not pto's (this process's
 * registered threads, wait.c) fit on the CPUs outside `mine`
 * (cpu_bind.h). Always with spread_cores = 2; never when the count
 * cannot be read. */
static bool cpus_ours(const pto_run *r, const cpu_set_t *mine) {
  if (r->cfg->spread_cores == 2) return true;
  int total = cpu_runnable_now();
  if (total < 0) return false;
  int others = total - pto_wait_runnable();
  return cpu_set_unshared(others > 0 ? others : 0, cpu_online(), CPU_COUNT(mine));
}

/* Whether core c took part in the run of generation gen (relaxed: a core
 * that enters later is left where it is). */
static bool took_part(const core *c, uint64_t gen) {
  return c->started && atomic_load_explicit(&c->entered, memory_order_relaxed) == gen;
}

void spread_begin(pto_run *r) {
  if (!r->cfg->spread_cores) return;
  uint64_t gen = run_phase_gen(atomic_load_explicit(&r->phase, memory_order_relaxed));
  int first = 0;
  while (first < r->ncores && !took_part(&r->cores[first], gen))
    first++;
  /* a run no core entered (an empty one) binds nothing: no system call */
  if (first == r->ncores || cpu_set_of_self(&r->spread_cpus) != 0 ||
      CPU_COUNT(&r->spread_cpus) < 2 || !cpus_ours(r, &r->spread_cpus))
    return;
  for (int i = first; i < r->ncores; i++)
    if (took_part(&r->cores[i], gen))
      r->cores[i].spread =
          cpu_bind_thread(r->cores[i].thread, &r->spread_cpus, r->chip->cpu_first + i) == 0;
}

void spread_end(pto_run *r) {
  for (int i = 0; i < r->ncores; i++) {
    core *c = &r->cores[i];
    if (!c->spread) continue;
    (void)cpu_allow_thread(c->thread, &r->spread_cpus); /* best effort, as the bind */
    c->spread = false;
  }
}

/* Whether every core that timed blocks this run (pull_hold.h) has short
 * ones, and one did (relaxed reads: a hint). */
static bool blocks_short(pto_run *r) {
  uint64_t hold = (uint64_t)pto_option_cached(PTO_OPT_PULL_HOLD_NS);
  bool timed = false;
  for (int i = 0; i < r->ncores; i++) {
    uint64_t avg = atomic_load_explicit(&r->cores[i].block_ns, memory_order_relaxed);
    if (!avg) continue;
    if (!pull_blocks_short(avg, hold)) return false;
    timed = true;
  }
  return timed;
}

static void orch_alone(pto_run *r) {
  r->alone_tried = true;
  int me = sched_getcpu();
  if (!r->cfg->spread_cores || cpu_set_of_self(&r->alone_cpus) != 0 ||
      CPU_COUNT(&r->alone_cpus) < 2 || me < 0 || !CPU_ISSET(me, &r->alone_cpus) ||
      !cpus_ours(r, &r->alone_cpus))
    return;
  cpu_set_t one, rest = r->alone_cpus;
  CPU_ZERO(&one);
  CPU_SET(me, &one);
  CPU_CLR(me, &rest);
  r->orch_thread = pthread_self();
  if (cpu_allow_thread(r->orch_thread, &one) != 0) return;
  for (int i = 0; i < r->ncores; i++)
    if (r->cores[i].started) (void)cpu_allow_thread(r->cores[i].thread, &rest);
  /* release: the CPU set and the thread are written before an ender reads them */
  atomic_store_explicit(&r->alone, ALONE_YES, memory_order_release);
}

void spread_orch_ahead(pto_run *r) {
  /* live tasks (counted to the last retirement, at most RETIRE_EVERY (orch.c)
   * behind), a queued block per core, short blocks */
  int64_t ahead_at = r->ncores * 4 > 64 ? r->ncores * 4 : 64;
  if (r->next_id - r->retired > ahead_at && sched_queued_blocks(r) >= (uint64_t)r->ncores &&
      blocks_short(r))
    orch_alone(r);
}

void spread_orch_share(pto_run *r) {
  int32_t s = ALONE_YES;
  if (atomic_load_explicit(&r->alone, memory_order_relaxed) == ALONE_NO) return;
  /* acq_rel: the winner reads what the orchestrator wrote before its
   * release store, and its system calls happen-before its release below */
  if (atomic_compare_exchange_strong_explicit(&r->alone, &s, ALONE_ENDING, memory_order_acq_rel,
                                              memory_order_acquire)) {
    for (int i = 0; i < r->ncores; i++)
      if (r->cores[i].started) (void)cpu_allow_thread(r->cores[i].thread, &r->alone_cpus);
    (void)cpu_allow_thread(r->orch_thread, &r->alone_cpus);
    atomic_store_explicit(&r->alone, ALONE_NO, memory_order_release);
    return;
  }
  /* the other thread is ending it: a few system calls, never a wait on
   * anything else */
  while (atomic_load_explicit(&r->alone, memory_order_acquire) == ALONE_ENDING)
    sched_yield();
}
