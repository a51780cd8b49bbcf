/* coll_mpi.c — pto's collectives and put/get on the MPI backend against
 * Open MPI's, in the same mpirun, on the same buffers. Each process is one
 * chip (MPI_COMM_WORLD rank r = chip r) with one domain of every rank and
 * calls from its main thread as a kernel would.
 *
 *   mpiexec -np N bench_coll_mpi [--trials T] [--min BYTES] [--max BYTES]
 *                                [--step F] [--quick] [--only COLL,...]
 *                                [--sizes B,B,...] [--systems SYS,...] [--iters N]
 *                                [--mpi-thread single|funneled|serialized]
 *                                [--alloc heap|default]
 *
 * Sizes --min (default 8 B) to --max (default 16 MiB), by --step (8x;
 * --quick: 64x), or the list --sizes; --systems keeps the named pto systems
 * (the MPI call, the reference, always runs); --iters sets the calls per
 * trial (default: 32 MiB worth, 3 to 300, or more, up to 100000, to last
 * about 5 ms on the slowest system); --only keeps the named collectives
 * (allreduce, allgather, reduce_scatter, broadcast, alltoall, put, get). A size is the bytes of
 * each rank's src (allreduce, allgather, broadcast), or of its whole src of N blocks
 * (reduce-scatter, all-to-all). Systems: pto (PTO_COLL_AUTO: MPI's collectives on this backend),
 * pto-mesh and pto-ring (allreduce: the RMA algorithms on the windows), pto-repro (allreduce,
 * PTO_RED_REPRODUCIBLE), pto-shm (pto's own collectives, call table, mesh or ring, on the
 * shared-memory backend that a node's forked chips use: a second domain over the same processes,
 * its windows at one address that every rank reserves; left out when some rank cannot reserve
 * it), and MPI's call
 * (allreduce: also MPI_Iallreduce + MPI_Wait). put/get: rank 0 to rank 1 (pto-shm: on the
 * shared-memory domain), pto_put + pto_quiet and
 * pto_get against MPI_Put + MPI_Win_flush and MPI_Get + MPI_Win_flush on an MPI_Win_allocate
 * window. Each trial times back-to-back calls of every system in turn; printed (CSV, rank 0), per
 * system: the median over trials of the slowest rank's µs per call, the
 * min and max, and the median, min and max over trials of its time over
 * the MPI call's in the same trial. PTO_MPI_SHARED_WINDOWS=0 measures RMA
 * windows. --mpi-thread LEVEL runs Open MPI's calls alone, in a process at
 * that thread level (pto, which needs MPI_THREAD_MULTIPLE, is not set up),
 * their systems marked "@LEVEL": the reference as a program without pto
 * runs it (bench/README.md). --alloc: the allocator rule (alloc_rule, below;
 * heap by default), said on stderr. */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "pto/coll.h"

static int me, np, trials = 5, fixed_iters; /* --iters: calls per trial, else by size */
static const char *windows;
/* --mpi-thread LEVEL below MPI_THREAD_MULTIPLE: Open MPI's calls alone, as
 * a program that is not pto's runs them (pto needs MULTIPLE, under which
 * Open MPI 4.1 takes locks on every call); their rows say "@LEVEL" */
