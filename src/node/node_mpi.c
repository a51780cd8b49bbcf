/* node_mpi.c — chips as MPI ranks (see node_mpi.h): MPI start-up and the
 * end of the job, the address agreement for host memory and windows, the
 * service loop of ranks > 0, and the two relays that carry the mailbox
 * protocol over MPI messages.
 *
 * Messages (on a private duplicate of MPI_COMM_WORLD), rank 0 -> rank c:
 * BEGIN (a node's configuration: rank c starts chip c), FRAME (a mailbox
 * frame, its chip function as a fnref), FINAL (rank 0's program ends).
 * Rank c -> rank 0: STATE (ready or failed, with its pid and host), TAKEN,
 * REPLY (a frame's reply), BEAT (its heartbeat counter), ENDED (it left the
 * node). Each relay applies what it receives to a mailbox with the real
 * mbox_* steps: rank 0's relay stands in for the child on the parent's
 * mailbox of chip c; rank c's relay stands in for the parent on its own. */
#include "node/node_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "node/fnref.h"
#include "node/host_ship.h"
#include "node/node_internal.h"
#include "node/run_guard.h"

static const char *mpi_env_name(void) {
  static const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv(names[i])) return names[i];
  return NULL;
}

bool node_mpi_detect(void) { return mpi_env_name() != NULL; }

#ifndef PTO_HAVE_MPI

int node_mpi_enter(const pto_node_config *cfg, pto_error_info *err) {
  (void)cfg;
  node_set_err(err, PTO_EMPI,
               "this program runs under mpirun (%s is set), but pto was built without MPI: "
               "configure pto with -DPTO_MPI=ON (an MPI library, e.g. libopenmpi-dev, must be "
               "installed), or run the program without mpirun",
               mpi_env_name());
  return PTO_EMPI;
}
int node_mpi_map(pto_node *n, char *why, size_t len) {
  (void)n;
  snprintf(why, len, "pto was built without MPI");
  return PTO_EMPI;
}
void node_mpi_unmap(pto_node *n) { (void)n; }
int node_mpi_start(pto_node *n, char *why, size_t len) { return node_mpi_map(n, why, len); }
void node_mpi_posted(pto_node *n, int s) {
  (void)n;
  (void)s;
}
void node_mpi_stop(pto_node *n) { (void)n; }

#else

#include <mpi.h>

/* T_DATA: host tensors of a task for a chip on another host (rank 0 -> c,
 * after the frame), the elements it changed (c -> 0, before the reply). */
enum { T_BEGIN = 1, T_FRAME, T_FINAL, T_STATE, T_TAKEN, T_REPLY, T_BEAT, T_ENDED, T_DATA };

#define POLL_MIN_NS 20000ull          /* relays poll MPI this often right after a message */
#define POLL_MAX_NS 1000000ull        /* ... and at least this often when idle */
#define ADDR_FIRST  0x2a0000000000ull /* far from the program, heap, libraries and stacks */
#define ADDR_LAST   0x6f0000000000ull
#define ADDR_STRIDE (64ull << 30)

typedef struct wire_frame {
  node_frame f; /* f.chip_fn travels as chip_fn below */
  fnref chip_fn;
} wire_frame;

typedef struct wire_state {
  int32_t state, pid;
  char host[64];
  char why[160];
} wire_state;

typedef struct wire_begin {
  pto_node_config cfg; /* its pointers are cleared; the two below travel as fnrefs */
  fnref chip_init, chip_init_arg;
  int32_t slot;
  int32_t device_ids[PTO_NODE_MAX_CHIPS];
  uint64_t host_addr, host_bytes, space_addr, space_bytes;
  char prefix[48];
  char host_shm[64];
  char host[64]; /* rank 0's host name */
  char trace_path[PATH_MAX];
} wire_begin;

static MPI_Comm g_comm = MPI_COMM_NULL;
static int g_rank = -1, g_size;
static bool g_inited_by_us;
static pto_node *g_live; /* rank 0: the node of this job, NULL between nodes */

