/* core.c — a simulated core: waits for its dispatch register to move,
 * runs the kernel block in the payload, publishes "finished" for that
 * dispatch id. Gang blocks (sync_start) wait for their cohort's start. Its
 * thread serves run after run of the chip (core_main). */
#include "chip/handoff.h"
#include "chip/head_take.h"
#include "chip/kernel_why.h"
#include "chip/pull_hold.h"
#include "chip/run.h"
#include "chip/steal.h"
#include "chip/trace_hooks.h"
#include "common/clock.h"
#include "common/options.h"

/* A node chip's kernel also sees the node's cancel of its node task (its
 * group failed, the node run was cancelled, or the node failed and stopped
 * the chip: one word, node_hooks.h): the first call that does
 * fails the run, which then stops as on any failure. It costs one relaxed
 * load more (the word), its pointer and generation on the stop flag's
 * line; nothing is written until it turns true. */
bool pto_kctx_cancelled(const pto_kctx *ctx) {
  if (!ctx || !ctx->run) return false;
  pto_run *r = (pto_run *)ctx->run;
  if (run_stopping(r)) return true;
  if (!run_node_cancelled(r)) return false;
  run_fail_node_cancel(r, ctx->task_id, ctx->core_id);
  return true;
}

void run_fail_node_cancel(pto_run *r, pto_task_id task, int core) {
  const pto_chip *chip = r->chip;
  char why[200] = "the node cancelled the node task this chip runs";
  if (chip->node_cancel_why) chip->node_cancel_why(chip->node_cancel_arg, why, sizeof why);
  run_fail(r, PTO_ESHUTDOWN, task, core, "%s (seen by pto_kctx_cancelled: the chip's run stops)",
           why);
}

pto_trace *core_trace(const pto_kctx *ctx, int *track) {
  const pto_run *r = ctx ? ctx->run : NULL;
  if (!r || !r->trace) return NULL;
  *track = r->cores[ctx->core_id].trace_track;
  return r->trace;
}

typedef struct core_wait {
  core *c;
  uint64_t next;
  uint32_t seen;      /* pulling: the scheduler's requests served so far */
  uint64_t period;    /* pulling: looks for work once per period ns; 0: always (pull_hold.h) */
  uint64_t next_look; /* pulling, with a period: the time of the next look */
  bool holding;       /* pulling, with a period: counted in the gather's holders */
} core_wait;

static bool core_has_work(void *p) {
  core_wait *w = p;
  /* acquire pairs with the scheduler's release of `dispatched`: payload */
  return atomic_load_explicit(&w->c->dispatched, memory_order_acquire) >= w->next ||
         run_stopping(w->c->run);
}

static role *core_role(core *c) { return &c->run->scheds[c->sched].role; }

/* The orchestrator waits for completions it needs to go on (a task, room
 * in a ring; not the run's end): nothing piles up behind a hold then
 * (pull_hold.h). Relaxed: a hint. Lines that only the begin and end of
 * such a wait, and the orchestration's end, write, so a holding core
 * polls them without taking anyone's line. */
static bool orch_waits(const pto_run *r) {
  return pull_orch_needs(atomic_load_explicit(&r->orch_wake_at, memory_order_relaxed),
                         atomic_load_explicit(&r->orch_done, memory_order_relaxed));
}

/* Does a block placed on this core end its hold? Yes when nothing else
 * is queued: then no busy core would take the work from the queue in the
 * meantime, so the block is the work that waits (in a stencil of short
 * blocks, the one its neighbours need next: each such block waited out a
 * hold, and stencil_1d of 0.2 us blocks on 2 workers took 1.5x the time).
 * With others queued the hold goes on: the busy cores take them, keeping
 * their lines (W4's replay: a producer's 64 consumers, whose placed block,
 * started at once, made the whole burst 1.12x slower). The queue's words,
 * which the busy cores write, are read only while a block waits here. */
static bool placed_ends_hold(core_wait *w) {
  return core_has_work(w) && !sched_ready_queued(w->c->run);
}

static bool core_pull_cond(void *p) {
  core_wait *w = p;
  if (w->period) {
    if (orch_waits(w->c->run)) {
      w->period = 0; /* from now on, continuously */
    } else {
      uint64_t now = pto_now_ns();
      if (now < w->next_look) return run_stopping(w->c->run) || placed_ends_hold(w);
      w->next_look = now + w->period;
      /* a look: what the orchestrator gathered is taken in the loop */
      if (gather_waiting(&w->c->run->gather)) return true;
    }
  }
  /* a hold that ended (the orchestrator waits) ends in the loop too */
  return core_has_work(w) || role_more(core_role(w->c), w->seen) || (w->holding && !w->period);
}

