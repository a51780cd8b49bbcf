/* mpi_relay.c — the two relays that carry the node's mailbox protocol over
 * MPI messages (under mpirun, node_mpi.c; the messages are listed in
 * mpi_relay.h). Each applies what it receives to a mailbox with the real
 * mbox_* steps: rank 0's relay stands in for the child on the parent's
 * mailbox of every chip on another rank; rank c's relay stands in for the
 * parent on its chip's own mailbox. A slot has one exchange outstanding at
 * a time (the parent posts only to an idle mailbox), and MPI delivers the
 * messages between two ranks in order, so a frame's data comes after it and
 * a task's changed host data before its reply. */
#include "node/mpi_relay.h"

#ifdef PTO_HAVE_MPI

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/thread_start.h"
#include "node/fnref.h"
#include "node/host_ship.h"
#include "node/proc_watch.h"
#include "node/run_guard.h"

#define POLL_MIN_NS   20000ull     /* relays poll MPI this often right after a message */
#define POLL_MAX_NS   1000000ull   /* ... and at least this often when idle */
#define WATCH_NS      20000000ull  /* how often a relay looks at the other side's processes */
#define GONE_GRACE_NS 100000000ull /* a gone rank's own word (ENDED) may still be on its way */

/* The next idle pause: back to the shortest after a message, else doubled
 * up to the longest. */
static uint64_t next_pause(uint64_t pause, bool busy) {
  return busy ? POLL_MIN_NS : (pause * 2 > POLL_MAX_NS ? POLL_MAX_NS : pause * 2);
}

static void nap_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

bool relay_recv(MPI_Comm comm, void *buf, int bytes, int src, int tag, bool (*gone)(void *),
                void *arg) {
  MPI_Request req;
  MPI_Irecv(buf, bytes, MPI_BYTE, src, tag, comm, &req);
  uint64_t t0 = pto_now_ns(), pause = POLL_MIN_NS, next_look = t0 + WATCH_NS;
  for (;;) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    uint64_t now = pto_now_ns();
    if (now - t0 < POLL_MIN_NS) continue; /* a live sender's rest comes at once */
    if (now >= next_look) {
      if (gone(arg)) {
        /* its sender is gone: the rest never comes. The request stays
         * with MPI (a receive that matched cannot be cancelled), and so
         * does buf, which the caller leaves allocated. */
        MPI_Request_free(&req);
        return false;
      }
      next_look = now + WATCH_NS;
    }
    nap_ns(pause);
    pause = next_pause(pause, false);
  }
}

void relay_send(MPI_Comm comm, int rank, int tag, const void *p, size_t bytes) {
  MPI_Send(p, (int)bytes, MPI_BYTE, rank, tag, comm);
}

void relay_send_state(MPI_Comm comm, child_state st, const char *host, const char *why) {
  wire_state w;
  memset(&w, 0, sizeof w);
  w.state = (int32_t)st;
  w.pid = (int32_t)getpid();
  if (!proc_start_time(w.pid, &w.start)) w.start = 0;
  snprintf(w.host, sizeof w.host, "%s", host);
  snprintf(w.why, sizeof w.why, "%s", why);
  relay_send(comm, 0, T_STATE, &w, sizeof w);
}

