/* orch.c — the orchestrator side of a run: argument builder, submit
 * (validation, ring allocation with back-pressure, dependency inference,
 * fanout linking, publication), scopes, in-order retirement, and host
 * access to tensor data. Everything here runs on the orchestrator thread. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/contract.h"
#include "chip/ready_batch.h"
#include "chip/run.h"
#include "chip/schedule.h"
#include "common/clock.h"
#include "common/last_error.h"
#include "common/options.h"
#include "common/tensor_check.h"

/* ---- argument builder ---- */

/* Which rule of the builder an argument broke (pto_args.error_rule):
 * recorded where it happened, named by submit (validate). */
enum {
  ARGS_NULL_TENSOR = 1,
  ARGS_BAD_MODE,
  ARGS_AFTER_SCALAR,
  ARGS_TOO_MANY_TENSORS,
  ARGS_TOO_MANY_SCALARS,
};

void pto_args_init(pto_args *a) {
  if (!a) return;
  a->ntensors = a->nscalars = 0;
  a->error = 0;
  a->error_arg = -1;
  a->error_rule = 0;
}

static void args_error(pto_args *a, int arg, int rule) {
  if (a->error == 0) {
    a->error = PTO_EINVAL;
    a->error_arg = arg;
    a->error_rule = rule;
  }
}

void pto_args_add(pto_args *a, pto_access mode, const pto_tensor *t) {
  if (!a) return;
  int i = a->ntensors;
  if (!t || a->nscalars > 0 || i >= PTO_MAX_TENSOR_ARGS || (unsigned)mode > PTO_REDUX) {
    args_error(a, i,
               !t                           ? ARGS_NULL_TENSOR
               : (unsigned)mode > PTO_REDUX ? ARGS_BAD_MODE
               : a->nscalars > 0            ? ARGS_AFTER_SCALAR
                                            : ARGS_TOO_MANY_TENSORS);
    if (i < PTO_MAX_TENSOR_ARGS)
      a->ntensors++; /* keep counting to name the culprit */
    else
      a->ntensors = PTO_MAX_TENSOR_ARGS + 1;
    return;
  }
  a->access[i] = (uint8_t)mode;
  a->tensors[i] = *t;
  a->outputs[i] = mode == PTO_OUTPUT ? (pto_tensor *)t : NULL;
  a->redux_op[i] = PTO_REDUX_SUM; /* pto_args_redux sets its own */
  a->ntensors++;
}

void pto_args_input(pto_args *a, const pto_tensor *t) { pto_args_add(a, PTO_INPUT, t); }
void pto_args_output(pto_args *a, pto_tensor *t) { pto_args_add(a, PTO_OUTPUT, t); }
void pto_args_output_existing(pto_args *a, const pto_tensor *t) {
  pto_args_add(a, PTO_OUTPUT_EXISTING, t);
}
void pto_args_inout(pto_args *a, const pto_tensor *t) { pto_args_add(a, PTO_INOUT, t); }
void pto_args_nodep(pto_args *a, const pto_tensor *t) { pto_args_add(a, PTO_NO_DEP, t); }
void pto_args_commute(pto_args *a, const pto_tensor *t) { pto_args_add(a, PTO_COMMUTE, t); }
/* The op is checked at submit (redux_prepare), where the chip's ops are known. */
void pto_args_redux(pto_args *a, const pto_tensor *t, int op) {
  int i = a ? a->ntensors : 0;
  pto_args_add(a, PTO_REDUX, t);
  if (a && a->ntensors == i + 1 && a->error_arg != i) a->redux_op[i] = op;
}

void pto_args_scalar(pto_args *a, uint64_t v) {
  if (!a) return;
  if (a->nscalars >= PTO_MAX_SCALAR_ARGS) {
    args_error(a, a->ntensors + a->nscalars, ARGS_TOO_MANY_SCALARS);
    a->nscalars = PTO_MAX_SCALAR_ARGS + 1;
    return;
  }
  a->scalars[a->nscalars++] = v;
}

void pto_args_scalar_f32(pto_args *a, float v) {
  union {
    float f;
    uint32_t u;
  } c = {.f = v};
  pto_args_scalar(a, c.u);
}

/* ---- setup / retirement ---- */

/* Argument storage of the largest task: every tensor and scalar slot used,
 * and the normalised views of its COMMUTE arguments (commute.h). */
#define ARGS_MAX_BYTES                                                                             \
  (sizeof(pto_tensor) * PTO_MAX_TENSOR_ARGS + sizeof(uint64_t) * PTO_MAX_SCALAR_ARGS +             \
   sizeof(region_view) * PTO_MAX_COMMUTE_ARGS)

/* Every 64 submits while no task retired since the last 64 (the caller
 * compares orch_retire's count), on a chip of UNSTARTED_LOOK_MAX cores
 * at most: a core whose only block in flight it had not started at the
 * last look either has its scheduler's next pass move that block to an
 * idle core, parked ones too (sched_lone_ask, sched.c take_lone). The OS
 * may wake a parked core on the orchestrator's CPU and leave it queued
 * there behind the orchestrator's submits while the other CPUs idle, and
 * with every other core parked, none falls idle to look for it before
 * parking: a tree of 0.5 us blocks (bench_pto tree) ran its
 * first block only after its 0.6 ms orchestration, every other task
 * depending on it. Only where most blocks timed in the run before took
 * UNSTARTED_MIN_BLOCK_NS or more (run_reset): a chain of empty blocks
 * waits the same way at its start, and moved, runs beside the
 * orchestrator with the two CPUs in lockstep on every dependency, 15-25%
 * slower a task than after the wait (bench/results/lone_take/). The look
 * reads three words of each core (a hint: the take decides). */
static __attribute__((noinline, cold)) void orch_unstarted_look(pto_run *r) {
  if (r->ncores > UNSTARTED_LOOK_MAX || !r->prev_blocks_long) return;
  for (int i = 0; i < r->ncores; i++) {
    core *c = &r->cores[i];
    uint64_t t = sched_core_unstarted(c);
    if (t && t == r->unstarted[i]) {
      sched_lone_ask(c, true);
      r->unstarted_asks++;
      t = 0; /* asked: again two looks on, if it still waits */
    }
    r->unstarted[i] = t;
  }
}

/* what redux.c asks of the orchestrator (redux_orch) */
static int submit(pto_run *r, int kernel_id, pto_args *a, const pto_submit_opts *opts,
                  pto_task_id *id_out);
static int redux_heap_take(pto_run *r, uint64_t bytes, const pto_args *a, bool wait, void **ptr);
static bool outputs_bytes(const pto_args *a, const pto_tensor *ts, uint64_t *total);
static void redux_heap_free_after(pto_run *r, void *ptr, pto_task_id id);

int orch_setup(pto_run *r, char *why, size_t n) {
  const pto_chip_config *c = r->cfg;
  int rc = ring_init(&r->heap, c->heap_bytes);
  if (rc) snprintf(why, n, "the heap ring (heap_bytes = %zu)", c->heap_bytes);
  if (!rc) heap_live_init(&r->live, &r->heap);
  /* 512 bytes per slot, and never less than one task with the most
   * arguments a task can have: every valid task fits once the ring drains */
  uint64_t args = (uint64_t)r->nslots * 512u;
  if (args < ARGS_MAX_BYTES) args = ARGS_MAX_BYTES;
  if (!rc && (rc = ring_init(&r->args, args)))
    snprintf(why, n, "the argument ring (%llu bytes: 512 per slot, task_slots = %u)",
             (unsigned long long)args, c->task_slots);
  if (!rc) ring_populate(&r->args);
  if (!rc && (rc = tmap_init(&r->tm, c->tensormap_entries)))
    snprintf(why, n, "the TensorMap (tensormap_entries = %u)", c->tensormap_entries);
  if (!rc && (rc = cm_init(&r->cm, r->slot_mask + 1)))
    snprintf(why, n, "the COMMUTE table (task_slots = %u)", c->task_slots);
  if (!rc &&
      (rc = redux_init(&r->rx, &(redux_orch){submit, redux_heap_take, redux_heap_free_after})))
    snprintf(why, n, "the REDUX groups");
  r->held_release = INT64_MAX;
  r->depbuf_cap = 64;
  r->depbuf = malloc(sizeof(pto_task_id) * r->depbuf_cap);
  if (!rc && !r->depbuf) {
    rc = PTO_ENOMEM;
    snprintf(why, n, "the orchestrator's dependency buffer");
  }
  r->orch_batch = calloc(1, sizeof(ready_batch));
  if (!rc && !r->orch_batch) {
    rc = PTO_ENOMEM;
    snprintf(why, n, "the orchestrator's submit batch");
  }
  return rc;
}

