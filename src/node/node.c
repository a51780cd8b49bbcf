/* node.c — the node runtime on the parent side: leases, run-unique names,
 * forking the children, the start-up and control deadlines, node tasks
 * (dependency inference, dispatch of single, group and host tasks,
 * poisoning), domain allocation and release, the merge of the ranks'
 * trace files at the end of a run (rank_trace.c), and the cleanup that
 * leaves no process, shared object or temporary file behind when a child
 * dies or hangs. The parent is single-threaded: it forks, and it must not
 * start threads. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/options.h"
#include "common/region.h"
#include "common/tensor_check.h"
#include "common/trace.h"
#include "node/lease.h"
#include "node/node_internal.h"
#include "node/run_guard.h"

#define BLOCK_SLICE_MS   100 /* longest the parent sleeps before re-checking deadlines */
#define NODE_SPACE_ALIGN (2u << 20)

void pto_node_config_init(pto_node_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->nchips = 2;
  pto_chip_config_init(&cfg->chip);
  cfg->host_bytes = 64u << 20;
  cfg->window_space = 1u << 30;
  cfg->startup_timeout_ms = pto_option(PTO_OPT_NODE_STARTUP_MS);
  cfg->control_timeout_ms = pto_option(PTO_OPT_NODE_CONTROL_MS);
  cfg->task_timeout_ms = -1;
  cfg->host_task_timeout_ms = pto_option(PTO_OPT_NODE_HOST_TASK_MS);
  cfg->tensormap_entries = (uint32_t)pto_option(PTO_OPT_NODE_TENSORMAP_ENTRIES);
  cfg->lease_wait_ms = 0;
  cfg->wait_timeout_ms = pto_option(PTO_OPT_NODE_WAIT_MS);
}

static void set_err(pto_error_info *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(pto_error_info *e, int code, const char *fmt, ...) {
  memset(e, 0, sizeof *e);
  e->code = code;
  e->task_id = PTO_TASK_NONE;
  e->core_id = -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->details, sizeof e->details, fmt, ap);
  va_end(ap);
}

static const char *slot_kind(const pto_node *n, int s) {
  return s < n->cfg.nchips ? "chip rank" : "host worker";
}
static int slot_index(const pto_node *n, int s) {
  return s < n->cfg.nchips ? s : s - n->cfg.nchips;
}

/* ---- names ---- */

static void unlink_domain(const comm_domain_desc *d) {
  for (int r = 0; r < d->nranks; r++) {
    char name[COMM_PREFIX_MAX + 16];
    comm_shm_name(d, r, name, sizeof name);
    shm_unlink(name);
  }
}

/* ---- children ---- */

static bool reap(pto_node *n) {
  bool died = false;
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->alive) continue;
    int st;
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
      c->alive = false;
      c->wstatus = st;
      died = true;
    }
  }
  return died;
}

static void describe_exit(const pto_node *n, int s, char *buf, size_t len) {
  const child_slot *c = &n->child[s];
  int st = c->wstatus;
  char how[96];
  if (WIFSIGNALED(st))
    snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(st),
             strsignal(WTERMSIG(st)));
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
    snprintf(how, sizeof how, "failed to start (chip creation or chip_init failed)");
  else
    snprintf(how, sizeof how, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  if (s < n->cfg.nchips)
    snprintf(buf, len, "chip rank %d (device %d, pid %d) %s", s, n->device_ids[s], (int)c->pid,
             how);
  else
    snprintf(buf, len, "host worker %d (pid %d) %s", s - n->cfg.nchips, (int)c->pid, how);
}

/* Kills every child, unlinks every object of the run; the node stays failed. */
static void kill_all(pto_node *n) {
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].alive) kill(n->child[s].pid, SIGKILL);
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->alive) continue;
    while (waitpid(c->pid, &c->wstatus, 0) < 0 && errno == EINTR) {
    }
    c->alive = false;
  }
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    if (!n->dom_live[i]) continue;
    unlink_domain(&n->doms[i]);
    comm_domain_close(&n->observer, n->doms[i].id, false);
    n->dom_live[i] = false;
  }
  n->space_used = 0;
}

static int node_fatal(pto_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int node_fatal(pto_node *n, int code, const char *fmt, ...) {
  if (n->fatal) return n->fatal;
  n->fatal = code;
  memset(&n->fatal_err, 0, sizeof n->fatal_err);
  n->fatal_err.code = code;
  n->fatal_err.task_id = PTO_TASK_NONE;
  n->fatal_err.core_id = -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->fatal_err.details, sizeof n->fatal_err.details, fmt, ap);
  va_end(ap);
  kill_all(n);
  if (!n->cfg.quiet)
    fprintf(stderr, "pto node: %s: %s\n", pto_status_name(code), n->fatal_err.details);
  return code;
}

/* ---- tasks ---- */

static node_task *task_of(pto_node *n, int64_t id) {
  return id >= n->base_id && id < n->base_id + n->ntasks ? &n->tasks[id - n->base_id] : NULL;
}
static bool finished(const node_task *t) { return t->state == TS_DONE || t->state == TS_FAILED; }

/* ---- ready queues ---- */

static void q_push(pto_node *n, task_queue *q, node_task *t) {
  t->next_ready = -1;
  if (q->tail < 0)
    q->head = t->id;
  else
    task_of(n, q->tail)->next_ready = t->id;
  q->tail = t->id;
}

/* Unlinks `id` (whose predecessor in q is prev, -1 = none). */
static void q_unlink(pto_node *n, task_queue *q, int64_t prev, int64_t id) {
  int64_t next = task_of(n, id)->next_ready;
  if (prev < 0)
    q->head = next;
  else
    task_of(n, prev)->next_ready = next;
  if (q->tail == id) q->tail = prev;
}

static void q_reset(task_queue *q) { q->head = q->tail = -1; }

/* The queue a READY task waits in: its child's, any worker's, or the
 * group queue. */
static task_queue *queue_of(pto_node *n, const node_task *t) {
  if (t->nchildren > 1) return &n->ready_group;
  return t->children[0] < 0 ? &n->ready_any : &n->ready_slot[t->children[0]];
}