void relay_check_root(const root_proc *root, int rank, const char *prefix) {
  int st;
  if (!root->start || proc_look(root->pid, root->start, &st) == PROC_RUNS) return;
  /* one write: mpirun forwards the ranks' output in the pieces they write,
   * between the other ranks' (Open MPI's own complaints about the dead
   * peer among them) */
  char msg[200];
  int len = snprintf(msg, sizeof msg,
                     "pto node: chip rank %d (MPI rank %d): rank 0 (pid %d), which runs the node, "
                     "is gone: ending the MPI job (MPI_Abort)\n",
                     rank, rank, (int)root->pid);
  if (write(2, msg, (size_t)len) < 0) { /* nowhere else to say it */
  }
  if (prefix) run_guard_unlink_all(prefix);
  /* the job fails (mpirun, keeping it running, would otherwise exit 0) */
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

/* ---- rank 0's relay ---- */

struct root_relay {
  pto_node *n;
  MPI_Comm comm;
  pthread_t thread;
  _Atomic bool stop;
  pto_event ev;        /* a post for a remote chip, or stop */
  uint64_t next_watch; /* when to look at the chip ranks' processes again */
  uint32_t sent[PTO_NODE_MAX_CHIPS];
  uint64_t cancel_sent[PTO_NODE_MAX_CHIPS]; /* the last cancel word forwarded */
  int ship_rc[PTO_NODE_MAX_CHIPS];          /* a malformed diff from chip s */
  MPI_Request req[PTO_NODE_MAX_CHIPS];
  wire_frame out[PTO_NODE_MAX_CHIPS];
  union {
    wire_state st;
    node_reply reply;
    uint32_t word;
    uint64_t cancel;
    int32_t status;
  } in;
};

static bool is_rank_slot(const pto_node *n, int s) {
  return s > 0 && s < n->cfg.nchips && n->child[s].kind == SLOT_RANK;
}

/* The host tensors of task frame f go to chip s on another host, right
 * after the frame (a blocking send: rank c receives it at once, and never
 * sends to rank 0 while it owes this task's reply). */
static void ship_out(MPI_Comm rr_comm, pto_node *n, int s, const node_frame *f) {
  size_t bytes = ship_bytes(&f->args, (uintptr_t)n->host, n->cfg.host_bytes);
  if (!bytes) return;
  unsigned char *buf = malloc(bytes);
  if (!buf) abort(); /* the chip waits for these bytes: no way to go on */
  ship_pack(&f->args, (uintptr_t)n->host, n->cfg.host_bytes, buf);
  MPI_Send(buf, (int)bytes, MPI_BYTE, s, T_DATA, rr_comm);
  free(buf);
}

/* A frame the parent posted for chip s goes out (its function translated:
 * submit checked that it can be). */
static bool send_frames(root_relay *rr) {
  pto_node *n = rr->n;
  MPI_Comm rr_comm = rr->comm;
  bool busy = false;
  for (int s = 1; s < n->cfg.nchips; s++) {
    if (!is_rank_slot(n, s)) continue;
    if (rr->req[s] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&rr->req[s], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    node_mbox *mb = &n->ctl->mbox[s];
    if (!mbox_peek(mb, rr->sent[s], &rr->out[s].f)) continue;
    rr->sent[s] = rr->out[s].f.gen;
    busy = true;
    char why[300];
    if (fnref_encode((const void *)rr->out[s].f.chip_fn, true, &rr->out[s].chip_fn, why,
                     sizeof why)) {
      node_reply r = {.gen = rr->out[s].f.gen, .status = PTO_EINVAL};
      node_set_err(&r.err, PTO_EINVAL, "%.400s", why);
      mbox_reply(mb, &r, &n->ctl->parent_ev);
      continue;
    }
    rr->out[s].f.chip_fn = NULL;
    MPI_Isend(&rr->out[s], (int)sizeof rr->out[s], MPI_BYTE, s, T_FRAME, rr_comm, &rr->req[s]);
    if (n->child[s].other_host && rr->out[s].f.type == FRAME_TASK)
      ship_out(rr->comm, n, s, &rr->out[s].f);
  }
  return busy;
}

/* A cancel the parent wrote into chip s's mailbox goes to its rank (whose
 * relay puts it into the chip's own mailbox). Its frame went out before:
 * the parent cancels only tasks its children run. */
static bool send_cancels(root_relay *rr) {
  pto_node *n = rr->n;
  bool busy = false;
  for (int s = 1; s < n->cfg.nchips; s++) {
    if (!is_rank_slot(n, s)) continue;
    /* relaxed: the word is the whole message (node_task.c cancel_parts) */
    uint64_t w = atomic_load_explicit(&n->ctl->mbox[s].cancel, memory_order_relaxed);
    if (w == rr->cancel_sent[s]) continue;
    relay_send(rr->comm, s, T_CANCEL, &w, sizeof w);
    rr->cancel_sent[s] = w;
    busy = true;
  }
  return busy;
}

static void watch_ranks(root_relay *rr, uint64_t now);

/* relay_recv's look at the sender, chip rank `from` (take_messages): the
 * watch of the chip ranks (watch_ranks), which says when one is gone. */
typedef struct sender {
  root_relay *rr;
  int from;
} sender;

static bool sender_gone(void *arg) {
  sender *w = arg;
  pto_node *n = w->rr->n;
  watch_ranks(w->rr, pto_now_ns());
  /* acquire pairs with watch_ranks' (or ENDED's) release store */
  return is_rank_slot(n, w->from) &&
         atomic_load_explicit(&n->child[w->from].ended, memory_order_acquire);
}

static bool take_messages(root_relay *rr) {
  pto_node *n = rr->n;
  MPI_Comm rr_comm = rr->comm;
  bool busy = false;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, rr_comm, &flag, &st);
    if (!flag) return busy;
    busy = true;
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    int s = st.MPI_SOURCE;
    /* every message into memory of its own: one whose sender dies before
     * all of it is here (a large one goes by rendezvous) is left to MPI
     * with it, and the relay goes on (the sender is then reported ended:
     * sender_gone) */
    unsigned char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!buf) abort(); /* the reply must not come without its data */
    sender from = {rr, s};
    if (!relay_recv(rr_comm, buf, bytes > 0 ? bytes : 0, s, st.MPI_TAG, sender_gone, &from))
      continue;
    if (st.MPI_TAG == T_DATA || bytes < 0 || (size_t)bytes > sizeof rr->in) {
      /* what chip s on another host changed in the host tensors of its task:
       * written before its reply is delivered (it follows on the same
       * channel); a malformed diff fails that reply */
      if (st.MPI_TAG == T_DATA && is_rank_slot(n, s))
        rr->ship_rc[s] = ship_apply(&rr->out[s].f.args, (uintptr_t)n->host, n->cfg.host_bytes, buf,
                                    (size_t)bytes);
      free(buf);
      continue;
    }
    memcpy(&rr->in, buf, (size_t)bytes);
    free(buf);
    if (!is_rank_slot(n, s)) continue;
    child_slot *c = &n->child[s];
    node_mbox *mb = &n->ctl->mbox[s];
    switch (st.MPI_TAG) {
    case T_STATE:
      c->pid = rr->in.st.pid;
      snprintf(c->where, sizeof c->where, "MPI rank %d on host %.40s", s, rr->in.st.host);
      snprintf(c->why, sizeof c->why, "%s", rr->in.st.why);
      c->other_host = strcmp(rr->in.st.host, n->mpi_host) != 0;
      /* watched only when its pid names the same process here (the same
       * host and PID namespace) */
      uint64_t start = 0;
      c->watch_start = !c->other_host && rr->in.st.start && proc_start_time(c->pid, &start) &&
                               start == rr->in.st.start
                           ? start
                           : 0;
      mbox_set_state(mb, (child_state)rr->in.st.state, &n->ctl->parent_ev);
      break;
    case T_TAKEN: mbox_mark_taken(mb, rr->in.word); break;
    case T_REPLY:
      if (rr->ship_rc[s] && !rr->in.reply.status) {
        rr->in.reply.status = rr->ship_rc[s];
        node_set_err(&rr->in.reply.err, rr->ship_rc[s],
                     "the host tensors chip %d changed came back malformed", s);
      }
      rr->ship_rc[s] = 0;
      mbox_reply(mb, &rr->in.reply, &n->ctl->parent_ev);
      break;
    case T_BEAT:
      atomic_store_explicit(&mb->beat, rr->in.word, memory_order_relaxed); /* liveness only */
      break;
    case T_CANCELLED: /* the parent wakes its waits (node_mpi_wake) */
      /* release pairs with node_mpi_wake's acquire (nothing else is published) */
      atomic_fetch_or_explicit(&n->cancel_arrived, 1ull << s, memory_order_release);
      pto_event_signal(&n->ctl->parent_ev);
      break;
    case T_ENDED:
      c->wstatus = (rr->in.status & 0xff) << 8; /* as an exit status */
      /* release pairs with node_reap's acquire: wstatus is set */
      atomic_store_explicit(&c->ended, true, memory_order_release);
      pto_event_signal(&n->ctl->parent_ev);
      break;
    default: break;
    }
  }
}