void orch_reset(pto_run *r) {
  r->next_id = r->retired = 0;
  r->alone_tried = false;
  /* dispatch ids restart at 1 with every run: a block remembered from
   * the last run's would match the new run's first look */
  memset(r->unstarted, 0, sizeof r->unstarted);
  r->unstarted_retired = 0;
  r->unstarted_asks = 0;
  r->dep_head = r->dep_tail = 0;
  r->args.head = r->args.tail = 0;
  heap_live_init(&r->live, &r->heap); /* after every offset of earlier runs */
  tmap_clear(&r->tm);
  cm_reset(&r->cm);
  redux_reset(&r->rx);
  r->scope_depth = 0;
  /* a failed run's orchestration may have left its batch open: its tasks
   * were of that run */
  r->batch_depth = 0;
  r->orch_batch->n = 0;
  gather_init(&r->gather);
  r->gather_on = pto_option_cached(PTO_OPT_ORCH_GATHER) && !r->sched_threads;
  r->gathered = 0;
  r->nheld = 0;
  r->held_release = INT64_MAX;
  r->depbuf_n = 0;
}

void orch_end(pto_run *r) { heap_live_destroy(&r->live, &r->heap); }

void orch_teardown(pto_run *r) {
  heap_live_destroy(&r->live, &r->heap);
  ring_destroy(&r->heap);
  ring_destroy(&r->args);
  tmap_destroy(&r->tm);
  cm_destroy(&r->cm);
  redux_destroy(&r->rx);
  free(r->depbuf);
  r->depbuf = NULL;
  free(r->orch_batch);
  r->orch_batch = NULL;
  free(r->held);
  free(r->held_task);
  free(r->held_depth);
  free(r->held_until);
  r->held = NULL;
  r->held_task = NULL;
  r->held_depth = NULL;
  r->held_until = NULL;
}

/* Holds [begin, r->heap.head), the OUTPUT buffers of task id, until the
 * current scope ends (hold_end). Open ranges are a stack: a scope's ranges
 * are the newest open ones when it ends. Consecutive ranges of one scope
 * merge, so a scope of many OUTPUT tasks keeps few ranges. */
static int hold_add(pto_run *r, pto_task_id id, uint64_t begin, pto_task_id until);
static int hold_push(pto_run *r, pto_task_id id, uint64_t begin) {
  uint32_t n = r->nheld;
  /* never merged across the ring's physical end (begin at a lap's start):
   * ring_try_alloc_around and heap_live take a range's bytes as one
   * physical interval, so one that wrapped missed its bytes at the start
   * of the ring, and a later buffer was placed on them */
  if (n && r->held_until[n - 1] == INT64_MAX && r->held_depth[n - 1] == r->scope_depth &&
      r->held[n - 1].end == begin && begin % r->heap.cap != 0) {
    r->held[n - 1].end = r->heap.head; /* same scope: the deeper ones already ended */
    return PTO_OK;
  }
  return hold_add(r, id, begin, INT64_MAX);
}

/* A REDUX slab's range (redux.h): held whatever scopes do, until its
 * combine task is known (hold_redux_free); never merged with another */
#define HOLD_REDUX (INT64_MAX - 1)

/* Appends the range [begin, r->heap.head) of task id, free once `until`
 * has retired. */
static int hold_add(pto_run *r, pto_task_id id, uint64_t begin, pto_task_id until) {
  uint32_t n = r->nheld;
  if (n == r->held_cap) {
    uint32_t cap = r->held_cap ? r->held_cap * 2 : 16;
    ring_hole *h = realloc(r->held, sizeof *h * cap);
    if (h) r->held = h;
    pto_task_id *t = realloc(r->held_task, sizeof *t * cap);
    if (t) r->held_task = t;
    pto_task_id *u = realloc(r->held_until, sizeof *u * cap);
    if (u) r->held_until = u;
    int8_t *d = realloc(r->held_depth, sizeof *d * cap);
    if (d) r->held_depth = d;
    if (!h || !t || !u || !d) return PTO_ENOMEM;
    r->held_cap = cap;
  }
  r->held[n] = (ring_hole){begin, r->heap.head};
  r->held_task[n] = id;
  r->held_until[n] = until;
  r->held_depth[n] = (int8_t)r->scope_depth;
  r->nheld = n + 1;
  return PTO_OK;
}

/* The scope that began at task `from` ends: its ranges stay held until
 * the tasks submitted so far, which may still read them, have retired. */
static void hold_end(pto_run *r, pto_task_id from) {
  for (uint32_t i = r->nheld; i > 0 && r->held_task[i - 1] >= from; i--)
    if (r->held_until[i - 1] == INT64_MAX) r->held_until[i - 1] = r->next_id;
  if (r->next_id < r->held_release) r->held_release = r->next_id;
}

/* Drops the ended ranges whose readers have all retired. */
static void hold_release(pto_run *r) {
  if (r->retired < r->held_release) return; /* nothing due yet */
  uint32_t k = 0;
  r->held_release = INT64_MAX;
  for (uint32_t i = 0; i < r->nheld; i++) {
    if (r->held_until[i] <= r->retired) continue;
    if (r->held_until[i] < r->held_release) r->held_release = r->held_until[i];
    r->held[k] = r->held[i];
    r->held_task[k] = r->held_task[i];
    r->held_until[k] = r->held_until[i];
    r->held_depth[k++] = r->held_depth[i];
  }
  r->nheld = k;
}

/* A submit retires only once per RETIRE_EVERY of them. Retiring reads the
 * state of the oldest live task, which in a chain is the task a core is
 * completing at that moment: a read at every submit took that line from
 * the core just before it wrote it (11% of W1's samples in orch_retire,
 * docs/benchmarks.md). Nothing waits for the lag: whatever lacks room (a
 * ring, the TensorMap) retires at once before it waits (room_cond), and so
 * do host accesses, scope ends and the run's end. */
#define RETIRE_EVERY 32

/* Tasks up to `next` retired, t the last of them: its heap range,
 * argument storage and dependency nodes are free, and those before it. */
static void retire_through(pto_run *r, const task *t, pto_task_id next) {
  ring_release_to(&r->heap, t->heap_end);
  ring_release_to(&r->args, t->args_end);
  r->dep_tail = t->dep_end;
  r->retired = next;
}

/* Retires completed tasks in submission order, recycling their slot, heap
 * range, argument storage and dependency nodes. The heap tail may pass a
 * range held by an open scope: allocation steps around it (r->held). */
static void orch_retire(pto_run *r) {
  if (r->capture) return; /* a captured graph keeps every task (graph.c) */
  while (r->retired < r->next_id) {
    task *t = run_slot(r, r->retired);
    /* acquire pairs with the completing scheduler's release of `state`:
     * the task's use of its slot and arguments happened before we recycle
     * them. Its consumers need neither: they read its OUTPUT buffers,
     * whose heap range its scope holds until they have retired (hold_*),
     * and their dependency nodes are their own. */
    if (task_state(r, t, memory_order_acquire) != TASK_DONE) break;
    retire_through(r, t, r->retired + 1);
  }
  if (r->nheld) hold_release(r);
}

/* At the run's end, with every task completed: retired at once. The
 * wait's acquire of `completed` (all_completed) read every task's count,
 * and each completion stores DONE before it counts, so there is no state
 * left to look at: one walk over the slots would only miss the cache once
 * per task (about 20 ns each, on a launch's thousands of tasks nothing
 * had retired, with the cores idle). Rings and the dependency pool only
 * move forward, so the last task's ends are where the walk would stop.
 * A stopping run, or counts that disagree (run_books_broken names
 * those), take the walk. */
static void orch_retire_all(pto_run *r) {
  if (r->capture || r->retired >= r->next_id || run_stopping(r)) return;
  /* `submitted` is next_id: the orchestrator writes both */
  if (atomic_load_explicit(&r->completed, memory_order_acquire) != r->next_id) return;
  retire_through(r, run_slot(r, r->next_id - 1), r->next_id);
}

/* The orchestrator parks on orch_ev until `completed` reaches a threshold,
 * so that a full ring does not cost a wake-up per completion: `batch` more
 * completions (bounded by what is in flight). Returns cond's result.
 * noinline: gcc 12 -fsanitize=thread rejects (-Wtsan) its fence when it
 * shares a function with the call to schedule_wait. */