static const char *level_name; /* NULL: pto's level, pto runs */

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double slowest(double us) {
  double m;
  MPI_Allreduce(&us, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

typedef struct bench {
  pto_comm c;
  pto_kctx k;
  pto_tensor scratch, shm_scratch;
  bool shm; /* the shm domain (2) is open */
  float *in, *out;
  MPI_Win mwin;
  void *mbase;
} bench;

/* Calls per trial (without --iters): 32 MiB worth, 3 to 300, or more where
 * those last less than about TRIAL_NS on the slowest of the point's
 * systems and ranks (per_call_ns: timed over 3 calls after the warm-up),
 * up to 100000. 300 8-byte puts lasted 7.5 us, of the order of the skew
 * with which the ranks leave the barrier before the trial. */
#define TRIAL_NS 5e6
static int iters_for(int64_t bytes, double per_call_ns) {
  double by_size = (double)((int64_t)32 << 20) / (double)(bytes > 0 ? bytes : 1);
  by_size = by_size < 3 ? 3 : by_size > 300 ? 300 : by_size;
  double by_time = per_call_ns > 0 ? TRIAL_NS / per_call_ns : 100000;
  double it = by_time > by_size ? by_time : by_size;
  return it > 100000 ? 100000 : (int)it;
}

static void fail(bench *b, const char *what, int rc) {
  char det[400] = "an MPI call failed";
  if (!level_name) comm_task_error(&b->c, det, sizeof det);
  fprintf(stderr, "rank %d: %s: %s: %s\n", me, what, pto_status_name(rc), det);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static pto_tensor f32(void *p, int64_t n) {
  pto_tensor t;
  pto_tensor_init(&t, p, (size_t)n * 4, PTO_F32, 1, &n);
  return t;
}

/* One (collective, system, size) point, resolved before it is timed so
 * that a call is only the call: the collective and system as numbers, and
 * pto's views made once, as a kernel would hold them. */
enum { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BROADCAST, C_ALLTOALL, C_PUT, C_GET };
enum { S_PTO, S_MESH, S_RING, S_REPRO, S_SHM, S_IALLREDUCE, S_MPI };
static const char *const coll_names[] = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "put", "get"};
typedef struct point {
  int coll, sys;
  int n, blk; /* elements of a rank's src; of each of its np blocks */
  pto_tensor in, out, big_in, big_out, blk_out, remote;
} point;

static point prepare(bench *b, int coll, const char *sys, int64_t bytes) {
  point pt;
  memset(&pt, 0, sizeof pt);
  pt.coll = coll;
  pt.sys = strcmp(sys, "pto") == 0              ? S_PTO
           : strcmp(sys, "pto-mesh") == 0       ? S_MESH
           : strcmp(sys, "pto-ring") == 0       ? S_RING
           : strcmp(sys, "pto-repro") == 0      ? S_REPRO
           : strcmp(sys, "pto-shm") == 0        ? S_SHM
           : strcmp(sys, "MPI_Iallreduce") == 0 ? S_IALLREDUCE
                                                : S_MPI;
  int64_t n = bytes / 4, blk = n / np;
  pt.n = (int)n;
  pt.blk = (int)blk;
  pt.in = f32(b->in, n);
  pt.out = f32(b->out, n);
  pt.big_in = f32(b->in, blk * np);
  pt.big_out = f32(b->out, coll == C_ALLGATHER ? n * np : blk * np);
  pt.blk_out = f32(b->out, blk);
  if ((coll == C_PUT || coll == C_GET) && pt.sys < S_IALLREDUCE) /* the peer's copy: rank 1's */
    pto_comm_window_tensor(&b->c, pt.sys == S_SHM ? 2 : 1, 1, "data", PTO_F32, 1, &n, &pt.remote);
  return pt;
}

/* One call of the point's collective by its system. */
static int one(bench *b, const point *pt) {
  bool mpi = pt->sys >= S_IALLREDUCE;
  int n = pt->n, blk = pt->blk;
  int dom = pt->sys == S_SHM ? 2 : 1;
  const pto_tensor *scratch = pt->sys == S_SHM ? &b->shm_scratch : &b->scratch;
  switch (pt->coll) {
  case C_ALLREDUCE:
    if (pt->sys == S_IALLREDUCE) { /* what a nonblocking call costs in MPI itself */
      MPI_Request r;
      int rc = MPI_Iallreduce(b->in, b->out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
      return rc ? rc : MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    if (mpi) return MPI_Allreduce(b->in, b->out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return pto_allreduce(&b->k, dom, scratch, &pt->out, &pt->in,
                         pt->sys == S_REPRO ? (pto_red_op)(PTO_RED_SUM | PTO_RED_REPRODUCIBLE)
                                            : PTO_RED_SUM,
                         pt->sys == S_MESH   ? PTO_COLL_MESH
                         : pt->sys == S_RING ? PTO_COLL_RING
                                             : PTO_COLL_AUTO);
  case C_ALLGATHER:
    if (mpi) return MPI_Allgather(b->in, n, MPI_FLOAT, b->out, n, MPI_FLOAT, MPI_COMM_WORLD);
    return pto_allgather(&b->k, dom, scratch, &pt->big_out, &pt->in);
  case C_BROADCAST:
    /* both in place on the root: MPI_Bcast sends its one buffer; pto's
     * root passes its dst as src (with another src it would copy it into
     * dst too, a copy MPI_Bcast does not make) */
    if (mpi) return MPI_Bcast(b->out, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    return pto_broadcast(&b->k, dom, scratch, &pt->out, me == 0 ? &pt->out : NULL, 0);
  case C_REDUCE_SCATTER:
    if (mpi)
      return MPI_Reduce_scatter_block(b->in, b->out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return pto_reduce_scatter(&b->k, dom, scratch, &pt->blk_out, &pt->big_in, PTO_RED_SUM);
  case C_ALLTOALL:
    if (mpi) return MPI_Alltoall(b->in, blk, MPI_FLOAT, b->out, blk, MPI_FLOAT, MPI_COMM_WORLD);
    return pto_alltoall(&b->k, dom, scratch, &pt->big_out, &pt->big_in);
  }
  /* put/get: rank 0 to rank 1 only; the others wait in the barrier */
  if (me != 0) return 0;
  bool put = pt->coll == C_PUT;
  if (mpi) {
    int bytes = 4 * n;
    int rc = put ? MPI_Put(b->in, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, b->mwin)
                 : MPI_Get(b->out, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, b->mwin);
    return rc ? rc : MPI_Win_flush(1, b->mwin);
  }
  if (!put) return pto_get(&b->k, dom, 1, &pt->out, &pt->remote, NULL);
  int rc = pto_put(&b->k, dom, 1, &pt->remote, &pt->in, NULL);
  return rc ? rc : pto_quiet(&b->k, dom);
}

/* Every system of one (collective, size) point, interleaved: each trial
 * times every system in turn, so that a change of load on a shared host
 * falls on all of them alike, and the ratio to the reference (the last
 * system: Open MPI's call) is taken within the trial. */
#define MAX_SYS 8
static void measure(bench *b, int ci, const char *const *sys, int nsys, int64_t bytes) {
  static double t[MAX_SYS][100], ratio[MAX_SYS][100];
  const char *coll = coll_names[ci];
  point pt[MAX_SYS];
  int rc = 0;
  double per_call = 0; /* ns of the slowest system's calls after its warm-up */
  for (int s = 0; s < nsys && !rc; s++) {
    pt[s] = prepare(b, ci, sys[s], bytes);
    rc = one(b, &pt[s]); /* warm-up */
    if (fixed_iters > 0) continue;
    uint64_t t0 = pto_now_ns();
    for (int i = 0; i < 3 && !rc; i++)
      rc = one(b, &pt[s]);
    double ns = (double)(pto_now_ns() - t0) / 3;
    per_call = ns > per_call ? ns : per_call;
  }
  int iters = fixed_iters > 0 ? fixed_iters : iters_for(bytes, slowest(per_call));
  for (int tr = 0; tr < trials && !rc; tr++)
    for (int s = 0; s < nsys && !rc; s++) {
      MPI_Barrier(MPI_COMM_WORLD);
      uint64_t t0 = pto_now_ns();
      for (int i = 0; i < iters && !rc; i++)
        rc = one(b, &pt[s]);
      t[s][tr] = slowest((double)(pto_now_ns() - t0) / iters / 1e3);
    }
  if (rc) fail(b, coll, rc);
  for (int s = 0; s < nsys; s++) {
    for (int tr = 0; tr < trials; tr++)
      ratio[s][tr] = t[s][tr] / t[nsys - 1][tr];
    qsort(t[s], (size_t)trials, sizeof t[s][0], cmp);
    qsort(ratio[s], (size_t)trials, sizeof ratio[s][0], cmp);
    if (me == 0)
      printf("%d,%s,%s,%lld,%s%s%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", np, windows, coll,
             (long long)bytes, sys[s], level_name ? "@" : "", level_name ? level_name : "",
             t[s][trials / 2], t[s][0], t[s][trials - 1], ratio[s][trials / 2], ratio[s][0],
             ratio[s][trials - 1]);
  }
  fflush(stdout);
}

static bool wanted(const char *only, const char *coll) {
  if (!only) return true;
  size_t n = strlen(coll);
  for (const char *p = strstr(only, coll); p; p = strstr(p + 1, coll))
    if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
  return false;
}

/* Domain 2: the same ranks and buffers on the shared-memory backend, its
 * windows at an address rank 0 reserved and every other rank reserves too
 * (the node reserves it before forking its chips; here the processes are
 * mpirun's). False, with a note, when some rank cannot. */
static bool open_shm(bench *b, const pto_window_buffer *bufs) {
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  comm_desc_layout(&d, bufs, 2);
  size_t bytes = (size_t)d.win_bytes * (size_t)np;
  void *base = NULL;
  uint64_t addr = 0;
  if (me == 0 && comm_space_reserve(bytes, &base) == 0) addr = (uint64_t)(uintptr_t)base;
  MPI_Bcast(&addr, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (me != 0 && addr) {
    base = mmap((void *)(uintptr_t)addr, bytes, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (base != (void *)(uintptr_t)addr) {
      if (base != MAP_FAILED) munmap(base, bytes);
      base = NULL;
    }
  }
  int ok = base != NULL, all;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (base) munmap(base, bytes);
    if (me == 0) fprintf(stderr, "pto-shm left out: the window range is taken on some rank\n");
    return false;
  }
  int pid = me == 0 ? (int)getpid() : 0;
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  d.id = 2;
  d.nranks = np;
  d.backend = COMM_BACKEND_SHM;
  d.base = addr;
  d.wait_timeout_ms = 60000;
  snprintf(d.prefix, sizeof d.prefix, "/pto_bench_coll.%d", pid);
  for (int r = 0; r < np; r++)
    d.chips[r] = r;
  int rc = comm_domain_open(&b->c, &d, me);
  MPI_Barrier(MPI_COMM_WORLD);
  if (!rc) rc = comm_domain_attach(&b->c, 2);
  if (rc) fail(b, "shm domain", rc);
  /* every rank has mapped every window: the names can go, so a run that
   * is killed or aborts leaves nothing in /dev/shm */
  MPI_Barrier(MPI_COMM_WORLD);
  comm_shm_unlink(&d, me);
  return true;
}

static const char *const level_names[] = {"single", "funneled", "serialized", "multiple"};
static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                             MPI_THREAD_MULTIPLE};

/* The allocator rule of this program, pto's calls and Open MPI's alike:
 * glibc's malloc keeps what is freed (no chunk from its own mmap, the
 * heap's top never trimmed), so no call's temporary buffer is a fresh
 * mapping whose first touch costs 11-14 us a page on some VMs. Open MPI's
 * collectives allocate such buffers per call (so do pto's through MPI's
 * nonblocking ones): at glibc's defaults a 2 MiB MPI_Reduce_scatter_block
 * across two hosts took 1.5 ms or 14 ms, by whether an earlier free had
 * raised glibc's dynamic mmap threshold in that process. --alloc default
 * leaves glibc's defaults. */
static const char *alloc_rule(const char *rule) {
  if (rule && strcmp(rule, "default") == 0) return "default: glibc malloc's defaults";
  if (rule && strcmp(rule, "heap") != 0) return NULL; /* refused after MPI_Init */
  if (!mallopt(M_MMAP_THRESHOLD, 64 << 20) || !mallopt(M_TRIM_THRESHOLD, 256 << 20))
    return "default: mallopt refused the thresholds";
  return "heap: glibc malloc with M_MMAP_THRESHOLD 64 MiB and M_TRIM_THRESHOLD 256 MiB";
}

int main(int argc, char **argv) {
  int64_t minb = 8, maxb = 16 << 20, step = 8, sizes[64];
  int nsizes = 0, level = 3; /* MPI_THREAD_MULTIPLE, pto's */
  const char *only = NULL, *systems = NULL, *alloc = NULL;
  /* read before MPI_Init_thread, which takes the thread level */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--alloc") == 0 && i + 1 < argc)
      alloc = argv[++i];
    else if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
      trials = atoi(argv[++i]);
    else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
      maxb = atoll(argv[++i]);
    else if (strcmp(argv[i], "--min") == 0 && i + 1 < argc)
      minb = atoll(argv[++i]);
    else if (strcmp(argv[i], "--step") == 0 && i + 1 < argc)
      step = atoll(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      fixed_iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--systems") == 0 && i + 1 < argc)
      systems = argv[++i];
    else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
      for (char *p = argv[++i]; *p && nsizes < 64; p += *p == ',')
        sizes[nsizes++] = strtoll(p, &p, 10);
    else if (strcmp(argv[i], "--quick") == 0)
      step = 64;
    else if (strcmp(argv[i], "--mpi-thread") == 0 && i + 1 < argc)
      for (level = 0, i++; level < 4 && strcmp(argv[i], level_names[level]) != 0;)
        level++;
  }
  if (level == 4) {
    fprintf(stderr, "--mpi-thread: single, funneled, serialized or multiple\n");
    return 2;
  }
  if (level < 3) level_name = level_names[level];
  const char *rule = alloc_rule(alloc); /* before MPI or pto allocates */
  int provided;
  MPI_Init_thread(&argc, &argv, levels[level], &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (nsizes) {
    minb = maxb = sizes[0];
    for (int i = 0; i < nsizes; i++)
      maxb = sizes[i] > maxb ? sizes[i] : maxb, minb = sizes[i] < minb ? sizes[i] : minb;
  } else {
    for (int64_t bytes = minb; bytes <= maxb && nsizes<64; bytes *= step> 1 ? step : 2)
      sizes[nsizes++] = bytes;
  }
  if (trials < 1 || trials > 100 || minb < 8 || maxb < minb || step < 2 || np < 2 || !rule) {
    if (me == 0)
      fprintf(stderr, "--trials 1..100, 8 <= --min <= --max, --step >= 2, --alloc heap or "
                      "default, at least 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  const char *sw = getenv("PTO_MPI_SHARED_WINDOWS");
  windows = sw && strcmp(sw, "0") == 0 ? "rma" : "shm";

  bench b;
  memset(&b, 0, sizeof b);
  pto_window_buffer bufs[2] = {{"scratch", pto_coll_scratch_bytes(np, (size_t)maxb)},
                               {"data", (size_t)maxb}};
  comm_domain_desc d;
  memset(&d, 0, sizeof d);
  comm_desc_layout(&d, bufs, 2);
  d.id = 1;
  d.nranks = np;
  d.backend = COMM_BACKEND_MPI;
  d.wait_timeout_ms = 60000;
  for (int r = 0; r < np; r++)
    d.chips[r] = r;
  if (!level_name) {
    comm_init(&b.c, me);
    int rc = comm_domain_open(&b.c, &d, me);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!rc) rc = comm_domain_attach(&b.c, 1);
    if (rc) fail(&b, "domain", rc);
    b.shm = open_shm(&b, bufs);
    comm_task_begin(&b.c, 1, (np < 64 ? (1ull << np) : 0) - 1);
    b.k.env = &b.c;
    int64_t sb = (int64_t)bufs[0].bytes;
    pto_comm_window_tensor(&b.c, 1, me, "scratch", PTO_U8, 1, &sb, &b.scratch);
    if (b.shm) pto_comm_window_tensor(&b.c, 2, me, "scratch", PTO_U8, 1, &sb, &b.shm_scratch);
  } else if (provided != levels[level] && me == 0) {
    fprintf(stderr, "MPI gave thread level %d for %s\n", provided, level_name);
  }
  b.in = malloc((size_t)maxb);
  b.out = malloc((size_t)maxb * (size_t)np);
  for (int64_t i = 0; i < maxb / 4; i++)
    b.in[i] = (float)(me + i % 7);
  /* MPI's window of the same kind as pto's: MPI_Win_allocate (on one host
   * Open MPI's osc/sm, as pto's shared windows), or MPI_Win_create on
   * memory of the program (as pto's RMA windows) */
  if (strcmp(windows, "rma") == 0) {
    b.mbase = calloc(1, (size_t)maxb);
    MPI_Win_create(b.mbase, (MPI_Aint)maxb, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &b.mwin);
  } else {
    MPI_Win_allocate((MPI_Aint)maxb, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &b.mbase, &b.mwin);
  }
  /* every system's target memory written before it is read: a get from
   * pages never written reads the kernel's one zero page, which no real
   * data is (a get of 16 MiB took about half the time). pto's RMA windows
   * start untouched (a new mapping), so its "data" is written here too. */
  memset(b.mbase, 0, (size_t)maxb);
  pto_tensor mine;
  int64_t nb = maxb;
  if (!level_name && pto_comm_window_tensor(&b.c, 1, me, "data", PTO_U8, 1, &nb, &mine) == 0)
    memset(mine.buf, 0, (size_t)maxb);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, b.mwin);

  if (me == 0) fprintf(stderr, "bench_coll_mpi: allocator rule %s\n", rule);
  if (me == 0)
    printf("ranks,windows,collective,size_bytes,system,us_median,us_min,us_max,"
           "ratio_median,ratio_min,ratio_max\n");
  static const char *mpi_names[] = {"MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block",
                                    "MPI_Bcast", "MPI_Alltoall"};
  for (int si = 0; si < nsizes; si++) {
    int64_t bytes = sizes[si];
    for (int ci = 0; ci < 5; ci++) {
      /* reduce-scatter and all-to-all split the size into np blocks */
      if ((ci == C_REDUCE_SCATTER || ci == C_ALLTOALL) && bytes < 4 * np) continue;
      if (!wanted(only, coll_names[ci])) continue;
      const char *sys[MAX_SYS],
          *cand[] = {"pto", "pto-mesh", "pto-ring", "pto-repro", "pto-shm", "MPI_Iallreduce"};
      int nsys = 0;
      for (int c = level_name ? 5 : 0; c < 6; c++) { /* Open MPI's alone: MPI_Iallreduce */
        bool allreduce_only = (c >= 1 && c <= 3) || c == 5;
        if ((allreduce_only && ci != C_ALLREDUCE) || (c == 4 && !b.shm)) continue;
        if (!systems || wanted(systems, cand[c])) sys[nsys++] = cand[c];
      }
      sys[nsys++] = mpi_names[ci];
      measure(&b, ci, sys, nsys, bytes);
    }
    /* put/get: pto on the MPI backend, and on the shm domain when open and asked for */
    for (int ci = C_PUT; ci <= C_GET; ci++) {
      if (!wanted(only, coll_names[ci])) continue;
      const char *sys[3];
      int nsys = 0;
      if (!level_name && (!systems || wanted(systems, "pto"))) sys[nsys++] = "pto";
      if (b.shm && systems && wanted(systems, "pto-shm")) sys[nsys++] = "pto-shm";
      sys[nsys++] = ci == C_PUT ? "MPI_Put+flush" : "MPI_Get+flush";
      measure(&b, ci, sys, nsys, bytes);
    }
  }
  MPI_Win_unlock_all(b.mwin);
  MPI_Win_free(&b.mwin);
  if (strcmp(windows, "rma") == 0) free(b.mbase);
  free(b.in);
  free(b.out);
  if (!level_name) comm_fini(&b.c, true);
  MPI_Finalize();
  return 0;
}