/* A chip rank of this host whose process is gone is ended now, with its
 * exit status when the kernel still shows it (a zombie not reaped yet),
 * else with the status unknown: mpirun reaps it, and while it keeps the
 * job running (orte_abort_on_non_zero_status 0) it tells the other ranks
 * nothing. A rank that called exit() has said so itself (ENDED), before
 * it was gone: its word is awaited GONE_GRACE_NS, while the relay goes on
 * taking messages, before the status is called unknown. */
static void watch_ranks(root_relay *rr, uint64_t now) {
  pto_node *n = rr->n;
  for (int s = 1; s < n->cfg.nchips; s++) {
    child_slot *c = &n->child[s];
    /* acquire: a rank that ended (ENDED) is not looked at again */
    if (!is_rank_slot(n, s) || !c->watch_start ||
        atomic_load_explicit(&c->ended, memory_order_acquire))
      continue;
    int st = 0;
    proc_state ps = proc_look(c->pid, c->watch_start, &st);
    if (ps == PROC_RUNS) continue;
    if (ps == PROC_GONE && !c->gone_ns) c->gone_ns = now;
    if (ps == PROC_GONE && now - c->gone_ns < GONE_GRACE_NS) continue;
    c->wstatus = st;
    c->status_unknown = ps == PROC_GONE;
    /* release pairs with node_reap's acquire: wstatus is set */
    atomic_store_explicit(&c->ended, true, memory_order_release);
    pto_event_signal(&n->ctl->parent_ev);
  }
}