static void make_ready(pto_node *n, node_task *t) {
  t->state = TS_READY;
  q_push(n, queue_of(n, t), t);
}

static void add_consumer(node_task *p, int64_t id) {
  if (p->nconsumers && p->consumers[p->nconsumers - 1] == id) return;
  if (p->nconsumers == p->capconsumers) {
    int cap = p->capconsumers ? 2 * p->capconsumers : 4;
    int64_t *c = realloc(p->consumers, (size_t)cap * sizeof *c);
    if (!c) abort(); /* a few bytes: no sane recovery */
    p->consumers = c;
    p->capconsumers = cap;
  }
  p->consumers[p->nconsumers++] = id;
}

static void poison(pto_node *n, node_task *t, int64_t cause) {
  if (finished(t) || t->state == TS_RUNNING) return;
  t->state = TS_FAILED; /* a READY one stays queued: dispatch skips it */
  n->unfinished--;
  t->status = PTO_EPOISONED;
  set_err(&t->err, PTO_EPOISONED,
          "node task %" PRId64 " skipped: its dependency %" PRId64 " failed", t->id, cause);
  for (int i = 0; i < t->nconsumers; i++) {
    node_task *c = task_of(n, t->consumers[i]);
    if (c) poison(n, c, t->id);
  }
}

static void finish(pto_node *n, node_task *t) {
  t->state = t->status ? TS_FAILED : TS_DONE;
  n->unfinished--;
  if (t->status && !n->first_err) { /* the first root error; poisoned ones are not roots */
    n->first_err = t->status;
    n->first_info = t->err;
  }
  for (int i = 0; i < t->nconsumers; i++) {
    node_task *c = task_of(n, t->consumers[i]);
    if (!c) continue;
    if (t->status)
      poison(n, c, t->id);
    else if (c->state == TS_WAITING && --c->deps_left == 0)
      make_ready(n, c);
  }
  while (n->oldest_live < n->base_id + n->ntasks && task_of(n, n->oldest_live)->state == TS_DONE)
    n->oldest_live++; /* stops at a failure, whose entries must keep poisoning */
}

static void part_done(pto_node *n, int s, const node_reply *r) {
  child_slot *c = &n->child[s];
  node_task *t = task_of(n, c->task);
  c->task = -1;
  if (!t) return;
  if (r->status && !t->status) {
    t->status = r->status;
    t->err = r->err;
    t->err.code = r->status;
    char d[sizeof t->err.details];
    snprintf(d, sizeof d, "%s", r->err.details);
    snprintf(t->err.details, sizeof t->err.details, "%s %d, node task %" PRId64 ": %.440s",
             slot_kind(n, s), slot_index(n, s), t->id, d);
  }
  if (--t->parts_left == 0) finish(n, t);
}

/* ---- progress ---- */

static void post(pto_node *n, int s, node_frame *f, int64_t task) {
  child_slot *c = &n->child[s];
  c->gen = mbox_post(&n->ctl->mbox[s], f);
  c->task = task;
  c->posted_ns = pto_now_ns();
  c->beat_seen = atomic_load_explicit(&n->ctl->mbox[s].beat, memory_order_relaxed);
  c->beat_ns = c->posted_ns;
  c->replied = false;
}

static bool reserved_mask[NODE_MAX_CHILDREN]; /* per pass; the parent is single-threaded */

static bool slot_free(const pto_node *n, int s) { return !n->child[s].gen && !reserved_mask[s]; }

/* Posts task t to child slots[0..k). */
static void launch(pto_node *n, node_task *t, const int *slots, int k) {
  static node_frame f; /* large; the parent is single-threaded */
  memset(&f, 0, sizeof f);
  f.type = FRAME_TASK;
  f.task_id = t->id;
  f.epoch = (uint32_t)(t->id + 1); /* never 0: a zeroed cell belongs to no task */
  f.chip_fn = t->chip_fn;
  f.host_fn = t->host_fn;
  f.host_arg = t->host_arg;
  f.args = t->args;
  f.trace_origin_ns = n->trace_path ? n->trace_origin_ns : 0;
  f.group_size = k;
  f.group = 0;
  for (int i = 0; i < k; i++)
    if (slots[i] < 64) f.group |= 1ull << slots[i];
  t->state = TS_RUNNING;
  t->parts_left = k;
  t->start_ns = pto_now_ns();
  for (int i = 0; i < k; i++) {
    f.group_rank = i;
    /* each chip task of a rank writes a trace file of its own */
    f.trace_run = t->kind == TASK_CHIP && n->trace_path ? n->trace_runs[slots[i]]++ : 0;
    post(n, slots[i], &f, t->id);
  }
}

/* The first READY task of q (dropping tasks poisoned while queued), or NULL. */
static node_task *q_first_ready(pto_node *n, task_queue *q) {
  while (q->head >= 0) {
    node_task *t = task_of(n, q->head);
    if (t->state == TS_READY) return t;
    q_unlink(n, q, -1, q->head);
  }
  return NULL;
}

/* Starts READY tasks on idle children. A task that waits for busy children
 * keeps them reserved for it, so later tasks cannot starve it. Looks only
 * at the heads of the ready queues (and at group tasks until no chip is
 * left free): no pass rescans the live tasks. */
