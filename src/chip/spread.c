/* spread.c — a CPU per core thread while the orchestrator waits for a
 * run's last tasks (pto_chip_config.spread_cores; docs/chip.md "Where the
 * threads run", measured in docs/benchmarks.md "Core threads on CPUs of
 * their own").
 *
 * Left to the OS, the core threads of a run often end up stacked on one
 * CPU while another idles: a core that hands a block to a parked one wakes
 * it on its own CPU, and neither then looks idle enough to be moved (on 2
 * CPUs, about one run in seven of a fine-grained graph ran at half speed).
 * Binding every core for good costs as much the other way: the
 * orchestrator, a thread of the user's, then shares a CPU with a bound
 * core while a parked core's CPU idles. So the cores are bound only once
 * the orchestration function has returned (the orchestrator then waits,
 * parked, for the last tasks), and let go when the next run's
 * orchestration starts. Only the cores that took part in the run are
 * moved: a run costs two system calls per such core. Every bind is best
 * effort: a core that cannot be bound runs where it may. The
 * orchestrator's thread owns this state. */
#include "chip/run.h"
#include "common/cpu_bind.h"

void spread_begin(pto_run *r) {
  if (!r->cfg->spread_cores || cpu_set_of_self(&r->spread_cpus) != 0 ||
      CPU_COUNT(&r->spread_cpus) < 2)
    return;
  uint64_t gen = run_phase_gen(atomic_load_explicit(&r->phase, memory_order_relaxed));
  for (int i = 0; i < r->ncores; i++) {
    core *c = &r->cores[i];
    /* relaxed: a core that enters later is left where it is */
    if (!c->started || atomic_load_explicit(&c->entered, memory_order_relaxed) != gen) continue;
    c->spread = cpu_bind_thread(c->thread, &r->spread_cpus, r->chip->cpu_first + i) == 0;
  }
}

void spread_end(pto_run *r) {
  for (int i = 0; i < r->ncores; i++) {
    core *c = &r->cores[i];
    if (!c->spread) continue;
    (void)cpu_allow_thread(c->thread, &r->spread_cpus); /* best effort, as the bind */
    c->spread = false;
  }
}