static __attribute__((noinline)) bool
orch_park_completions(pto_run *r, int64_t batch, pto_cond_fn cond, void *arg, uint64_t deadline) {
  spread_orch_share(r); /* a waiting orchestrator leaves its CPU to the cores */
  int64_t done = atomic_load_explicit(&r->completed, memory_order_relaxed);
  int64_t inflight = atomic_load_explicit(&r->submitted, memory_order_relaxed) - done;
  if (batch > inflight) batch = inflight;
  if (batch < 1) batch = 1;
  atomic_store_explicit(&r->orch_wake_at, done + batch, memory_order_seq_cst);
  /* Dekker with complete_task (state and `completed`, fence, load of
   * wake_at): cond()'s loads are acquire, not seq_cst, so without the fence
   * they may pass the store above; then neither side sees the other and the
   * orchestrator parks on a completion that already happened */
  atomic_thread_fence(memory_order_seq_cst);
  bool ok = pto_wait(&r->orch_ev, cond, arg, deadline);
  atomic_store_explicit(&r->orch_wake_at, INT64_MAX, memory_order_relaxed);
  return ok;
}

/* Every wait of the orchestrator: under a controlled schedule its
 * controller runs what is waited for (schedule.h), else it parks. */
static bool orch_wait_completions(pto_run *r, int64_t batch, pto_cond_fn cond, void *arg,
                                  uint64_t deadline) {
  /* what the wait may need among the tasks pto_orch_batch_begin gathered */
  sched_orch_flush(r);
  /* checking mode: this thread runs the ready tasks itself (contract.h) */
  if (r->contract && contract_drain(r, cond, arg, sched_task_done_unit)) return true;
  if (r->ctl) return schedule_wait(r, cond, arg, deadline);
  return orch_park_completions(r, batch, cond, arg, deadline);
}

/* Back-pressure: waits until room(r, arg) holds, retiring as tasks finish.
 * Fails at once when no task is live, since then nothing can ever free
 * room: with `pinned_code` when heap ranges held by open scopes are in the
 * way, else with `code` naming what was asked and the ring's size; fails
 * with `code` when no task retires within alloc_timeout_ms. */
typedef struct room_wait {
  pto_run *r;
  bool (*room)(pto_run *r, void *arg);
  void *arg;
  bool ok; /* room() said yes (it may allocate: never asked again) */
} room_wait;

/* Also true when no task is live: the caller then fails at once. */
static bool room_cond(void *p) {
  room_wait *w = p;
  orch_retire(w->r);
  if (!w->ok) w->ok = w->room(w->r, w->arg);
  return w->ok || run_stopping(w->r) || w->r->retired == w->r->next_id;
}

static bool heap_room(pto_run *r, void *arg);
static bool tmap_room(pto_run *r, void *arg);

/* heap_bytes as the user set it, and what the ring holds when the
 * rounding to RING_ALIGN made it more: "1000 (the heap ring holds 1024: a
 * multiple of 64)", else "1048576". */
static const char *heap_bytes_text(const pto_run *r, char *buf, size_t n) {
  unsigned long long set = r->cfg->heap_bytes, cap = r->heap.cap;
  if (set == cap)
    snprintf(buf, n, "%llu", set);
  else
    snprintf(buf, n, "%llu (the heap ring holds %llu: a multiple of %u)", set, cap, RING_ALIGN);
  return buf;
}

/* A heap range still held once every live task has retired: an open
 * scope's, a REDUX slab whose combine task is not submitted yet, or one
 * whose readers include this submit's task. */
static bool held_for_good(const pto_run *r, uint32_t i) { return r->held_until[i] > r->next_id; }

/* Whether room for `arg` (heap_room's or tmap_room's request) could not
 * be found even once every live task has retired: waiting for them would
 * wait for nothing. */
static bool room_never(pto_run *r, bool (*room)(pto_run *, void *), void *arg);

/* `need_fmt` describes the request with two unsigned long long values (the
 * second may go unused); it is formatted only when the wait fails. */
static int orch_wait_room(pto_run *r, bool (*room)(pto_run *, void *), void *arg, int code,
                          int pinned_code, const char *what, const char *need_fmt,
                          unsigned long long n1, unsigned long long n2) {
  room_wait w = {r, room, arg, false};
  char need[128];
  /* no retirement can give the room: fail as if no task were live */
  bool never = false;
  if (r->capture) { /* nothing retires: no room will come */
    room_cond(&w);
    if (w.ok || run_stopping(r)) return run_latched(r);
    char full[200];
    snprintf(need, sizeof need, need_fmt, n1, n2);
    snprintf(full, sizeof full, "%s full, %s not found", what, need);
    return graph_capture_refuse(r, full);
  }
  pto_task_id last = r->retired;
  uint64_t deadline = pto_deadline_ms(r->cfg->alloc_timeout_ms);
  for (bool first = true;; first = false) {
    room_cond(&w);
    if (w.ok || run_stopping(r)) return run_latched(r);
    if (r->retired != last) { /* progress: restart the deadline */
      last = r->retired;
      deadline = pto_deadline_ms(r->cfg->alloc_timeout_ms);
    }
    /* asked once: what stays held for good does not change while waiting */
    if (first && r->retired != r->next_id) never = room_never(r, room, arg);
    bool hopeless = never || r->retired == r->next_id;
    const char *none_live =
        r->retired == r->next_id ? "no task is live" : "no live task's retirement frees them";
    if (hopeless) snprintf(need, sizeof need, need_fmt, n1, n2);
    if (hopeless && room == heap_room && r->nheld) {
      uint64_t bytes = 0, copies = 0;
      uint32_t ranges = 0, oldest = 0;
      for (uint32_t i = 0; i < r->nheld; i++) {
        if (!held_for_good(r, i)) continue;
        if (!ranges++) oldest = i;
        bytes += r->held[i].end - r->held[i].begin;
        if (r->held_until[i] == HOLD_REDUX) copies += r->held[i].end - r->held[i].begin;
      }
      if (copies == bytes) { /* no scope holds anything: open groups' slabs, the task's own */
        run_fail(r, code, PTO_TASK_NONE, -1,
                 "%s full: REDUX private copies hold %llu bytes (this task's and those of "
                 "contributions not yet folded) and %s, so %s can never be found: "
                 "a task's REDUX copies and its OUTPUT buffers must fit heap_bytes together",
                 what, (unsigned long long)bytes, none_live, need);
        return run_latched(r);
      }
      run_fail(r, pinned_code, r->held_task[oldest], -1,
               "%s full: OUTPUT buffers of scopes still open hold %llu bytes in %u ranges (the "
               "oldest from task %lld, scope depth %d) and %s, so %s can never be "
               "found: close scopes sooner",
               what, (unsigned long long)bytes, ranges, (long long)r->held_task[oldest],
               r->held_depth[oldest], none_live, need);
      return run_latched(r);
    }
    if (hopeless) {
      run_fail(r, code, PTO_TASK_NONE, -1, "%s: %s can never be found: %s", what, need,
               r->retired == r->next_id ? "no task is live, so nothing can be reclaimed"
                                        : "this task's own arguments hold every entry, which no "
                                          "retirement frees");
      return run_latched(r);
    }
    if (pto_now_ns() >= deadline) {
      pto_task_id old = r->retired;
      snprintf(need, sizeof need, need_fmt, n1, n2);
      run_fail(r, code, old < r->next_id ? old : PTO_TASK_NONE, -1,
               "%s full and no task retired for %lld ms, waiting for %s (oldest live task %lld, "
               "live tasks %lld)",
               what, (long long)r->cfg->alloc_timeout_ms, need, (long long)old,
               (long long)(r->next_id - r->retired));
      return run_latched(r);
    }
    orch_wait_completions(r, r->nslots / 8, room_cond, &w, deadline);
  }
}

static bool slot_room(pto_run *r, void *arg) {
  (void)arg;
  return r->next_id - r->retired < (int64_t)r->nslots;
}
/* Room in the dependency pool for the listed producers (r->depbuf) still
 * live: one that retired needs no entry (it is done) and leaves the list,
 * also because its slot is about to be reused, so it must not be linked.
 * *arg: how many are left. */
static bool dep_room(pto_run *r, void *arg) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < r->depbuf_n; i++)
    if (r->depbuf[i] >= r->retired) r->depbuf[k++] = r->depbuf[i];
  r->depbuf_n = *(uint32_t *)arg = k;
  return k <= r->ndeps && r->dep_head + k - r->dep_tail <= r->ndeps;
}
typedef struct ring_req {
  ring *ring;
  uint64_t bytes;
  void *ptr;
} ring_req;
static bool ring_room(pto_run *r, void *arg) {
  (void)r;
  ring_req *q = arg;
  q->ptr = ring_try_alloc(q->ring, q->bytes);
  return q->ptr != NULL;
}
static bool heap_room(pto_run *r, void *arg) {
  ring_req *q = arg;
  q->ptr = ring_try_alloc_around(q->ring, q->bytes, r->held, r->nheld);
  return q->ptr != NULL;
}
/* The TensorMap full: room is a retirement (its entries may go); `own`
 * entries are the submitting task's, which none frees. */