static void dispatch(pto_node *n) {
  memset(reserved_mask, 0, sizeof reserved_mask);
  int free_chips = 0;
  for (int s = 0; s < n->cfg.nchips; s++)
    free_chips += slot_free(n, s);
  /* group tasks, in the order they became ready: started when all their
   * chips are free, else those chips are kept for them */
  for (int64_t prev = -1, id = n->ready_group.head; id >= 0 && free_chips > 0;) {
    node_task *t = task_of(n, id);
    int64_t next = t->next_ready;
    if (t->state != TS_READY) {
      q_unlink(n, &n->ready_group, prev, id);
    } else {
      bool ok = true;
      for (int i = 0; i < t->nchildren; i++)
        ok = ok && slot_free(n, t->children[i]);
      if (ok) q_unlink(n, &n->ready_group, prev, id);
      for (int i = 0; i < t->nchildren; i++) {
        free_chips -= slot_free(n, t->children[i]);
        reserved_mask[t->children[i]] = true;
      }
      if (ok) {
        launch(n, t, t->children, t->nchildren);
      } else {
        prev = id;
      }
    }
    id = next;
  }
  /* single-child tasks: the head of each child's queue */
  for (int s = 0; s < n->nchildren; s++) {
    task_queue *q = &n->ready_slot[s];
    node_task *t = q_first_ready(n, q);
    if (!t) continue;
    if (slot_free(n, s)) {
      q_unlink(n, q, -1, t->id);
      launch(n, t, &s, 1);
    }
    reserved_mask[s] = true; /* busy, or waited for by its queue */
  }
  /* host tasks for any worker: the free, unreserved workers */
  for (int w = 0; w < n->cfg.nworkers; w++) {
    int s = n->cfg.nchips + w;
    if (!slot_free(n, s)) continue;
    node_task *t = q_first_ready(n, &n->ready_any);
    if (!t) break;
    q_unlink(n, &n->ready_any, -1, t->id);
    launch(n, t, &s, 1);
  }
}

/* One non-blocking step: deaths, replies, deadlines, then dispatch. */
static int step(pto_node *n, bool may_dispatch) {
  if (n->fatal) return n->fatal;
  reap(n); /* the wait condition may have reaped already: look at `alive` */
  for (int s = 0; s < n->nchildren; s++)
    if (!n->child[s].alive) {
      char d[256];
      describe_exit(n, s, d, sizeof d);
      return node_fatal(n, PTO_ECHIP_DIED, "%s", d);
    }
  uint64_t now = pto_now_ns();
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    if (!c->gen) continue;
    node_reply r;
    if (mbox_poll_reply(&n->ctl->mbox[s], c->gen, &r)) {
      c->gen = 0;
      if (c->task >= 0) {
        part_done(n, s, &r);
      } else {
        c->reply = r;
        c->replied = true;
      }
      continue;
    }
    /* relaxed: a liveness counter, nothing is published through it */
    uint32_t beat = atomic_load_explicit(&n->ctl->mbox[s].beat, memory_order_relaxed);
    if (beat != c->beat_seen) {
      c->beat_seen = beat;
      c->beat_ns = now;
    } else if (n->cfg.control_timeout_ms >= 0 &&
               (now - c->beat_ns) / 1000000u > (uint64_t)n->cfg.control_timeout_ms) {
      return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                        "%s %d (pid %d) stopped responding: no heartbeat for %" PRId64
                        " ms (process stopped or frozen)",
                        slot_kind(n, s), slot_index(n, s), (int)c->pid, n->cfg.control_timeout_ms);
    }
    uint64_t age_ms = (now - c->posted_ns) / 1000000u;
    bool taken = mbox_taken(&n->ctl->mbox[s], c->gen);
    if ((!taken || c->task < 0) && n->cfg.control_timeout_ms >= 0 &&
        age_ms > (uint64_t)n->cfg.control_timeout_ms)
      return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                        "%s %d (pid %d) did not answer a control "
                        "message within %" PRId64 " ms",
                        slot_kind(n, s), slot_index(n, s), (int)c->pid, n->cfg.control_timeout_ms);
    if (c->task >= 0 && n->cfg.task_timeout_ms >= 0 && age_ms > (uint64_t)n->cfg.task_timeout_ms)
      return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                        "%s %d (pid %d) did not finish node task %" PRId64 " within %" PRId64 " ms",
                        slot_kind(n, s), slot_index(n, s), (int)c->pid, c->task,
                        n->cfg.task_timeout_ms);
    /* a host callback has no watchdog of its own: it gets a deadline by default */
    if (c->task >= 0 && s >= n->cfg.nchips && n->cfg.host_task_timeout_ms >= 0 &&
        age_ms > (uint64_t)n->cfg.host_task_timeout_ms)
      return node_fatal(n, PTO_ECONTROL_TIMEOUT,
                        "host worker %d (pid %d) did not finish node task %" PRId64
                        " within %" PRId64 " ms (host_task_timeout_ms)",
                        slot_index(n, s), (int)c->pid, c->task, n->cfg.host_task_timeout_ms);
  }
  if (may_dispatch && n->running) dispatch(n);
  return 0;
}

/* A reply arrived or a child died. (A child still starting is no reason
 * to wake: it signals the parent when its state changes, and a child that
 * fails to start exits, which reap() sees.) */
static bool anything(void *arg) {
  pto_node *n = arg;
  for (int s = 0; s < n->nchildren; s++) {
    child_slot *c = &n->child[s];
    /* relaxed: a wake-up hint; step() re-reads with acquire */
    if (c->gen && atomic_load_explicit(&n->ctl->mbox[s].done, memory_order_relaxed) == c->gen)
      return true;
  }
  return reap(n);
}

typedef bool (*node_pred)(pto_node *n, void *arg);

typedef struct wake_on {
  pto_node *n;
  node_pred pred;
  void *arg;
} wake_on;

static bool anything_or(void *arg) {
  wake_on *w = arg;
  return anything(w->n) || w->pred(w->n, w->arg);
}

/* Steps until pred holds, the node fails, or deadline_ns passes (PTO_E* code
 * `late` then). Sleeps in between until a reply, a death, pred (a child's
 * state change signals the parent too) or the next deadline check. */
static int until(pto_node *n, node_pred pred, void *arg, bool may_dispatch, uint64_t deadline_ns,
                 int late) {
  wake_on w = {n, pred, arg};
  for (;;) {
    int rc = step(n, may_dispatch);
    if (rc) return rc;
    if (pred(n, arg)) return 0;
    uint64_t now = pto_now_ns();
    if (now >= deadline_ns) return late;
    uint64_t slice = now + BLOCK_SLICE_MS * 1000000ull;
    pto_wait(&n->ctl->parent_ev, anything_or, &w, slice < deadline_ns ? slice : deadline_ns);
  }
}

/* ---- create / destroy ---- */