static bool root_news(void *arg) {
  root_relay *rr = arg;
  /* relaxed: hints; send_frames re-reads with acquire */
  if (atomic_load_explicit(&rr->stop, memory_order_relaxed)) return true;
  for (int s = 1; s < rr->n->cfg.nchips; s++)
    if (is_rank_slot(rr->n, s) &&
        (atomic_load_explicit(&rr->n->ctl->mbox[s].posted, memory_order_relaxed) != rr->sent[s] ||
         atomic_load_explicit(&rr->n->ctl->mbox[s].cancel, memory_order_relaxed) !=
             rr->cancel_sent[s]))
      return true;
  return false;
}

static void *root_relay_main(void *arg) {
  root_relay *rr = arg;
  uint64_t pause = POLL_MIN_NS;
  while (!atomic_load_explicit(&rr->stop, memory_order_acquire)) {
    bool busy = send_frames(rr);
    busy = send_cancels(rr) || busy;
    busy = take_messages(rr) || busy;
    uint64_t now = pto_now_ns();
    if (now >= rr->next_watch) { /* after the messages: an ENDED comes first */
      watch_ranks(rr, now);
      rr->next_watch = now + WATCH_NS;
    }
    pause = next_pause(pause, busy);
    if (!busy) pto_wait(&rr->ev, root_news, rr, pto_now_ns() + pause);
  }
  for (int s = 1; s < rr->n->cfg.nchips; s++)
    if (rr->req[s] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rr->req[s]);
      MPI_Request_free(&rr->req[s]);
    }
  return NULL;
}

root_relay *root_relay_start(pto_node *n, MPI_Comm comm, char *why, size_t len) {
  root_relay *rr = calloc(1, sizeof *rr);
  if (!rr) {
    snprintf(why, len, "cannot start the relay thread: out of memory");
    return NULL;
  }
  rr->n = n;
  rr->comm = comm;
  pto_event_init(&rr->ev, false);
  for (int s = 0; s < PTO_NODE_MAX_CHIPS; s++)
    rr->req[s] = MPI_REQUEST_NULL;
  if (thread_start(&rr->thread, root_relay_main, rr, why, len, "the relay thread") != 0) {
    free(rr);
    return NULL;
  }
  return rr;
}

void root_relay_wake(root_relay *rr) {
  if (rr) pto_event_signal(&rr->ev);
}

void root_relay_stop(root_relay *rr) {
  if (!rr) return;
  atomic_store_explicit(&rr->stop, true, memory_order_release);
  pto_event_signal(&rr->ev);
  pthread_join(rr->thread, NULL);
  free(rr);
}

/* ---- rank c's relay ---- */

struct rank_relay {
  pto_node *n;
  MPI_Comm comm;
  pthread_t thread;
  int slot;
  root_proc root;      /* rank 0's process (relay_check_root) */
  uint64_t next_watch; /* when to look at it again */
  _Atomic bool stop;
  child_state state_sent;
  uint32_t local_gen, remote_gen, beat_sent;
  uint64_t cancel_in, cancel_applied; /* the last CANCEL received, and applied */
  bool taken_sent, reply_sent;
  bool other_host;        /* not on rank 0's host: host tensors travel */
  unsigned char *shipped; /* the host tensors as they came, for the diff */
  char host[64];
  wire_frame in;
};

