/* test_mpi_comm.c — the comm ops and the collectives on the MPI backend,
 * under `mpiexec -np N test_mpi_comm [mode]`. Each process is one chip
 * (MPI_COMM_WORLD rank r = chip r) and creates its domains directly through
 * the comm layer (comm_domain_open with backend COMM_BACKEND_MPI, then the
 * allocation barrier, then attach), like tests/unit/comm_fixture.h does for
 * shared memory; a kernel context whose env is the process's pto_comm calls
 * the in-kernel operations. Every check prints actual vs expected.
 *
 * modes:
 *   ops     (default) store+notify+wait (fault injection off and on),
 *           remote_load, put/get of strided views, atomic adds of every
 *           dtype, f16/bf16 adds next to concurrent stores to the other
 *           half of their words (no store lost), barrier, quiet, the
 *           epoch reuse of signal cells, a
 *           sub-domain {1,2} (np >= 4); kernel threads of a chip calling
 *           concurrently; both window layouts (shared, RMA)
 *   coll    the collectives on sizes 1, 17, 4097, 65537 (f32; f16, bf16,
 *           i32 on 17 and 4097), back-to-back on one scratch buffer, in two
 *           tasks (epochs), a mismatch reported on every rank; sub-domain;
 *           two threads per rank, each calling on its own scratch buffer
 *   repro   f32 sum allreduce (and reduce-scatter) with PTO_RED_REPRODUCIBLE
 *           (or PTO_COLL_REPRODUCIBLE=1 in the environment): bit-identical
 *           to the rank-order sum on MPI's collectives, mesh and ring, at
 *           1 Ki to 1 Mi elements, on 2 to 5 ranks; f64 once
 *   coll_path  which path a collective takes, by the MPI messages it sends
 *           (MPI_Isend counted through the profiling interface): on shared
 *           windows a call whose data fits the call table sends none, nor
 *           do 8 and 32 KiB ones (the mesh, the ring on the windows); RMA
 *           windows take the records; counts across the table's limit
 *           name the mismatch on every rank; then by the MPI collectives
 *           it starts (also counted so): on shared windows none for a
 *           reduction unless it asks for PTO_COLL_MPI, one for a
 *           broadcast from 64 KiB, an allgather from n x 512 KiB blocks
 *           (n ranks, at most 4 MiB) and an all-to-all from 1 MiB blocks
 *           (2 ranks: both from 64 KiB), none below; on RMA windows one for each
 *           but those the records carry (blocks of up to 8-32 KiB, by
 *           call); with 2
 *           ranks an allreduce, allgather or all-to-all that would start
 *           one is one exchange (one send each) instead, a broadcast the
 *           root's one send; then, on RMA
 *           windows, each call at its records' bound on one host and 4 B
 *           over it (mpi_coll.c, mpi_record_max)
 *   put_path rdma|ucx  (RMA windows) how a put and an accumulate of 32 KiB
 *           complete at the origin, by the MPI calls they make (counted
 *           through the profiling interface): on Open MPI's osc/rdma (rdma,
 *           the default on one host) by their requests (MPI_Rput,
 *           MPI_Raccumulate), with no MPI_Win_flush_local, which yields the
 *           CPU to the other ranks where they outnumber the CPUs; on
 *           osc/ucx (ucx) by MPI_Win_flush_local, no request; either way
 *           the source, overwritten as soon as the call returned, never
 *           reaches the target; then a get of the put's data (MPI_Rget
 *           on osc/rdma, no MPI_Win_flush; on osc/ucx one flush)
 *   exchange_error  (-np 2) a record exchange whose receive MPI truncates
 *           fails naming MPI_ERR_TRUNCATE, not MPI_ERR_IN_STATUS
 *   coll_path_far  (two hosts) broadcasts of up to 32 KiB are one-way: the
 *           root sends its record to each peer, the others nothing; an
 *           allreduce of up to 1 MiB starts no MPI collective, of 2 MiB one
 *   sharers (-np 2, PTO_SPIN_NS=1000000) both ranks pinned to one CPU: on
 *           shared windows rank 0's wait yields and parks, never spins
 *   coll_missing  (-np 2) rank 1 does not call: rank 0's allreduce on MPI's
 *           collectives (RMA windows) ends with PTO_EWAIT_TIMEOUT naming the
 *           call and rank 1, whose record never came, the next call on
 *           that scratch fails at once naming why; rank 1's late call
 *           with another count fails naming the mismatch; then the same
 *           through the call table (shared windows), where the next call
 *           times out again
 *   coll_stale  (-np 2, RMA windows) rank 0's allreduce of task 1 times out
 *           (rank 1 does not call); rank 1's allreduce of task 2 meets rank
 *           0's record of task 1 and fails naming it, never takes it for its
 *           own
 *   coll_late  (-np 2) rank 0's allreduce on MPI's path (2 ranks: one
 *           exchange, mpi_coll.c pair_allreduce) reaches its
 *           deadline in its data step, rank 1 calls later: rank 0's call
 *           waits for it (MPI owns src and dst until then), then fails
 *           naming it; what the program writes afterwards is left alone,
 *           rank 1 gets the sum of the values the call was made with, and
 *           the next call on the buffer completes (RMA windows, then
 *           shared windows)
 *   coll_frozen  (-np 2) rank 0's allreduce on MPI's path (one exchange) reaches
 *           its deadline in its data step and rank 1 never calls: rank 0's
 *           call ends the job (MPI_Abort) after the grace, naming the call,
 *           the buffer, the deadline and MPI's hold on src and dst (run by
 *           tests/mpi/coll_frozen.sh, which checks the exit status, that
 *           line and the time); coll_frozen_cancel: the same for a call
 *           cancelled at once (its deadline 60 s)
 *   coll_die  rank 1 exits while the others are in an allreduce on MPI's
 *           collectives: they end with PTO_EWAIT_TIMEOUT at the deadline
 *   coll_die_pair  (-np 2, two hosts) rank 1 dies where it would send its
 *           src in a 2 MiB allreduce's exchange: rank 0 ends the job
 *           naming the call once its deadline and grace passed
 *   coll_stuck  (-np 2, RMA windows) rank 0's allreduce never comes back
 *           from MPI_Testall (a wrapper blocks it, as Open MPI 4.1's TCP
 *           transport deadlocked after a peer died): the watchdog ends the
 *           job naming the call after its deadline, the grace and a margin
 *   ops_stuck  (-np 2, RMA windows) rank 0's quiet never comes back from
 *           MPI_Win_flush (a wrapper blocks it): the watchdog ends the job
 *           after the domain's wait deadline, the grace and a margin
 *   die     rank 1 exits in the middle of the others' wait: they end with
 *           PTO_EWAIT_TIMEOUT naming the cell (or mpirun ends the job), never
 *           a hang — see the ctest's pass expression
 *   open    rank 0 prints how opening a domain went (for transports that
 *           cannot give RMA windows: a named PTO_EMPI, not a crash)
 *   map_errors  (RMA windows) a domain whose windows' address space cannot
 *           be reserved (2 x 128 TiB), then one whose window cannot be
 *           mapped (1 TiB of private memory, refused by the kernel's
 *           overcommit check; skipped where overcommit is always allowed):
 *           PTO_ESYSTEM on every rank, naming the call and its errno
 *   lazy_window  (RMA windows) opening a domain with a 256 MiB buffer
 *           touches none of its pages (the process's resident memory grows
 *           by less than 32 MiB); the window still reads zero, at its far
 *           end too, and a put there lands
 *   selfinit  MPI not initialised by the program: pto does it
 *   single    MPI initialised with MPI_THREAD_SINGLE: a named PTO_EMPI */
#include <arpa/inet.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "common/half.h"
#include "pto/coll.h"
#include "pto/comm.h"

#include "../unit/coll_values.h"
#include "../unit/resident.h"

static int me, np, failures;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "FAILED rank %d %s:%d: ", me, __func__, __LINE__);                             \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    failures++;                                                                                    \
  } while (0)
#define CHECK_EQ(actual, expected, what)                                                           \
  do {                                                                                             \
    long long a_ = (long long)(actual), e_ = (long long)(expected);                                \
    if (a_ != e_) FAIL("%s: actual %lld, expected %lld", what, a_, e_);                            \
  } while (0)
/* An op returned rc: 0 expected; else print the task's details. */
#define CHECK_OK(x, rc)                                                                            \
  do {                                                                                             \
    int r_ = (rc);                                                                                 \
    if (r_) {                                                                                      \
      char det_[400];                                                                              \
      comm_task_error(&(x)->c, det_, sizeof det_);                                                 \
      FAIL("%s returned %s, expected PTO_OK: %s", #rc, pto_status_name(r_), det_);                 \
    }                                                                                              \
  } while (0)

/* ---- a domain of this process, made through the comm layer ---- */

typedef struct dom {
  pto_comm c;
  comm_domain_desc d;
  pto_kctx k;
  int rank; /* in the domain, -1: not a member */
  bool expect_open_failure;
  int open_rc;
  char open_why[400];
} dom;

static void dom_open(dom *x, int32_t id, const int *chips, int n, const pto_window_buffer *bufs,
                     int nb, bool fault, uint32_t epoch) {
  bool expect_failure = x->expect_open_failure;
  memset(x, 0, sizeof *x);
  x->expect_open_failure = expect_failure;
  comm_init(&x->c, me);
  if (comm_desc_layout(&x->d, bufs, nb) != 0) FAIL("comm_desc_layout");
  x->d.id = id;
  x->d.nranks = n;
  x->d.backend = COMM_BACKEND_MPI;
  x->d.wait_timeout_ms = 5000;
  x->d.fault_inject = fault;
  x->d.fault_seed = 12345;
  x->rank = -1;
  uint64_t group = 0;
  for (int r = 0; r < n; r++) {
    x->d.chips[r] = chips[r];
    group |= 1ull << chips[r];
    if (chips[r] == me) x->rank = r;
  }
  if (x->rank >= 0) {
    x->open_rc = comm_domain_open(&x->c, &x->d, x->rank);
    comm_task_error(&x->c, x->open_why, sizeof x->open_why);
    if (!x->expect_open_failure) CHECK_OK(x, x->open_rc);
  }
  MPI_Barrier(MPI_COMM_WORLD); /* the allocation barrier */
  if (x->rank >= 0 && x->open_rc == 0) {
    CHECK_OK(x, comm_domain_attach(&x->c, id));
    comm_task_begin(&x->c, epoch, group);
  }
  x->k.env = &x->c;
}

static void dom_close(dom *x) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (x->rank >= 0) comm_fini(&x->c, true);
}

static void dom_task(dom *x, uint32_t epoch) {
  uint64_t group = 0;
  for (int r = 0; r < x->d.nranks; r++)
    group |= 1ull << x->d.chips[r];
  CHECK_OK(x, comm_task_end(&x->c));
  /* a group task ends on every rank before the next begins (the node
   * orders them so): a rank of the next epoch would retag the cells */
  MPI_Barrier(MPI_COMM_WORLD);
  comm_task_begin(&x->c, epoch, group);
}

static pto_tensor win(dom *x, const char *name, pto_dtype dt, int64_t n) {
  pto_tensor t;
  if (pto_comm_window_tensor(&x->c, x->d.id, x->rank, name, dt, 1, &n, &t) != 0)
    FAIL("window tensor %s", name);
  return t;
}

static pto_tensor local(void *buf, int64_t n, pto_dtype dt) {
  pto_tensor t;
  pto_tensor_init(&t, buf, (size_t)n * pto_dtype_size(dt), dt, 1, &n);
  return t;
}

static pto_tensor cell_at(const pto_tensor *cells, int64_t i) {
  pto_tensor t;
  int64_t one = 1;
  pto_tensor_slice(cells, &i, &one, &t);
  return t;
}

static const int world4[4] = {0, 1, 2, 3};

/* ---- ops ---- */

#define DATA_N 1000

/* Rank r stores a pattern into rank r+1's "data", notifies; every rank
 * waits for its cell and checks what rank r-1 stored. `rounds` uses of
 * the cell back to back in one task, then the same in a new task (epoch):
 * the cell reads 0 again and counts from 1. */
static void store_notify_wait(bool fault, bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  pto_window_buffer b[2] = {{"data", DATA_N * 4}, {"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 10 + fault + 2 * shared, world4, np, b, 2, fault, 7);
  pto_tensor data = win(&x, "data", PTO_F32, DATA_N), cells = win(&x, "cells", PTO_I64, 64);
  pto_tensor c0 = cell_at(&cells, 3);
  int to = (x.rank + 1) % np, from = (x.rank + np - 1) % np;
  float src[DATA_N];
  pto_tensor ts = local(src, DATA_N, PTO_F32);
  for (uint32_t epoch = 7; epoch <= 8; epoch++) {
    for (int round = 1; round <= 3; round++) {
      int32_t seen = -1;
      CHECK_OK(&x, pto_signal_read(&x.k, x.d.id, &c0, &seen));
      CHECK_EQ(seen, round - 1, "cell before this round's notify (epoch reuse)");
      MPI_Barrier(MPI_COMM_WORLD); /* every rank read before anyone notifies */
      for (int i = 0; i < DATA_N; i++)
        src[i] = (float)(epoch * 100000 + round * 10000 + x.rank * 1000 + i);
      CHECK_OK(&x, pto_remote_store(&x.k, x.d.id, to, &data, &ts));
      CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c0, PTO_SIGNAL_ADD, 1));
      CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &c0, PTO_CMP_GE, round, -1));
      const float *got = (const float *)data.buf + data.offset;
      int bad = 0;
      for (int i = 0; i < DATA_N; i++) {
        float want = (float)(epoch * 100000 + round * 10000 + from * 1000 + i);
        if (got[i] != want && bad++ < 3)
          FAIL("fault %d shared %d epoch %u round %d: data[%d] = %g, expected %g", fault, shared,
               epoch, round, i, got[i], want);
      }
      /* nobody overwrites my data before I read it */
      MPI_Barrier(MPI_COMM_WORLD);
    }
    dom_task(&x, epoch + 1);
  }
  dom_close(&x);
}

/* remote_load of every peer's window (written locally by its owner before
 * a barrier), put/get of strided 2-D views, quiet, barrier. */
static void views_load_barrier(bool fault, bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  pto_window_buffer b[2] = {{"mat", 8 * 16 * 4}, {"own", 64 * 4}};
  dom x = {0};
  dom_open(&x, 20 + fault + 2 * shared, world4, np, b, 2, fault, 3);
  pto_tensor own = win(&x, "own", PTO_I32, 64);
  int32_t *mine = (int32_t *)own.buf + own.offset;
  for (int i = 0; i < 64; i++)
    mine[i] = x.rank * 100 + i;
  CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
  for (int p = 0; p < np; p++) {
    int32_t got[64];
    pto_tensor tg = local(got, 64, PTO_I32);
    CHECK_OK(&x, pto_remote_load(&x.k, x.d.id, p, &tg, &own));
    for (int i = 0; i < 64; i++)
      if (got[i] != p * 100 + i) {
        FAIL("remote_load from %d: [%d] = %d, expected %d", p, i, got[i], p * 100 + i);
        break;
      }
  }
  /* put a 4x5 view at (2,3) of an 8x16 matrix of the next rank */
  int64_t shape[2] = {8, 16}, sub[2] = {4, 5}, sstride[2] = {16, 1};
  pto_tensor mat;
  pto_comm_window_tensor(&x.c, x.d.id, x.rank, "mat", PTO_F32, 2, shape, &mat);
  pto_tensor dst;
  pto_tensor_init_strided(&dst, mat.buf, mat.buf_bytes, PTO_F32, 2, sub, sstride,
                          mat.offset + 2 * 16 + 3);
  float src[20], back[20];
  for (int i = 0; i < 20; i++)
    src[i] = (float)(x.rank * 1000 + i);
  pto_tensor ts, tb;
  pto_tensor_init(&ts, src, sizeof src, PTO_F32, 2, sub);
  pto_tensor_init(&tb, back, sizeof back, PTO_F32, 2, sub);
  int to = (x.rank + 1) % np, from = (x.rank + np - 1) % np;
  CHECK_OK(&x, pto_put(&x.k, x.d.id, to, &dst, &ts, NULL));
  /* quiet: the put is complete at the target (fault injection: it landed) */
  CHECK_OK(&x, pto_quiet(&x.k, x.d.id));
  CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
  const float *m = (const float *)mat.buf + mat.offset;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 16; c++) {
      bool in = r >= 2 && r < 6 && c >= 3 && c < 8;
      float want = in ? (float)(from * 1000 + (r - 2) * 5 + (c - 3)) : 0.0f;
      if (m[r * 16 + c] != want) {
        FAIL("put view fault %d: mat[%d][%d] = %g, expected %g", fault, r, c, m[r * 16 + c], want);
        r = 8;
        break;
      }
    }
  /* get the same view back from the next rank: my own src */
  memset(back, 0, sizeof back);
  CHECK_OK(&x, pto_get(&x.k, x.d.id, to, &tb, &dst, NULL));
  for (int i = 0; i < 20; i++)
    if (back[i] != src[i]) {
      FAIL("get view: [%d] = %g, expected %g", i, back[i], src[i]);
      break;
    }
  /* barriers back to back: each rank stores its step into the next rank
   * before the barrier; after it, the previous rank's step is there */
  pto_tensor cnt = cell_at(&own, 63);
  for (int step = 1; step <= 5; step++) {
    int32_t v = step * 10 + x.rank;
    pto_tensor tv = local(&v, 1, PTO_I32);
    CHECK_OK(&x, pto_remote_store(&x.k, x.d.id, to, &cnt, &tv));
    CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
    CHECK_EQ(mine[63], step * 10 + from, "value stored before the barrier");
    CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
  }
  dom_close(&x);
}

