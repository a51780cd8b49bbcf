/* node_mpi.c — chips as MPI ranks (see node_mpi.h): MPI start-up and the
 * end of the job, the address agreement for host memory and windows, rank
 * 0's side of a node's start and stop, and the service loop of ranks > 0
 * (one node after another). The messages and the relays that carry the
 * mailbox protocol: mpi_relay.h. */
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
#include "node/mpi_relay.h"
#include "node/node_internal.h"
#include "node/proc_watch.h"
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
void node_mpi_wake(pto_node *n) { (void)n; }
void node_mpi_stop(pto_node *n) { (void)n; }

#else

#include <mpi.h>

#define POLL_MIN_NS 20000ull          /* a rank between nodes polls this often after a message */
#define POLL_MAX_NS 10000000ull       /* ... and at least this often when idle */
#define ADDR_FIRST  0x2a0000000000ull /* far from the program, heap, libraries and stacks */
#define ADDR_LAST   0x6f0000000000ull
#define ADDR_STRIDE (64ull << 30)

typedef struct wire_begin {
  pto_node_config cfg; /* its pointers are cleared; the two below travel as fnrefs */
  fnref chip_init, chip_init_arg;
  int32_t slot;
  root_proc root; /* rank 0's process (its start time: 0 when it cannot be read) */
  int32_t device_ids[PTO_NODE_MAX_CHIPS];
  uint64_t host_addr, host_bytes, space_addr, space_bytes;
  char prefix[48];
  char host_shm[64];
  char host[64]; /* rank 0's host name */
  char trace_path[PATH_MAX];
  /* a controlled schedule's node record and replay (node_sched_config
   * keeps them off cfg): each rank records or replays its own chip
   * tasks' files, named after them (sched_files.c) */
  char sched_record[PATH_MAX], sched_replay[PATH_MAX];
} wire_begin;

static MPI_Comm g_comm = MPI_COMM_NULL;
static int g_rank = -1, g_size;
static bool g_inited_by_us;
static pto_node *g_live;       /* rank 0: the node of this job, NULL between nodes */
static _Atomic bool g_serving; /* ranks > 0: serving a node's chip (serve_node) */
static root_proc g_root;       /* ranks > 0: rank 0's process, from the last node's begin */