static void nap(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

static void my_host(char *buf, size_t len) {
  if (gethostname(buf, len) != 0) snprintf(buf, len, "?");
  buf[len - 1] = 0;
}

static void send_to(int rank, int tag, const void *p, size_t bytes) {
  MPI_Send(p, (int)bytes, MPI_BYTE, rank, tag, g_comm);
}

/* ---- the end of the job (rank 0) ---- */

static void at_exit(void) {
  if (g_live) {
    fprintf(stderr, "pto node: rank 0 exits with its node %s: ending the MPI job\n",
            g_live->fatal ? "failed" : "not destroyed (call pto_node_destroy)");
    /* every object of the run now: MPI_Abort may end us with SIGKILL */
    run_guard_end(g_live->prefix);
    MPI_Abort(g_comm, 1);
  }
  for (int r = 1; r < g_size; r++)
    send_to(r, T_FINAL, NULL, 0);
  if (g_inited_by_us) MPI_Finalize();
}

static void serve_forever(void) __attribute__((noreturn));

static int mpi_init(pto_error_info *err) {
  if (g_comm != MPI_COMM_NULL) return 0;
  int inited = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      node_set_err(err, PTO_EMPI, "node under mpirun: MPI_Init_thread failed");
      return PTO_EMPI;
    }
    g_inited_by_us = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    node_set_err(err, PTO_EMPI,
                 "node under mpirun: the MPI library provides thread level %d, pto needs "
                 "MPI_THREAD_MULTIPLE (%d): a chip's kernel threads and the node's relay call "
                 "MPI concurrently",
                 provided, MPI_THREAD_MULTIPLE);
    return PTO_EMPI;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  if (g_rank == 0) atexit(at_exit);
  return 0;
}

int node_mpi_enter(const pto_node_config *cfg, pto_error_info *err) {
  int rc = mpi_init(err);
  if (rc) return rc;
  if (g_rank > 0) serve_forever();
  if (cfg->nchips > g_size) {
    node_set_err(err, PTO_EINVAL,
                 "node config: nchips is %d, but mpirun started %d ranks (under mpirun node chip "
                 "c is MPI rank c: run with -np %d or more)",
                 cfg->nchips, g_size, cfg->nchips);
    return PTO_EINVAL;
  }
  if (g_live) {
    node_set_err(err, PTO_EBUSY,
                 "under mpirun the ranks serve one node at a time: destroy the live node first");
    return PTO_EBUSY;
  }
  fnref f;
  char why[300];
  const char *what =
      fnref_encode((const void *)cfg->chip_init, true, &f, why, sizeof why) ? "chip_init"
      : fnref_encode(cfg->chip_init_arg, false, &f, why, sizeof why)        ? "chip_init_arg"
                                                                            : NULL;
  if (what) {
    node_set_err(err, PTO_EINVAL,
                 "node config: %s cannot reach the other MPI ranks: %.300s (under mpirun "
                 "chip_init_arg must be NULL or the address of a global)",
                 what, why);
    return PTO_EINVAL;
  }
  return 0;
}

/* ---- addresses every rank can map ---- */

static size_t round_2m(size_t b) { return (b + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1); }

/* Maps host memory (fd >= 0: that object, shared; else private) and the
 * window space at `at`; false (nothing left mapped) when any of it is taken. */