/* Atomic adds of every dtype: every rank adds (rank+1) to elements
 * [1, 34) of each buffer of rank 0 (an odd start: f16/bf16 share 32-bit
 * words with untouched neighbours); elements 0 and 34 stay 0. */
static void atomic_adds(bool fault) {
  static const pto_dtype dts[6] = {PTO_F32, PTO_F16, PTO_BF16, PTO_I32, PTO_I16, PTO_I8};
  static const char *names[6] = {"f32", "f16", "bf16", "i32", "i16", "i8"};
  pto_window_buffer b[6];
  for (int i = 0; i < 6; i++)
    b[i] = (pto_window_buffer){names[i], 64 * 4};
  dom x = {0};
  dom_open(&x, 30 + fault, world4, np, b, 6, fault, 5);
  for (int rep = 0; rep < 3; rep++)
    for (int i = 0; i < 6; i++) {
      pto_tensor all = win(&x, names[i], dts[i], 64), part;
      int64_t at = 1, len = 33;
      pto_tensor_slice(&all, &at, &len, &part);
      unsigned char src[33 * 4];
      for (int j = 0; j < 33; j++) {
        double v = x.rank + 1;
        switch (dts[i]) {
        case PTO_F32: ((float *)src)[j] = (float)v; break;
        case PTO_F16: ((uint16_t *)src)[j] = f32_to_half((float)v); break;
        case PTO_BF16: ((uint16_t *)src)[j] = f32_to_bf16((float)v); break;
        case PTO_I32: ((int32_t *)src)[j] = (int32_t)v; break;
        case PTO_I16: ((int16_t *)src)[j] = (int16_t)v; break;
        default: ((int8_t *)src)[j] = (int8_t)v; break;
        }
      }
      pto_tensor ts = local(src, 33, dts[i]);
      CHECK_OK(&x, pto_remote_store_add(&x.k, x.d.id, 0, &part, &ts));
    }
  CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
  if (x.rank == 0) {
    double want = 3.0 * np * (np + 1) / 2;
    for (int i = 0; i < 6; i++) {
      pto_tensor all = win(&x, names[i], dts[i], 64);
      const unsigned char *p = (const unsigned char *)all.buf;
      for (int j = 0; j < 35; j++) {
        double got;
        switch (dts[i]) {
        case PTO_F32: got = ((const float *)p)[j]; break;
        case PTO_F16: got = half_to_f32(((const uint16_t *)p)[j]); break;
        case PTO_BF16: got = bf16_to_f32(((const uint16_t *)p)[j]); break;
        case PTO_I32: got = ((const int32_t *)p)[j]; break;
        case PTO_I16: got = ((const int16_t *)p)[j]; break;
        default: got = ((const int8_t *)p)[j]; break;
        }
        double w = j >= 1 && j < 34 ? want : 0;
        if (got != w) {
          FAIL("atomic add %s fault %d: [%d] = %g, expected %g", names[i], fault, j, got, w);
          break;
        }
      }
    }
  }
  dom_close(&x);
}

/* f16 and bf16 atomic adds next to plain stores: rank 1 adds 1 to
 * elements 1 and 2 of rank 0's buffer ADD_N times, while rank 0 stores
 * its round number into elements 0 and 3 (the other halves of the 32-bit
 * words around them) and reads each back at once. An add that wrote back
 * the whole word would undo a store that landed between its read and its
 * write: rank 0 would read an older round. No store may be lost, and the
 * adds all count. */
#define ADD_N 1000

static void add_beside_put(bool shared, pto_dtype dt) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  pto_window_buffer b[2] = {{"h", 64}, {"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 35 + 2 * shared + (dt == PTO_BF16), world4, np, b, 2, false, 5);
  pto_tensor h = win(&x, "h", dt, 32), cells = win(&x, "cells", PTO_I64, 64);
  pto_tensor done = cell_at(&cells, 0);
  const char *name = dt == PTO_F16 ? "f16" : "bf16";
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 1) {
    int64_t at = 1, two = 2;
    pto_tensor mid;
    pto_tensor_slice(&h, &at, &two, &mid);
    uint16_t one = dt == PTO_F16 ? f32_to_half(1.0f) : f32_to_bf16(1.0f), src[2] = {one, one};
    pto_tensor ts = local(src, 2, dt);
    for (int i = 0; i < ADD_N; i++)
      CHECK_OK(&x, pto_remote_store_add(&x.k, x.d.id, 0, &mid, &ts));
    CHECK_OK(&x, pto_notify(&x.k, x.d.id, 0, &done, PTO_SIGNAL_ADD, 1));
  } else if (x.rank == 0) {
    pto_tensor e[2];
    for (int k = 0; k < 2; k++) {
      int64_t at = k ? 3 : 0, one = 1;
      pto_tensor_slice(&h, &at, &one, &e[k]);
    }
    int lost = 0, stores = 0;
    int32_t finished = 0;
    for (uint16_t round = 1; !finished || stores < 2 * ADD_N;
         round = (uint16_t)(round % 30000 + 1)) {
      for (int k = 0; k < 2; k++) {
        uint16_t v = round, back = 0;
        pto_tensor tv = local(&v, 1, dt), tb = local(&back, 1, dt);
        CHECK_OK(&x, pto_remote_store(&x.k, x.d.id, 0, &e[k], &tv));
        CHECK_OK(&x, pto_remote_load(&x.k, x.d.id, 0, &tb, &e[k]));
        stores++;
        if (back != v && lost++ < 3)
          FAIL("%s shared %d: element %d read back %u right after the store of %u: the store "
               "was lost",
               name, shared, k ? 3 : 0, back, v);
      }
      CHECK_OK(&x, pto_signal_read(&x.k, x.d.id, &done, &finished));
    }
    CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &done, PTO_CMP_GE, 1, -1));
    uint16_t want = 0;
    for (int i = 0; i < ADD_N; i++)
      want = dt == PTO_F16 ? f32_to_half(half_to_f32(want) + 1.0f)
                           : f32_to_bf16(bf16_to_f32(want) + 1.0f);
    const uint16_t *p = (const uint16_t *)h.buf + h.offset;
    CHECK_EQ(p[1], want, "element 1 after the adds (bits)");
    CHECK_EQ(p[2], want, "element 2 after the adds (bits)");
    printf("add_beside_put %s shared %d: %d stores beside %d adds, %d lost\n", name, shared, stores,
           2 * ADD_N, lost);
  }
  dom_close(&x);
}

/* A stale notify (an older epoch than the cell's) is dropped, not added. */
static void stale_signal(void) {
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 40, world4, np, b, 1, false, 9);
  pto_tensor cells = win(&x, "cells", PTO_I64, 64), c = cell_at(&cells, 0);
  int to = (x.rank + 1) % np;
  CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_ADD, 1));
  CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &c, PTO_CMP_EQ, 1, -1));
  MPI_Barrier(MPI_COMM_WORLD);
  x.c.epoch = 8; /* a late signal of the previous task */
  CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_ADD, 100));
  x.c.epoch = 9;
  MPI_Barrier(MPI_COMM_WORLD);
  int32_t v = -1;
  CHECK_OK(&x, pto_signal_read(&x.k, x.d.id, &c, &v));
  CHECK_EQ(v, 1, "cell after a stale notify of epoch 8");
  /* SET then ADD in the same epoch */
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_SET, 40));
  CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_ADD, 2));
  CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &c, PTO_CMP_EQ, 42, -1));
  /* an add past the 32-bit value fails, named, and writes nothing (before:
   * PTO_OK, and the cell wrapped to INT32_MIN) */
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_OK(&x, pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_SET, INT32_MAX));
  CHECK_EQ(pto_notify(&x.k, x.d.id, to, &c, PTO_SIGNAL_ADD, 1), PTO_EINVAL, "overflowing add");
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_OK(&x, pto_signal_read(&x.k, x.d.id, &c, &v));
  CHECK_EQ(v, INT32_MAX, "cell after an overflowing add");
  dom_close(&x);
}

/* A put wakes no one itself: a wait on a word a put wrote sees it at the
 * writer's quiet (mpi.c, quiet_u), as on shm (test_comm_ops). Rank 1
 * parks on its cell; rank 0 puts a value of its own cell (a signal word of
 * this task) there after 100 ms, then quiets. Mode put_wake runs with
 * parks of up to 10 s (main): a quiet that woke no one left the wait to
 * its 5-s deadline. Shared windows, the layout whose waiters park. */
static void put_wake(void) {
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 41, world4, np, b, 1, false, 3);
  pto_tensor cells = win(&x, "cells", PTO_I64, 64), c = cell_at(&cells, 0);
  if (x.rank == 0) CHECK_OK(&x, pto_notify(&x.k, x.d.id, 0, &c, PTO_SIGNAL_SET, 42));
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 1) {
    uint64_t t0 = pto_now_ns();
    CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &c, PTO_CMP_EQ, 42, 5000));
    double ms = (double)(pto_now_ns() - t0) / 1e6;
    if (ms > 2500)
      FAIL("the wait ended %.1f ms after it began; the put and quiet came at 100 ms", ms);
  } else if (x.rank == 0) {
    usleep(100 * 1000); /* past rank 1's spin and yield: parked */
    pto_tensor theirs;
    int64_t one = 1;
    if (pto_comm_window_tensor(&x.c, x.d.id, 1, "cells", PTO_I64, 1, &one, &theirs) != 0)
      FAIL("window tensor of rank 1");
    CHECK_OK(&x, pto_put(&x.k, x.d.id, 1, &theirs, &c, NULL));
    CHECK_OK(&x, pto_quiet(&x.k, x.d.id));
  }
  dom_close(&x);
}

/* A sub-domain of ranks {1, 2}: the others take no part in its creation. */
static void sub_domain(void) {
  if (np < 4) return;
  static const int chips[2] = {1, 2};
  pto_window_buffer b[2] = {{"data", 64 * 4}, {"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 50, chips, 2, b, 2, true, 4);
  if (x.rank >= 0) {
    CHECK_EQ(pto_comm_size(&x.c, x.d.id), 2, "sub-domain size");
    CHECK_EQ(pto_comm_rank(&x.c, x.d.id), me - 1, "sub-domain rank");
    pto_tensor data = win(&x, "data", PTO_I32, 64), cells = win(&x, "cells", PTO_I64, 64);
    pto_tensor c = cell_at(&cells, 1);
    int32_t v[64];
    for (int i = 0; i < 64; i++)
      v[i] = me * 1000 + i;
    pto_tensor tv = local(v, 64, PTO_I32);
    int peer = 1 - x.rank;
    CHECK_OK(&x, pto_remote_store(&x.k, x.d.id, peer, &data, &tv));
    CHECK_OK(&x, pto_notify(&x.k, x.d.id, peer, &c, PTO_SIGNAL_ADD, 1));
    CHECK_OK(&x, pto_signal_wait(&x.k, x.d.id, &c, PTO_CMP_GE, 1, -1));
    const int32_t *got = (const int32_t *)data.buf;
    int from = x.d.chips[peer];
    for (int i = 0; i < 64; i++)
      if (got[i] != from * 1000 + i) {
        FAIL("sub-domain data[%d] = %d, expected %d", i, got[i], from * 1000 + i);
        break;
      }
    CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
    int32_t bad = 0;
    pto_tensor tb = local(&bad, 1, PTO_I32);
    CHECK_EQ(pto_remote_store(&x.k, x.d.id, 2, &data, &tb), PTO_EPEER, "store to rank 2 of 2");
  }
  dom_close(&x);
}

/* ---- collectives ---- */

#define MAX_COUNT 65537
static const int64_t sizes[4] = {1, 17, 4097, MAX_COUNT};

/* Compares out[0..n) with want(i) (see the callers); prints the first
 * mismatches, actual vs expected. */
static void check_out(const char *what, const void *out, int64_t n, pto_dtype dt,
                      double (*want)(int64_t, const int64_t *), const int64_t *arg) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = get_val(out, i, dt), w = as_dtype(want(i, arg), dt);
    if (a != w && bad++ < 3) FAIL("%s: out[%" PRId64 "] = %g, expected %g", what, i, a, w);
  }
}
/* arg: {n, me, count, dtype, op, root} */
static double w_allreduce(int64_t i, const int64_t *a) {
  double acc = gen(0, i, (pto_dtype)a[3], (pto_red_op)a[4]);
  for (int r = 1; r < a[0]; r++)
    acc = red(acc, gen(r, i, (pto_dtype)a[3], (pto_red_op)a[4]), (pto_red_op)a[4]);
  return acc;
}
static double w_reduce_scatter(int64_t i, const int64_t *a) {
  return w_allreduce(a[1] * a[2] + i, a);
}
static double w_allgather(int64_t i, const int64_t *a) {
  return gen((int)(i / a[2]), i % a[2], (pto_dtype)a[3], PTO_RED_SUM);
}
static double w_broadcast(int64_t i, const int64_t *a) {
  return gen((int)a[5], i, (pto_dtype)a[3], PTO_RED_SUM);
}
static double a2a_val(int r, int d, int64_t j) { return (double)((1000 * r + 100 * d + j) % 64); }
static double w_alltoall(int64_t i, const int64_t *a) {
  return a2a_val((int)(i / a[2]), (int)a[1], i % a[2]);
}

static void coll_fail(dom *x, const char *what, int rc) {
  char det[400];
  comm_task_error(&x->c, det, sizeof det);
  FAIL("%s returned %s: %s", what, pto_status_name(rc), det);
}