static void nap(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

static void my_host(char *buf, size_t len) {
  if (gethostname(buf, len) != 0) snprintf(buf, len, "?");
  buf[len - 1] = 0;
}

static void send_to(int rank, int tag, const void *p, size_t bytes) {
  relay_send(g_comm, rank, tag, p, bytes);
}

/* ---- the end of the job (rank 0) ---- */

/* A node still live when rank 0's program ends (`how`: exits, finalises
 * MPI) ends the job: its ranks cannot be released one by one. */
static void end_with_live_node(const char *how) {
  if (!g_live) return;
  fprintf(stderr, "pto node: rank 0 %s with its node %s: ending the MPI job\n", how,
          g_live->fatal ? "failed" : "not destroyed (call pto_node_destroy)");
  /* every object of the run now: MPI_Abort may end us with SIGKILL */
  run_guard_end(g_live->prefix);
  MPI_Abort(g_comm, 1);
}

/* The other ranks leave their service loop, finalise MPI and exit 0. Once. */
static void release_ranks(void) {
  if (g_comm == MPI_COMM_NULL) return;
  for (int r = 1; r < g_size; r++)
    send_to(r, T_FINAL, NULL, 0);
  MPI_Comm_free(&g_comm);
}

/* A program that initialised MPI itself finalises it: MPI_Finalize first
 * deletes the attributes of MPI_COMM_SELF, while MPI still works, so pto
 * releases the other ranks here (they wait in pto_node_create, and would
 * keep rank 0's MPI_Finalize waiting for them for ever). */
static int at_finalize(MPI_Comm comm, int key, void *val, void *extra) {
  (void)comm;
  (void)key;
  (void)val;
  (void)extra;
  end_with_live_node("finalises MPI");
  release_ranks();
  return MPI_SUCCESS;
}

/* The program's end without MPI_Finalize (pto initialised MPI, or the
 * program forgot to finalise it): the same release, then pto finalises
 * what it initialised. */
static void at_exit(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return; /* at_finalize did it all */
  end_with_live_node("exits");
  release_ranks();
  if (g_inited_by_us) MPI_Finalize();
}

/* The comm layer's end of the job (comm.h, comm_set_job_end: a kernel's
 * collective on MPI's collectives that MPI holds the kernel's memory for
 * and that never completes), on any rank, from the kernel's thread: the
 * objects of the domain's run first, as before the node's own MPI_Abort. */
static void unlink_run_of(const char *domain_prefix) { run_guard_unlink_all(domain_prefix); }

static void serve_forever(void) __attribute__((noreturn));

static int mpi_init(pto_error_info *err) {
  int inited = 0, fin = 0, provided = MPI_THREAD_SINGLE;
  MPI_Finalized(&fin);
  if (fin) {
    node_set_err(err, PTO_EMPI,
                 "node under mpirun: MPI was finalised (rank 0's MPI_Finalize also released the "
                 "other ranks): create every node before MPI_Finalize");
    return PTO_EMPI;
  }
  if (g_comm != MPI_COMM_NULL) return 0;
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
  comm_set_job_end(unlink_run_of);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  if (g_rank == 0) {
    atexit(at_exit);
    int key;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &key, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL);
  }
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

int node_mpi_start(pto_node *n, char *why, size_t len) {
  wire_begin *b = calloc(1, sizeof *b);
  if (!b) {
    snprintf(why, len, "node under mpirun: out of memory");
    return PTO_ENOMEM;
  }
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
  b->root.pid = (int32_t)getpid();
  if (!proc_start_time(b->root.pid, &b->root.start)) b->root.start = 0;
  b->host_addr = (uint64_t)(uintptr_t)n->host;
  b->host_bytes = n->cfg.host_bytes;
  b->space_addr = (uint64_t)(uintptr_t)n->space;
  b->space_bytes = n->cfg.window_space;
  snprintf(b->prefix, sizeof b->prefix, "%s", n->prefix);
  snprintf(b->host_shm, sizeof b->host_shm, "%s", n->host_shm);
  snprintf(b->host, sizeof b->host, "%s", n->mpi_host);
  snprintf(b->trace_path, sizeof b->trace_path, "%s", n->trace_path ? n->trace_path : "");
  snprintf(b->sched_record, sizeof b->sched_record, "%s", n->sched_record ? n->sched_record : "");
  snprintf(b->sched_replay, sizeof b->sched_replay, "%s", n->sched_replay ? n->sched_replay : "");
  for (int s = 1; s < n->cfg.nchips; s++) {
    n->child[s] = (child_slot){.kind = SLOT_RANK, .alive = true, .task = -1};
    snprintf(n->child[s].where, sizeof n->child[s].where, "MPI rank %d", s);
    b->slot = s;
    send_to(s, T_BEGIN, b, sizeof *b);
  }
  free(b);
  g_live = n;
  char rwhy[200];
  n->mpi_relay = root_relay_start(n, g_comm, rwhy, sizeof rwhy);
  if (!n->mpi_relay) {
    snprintf(why, len, "node under mpirun: %s", rwhy);
    return PTO_ESYSTEM;
  }
  return 0;
}

void node_mpi_posted(pto_node *n, int s) {
  (void)s;
  root_relay_wake(n->mpi_relay);
}

/* On the parent's thread, which alone changes the observer's domains. */
void node_mpi_wake(pto_node *n) {
  if (!atomic_load_explicit(&n->cancel_arrived, memory_order_relaxed)) return;
  uint64_t m = atomic_exchange_explicit(&n->cancel_arrived, 0, memory_order_acquire);
  for (; m; m &= m - 1)
    comm_wake(&n->observer, __builtin_ctzll(m));
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
  root_relay_stop(n->mpi_relay);
  n->mpi_relay = NULL;
  g_live = NULL;
}

/* ---- ranks > 0 ---- */

/* The exit path of a rank > 0 (on_exit: it gets the status): a process
 * that calls exit() while it serves a node's chip (a kernel or chip_init
 * calling exit, say) tells rank 0 how it ended, so that rank 0 names the
 * status at once (PTO_ECHIP_DIED) instead of a missing heartbeat later.
 * _exit and signals leave no such word; rank 0 then sees the process gone
 * (proc_watch.h). */
static void last_word(int status, void *arg) {
  (void)arg;
  /* exchange: said once, also when several threads exit at once */
  if (!atomic_exchange_explicit(&g_serving, false, memory_order_acq_rel)) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) send_to(0, T_ENDED, &status, sizeof status);
}