static bool map_at(uint64_t at, size_t host_bytes, size_t space_bytes, int fd, void **host,
                   void **space) {
  void *want = (void *)(uintptr_t)at;
  void *h =
      fd >= 0
          ? mmap(want, host_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0)
          : mmap(want, host_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (h == MAP_FAILED) return false;
  if (h != want) { /* a kernel that takes the flag as a hint */
    munmap(h, host_bytes);
    return false;
  }
  void *swant = (char *)want + round_2m(host_bytes);
  void *s = mmap(swant, space_bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (s != swant) {
    if (s != MAP_FAILED) munmap(s, space_bytes);
    munmap(h, host_bytes);
    return false;
  }
  *host = h;
  *space = s;
  return true;
}

int node_mpi_map(pto_node *n, char *why, size_t len) {
  snprintf(n->host_shm, sizeof n->host_shm, "%s.host", n->prefix);
  int fd = shm_open(n->host_shm, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)n->cfg.host_bytes) != 0) {
    snprintf(why, len, "node under mpirun: cannot create host memory '%s': %s", n->host_shm,
             strerror(errno));
    if (fd >= 0) close(fd);
    return PTO_ESYSTEM;
  }
  uint64_t need = round_2m(n->cfg.host_bytes) + n->cfg.window_space;
  uint64_t stride = (need + ADDR_STRIDE - 1) / ADDR_STRIDE * ADDR_STRIDE;
  bool ok = false;
  for (uint64_t at = ADDR_FIRST; !ok && at + need <= ADDR_LAST; at += stride)
    ok = map_at(at, n->cfg.host_bytes, n->cfg.window_space, fd, (void **)&n->host, &n->space);
  close(fd);
  if (!ok) {
    snprintf(why, len, "node under mpirun: no free address range for %" PRIu64 " bytes", need);
    return PTO_ESYSTEM;
  }
  return 0;
}

void node_mpi_unmap(pto_node *n) {
  if (n->host_shm[0]) shm_unlink(n->host_shm);
}

/* ---- rank 0's relay ---- */

typedef struct root_relay {
  pto_node *n;
  pthread_t thread;
  _Atomic bool stop;
  pto_event ev; /* a post for a remote chip, or stop */
  uint32_t sent[PTO_NODE_MAX_CHIPS];
  int ship_rc[PTO_NODE_MAX_CHIPS]; /* a malformed diff from chip s */
  MPI_Request req[PTO_NODE_MAX_CHIPS];
  wire_frame out[PTO_NODE_MAX_CHIPS];
  union {
    wire_state st;
    node_reply reply;
    uint32_t word;
    int32_t status;
  } in;
} root_relay;

static bool is_rank_slot(const pto_node *n, int s) {
  return s > 0 && s < n->cfg.nchips && n->child[s].kind == SLOT_RANK;
}

/* The host tensors of task frame f go to chip s on another host, right
 * after the frame (a blocking send: rank c receives it at once, and never
 * sends to rank 0 while it owes this task's reply). */
static void ship_out(pto_node *n, int s, const node_frame *f) {
  size_t bytes = ship_bytes(&f->args, (uintptr_t)n->host, n->cfg.host_bytes);
  if (!bytes) return;
  unsigned char *buf = malloc(bytes);
  if (!buf) abort(); /* the chip waits for these bytes: no way to go on */
  ship_pack(&f->args, (uintptr_t)n->host, n->cfg.host_bytes, buf);
  MPI_Send(buf, (int)bytes, MPI_BYTE, s, T_DATA, g_comm);
  free(buf);
}

/* A frame the parent posted for chip s goes out (its function translated:
 * submit checked that it can be). */
static bool send_frames(root_relay *rr) {
  pto_node *n = rr->n;
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
      node_reply r;
      memset(&r, 0, sizeof r);
      r.gen = rr->out[s].f.gen;
      r.status = PTO_EINVAL;
      node_set_err(&r.err, PTO_EINVAL, "%.400s", why);
      mbox_reply(mb, &r, &n->ctl->parent_ev);
      continue;
    }
    rr->out[s].f.chip_fn = NULL;
    MPI_Isend(&rr->out[s], (int)sizeof rr->out[s], MPI_BYTE, s, T_FRAME, g_comm, &rr->req[s]);
    if (n->child[s].other_host && rr->out[s].f.type == FRAME_TASK) ship_out(n, s, &rr->out[s].f);
  }
  return busy;
}