static void coll_cases(dom *x, const pto_tensor *scratch, bool quick) {
  int n = x->d.nranks, r = x->rank;
  unsigned char *in = malloc((size_t)n * MAX_COUNT * 4), *out = malloc((size_t)n * MAX_COUNT * 4);
  static const pto_dtype dts[4] = {PTO_F32, PTO_F16, PTO_BF16, PTO_I32};
  static const char *ops[4] = {"sum", "max", "min", "prod"};
  char what[160];
  for (int di = 0; di < 4; di++)
    for (int si = 0; si < 4; si++) {
      pto_dtype dt = dts[di];
      int64_t cnt = sizes[si];
      if (dt != PTO_F32 && (si == 0 || si == 3)) continue; /* other dtypes: 17, 4097 */
      if (quick && (dt != PTO_F32 || si == 3)) continue;
      int64_t a[6] = {n, r, cnt, dt, 0, si % n};
      pto_tensor tin = local(in, cnt, dt), tout = local(out, cnt, dt);
      for (int op = 0; op < 4; op++) {
        if (dt == PTO_F32 && op && si != 2) continue; /* f32: every op on 4097 */
        a[4] = op;
        for (int64_t i = 0; i < n * cnt; i++)
          put_val(in, i, dt, gen(r, i, dt, (pto_red_op)op));
        for (int algo = PTO_COLL_AUTO; algo <= PTO_COLL_MPI; algo++) {
          memset(out, 0xff, (size_t)cnt * 4);
          snprintf(what, sizeof what, "allreduce %s %s count %" PRId64 " algo %d", ops[op],
                   pto_dtype_name(dt), cnt, algo);
          int rc = pto_allreduce(&x->k, x->d.id, scratch, &tout, &tin, (pto_red_op)op,
                                 (pto_coll_algo)algo);
          if (rc)
            coll_fail(x, what, rc);
          else
            check_out(what, out, cnt, dt, w_allreduce, a);
        }
        pto_tensor big = local(in, n * cnt, dt);
        snprintf(what, sizeof what, "reduce_scatter %s %s count %" PRId64, ops[op],
                 pto_dtype_name(dt), cnt);
        int rc = pto_reduce_scatter(&x->k, x->d.id, scratch, &tout, &big, (pto_red_op)op);
        if (rc)
          coll_fail(x, what, rc);
        else
          check_out(what, out, cnt, dt, w_reduce_scatter, a);
      }
      for (int64_t i = 0; i < cnt; i++)
        put_val(in, i, dt, gen(r, i, dt, PTO_RED_SUM));
      pto_tensor gout = local(out, n * cnt, dt);
      snprintf(what, sizeof what, "allgather %s count %" PRId64, pto_dtype_name(dt), cnt);
      int rc = pto_allgather(&x->k, x->d.id, scratch, &gout, &tin);
      if (rc)
        coll_fail(x, what, rc);
      else
        check_out(what, out, n * cnt, dt, w_allgather, a);
      memset(out, 0xff, (size_t)cnt * 4);
      snprintf(what, sizeof what, "broadcast root %d %s count %" PRId64, (int)a[5],
               pto_dtype_name(dt), cnt);
      rc = pto_broadcast(&x->k, x->d.id, scratch, &tout, r == a[5] ? &tin : NULL, (int)a[5]);
      if (rc)
        coll_fail(x, what, rc);
      else
        check_out(what, out, cnt, dt, w_broadcast, a);
      for (int d = 0; d < n; d++)
        for (int64_t j = 0; j < cnt; j++)
          put_val(in, d * cnt + j, dt, a2a_val(r, d, j));
      pto_tensor ain = local(in, n * cnt, dt);
      snprintf(what, sizeof what, "alltoall %s count %" PRId64, pto_dtype_name(dt), cnt);
      rc = pto_alltoall(&x->k, x->d.id, scratch, &gout, &ain);
      if (rc)
        coll_fail(x, what, rc);
      else
        check_out(what, out, n * cnt, dt, w_alltoall, a);
    }
  free(in);
  free(out);
}

/* Every collective with src and dst overlapping, at sizes whose data
 * travels with the descriptors (17, 4097) and one that does not (65537):
 * the mesh's last step writes dst while it reads every rank's block, mine
 * included, so mine must be read from a copy. allreduce and all-to-all in
 * place, reduce-scatter into my own block of src, allgather from my own
 * block of dst. */
static void coll_overlap(dom *x, const pto_tensor *scratch) {
  int n = x->d.nranks, r = x->rank;
  float *buf = malloc((size_t)n * MAX_COUNT * 4);
  char what[160];
  for (int si = 1; si < 4; si++) {
    int64_t cnt = sizes[si], a[6] = {n, r, cnt, PTO_F32, PTO_RED_SUM, 0};
    for (int64_t i = 0; i < cnt; i++)
      buf[i] = (float)gen(r, i, PTO_F32, PTO_RED_SUM);
    pto_tensor t = local(buf, cnt, PTO_F32);
    snprintf(what, sizeof what, "allreduce in place count %" PRId64, cnt);
    int rc = pto_allreduce(&x->k, x->d.id, scratch, &t, &t, PTO_RED_SUM, PTO_COLL_AUTO);
    if (rc)
      coll_fail(x, what, rc);
    else
      check_out(what, buf, cnt, PTO_F32, w_allreduce, a);
    for (int64_t i = 0; i < n * cnt; i++)
      buf[i] = (float)gen(r, i, PTO_F32, PTO_RED_SUM);
    pto_tensor all = local(buf, n * cnt, PTO_F32), mine = local(buf + r * cnt, cnt, PTO_F32);
    snprintf(what, sizeof what, "reduce_scatter into its own block count %" PRId64, cnt);
    rc = pto_reduce_scatter(&x->k, x->d.id, scratch, &mine, &all, PTO_RED_SUM);
    if (rc)
      coll_fail(x, what, rc);
    else
      check_out(what, buf + r * cnt, cnt, PTO_F32, w_reduce_scatter, a);
    for (int64_t i = 0; i < cnt; i++)
      buf[r * cnt + i] = (float)gen(r, i, PTO_F32, PTO_RED_SUM);
    snprintf(what, sizeof what, "allgather from its own block count %" PRId64, cnt);
    rc = pto_allgather(&x->k, x->d.id, scratch, &all, &mine);
    if (rc)
      coll_fail(x, what, rc);
    else
      check_out(what, buf, n * cnt, PTO_F32, w_allgather, a);
    for (int d = 0; d < n; d++)
      for (int64_t j = 0; j < cnt; j++)
        buf[d * cnt + j] = (float)a2a_val(r, d, j);
    snprintf(what, sizeof what, "alltoall in place count %" PRId64, cnt);
    rc = pto_alltoall(&x->k, x->d.id, scratch, &all, &all);
    if (rc)
      coll_fail(x, what, rc);
    else
      check_out(what, buf, n * cnt, PTO_F32, w_alltoall, a);
    /* broadcast from rank si % n: in place, then the root's src one
     * element past its dst (dst must be moved before it is sent: the
     * disjoint case, in coll_cases, sends src) */
    a[5] = si % n;
    for (int shift = 0; shift < 2; shift++) {
      for (int64_t i = 0; i < cnt + 1; i++)
        buf[i] = r == a[5] ? (float)gen(r, i - shift, PTO_F32, PTO_RED_SUM) : -1.0f;
      pto_tensor src = local(buf + shift, cnt, PTO_F32), dst = local(buf, cnt, PTO_F32);
      snprintf(what, sizeof what, "broadcast root %d, src %d past dst, count %" PRId64, (int)a[5],
               shift, cnt);
      rc = pto_broadcast(&x->k, x->d.id, scratch, &dst, r == a[5] ? &src : NULL, (int)a[5]);
      if (rc)
        coll_fail(x, what, rc);
      else
        check_out(what, buf, cnt, PTO_F32, w_broadcast, a);
    }
  }
  free(buf);
}

static void collectives(bool fault) {
  size_t sb = pto_coll_scratch_bytes(np, (size_t)MAX_COUNT * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 60 + fault, world4, np, b, 1, fault, 11);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  for (uint32_t epoch = 11; epoch <= 12; epoch++) { /* a second task: epochs */
    coll_cases(&x, &scratch, fault);
    dom_task(&x, epoch + 1);
  }
  coll_overlap(&x, &scratch);
  /* mismatched counts: PTO_EINVAL on every rank, naming the calls */
  float in[17] = {0}, out[17];
  pto_tensor ti = local(in, x.rank == 1 ? 16 : 17, PTO_F32),
             to = local(out, x.rank == 1 ? 16 : 17, PTO_F32);
  int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_MESH);
  char det[400];
  comm_task_error(&x.c, det, sizeof det);
  CHECK_EQ(rc, PTO_EINVAL, "allreduce with mismatched counts");
  if (rc == PTO_EINVAL && !strstr(det, "17") && !strstr(det, "16"))
    FAIL("mismatch details name no count: %s", det);
  dom_close(&x);

  if (np >= 4) { /* the collectives on a sub-domain {1, 2} */
    static const int chips[2] = {1, 2};
    size_t sb2 = pto_coll_scratch_bytes(2, (size_t)MAX_COUNT * 4);
    pto_window_buffer b2[1] = {{"scratch", sb2}};
    dom y = {0};
    dom_open(&y, 70 + fault, chips, 2, b2, 1, fault, 2);
    if (y.rank >= 0) {
      pto_tensor s2 = win(&y, "scratch", PTO_U8, (int64_t)sb2);
      coll_cases(&y, &s2, true);
    }
    dom_close(&y);
  }
}

/* ---- collectives from several threads of a rank ---- */

/* Thread t of every rank runs CT_CALLS allreduces on its own scratch
 * buffer, with a count of its own (thread 0: 400 bytes, which travel with
 * the descriptors: in the call table on shared windows, in the records on
 * RMA ones; thread 1: 40000, above the 32 KiB that do, so each is an
 * MPI_Iallreduce after the records): the threads of a rank issue their
 * calls in any order relative to each other, which MPI matches correctly
 * only on a communicator per scratch buffer. */
#define CT_THREADS 2
#define CT_CALLS   40
#define CT_BIG     10000
typedef struct ct_arg {
  dom *x;
  int t, bad;
  pto_kctx k;
} ct_arg;

static void *ct_main(void *arg) {
  ct_arg *a = arg;
  int64_t n = a->t == 0 ? 100 : CT_BIG;
  char name[8];
  snprintf(name, sizeof name, "s%d", a->t);
  size_t sb = pto_coll_scratch_bytes(np, CT_BIG * 4);
  pto_tensor scratch = win(a->x, name, PTO_U8, (int64_t)sb);
  float *in = malloc((size_t)n * 4), *out = malloc((size_t)n * 4);
  pto_tensor ti = local(in, n, PTO_F32), to = local(out, n, PTO_F32);
  for (int c = 0; c < CT_CALLS && !a->bad; c++) {
    for (int64_t i = 0; i < n; i++)
      in[i] = (float)(me * 1000 + a->t * 7 + c + i % 13);
    int rc = pto_allreduce(&a->k, a->x->d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    if (rc) {
      char det[400];
      comm_task_error(&a->x->c, det, sizeof det);
      fprintf(stderr, "FAILED rank %d thread %d call %d: %s: %s\n", me, a->t, c,
              pto_status_name(rc), det);
      a->bad++;
      break;
    }
    for (int64_t i = 0; i < n && !a->bad; i++) {
      float want = (float)(1000 * np * (np - 1) / 2 + np * (a->t * 7 + c + i % 13));
      if (out[i] != want) {
        fprintf(stderr, "FAILED rank %d thread %d call %d: out[%lld] = %g, expected %g\n", me, a->t,
                c, (long long)i, out[i], want);
        a->bad++;
      }
    }
  }
  free(in);
  free(out);
  return NULL;
}

static void coll_threads(void) {
  size_t sb = pto_coll_scratch_bytes(np, CT_BIG * 4);
  pto_window_buffer b[CT_THREADS] = {{"s0", sb}, {"s1", sb}};
  dom x = {0};
  dom_open(&x, 97, world4, np, b, CT_THREADS, false, 1);
  pthread_t th[CT_THREADS];
  ct_arg a[CT_THREADS];
  for (int t = 0; t < CT_THREADS; t++) {
    a[t] = (ct_arg){&x, t, 0, x.k};
    a[t].k.core_id = t;
    pthread_create(&th[t], NULL, ct_main, &a[t]);
  }
  for (int t = 0; t < CT_THREADS; t++) {
    pthread_join(th[t], NULL);
    failures += a[t].bad;
  }
  dom_close(&x);
}

/* ---- reproducible reductions ---- */

/* An f32 whose magnitude varies over 2^-20..2^20 with i and r, so that the
 * order of a sum changes its bits. */
static float repro_val(int r, int64_t i) {
  uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)((uint64_t)i * 40503u + 7u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return ldexpf((float)((int)(h % 2001) - 1000), (int)((h >> 11) % 41) - 20);
}

#define REPRO_MAX (1 << 20)

/* Every element's bits against the rank-order sum; returns bad elements. */
static int repro_check(const char *what, const float *out, int64_t cnt, int n, int64_t first) {
  int bad = 0;
  for (int64_t i = 0; i < cnt; i++) {
    float acc = repro_val(0, first + i);
    for (int r = 1; r < n; r++)
      acc += repro_val(r, first + i);
    if (memcmp(&acc, &out[i], sizeof acc) != 0 && bad++ < 3)
      FAIL("%s: out[%" PRId64 "] = %a, the rank-order sum is %a", what, i, (double)out[i],
           (double)acc);
  }
  return bad;
}

static void reproducible(void) {
  /* PTO_COLL_REPRODUCIBLE=1 in the environment: the plain op must do */
  const char *env = getenv("PTO_COLL_REPRODUCIBLE");
  int flag = env && strcmp(env, "1") == 0 ? 0 : PTO_RED_REPRODUCIBLE;
  int chips[8];
  for (int r = 0; r < np; r++)
    chips[r] = r;
  size_t sb = pto_coll_scratch_bytes(np, (size_t)REPRO_MAX * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 90, chips, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float *in = malloc((size_t)np * REPRO_MAX * 4), *out = malloc((size_t)REPRO_MAX * 4);
  static const int64_t counts[3] = {1024, 65536 + 7, REPRO_MAX};
  static const char *algos[4] = {"auto", "mesh", "ring", "mpi"};
  char what[128];
  for (int si = 0; si < 3; si++) {
    int64_t cnt = counts[si];
    for (int64_t i = 0; i < cnt; i++)
      in[i] = repro_val(x.rank, i);
    pto_tensor tin = local(in, cnt, PTO_F32), tout = local(out, cnt, PTO_F32);
    for (int algo = PTO_COLL_AUTO; algo <= PTO_COLL_MPI; algo++) {
      memset(out, 0xff, (size_t)cnt * 4);
      snprintf(what, sizeof what, "reproducible allreduce %s count %" PRId64 " on %d ranks",
               algos[algo], cnt, np);
      int rc = pto_allreduce(&x.k, x.d.id, &scratch, &tout, &tin, (pto_red_op)(PTO_RED_SUM | flag),
                             (pto_coll_algo)algo);
      if (rc)
        coll_fail(&x, what, rc);
      else
        repro_check(what, out, cnt, np, 0);
    }
    /* reduce-scatter: block r of every rank is its elements [r cnt, (r+1) cnt) */
    int64_t blk = cnt / np;
    for (int64_t i = 0; i < blk * np; i++)
      in[i] = repro_val(x.rank, i);
    pto_tensor big = local(in, blk * np, PTO_F32), bout = local(out, blk, PTO_F32);
    snprintf(what, sizeof what, "reproducible reduce_scatter count %" PRId64 " on %d ranks", blk,
             np);
    int rc =
        pto_reduce_scatter(&x.k, x.d.id, &scratch, &bout, &big, (pto_red_op)(PTO_RED_SUM | flag));
    if (rc)
      coll_fail(&x, what, rc);
    else
      repro_check(what, out, blk, np, x.rank * blk);
  }
  /* f64: the rank-order sum of the same values */
  double *din = (double *)in, *dout = (double *)out;
  for (int64_t i = 0; i < 1000; i++)
    din[i] = (double)repro_val(x.rank, i) * 1.0000001;
  pto_tensor di = local(din, 1000, PTO_F64), dd = local(dout, 1000, PTO_F64);
  for (int algo = PTO_COLL_AUTO; algo <= PTO_COLL_MESH; algo++) {
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &dd, &di, (pto_red_op)(PTO_RED_SUM | flag),
                           (pto_coll_algo)algo);
    if (rc) {
      coll_fail(&x, "reproducible f64 allreduce", rc);
      continue;
    }
    for (int64_t i = 0, bad = 0; i < 1000; i++) {
      double acc = (double)repro_val(0, i) * 1.0000001;
      for (int r = 1; r < np; r++)
        acc += (double)repro_val(r, i) * 1.0000001;
      if (memcmp(&acc, &dout[i], sizeof acc) != 0 && bad++ < 3)
        FAIL("reproducible f64 allreduce %s: out[%" PRId64 "] = %a, the rank-order sum is %a",
             algos[algo], i, dout[i], acc);
    }
  }
  free(in);
  free(out);
  dom_close(&x);
  if (me == 0 && !failures)
    printf("repro: bit-identical to the rank-order sum on %d ranks (%s)\n", np,
           flag ? "PTO_RED_REPRODUCIBLE" : "PTO_COLL_REPRODUCIBLE=1");
}

/* ---- which path a collective takes: the MPI messages it sends ----
 *
 * Every MPI_Isend of the program is counted (the profiling interface: this
 * definition takes the calls libpto, linked into this program, makes; MPI's
 * own internal sends do not come here). On shared windows (every rank's
 * window mapped in every process, Open MPI's osc/sm) a call whose data fits
 * the call table goes through it, as on the shm backend: no message. It
 * took the records, one message to every peer (2 ranks: 1 Isend a call; an
 * 8-byte broadcast on 4 ranks oversubscribed on 2 CPUs 10-24 us against
 * 4.3 through the table). Larger calls follow the table's round with
 * pto's own algorithm on the windows, as on shm (coll_switch, below, says
 * up to where). On RMA windows the records stay. */
static _Atomic long isends, isend_max; /* the largest message, in bytes */
static _Atomic long pair_sends;        /* of a 2-rank exchange (PAIR_TAG, below) */

/* A rank dies, as its peers on other hosts see it: every TCP connection
 * of the process to another host is shut both ways (its peers read the
 * end of each, as at a crash), and it never sends again; the process
 * itself, and its connection to its own daemon (PMIx, over loopback),
 * live on until the job ends them (a minute at most). With a rank that
 * exited without finalizing, or cut that link too, mpirun hung about 1
 * run in 100 across the two hosts: no rank left, mpirun waiting
 * (tests/mpi/CMakeLists.txt, coll_die_pair). */
static bool loopback(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}
static _Noreturn void vanish(void) {
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) {
    int fd = atoi(e->d_name);
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (e->d_name[0] != '.' && getpeername(fd, (struct sockaddr *)&a, &len) == 0 &&
        (a.ss_family == AF_INET || a.ss_family == AF_INET6) && !loopback(&a))
      shutdown(fd, SHUT_RDWR);
  }
  if (d) closedir(d);
  /* rank 0's deadline, grace and stuck-call margin end the job within
   * seconds (MPI_Abort kills this process); a minute bounds the wait
   * should they not */
  sleep(60);
  _exit(3);
}