/* Refuses a config that cannot work, naming the field (err filled). */
static bool config_ok(const pto_node_config *cfg, pto_error_info *err) {
  if (cfg->nchips < 1 || cfg->nchips > PTO_NODE_MAX_CHIPS) {
    set_err(err, PTO_EINVAL, "node config: nchips is %d, must be 1..%d", cfg->nchips,
            PTO_NODE_MAX_CHIPS);
    return false;
  }
  if (cfg->nworkers < 0 || cfg->nworkers > PTO_NODE_MAX_WORKERS) {
    set_err(err, PTO_EINVAL, "node config: nworkers is %d, must be 0..%d", cfg->nworkers,
            PTO_NODE_MAX_WORKERS);
    return false;
  }
  for (int i = 0; cfg->device_ids && i < cfg->nchips; i++)
    if (cfg->device_ids[i] < 0) {
      set_err(err, PTO_EINVAL, "node config: device_ids[%d] is device id %d, must be >= 0", i,
              cfg->device_ids[i]);
      return false;
    }
  const char *zero = !cfg->host_bytes ? "host_bytes" : !cfg->window_space ? "window_space" : NULL;
  if (zero) {
    set_err(err, PTO_EINVAL, "node config: %s is 0", zero);
    return false;
  }
  if (cfg->tensormap_entries < PTO_MAX_TENSOR_ARGS) {
    set_err(err, PTO_EINVAL,
            "node config: tensormap_entries is %u, must be at least %d (one task's tensors)",
            cfg->tensormap_entries, PTO_MAX_TENSOR_ARGS);
    return false;
  }
  return true;
}

static bool all_started(pto_node *n, void *arg) {
  (void)arg;
  for (int s = 0; s < n->nchildren; s++)
    if (mbox_state(&n->ctl->mbox[s]) != CHILD_READY) return false;
  return true;
}