static void send_state(rank_relay *rr, child_state st) {
  const node_mbox *mb = &rr->n->ctl->mbox[rr->slot];
  relay_send_state(rr->comm, st, rr->host, st == CHILD_FAILED ? mb->start_why : "");
  rr->state_sent = st;
}

/* relay_recv's look at the sender, rank 0: relay_check_root, which ends
 * the job when rank 0's process is gone (it never says so: it does not
 * return then). */
static bool root_gone(void *arg) {
  rank_relay *rr = arg;
  relay_check_root(&rr->root, rr->slot, rr->n->prefix);
  return false;
}

/* The host tensors of the task just received (sent right after it), into
 * this rank's private copy of host memory; kept for the diff. */
static void ship_take(rank_relay *rr) {
  pto_node *n = rr->n;
  const pto_args *a = &rr->in.f.args;
  size_t bytes = ship_bytes(a, (uintptr_t)n->host, n->cfg.host_bytes);
  if (!bytes) return;
  rr->shipped = malloc(bytes);
  if (!rr->shipped) abort(); /* rank 0 is sending them: no way to go on */
  relay_recv(rr->comm, rr->shipped, (int)bytes, 0, T_DATA, root_gone, rr);
  ship_unpack(a, (uintptr_t)n->host, n->cfg.host_bytes, rr->shipped);
}

/* A task refused here (its chip function: fnref_decode) had its host
 * tensors sent all the same, right after its frame: they are taken and
 * dropped, else the next task's ship_take would take them for its own. */
static void ship_drop(rank_relay *rr) {
  pto_node *n = rr->n;
  size_t bytes = ship_bytes(&rr->in.f.args, (uintptr_t)n->host, n->cfg.host_bytes);
  if (!bytes) return;
  unsigned char *buf = malloc(bytes);
  if (!buf) abort(); /* rank 0 is sending them: no way to go on */
  relay_recv(rr->comm, buf, (int)bytes, 0, T_DATA, root_gone, rr);
  free(buf);
}

/* The elements the task changed go back, before its reply. */
static void ship_back(rank_relay *rr) {
  pto_node *n = rr->n;
  unsigned char *diff = NULL;
  size_t bytes =
      ship_diff(&rr->in.f.args, (uintptr_t)n->host, n->cfg.host_bytes, rr->shipped, &diff);
  if (bytes == SIZE_MAX) abort(); /* out of memory: the outputs cannot go back */
  if (bytes) MPI_Send(diff, (int)bytes, MPI_BYTE, 0, T_DATA, rr->comm);
  free(diff);
  free(rr->shipped);
  rr->shipped = NULL;
}