/* coll_die_pair: this rank dies (vanish) where it would send its src in a
 * 2-rank allreduce's exchange (mpi_coll.c's PAIR_TAG) */
static _Atomic int die_at_pair;
#define PAIR_TAG 0x72

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req) {
  if (tag == PAIR_TAG && atomic_load(&die_at_pair)) vanish();
  atomic_fetch_add(&isends, 1);
  if (tag == PAIR_TAG) atomic_fetch_add(&pair_sends, 1);
  int size = 0;
  MPI_Type_size(dt, &size);
  for (long b = (long)count * size, m = isend_max; b > m;)
    if (atomic_compare_exchange_weak(&isend_max, &m, b)) break;
  return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
}

/* The most a message of a record carries to a peer on this host: Open
 * MPI's shared-memory transport sends up to its eager limit (header
 * included: 4040 bytes of data went at once with the default 4096, 4064
 * took a rendezvous, a round trip more), so pto's records go in pieces of
 * the limit less 64 (mpi_coll.c); 0 when the limit cannot be read. */
static long eager_piece(void) {
  static const char *names[] = {"btl_vader_eager_limit", "btl_sm_eager_limit"};
  static long piece = -1; /* read once: the tool interface's init and finalize take 0.2 s */
  if (piece >= 0) return piece;
  piece = 0;
  int level = MPI_THREAD_MULTIPLE, provided;
  MPI_Query_thread(&level); /* Open MPI 4.1: MPI_T_init_thread sets MPI's level to what it asks */
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return 0;
  for (int i = 0; i < 2 && !piece; i++) {
    int idx, count;
    MPI_T_cvar_handle h;
    unsigned long long v = 0;
    if (MPI_T_cvar_get_index(names[i], &idx) != MPI_SUCCESS ||
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
      continue;
    if (count == 1 && MPI_T_cvar_read(h, &v) == MPI_SUCCESS && v > 64)
      piece = (long)((v - 64) & ~63ull);
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return piece;
}

#define PATH_N      17   /* elements of a block: every collective's data fits the table */
#define PATH_INLINE 64   /* an allreduce of 256 bytes: its record in two messages (RMA windows) */
#define PATH_MID    2048 /* an allreduce of 8 KiB: beyond the table */
#define PATH_BIG    8192 /* an allreduce of 32 KiB: beyond an allreduce's records on one host */

/* A call's count of MPI calls (`counted`: messages sent, collectives
 * started) against the path it should take, and its result. */
static void result_check(const char *what, bool shared, const float *out, const float *expect,
                         int64_t n) {
  for (int64_t i = 0, bad = 0; i < n; i++)
    if (out[i] != expect[i] && bad++ < 3)
      FAIL("%s on %s windows: out[%" PRId64 "] = %g, expected %g", what, shared ? "shared" : "RMA",
           i, (double)out[i], (double)expect[i]);
}

static void count_check(const char *what, bool shared, const char *counted, long got, long want,
                        const char *why, const float *out, const float *expect, int64_t n) {
  if (got != want)
    FAIL("%s on %s windows: this rank made %ld %s, expected %ld (%s)", what,
         shared ? "shared" : "RMA", got, counted, want, why);
  result_check(what, shared, out, expect, n);
}

static void path_check(const char *what, bool shared, long sent, long want, const float *out,
                       const float *expect, int64_t n) {
  count_check(what, shared, "MPI sends", sent, want,
              want ? "the records, one to every peer"
                   : "the call table or pto's own on the windows, no message",
              out, expect, n);
}

/* put_path: the calls a put or an accumulate makes to complete at the
 * origin, and the window component (by the name Open MPI gives a window) */
static _Atomic long flush_locals, flushes, rputs, raccs, rgets;
static char win_name[MPI_MAX_OBJECT_NAME];

int MPI_Win_flush_local(int rank, MPI_Win win) {
  atomic_fetch_add(&flush_locals, 1);
  return PMPI_Win_flush_local(rank, win);
}
static _Atomic int stuck_in_flush; /* ops_stuck: MPI_Win_flush never returns once set */

int MPI_Win_flush(int rank, MPI_Win win) {
  atomic_fetch_add(&flushes, 1);
  while (atomic_load(&stuck_in_flush))
    pause();
  return PMPI_Win_flush(rank, win);
}
int MPI_Rget(void *o, int on, MPI_Datatype ot, int tr, MPI_Aint td, int tn, MPI_Datatype tt,
             MPI_Win win, MPI_Request *rq) {
  atomic_fetch_add(&rgets, 1);
  return PMPI_Rget(o, on, ot, tr, td, tn, tt, win, rq);
}
int MPI_Rput(const void *o, int on, MPI_Datatype ot, int tr, MPI_Aint td, int tn, MPI_Datatype tt,
             MPI_Win win, MPI_Request *rq) {
  atomic_fetch_add(&rputs, 1);
  return PMPI_Rput(o, on, ot, tr, td, tn, tt, win, rq);
}
int MPI_Raccumulate(const void *o, int on, MPI_Datatype ot, int tr, MPI_Aint td, int tn,
                    MPI_Datatype tt, MPI_Op op, MPI_Win win, MPI_Request *rq) {
  atomic_fetch_add(&raccs, 1);
  return PMPI_Raccumulate(o, on, ot, tr, td, tn, tt, op, win, rq);
}
int MPI_Win_create(void *base, MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win) {
  int rc = PMPI_Win_create(base, size, unit, info, comm, win);
  int len = 0;
  if (rc == MPI_SUCCESS) PMPI_Win_get_name(*win, win_name, &len);
  return rc;
}

#define PUT_N 8192 /* f32: 32 KiB, above the bounce buffer's puts */
static void put_path(const char *osc) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  pto_window_buffer b[1] = {{"data", 2 * PUT_N * 4}};
  dom x = {0};
  dom_open(&x, 104, world4, np, b, 1, false, 1);
  bool rdma = strcmp(osc, "rdma") == 0;
  const char *want_name = rdma ? "rdma window " : "ucx window ";
  if (strncmp(win_name, want_name, strlen(want_name)) != 0)
    FAIL("the RMA window is \"%s\", expected one of osc/%s (\"%s...\")", win_name, osc, want_name);
  pto_tensor data = win(&x, "data", PTO_F32, 2 * PUT_N);
  pto_tensor put_dst, acc_dst;
  int64_t at = 0, n = PUT_N;
  pto_tensor_slice(&data, &at, &n, &put_dst);
  at = PUT_N;
  pto_tensor_slice(&data, &at, &n, &acc_dst);
  static float src[PUT_N], add[PUT_N];
  if (x.rank == 0) {
    for (int i = 0; i < PUT_N; i++)
      src[i] = (float)(i + 1), add[i] = (float)(2 * i);
    pto_tensor ts = local(src, PUT_N, PTO_F32), ta = local(add, PUT_N, PTO_F32);
    pto_xfer_opts acc = {0};
    acc.atomic_add = true;
    long fl = flush_locals, rp = rputs, ra = raccs;
    CHECK_OK(&x, pto_put(&x.k, x.d.id, 1, &put_dst, &ts, NULL));
    for (int i = 0; i < PUT_N; i++) /* mine again: the put is complete here */
      src[i] = -1.0f;
    CHECK_OK(&x, pto_put(&x.k, x.d.id, 1, &acc_dst, &ta, &acc));
    for (int i = 0; i < PUT_N; i++)
      add[i] = -1.0f;
    long f = flush_locals - fl, p = rputs - rp, a = raccs - ra;
    CHECK_OK(&x, pto_quiet(&x.k, x.d.id));
    CHECK_EQ(p, rdma ? 1 : 0,
             rdma ? "MPI_Rput calls of the put (osc/rdma: by request)"
                  : "MPI_Rput calls of the put (osc/ucx: none)");
    CHECK_EQ(a, rdma ? 1 : 0,
             rdma ? "MPI_Raccumulate calls of the accumulate (osc/rdma: by request)"
                  : "MPI_Raccumulate calls of the accumulate (osc/ucx: none)");
    CHECK_EQ(f, rdma ? 0 : 2,
             rdma ? "MPI_Win_flush_local calls of the put and the accumulate (osc/rdma: none)"
                  : "MPI_Win_flush_local calls of the put and the accumulate (osc/ucx: one each)");
  }
  CHECK_OK(&x, pto_barrier(&x.k, x.d.id));
  if (x.rank == 0) { /* and back: a get is complete when it returns */
    static float back[PUT_N];
    pto_tensor tb = local(back, PUT_N, PTO_F32);
    long fl = flushes, rg = rgets;
    CHECK_OK(&x, pto_get(&x.k, x.d.id, 1, &tb, &put_dst, NULL));
    CHECK_EQ(rgets - rg, rdma ? 1 : 0,
             rdma ? "MPI_Rget calls of the get (osc/rdma: by request)"
                  : "MPI_Rget calls of the get (osc/ucx: none)");
    CHECK_EQ(flushes - fl, rdma ? 0 : 1,
             rdma ? "MPI_Win_flush calls of the get (osc/rdma: none)"
                  : "MPI_Win_flush calls of the get (osc/ucx: one)");
    for (int i = 0; i < PUT_N; i++)
      if (back[i] != (float)(i + 1)) {
        FAIL("get on osc/%s: back[%d] = %g, expected %g", osc, i, (double)back[i], (double)(i + 1));
        break;
      }
  }
  if (x.rank == 1) {
    const float *d = (const float *)data.buf + data.offset;
    for (int i = 0, bad = 0; i < PUT_N && bad < 3; i++) {
      if (d[i] != (float)(i + 1) && ++bad)
        FAIL("put on osc/%s: data[%d] = %g, expected %g", osc, i, (double)d[i], (double)(i + 1));
      if (d[PUT_N + i] != (float)(2 * i) && ++bad)
        FAIL("accumulate on osc/%s: data[%d] = %g, expected %g", osc, PUT_N + i,
             (double)d[PUT_N + i], (double)(2 * i));
    }
  }
  if (x.rank == 0 && failures == 0) printf("put_path on osc/%s, %d ranks: ok\n", osc, np);
  dom_close(&x);
}

static void coll_path(bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  size_t sb = pto_coll_scratch_bytes(np, PATH_BIG * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 100 + shared, world4, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  int n = np, r = x.rank;
  static float in[4 * PATH_BIG], out[4 * PATH_BIG], expect[4 * PATH_BIG];
  long peers = shared ? 0 : n - 1, before;
  pto_tensor blk = local(in, PATH_N, PTO_F32), all_in = local(in, (int64_t)n * PATH_N, PTO_F32);
  pto_tensor o_blk = local(out, PATH_N, PTO_F32), o_all = local(out, (int64_t)n * PATH_N, PTO_F32);
  /* allreduce: rank q holds (q + 1)(i + 1) */
  for (int i = 0; i < PATH_N; i++)
    in[i] = (float)((r + 1) * (i + 1)), expect[i] = (float)(n * (n + 1) / 2 * (i + 1));
  before = isends;
  CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, &o_blk, &blk, PTO_RED_SUM, PTO_COLL_AUTO));
  path_check("allreduce of 17 f32", shared, isends - before, peers, out, expect, PATH_N);
  /* broadcast from rank 1: i + 100 */
  for (int i = 0; i < PATH_N; i++)
    in[i] = (float)(i + 100), expect[i] = in[i], out[i] = 0;
  before = isends;
  CHECK_OK(&x, pto_broadcast(&x.k, x.d.id, &scratch, &o_blk, r == 1 ? &blk : NULL, 1));
  /* one-way through the records: the root's alone (the others' headers follow,
   * acknowledged in a batch; before, each rank sent every peer its record) */
  count_check("broadcast of 17 f32", shared, "MPI sends", isends - before, r == 1 ? peers : 0,
              shared ? "the call table, no message" : "the root's records, one to every peer", out,
              expect, PATH_N);
  /* allgather: rank q's block holds 1000 q + i */
  for (int i = 0; i < PATH_N; i++)
    in[i] = (float)(1000 * r + i);
  for (int q = 0; q < n; q++)
    for (int i = 0; i < PATH_N; i++)
      expect[q * PATH_N + i] = (float)(1000 * q + i);
  before = isends;
  CHECK_OK(&x, pto_allgather(&x.k, x.d.id, &scratch, &o_all, &blk));
  path_check("allgather of 17 f32", shared, isends - before, peers, out, expect,
             (int64_t)n * PATH_N);
  /* reduce-scatter and all-to-all: rank q's block p holds 1000 q + 10 p + i */
  for (int p = 0; p < n; p++)
    for (int i = 0; i < PATH_N; i++)
      in[p * PATH_N + i] = (float)(1000 * r + 10 * p + i);
  for (int i = 0; i < PATH_N; i++)
    expect[i] = (float)(1000 * n * (n - 1) / 2 + n * (10 * r + i));
  before = isends;
  CHECK_OK(&x, pto_reduce_scatter(&x.k, x.d.id, &scratch, &o_blk, &all_in, PTO_RED_SUM));
  path_check("reduce_scatter of 17 f32 a block", shared, isends - before, peers, out, expect,
             PATH_N);
  for (int q = 0; q < n; q++)
    for (int i = 0; i < PATH_N; i++)
      expect[q * PATH_N + i] = (float)(1000 * q + 10 * r + i);
  before = isends;
  CHECK_OK(&x, pto_alltoall(&x.k, x.d.id, &scratch, &o_all, &all_in));
  path_check("alltoall of 17 f32 a block", shared, isends - before, peers, out, expect,
             (int64_t)n * PATH_N);
  /* an allreduce of 64 f32: its record (328 bytes with its length and
   * header) goes to a peer on this host in two messages of at most 256
   * bytes, which Open MPI's ob1 sends at once (mpi_coll.c, INLINE_MAX);
   * in one where records go whole */
  for (int i = 0; i < PATH_INLINE; i++)
    in[i] = (float)((r + 1) * (i + 1)), expect[i] = (float)(n * (n + 1) / 2 * (i + 1));
  before = isends;
  isend_max = 0;
  pto_tensor in64 = local(in, PATH_INLINE, PTO_F32), out64 = local(out, PATH_INLINE, PTO_F32);
  CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, &out64, &in64, PTO_RED_SUM, PTO_COLL_AUTO));
  if (!shared && eager_piece()) {
    if (isends - before != 2 * peers || isend_max > 256)
      FAIL("allreduce of 64 f32 on RMA windows, the ranks on one host: this rank sent %ld "
           "messages, the largest %ld bytes, expected 2 a peer (%ld), none over 256",
           isends - before, (long)isend_max, 2 * peers);
    result_check("allreduce of 64 f32", shared, out, expect, PATH_INLINE);
  } else {
    path_check("allreduce of 64 f32", shared, isends - before, peers, out, expect, PATH_INLINE);
  }
  /* beyond the table: on shared windows the mesh on them; on RMA windows
   * the records */
  for (int i = 0; i < PATH_BIG; i++)
    in[i] = (float)(r + 1), expect[i] = (float)(n * (n + 1) / 2);
  pto_tensor mid = local(in, PATH_MID, PTO_F32), o_mid = local(out, PATH_MID, PTO_F32);
  pto_tensor big = local(in, PATH_BIG, PTO_F32), o_big = local(out, PATH_BIG, PTO_F32);
  for (int k = 0; k < 2; k++) {
    const char *what = k ? "allreduce of 32 KiB" : "allreduce of 8 KiB";
    int64_t cnt = k ? PATH_BIG : PATH_MID;
    before = isends;
    isend_max = 0;
    CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, k ? &o_big : &o_mid, k ? &big : &mid,
                               PTO_RED_SUM, PTO_COLL_AUTO));
    long sent = isends - before, piece = shared ? 0 : eager_piece();
    if (!piece) { /* whole records; at 32 KiB between 2 ranks the exchange too (below) */
      path_check(what, shared, sent, k && n == 2 ? 2 * peers : peers, out, expect, cnt);
      continue;
    }
    /* RMA windows, every peer on this host: the 8 KiB record in pieces the
     * transport sends at once (before, one message of 80 bytes more than
     * the block: a rendezvous); the 32 KiB allreduce is beyond an
     * allreduce's records on one host (8 KiB between 2 ranks, 16 KiB on
     * more: mpi_coll.c, mpi_record_max), so its record is the descriptor
     * alone, one message a peer, and then, between 2 ranks, the exchange
     * of the 32 KiB (one message), on more ranks MPI_Iallreduce (no
     * MPI_Isend of pto's) */
    long lo = k ? 1 + (n == 2) : (long)(cnt * 4) / piece, hi = k ? lo : lo + 2;
    long most = k && n == 2 ? (long)(cnt * 4) : piece;
    if (isend_max > most || sent < peers * lo || sent > peers * hi)
      FAIL("%s on RMA windows, the ranks on one host: this rank sent %ld messages, the largest "
           "%ld bytes, expected %ld to %ld a peer, none over %ld bytes (pieces: the "
           "shared-memory transport's eager limit less 64, %ld bytes)",
           what, sent, (long)isend_max, lo, hi, most, piece);
    result_check(what, shared, out, expect, cnt);
  }
  /* counts on either side of the table's 4 KiB: rank 0's call goes through
   * the table alone, the others' through the table and then the mesh on the
   * windows (shared windows) or the records (RMA windows); every rank names
   * the mismatch */
  int64_t cnt = r == 0 ? 1024 : 1025;
  pto_tensor ti = local(in, cnt, PTO_F32), to = local(out, cnt, PTO_F32);
  int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
  char det[400];
  comm_task_error(&x.c, det, sizeof det);
  CHECK_EQ(rc, PTO_EINVAL, "allreduce of 1024 f32 on rank 0, 1025 on the others");
  if (rc == PTO_EINVAL && !strstr(det, "mismatched count"))
    FAIL("the counts across the table's limit: the mismatch is not named: %s", det);
  dom_close(&x);
  if (r == 0 && !failures)
    printf("coll_path %s windows: calls up to 4 KiB sent %ld messages each (of 256 bytes: %ld); "
           "of 8 and 32 KiB %s\n",
           shared ? "shared" : "RMA", peers, !shared && eager_piece() ? 2 * peers : peers,
           shared          ? "none"
           : eager_piece() ? "8 KiB in record pieces, 32 KiB on MPI's path"
                           : "one a peer");
}