/* Rank c's part of one node: its chip, served until the node's exit frame. */
static void serve_node(const wire_begin *b) {
  int slot = b->slot, status = 2;
  char host[64], why[300] = "";
  my_host(host, sizeof host);
  pto_node *n = calloc(1, sizeof *n);
  size_t ctl_bytes = sizeof(node_ctl) + (size_t)(slot + 1) * sizeof(node_mbox);
  /* this rank's own: no user code here holds this node's pointer (ranks
   * above 0 never return from pto_node_create), so its host_used count is
   * never taken; rank 0's is the node's */
  node_ctl *ctl = calloc(1, ctl_bytes);
  if (!n || !ctl) {
    relay_send_state(g_comm, CHILD_FAILED, host, "out of memory");
    goto ended;
  }
  n->cfg = b->cfg;
  n->nchildren = slot + 1;
  n->parent_pid = -1;
  memcpy(n->device_ids, b->device_ids, sizeof n->device_ids);
  snprintf(n->prefix, sizeof n->prefix, "%s", b->prefix);
  n->trace_path = b->trace_path[0] ? strdup(b->trace_path) : NULL;
  n->sched_record = b->sched_record[0] ? strdup(b->sched_record) : NULL;
  n->sched_replay = b->sched_replay[0] ? strdup(b->sched_replay) : NULL;
  n->ctl = ctl;
  pto_event_init(&ctl->parent_ev, false);
  mbox_init(&ctl->mbox[slot]);
  void *init = NULL, *arg = NULL;
  bool same_host = strcmp(b->host, host) == 0;
  int fd = same_host ? shm_open(b->host_shm, O_RDWR, 0) : -1;
  void *hmem = NULL, *space = NULL;
  if (fnref_decode(&b->chip_init, &init, why, sizeof why) ||
      fnref_decode(&b->chip_init_arg, &arg, why, sizeof why)) {
  } else if ((b->sched_record[0] && !n->sched_record) || (b->sched_replay[0] && !n->sched_replay)) {
    snprintf(why, sizeof why, "out of memory");
  } else if (same_host && fd < 0) {
    snprintf(why, sizeof why, "cannot open node host memory '%s': %s", b->host_shm,
             strerror(errno));
  } else if (!map_at(b->host_addr, b->host_bytes, b->space_bytes, fd, &hmem, &space)) {
    snprintf(why, sizeof why,
             "cannot map node host memory and windows at %#" PRIx64 " (in use in this process)",
             b->host_addr);
  }
  if (fd >= 0) close(fd);
  if (why[0]) {
    relay_send_state(g_comm, CHILD_FAILED, host, why);
    goto ended;
  }
  n->cfg.chip_init = (pto_chip_init_fn)init;
  n->cfg.chip_init_arg = arg;
  n->host = hmem;
  n->space = space;
  /* rank 0's pid means the same process here only on its host */
  g_root = same_host ? b->root : (root_proc){0, 0};
  char rwhy[200];
  rank_relay *rr = rank_relay_start(n, slot, g_comm, !same_host, host, g_root, rwhy, sizeof rwhy);
  if (!rr) {
    relay_send_state(g_comm, CHILD_FAILED, host, rwhy);
  } else {
    /* the relay reports ready or failed (chip creation, chip_init) */
    atomic_store_explicit(&g_serving, true, memory_order_release);
    status = node_child_serve(n, slot, false);
    atomic_store_explicit(&g_serving, false, memory_order_release);
    rank_relay_stop(rr); /* after one last pass: the exit frame's reply is out */
  }
  munmap(hmem, b->host_bytes);
  munmap(space, b->space_bytes);
ended:
  send_to(0, T_ENDED, &status, sizeof status);
  if (n) free(n->trace_path);
  if (n) free(n->sched_record), free(n->sched_replay);
  free(ctl);
  free(n);
}

/* relay_recv's look at rank 0 between nodes (relay_check_root: it does
 * not return when rank 0 is gone) */
static bool root_gone_between(void *arg) {
  (void)arg;
  relay_check_root(&g_root, g_rank, NULL); /* between nodes: no objects of ours */
  return false;
}

static void serve_forever(void) {
  on_exit(last_word, NULL);
  wire_begin *b = malloc(sizeof *b);
  uint64_t pause = POLL_MIN_NS;
  for (;;) {
    int flag = 0, bytes = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, g_comm, &flag, &st);
    if (!flag) {
      relay_check_root(&g_root, g_rank, NULL); /* between nodes: no objects of ours */
      nap(pause);
      pause = pause * 2 > POLL_MAX_NS ? POLL_MAX_NS : pause * 2;
      continue;
    }
    pause = POLL_MIN_NS;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    if (st.MPI_TAG == T_BEGIN && b && bytes == (int)sizeof *b) {
      /* larger than MPI's eager limit: rank 0 must live to complete it */
      relay_recv(g_comm, b, bytes, 0, T_BEGIN, root_gone_between, NULL);
      serve_node(b);
      continue;
    }
    /* FINAL, or a message of no node: received so it does not linger */
    char *junk = bytes > 0 ? malloc((size_t)bytes) : NULL;
    relay_recv(g_comm, junk, junk ? bytes : 0, 0, st.MPI_TAG, root_gone_between, NULL);
    free(junk);
    if (st.MPI_TAG == T_FINAL || !b) break;
  }
  int status = b ? 0 : 3; /* 3: out of memory, as a forked child */
  free(b);
  MPI_Comm_free(&g_comm);
  /* also when the program initialised MPI: its own MPI_Finalize, after
   * pto_node_create, never runs on this rank */
  MPI_Finalize();
  exit(status);
}

#endif