/* The hold begins: while it lasts, this core takes what the orchestrator
 * gathers at each look (gather.h). */
static void hold_begin(core_wait *w) {
  w->holding = true;
  gather_hold_begin(&w->c->run->gather);
}

/* The hold ends, then the take that re-checks (gather.h). */
static void core_hold_end(core_wait *w) {
  if (!w->holding) return;
  w->holding = false;
  gather_hold_end(&w->c->run->gather);
  sched_gather_take(w->c->run);
}

/* After a wait of the hold: a look takes what was gathered; a hold that
 * ended (the period gone: the orchestrator waits, or a block came) ends
 * with its take. */
static void hold_look(core_wait *w) {
  if (!w->holding) return;
  if (w->period)
    sched_gather_take(w->c->run);
  else
    core_hold_end(w);
}

/* A hold ends early when the run stops, the orchestrator begins to wait
 * (orch_wake_at is a line nobody writes meanwhile), or a block placed here
 * is the work that waits (placed_ends_hold). */
static bool hold_over(void *p) {
  core_wait *w = p;
  const pto_run *r = w->c->run;
  return run_stopping(r) || orch_waits(r) || placed_ends_hold(w);
}

/* Serves the requests left to this core as its scheduler's puller. */
static void pull_serve(core_wait *w) {
  w->seen = role_snapshot(core_role(w->c));
  sched_pull(&w->c->run->scheds[w->c->sched]);
}

/* Waits for the next dispatch. In role mode an idle core first stands in
 * as its scheduler's puller for a while (role.h): the orchestrator then
 * leaves the passes for the blocks it makes ready to this core, which
 * places them, most often on itself; when its blocks are short it looks
 * for them only once per pull_hold_ns (pull_hold.h). Then it waits as any
 * core does. */
static void core_wait_work(core_wait *w) {
  core *c = w->c;
  pto_run *r = c->run;
  role *ro = core_role(c);
  if (!r->sched_threads) {
    w->seen = role_snapshot(ro); /* before pull_begin: role.h */
    if (role_pull_begin(ro, c->id)) {
      uint64_t avg = atomic_load_explicit(&c->block_ns, memory_order_relaxed);
      w->period =
          orch_waits(r) ? 0 : pull_period(avg, (uint64_t)pto_option_cached(PTO_OPT_PULL_HOLD_NS));
      if (w->period) { /* the first look, too, after a period (pull_hold.h) */
        c->holds++;
        if (r->gather_on) hold_begin(w);
        w->next_look = pto_now_ns() + w->period;
        if (pto_wait_unparked(hold_over, w, w->next_look)) w->period = 0;
        hold_look(w);
      } else {
        sched_gather_idle(r);
      }
      if (sched_ready_queued(r)) pull_serve(w);
      /* the window: spin_ns, spinning while a CPU is free, else yielding,
       * but never parked (a requester then pays no futex wake); then the
       * plain wait below */
      uint64_t until = pto_now_ns() + (uint64_t)pto_option_cached(PTO_OPT_SPIN_NS);
      while (!core_has_work(w) && pto_wait_unparked(core_pull_cond, w, until)) {
        hold_look(w);
        if (role_more(ro, w->seen)) pull_serve(w);
      }
      core_hold_end(w);
      role_pull_end(ro);
      if (role_more(ro, w->seen)) pull_serve(w); /* the re-check */
    } else {
      sched_gather_idle(r); /* another core pulls: it may not hold */
    }
  }
  /* before it parks: a block placed on another core that has not
   * started it is taken here (sched_lone_ask) */
  if (!core_has_work(w)) sched_lone_ask(c, false);
  while (!core_has_work(w))
    pto_wait(&c->ev, core_has_work, w, UINT64_MAX);
}

static bool cohort_started(void *p) {
  core_wait *w = p;
  task *t = payload_task(&w->c->slot[w->next & 1]);
  /* acquire pairs with gang_launch's release */
  return atomic_load_explicit(&t->cohort_go, memory_order_acquire) != 0 || run_stopping(w->c->run);
}