/* What chip s on another host changed in the host tensors of its task:
 * written before its reply is delivered (it follows on the same channel). A
 * malformed diff fails that task's reply. */
static void ship_in(root_relay *rr, int s, const unsigned char *diff, size_t bytes) {
  pto_node *n = rr->n;
  rr->ship_rc[s] =
      ship_apply(&rr->out[s].f.args, (uintptr_t)n->host, n->cfg.host_bytes, diff, bytes);
}

static bool take_messages(root_relay *rr) {
  pto_node *n = rr->n;
  bool busy = false;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g_comm, &flag, &st);
    if (!flag) return busy;
    busy = true;
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    int s = st.MPI_SOURCE;
    if (st.MPI_TAG == T_DATA || bytes < 0 || (size_t)bytes > sizeof rr->in) {
      unsigned char *buf = bytes > 0 ? malloc((size_t)bytes) : NULL;
      if (bytes > 0 && !buf) abort(); /* the reply must not come without its data */
      MPI_Recv(buf, buf ? bytes : 0, MPI_BYTE, s, st.MPI_TAG, g_comm, MPI_STATUS_IGNORE);
      if (st.MPI_TAG == T_DATA && is_rank_slot(n, s)) ship_in(rr, s, buf, (size_t)bytes);
      free(buf);
      continue;
    }
    MPI_Recv(&rr->in, bytes, MPI_BYTE, s, st.MPI_TAG, g_comm, MPI_STATUS_IGNORE);
    if (!is_rank_slot(n, s)) continue;
    child_slot *c = &n->child[s];
    node_mbox *mb = &n->ctl->mbox[s];
    switch (st.MPI_TAG) {
    case T_STATE:
      c->pid = rr->in.st.pid;
      snprintf(c->where, sizeof c->where, "MPI rank %d on host %.40s", s, rr->in.st.host);
      snprintf(c->why, sizeof c->why, "%s", rr->in.st.why);
      c->other_host = strcmp(rr->in.st.host, n->mpi_host) != 0;
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

static bool root_news(void *arg) {
  root_relay *rr = arg;
  /* relaxed: hints; send_frames re-reads with acquire */
  if (atomic_load_explicit(&rr->stop, memory_order_relaxed)) return true;
  for (int s = 1; s < rr->n->cfg.nchips; s++)
    if (is_rank_slot(rr->n, s) &&
        atomic_load_explicit(&rr->n->ctl->mbox[s].posted, memory_order_relaxed) != rr->sent[s])
      return true;
  return false;
}

static void *root_relay_main(void *arg) {
  root_relay *rr = arg;
  uint64_t pause = POLL_MIN_NS;
  while (!atomic_load_explicit(&rr->stop, memory_order_acquire)) {
    bool busy = send_frames(rr);
    busy = take_messages(rr) || busy;
    pause = busy ? POLL_MIN_NS : (pause * 2 > POLL_MAX_NS ? POLL_MAX_NS : pause * 2);
    if (!busy) pto_wait(&rr->ev, root_news, rr, pto_now_ns() + pause);
  }
  for (int s = 1; s < rr->n->cfg.nchips; s++)
    if (rr->req[s] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rr->req[s]);
      MPI_Request_free(&rr->req[s]);
    }
  return NULL;
}