/* ---- where MPI's collectives take over: the calls that start one ----
 *
 * Every start of an MPI nonblocking collective libpto makes is counted
 * (the profiling interface, as MPI_Isend above). On shared windows (one
 * host) pto's own algorithms on the windows beat MPI's: a reduction never
 * starts one unless it asks for PTO_COLL_MPI, an allgather, all-to-all or
 * broadcast only from switch_elems's blocks.
 * On RMA windows
 * every call beyond the records' fuse limit starts one. Between 2 ranks
 * of one host an allreduce, allgather or all-to-all that would start one is one
 * exchange instead (mpi_coll.c, pair_exchange): one send of PAIR_TAG each,
 * and a broadcast the root's one send. */
static _Atomic long coll_starts;

int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c,
                   MPI_Request *q) {
  atomic_fetch_add(&coll_starts, 1);
  return PMPI_Iallreduce(s, r, n, t, o, c, q);
}
int MPI_Ireduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c,
                              MPI_Request *q) {
  atomic_fetch_add(&coll_starts, 1);
  return PMPI_Ireduce_scatter_block(s, r, n, t, o, c, q);
}
int MPI_Iallgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                   MPI_Comm c, MPI_Request *q) {
  atomic_fetch_add(&coll_starts, 1);
  return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
int MPI_Ialltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                  MPI_Comm c, MPI_Request *q) {
  atomic_fetch_add(&coll_starts, 1);
  return PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q);
}
int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q) {
  atomic_fetch_add(&coll_starts, 1);
  return PMPI_Ibcast(b, n, t, root, c, q);
}

#define SWITCH_MAX ((int64_t)1 << 20) /* f32 elements: a 4 MiB block */

/* Where a block on shared windows of n ranks goes to MPI's path
 * (docs/comm.md, "Which algorithm"; coll.c, direct_mesh_max): a
 * broadcast's from 64 KiB; between 2 ranks an allgather's and an
 * all-to-all's too; else an allgather's from n x 512 KiB (at most 4 MiB),
 * an all-to-all's from 1 MiB; f32 elements. */
static int64_t switch_elems(comm_coll_kind kind, int n) {
  if (kind == COMM_BROADCAST || n == 2) return (64 << 10) / 4;
  if (kind == COMM_ALLTOALL) return (1 << 20) / 4;
  int64_t b = (int64_t)n * (512 << 10);
  return (b < SWITCH_MAX * 4 ? b : SWITCH_MAX * 4) / 4;
}

/* The call's sends of the 2-rank exchange (PAIR_TAG): want of them. */
static void pair_check(const char *what, bool shared, long sent, long want) {
  char name[120];
  snprintf(name, sizeof name, "%s on %s windows: sends of the 2-rank exchange", what,
           shared ? "shared" : "RMA");
  CHECK_EQ(sent, want, name);
}

static void switch_check(const char *what, bool shared, long started, long want, const float *out,
                         const float *expect, int64_t n) {
  count_check(what, shared, "MPI collective starts", started, want,
              want ? "MPI's collective" : "pto's own on the windows, or the records", out, expect,
              n);
}

/* ---- an exchange's MPI error keeps its cause ----
 *
 * With shrink_irecv set, the next MPI_Irecv libpto posts takes 8 bytes
 * (the profiling interface, as MPI_Isend above): the peer's record, an
 * 8-byte length and a header, is longer, and MPI fails the receive with
 * MPI_ERR_TRUNCATE. Rank 0's allreduce on RMA windows tests its
 * exchange's requests together (MPI_Testall), which reports a failed
 * request as MPI_ERR_IN_STATUS alone: the call failed with PTO_EMPI and
 * "MPI_ERR_IN_STATUS: error code in status" before, the truncation
 * named after (mpi_coll.c, testall). */
static _Atomic int shrink_irecv;

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
              MPI_Request *req) {
  if (atomic_exchange(&shrink_irecv, 0)) return PMPI_Irecv(buf, 8, MPI_BYTE, src, tag, comm, req);
  return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
}

static void exchange_error(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  size_t sb = pto_coll_scratch_bytes(np, 17 * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 106, world4, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float in[17] = {0}, out[17];
  pto_tensor ti = local(in, 17, PTO_F32), to = local(out, 17, PTO_F32);
  if (x.rank == 0) atomic_store(&shrink_irecv, 1);
  int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
  char det[400] = "";
  if (rc) comm_task_error(&x.c, det, sizeof det);
  if (x.rank == 0) {
    CHECK_EQ(rc, PTO_EMPI, "rank 0's allreduce, its record's receive truncated");
    if (!strstr(det, "MPI_ERR_TRUNCATE"))
      FAIL("rank 0: the exchange's error does not name MPI's (MPI_ERR_TRUNCATE): %s", det);
    else
      printf("exchange_error: rank 0: %s\n", det);
  }
  dom_close(&x);
}

/* A call's src, dst and expected values, n f32 each: all three, or none
 * and a failed check. */
static bool floats3(size_t n, float **in, float **out, float **expect) {
  *in = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
  *expect = malloc(sizeof(float) * n);
  if (*in && *out && *expect) return true;
  FAIL("out of memory for 3 x %zu f32", n);
  free(*in), free(*out), free(*expect);
  return false;
}

/* Across hosts (scripts/two_hosts.sh: TCP, 2 ranks) a broadcast whose
 * record goes as one TCP message (a block of up to 32 KiB, TCP's eager
 * limit being 64 KiB) is one-way: the root sends its record to every peer
 * and the others send nothing in the call (before, above 4 KiB, every rank
 * sent every peer its record, and the root waited a round trip for them).
 * Up to 1 MiB a call's data goes with the records (mpi_coll.c,
 * RECORD_FAR): a larger broadcast sends one to every peer, and an
 * allreduce starts no MPI collective (before: from 64 KiB, the
 * descriptors' exchange, a round trip, then MPI_Iallreduce); at 2 MiB,
 * after the descriptors' exchange, each rank sends its src in one message
 * (before: MPI_Iallreduce). */
static void coll_path_far(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  enum { MOST = 1 << 19 }; /* 2 MiB of f32 */
  size_t sb = pto_coll_scratch_bytes(np, (size_t)MOST * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 105, world4, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  int r = x.rank;
  float *in, *out, *expect;
  if (!floats3(MOST, &in, &out, &expect)) {
    dom_close(&x);
    return;
  }
  static const int64_t counts[] = {17, 1024, 2048, 8192, 16384};
  for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
    int64_t cnt = counts[k];
    for (int64_t i = 0; i < cnt; i++)
      in[i] = (float)(i + 7 * (int64_t)k), expect[i] = in[i], out[i] = -1;
    pto_tensor ti = local(in, cnt, PTO_F32), to = local(out, cnt, PTO_F32);
    long before = isends;
    CHECK_OK(&x, pto_broadcast(&x.k, x.d.id, &scratch, &to, r == 1 ? &ti : NULL, 1));
    char what[64];
    snprintf(what, sizeof what, "broadcast of %lld bytes from rank 1", (long long)cnt * 4);
    bool oneway = cnt * 4 <= 32768;
    count_check(what, false, "MPI sends", isends - before, oneway ? (r == 1 ? np - 1 : 0) : np - 1,
                oneway ? "one-way: the root's record to every peer, nothing from the others"
                       : "the records: one to every peer",
                out, expect, cnt);
  }
  /* allreduce: rank q holds q + 1 + i % 7; the last in place. Beyond the
   * records (2 MiB) no collective starts either: the 2 ranks exchange
   * their src in one message each (mpi_coll.c, pair_exchange), after the
   * descriptors' records */
  static const int64_t sums[] = {16384, 1 << 18, MOST, MOST};
  for (size_t k = 0; k < sizeof sums / sizeof *sums; k++) {
    int64_t cnt = sums[k];
    bool in_place = k == 3;
    for (int64_t i = 0; i < cnt; i++)
      in[i] = (float)(r + 1 + i % 7), expect[i] = (float)(np * (np + 1) / 2 + np * (i % 7)),
      out[i] = -1;
    pto_tensor ti = local(in, cnt, PTO_F32), to = local(in_place ? in : out, cnt, PTO_F32);
    long starts = coll_starts, sends = isends;
    CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO));
    char what[64];
    snprintf(what, sizeof what, "allreduce of %lld KiB%s", (long long)cnt * 4 / 1024,
             in_place ? " in place" : "");
    bool beyond = cnt * 4 > (1 << 20);
    switch_check(what, false, coll_starts - starts, 0, in_place ? in : out, expect, cnt);
    count_check(what, false, "MPI sends", isends - sends, beyond ? 2 : 1,
                beyond ? "the descriptors' record, then src" : "the record with the data",
                in_place ? in : out, expect, cnt);
  }
  /* max of 2 MiB through the exchange, NaNs in it: every rank gets rank
   * 0's block op rank 1's, as the fold (pto_red_op's order, b > a ? b : a):
   * [0] NaN op 1 = NaN, [1] 1 op NaN = 1 (before, rank 0 reduced the other
   * way round and got 1 and NaN) */
  for (int64_t i = 0; i < MOST; i++)
    in[i] = (float)(r + 1 + i % 5), expect[i] = (float)(np + i % 5), out[i] = -1;
  in[0] = r == 0 ? NAN : 1.0f, in[1] = r == 0 ? 1.0f : NAN;
  pto_tensor ti = local(in, MOST, PTO_F32), to = local(out, MOST, PTO_F32);
  CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_MAX, PTO_COLL_AUTO));
  if (!isnan(out[0]) || out[1] != 1.0f)
    FAIL("max of 2 MiB with NaNs on rank %d: out[0] = %g, out[1] = %g, expected nan and 1 (rank "
         "0's block op rank 1's)",
         r, (double)out[0], (double)out[1]);
  result_check("max of 2 MiB", false, out + 2, expect + 2, MOST - 2);
  free(in), free(out), free(expect);
  dom_close(&x);
  if (r == 0 && !failures)
    printf("coll_path_far: broadcasts of up to 32 KiB one-way, data up to 1 MiB with the "
           "records across hosts, a larger allreduce in one exchange\n");
}