int pto_node_create(const pto_node_config *cfg, pto_node **out, pto_error_info *err) {
  pto_error_info local;
  if (!err) err = &local;
  set_err(err, 0, "%s", "");
  if (out) *out = NULL;
  if (!cfg || !out) {
    set_err(err, PTO_EINVAL, "pto_node_create: %s is NULL", !cfg ? "cfg" : "out");
    return PTO_EINVAL;
  }
  if (!config_ok(cfg, err)) return PTO_EINVAL;
  /* The chip configuration is checked here, where its details can be told,
   * not in the chip processes. */
  pto_chip *probe = NULL;
  int crc = pto_chip_create_ex(&cfg->chip, &probe, err);
  pto_chip_destroy(probe);
  if (crc) return crc;
  pto_node *n = calloc(1, sizeof *n);
  if (!n) return PTO_ENOMEM;
  n->cfg = *cfg;
  n->cfg.device_ids = NULL;
  n->cfg.trace_path = NULL; /* the caller's string; n->trace_path is ours */
  for (int i = 0; i < cfg->nchips; i++) {
    n->device_ids[i] = cfg->device_ids ? cfg->device_ids[i] : i;
    n->lease_fds[i] = -1;
  }
  char why[256] = "";
  int rc = lease_acquire(n->device_ids, cfg->nchips, cfg->lease_wait_ms, cfg->quiet, n->lease_fds,
                         why, sizeof why);
  if (rc) {
    set_err(err, rc, "%s", why);
    free(n);
    return rc;
  }
  run_guard_sweep(); /* objects of runs that are gone: see run_guard.h */
  static unsigned seq;
  n->parent_pid = getpid();
  snprintf(n->prefix, sizeof n->prefix, "/pto.%d.%u.%06" PRIx64, (int)getpid(), seq++,
           (pto_now_ns() ^ (uint64_t)(uintptr_t)n) & 0xffffff);
  rc = run_guard_begin(n->prefix, why, sizeof why);
  if (rc) {
    set_err(err, rc, "%s", why);
    lease_release(n->lease_fds, cfg->nchips);
    free(n);
    return rc;
  }
  if (cfg->trace_path) {
    char probe[PATH_MAX];
    n->trace_path = strdup(cfg->trace_path);
    rc = !n->trace_path                                                            ? PTO_ENOMEM
         : !node_rank_trace_path(n, cfg->nchips - 1, INT_MAX, probe, sizeof probe) ? PTO_EINVAL
                                                                                   : 0;
    if (rc) {
      set_err(err, rc, "node config: cannot use trace path '%.200s'", cfg->trace_path);
      free(n->trace_path);
      run_guard_end(n->prefix);
      lease_release(n->lease_fds, cfg->nchips);
      free(n);
      return rc;
    }
  }
  n->nchildren = cfg->nchips + cfg->nworkers;
  n->ctl_bytes = sizeof(node_ctl) + (size_t)n->nchildren * sizeof(node_mbox);
  /* anonymous shared memory: inherited by the children, gone with the last
   * process, so it can never outlive the run */
  n->ctl = mmap(NULL, n->ctl_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  n->host = mmap(NULL, cfg->host_bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (n->ctl == MAP_FAILED || n->host == MAP_FAILED ||
      comm_space_reserve(cfg->window_space, &n->space) != 0) {
    set_err(err, PTO_ESYSTEM, "node: cannot map shared memory: %s", strerror(errno));
    if (n->ctl != MAP_FAILED) munmap(n->ctl, n->ctl_bytes);
    if (n->host != MAP_FAILED) munmap(n->host, cfg->host_bytes);
    run_guard_end(n->prefix);
    lease_release(n->lease_fds, cfg->nchips);
    free(n->trace_path);
    free(n);
    return PTO_ESYSTEM;
  }
  pto_event_init(&n->ctl->parent_ev, true);
  for (int s = 0; s < n->nchildren; s++)
    mbox_init(&n->ctl->mbox[s]);
  comm_init(&n->observer, -1);
  fflush(NULL); /* children must not flush the parent's buffered output */
  for (int s = 0; s < n->nchildren; s++) {
    pid_t pid = fork();
    if (pid == 0) node_child_main(n, s);
    if (pid < 0) {
      node_fatal(n, PTO_ESYSTEM, "fork of %s %d failed: %s", slot_kind(n, s), slot_index(n, s),
                 strerror(errno));
      break;
    }
    n->child[s] = (child_slot){.pid = pid, .alive = true, .task = -1};
    run_guard_child(n->prefix, pid);
  }
  if (!n->fatal) {
    rc = until(n, all_started, NULL, false, pto_deadline_ms(cfg->startup_timeout_ms),
               PTO_ESTARTUP_TIMEOUT);
    if (rc == PTO_ESTARTUP_TIMEOUT) {
      int s = 0;
      while (s < n->nchildren && mbox_state(&n->ctl->mbox[s]) == CHILD_READY)
        s++;
      node_fatal(n, rc, "%s %d (pid %d) did not report ready within %" PRId64 " ms",
                 slot_kind(n, s), slot_index(n, s), (int)n->child[s].pid, cfg->startup_timeout_ms);
    }
  }
  if (n->fatal) {
    *err = n->fatal_err;
    rc = n->fatal;
    pto_node_destroy(n);
    return rc;
  }
  n->next_dom = 1;
  *out = n;
  return 0;
}

static bool all_exited(pto_node *n, void *arg) {
  (void)arg;
  reap(n);
  for (int s = 0; s < n->nchildren; s++)
    if (n->child[s].alive) return false;
  return true;
}

void pto_node_destroy(pto_node *n) {
  if (!n) return;
  if (!n->fatal) {
    static node_frame f;
    memset(&f, 0, sizeof f);
    f.type = FRAME_EXIT;
    for (int s = 0; s < n->nchildren; s++)
      if (n->child[s].alive && !n->child[s].gen) post(n, s, &f, -1);
    /* children exiting is expected here: wait for that, not via step() */
    uint64_t dl = pto_deadline_ms(n->cfg.control_timeout_ms);
    while (!all_exited(n, NULL) && pto_now_ns() < dl)
      pto_wait(&n->ctl->parent_ev, anything, n, pto_now_ns() + 20000000ull);
  }
  kill_all(n); /* whatever is left: stuck children, domains */
  /* every object of the run, its guard last */
  run_guard_end(n->prefix);
  comm_fini(&n->observer, false);
  comm_space_release(n->space, n->cfg.window_space);
  munmap(n->host, n->cfg.host_bytes);
  munmap(n->ctl, n->ctl_bytes);
  lease_release(n->lease_fds, n->cfg.nchips);
  free(n->trace_path);
  free(n);
}

/* ---- host memory ---- */

void *pto_node_host_alloc(pto_node *n, size_t bytes) {
  if (!n || !bytes) return NULL;
  /* host_used <= host_bytes, so `at` cannot wrap; at + bytes can */
  size_t at = (n->host_used + 63) & ~(size_t)63, end;
  if (at > n->cfg.host_bytes || __builtin_add_overflow(at, bytes, &end) || end > n->cfg.host_bytes)
    return NULL;
  n->host_used = end;
  return n->host + at;
}

int pto_node_host_tensor(pto_node *n, pto_dtype dt, int ndims, const int64_t *shape,
                         pto_tensor *out) {
  if (!n || !shape || !out || ndims < 1 || ndims > PTO_MAX_DIMS || dt < 0 || dt >= PTO_DTYPE_COUNT)
    return PTO_EINVAL;
  size_t bytes = pto_dtype_size(dt);
  for (int i = 0; i < ndims; i++) {
    if (shape[i] < 1) return PTO_EINVAL;
    if (__builtin_mul_overflow(bytes, (uint64_t)shape[i], &bytes)) return PTO_ENOMEM;
  }
  void *p = pto_node_host_alloc(n, bytes);
  if (!p) return PTO_ENOMEM;
  return pto_tensor_init(out, p, bytes, dt, ndims, shape);
}

const char *pto_node_shm_prefix(const pto_node *n) { return n ? n->prefix + 1 : NULL; }

int pto_node_child_pids(const pto_node *n, int *pids, int max) {
  if (!n || !pids || max < 0) return PTO_EINVAL;
  int k = 0;
  for (int s = 0; s < n->nchildren && k < max; s++)
    pids[k++] = (int)n->child[s].pid;
  return k;
}

/* An orchestration-side error also fails the run (like a chip's submit). */
static int latch(pto_node *n, int rc, const char *what) {
  if (rc && !n->fatal && !n->first_err) {
    n->first_err = rc;
    set_err(&n->first_info, rc, "node orchestration: %s failed: %s", what, pto_strerror(rc));
  }
  return rc;
}

/* ---- submission ---- */

typedef struct dep_ctx {
  pto_node *n;
  node_task *t;
  bool poisoned;
  int64_t cause;
} dep_ctx;

/* True: the new task is ordered after producer (done, failed so the new
 * task is poisoned, or an edge). */
static bool on_dep(void *arg, int64_t producer) {
  dep_ctx *d = arg;
  node_task *p = task_of(d->n, producer);
  if (p == d->t) return false;
  if (!p || p->state == TS_DONE) return true;
  if (p->state == TS_FAILED) {
    d->poisoned = true;
    d->cause = producer;
    return true;
  }
  if (p->nconsumers && p->consumers[p->nconsumers - 1] == d->t->id) return true;
  add_consumer(p, d->t->id);
  d->t->deps_left++;
  return true;
}

/* Where a view may live: node host memory, or the windows of a live
 * domain (both mapped at the same address in every process of the node).
 * Returns NULL, or why not (in why[len]). */
static const char *view_problem(const pto_node *n, const pto_tensor *t, char *why, size_t len) {
  const char *p = tensor_problem(t, false, why, len);
  if (p) return p;
  uint64_t a, z; /* absolute addresses of the bytes it touches */
  region_span(t, &a, &z);
  if (a >= (uintptr_t)n->host && z <= (uintptr_t)n->host + n->cfg.host_bytes) return NULL;
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    const comm_domain_desc *d = &n->doms[i];
    if (n->dom_live[i] && a >= d->base && z <= d->base + d->win_bytes * (uint64_t)d->nranks)
      return NULL;
  }
  snprintf(why, len,
           "its bytes [%p, %p) are neither node host memory (pto_node_host_tensor) nor a window "
           "of a live domain (pto_node_window_tensor): the node's other processes cannot see them",
           (void *)a, (void *)z);
  return why;
}

/* Orchestration-side argument errors name what was wrong. */
static int refuse(pto_node *n, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(pto_node *n, const char *what, const char *fmt, ...) {
  char msg[sizeof n->first_info.details - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!n->fatal && !n->first_err) {
    n->first_err = PTO_EINVAL;
    set_err(&n->first_info, PTO_EINVAL, "node orchestration: %s: %s", what, msg);
  }
  return PTO_EINVAL;
}

static int check_args(pto_node *n, const pto_args *args, const char *what) {
  if (!args) return 0;
  if (args->ntensors < 0 || args->ntensors > PTO_MAX_TENSOR_ARGS || args->nscalars < 0 ||
      args->nscalars > PTO_MAX_SCALAR_ARGS)
    return refuse(n, what, "args hold %d tensors and %d scalars (at most %d and %d)",
                  args->ntensors, args->nscalars, PTO_MAX_TENSOR_ARGS, PTO_MAX_SCALAR_ARGS);
  for (int i = 0; i < args->ntensors; i++) {
    int m = args->access[i];
    if (m == PTO_OUTPUT)
      return refuse(n, what,
                    "tensor %d is PTO_OUTPUT, which node tasks do not support (use "
                    "pto_node_host_tensor and PTO_OUTPUT_EXISTING)",
                    i);
    if (m != PTO_INPUT && m != PTO_OUTPUT_EXISTING && m != PTO_INOUT && m != PTO_NO_DEP)
      return refuse(n, what, "tensor %d has access mode %d, not a pto_access", i, m);
    char why[256];
    if (view_problem(n, &args->tensors[i], why, sizeof why))
      return refuse(n, what, "tensor %d: %s", i, why);
  }
  return 0;
}

typedef struct room_wait {
  int64_t oldest; /* oldest_live when the TensorMap was found full */
  int64_t want;   /* retire this many tasks before trying again */
  node_task *self;
} room_wait;

/* Every task but the one being submitted has finished. */
static bool others_finished(const pto_node *n, const node_task *self) {
  return n->unfinished == (finished(self) ? 0 : 1);
}

static bool tmap_room(pto_node *n, void *arg) {
  room_wait *w = arg;
  return n->oldest_live - w->oldest >= w->want || others_finished(n, w->self);
}

static int refuse_overflow(pto_node *n, const node_task *t) {
  if (!n->fatal && !n->first_err) {
    n->first_err = PTO_ETENSORMAP_OVERFLOW;
    set_err(&n->first_info, PTO_ETENSORMAP_OVERFLOW,
            "node orchestration: submit of node task %" PRId64 ": the node TensorMap is full "
            "(%u entries, pto_node_config.tensormap_entries) and cannot drain: node task %" PRId64
            " failed, and the entries of every task after it are kept so that readers of its "
            "outputs are poisoned; raise tensormap_entries",
            t->id, n->tm.capacity, n->oldest_live);
  }
  return PTO_ETENSORMAP_OVERFLOW;
}

/* Records one access of task t, waiting for room while the TensorMap is
 * full (back-pressure: the children go on running, tasks retire and their
 * entries are dropped). Full with every other task finished means the
 * oldest live task failed: its entries and every later task's are kept to
 * poison later readers, so no room can come. */
static int record_access(pto_node *n, node_task *t, const pto_tensor *v, tmap_mode mode,
                         dep_ctx *d) {
  for (;;) {
    int rc = tmap_access(&n->tm, v, mode, t->id, n->oldest_live, on_dep, d);
    if (rc != PTO_ETENSORMAP_OVERFLOW) return rc;
    if (others_finished(n, t)) return refuse_overflow(n, t);
    /* retry after a sixteenth of the live tasks retired: the purge of a full
     * map walks all of it, so it must not run for every retired task */
    room_wait w = {n->oldest_live, 1 + (n->next_id - n->oldest_live) / 16, t};
    rc = until(n, tmap_room, &w, true, UINT64_MAX, 0);
    if (rc) return rc;
  }
}

static int submit(pto_node_orch *no, task_kind kind, const int *slots, int k, pto_orch_fn cfn,
                  pto_host_fn hfn, void *harg, pto_args *args, pto_task_id *id, const char *what) {
  pto_node *n = no->node;
  if (id) *id = PTO_TASK_NONE;
  if (n->fatal) return n->fatal;
  if (args && args->error) return args->error;
  int rc = check_args(n, args, what);
  if (rc) return rc;
  int64_t gone = n->oldest_live - n->base_id; /* retired: nobody looks them up */
  if (n->ntasks == n->captasks && gone > 0 && gone >= n->ntasks / 2) {
    /* drop them instead of growing: the array holds about the live tasks,
     * not every task of the run (amortized: at least half moved out) */
    for (int64_t i = 0; i < gone; i++)
      free(n->tasks[i].consumers);
    memmove(n->tasks, n->tasks + gone, (size_t)(n->ntasks - gone) * sizeof *n->tasks);
    n->ntasks -= gone;
    n->base_id = n->oldest_live;
  }
  if (n->ntasks == n->captasks) {
    int64_t cap = n->captasks ? 2 * n->captasks : 64;
    size_t bytes;
    node_task *t =
        __builtin_mul_overflow((size_t)cap, sizeof *t, &bytes) ? NULL : realloc(n->tasks, bytes);
    if (!t) return PTO_ENOMEM;
    n->tasks = t;
    n->captasks = cap;
  }
  /* the task exists from here on (its producers may finish while a full
   * TensorMap makes it wait); the extra dependency keeps it from starting
   * before all its accesses are recorded */
  node_task *t = &n->tasks[n->ntasks];
  memset(t, 0, sizeof *t);
  t->id = n->next_id;
  t->kind = kind;
  t->nchildren = k;
  memcpy(t->children, slots, sizeof(int) * (size_t)k);
  t->chip_fn = cfn;
  t->host_fn = hfn;
  t->host_arg = harg;
  if (args)
    t->args = *args;
  else
    pto_args_init(&t->args);
  t->state = TS_WAITING;
  t->deps_left = 1;
  t->next_ready = -1;
  n->ntasks++;
  n->next_id++;
  n->unfinished++;
  dep_ctx d = {n, t, false, -1};
  for (int i = 0; i < t->args.ntensors && !rc; i++) {
    int m = t->args.access[i];
    if (m == PTO_NO_DEP) continue;
    tmap_mode mode = m == PTO_INPUT ? TMAP_READ : m == PTO_INOUT ? TMAP_READ_WRITE : TMAP_WRITE;
    rc = record_access(n, t, &t->args.tensors[i], mode, &d);
  }
  if (rc) { /* part of its accesses are recorded: it fails, and poisons their readers */
    if (!finished(t)) {
      t->status = rc;
      set_err(&t->err, rc, "node task %" PRId64 " could not be submitted: %s", t->id,
              pto_strerror(rc));
      finish(n, t);
    }
    return rc;
  }
  if (id) *id = t->id;
  if (finished(t)) { /* poisoned while it waited for room */
  } else if (d.poisoned) {
    poison(n, t, d.cause);
  } else if (--t->deps_left == 0) {
    make_ready(n, t);
  }
  return step(n, true);
}

int pto_node_submit(pto_node_orch *no, int chip, pto_orch_fn fn, pto_args *args, pto_task_id *id) {
  if (!no) return PTO_EINVAL;
  if (!fn || chip < 0 || chip >= no->node->cfg.nchips) return latch(no->node, PTO_EINVAL, "submit");
  return latch(no->node, submit(no, TASK_CHIP, &chip, 1, fn, NULL, NULL, args, id, "submit"),
               "submit");
}

int pto_node_submit_group(pto_node_orch *no, const int *chips, int k, pto_orch_fn fn,
                          pto_args *args, pto_task_id *id) {
  if (!no) return PTO_EINVAL;
  if (!fn || !chips || k < 1 || k > no->node->cfg.nchips)
    return latch(no->node, PTO_EINVAL, "submit_group");
  for (int i = 0; i < k; i++) {
    if (chips[i] < 0 || chips[i] >= no->node->cfg.nchips)
      return latch(no->node, PTO_EINVAL, "submit_group");
    for (int j = 0; j < i; j++)
      if (chips[j] == chips[i]) return latch(no->node, PTO_EINVAL, "submit_group");
  }
  return latch(no->node, submit(no, TASK_CHIP, chips, k, fn, NULL, NULL, args, id, "submit_group"),
               "submit_group");
}

int pto_node_submit_host(pto_node_orch *no, int worker, pto_host_fn fn, void *arg, pto_args *args,
                         pto_task_id *id) {
  if (!no) return PTO_EINVAL;
  if (!fn || no->node->cfg.nworkers == 0 || worker >= no->node->cfg.nworkers)
    return latch(no->node, PTO_EINVAL, "submit_host");
  int slot = worker < 0 ? -1 : no->node->cfg.nchips + worker;
  return latch(no->node, submit(no, TASK_HOST, &slot, 1, NULL, fn, arg, args, id, "submit_host"),
               "submit_host");
}

static bool all_finished(pto_node *n, void *arg) {
  (void)arg;
  return n->unfinished == 0;
}

int pto_node_wait_all(pto_node_orch *no) {
  if (!no) return PTO_EINVAL;
  pto_node *n = no->node;
  int rc = until(n, all_finished, NULL, true, UINT64_MAX, 0);
  return rc ? rc : n->first_err;
}

typedef struct read_wait {
  int64_t ids[64];
  int n;
  bool overflow;
} read_wait;

static bool on_writer(void *arg, int64_t producer) {
  read_wait *w = arg;
  if (w->n < 64)
    w->ids[w->n++] = producer;
  else
    w->overflow = true;
  return false; /* tmap_conflicts records nothing */
}

static bool writers_done(pto_node *n, void *arg) {
  read_wait *w = arg;
  if (w->overflow) return all_finished(n, NULL);
  for (int i = 0; i < w->n; i++) {
    node_task *t = task_of(n, w->ids[i]);
    if (t && !finished(t)) return false;
  }
  return true;
}

int pto_node_read(pto_node_orch *no, const pto_tensor *t, void *dst) {
  if (!no) return PTO_EINVAL;
  pto_node *n = no->node;
  char why[256];
  if (!dst) return refuse(n, "read", "dst is NULL");
  if (view_problem(n, t, why, sizeof why)) return refuse(n, "read", "the tensor: %s", why);
  read_wait w = {{0}, 0, false};
  tmap_conflicts(&n->tm, t, TMAP_READ, n->oldest_live, on_writer, &w);
  int rc = until(n, writers_done, &w, true, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < w.n; i++) {
    node_task *p = task_of(n, w.ids[i]);
    if (p && p->state == TS_FAILED) return PTO_EPOISONED;
  }
  pto_tensor_copy_out(t, dst);
  return 0;
}

pto_node *pto_node_orch_node(pto_node_orch *no) { return no ? no->node : NULL; }

/* ---- domains ---- */

typedef struct ctl_wait {
  const int *slots;
  int k;
} ctl_wait;

static bool slots_idle(pto_node *n, void *arg) {
  ctl_wait *w = arg;
  for (int i = 0; i < w->k; i++)
    if (n->child[w->slots[i]].gen) return false;
  return true;
}

/* Posts one control frame per chip and waits for every reply. */
static int control(pto_node *n, const int *slots, int k, frame_type type,
                   const comm_domain_desc *d) {
  static node_frame f;
  ctl_wait w = {slots, k};
  int rc = until(n, slots_idle, &w, false, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < k; i++) {
    memset(&f, 0, sizeof f);
    f.type = type;
    f.dom = *d;
    f.dom_rank = i;
    post(n, slots[i], &f, -1);
  }
  rc = until(n, slots_idle, &w, false, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < k; i++)
    if (n->child[slots[i]].reply.status) return n->child[slots[i]].reply.status;
  return 0;
}

static bool chips_idle_for_domain(pto_node *n, void *arg) {
  ctl_wait *w = arg;
  for (int i = 0; i < w->k; i++) {
    if (n->child[w->slots[i]].gen) return false;
    reserved_mask[w->slots[i]] = true;
  }
  return true;
}

static int domain_create(pto_node_orch *no, const int *chips, int nranks,
                         const pto_window_buffer *buffers, int nbuffers, pto_domain *out) {
  pto_node *n = no ? no->node : NULL;
  if (!n || !chips || !out || nranks < 1 || nranks > PTO_COMM_MAX_RANKS) return PTO_EINVAL;
  if (n->fatal) return n->fatal;
  for (int i = 0; i < nranks; i++) {
    if (chips[i] < 0 || chips[i] >= n->cfg.nchips) return PTO_EINVAL;
    for (int j = 0; j < i; j++)
      if (chips[i] == chips[j]) return PTO_EINVAL;
  }
  int slot = -1;
  for (int i = 0; i < COMM_MAX_DOMAINS && slot < 0; i++)
    if (!n->dom_live[i]) slot = i;
  if (slot < 0) return PTO_EINVAL;
  comm_domain_desc *d = &n->doms[slot];
  memset(d, 0, sizeof *d);
  int rc = comm_desc_layout(d, buffers, nbuffers);
  if (rc) return rc;
  d->id = n->next_dom++;
  d->nranks = nranks;
  memcpy(d->chips, chips, sizeof(int) * (size_t)nranks);
  uint64_t at = (n->space_used + NODE_SPACE_ALIGN - 1) / NODE_SPACE_ALIGN * NODE_SPACE_ALIGN, end;
  if (__builtin_mul_overflow(d->win_bytes, (uint64_t)nranks, &end) ||
      __builtin_add_overflow(at, end, &end) || end > n->cfg.window_space)
    return PTO_ENOMEM;
  d->base = (uint64_t)(uintptr_t)n->space + at;
  snprintf(d->prefix, sizeof d->prefix, "%s.d%d", n->prefix, d->id);
  d->wait_timeout_ms = n->cfg.wait_timeout_ms;
  d->fault_inject = n->cfg.fault_inject;
  d->fault_seed = n->cfg.fault_seed;
  /* the member chips finish what they run; nothing new is dispatched to
   * them meanwhile (chips_idle_for_domain reserves them) */
  ctl_wait w = {chips, nranks};
  rc = until(n, chips_idle_for_domain, &w, true, UINT64_MAX, 0);
  if (rc) return rc;
  n->dom_live[slot] = true; /* from here on, cleanup unlinks its objects */
  n->space_used = end;
  /* phase 1: every rank creates and zeroes its window; all replies = the
   * allocation barrier; phase 2: every rank maps its peers */
  rc = control(n, chips, nranks, FRAME_DOM_OPEN, d);
  if (!rc) rc = control(n, chips, nranks, FRAME_DOM_ATTACH, d);
  if (!rc) {
    rc = comm_domain_open(&n->observer, d, -1);
    if (!rc) rc = comm_domain_attach(&n->observer, d->id);
  }
  if (rc) {
    if (!n->fatal) control(n, chips, nranks, FRAME_DOM_CLOSE, d);
    comm_domain_close(&n->observer, d->id, false);
    unlink_domain(d);
    n->dom_live[slot] = false;
    return rc;
  }
  *out = d->id;
  return 0;
}

int pto_node_domain_create(pto_node_orch *no, const int *chips, int nranks,
                           const pto_window_buffer *buffers, int nbuffers, pto_domain *out) {
  if (!no) return PTO_EINVAL;
  return latch(no->node, domain_create(no, chips, nranks, buffers, nbuffers, out), "domain_create");
}

int pto_node_window_tensor(pto_node_orch *no, pto_domain dom, int rank, const char *name,
                           pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out) {
  if (!no) return PTO_EINVAL;
  return pto_comm_window_tensor(&no->node->observer, dom, rank, name, dt, ndims, shape, out);
}

static void release_domains(pto_node *n) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++) {
    if (!n->dom_live[i]) continue;
    comm_domain_desc *d = &n->doms[i];
    if (!n->fatal) control(n, d->chips, d->nranks, FRAME_DOM_CLOSE, d);
    comm_domain_close(&n->observer, d->id, false);
    unlink_domain(d);
    n->dom_live[i] = false;
  }
  n->space_used = 0;
}