int node_mpi_start(pto_node *n, char *why, size_t len) {
  root_relay *rr = calloc(1, sizeof *rr);
  wire_begin *b = calloc(1, sizeof *b);
  if (!rr || !b) {
    free(rr);
    free(b);
    snprintf(why, len, "node under mpirun: out of memory");
    return PTO_ENOMEM;
  }
  rr->n = n;
  pto_event_init(&rr->ev, false);
  for (int s = 0; s < PTO_NODE_MAX_CHIPS; s++)
    rr->req[s] = MPI_REQUEST_NULL;
  my_host(n->mpi_host, sizeof n->mpi_host);
  b->cfg = n->cfg;
  b->cfg.device_ids = NULL;
  b->cfg.chip_init = NULL;
  b->cfg.chip_init_arg = NULL;
  b->cfg.trace_path = NULL;
  b->cfg.chip.env = NULL;
  char w[300];
  fnref_encode((const void *)n->cfg.chip_init, true, &b->chip_init, w, sizeof w); /* checked */
  fnref_encode(n->cfg.chip_init_arg, false, &b->chip_init_arg, w, sizeof w);
  memcpy(b->device_ids, n->device_ids, sizeof b->device_ids);
  b->host_addr = (uint64_t)(uintptr_t)n->host;
  b->host_bytes = n->cfg.host_bytes;
  b->space_addr = (uint64_t)(uintptr_t)n->space;
  b->space_bytes = n->cfg.window_space;
  snprintf(b->prefix, sizeof b->prefix, "%s", n->prefix);
  snprintf(b->host_shm, sizeof b->host_shm, "%s", n->host_shm);
  snprintf(b->host, sizeof b->host, "%s", n->mpi_host);
  snprintf(b->trace_path, sizeof b->trace_path, "%s", n->trace_path ? n->trace_path : "");
  for (int s = 1; s < n->cfg.nchips; s++) {
    n->child[s] = (child_slot){.kind = SLOT_RANK, .alive = true, .task = -1};
    snprintf(n->child[s].where, sizeof n->child[s].where, "MPI rank %d", s);
    b->slot = s;
    send_to(s, T_BEGIN, b, sizeof *b);
  }
  free(b);
  n->mpi_relay = rr;
  g_live = n;
  if (pthread_create(&rr->thread, NULL, root_relay_main, rr) != 0) {
    n->mpi_relay = NULL;
    free(rr);
    snprintf(why, len, "node under mpirun: cannot start the relay thread");
    return PTO_ESYSTEM;
  }
  return 0;
}

void node_mpi_posted(pto_node *n, int s) {
  (void)s;
  if (n->mpi_relay) pto_event_signal(&n->mpi_relay->ev);
}

void node_mpi_stop(pto_node *n) {
  bool left = false;
  for (int s = 0; s < n->nchildren; s++)
    left = left || n->child[s].alive;
  if (n->fatal || left) {
    fprintf(stderr, "pto node: ending the MPI job (MPI_Abort): %s\n",
            n->fatal ? n->fatal_err.details : "a chip did not leave the node in time");
    fflush(stderr);
    /* every object of the run (also the other ranks' on this host) now:
     * MPI_Abort may end us with SIGKILL */
    run_guard_end(n->prefix);
    MPI_Abort(g_comm, 1);
  }
  root_relay *rr = n->mpi_relay;
  if (rr) {
    atomic_store_explicit(&rr->stop, true, memory_order_release);
    pto_event_signal(&rr->ev);
    pthread_join(rr->thread, NULL);
    free(rr);
    n->mpi_relay = NULL;
  }
  g_live = NULL;
}

/* ---- ranks > 0 ---- */

typedef struct rank_relay {
  pto_node *n;
  int slot;
  _Atomic bool stop;
  child_state state_sent;
  uint32_t local_gen, remote_gen, beat_sent;
  bool taken_sent, reply_sent;
  bool other_host;        /* not on rank 0's host: host tensors travel */
  unsigned char *shipped; /* the host tensors as they came, for the diff */
  char host[64];
  char why[160];
  wire_frame in;
} rank_relay;

static void send_state(rank_relay *rr, child_state st) {
  wire_state w;
  memset(&w, 0, sizeof w);
  w.state = (int32_t)st;
  w.pid = (int32_t)getpid();
  snprintf(w.host, sizeof w.host, "%s", rr->host);
  snprintf(w.why, sizeof w.why, "%s", rr->why);
  send_to(0, T_STATE, &w, sizeof w);
  rr->state_sent = st;
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
  MPI_Recv(rr->shipped, (int)bytes, MPI_BYTE, 0, T_DATA, g_comm, MPI_STATUS_IGNORE);
  ship_unpack(a, (uintptr_t)n->host, n->cfg.host_bytes, rr->shipped);
}