static void coll_switch(bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  size_t sb = pto_coll_scratch_bytes(np, (size_t)SWITCH_MAX * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 110 + shared, world4, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  int n = np, r = x.rank;
  float *in, *out, *expect;
  int64_t ag_max = switch_elems(COMM_ALLGATHER, n), bc_max = switch_elems(COMM_BROADCAST, n);
  int64_t aa_max = switch_elems(COMM_ALLTOALL, n);
  if (!floats3((size_t)(n * ag_max > SWITCH_MAX ? n * ag_max : SWITCH_MAX), &in, &out, &expect)) {
    dom_close(&x);
    return;
  }
  /* 2 ranks on one host: an allgather or all-to-all beyond the records
   * (and the table's on shared windows) is one exchange, no collective,
   * and so is an allreduce that takes MPI's path */
  long mpi = shared ? 0 : 1, pair = np == 2, before;
  /* allreduce of 64 KiB: rank q holds q + 1; AUTO, then PTO_COLL_MPI */
  int64_t c = 16384;
  for (int64_t i = 0; i < c; i++)
    in[i] = (float)(r + 1), expect[i] = (float)(n * (n + 1) / 2);
  pto_tensor ti = local(in, c, PTO_F32), to = local(out, c, PTO_F32);
  for (int k = 0; k < 2; k++) {
    const char *what = k ? "allreduce of 64 KiB, PTO_COLL_MPI" : "allreduce of 64 KiB";
    bool via_mpi = k || mpi; /* the backend's path, not pto's own on the windows */
    memset(out, 0, sizeof(float) * (size_t)c);
    before = coll_starts;
    long pairs = pair_sends;
    CHECK_OK(&x, pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM,
                               k ? PTO_COLL_MPI : PTO_COLL_AUTO));
    switch_check(what, shared, coll_starts - before, via_mpi && !pair, out, expect, c);
    pair_check(what, shared, pair_sends - pairs, via_mpi && pair);
  }
  /* reduce-scatter of 64 KiB blocks: rank q's block p holds 1000 q + p */
  pto_tensor all_in = local(in, (int64_t)n * c, PTO_F32);
  for (int p = 0; p < n; p++)
    for (int64_t i = 0; i < c; i++)
      in[p * c + i] = (float)(1000 * r + p);
  for (int64_t i = 0; i < c; i++)
    expect[i] = (float)(1000 * n * (n - 1) / 2 + n * r);
  before = coll_starts;
  CHECK_OK(&x, pto_reduce_scatter(&x.k, x.d.id, &scratch, &to, &all_in, PTO_RED_SUM));
  switch_check("reduce_scatter of 64 KiB blocks", shared, coll_starts - before, mpi, out, expect,
               c);
  /* a call's count (f32 elements: a block, a broadcast's data) and the MPI
   * collectives it must start */
  typedef struct {
    int64_t c;
    long want;
    const char *what;
  } sw_case;
  /* allgather: rank q's block holds 1000 q + i % 997; the records carry
   * 32 KiB blocks on RMA windows of more than 2 ranks (2 ranks: one
   * exchange from 8 KiB), the mesh on shared windows those below ag_max;
   * beyond them 2 ranks make one exchange */
  const sw_case ag[] = {{8192, 0, "allgather of 32 KiB blocks"},
                        {ag_max - 1, mpi && !pair, "allgather of blocks 4 B below the switch"},
                        {ag_max, !pair, "allgather of blocks at the switch"}};
  for (int k = 0; k < 3; k++) {
    c = ag[k].c;
    for (int64_t i = 0; i < c; i++)
      in[i] = (float)(1000 * r + i % 997);
    for (int q = 0; q < n; q++)
      for (int64_t i = 0; i < c; i++)
        expect[q * c + i] = (float)(1000 * q + i % 997);
    pto_tensor blk = local(in, c, PTO_F32), o_all = local(out, (int64_t)n * c, PTO_F32);
    before = coll_starts;
    long pairs = pair_sends;
    CHECK_OK(&x, pto_allgather(&x.k, x.d.id, &scratch, &o_all, &blk));
    switch_check(ag[k].what, shared, coll_starts - before, ag[k].want, out, expect, (int64_t)n * c);
    pair_check(ag[k].what, shared, pair_sends - pairs, pair && (k == 2 || mpi));
  }
  /* broadcast from rank 1 on either side of the switch: i % 1009; between
   * 2 ranks the root's one send instead of the collective */
  const sw_case bc[] = {{bc_max - 1, mpi && !pair, "broadcast of 4 B below the switch"},
                        {bc_max, !pair, "broadcast at the switch"}};
  for (int k = 0; k < 2; k++) {
    c = bc[k].c;
    for (int64_t i = 0; i < c; i++)
      in[i] = (float)(i % 1009), expect[i] = in[i], out[i] = 0;
    pto_tensor bi = local(in, c, PTO_F32), bo = local(out, c, PTO_F32);
    before = coll_starts;
    long pairs = pair_sends;
    CHECK_OK(&x, pto_broadcast(&x.k, x.d.id, &scratch, &bo, r == 1 ? &bi : NULL, 1));
    switch_check(bc[k].what, shared, coll_starts - before, bc[k].want, out, expect, c);
    pair_check(bc[k].what, shared, pair_sends - pairs, pair && (k == 1 || mpi) && r == 1);
  }
  /* all-to-all: rank q's block p holds 1000 q + 10 p + i % 7; on RMA
   * windows of one host the records carry blocks of up to 16 KiB (2 ranks:
   * 8 KiB, then one exchange), so 32 KiB ones take MPI's path; n blocks
   * of 1 MiB fit the buffers */
  const sw_case aa[] = {{8192, mpi && !pair, "alltoall of 32 KiB blocks"},
                        {aa_max - 1, mpi && !pair, "alltoall of blocks 4 B below the switch"},
                        {aa_max, !pair, "alltoall of blocks at the switch"}};
  for (int k = 0; k < 3; k++) {
    c = aa[k].c;
    for (int p = 0; p < n; p++)
      for (int64_t i = 0; i < c; i++)
        in[p * c + i] = (float)(1000 * r + 10 * p + i % 7);
    for (int q = 0; q < n; q++)
      for (int64_t i = 0; i < c; i++)
        expect[q * c + i] = (float)(1000 * q + 10 * r + i % 7);
    pto_tensor ai = local(in, (int64_t)n * c, PTO_F32), ao = local(out, (int64_t)n * c, PTO_F32);
    before = coll_starts;
    long pairs = pair_sends;
    CHECK_OK(&x, pto_alltoall(&x.k, x.d.id, &scratch, &ao, &ai));
    switch_check(aa[k].what, shared, coll_starts - before, aa[k].want, out, expect, (int64_t)n * c);
    pair_check(aa[k].what, shared, pair_sends - pairs, pair && (k == 2 || mpi));
  }
  free(in), free(out), free(expect);
  dom_close(&x);
  if (r == 0 && !failures)
    printf("coll_switch %s windows: the calls below the switch points (shared windows of %d "
           "ranks: allgather %lld KiB blocks, all-to-all %lld KiB, broadcast %lld KiB) started "
           "%ld MPI collectives each, those above 1 (2 ranks: none, one exchange or the "
           "broadcast's one send)\n",
           shared ? "shared" : "RMA", n, (long long)ag_max / 256, (long long)aa_max / 256,
           (long long)bc_max / 256, mpi);
}

/* ---- the records' bound by call, on RMA windows of one host ----
 *
 * A call's data goes with the records up to a bound that depends on the
 * call (mpi_coll.c, mpi_record_max): 8 KiB for an allreduce, allgather or
 * all-to-all between 2 ranks, 16 KiB for a broadcast and for an
 * allreduce or all-to-all on more ranks, 32 KiB for the others. One element more takes
 * MPI's path: between 2 ranks the exchange (one send of PAIR_TAG each; a
 * broadcast's root's alone), else one MPI collective. At the bound
 * neither. Rank q's data is q + 1 everywhere;
 * the broadcast's root is rank 1. */
typedef struct bound_case {
  comm_coll_kind kind;
  int64_t bytes; /* the bound: a block's bytes (a broadcast's, an allreduce's whole src) */
} bound_case;

static int bound_call(dom *x, pto_tensor *scratch, comm_coll_kind kind, int64_t c, float *in,
                      float *out, float *expect) {
  int n = np, r = x->rank;
  int64_t all = (int64_t)n * c;
  for (int64_t i = 0; i < all; i++)
    in[i] = (float)(r + 1), out[i] = 0;
  pto_tensor blk = local(in, c, PTO_F32), o_blk = local(out, c, PTO_F32);
  pto_tensor a_in = local(in, all, PTO_F32), a_out = local(out, all, PTO_F32);
  switch (kind) {
  case COMM_ALLREDUCE:
  case COMM_REDUCE_SCATTER:
    for (int64_t i = 0; i < c; i++)
      expect[i] = (float)(n * (n + 1) / 2);
    return kind == COMM_ALLREDUCE
               ? pto_allreduce(&x->k, x->d.id, scratch, &o_blk, &blk, PTO_RED_SUM, PTO_COLL_AUTO)
               : pto_reduce_scatter(&x->k, x->d.id, scratch, &o_blk, &a_in, PTO_RED_SUM);
  case COMM_BROADCAST:
    for (int64_t i = 0; i < c; i++)
      expect[i] = 2.0f;
    return pto_broadcast(&x->k, x->d.id, scratch, &o_blk, r == 1 ? &blk : NULL, 1);
  default: /* allgather, all-to-all: block q is rank q's */
    for (int64_t i = 0; i < all; i++)
      expect[i] = (float)(i / c + 1);
    return kind == COMM_ALLGATHER ? pto_allgather(&x->k, x->d.id, scratch, &a_out, &blk)
                                  : pto_alltoall(&x->k, x->d.id, scratch, &a_out, &a_in);
  }
}

static void record_bounds(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  const int64_t most = 32 << 10; /* bytes of a block, at most */
  size_t sb = pto_coll_scratch_bytes(np, (size_t)most + 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 112, world4, np, b, 1, false, 1);
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float *in, *out, *expect;
  size_t elems = (size_t)np * (size_t)(most / 4 + 1);
  if (!floats3(elems, &in, &out, &expect)) {
    dom_close(&x);
    return;
  }
  bool pair = np == 2;
  const bound_case cases[] = {{COMM_ALLREDUCE, pair ? 8 << 10 : 16 << 10},
                              {COMM_ALLGATHER, pair ? 8 << 10 : 32 << 10},
                              {COMM_ALLTOALL, pair ? 8 << 10 : 16 << 10},
                              {COMM_BROADCAST, 16 << 10},
                              {COMM_REDUCE_SCATTER, 32 << 10}};
  static const char *names[] = {"",          "allreduce", "allgather", "reduce_scatter",
                                "broadcast", "alltoall"};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
    for (int over = 0; over < 2; over++) {
      const bound_case *bc = &cases[k];
      int64_t c = bc->bytes / 4 + over;
      bool kind_pair = pair && bc->kind != COMM_REDUCE_SCATTER;
      char what[96];
      snprintf(what, sizeof what, "%s of %lld B blocks (%s its records' bound)", names[bc->kind],
               (long long)(c * 4), over ? "4 B over" : "at");
      long starts = coll_starts, pairs = pair_sends;
      CHECK_OK(&x, bound_call(&x, &scratch, bc->kind, c, in, out, expect));
      int64_t nout = bc->kind == COMM_ALLGATHER || bc->kind == COMM_ALLTOALL ? np * c : c;
      switch_check(what, false, coll_starts - starts, over && !kind_pair, out, expect, nout);
      /* a broadcast's one send is the root's */
      pair_check(what, false, pair_sends - pairs,
                 over && kind_pair && (bc->kind != COMM_BROADCAST || x.rank == 1));
    }
  int r = x.rank;
  free(in), free(out), free(expect);
  dom_close(&x);
  if (r == 0 && !failures)
    printf("record_bounds on %d ranks of one host: allreduce and all-to-all %d KiB, allgather "
           "%d KiB, broadcast 16 KiB, reduce-scatter 32 KiB\n",
           np, pair ? 8 : 16, pair ? 8 : 32);
}

/* ---- ranks that share a CPU do not spin through each other's time ----
 *
 * pto's count of runnable threads sees only this process: two ranks on
 * one CPU would each believe it free and spin PTO_SPIN_NS (1 ms here, the
 * ctest's environment) in the time slice of the peer they wait for. Both
 * ranks pin themselves to one CPU before anything of pto's reads their CPUs;
 * on shared windows each publishes them, and rank 0's wait for a condition
 * that never comes (the backend's wait, as the call table's) must yield
 * and park: a handful of looks in 3 ms, not thousands. */
static bool never(void *arg) {
  ++*(unsigned *)arg;
  return false;
}

static int sharers(void) {
  /* the lowest CPU any rank may use (CPU 0 may be outside a cpuset; mpirun
   * binds each rank to a CPU of its own), the same one on every rank */
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof all, &all) != 0) {
    FAIL("sched_getaffinity");
    return 1;
  }
  int mine = 0, first;
  while (mine < CPU_SETSIZE - 1 && !CPU_ISSET(mine, &all))
    mine++;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    FAIL("sched_setaffinity to one CPU");
    return 1;
  }
  setenv("PTO_MPI_SHARED_WINDOWS", "1", 1);
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 102, world4, np, b, 1, false, 1);
  if (x.rank == 0) {
    comm_dom *d = comm_find(&x.c, x.d.id);
    unsigned asked = 0;
    if (d->be->signal_park(d->win, never, &asked, pto_now_ns() + 3000000ull))
      FAIL("the wait for a condition that never comes returned true");
    /* without a spin: the first look, the yields, one a park and the last */
    if (asked > 64)
      FAIL("%d ranks share one CPU, yet rank 0's wait asked its condition %u times in 3 ms (it "
           "spun)",
           np, asked);
    else
      printf("sharers: %d ranks on one CPU, the wait asked %u times in 3 ms\n", np, asked);
  }
  dom_close(&x);
  return failures ? 1 : 0;
}

/* ---- a collective on MPI's collectives that a rank misses, or dies in ---- */

static int coll_missing(bool shared) {
  /* RMA windows: MPI's collectives and the records; shared windows: the
   * call table (this small call's data fits it), which leaves nothing in
   * flight, so the next call waits again instead of being refused */
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  size_t sb = pto_coll_scratch_bytes(np, 64 * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 95 - shared, world4, np, b, 1, false, 1);
  comm_find(&x.c, x.d.id)->desc.wait_timeout_ms = 500;
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float in[64] = {0}, out[64];
  pto_tensor ti = local(in, 64, PTO_F32), to = local(out, 64, PTO_F32);
  char det[400];
  if (x.rank == 0) {
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    comm_task_error(&x.c, det, sizeof det);
    CHECK_EQ(rc, PTO_EWAIT_TIMEOUT, "allreduce rank 1 does not call");
    if (!strstr(det, "allreduce #1 timed out") ||
        !strstr(det, shared ? "rank 1's call #1" : "did not complete"))
      FAIL("the timeout names no call: %s", det);
    /* and the rank it waited for, on either path (the records' receives
     * say whose record never came) */
    if (!shared && !strstr(det, "no record came from rank 1"))
      FAIL("the timeout names not the rank it waited for: %s", det);
    printf("rank 0: %s: %s\n", pto_status_name(rc), det);
    comm_task_begin(&x.c, 1, 3); /* clears the latched error, same task */
    rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    comm_task_error(&x.c, det, sizeof det);
    CHECK_EQ(rc, shared ? PTO_EWAIT_TIMEOUT : PTO_EMPI, "the next allreduce on that scratch");
    if (!strstr(det, shared ? "allreduce #2 timed out" : "out of step"))
      FAIL("the next call says not why it failed: %s", det);
    printf("rank 0 again: %s: %s\n", pto_status_name(rc), det);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 1) {
    /* late, and with another count: it meets rank 0's pending call and
     * names the mismatch */
    pto_tensor t16 = local(in, 16, PTO_F32), o16 = local(out, 16, PTO_F32);
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &o16, &t16, PTO_RED_SUM, PTO_COLL_AUTO);
    comm_task_error(&x.c, det, sizeof det);
    CHECK_EQ(rc, PTO_EINVAL, "rank 1's late allreduce");
    if (!strstr(det, "mismatched count")) FAIL("rank 1's late call names no mismatch: %s", det);
    printf("rank 1: %s: %s\n", pto_status_name(rc), det);
  }
  dom_close(&x);
  return failures ? 1 : 0;
}

/* A call that did not complete leaves its record in flight (MPI cannot
 * withdraw a send): rank 0's allreduce of task 1, which rank 1 does not
 * call, times out with its record (its value 7) sent. In task 2 (a new
 * epoch, same domain) rank 1 calls an allreduce of the same count, its
 * call #1 too: its receive meets rank 0's record of task 1, which it must
 * not take for a call of task 2 (it did: PTO_OK, out = 7 + 1, from a call
 * rank 0 never made). */
static int coll_stale(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1); /* the records (shared: the call table) */
  size_t sb = pto_coll_scratch_bytes(np, 64 * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 97, world4, np, b, 1, false, 1);
  comm_find(&x.c, x.d.id)->desc.wait_timeout_ms = 500;
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float in[16], out[16];
  pto_tensor ti = local(in, 16, PTO_F32), to = local(out, 16, PTO_F32);
  char det[400];
  if (x.rank == 0) {
    for (int i = 0; i < 16; i++)
      in[i] = 7;
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    CHECK_EQ(rc, PTO_EWAIT_TIMEOUT, "rank 0's allreduce of task 1, which rank 1 does not call");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  comm_task_begin(&x.c, 2, 3); /* task 2 of chips 0 and 1 */
  if (x.rank == 1) {
    for (int i = 0; i < 16; i++)
      in[i] = 1, out[i] = 0;
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    comm_task_error(&x.c, det, sizeof det);
    if (rc == 0)
      FAIL("rank 1's allreduce of task 2 returned PTO_OK with out[0] = %g: it took rank 0's "
           "record of task 1 for a call of task 2, which rank 0 never made",
           (double)out[0]);
    else if (!strstr(det, "of node task epoch 1") || !strstr(det, "this call is of epoch 2"))
      FAIL("rank 1's allreduce of task 2: %s: %s (names no stale record)", pto_status_name(rc),
           det);
    printf("rank 1: %s: %s\n", pto_status_name(rc), det);
  }
  dom_close(&x);
  return failures ? 1 : 0;
}