/* ---- runs ---- */

int pto_node_run(pto_node *n, pto_node_orch_fn fn, void *arg, pto_error_info *err) {
  pto_error_info local;
  if (!err) err = &local;
  set_err(err, 0, "%s", "");
  if (!n || !fn) return PTO_EINVAL;
  if (n->fatal) {
    *err = n->fatal_err;
    return n->fatal;
  }
  if (n->running) return PTO_EBUSY;
  int rc = tmap_init(&n->tm, n->cfg.tensormap_entries);
  if (rc) return rc;
  n->running = true;
  n->base_id = n->oldest_live = n->next_id;
  n->ntasks = 0;
  n->unfinished = 0;
  q_reset(&n->ready_any);
  q_reset(&n->ready_group);
  for (int s = 0; s < NODE_MAX_CHILDREN; s++)
    q_reset(&n->ready_slot[s]);
  n->first_err = 0;
  n->trace_origin_ns = pto_now_ns(); /* every rank's time zero (the clock is machine-wide) */
  memset(n->trace_runs, 0, sizeof n->trace_runs);
  pto_node_orch no = {n};
  fn(&no, arg);
  until(n, all_finished, NULL, true, UINT64_MAX, 0);
  release_domains(n);
  char why[400] = "";
  rc = node_trace_finish(n, why, sizeof why);
  if (rc && !n->fatal && !n->first_err) {
    n->first_err = rc == PTO_ENOMEM ? rc : PTO_ESYSTEM;
    set_err(&n->first_info, n->first_err,
            "node trace: cannot merge the ranks' traces into "
            "'%.300s': %s",
            n->trace_path, why[0] ? why : pto_strerror(rc));
  }
  n->running = false;
  for (int64_t i = 0; i < n->ntasks; i++)
    free(n->tasks[i].consumers);
  free(n->tasks);
  n->tasks = NULL;
  n->ntasks = n->captasks = 0;
  tmap_destroy(&n->tm);
  if (n->fatal) {
    *err = n->fatal_err;
    return n->fatal;
  }
  if (n->first_err) *err = n->first_info;
  return n->first_err;
}