/* The elements the task changed go back, before its reply. */
static void ship_back(rank_relay *rr) {
  pto_node *n = rr->n;
  unsigned char *diff = NULL;
  size_t bytes =
      ship_diff(&rr->in.f.args, (uintptr_t)n->host, n->cfg.host_bytes, rr->shipped, &diff);
  if (bytes == SIZE_MAX) abort(); /* out of memory: the outputs cannot go back */
  if (bytes) MPI_Send(diff, (int)bytes, MPI_BYTE, 0, T_DATA, g_comm);
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
  MPI_Iprobe(0, T_FRAME, g_comm, &flag, &ms);
  if (flag) {
    busy = true;
    MPI_Recv(&rr->in, (int)sizeof rr->in, MPI_BYTE, 0, T_FRAME, g_comm, MPI_STATUS_IGNORE);
    rr->remote_gen = rr->in.f.gen;
    void *fn = NULL;
    char why[300];
    if (fnref_decode(&rr->in.chip_fn, &fn, why, sizeof why)) {
      node_reply r;
      memset(&r, 0, sizeof r);
      r.gen = rr->remote_gen;
      r.status = PTO_EINVAL;
      node_set_err(&r.err, PTO_EINVAL, "chip function of node task %" PRId64 ": %.400s",
                   rr->in.f.task_id, why);
      send_to(0, T_REPLY, &r, sizeof r);
    } else {
      rr->in.f.chip_fn = (pto_orch_fn)fn;
      if (rr->other_host && rr->in.f.type == FRAME_TASK) ship_take(rr);
      rr->local_gen = mbox_post(mb, &rr->in.f);
      rr->taken_sent = rr->reply_sent = false;
    }
  }
  if (rr->local_gen && !rr->taken_sent && mbox_taken(mb, rr->local_gen)) {
    send_to(0, T_TAKEN, &rr->remote_gen, sizeof rr->remote_gen);
    rr->taken_sent = busy = true;
  }
  node_reply r;
  if (rr->local_gen && !rr->reply_sent && mbox_poll_reply(mb, rr->local_gen, &r)) {
    if (rr->shipped) ship_back(rr);
    r.gen = rr->remote_gen;
    send_to(0, T_REPLY, &r, sizeof r);
    rr->reply_sent = busy = true;
  }
  uint32_t beat = atomic_load_explicit(&mb->beat, memory_order_relaxed); /* liveness only */
  if (beat != rr->beat_sent) {
    send_to(0, T_BEAT, &beat, sizeof beat);
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
    pause = busy ? POLL_MIN_NS : (pause * 2 > POLL_MAX_NS ? POLL_MAX_NS : pause * 2);
    if (!busy) pto_wait(&rr->n->ctl->parent_ev, rank_news, rr, pto_now_ns() + pause);
  }
  return NULL;
}