/* A call whose data step does not complete in time: MPI cannot withdraw
 * it, and owns the call's src and dst until it completes, once the late
 * rank calls. The backend's collective is called directly (coll.c's
 * descriptors, which would make rank 0 wait for rank 1's call, are left
 * out): rank 0's allreduce, on a thread of its own, has a 1 ms deadline;
 * rank 1 calls only 100 ms later (after a barrier), with a 5 s one. Rank
 * 0's call must not return before rank 1 called (before the fix it
 * returned at its deadline with the request in flight), it returns
 * PTO_EWAIT_TIMEOUT saying it waited (or PTO_OK when a loaded host kept
 * its thread from looking before rank 1 came), with the sum in its dst; what the
 * program writes into its src and dst after that stays there (before: MPI
 * wrote the sum over it later), and rank 1 gets the sum of the values the
 * call was made with (before: PTO_OK with sums of what rank 0 wrote
 * afterwards). The buffer's collectives stay in step: a second allreduce
 * on it completes on both ranks. */
typedef struct late_call {
  comm_dom *d;
  comm_coll_call call;
  int64_t timeout_ms;
  comm_cancel_fn cancel; /* NULL: none */
  int rc;
  char why[400];
  _Atomic int done;
} late_call;

static void *late_call_run(void *arg) {
  late_call *l = arg;
  l->rc =
      l->d->be->coll(l->d->win, &l->call, l->timeout_ms, l->cancel, NULL, l->why, sizeof l->why);
  atomic_store(&l->done, 1);
  return NULL;
}

/* Opens domain `id` of one scratch buffer for an allreduce of LATE_N
 * floats, src rank + 1 and dst 0, and describes that call to the
 * backend's collective (deadline and cancel left to the caller). */
enum { LATE_N = 1 << 16 }; /* floats: 256 KiB, on MPI's collectives */
static float late_in[LATE_N], late_out[LATE_N];

static late_call late_allreduce(dom *x, int id) {
  pto_window_buffer b[1] = {{"scratch", pto_coll_scratch_bytes(np, sizeof late_in)}};
  dom_open(x, id, world4, np, b, 1, false, 1);
  for (int i = 0; i < LATE_N; i++)
    late_in[i] = (float)(x->rank + 1), late_out[i] = 0;
  return (late_call){.d = comm_find(&x->c, x->d.id),
                     .call = {.kind = COMM_ALLREDUCE,
                              .dtype = PTO_F32,
                              .op = PTO_RED_SUM,
                              .count = LATE_N,
                              .src = late_in,
                              .dst = late_out,
                              .buf = 0}};
}

static int count_not(const float *v, int n, float want, int *first) {
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (v[i] != want && bad++ == 0) *first = i;
  return bad;
}

static int coll_late(bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  enum { N = LATE_N };
  float *in = late_in, *out = late_out;
  dom x = {0};
  late_call l = late_allreduce(&x, 93 - shared);
  l.timeout_ms = x.rank == 0 ? 1 : 5000;
  const char *lay = shared ? "shared" : "RMA";
  pthread_t th;
  int first = -1, bad;
  if (x.rank == 0) {
    pthread_create(&th, NULL, late_call_run, &l);
    usleep(100000); /* well past its deadline */
    if (atomic_load(&l.done))
      FAIL("(%s windows) rank 0's allreduce returned (%s: %s) before rank 1 called: MPI still "
           "owns its src and dst",
           lay, pto_status_name(l.rc), l.why);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 1) late_call_run(&l);
  if (x.rank == 0) {
    pthread_join(th, NULL);
    /* PTO_OK only when its thread did not look again before rank 1 came (a
     * loaded host can keep it off a CPU for the whole 100 ms) */
    if (l.rc != PTO_OK) {
      CHECK_EQ(l.rc, PTO_EWAIT_TIMEOUT, "rank 0's allreduce, 1 ms deadline, rank 1 100 ms late");
      if (!strstr(l.why, "waited for it"))
        FAIL("rank 0's error says not that it waited: %s", l.why);
    }
    printf("rank 0 (%s windows): %s: %s\n", lay, pto_status_name(l.rc),
           l.rc ? l.why : "(its thread did not look before rank 1 called: not exercised)");
    if ((bad = count_not(out, N, 3, &first)))
      FAIL("(%s windows) rank 0's dst after its late call: %d of %d wrong, the first [%d] = %g, "
           "expected 3",
           lay, bad, N, first, (double)out[first]);
    for (int i = 0; i < N; i++) /* the program's memory again */
      in[i] = 100, out[i] = -7;
  } else if (x.rank == 1) {
    CHECK_EQ(l.rc, PTO_OK, "rank 1's allreduce, late");
    if (l.rc == PTO_OK && (bad = count_not(out, N, 3, &first)))
      FAIL("(%s windows) rank 1's allreduce returned PTO_OK with %d of %d sums wrong, the first "
           "[%d] = %g, expected 3: it took what rank 0 wrote into its src or dst after its call "
           "returned",
           lay, bad, N, first, (double)out[first]);
  }
  for (int i = 0; i < 3; i++) /* MPI progress on rank 0: a request left in flight would land */
    MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 0 && (bad = count_not(out, N, -7, &first)))
    FAIL("(%s windows) the allreduce that reached its deadline wrote rank 0's dst after it "
         "returned: %d of %d floats changed, the first [%d] = %g, expected -7 (what the program "
         "wrote there since)",
         lay, bad, N, first, (double)out[first]);
  /* the buffer's collectives are in step: the next one completes */
  for (int i = 0; i < N; i++)
    in[i] = 1, out[i] = 0;
  l.timeout_ms = 5000;
  l.rc = -1;
  late_call_run(&l);
  CHECK_EQ(l.rc, PTO_OK, "the next allreduce on that buffer");
  if (l.rc == PTO_OK && (bad = count_not(out, N, (float)np, &first)))
    FAIL("(%s windows) the next allreduce: %d of %d sums wrong, the first [%d] = %g, expected %d",
         lay, bad, N, first, (double)out[first], np);
  dom_close(&x);
  return failures ? 1 : 0;
}

/* A peer that never makes its call (it froze, or sleeps) while rank 0's
 * allreduce waits in MPI's collective: MPI owns rank 0's src and dst until
 * the request completes, which it never does, so the call can neither
 * return nor wait for ever. The backend's collective is called directly,
 * as in coll_late: rank 0's with a 1 ms deadline;
 * rank 1 sleeps, long past the test's bound, and never calls. Rank 0's
 * call must end the job (MPI_Abort) once the grace after its deadline
 * (PTO_MPI_COLL_GRACE_MS, the ctest sets it) ran out, saying so on stderr
 * (tests/mpi/coll_frozen.sh checks the exit status, the line and the
 * time); a call that returns fails the test, and so does a job that is
 * still there when rank 1 wakes. `cancelled`: rank 0's call has a 60 s
 * deadline and is cancelled at its first look (cancel_now), which gets the
 * same bound. */
static bool cancel_now(void *arg) {
  (void)arg;
  return true;
}

static int coll_frozen(bool cancelled) {
  dom x = {0};
  late_call l = late_allreduce(&x, 89);
  l.timeout_ms = cancelled ? 60000 : 1;
  l.cancel = cancelled ? cancel_now : NULL;
  /* for coll_frozen.sh: what the job may leave behind */
  const char *job = getenv("OMPI_MCA_ess_base_jobid");
  printf("rank %d: pid %d, Open MPI job %s\n", x.rank, (int)getpid(), job ? job : "0");
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.rank == 0) {
    printf("rank 0: allreduce on MPI's collectives, %s, rank 1 never calls\n",
           cancelled ? "cancelled at once (60 s deadline)" : "1 ms deadline");
    fflush(stdout);
    uint64_t t0 = pto_now_ns();
    late_call_run(&l);
    FAIL("rank 0's allreduce returned %s after %.0f ms: %s; expected it to end the job, rank 1 "
         "never having called (MPI still owns its src and dst)",
         pto_status_name(l.rc), (double)(pto_now_ns() - t0) / 1e6, l.why);
  } else {
    for (int s = 0; s < 120; s++) /* past any bound of the test */
      sleep(1);
    FAIL("rank %d slept 120 s and the job still runs: rank 0's call did not end it", x.rank);
  }
  fflush(stdout);
  fflush(stderr);
  return 1;
}

/* The survivors of a rank that died leave after rank 0 has printed: a
 * rank that _exits makes mpiexec end the whole job, and a survivor that
 * left first could end rank 0 before its line (the one the ctest's
 * pattern looks for) was out. Rank 0 notifies each other survivor's
 * `cell`; a notify that fails still lets them leave at the deadline. */
static void leave_after_rank0(dom *x, const pto_tensor *cell, int dead) {
  if (x->rank == 0) {
    for (int r = 2; r < x->d.nranks; r++)
      if (r != dead) {
        int rc = pto_notify(&x->k, x->d.id, r, cell, PTO_SIGNAL_ADD, 1);
        if (rc) printf("rank 0: the notify to rank %d failed: %s\n", r, pto_status_name(rc));
      }
  } else if (x->rank != dead) {
    int rc = pto_signal_wait(&x->k, x->d.id, cell, PTO_CMP_GE, 1, 10000);
    if (rc) printf("rank %d: rank 0's all-clear did not come: %s\n", x->rank, pto_status_name(rc));
  }
  fflush(stdout);
}