typedef struct tmap_req {
  pto_task_id before;
  uint32_t own;
} tmap_req;
static bool tmap_room(pto_run *r, void *arg) {
  return r->retired != ((const tmap_req *)arg)->before;
}

static bool room_never(pto_run *r, bool (*room)(pto_run *, void *), void *arg) {
  if (room == tmap_room) return ((const tmap_req *)arg)->own >= r->tm.capacity;
  if (room != heap_room) return false; /* the other rings are empty once no task is live */
  /* The heap once every live task has retired: its tail at the last
   * task's end, around the ranges held for good (a subsequence of the
   * held ones, so in allocation order too); tried on a copy. */
  ring h = r->heap;
  if (r->retired < r->next_id) {
    uint64_t end = run_slot(r, r->next_id - 1)->heap_end;
    if (end > h.tail) h.tail = end;
  }
  ring_hole *kept = malloc(sizeof *kept * (r->nheld ? r->nheld : 1));
  if (!kept) return false; /* not known: wait as for any room */
  uint32_t k = 0;
  for (uint32_t i = 0; i < r->nheld; i++)
    if (held_for_good(r, i)) kept[k++] = r->held[i];
  bool never = !ring_try_alloc_around(&h, ((const ring_req *)arg)->bytes, kept, k);
  free(kept);
  return never;
}

/* ---- the heap ring for REDUX slabs (redux_orch) ---- */