/* Rank c's part of one node: its chip, served until the node's exit frame. */
static void serve_node(const wire_begin *b) {
  int slot = b->slot, status = 2;
  rank_relay *rr = calloc(1, sizeof *rr);
  pto_node *n = calloc(1, sizeof *n);
  size_t ctl_bytes = sizeof(node_ctl) + (size_t)(slot + 1) * sizeof(node_mbox);
  node_ctl *ctl = calloc(1, ctl_bytes);
  if (!rr || !n || !ctl) {
    wire_state w = {CHILD_FAILED, (int32_t)getpid(), "", "out of memory"};
    send_to(0, T_STATE, &w, sizeof w);
    goto ended;
  }
  my_host(rr->host, sizeof rr->host);
  n->cfg = b->cfg;
  n->nchildren = slot + 1;
  n->parent_pid = -1;
  memcpy(n->device_ids, b->device_ids, sizeof n->device_ids);
  snprintf(n->prefix, sizeof n->prefix, "%s", b->prefix);
  n->trace_path = b->trace_path[0] ? strdup(b->trace_path) : NULL;
  n->ctl = ctl;
  pto_event_init(&ctl->parent_ev, false);
  mbox_init(&ctl->mbox[slot]);
  rr->n = n;
  rr->slot = slot;
  void *init = NULL, *arg = NULL;
  char why[300] = "";
  bool same_host = strcmp(b->host, rr->host) == 0;
  rr->other_host = !same_host;
  int fd = same_host ? shm_open(b->host_shm, O_RDWR, 0) : -1;
  void *host = NULL, *space = NULL;
  if (fnref_decode(&b->chip_init, &init, why, sizeof why) ||
      fnref_decode(&b->chip_init_arg, &arg, why, sizeof why)) {
  } else if (same_host && fd < 0) {
    snprintf(why, sizeof why, "cannot open node host memory '%s': %s", b->host_shm,
             strerror(errno));
  } else if (!map_at(b->host_addr, b->host_bytes, b->space_bytes, fd, &host, &space)) {
    snprintf(why, sizeof why,
             "cannot map node host memory and windows at %#" PRIx64 " (in use in this process)",
             b->host_addr);
  }
  if (fd >= 0) close(fd);
  snprintf(rr->why, sizeof rr->why, "%.150s", why);
  if (why[0]) {
    send_state(rr, CHILD_FAILED);
  } else {
    n->cfg.chip_init = (pto_chip_init_fn)init;
    n->cfg.chip_init_arg = arg;
    n->host = host;
    n->space = space;
    pthread_t t;
    if (pthread_create(&t, NULL, rank_relay_main, rr) != 0) {
      snprintf(rr->why, sizeof rr->why, "cannot start the relay thread");
      send_state(rr, CHILD_FAILED);
    } else {
      status = node_child_serve(n, slot, false);
      if (status) snprintf(rr->why, sizeof rr->why, "chip creation or chip_init failed");
      atomic_store_explicit(&rr->stop, true, memory_order_release);
      pto_event_signal(&ctl->parent_ev);
      pthread_join(t, NULL);
    }
    munmap(host, b->host_bytes);
    munmap(space, b->space_bytes);
  }
ended:
  send_to(0, T_ENDED, &status, sizeof status);
  if (n) free(n->trace_path);
  free(ctl);
  free(n);
  free(rr);
}

static void serve_forever(void) {
  wire_begin *b = malloc(sizeof *b);
  uint64_t pause = POLL_MIN_NS;
  for (;;) {
    int flag = 0, bytes = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, g_comm, &flag, &st);
    if (!flag) {
      nap(pause);
      pause = pause * 2 > POLL_MAX_NS * 10 ? POLL_MAX_NS * 10 : pause * 2;
      continue;
    }
    pause = POLL_MIN_NS;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    if (st.MPI_TAG == T_BEGIN && b && bytes == (int)sizeof *b) {
      MPI_Recv(b, bytes, MPI_BYTE, 0, T_BEGIN, g_comm, MPI_STATUS_IGNORE);
      serve_node(b);
      continue;
    }
    /* FINAL, or a message of no node: received so it does not linger */
    char *junk = bytes > 0 ? malloc((size_t)bytes) : NULL;
    MPI_Recv(junk, junk ? bytes : 0, MPI_BYTE, 0, st.MPI_TAG, g_comm, MPI_STATUS_IGNORE);
    free(junk);
    if (st.MPI_TAG == T_FINAL || !b) break;
  }
  int status = b ? 0 : 3; /* 3: out of memory, as a forked child */
  free(b);
  MPI_Comm_free(&g_comm);
  if (g_inited_by_us) MPI_Finalize();
  exit(status);
}

#endif