static void note_cohort_start(task *t, uint64_t now) {
  uint64_t v = atomic_load_explicit(&t->first_start_ns, memory_order_relaxed);
  while (now < v && !atomic_compare_exchange_weak_explicit(
                        &t->first_start_ns, &v, now, memory_order_relaxed, memory_order_relaxed)) {
  }
  v = atomic_load_explicit(&t->last_start_ns, memory_order_relaxed);
  while (now > v && !atomic_compare_exchange_weak_explicit(
                        &t->last_start_ns, &v, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* Runs block `block` (sub-block `sub`) of task t on core c with the
 * tensors `tensors` (t's, or this core's own copies of its REDUX
 * arguments): the kernel, its trace slice, its failure latched. Inlined
 * into the core's loop (run_block): a call, its frame and its registers'
 * saves were about 20 of a kept chain task's 345 instructions on the
 * cores (bench/core_instructions.sh). */
static inline __attribute__((always_inline)) void run_block_with(core *c, task *t, int32_t block,
                                                                 int32_t sub, pto_tensor *tensors) {
  pto_run *r = c->run;
  c->running = t; /* pto_kctx_async_begin's task */
  const kernel_rec *k = &r->chip->kernels[t->kernel];
  /* copies: once a block goes async, t may complete and be recycled */
  const pto_task_id id = t->id;
  const int32_t block_num = t->block_num;
  const bool gang = t->sync_start;
  /* what the trace shows of it besides its name (docs/tracing.md), read
   * only for a trace */
  const char *mark = r->trace ? trace_block_mark(t) : NULL;
  const int prio = t->priority;
  pto_kctx ctx = {
      .block_idx = block,
      .block_num = t->block_num,
      .sub_block_id = sub,
      .core_id = c->id,
      .cluster_id = c->cluster,
      .core_type = c->type,
      .task_id = t->id,
      .ntensors = t->ntensors,
      .nscalars = t->nscalars,
      .tensors = tensors,
      .scalars = t->scalars,
      .env = r->cfg->env,
      .run = r,
  };
  /* the clock only where a figure needs it (trace, first block, gang
   * spread, one block in 16 or 256 for pull_hold.h): the watchdog needs
   * no start time (a block that runs through a stall started before it,
   * watchdog.c) */
  bool timed = (++c->nblocks &
                pull_timed_mask(atomic_load_explicit(&c->block_ns, memory_order_relaxed))) == 0;
  uint64_t t0 = r->trace || gang || timed || !c->first_ns ? pto_now_ns() : 0;
  if (!c->first_ns) c->first_ns = t0;
  if (gang) note_cohort_start(t, t0);
  atomic_store_explicit(&c->cur_task, id, memory_order_relaxed); /* watchdog, advisory */
  /* a MIX block spans cores: its first part (the AIC's) counts the block */
  const int part = block_part(k, c->type, sub);
  c->ran += part == 0;
  int rc = (c->type == PTO_CORE_AIC ? k->aic : k->aiv)(&ctx);
  atomic_store_explicit(&c->cur_task, PTO_TASK_NONE, memory_order_relaxed);
  /* taken when it succeeds too: a reason it gave stays with this block */
  const char *why = kernel_why_take(&ctx);
  if (timed) {
    uint64_t d = pto_now_ns() - t0;
    uint64_t avg = atomic_load_explicit(&c->block_ns, memory_order_relaxed);
    atomic_store_explicit(&c->block_ns, pull_block_avg(avg, d), memory_order_relaxed);
    c->timed++;
    c->timed_long += d >= UNSTARTED_MIN_BLOCK_NS;
  }
  if (r->trace)
    trace_block(r->trace, c->trace_track, k->name, id, block, part, mark, prio, t0, pto_now_ns());
  if (rc != 0) {
    run_fail(r, kernel_fail_code(rc), id, c->id,
             "kernel '%s' block %d/%d on core %d returned %d%s%s%s", k->name, block, block_num,
             c->id, rc, kernel_rc_note(rc, why), why[0] ? ": " : "", why);
  }
}

/* A block of a task with REDUX arguments (redux.h): of a task of several
 * cores, with this core's own copies of them; their copies start from
 * the op's identity, written here (the line is this core's from the first
 * write). Out of line: its copies' array is no frame of the core's loop. */
static __attribute__((noinline)) void run_block_redux(core *c, task *t, int32_t block,
                                                      int32_t sub) {
  pto_tensor own[PTO_MAX_TENSOR_ARGS];
  pto_tensor *tensors = t->tensors;
  if (t->units_total > 1) {
    const kernel_rec *k = &c->run->chip->kernels[t->kernel];
    redux_unit_tensors(t->tensors, t->ntensors, t->redux_args,
                       task_unit(t, block, block_part(k, c->type, sub)), own);
    tensors = own;
  }
  redux_unit_identity(c->run->chip, tensors, t->redux_args, t->redux_op);
  run_block_with(c, t, block, sub, tensors);
}

static inline __attribute__((always_inline)) void run_block(core *c, task *t, int32_t block,
                                                            int32_t sub) {
  if (t->redux_args)
    run_block_redux(c, t, block, sub);
  else
    run_block_with(c, t, block, sub, t->tensors);
}

/* A core that left its queue's heads to another (head_take.h,
 * head_yields) looks at the queues again after one hold, before it waits
 * as any idle core does: whether or not it becomes its scheduler's
 * puller (an idle AIC core may be), a block queued meanwhile, one that a
 * running kernel may wait for, starts here within a hold. */
static void core_look_after_yield(core_wait *w) {
  core *c = w->c;
  pto_run *r = c->run;
  c->left_heads = false; /* only its chain's own pass skipped it (sched.c) */
  if (core_has_work(w)) return;
  uint64_t hold = (uint64_t)pto_option_cached(PTO_OPT_PULL_HOLD_NS);
  if (hold) pto_wait_unparked(core_has_work, w, pto_now_ns() + hold);
  if (!core_has_work(w) && sched_ready_queued(r)) sched_pull(&r->scheds[c->sched]);
}

/* One run: blocks until the run stops (dispatch ids restart at 1 each run). */
static void core_serve(core *c) {
  pto_run *r = c->run;
  for (uint64_t next = 1;; next++) {
    core_wait w = {c, next, 0, 0, 0, false};
    if (c->left_heads) core_look_after_yield(&w);
    if (!core_has_work(&w)) core_wait_work(&w);
    if (run_stopping(r)) break;
    /* woken for this block: its place in the wake budget goes back, and
     * blocks left queued for want of it get a pass (wake_budget.h) */
    if (wb_awake(&r->wake, &c->woken)) sched_kick_others(r, NULL);
    if (!steal_claim(&c->claim, next)) {
      /* an idle core runs it instead (steal.h): published finished, its
       * slot deferred, so the poll counts it without completing it */
      steal_lost(&c->claim, next);
      c->slot[next & 1].deferred = true;
      atomic_store_explicit(&c->finished, next, memory_order_release);
      sched_kick(r, &r->scheds[c->sched]);
      continue;
    }
    const payload p = payload_get(&c->slot[next & 1]);
    task *t = p.t;
    if (t->sync_start) {
      while (!cohort_started(&w))
        pto_wait(&c->ev, cohort_started, &w, UINT64_MAX);
      if (run_stopping(r)) break;
    }
    run_block(c, t, p.block, p.sub_block);
    /* dependencies released where they finish (handoff.h): its task
     * completed here, and the one successor kept run next, here */
    handoff h = {.run = r, .c = c, .d = next, .keep = true};
    if (handoff_completes(r, c, t) && (handoff_worth(r, c, t) || head_take_worth(r, c)) &&
        handoff_core_may_keep(r, c, next))
      for (;;) {
        task *kept = sched_complete_here(&h, t); /* t may retire from here on */
        /* nothing kept: the queue's head, as a pass would give it (head_take.h) */
        if (!kept) kept = head_take(&h);
        /* drops held back (handoff.h, fan-in combining) are made before a
         * block that does not owe one to the same task, or at the end */
        if (h.held && !(kept && handoff_releases(r, kept, h.held))) {
          task *freed = sched_release_held(&h, !kept);
          if (!kept) kept = freed;
        }
        /* a stopping run starts no block */
        if (!kept || run_stopping(r)) break;
        c->handoffs++;
        run_block(c, kept, 0, 0);
        t = kept;
        if (c->defer_current) break; /* its token completes it */
        /* a kept block is completed here in any case (no pass could poll
         * it); whether it may keep one in turn is asked again */
        h.keep = handoff_core_may_keep(r, c, next);
      }
    /* the chain ended with drops held (its last block went asynchronous,
     * or the run stops): made before the core leaves it */
    if (h.held) sched_release_held(&h, false);
    c->slot[next & 1].deferred = h.completed || c->defer_current;
    c->defer_current = false;
    /* release: the kernel's writes happen-before the scheduler's acquire */
    atomic_store_explicit(&c->finished, next, memory_order_release);
    /* completes the block, releases its fan-out and, most often, places
     * the next block on this very core, which then runs it at once (after
     * a hand-off: only the poll of the block's end, and the placements of
     * what the completions here queued) */
    if (h.completed)
      sched_handoff_end(&h);
    else
      sched_kick(r, &r->scheds[c->sched]);
  }
}

/* Whether the run in progress has dispatched a block to the core yet. */
static bool core_dispatched(void *arg) {
  /* relaxed: core_has_work re-reads with acquire */
  return atomic_load_explicit(&((core *)arg)->dispatched, memory_order_relaxed) != 0;
}

/* The core's thread: made at the chip's first run, parked between runs
 * (run_enter), enters a run at its first dispatch, returns when the chip
 * is destroyed. */
void *core_main(void *arg) {
  core *c = arg;
  sched_bind_core(c);
  while (run_enter(c->run, &c->ev, &c->entered, &c->last_gen, core_dispatched, c)) {
    pto_wait_thread_begin();
    core_serve(c);
    pto_wait_thread_end();
    run_leave(c->run, &c->entered);
  }
  return NULL;
}