static int redux_heap_take(pto_run *r, uint64_t bytes, const pto_args *a, bool wait, void **ptr) {
  ring_req hr = {&r->heap, (bytes + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN, NULL};
  ring was = r->heap; /* put back when the OUTPUT buffers would not fit after the slab */
  uint64_t then = 0;  /* the task's OUTPUT bytes (none when they wrap: submit refuses them) */
  if (!wait && a && outputs_bytes(a, a->tensors, &then)) then = 0;
  if (then) { /* OUTPUT buffers without room now wait anyway: not reserved for */
    ring h = r->heap;
    if (!ring_try_alloc_around(&h, then, r->held, r->nheld)) then = 0;
  }
  bool room = heap_room(r, &hr);
  if (room && then) {
    ring h = r->heap; /* tried on a copy: nothing more is allocated */
    if (!ring_try_alloc_around(&h, then, r->held, r->nheld)) {
      r->heap = was;
      return 1;
    }
  }
  if (!room) {
    if (!wait) return 1;
    int rc = orch_wait_room(r, heap_room, &hr, PTO_EHEAP_DEADLOCK, PTO_ESCOPE_DEADLOCK, "heap ring",
                            "%llu contiguous bytes for this task's REDUX private copies "
                            "(heap_bytes %llu)",
                            hr.bytes, (unsigned long long)r->cfg->heap_bytes);
    if (rc) return rc;
  }
  if (hold_add(r, r->next_id, r->heap.head - hr.bytes, HOLD_REDUX)) {
    run_fail(r, PTO_ENOMEM, PTO_TASK_NONE, -1, "could not record a REDUX slab's heap range");
    return run_latched(r);
  }
  *ptr = hr.ptr;
  return PTO_OK;
}

static void redux_heap_free_after(pto_run *r, void *ptr, pto_task_id id) {
  for (uint32_t i = 0; i < r->nheld; i++)
    if (r->held_until[i] == HOLD_REDUX && r->heap.base + r->held[i].begin % r->heap.cap == ptr) {
      r->held_until[i] = id + 1;
      if (id + 1 < r->held_release) r->held_release = id + 1;
      return;
    }
}

/* ---- dependency collection ---- */

typedef struct dep_collect {
  pto_run *r;
  pto_task_id self;
  bool oom;
  uint32_t recorded; /* TensorMap entries recorded for self: none goes while it is live */
  int64_t cover;     /* dep_ordered's */
} dep_collect;

#define DEP_COLLECT(r, self) ((dep_collect){(r), (self), false, 0, (r)->retired - 1})

/* True when the task being submitted is ordered after producer: retired
 * (completed), implied by a listed producer, or listed as a dependency
 * (dep_ordered, dep_list). */
static bool collect_dep(void *arg, int64_t producer) {
  dep_collect *c = arg;
  pto_run *r = c->r;
  int k = dep_ordered(r, c->self, c->cover, producer);
  if (k) return k > 0;
  if (r->depbuf_n == r->depbuf_cap) {
    pto_task_id *n = realloc(r->depbuf, sizeof(pto_task_id) * r->depbuf_cap * 2);
    if (!n) {
      c->oom = true;
      return false;
    }
    r->depbuf = n;
    r->depbuf_cap *= 2;
  }
  dep_list(r, c->self, &c->cover, producer);
  r->depbuf[r->depbuf_n++] = producer;
  return true;
}

/* In a manual scope: no inferred edge, so not ordered after producer. */
static bool ignore_dep(void *arg, int64_t producer) {
  (void)arg;
  (void)producer;
  return false;
}

static bool in_manual_scope(const pto_run *r) {
  return r->scope_depth > 0 && r->scopes[r->scope_depth].mode == PTO_SCOPE_MANUAL;
}

/* Whether a task of kernel_id submitted now takes inferred edges: not a
 * user's task in a manual scope, but always a REDUX combine task. A group
 * folds wherever its flush falls (pto_scope_end of a manual scope, the
 * orchestration's end with one still open, an access to its bytes inside
 * one), and its tensor is INOUT for the fold: without its edges it ran
 * beside the earlier writers of those bytes, whose values then overwrote
 * the result (PTO_OK with a wrong value). */
static bool inferred_edges(const pto_run *r, int kernel_id) {
  return kernel_id == KERNEL_REDUX_COMBINE || !in_manual_scope(r);
}

/* Records one tensor access, retrying while the TensorMap is full;
 * `inferred`: inferred_edges. */
static int orch_tmap(pto_run *r, const region_view *view, tmap_mode mode, bool inferred,
                     dep_collect *c) {
  tmap_dep_fn fn = inferred ? collect_dep : ignore_dep;
  for (;;) {
    int rc = tmap_access_view(&r->tm, view, mode, c->self, r->retired, fn, c);
    if (rc == PTO_OK) c->recorded++;
    if (rc != PTO_ETENSORMAP_OVERFLOW) return rc;
    tmap_req q = {r->retired, c->recorded};
    rc = orch_wait_room(r, tmap_room, &q, PTO_ETENSORMAP_OVERFLOW, PTO_ETENSORMAP_OVERFLOW,
                        "TensorMap",
                        "an entry (tensormap_entries %llu, of which this task's arguments hold "
                        "%llu)",
                        r->cfg->tensormap_entries, q.own);
    if (rc) return rc;
  }
}

/* ---- submit ---- */

static int submit_fail(pto_run *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int submit_fail(pto_run *r, int code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  run_fail(r, code, PTO_TASK_NONE, -1, "submit #%lld: %s", (long long)r->next_id, msg);
  return run_latched(r);
}

int orch_refuse_thread(pto_orch *o, const char *call) {
  /* only the latch: next_id and the rest are the owner's to read */
  run_fail(o->run, PTO_EINVAL, PTO_TASK_NONE, -1,
           "%s called from a thread other than the one running the orchestration function: a "
           "pto_orch takes submits, scopes, host reads and writes and waits from that thread "
           "only (submitting from several threads is not supported); the call did nothing",
           call);
  return PTO_EINVAL;
}

int orch_refuse_stale(const pto_orch *o, const char *call) {
  return last_error_set(PTO_EINVAL,
                        "%s: %s; the call did nothing (a pto_orch is its run's only while the "
                        "orchestration function runs: keep none past it)",
                        call,
                        !o        ? "the pto_orch is NULL"
                        : !o->run ? "this is not a pto_orch pto handed out"
                                  : "this pto_orch's run has ended");
}

/* A submit's tensor arguments by access mode: bit i of of[m] is set when
 * argument i is of mode m (validate's first pass over them). */
typedef struct arg_modes {
  uint32_t of[PTO_REDUX + 1];
} arg_modes;

/* Checks a submit's arguments; fills rv[i] with each non-OUTPUT tensor
 * argument's normalised view, which its TensorMap access then uses (one
 * normalisation per argument, done while checking it), and *modes. */
static int validate(pto_run *r, int kernel_id, const pto_args *a, const pto_submit_opts *o,
                    int *shape_out, region_view *rv, arg_modes *modes) {
  const pto_chip_config *c = r->cfg;
  int sh = SHAPE_DUMMY;
  if (kernel_id != -1) {
    if ((kernel_id < 0 || kernel_id >= r->chip->nkernels) && kernel_id != KERNEL_REDUX_COMBINE)
      return submit_fail(r, PTO_EINVAL,
                         "unknown kernel id %d (%d kernels registered; an id comes from "
                         "pto_kernel_register*)",
                         kernel_id, r->chip->nkernels);
    const kernel_rec *k = &r->chip->kernels[kernel_id];
    sh = k->shape;
    if (shape_aic(k->shape) > c->aic_per_cluster || shape_aiv(k->shape) > c->aiv_per_cluster)
      return submit_fail(r, PTO_EINVAL,
                         "kernel '%s' needs %d AIC + %d AIV per cluster but the chip's clusters "
                         "have %d AIC + %d AIV",
                         k->name, shape_aic(k->shape), shape_aiv(k->shape), c->aic_per_cluster,
                         c->aiv_per_cluster);
  }
  int blocks = o && o->block_num ? o->block_num : 1;
  if (blocks < 1) return submit_fail(r, PTO_EINVAL, "block_num %d < 1", o->block_num);
  /* the task completes when units_done, an int32, reaches blocks x cores
   * per block (at most 3): a product that wraps would complete it early
   * (or never) */
  if (blocks > INT32_MAX / 3 && sh != SHAPE_DUMMY) {
    int per_block = shape_aic(sh) + shape_aiv(sh);
    if (blocks > INT32_MAX / per_block)
      return submit_fail(r, PTO_EINVAL,
                         "block_num %d x %d cores per block (kernel '%s') is %lld units, more "
                         "than %d: at most %d blocks",
                         blocks, per_block, r->chip->kernels[kernel_id].name,
                         (long long)blocks * per_block, INT32_MAX, INT32_MAX / per_block);
  }
  if (o && o->sync_start && kernel_id != -1) {
    int max = sh == SHAPE_AIV ? c->clusters * c->aiv_per_cluster : c->clusters;
    if (blocks > max)
      return submit_fail(r, PTO_ESYNC_WIDTH,
                         "sync_start task of %d blocks can never be co-resident: at most %d (%s)",
                         blocks, max, sh == SHAPE_AIV ? "AIV cores" : "clusters");
  }
  if (o && (o->priority < 0 || o->priority > PTO_PRIORITY_MAX))
    return submit_fail(r, PTO_EINVAL, "priority %d: must be 0..%d", o->priority, PTO_PRIORITY_MAX);
  if (o && (o->ndeps < 0 || (o->ndeps > 0 && !o->deps)))
    return submit_fail(r, PTO_EINVAL, "explicit deps: ndeps %d with deps %s", o->ndeps,
                       o->deps ? "set" : "NULL");
  for (int i = 0; o && i < o->ndeps; i++)
    if (o->deps[i] < 0 || o->deps[i] >= r->next_id)
      return submit_fail(r, PTO_EINVAL, "explicit dep %d is task %lld, not an earlier task", i,
                         (long long)o->deps[i]);
  if (a) {
    if (a->error) {
      if (a->ntensors > PTO_MAX_TENSOR_ARGS)
        return submit_fail(r, PTO_EINVAL, "more than %d tensor arguments", PTO_MAX_TENSOR_ARGS);
      if (a->nscalars > PTO_MAX_SCALAR_ARGS)
        return submit_fail(r, PTO_EINVAL, "more than %d scalar arguments", PTO_MAX_SCALAR_ARGS);
      switch (a->error_rule) {
      case ARGS_NULL_TENSOR:
        return submit_fail(r, PTO_EINVAL, "tensor argument %d: NULL tensor", a->error_arg);
      case ARGS_BAD_MODE:
        return submit_fail(r, PTO_EINVAL,
                           "tensor argument %d: access mode is not a pto_access (0..%d)",
                           a->error_arg, PTO_REDUX);
      case ARGS_AFTER_SCALAR:
        return submit_fail(r, PTO_EINVAL,
                           "tensor argument %d added after a scalar (tensors come first)",
                           a->error_arg);
      default: /* a pto_args not made by the builder */
        return submit_fail(r, PTO_EINVAL, "argument %d: pto_args.error is %d (error_rule %d)",
                           a->error_arg, a->error, a->error_rule);
      }
    }
    /* pto_args is a public struct: one filled by hand has passed none of
     * the builder's checks, and every later step trusts its counts */
    if (a->ntensors < 0 || a->ntensors > PTO_MAX_TENSOR_ARGS)
      return submit_fail(r, PTO_EINVAL, "pto_args.ntensors is %d: must be 0..%d", a->ntensors,
                         PTO_MAX_TENSOR_ARGS);
    if (a->nscalars < 0 || a->nscalars > PTO_MAX_SCALAR_ARGS)
      return submit_fail(r, PTO_EINVAL, "pto_args.nscalars is %d: must be 0..%d", a->nscalars,
                         PTO_MAX_SCALAR_ARGS);
    for (int i = 0, ncommute = 0; i < a->ntensors; i++) {
      if (a->access[i] > PTO_REDUX)
        return submit_fail(r, PTO_EINVAL,
                           "tensor argument %d: pto_args.access[%d] is %d, not a pto_access "
                           "(0..%d)",
                           i, i, a->access[i], PTO_REDUX);
      modes->of[a->access[i]] |= 1u << i;
      if (a->access[i] == PTO_COMMUTE && ++ncommute > PTO_MAX_COMMUTE_ARGS)
        return submit_fail(r, PTO_EINVAL,
                           "tensor argument %d (COMMUTE): a task has at most %d COMMUTE arguments",
                           i, PTO_MAX_COMMUTE_ARGS);
    }
    for (int i = 0; i < a->ntensors; i++) {
      const pto_tensor *t = &a->tensors[i];
      char why[200];
      const char *bad = NULL;
      if (a->access[i] == PTO_OUTPUT) {
        if (tensor_check_shape(t->dtype, t->ndims, t->shape, NULL))
          bad = "dtype, ndims (1..5) or a shape (>= 1) is invalid";
        /* the result would go to the new buffer alone: one that is not an
         * earlier OUTPUT's (in the heap ring) is the caller's, and a
         * caller who sets buf means it to be written */
        else if (t->buf && !ring_holds(&r->heap, t->buf))
          bad = "its buf is memory of yours: OUTPUT allocates a new buffer from pto's heap and "
                "points the tensor at it, leaving yours unwritten; write into yours with "
                "PTO_OUTPUT_EXISTING (PTO_OUT_EXISTING, pto_args_output_existing), or pass a "
                "descriptor (pto_tensor_desc) to have pto allocate it";
        /* the allocated view goes back through it (a hand-built pto_args
         * may lack it: the builder's pto_args_output sets it) */
        else if (!a->outputs[i])
          bad = (snprintf(why, sizeof why,
                          "pto_args.outputs[%d] is NULL: OUTPUT writes the allocated view back "
                          "into the caller's tensor (pto_args_output sets it)",
                          i),
                 why);
      } else if (!region_view_checked(t, &rv[i])) {
        /* valid when it normalised with every check passed: only a view
         * that did not is checked again, for its problem's name */
        bad = tensor_problem(t, false, why, sizeof why);
      }
      /* a combine task's views were checked with its contributions, and
       * its slab is the runtime's (redux.h) */
      if (!bad && a->access[i] != PTO_OUTPUT && kernel_id != KERNEL_REDUX_COMBINE &&
          heap_live_maybe(&r->heap, t))
        bad = heap_live_problem(&r->live, &r->heap, r->held, r->held_until, r->nheld, t, why,
                                sizeof why);
      if (bad)
        return submit_fail(r, PTO_EINVAL, "tensor argument %d (%s): %s", i,
                           tensor_access_name(a->access[i]), bad);
    }
  }
  *shape_out = sh;
  return PTO_OK;
}

/* The packed bytes of OUTPUT view d, whose shape validate() passed (so
 * tensor_check_shape sets them: the 0 only spares gcc its early return). */
static int64_t output_bytes(const pto_tensor *d) {
  int64_t bytes = 0;
  tensor_check_shape(d->dtype, d->ndims, d->shape, &bytes);
  return bytes;
}

/* The heap bytes of a task's OUTPUT buffers (their views in `ts`, already
 * validated) in one allocation: true when the sum wraps (sizes near 2^62
 * must not sum to "fits"). */
static bool outputs_bytes(const pto_args *a, const pto_tensor *ts, uint64_t *total) {
  bool wraps = false;
  *total = 0;
  for (int i = 0; a && i < a->ntensors; i++)
    if (a->access[i] == PTO_OUTPUT) {
      uint64_t padded = ((uint64_t)output_bytes(&ts[i]) + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
      wraps |= __builtin_add_overflow(*total, padded, total);
    }
  return wraps;
}

/* Before a submit takes its slot: when its OUTPUT buffers find no room in
 * the heap ring now and REDUX groups are open, the groups are folded
 * first. Their slabs are heap that only a fold gives back, and a fold is
 * a submit, which may not happen once this one holds its slot: waiting
 * for room could be waiting for the slabs, which nothing would free (a
 * whole-heap OUTPUT after contributions was refused as a scope deadlock).
 * Folding early keeps the result: groups fold in submission order. */
static int fold_for_outputs(pto_run *r, const pto_args *a) {
  if (!r->rx.openm || !a) return PTO_OK;
  uint64_t total;
  if (outputs_bytes(a, a->tensors, &total) || total == 0) return PTO_OK;
  ring h = r->heap; /* tried on a copy: nothing is allocated */
  if (ring_try_alloc_around(&h, total, r->held, r->nheld)) return PTO_OK;
  return redux_flush_all(r);
}

/* One submit on the owner's thread of a healthy run (orch_gate passed). */
static int submit(pto_run *r, int kernel_id, pto_args *a, const pto_submit_opts *opts,
                  pto_task_id *id_out) {
  int rc;
  int sh = SHAPE_DUMMY;
  region_view rv[PTO_MAX_TENSOR_ARGS]; /* the arguments' views (validate): no clearing */
  arg_modes modes = {{0}};
  if ((rc = validate(r, kernel_id, a, opts, &sh, rv, &modes))) return rc;
  uint64_t t0 = r->trace ? pto_now_ns() : 0;
  /* 0. REDUX arguments: their slots, after folding what this task touches */
  redux_plan rp;
  int units = sh == SHAPE_DUMMY ? 0
                                : (opts && opts->block_num ? opts->block_num : 1) *
                                      (shape_aic(sh) + shape_aiv(sh));
  rp.mask = 0; /* without REDUX arguments or open groups, all a task needs of it */
  if ((modes.of[PTO_REDUX] || r->rx.openm) &&
      ((rc = fold_for_outputs(r, a)) ||
       (rc = redux_prepare(r, a, rv, modes.of[PTO_REDUX], units, &rp))))
    return rc;

  /* 1. task slot (retiring once per RETIRE_EVERY submits) */
  if (r->next_id % RETIRE_EVERY == 0) orch_retire(r);
  if (!slot_room(r, NULL) &&
      (rc = orch_wait_room(r, slot_room, NULL, PTO_ETASK_RING_DEADLOCK, PTO_ESCOPE_DEADLOCK,
                           "task ring", "a slot (task_slots %llu)", r->nslots, 0)))
    return rc;
  pto_task_id id = r->next_id;
  task *t = run_slot(r, id);
  /* The slots a few submits ahead were last written by the cores that
   * completed their previous tasks: fetch them for writing now, so that
   * filling them then does not wait on those lines. */
  const task *ahead = run_slot(r, id + 4);
  for (size_t off = 0; off < sizeof *ahead; off += PTO_CACHELINE)
    __builtin_prefetch((const char *)ahead + off, 1);

  /* 2. argument storage */
  int nt = a ? a->ntensors : 0, ns = a ? a->nscalars : 0;
  /* a dummy runs nothing: nothing to exclude */
  uint32_t cm_mask = kernel_id == -1 ? 0 : modes.of[PTO_COMMUTE];
  int ncm = 0; /* (no libgcc popcount: gcc calls it even for none) */
  for (uint32_t m = cm_mask; m; m &= m - 1)
    ncm++;
  ring_req ar = {&r->args,
                 sizeof(pto_tensor) * (size_t)nt + sizeof(uint64_t) * (size_t)ns +
                     sizeof(region_view) * (size_t)ncm,
                 NULL};
  if (!ring_room(r, &ar) &&
      (rc = orch_wait_room(
           r, ring_room, &ar, PTO_ETASK_RING_DEADLOCK, PTO_ESCOPE_DEADLOCK, "argument ring",
           "%llu bytes of argument storage (argument ring %llu bytes)", ar.bytes, r->args.cap)))
    return rc;
  pto_tensor *tensors = ar.ptr;
  uint64_t *scalars = (uint64_t *)(tensors + nt);
  if (nt) memcpy(tensors, a->tensors, sizeof(pto_tensor) * (size_t)nt);
  if (ns) memcpy(scalars, a->scalars, sizeof(uint64_t) * (size_t)ns);
  if (rp.mask) redux_args(r, &rp, tensors);
  if (ncm) /* normalised once here, compared at every acquire (commute.h) */
    cm_link_views(&r->cm.links[id & r->slot_mask], (region_view *)(scalars + ns), tensors, rv, nt,
                  cm_mask);
  /* the next submits' argument storage, as the slots above (past the
   * ring's end the hint is simply wasted: a prefetch never faults) */
  for (size_t off = 0; off < 4 * PTO_CACHELINE; off += PTO_CACHELINE)
    __builtin_prefetch((const char *)ar.ptr + ar.bytes + off, 1);

  /* 3. heap for OUTPUT tensors: one contiguous allocation per task, so a
   * task whose outputs fit the ring at all can always get them once the
   * ring drains (separate pieces could each wait on the other) */
  uint64_t heap_total = 0;
  bool wraps = modes.of[PTO_OUTPUT] && outputs_bytes(a, tensors, &heap_total);
  bool has_heap = heap_total > 0 || wraps;
  if (wraps || !ring_fits(&r->heap, heap_total)) {
    char sizes[200]; /* formatted only here: no 200-byte clear per submit */
    sizes[0] = '\0';
    for (int i = 0, len = 0; i < nt; i++)
      if (a->access[i] == PTO_OUTPUT && len >= 0 && len < (int)sizeof sizes) {
        len += snprintf(sizes + len, sizeof sizes - (size_t)len, "%sargument %d: %lld",
                        len ? ", " : "", i, (long long)output_bytes(&tensors[i]));
      }
    char total[32] = "2^64 or more";
    if (!wraps) snprintf(total, sizeof total, "%llu", (unsigned long long)heap_total);
    char hb[96];
    return submit_fail(r, PTO_EHEAP_DEADLOCK,
                       "OUTPUT buffers of one task need %s bytes (%s) but heap_bytes is %s", total,
                       sizes, heap_bytes_text(r, hb, sizeof hb));
  }
  if (has_heap) {
    ring_req hr = {&r->heap, heap_total, NULL};
    if (!heap_room(r, &hr) &&
        (rc =
             orch_wait_room(r, heap_room, &hr, PTO_EHEAP_DEADLOCK, PTO_ESCOPE_DEADLOCK, "heap ring",
                            "%llu contiguous bytes for OUTPUT buffers (heap_bytes %llu)",
                            heap_total, (unsigned long long)r->cfg->heap_bytes)))
      return rc;
    if (hold_push(r, id, r->heap.head - heap_total))
      return submit_fail(r, PTO_ENOMEM, "could not record the held OUTPUT range");
    uint8_t *next = hr.ptr;
    for (int i = 0; i < nt; i++) {
      if (a->access[i] != PTO_OUTPUT) continue;
      pto_tensor *d = &tensors[i];
      int64_t bytes = output_bytes(d);
      d->buf = next;
      d->buf_bytes = (size_t)bytes;
      d->offset = 0;
      d->alloc_tag = heap_live_tag(&r->heap, next);
      tensor_set_packed_strides(d);
      next += ((uint64_t)bytes + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
      *a->outputs[i] = *d; /* hand the allocated view back to the caller */
    }
  }

  /* 4. dependencies: inferred from regions, plus explicit ones */
  dep_collect dc = DEP_COLLECT(r, id);
  r->depbuf_n = 0;
  int64_t pre = -1; /* the task's (dep_reduce) */
  bool inferred = inferred_edges(r, kernel_id);
  for (int i = 0; i < nt; i++) {
    /* a REDUX argument is its private slot: nobody else's bytes */
    static const int mode_of[] = {TMAP_READ, TMAP_WRITE,      TMAP_WRITE, TMAP_READ_WRITE,
                                  0,         TMAP_COMMUTE_RW, 0};
    int m = mode_of[a->access[i]];
    if (!m) continue;
    /* an OUTPUT's view is the heap's, set above: normalised only now */
    if (a->access[i] == PTO_OUTPUT) region_view_init(&tensors[i], &rv[i]);
    if ((rc = orch_tmap(r, &rv[i], (tmap_mode)m, inferred, &dc))) return rc;
  }
  for (int i = 0; opts && i < opts->ndeps; i++)
    collect_dep(&dc, opts->deps[i]);
  if (dc.oom) return submit_fail(r, PTO_ENOMEM, "dependency list allocation failed");
  if (r->capture)
    r->depbuf_n = graph_capture_reduce(r, r->depbuf, r->depbuf_n);
  else if (kernel_id != KERNEL_REDUX_COMBINE)
    r->depbuf_n = dep_reduce(r, id, r->depbuf, r->depbuf_n, dc.cover, &pre);
  /* (a combine task's up to 256 edges are its contributions, which seldom
   * imply each other: the reduction read each one's slot and nodes for
   * nothing; keeping an edge is always sound) */
  uint32_t nd = r->depbuf_n;
  if (nd > r->ndeps && r->capture) /* nothing retires while capturing */
    return submit_fail(r, PTO_EDEP_OVERFLOW, "task has %u dependencies but dep_entries is %u", nd,
                       r->ndeps);
  /* Producers that are done need no entry: more than the pool holds is
   * waited for (they retire) rather than refused, which a submit that
   * had not retired them yet (once per RETIRE_EVERY) did with every
   * producer long done. The waits above may have retired producers
   * listed earlier too: dep_room drops them from the list. */
  if (nd > r->ndeps) orch_retire(r);
  if (!dep_room(r, &nd) &&
      (rc = orch_wait_room(r, dep_room, &nd, PTO_EDEP_OVERFLOW, PTO_EDEP_OVERFLOW,
                           "dependency pool", "%llu entries (dep_entries %llu)", nd, r->ndeps)))
    return rc;
  nd = r->depbuf_n;

  /* 5. fill the slot, then link into producers' fanout lists */
  t->id = id;
  t->kernel = kernel_id;
  t->shape = (int8_t)sh;
  t->block_num = opts && opts->block_num ? opts->block_num : 1;
  t->units_total = sh == SHAPE_DUMMY ? 0 : t->block_num * (shape_aic(sh) + shape_aiv(sh));
  t->sync_start = opts && opts->sync_start && sh != SHAPE_DUMMY;
  t->scope_depth = (int8_t)r->scope_depth;
  t->commute = ncm > 0;
  t->redux_args = rp.mask;
  if (rp.mask) memcpy(t->redux_op, rp.op, sizeof t->redux_op);
  t->priority = (int8_t)(opts ? opts->priority : 0);
  t->dep_mark = PTO_TASK_NONE; /* a mark left in the slot by an earlier run is not ours */
  t->ntensors = nt;
  t->nscalars = ns;
  t->tensors = tensors;
  t->scalars = scalars;
  t->heap_end = r->heap.head;
  t->args_end = r->args.head;
  atomic_store_explicit(&t->fanout_head, FANOUT_EMPTY, memory_order_relaxed);
  t->fixed_fanout = false;
  t->next_block = 0;
  atomic_store_explicit(&t->units_done, 0, memory_order_relaxed);
  task_set_state(r, t, TASK_PENDING, memory_order_relaxed);
  /* every edge counted before any producer can see its node (one store,
   * not a locked add per edge) */
  atomic_store_explicit(&t->fanin, (int32_t)nd, memory_order_relaxed);
  atomic_store_explicit(&t->cohort_go, 0, memory_order_relaxed);
  atomic_store_explicit(&t->drain_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&t->first_start_ns, UINT64_MAX, memory_order_relaxed);
  atomic_store_explicit(&t->last_start_ns, 0, memory_order_relaxed);
  if (r->capture && (rc = graph_capture_task(r, t, a, r->depbuf, nd))) return rc;
  pto_task_id dep_max = -1;
  for (uint32_t i = 0; i < nd; i++)
    if (r->depbuf[i] > dep_max) dep_max = r->depbuf[i];
  t->dep_end = r->dep_head + nd;
  t->ndeps = nd;
  t->dep_max = dep_max;
  t->pre = pre;
  const int priority = t->priority;
  r->next_id = id + 1;
  /* far ahead of cores with a backlog of short blocks: a CPU of its own
   * (spread.c), looked at once per 64 submits until it was tried; and a
   * block left unstarted on a core while no task retires */
  if ((id & 63) == 63) {
    if (!r->alone_tried) spread_orch_ahead(r);
    if (r->retired == r->unstarted_retired)
      orch_unstarted_look(r);
    else
      r->unstarted_retired = r->retired;
  }
  if (t->sync_start) atomic_fetch_add_explicit(&r->sync_tasks, 1, memory_order_relaxed);
  /* release: slot contents visible to whoever reads `submitted` (watchdog) */
  atomic_store_explicit(&r->submitted, id + 1, memory_order_release);
  if (r->trace)
    trace_slice_deps(r->trace, r->orch_track, "submit", "orch", t0, pto_now_ns(), id, -1, r->depbuf,
                     (int)nd);
  if (id_out) *id_out = id;
  if (r->contract) contract_submit(r, t, a);
  /* the links: the last one may publish the task, so nothing of it is
   * written after them */
  uint32_t linked = 0; /* edges whose producer may still decrement fanin */
  uint32_t idx = nd ? (uint32_t)(r->dep_head % r->ndeps) : 0;
  for (uint32_t i = 0; i < nd; i++, idx = idx + 1 == r->ndeps ? 0 : idx + 1) {
    r->dep_head++;
    dep_node *n = &r->deps[idx];
    task *p = run_slot(r, r->depbuf[i]);
    r->dep_from[idx] = r->depbuf[i];
    n->consumer = t;
    n->next = -1;
    /* acquire (load and failed CAS): seeing CLOSED means p's completion,
     * and so its kernel's writes, happen-before this task is published */
    int64_t head = atomic_load_explicit(&p->fanout_head, memory_order_acquire);
    for (;;) {
      if (head == FANOUT_CLOSED) break; /* its edge is undone below */
      n->next = head;
      /* release pairs with complete_task's exchange: node contents and the
       * fanin increment are visible to the producer */
      if (atomic_compare_exchange_weak_explicit(&p->fanout_head, &head, (int64_t)idx,
                                                memory_order_release, memory_order_acquire)) {
        linked++;
        break;
      }
    }
  }
  /* the edges to producers that had already closed their lists are
   * undone in one step: acq_rel pairs with producers' decrements. With
   * no producer linked nobody else touches fanin: the task is ready,
   * and its push to a ready queue publishes the slot (release); with
   * every one linked, the last producer to finish makes it ready */
  int32_t undo = (int32_t)(nd - linked);
  if (linked == 0 ||
      (undo && atomic_fetch_sub_explicit(&t->fanin, undo, memory_order_acq_rel) == undo))
    sched_make_ready(r, t);
  else
    sched_orch_flush(r); /* it may wait on tasks gathered or batched */
  if (r->ctl) schedule_after_submit(r);
  if (rp.mask) return redux_submitted(r, &rp, id, priority);
  return PTO_OK;
}

int pto_submit(pto_orch *o, int kernel_id, pto_args *args, const pto_submit_opts *opts,
               pto_task_id *id) {
  if (id) *id = PTO_TASK_NONE;
  int rc = orch_gate(o, "pto_submit");
  if (rc) return rc;
  if (kernel_id == -1 || kernel_id == KERNEL_REDUX_COMBINE) /* the runtime's own ids */
    return submit_fail(o->run, PTO_EINVAL,
                       "unknown kernel id %d (%d kernels registered; an id comes from "
                       "pto_kernel_register*)",
                       kernel_id, o->run->chip->nkernels);
  return submit(o->run, kernel_id, args, opts, id);
}

int pto_submit_dummy(pto_orch *o, pto_args *args, const pto_submit_opts *opts, pto_task_id *id) {
  if (id) *id = PTO_TASK_NONE;
  int rc = orch_gate(o, "pto_submit_dummy");
  return rc ? rc : submit(o->run, -1, args, opts, id);
}

/* ---- scopes ---- */

int pto_scope_begin(pto_orch *o, pto_scope_mode mode) {
  int rc = orch_gate(o, "pto_scope_begin");
  if (rc) return rc;
  pto_run *r = o->run;
  if (mode != PTO_SCOPE_AUTO && mode != PTO_SCOPE_MANUAL)
    return submit_fail(r, PTO_EINVAL, "scope_begin: unknown mode %d", (int)mode);
  if (r->scope_depth >= PTO_MAX_SCOPE_DEPTH) {
    run_fail(r, PTO_ESCOPE_OVERFLOW, PTO_TASK_NONE, -1,
             "scope_begin at depth %d: at most %d nested scopes", r->scope_depth,
             PTO_MAX_SCOPE_DEPTH);
    return run_latched(r);
  }
  if (mode == PTO_SCOPE_AUTO && in_manual_scope(r))
    return submit_fail(r, PTO_EINVAL, "an automatic scope cannot be nested in a manual scope");
  r->scope_depth++;
  r->scopes[r->scope_depth].begin = r->next_id;
  r->scopes[r->scope_depth].mode = mode;
  return PTO_OK;
}

int pto_orch_batch_begin(pto_orch *o) {
  int rc = orch_gate(o, "pto_orch_batch_begin");
  if (rc) return rc;
  pto_run *r = o->run;
  if (r->batch_depth == INT32_MAX)
    return submit_fail(r, PTO_EINVAL, "pto_orch_batch_begin: %d batches open", r->batch_depth);
  r->batch_depth++;
  return PTO_OK;
}

int pto_orch_batch_end(pto_orch *o) {
  int rc = orch_gate(o, "pto_orch_batch_end");
  if (rc) return rc;
  pto_run *r = o->run;
  if (r->batch_depth == 0)
    return submit_fail(r, PTO_EINVAL, "pto_orch_batch_end without pto_orch_batch_begin");
  if (--r->batch_depth == 0) sched_orch_flush(r);
  return PTO_OK;
}

int pto_scope_end(pto_orch *o) {
  int rc = orch_gate(o, "pto_scope_end");
  if (rc) return rc;
  pto_run *r = o->run;
  if (r->scope_depth == 0) return submit_fail(r, PTO_EINVAL, "scope_end without scope_begin");
  /* reductions fold before the scope's buffers may go (redux.h); a
   * failure latches the run, and the scope closes all the same */
  rc = redux_flush_all(r);
  hold_end(r, r->scopes[r->scope_depth].begin);
  r->scope_depth--;
  orch_retire(r);
  return rc;
}

/* ---- host access to tensor data ---- */

typedef struct done_wait {
  pto_run *r;
  uint32_t n;
} done_wait;

static bool all_done(void *p) {
  done_wait *w = p;
  pto_run *r = w->r;
  if (run_stopping(r)) return true;
  for (uint32_t i = 0; i < w->n; i++) {
    pto_task_id id = r->depbuf[i];
    /* acquire pairs with the completion's release: the task's writes are
     * visible (a task not retired still owns its slot) */
    if (id >= r->retired && task_state(r, run_slot(r, id), memory_order_acquire) != TASK_DONE)
      return false;
  }
  /* Retired once all are done, after their states were read: a wait
   * leaves what it waited for retired (its slot and heap range free).
   * Retiring before the reads, as this did, missed a task that completed
   * between the two (test_orch_sizes' stale-output case failed once under
   * TSan with the suite's other tests beside it: the range was not
   * reused). */
  orch_retire(r);
  return true;
}

static int wait_tasks(pto_run *r, uint32_t n, int64_t timeout_ms, const char *what) {
  done_wait w = {r, n};
  uint64_t deadline = pto_deadline_ms(timeout_ms < 0 ? r->cfg->watchdog_ms : timeout_ms);
  if (!orch_wait_completions(r, 1, all_done, &w, deadline)) {
    pto_task_id stuck = PTO_TASK_NONE;
    for (uint32_t i = 0; i < n && stuck < 0; i++)
      if (task_state(r, run_slot(r, r->depbuf[i]), memory_order_acquire) != TASK_DONE)
        stuck = r->depbuf[i];
    run_fail(r, PTO_ETENSOR_WAIT_TIMEOUT, stuck, -1, "%s: task %lld not finished after %lld ms",
             what, (long long)stuck,
             (long long)(timeout_ms < 0 ? r->cfg->watchdog_ms : timeout_ms));
  }
  return run_latched(r);
}

/* Waits for the tasks that touch t's bytes (o passed orch_gate). */
static int host_access(pto_orch *o, const pto_tensor *t, tmap_mode mode, int64_t timeout_ms,
                       const char *what) {
  pto_run *r = o->run;
  if (r->capture) return graph_capture_refuse(r, what);
  if (!t || tensor_check(t, false))
    return submit_fail(r, PTO_EINVAL, "%s: NULL or invalid tensor view", what);
  char why[200];
  const char *stale =
      heap_live_problem(&r->live, &r->heap, r->held, r->held_until, r->nheld, t, why, sizeof why);
  if (stale) return submit_fail(r, PTO_EINVAL, "%s: %s", what, stale);
  int rc = redux_flush_overlapping(r, t); /* the host sees the folded result */
  if (rc) return rc;
  dep_collect dc = DEP_COLLECT(r, r->next_id);
  r->depbuf_n = 0;
  tmap_conflicts(&r->tm, t, mode, r->retired, collect_dep, &dc);
  if (dc.oom) return submit_fail(r, PTO_ENOMEM, "%s: dependency list allocation failed", what);
  /* the marks name the next task id; clear them so its own submit lists them again */
  for (uint32_t i = 0; i < r->depbuf_n; i++)
    run_slot(r, r->depbuf[i])->dep_mark = PTO_TASK_NONE;
  return wait_tasks(r, r->depbuf_n, timeout_ms, what);
}

int pto_orch_read(pto_orch *o, const pto_tensor *t, void *dst, int64_t timeout_ms) {
  int rc = orch_gate(o, "pto_orch_read");
  if (rc) return rc;
  if (!dst) return submit_fail(o->run, PTO_EINVAL, "pto_orch_read: dst is NULL");
  rc = host_access(o, t, TMAP_READ, timeout_ms, "pto_orch_read");
  if (!rc) pto_tensor_copy_out(t, dst);
  return rc;
}

int pto_orch_write(pto_orch *o, const pto_tensor *t, const void *src, int64_t timeout_ms) {
  int rc = orch_gate(o, "pto_orch_write");
  if (rc) return rc;
  if (!src) return submit_fail(o->run, PTO_EINVAL, "pto_orch_write: src is NULL");
  rc = host_access(o, t, TMAP_WRITE, timeout_ms, "pto_orch_write");
  if (!rc) pto_tensor_copy_in(t, src);
  return rc;
}

int pto_orch_wait_task(pto_orch *o, pto_task_id id, int64_t timeout_ms) {
  int rc = orch_gate(o, "pto_orch_wait_task");
  if (rc) return rc;
  pto_run *r = o->run;
  if (r->capture) return graph_capture_refuse(r, "pto_orch_wait_task");
  if (id < 0 || id >= r->next_id)
    return submit_fail(r, PTO_EINVAL, "pto_orch_wait_task: %lld is not a submitted task",
                       (long long)id);
  r->depbuf[0] = id;
  return wait_tasks(r, 1, timeout_ms, "pto_orch_wait_task");
}

/* Any thread may call it during the run: run_fail is the latch every
 * thread of a run reports through. */
int pto_orch_fatal(pto_orch *o, const char *fmt, ...) {
  /* never latched into an idle run, or another run */
  if (!orch_live(o)) return orch_refuse_stale(o, "pto_orch_fatal");
  char msg[400] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  run_fail(o->run, PTO_EFATAL, PTO_TASK_NONE, -1, "%s", msg);
  return run_latched(o->run);
}

int pto_orch_status(const pto_orch *o) {
  return orch_live(o) ? run_latched(o->run) : orch_refuse_stale(o, "pto_orch_status");
}
pto_chip *pto_orch_chip(pto_orch *o) { return orch_live(o) ? o->run->chip : NULL; }

/* ---- end of the orchestration ---- */

static bool all_completed(void *p) {
  pto_run *r = p;
  /* acquire pairs with the release increment in the completion path */
  /* >=: more completions than tasks (a defect) must end the wait too, for
   * the run's end to name it (run_books_broken) instead of hanging */
  return run_stopping(r) || atomic_load_explicit(&r->completed, memory_order_acquire) >=
                                atomic_load_explicit(&r->submitted, memory_order_relaxed);
}

void orch_finish(pto_run *r) {
  if (!run_latched(r)) redux_flush_all(r); /* a failure latches: the wait below ends */
  /* an orchestration that forgets scope_end is not an error: close them,
   * until one fails. A run that latched meanwhile (a kernel, the watchdog,
   * pto_orch_fatal from another thread) is refused at the gate and closes
   * nothing: looping on until the depth reached 0 spun forever */
  while (r->scope_depth > 0 && !run_latched(r))
    /* still live: on the orchestrator's thread */
    if (pto_scope_end(atomic_load_explicit(&r->orch_live, memory_order_relaxed))) break;
  /* a batch left open is closed, as scopes are */
  r->batch_depth = 0;
  sched_orch_flush(r);
  atomic_store_explicit(&r->orch_done, 1, memory_order_seq_cst); /* watchdog reads it */
  sched_orch_done(r);
  /* No deadline here: the watchdog turns any stall into a latched error. */
  while (!orch_wait_completions(r, INT64_MAX, all_completed, r, UINT64_MAX)) {
  }
  orch_retire_all(r);
  orch_retire(r);
}