/* One pass: state, a new frame, taken, the reply, the heartbeat. */
static bool rank_relay_pass(rank_relay *rr) {
  node_mbox *mb = &rr->n->ctl->mbox[rr->slot];
  bool busy = false;
  child_state st = mbox_state(mb);
  if (st != rr->state_sent) {
    send_state(rr, st);
    busy = true;
  }
  int flag = 0;
  MPI_Status ms;
  MPI_Iprobe(0, T_FRAME, rr->comm, &flag, &ms);
  if (flag) {
    busy = true;
    /* a frame is larger than MPI's eager limit: it comes by rendezvous,
     * which rank 0 must live to complete */
    relay_recv(rr->comm, &rr->in, (int)sizeof rr->in, 0, T_FRAME, root_gone, rr);
    rr->remote_gen = rr->in.f.gen;
    void *fn = NULL;
    char why[300];
    if (fnref_decode(&rr->in.chip_fn, &fn, why, sizeof why)) {
      if (rr->other_host && rr->in.f.type == FRAME_TASK) ship_drop(rr);
      node_reply r = {.gen = rr->remote_gen, .status = PTO_EINVAL};
      node_set_err(&r.err, PTO_EINVAL, "chip function of node task %" PRId64 ": %.400s",
                   rr->in.f.task_id, why);
      relay_send(rr->comm, 0, T_REPLY, &r, sizeof r);
    } else {
      rr->in.f.chip_fn = (pto_orch_fn)fn;
      if (rr->other_host && rr->in.f.type == FRAME_TASK) ship_take(rr);
      rr->local_gen = mbox_post(mb, &rr->in.f);
      rr->taken_sent = rr->reply_sent = false;
    }
  }
  MPI_Iprobe(0, T_CANCEL, rr->comm, &flag, &ms);
  if (flag) {
    busy = true;
    relay_recv(rr->comm, &rr->cancel_in, (int)sizeof rr->cancel_in, 0, T_CANCEL, root_gone, rr);
  }
  /* a cancel of the task that runs here (its frame may come after it: they
   * differ in tag) goes into this mailbox, in its generation; one of a task
   * that ended here is dropped */
  uint64_t w = rr->cancel_in;
  if (w != rr->cancel_applied &&
      mbox_cancel_relay(mb, w, rr->remote_gen, rr->local_gen, rr->reply_sent)) {
    relay_send(rr->comm, 0, T_CANCELLED, &w, sizeof w);
    rr->cancel_applied = w;
    busy = true;
  }
  if (rr->local_gen && !rr->taken_sent && mbox_taken(mb, rr->local_gen)) {
    relay_send(rr->comm, 0, T_TAKEN, &rr->remote_gen, sizeof rr->remote_gen);
    rr->taken_sent = busy = true;
  }
  node_reply r;
  if (rr->local_gen && !rr->reply_sent && mbox_poll_reply(mb, rr->local_gen, &r)) {
    if (rr->shipped) ship_back(rr);
    r.gen = rr->remote_gen;
    relay_send(rr->comm, 0, T_REPLY, &r, sizeof r);
    rr->reply_sent = busy = true;
  }
  uint32_t beat = atomic_load_explicit(&mb->beat, memory_order_relaxed); /* liveness only */
  if (beat != rr->beat_sent) {
    relay_send(rr->comm, 0, T_BEAT, &beat, sizeof beat);
    rr->beat_sent = beat;
  }
  return busy;
}

static bool rank_news(void *arg) {
  rank_relay *rr = arg;
  node_mbox *mb = &rr->n->ctl->mbox[rr->slot];
  /* relaxed: hints; the pass re-reads with acquire */
  return atomic_load_explicit(&rr->stop, memory_order_relaxed) ||
         atomic_load_explicit(&mb->state, memory_order_relaxed) != (uint32_t)rr->state_sent ||
         (rr->local_gen && !rr->reply_sent &&
          atomic_load_explicit(&mb->done, memory_order_relaxed) == rr->local_gen);
}

static void *rank_relay_main(void *arg) {
  rank_relay *rr = arg;
  uint64_t pause = POLL_MIN_NS;
  for (;;) {
    bool stop = atomic_load_explicit(&rr->stop, memory_order_acquire);
    bool busy = rank_relay_pass(rr);
    if (stop) break; /* one pass after the service ended: its last reply is out */
    uint64_t now = pto_now_ns();
    if (now >= rr->next_watch) {
      relay_check_root(&rr->root, rr->slot, rr->n->prefix);
      rr->next_watch = now + WATCH_NS;
    }
    pause = next_pause(pause, busy);
    if (!busy) pto_wait(&rr->n->ctl->parent_ev, rank_news, rr, pto_now_ns() + pause);
  }
  return NULL;
}

rank_relay *rank_relay_start(pto_node *n, int slot, MPI_Comm comm, bool other_host,
                             const char *host, root_proc root, char *why, size_t len) {
  rank_relay *rr = calloc(1, sizeof *rr);
  if (!rr) {
    snprintf(why, len, "cannot start the relay thread: out of memory");
    return NULL;
  }
  rr->n = n;
  rr->slot = slot;
  rr->root = root;
  rr->comm = comm;
  rr->other_host = other_host;
  snprintf(rr->host, sizeof rr->host, "%s", host);
  if (thread_start(&rr->thread, rank_relay_main, rr, why, len, "the relay thread") != 0) {
    free(rr);
    return NULL;
  }
  return rr;
}

void rank_relay_stop(rank_relay *rr) {
  if (!rr) return;
  atomic_store_explicit(&rr->stop, true, memory_order_release);
  pto_event_signal(&rr->n->ctl->parent_ev);
  pthread_join(rr->thread, NULL);
  free(rr->shipped);
  free(rr);
}

#else
typedef int pto_mpi_relay_not_built; /* without MPI: an empty file is not ISO C */
#endif