static int coll_die(void) {
  size_t sb = pto_coll_scratch_bytes(np, 4096 * 4);
  pto_window_buffer b[2] = {{"scratch", sb}, {"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 96, world4, np, b, 2, false, 1);
  comm_find(&x.c, x.d.id)->desc.wait_timeout_ms = 2000;
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  static float in[4096], out[4096];
  pto_tensor ti = local(in, 4096, PTO_F32), to = local(out, 4096, PTO_F32);
  for (int i = 0; i < 3; i++) { /* rank 1 leaves in the third */
    if (x.rank == 1 && i == 2) {
      usleep(200 * 1000); /* the others are waiting for me now */
      _exit(3);
    }
    uint64_t t0 = pto_now_ns();
    int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
    if (i < 2) {
      CHECK_OK(&x, rc);
      continue;
    }
    double ms = (double)(pto_now_ns() - t0) / 1e6;
    char det[400];
    comm_task_error(&x.c, det, sizeof det);
    printf("rank %d: the allreduce with dead rank 1 ended with %s after %.0f ms: %s\n", me,
           pto_status_name(rc), ms, det);
  }
  pto_tensor cells = win(&x, "cells", PTO_I64, 64), all_clear = cell_at(&cells, 1);
  leave_after_rank0(&x, &all_clear, 1);
  return failures ? 1 : 0;
}

/* Across two hosts: rank 1 dies (vanish) where it would send its src in
 * a 2 MiB allreduce's exchange (after the descriptors' records matched), so
 * rank 0's receive into its dst never completes. MPI owns that dst: rank
 * 0 waits out its deadline and the grace, then ends the job naming the
 * call (end_job), never returning while MPI may still write it. */
static int coll_die_pair(void) {
  enum { N = 1 << 19 }; /* 2 MiB of f32: beyond the records */
  size_t sb = pto_coll_scratch_bytes(np, (size_t)N * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 97, world4, np, b, 1, false, 1);
  comm_find(&x.c, x.d.id)->desc.wait_timeout_ms = 2000;
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  float *in, *out, *expect;
  if (!floats3(N, &in, &out, &expect)) {
    dom_close(&x);
    return 1;
  }
  pto_tensor ti = local(in, N, PTO_F32), to = local(out, N, PTO_F32);
  if (x.rank == 1) atomic_store(&die_at_pair, 1);
  int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
  char det[400];
  comm_task_error(&x.c, det, sizeof det);
  printf("rank %d: the allreduce returned %s while MPI may still write its dst: %s\n", me,
         pto_status_name(rc), det);
  return 1;
}

/* coll_stuck: MPI_Testall never returns on this rank once set, as Open
 * MPI 4.1's did, deadlocked inside its TCP transport after a peer died */
static _Atomic int stuck_in_testall;

int MPI_Testall(int n, MPI_Request *req, int *flag, MPI_Status *st) {
  while (atomic_load(&stuck_in_testall))
    pause();
  return PMPI_Testall(n, req, flag, st);
}

/* Rank 0's allreduce never comes back from MPI_Testall (RMA windows: the
 * records' exchange tests its two requests so): the watchdog ends the job
 * naming the call once its deadline (1 s), the grace and the margin
 * passed. Rank 1 waits in MPI until the job ends. */
static int coll_stuck(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  enum { N = 64 };
  size_t sb = pto_coll_scratch_bytes(np, (size_t)N * 4);
  pto_window_buffer b[1] = {{"scratch", sb}};
  dom x = {0};
  dom_open(&x, 98, world4, np, b, 1, false, 1);
  comm_find(&x.c, x.d.id)->desc.wait_timeout_ms = 1000;
  pto_tensor scratch = win(&x, "scratch", PTO_U8, (int64_t)sb);
  static float in[N], out[N];
  pto_tensor ti = local(in, N, PTO_F32), to = local(out, N, PTO_F32);
  if (x.rank != 0) {
    int dummy;
    MPI_Recv(&dummy, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never sent */
    return 1;
  }
  uint64_t t0 = pto_now_ns();
  atomic_store(&stuck_in_testall, 1);
  int rc = pto_allreduce(&x.k, x.d.id, &scratch, &to, &ti, PTO_RED_SUM, PTO_COLL_AUTO);
  printf("rank 0: the allreduce stuck in MPI returned %s after %.0f ms\n", pto_status_name(rc),
         (double)(pto_now_ns() - t0) / 1e6);
  return 1;
}

/* Rank 0's quiet never comes back from MPI_Win_flush (RMA windows): the
 * watchdog ends the job once the domain's wait deadline (5 s, dom_open's),
 * the grace and the margin passed. */
static int ops_stuck(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  pto_window_buffer b[1] = {{"data", 4096}};
  dom x = {0};
  dom_open(&x, 99, world4, np, b, 1, false, 1);
  if (x.rank != 0) {
    int dummy;
    MPI_Recv(&dummy, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never sent */
    return 1;
  }
  pto_tensor data = win(&x, "data", PTO_F32, 1024);
  static float src[1024];
  pto_tensor ts = local(src, 1024, PTO_F32);
  CHECK_OK(&x, pto_put(&x.k, x.d.id, 1, &data, &ts, NULL));
  uint64_t t0 = pto_now_ns();
  atomic_store(&stuck_in_flush, 1);
  int rc = pto_quiet(&x.k, x.d.id);
  printf("rank 0: the quiet stuck in MPI returned %s after %.0f ms\n", pto_status_name(rc),
         (double)(pto_now_ns() - t0) / 1e6);
  return 1;
}

/* ---- a rank that dies ---- */

static int die(void) {
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 80, world4, np, b, 1, false, 1);
  x.d.wait_timeout_ms = 2000;
  pto_tensor cells = win(&x, "cells", PTO_I64, 64), c = cell_at(&cells, 0);
  if (x.rank == 1) {
    usleep(200 * 1000); /* the others are waiting for me now */
    _exit(3);
  }
  uint64_t t0 = pto_now_ns();
  int rc = pto_signal_wait(&x.k, x.d.id, &c, PTO_CMP_GE, 1, 2000);
  double ms = (double)(pto_now_ns() - t0) / 1e6;
  char det[400];
  comm_task_error(&x.c, det, sizeof det);
  printf("rank %d: the wait for dead rank 1 ended with %s after %.0f ms: %s\n", me,
         pto_status_name(rc), ms, det);
  pto_tensor all_clear = cell_at(&cells, 1);
  leave_after_rank0(&x, &all_clear, 1);
  return rc == PTO_EWAIT_TIMEOUT && ms < 4000 ? 0 : 1;
}

/* A rank missing at the window release (rank 1 never closes): rank 0's
 * close gives up on MPI_Win_free after the deadline, and the window MPI
 * did not take stays mapped, also where the backend reserved the range
 * itself (RMA windows, desc.base 0): MPI may still write into it. */
/* One rank's open of a domain of windows of `bytes` each, expected to fail
 * with PTO_ESYSTEM naming every string of want. */
static void open_fails(int32_t id, size_t bytes, const char *const *want, int nwant) {
  pto_window_buffer b[1] = {{"big", bytes}};
  dom x = {.expect_open_failure = true};
  dom_open(&x, id, world4, np, b, 1, false, 1);
  if (me == 0) printf("rank 0: %s: %s\n", pto_status_name(x.open_rc), x.open_why);
  if (x.open_rc != PTO_ESYSTEM)
    FAIL("open returned %s, expected PTO_ESYSTEM", pto_status_name(x.open_rc));
  for (int i = 0; i < nwant; i++)
    if (!strstr(x.open_why, want[i]))
      FAIL("open's reason \"%s\" does not name \"%s\"", x.open_why, want[i]);
  dom_close(&x);
}

static void lazy_window(void) {
  enum { BIG = 256 << 20 };
  const int64_t n = BIG / 8;
  pto_window_buffer b[1] = {{"big", BIG}};
  int64_t before = resident_bytes();
  dom x = {0};
  dom_open(&x, 86, world4, np, b, 1, false, 1);
  int64_t grew = resident_bytes() - before;
  if (before < 0 || grew >= (32 << 20))
    FAIL("opening a domain with a %d MiB window: resident memory grew by %lld bytes (from "
         "%lld), expected less than 32 MiB: the window's pages were touched",
         BIG >> 20, (long long)grew, (long long)before);
  /* my view of "big" names the same bytes of the peer's window */
  pto_tensor big = win(&x, "big", PTO_I64, n);
  int peer = (x.rank + 1) % np, from = (x.rank + np - 1) % np;
  int64_t at[3] = {0, n / 2 + 3, n - 1}, got[3] = {-1, -1, -1};
  for (int i = 0; i < 3; i++) {
    pto_tensor dst = local(&got[i], 1, PTO_I64), src = cell_at(&big, at[i]);
    CHECK_OK(&x, pto_get(&x.k, x.d.id, peer, &dst, &src, NULL));
    CHECK_EQ(got[i], 0, "a never-written element of the peer's window");
  }
  int64_t v = 1000 + x.rank;
  pto_tensor src = local(&v, 1, PTO_I64), dst = cell_at(&big, n - 1);
  CHECK_OK(&x, pto_put(&x.k, x.d.id, peer, &dst, &src, NULL));
  CHECK_OK(&x, pto_quiet(&x.k, x.d.id));
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_EQ(((int64_t *)big.buf)[n - 1], 1000 + from, "the last element the peer put");
  dom_close(&x);
}

static int map_errors(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  /* 2 x 128 TiB: more than a process's address space */
  const char *reserve[] = {"cannot reserve", "of address space: mmap: Cannot allocate memory"};
  open_fails(96, (size_t)1 << 47, reserve, 2);
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  int mode = -1;
  if (f) {
    if (fscanf(f, "%d", &mode) != 1) mode = -1;
    fclose(f);
  }
  if (mode == 1) {
    if (me == 0) printf("rank 0: overcommit always allowed here: the map failure not tried\n");
  } else {
    /* 1 TiB of private writable memory: more than the kernel lets a
     * mapping commit (overcommit 0: more than memory and swap; 2: the limit) */
    const char *map[] = {"cannot map a window of 1099511631872 bytes",
                         ": mmap: Cannot allocate memory"};
    open_fails(97, (size_t)1 << 40, map, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

static int left_behind(void) {
  setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 95, world4, np, b, 1, false, 1);
  int rc = 0;
  if (x.rank == 0) {
    void *mine = (void *)(uintptr_t)comm_find(&x.c, x.d.id)->desc.base; /* rank 0's slot */
    comm_fini(&x.c, true);
    bool mapped = msync(mine, 4096, MS_ASYNC) == 0;
    printf("rank 0: the window left behind is %s\n", mapped ? "still mapped" : "unmapped");
    rc = mapped ? 0 : 1;
  }
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  return rc;
}

/* Kernel threads of one chip calling concurrently (MPI_THREAD_MULTIPLE):
 * THREADS threads per rank, thread t stores into slot t of the next rank
 * and notifies cell t, waits for its own cell t and checks slot t, ROUNDS
 * times back to back; fault injection on (the queue is shared by the
 * threads) and off, both window layouts. */
#define THREADS 4
#define ROUNDS  40
#define SLOT_N  256

typedef struct thr {
  dom *x;
  int t, bad;
  pto_kctx k;
} thr;

static void *thread_main(void *arg) {
  thr *a = arg;
  dom *x = a->x;
  int n = x->d.nranks, to = (x->rank + 1) % n, from = (x->rank + n - 1) % n;
  int64_t shape = THREADS * SLOT_N, at = a->t * SLOT_N, len = SLOT_N;
  pto_tensor data, slot, cells, c;
  pto_comm_window_tensor(&x->c, x->d.id, x->rank, "data", PTO_I32, 1, &shape, &data);
  pto_tensor_slice(&data, &at, &len, &slot);
  int64_t nc = 64;
  pto_comm_window_tensor(&x->c, x->d.id, x->rank, "cells", PTO_I64, 1, &nc, &cells);
  c = cell_at(&cells, a->t);
  int32_t v[SLOT_N];
  pto_tensor tv = local(v, SLOT_N, PTO_I32);
  const int32_t *got = (const int32_t *)slot.buf + slot.offset;
  for (int round = 1; round <= ROUNDS && !a->bad; round++) {
    for (int i = 0; i < SLOT_N; i++)
      v[i] = round * 100000 + x->rank * 1000 + a->t * 256 + i;
    int rc = pto_remote_store(&a->k, x->d.id, to, &slot, &tv);
    if (!rc) rc = pto_notify(&a->k, x->d.id, to, &c, PTO_SIGNAL_ADD, 1);
    if (!rc) rc = pto_signal_wait(&a->k, x->d.id, &c, PTO_CMP_GE, round, -1);
    if (rc) {
      fprintf(stderr, "FAILED rank %d thread %d round %d: %s\n", me, a->t, round,
              pto_status_name(rc));
      a->bad = 1;
      break;
    }
    for (int i = 0; i < SLOT_N; i++) {
      int32_t want = round * 100000 + from * 1000 + a->t * 256 + i;
      if (got[i] != want) {
        fprintf(stderr, "FAILED rank %d thread %d round %d: slot[%d] = %d, expected %d\n", me, a->t,
                round, i, got[i], want);
        a->bad = 1;
        break;
      }
    }
    /* the next round's store may overwrite my slot at the peer only after
     * the peer read it: a second cell (t + 32) acknowledges */
    pto_tensor ack = cell_at(&cells, 32 + a->t);
    rc = pto_notify(&a->k, x->d.id, from, &ack, PTO_SIGNAL_ADD, 1);
    if (!rc) rc = pto_signal_wait(&a->k, x->d.id, &ack, PTO_CMP_GE, round, -1);
    if (rc) {
      fprintf(stderr, "FAILED rank %d thread %d ack %d: %s\n", me, a->t, round,
              pto_status_name(rc));
      a->bad = 1;
    }
  }
  return NULL;
}

static void threads(bool fault, bool shared) {
  setenv("PTO_MPI_SHARED_WINDOWS", shared ? "1" : "0", 1);
  pto_window_buffer b[2] = {{"data", THREADS * SLOT_N * 4}, {"cells", 64 * 8}};
  dom x = {0};
  dom_open(&x, 90 + fault + 2 * shared, world4, np, b, 2, fault, 2);
  pthread_t th[THREADS];
  thr a[THREADS];
  for (int t = 0; t < THREADS; t++) {
    a[t] = (thr){&x, t, 0, x.k};
    a[t].k.core_id = t;
    pthread_create(&th[t], NULL, thread_main, &a[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    failures += a[t].bad;
  }
  dom_close(&x);
}

/* ---- who initialises MPI ---- */

/* selfinit: the program never called MPI_Init: opening a domain (here an
 * observer's, which needs no rank) initialises MPI with
 * MPI_THREAD_MULTIPLE; then a 1-rank domain of each process works (a
 * notify to itself), and pto finalises MPI at exit.
 * single: MPI initialised with MPI_THREAD_SINGLE: PTO_EMPI naming
 * MPI_THREAD_MULTIPLE. */
static int init_modes(const char *mode) {
  pto_window_buffer b[1] = {{"cells", 64 * 8}};
  dom x = {0};
  memset(&x, 0, sizeof x);
  comm_desc_layout(&x.d, b, 1);
  x.d.id = 1;
  x.d.nranks = 1;
  x.d.backend = COMM_BACKEND_MPI;
  x.d.wait_timeout_ms = 5000;
  comm_init(&x.c, -1);
  int rc = comm_domain_open(&x.c, &x.d, -1);
  int init = 0, provided = -1;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (init) MPI_Query_thread(&provided);
  if (strcmp(mode, "single") == 0) {
    char det[400];
    comm_task_error(&x.c, det, sizeof det);
    if (provided == MPI_THREAD_MULTIPLE)
      printf("single: the MPI library gave MPI_THREAD_MULTIPLE anyway; open %s\n",
             pto_status_name(rc));
    else if (rc != PTO_EMPI || !strstr(det, "MPI_THREAD_MULTIPLE"))
      FAIL("open under thread level %d: %s, expected PTO_EMPI naming MPI_THREAD_MULTIPLE: %s",
           provided, pto_status_name(rc), det);
    else if (me == 0)
      printf("single: %s: %s\n", pto_status_name(rc), det);
    comm_fini(&x.c, true);
    MPI_Finalize();
    return failures ? 1 : 0;
  }
  CHECK_OK(&x, rc);
  CHECK_EQ(init, 1, "MPI initialised by opening a domain");
  CHECK_EQ(provided, MPI_THREAD_MULTIPLE, "the thread level pto asked for");
  comm_fini(&x.c, true);
  /* a 1-rank domain of my own */
  comm_init(&x.c, me);
  x.d.chips[0] = me;
  x.rank = 0;
  CHECK_OK(&x, comm_domain_open(&x.c, &x.d, 0));
  CHECK_OK(&x, comm_domain_attach(&x.c, 1));
  comm_task_begin(&x.c, 1, 1ull << me);
  x.k.env = &x.c;
  pto_tensor cells = win(&x, "cells", PTO_I64, 64), c = cell_at(&cells, 5);
  CHECK_OK(&x, pto_notify(&x.k, 1, 0, &c, PTO_SIGNAL_ADD, 3));
  CHECK_OK(&x, pto_signal_wait(&x.k, 1, &c, PTO_CMP_EQ, 3, -1));
  comm_fini(&x.c, true);
  if (me == 0 && !failures) printf("selfinit: pto initialised MPI with MPI_THREAD_MULTIPLE\n");
  return failures ? 1 : 0; /* pto finalises MPI at exit */
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ops";
  /* every wait must end by a wake-up, not a parked waiter's re-check */
  if (strcmp(mode, "put_wake") == 0) setenv("PTO_PARK_MAX_MS", "10000", 0);
  if (strcmp(mode, "selfinit") != 0) {
    int provided;
    int want = strcmp(mode, "single") == 0 ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
    MPI_Init_thread(&argc, &argv, want, &provided);
  }
  if (strcmp(mode, "selfinit") == 0 || strcmp(mode, "single") == 0) return init_modes(mode);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (np > (strcmp(mode, "repro") == 0 ? 8 : 4)) {
    if (me == 0) fprintf(stderr, "run with -np 2..4 (repro: 2..8)\n");
    MPI_Finalize();
    return 2;
  }
  int rc = 0;
  if (strcmp(mode, "ops") == 0) {
    for (int shared = 1; shared >= 0; shared--) {
      for (int fault = 0; fault <= 1; fault++) {
        store_notify_wait(fault, shared);
        views_load_barrier(fault, shared);
        threads(fault, shared);
      }
    }
    setenv("PTO_MPI_SHARED_WINDOWS", "1", 1);
    atomic_adds(false);
    atomic_adds(true);
    setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
    atomic_adds(false);
    for (int shared = 1; shared >= 0; shared--) {
      add_beside_put(shared, PTO_F16);
      add_beside_put(shared, PTO_BF16);
    }
    setenv("PTO_MPI_SHARED_WINDOWS", "0", 1);
    stale_signal();
    setenv("PTO_MPI_SHARED_WINDOWS", "1", 1);
    stale_signal();
    sub_domain();
  } else if (strcmp(mode, "put_wake") == 0) {
    setenv("PTO_MPI_SHARED_WINDOWS", "1", 1);
    put_wake();
  } else if (strcmp(mode, "coll") == 0) {
    collectives(false);
    collectives(true);
    coll_threads();
  } else if (strcmp(mode, "repro") == 0) {
    reproducible();
  } else if (strcmp(mode, "coll_path") == 0) {
    coll_path(true);
    coll_path(false);
    coll_switch(true);
    coll_switch(false);
    record_bounds();
  } else if (strcmp(mode, "put_path") == 0) {
    put_path(argc > 2 ? argv[2] : "rdma");
  } else if (strcmp(mode, "exchange_error") == 0) {
    exchange_error();
  } else if (strcmp(mode, "coll_path_far") == 0) {
    coll_path_far();
  } else if (strcmp(mode, "sharers") == 0) {
    rc = sharers();
  } else if (strcmp(mode, "coll_missing") == 0) {
    rc = coll_missing(false) | coll_missing(true);
  } else if (strcmp(mode, "coll_stale") == 0) {
    rc = coll_stale();
  } else if (strcmp(mode, "coll_late") == 0) {
    rc = coll_late(false) | coll_late(true);
  } else if (strcmp(mode, "coll_frozen") == 0 || strcmp(mode, "coll_frozen_cancel") == 0) {
    /* no MPI_Finalize: a request stays in flight */
    _exit(coll_frozen(strcmp(mode, "coll_frozen_cancel") == 0));
  } else if (strcmp(mode, "coll_die") == 0 || strcmp(mode, "coll_die_pair") == 0 ||
             strcmp(mode, "coll_stuck") == 0 || strcmp(mode, "ops_stuck") == 0) {
    rc = strcmp(mode, "coll_die") == 0        ? coll_die()
         : strcmp(mode, "coll_die_pair") == 0 ? coll_die_pair()
         : strcmp(mode, "coll_stuck") == 0    ? coll_stuck()
                                              : ops_stuck();
    fflush(stdout);
    _exit(rc); /* no MPI_Finalize: a peer is gone */
  } else if (strcmp(mode, "open") == 0) {
    /* opening a domain of every rank: rank 0 says how it went */
    pto_window_buffer b[1] = {{"cells", 64 * 8}};
    dom x = {.expect_open_failure = true};
    dom_open(&x, 85, world4, np, b, 1, false, 1);
    if (me == 0) printf("open: %s: %s\n", pto_status_name(x.open_rc), x.open_why);
    dom_close(&x);
    /* a refused window asks the MPI tool interface which one-sided
     * components the job allows; Open MPI 4.1's MPI_T_init_thread then set
     * the level MPI_Query_thread reports to the one it was asked for, and
     * the backend, which needs MPI_THREAD_MULTIPLE, refused every later
     * domain */
    int level = -1;
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_MULTIPLE)
      FAIL("after the open: MPI_Query_thread says thread level %d, expected "
           "MPI_THREAD_MULTIPLE (%d)",
           level, MPI_THREAD_MULTIPLE);
  } else if (strcmp(mode, "lazy_window") == 0) {
    lazy_window();
  } else if (strcmp(mode, "map_errors") == 0) {
    rc = map_errors();
  } else if (strcmp(mode, "left_behind") == 0) {
    rc = left_behind();
    _exit(rc); /* no MPI_Finalize: a window was left behind */
  } else if (strcmp(mode, "die") == 0) {
    rc = die();
    fflush(stdout);
    _exit(rc); /* no MPI_Finalize: a peer is gone */
  } else {
    if (me == 0) fprintf(stderr, "unknown mode '%s'\n", mode);
    rc = 2;
  }
  int any = 0;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0)
    printf("%s on %d ranks: %s (%d failed checks)\n", mode, np, any ? "FAILED" : "ok", any);
  MPI_Finalize();
  return rc ? rc : any ? 1 : 0;
}
