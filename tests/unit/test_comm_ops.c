/* test_comm_ops.c — the in-kernel operations on a 2-rank shm domain driven
 * from plain threads of one process (no chip, no node): store/notify/wait,
 * bounds and argument checks that write nothing, atomic adds per dtype,
 * epoch-tagged signal reuse, put/get chunking, barrier, the ordering
 * fault injection (stores held until notify, landing out of order), and
 * transfers of a rank to itself whose views overlap. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm_fixture.h"

#include "comm/comm.h"
#include "comm/fault.h"
#include "common/clock.h"
#include "pto/comm.h"

#define SPACE (64u << 20)

static void setup_dom(fixture *f, bool fault, uint64_t seed) {
  pto_window_buffer bufs[] = {{"dst", 64 * 4}, {"sig", 8 * 8}, {"mat", 8 * 128 * 4}, {"small", 16}};
  comm_fixture_reserve(f, SPACE, bufs, 4, 7);
  f->d.fault_inject = fault;
  f->d.fault_seed = seed;
  comm_fixture_open(f, 't', 1);
}

static void teardown_dom(fixture *f) { comm_fixture_close(f); }

static void win(fixture *f, int rank, const char *name, pto_dtype dt, int nd, const int64_t *sh,
                pto_tensor *t) {
  assert_int_equal(pto_comm_window_tensor(&f->c[0], 7, rank, name, dt, nd, sh, t), 0);
}

typedef struct ring_arg {
  fixture *f;
  int r;
  float in[64], out[64];
  int rc;
} ring_arg;

static void *ring_rank(void *p) {
  ring_arg *a = p;
  fixture *f = a->f;
  int64_t n64 = 64, one = 1;
  pto_tensor src, dst, sig, mine;
  pto_tensor_init(&src, a->in, sizeof a->in, PTO_F32, 1, &n64);
  win(f, a->r, "dst", PTO_F32, 1, &n64, &dst); /* my own copy: symmetric offsets */
  win(f, a->r, "sig", PTO_I64, 1, &one, &sig);
  int peer = (a->r + 1) % 2;
  a->rc = pto_remote_store(&f->k[a->r], 7, peer, &dst, &src);
  if (!a->rc) a->rc = pto_notify(&f->k[a->r], 7, peer, &sig, PTO_SIGNAL_ADD, 1);
  if (!a->rc) a->rc = pto_signal_wait(&f->k[a->r], 7, &sig, PTO_CMP_GE, 1, -1);
  win(f, a->r, "dst", PTO_F32, 1, &n64, &mine);
  memcpy(a->out, mine.buf, sizeof a->out);
  return NULL;
}

static void ring(bool fault, uint64_t seed) {
  fixture f;
  setup_dom(&f, fault, seed);
  ring_arg a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r].f = &f;
    a[r].r = r;
    for (int i = 0; i < 64; i++)
      a[r].in[i] = (float)(100 * r + i);
    pthread_create(&th[r], NULL, ring_rank, &a[r]);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(a[r].rc, 0);
    for (int i = 0; i < 64; i++)
      assert_true(a[r].out[i] == a[(r + 1) % 2].in[i]);
  }
  teardown_dom(&f);
}

static void test_ring_threads(void **s) {
  (void)s;
  ring(false, 0);
  for (uint64_t seed = 1; seed <= 3; seed++)
    ring(true, seed);
}

static void test_bounds_write_nothing(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  float v[80];
  for (int i = 0; i < 80; i++)
    v[i] = 1.0f;
  int64_t n80 = 80, n64 = 64, n8 = 8;
  pto_tensor src, dst, big, peerdst;
  pto_tensor_init(&src, v, sizeof v, PTO_F32, 1, &n80);
  win(&f, 0, "dst", PTO_F32, 1, &n64, &dst);
  /* a view running past the end of "dst" into the next buffer */
  big = dst;
  big.shape[0] = 80;
  big.buf_bytes = 80 * 4;
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &big, &src), PTO_EBOUNDS);
  char det[384];
  assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), PTO_EBOUNDS);
  assert_non_null(strstr(det, "domain 7"));
  win(&f, 1, "dst", PTO_F32, 1, &n64, &peerdst);
  for (int i = 0; i < 64; i++)
    assert_true(((float *)peerdst.buf)[i] == 0.0f);
  /* peer outside the domain */
  pto_tensor s8;
  pto_tensor_init(&s8, v, 32, PTO_F32, 1, &n8);
  pto_tensor d8 = dst;
  d8.shape[0] = 8;
  assert_int_equal(pto_remote_store(&f.k[0], 7, 2, &d8, &s8), PTO_EPEER);
  assert_int_equal(pto_remote_store(&f.k[0], 7, -1, &d8, &s8), PTO_EPEER);
  assert_int_equal(pto_remote_store(&f.k[0], 99, 1, &d8, &s8), PTO_EINVAL);
  /* a host buffer is no window */
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &s8, &s8), PTO_EBOUNDS);
  /* mistyped atomic: u8 */
  uint8_t b8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  pto_tensor su8, du8;
  pto_tensor_init(&su8, b8, 8, PTO_U8, 1, &n8);
  win(&f, 0, "small", PTO_U8, 1, &n8, &du8);
  assert_int_equal(pto_remote_store_add(&f.k[0], 7, 1, &du8, &su8), PTO_EALIGN);
  /* unaligned atomic: an f32 view starting at byte 1 of "small" */
  pto_tensor mis = du8, smis;
  mis.buf = (char *)du8.buf + 1;
  mis.dtype = PTO_F32;
  mis.shape[0] = 2;
  mis.buf_bytes = 8;
  pto_tensor_init(&smis, v, 8, PTO_F32, 1, (int64_t[]){2});
  assert_int_equal(pto_remote_store_add(&f.k[0], 7, 1, &mis, &smis), PTO_EALIGN);
  /* dtype mismatch */
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &du8, &s8), PTO_EINVAL);
  /* a signal cell must be int64 */
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &dst, PTO_SIGNAL_ADD, 1), PTO_EALIGN);
  pto_tensor small_peer;
  win(&f, 1, "small", PTO_U8, 1, &n8, &small_peer);
  for (int i = 0; i < 8; i++)
    assert_int_equal(((uint8_t *)small_peer.buf)[i], 0);
  teardown_dom(&f);
}

static uint16_t f2h(float x) { /* exact small integers only */
  if (x == 0) return 0;
  int e = 0;
  float m = x;
  while (m >= 2) {
    m /= 2;
    e++;
  }
  return (uint16_t)((e + 15) << 10 | (uint16_t)((m - 1) * 1024));
}

static void test_atomic_add_dtypes(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  int64_t n4 = 4;
  const pto_dtype dts[] = {PTO_F32, PTO_F16, PTO_BF16, PTO_I32, PTO_I16, PTO_I8};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    pto_dtype dt = dts[k];
    unsigned char src[16], got[16];
    for (int i = 0; i < 4; i++) {
      int v = 3 + i;
      switch (dt) {
      case PTO_F32: {
        float x = (float)v;
        memcpy(src + 4 * i, &x, 4);
        break;
      }
      case PTO_F16: {
        uint16_t h = f2h((float)v);
        memcpy(src + 2 * i, &h, 2);
        break;
      }
      case PTO_BF16: {
        float x = (float)v;
        uint32_t u;
        memcpy(&u, &x, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(src + 2 * i, &h, 2);
        break;
      }
      case PTO_I32: {
        int32_t x = v;
        memcpy(src + 4 * i, &x, 4);
        break;
      }
      case PTO_I16: {
        int16_t x = (int16_t)v;
        memcpy(src + 2 * i, &x, 2);
        break;
      }
      default: {
        int8_t x = (int8_t)v;
        memcpy(src + i, &x, 1);
        break;
      }
      }
    }
    pto_tensor ts, td;
    pto_tensor_init(&ts, src, sizeof src, dt, 1, &n4);
    win(&f, 0, "mat", dt, 1, &n4, &td);
    pto_tensor peer;
    win(&f, 1, "mat", dt, 1, &n4, &peer);
    memset(peer.buf, 0, 16);
    for (int rep = 0; rep < 3; rep++)
      assert_int_equal(pto_remote_store_add(&f.k[0], 7, 1, &td, &ts), 0);
    memcpy(got, peer.buf, 16);
    for (int i = 0; i < 4; i++) {
      int want = 3 * (3 + i);
      switch (dt) {
      case PTO_F32: {
        float x;
        memcpy(&x, got + 4 * i, 4);
        assert_true(x == (float)want);
        break;
      }
      case PTO_F16: {
        uint16_t h;
        memcpy(&h, got + 2 * i, 2);
        assert_int_equal(h, f2h((float)want));
        break;
      }
      case PTO_BF16: {
        uint16_t h;
        memcpy(&h, got + 2 * i, 2);
        uint32_t u = (uint32_t)h << 16;
        float x;
        memcpy(&x, &u, 4);
        assert_true(x == (float)want);
        break;
      }
      case PTO_I32: {
        int32_t x;
        memcpy(&x, got + 4 * i, 4);
        assert_int_equal(x, want);
        break;
      }
      case PTO_I16: {
        int16_t x;
        memcpy(&x, got + 2 * i, 2);
        assert_int_equal(x, want);
        break;
      }
      default: assert_int_equal((int8_t)got[i], want);
      }
    }
  }
  teardown_dom(&f);
}

static void test_signal_epochs_and_timeout(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  int64_t one = 1;
  pto_tensor sig;
  win(&f, 0, "sig", PTO_I64, 1, &one, &sig);
  int32_t v;
  for (uint32_t epoch = 1; epoch <= 3; epoch++) {
    comm_task_begin(&f.c[0], epoch, 3);
    comm_task_begin(&f.c[1], epoch, 3);
    assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
    assert_int_equal(v, 0); /* last epoch's credits are invisible */
    for (int i = 0; i < 4; i++)
      assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, 1), 0);
    assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, PTO_CMP_GE, 4, 100), 0);
    assert_int_equal(pto_notify(&f.k[1], 7, 1, &sig, PTO_SIGNAL_ADD, -4), 0);
    assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_SET, (int32_t)epoch), 0);
    assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, PTO_CMP_EQ, (int32_t)epoch, 100), 0);
  }
  /* a late signal of an older epoch is dropped */
  comm_task_begin(&f.c[0], 2, 3);
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, 5), 0);
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
  assert_int_equal(v, 3);
  /* a wait that times out names domain, rank, cell, expected and seen */
  comm_task_begin(&f.c[1], 4, 3);
  assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, PTO_CMP_GE, 2, 30), PTO_EWAIT_TIMEOUT);
  char det[384];
  assert_int_equal(comm_task_error(&f.c[1], det, sizeof det), PTO_EWAIT_TIMEOUT);
  assert_non_null(strstr(det, "domain 7 rank 1 cell sig[0]"));
  assert_non_null(strstr(det, ">= 2, saw 0"));
  teardown_dom(&f);
}

/* A put wakes no one itself (a tenth of a small put + quiet was its
 * wake's fence): a wait on a word that a put wrote sees it at the
 * writer's quiet, which wakes the peers' waiters once its fence has
 * completed the stores. Rank 1 parks on its cell; rank 0 copies a value
 * of its own cell (a valid signal word of this task) into rank 1's cell
 * with a put, then quiets. With parks of up to 10 s (main), a quiet that
 * woke no one left the wait to its 5-s deadline, where it found the value
 * and returned 0 (5000.2 ms). The put races the waiter's loads by design
 * (a plain store into a word a peer reads): TSan reports it, so there
 * the test does not run. */
#if !defined(__SANITIZE_THREAD__)
typedef struct put_waiter {
  fixture *f;
  int rc;
  uint64_t waited_ns;
} put_waiter;

static void *put_waiter_rank1(void *p) {
  put_waiter *a = p;
  int64_t one = 1;
  pto_tensor sig;
  win(a->f, 1, "sig", PTO_I64, 1, &one, &sig);
  uint64_t t0 = pto_now_ns();
  a->rc = pto_signal_wait(&a->f->k[1], 7, &sig, PTO_CMP_EQ, 42, 5000);
  a->waited_ns = pto_now_ns() - t0;
  return NULL;
}

#endif

static void test_put_lands_for_waiter_at_quiet(void **s) {
  (void)s;
#if defined(__SANITIZE_THREAD__)
  print_message("not run under TSan: its put races the waiter by design\n");
#else
  fixture f;
  setup_dom(&f, false, 0);
  int64_t one = 1;
  pto_tensor mine, theirs;
  win(&f, 0, "sig", PTO_I64, 1, &one, &mine);
  win(&f, 1, "sig", PTO_I64, 1, &one, &theirs);
  assert_int_equal(pto_notify(&f.k[0], 7, 0, &mine, PTO_SIGNAL_SET, 42), 0);
  put_waiter a = {&f, -1, 0};
  pthread_t th;
  pthread_create(&th, NULL, put_waiter_rank1, &a);
  usleep(100 * 1000); /* past its spin and yield: parked */
  int put = pto_put(&f.k[0], 7, 1, &theirs, &mine, NULL);
  int quiet = put ? put : pto_quiet(&f.k[0], 7);
  pthread_join(th, NULL); /* before any assertion: the waiter uses f */
  assert_int_equal(put, 0);
  assert_int_equal(quiet, 0);
  assert_int_equal(a.rc, 0);
  if (a.waited_ns > 2500 * 1000000ull)
    fail_msg("the wait ended %.1f ms after it began; the put and quiet came at 100 ms",
             (double)a.waited_ns / 1e6);
  teardown_dom(&f);
#endif
}

/* A get from a peer lands my earlier stores to it first (pto/comm.h): the
 * store-buffering litmus test. Words A and B lie in rank 1's window. Each
 * round, rank 0 puts 1 into A, then gets B; rank 1 puts 1 into B, then
 * gets A; both reading 0 would mean a get passed its own rank's put, the
 * put's store still in the CPU's store buffer. The rounds start together
 * (a spin barrier), and rank 1 zeroes the words between rounds. TSan
 * reports the rounds' concurrent plain accesses of A and B as races, as
 * they are by design: there it runs none. Without the fence in the get
 * (shm_get), 1-6 of the 400000 rounds read 0 on both ranks, in each of 5
 * runs. */
#define SB_ROUNDS 400000
#if !defined(__SANITIZE_THREAD__)
typedef struct sb_arg {
  fixture *f;
  int r;
  _Atomic int *arrived;
  uint8_t got[SB_ROUNDS];
  int rc;
} sb_arg;

/* Spins, and yields the CPU after a while: on a CPU shared with the other
 * rank (one CPU, or another test's load) a pure spin would wait out a
 * whole time slice at each of the 800 000 barriers. */
static void sb_barrier(_Atomic int *arrived, int *k) {
  atomic_fetch_add(arrived, 1);
  ++*k;
  for (unsigned spins = 0; atomic_load(arrived) < 2 * *k;)
    if (++spins % 1024 == 0) sched_yield();
}

static void *sb_rank(void *p) {
  sb_arg *a = p;
  /* A and B on lines of their own: two words of one line never showed it */
  int64_t n = 32, one = 1, mine = 16 * a->r, other = 16 - mine, v1 = 1, got = -1;
  pto_tensor words, put_w, get_w, src, dst;
  win(a->f, 1, "dst", PTO_I64, 1, &n, &words); /* rank 1's copy: A at 0, B at 128 bytes */
  pto_tensor_slice(&words, &mine, &one, &put_w);
  pto_tensor_slice(&words, &other, &one, &get_w);
  pto_tensor_init(&src, &v1, sizeof v1, PTO_I64, 1, &one);
  pto_tensor_init(&dst, &got, sizeof got, PTO_I64, 1, &one);
  int64_t *ab = (int64_t *)words.buf + words.offset;
  int k = 0;
  uint32_t rng = 0x9e3779b9u * (uint32_t)(a->r + 1);
  /* every round's barriers, also after a failed op: a rank that left
   * would keep the other spinning in its barrier */
  for (int i = 0; i < SB_ROUNDS; i++) {
    sb_barrier(a->arrived, &k);
    /* one rank leaves the barrier first: a random pause of either lets
     * their puts and gets overlap in some rounds */
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    for (volatile uint32_t d = rng % 256; d > 0; d--) {
    }
    if (!a->rc) a->rc = pto_put(&a->f->k[a->r], 7, 1, &put_w, &src, NULL);
    if (!a->rc) a->rc = pto_get(&a->f->k[a->r], 7, 1, &dst, &get_w, NULL);
    a->got[i] = (uint8_t)got;
    sb_barrier(a->arrived, &k);
    if (a->r == 1) ab[0] = ab[16] = 0; /* before the next round's barrier */
  }
  return NULL;
}

#endif

static void test_get_lands_earlier_puts(void **s) {
  (void)s;
#if defined(__SANITIZE_THREAD__)
  print_message("not run under TSan: its rounds race by design\n");
#else
  fixture f;
  setup_dom(&f, false, 0);
  _Atomic int arrived = 0;
  static sb_arg a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r].f = &f;
    a[r].r = r;
    a[r].arrived = &arrived;
    a[r].rc = 0;
    pthread_create(&th[r], NULL, sb_rank, &a[r]);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  assert_int_equal(a[0].rc, 0);
  assert_int_equal(a[1].rc, 0);
  int both_old = 0, first = -1;
  for (int i = 0; i < SB_ROUNDS; i++)
    if (a[0].got[i] == 0 && a[1].got[i] == 0 && both_old++ == 0) first = i;
  if (both_old)
    fail_msg("in %d of %d rounds (the first: %d) both ranks' gets read 0: a get passed its "
             "rank's earlier put",
             both_old, SB_ROUNDS, first);
  teardown_dom(&f);
#endif
}

/* A cell last written 2^31 or more epochs before the current one. Before,
 * sig_next took an epoch more than 2^31 after the cell's for an older one
 * (the difference read as a negative int32): every notify of the current
 * task was dropped as a late signal and its wait timed out. Epochs only
 * grow within a cell's life (a domain lives one node run), so a later
 * epoch is later however far, and a late signal is still dropped. */
static void test_signal_epochs_far_apart(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  int64_t one = 1;
  pto_tensor sig[2]; /* sig[0], sig[1] */
  for (int i = 0; i < 2; i++) {
    win(&f, 0, "sig", PTO_I64, 1, &one, &sig[i]);
    sig[i].buf = (char *)sig[i].buf + 8 * i;
    assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig[i], PTO_SIGNAL_SET, 7), 0); /* epoch 1 */
  }
  int32_t v;
  /* 2^31 + 1 and 2^32 - 2 epochs after the cell's */
  const uint32_t later[] = {(1u << 31) + 2, 0xffffffffu};
  for (int i = 0; i < 2; i++) {
    comm_task_begin(&f.c[0], later[i], 3);
    comm_task_begin(&f.c[1], later[i], 3);
    assert_int_equal(pto_signal_read(&f.k[1], 7, &sig[i], &v), 0);
    assert_int_equal(v, 0); /* the earlier task's credits are invisible */
    assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig[i], PTO_SIGNAL_ADD, 1), 0);
    int rc = pto_signal_wait(&f.k[1], 7, &sig[i], PTO_CMP_GE, 1, 100);
    if (rc) {
      char det[384];
      comm_task_error(&f.c[1], det, sizeof det);
      fail_msg("epoch %u, cell last written at epoch 1: %s: %s", later[i], pto_status_name(rc),
               det);
    }
    assert_int_equal(pto_signal_read(&f.k[1], 7, &sig[i], &v), 0);
    assert_int_equal(v, 1);
  }
  /* a late signal of an epoch far before the cell's is dropped */
  comm_task_begin(&f.c[0], later[0], 3);
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig[1], PTO_SIGNAL_ADD, 5), 0);
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig[1], &v), 0);
  assert_int_equal(v, 1);
  teardown_dom(&f);
}

/* A task without an epoch (epoch 0: one the node started after the last
 * epoch of its run) neither signals, waits, reads a cell nor meets at a
 * barrier: each fails naming why, and the cell stays as it was. Before,
 * epoch 0 came after the 2^32 - 1st node task and was used as any other:
 * a set to 1 wrote the word SIG_OVERFLOW and failed as an overflow, a set
 * to 0 was taken for a dropped signal, other values were written. */
static void test_signal_no_epoch(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  int64_t one = 1;
  pto_tensor sig;
  win(&f, 0, "sig", PTO_I64, 1, &one, &sig);
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_SET, 5), 0); /* epoch 1 */
  comm_task_begin(&f.c[0], 0, 3);
  comm_task_begin(&f.c[1], 0, 3);
  char det[384];
  int32_t v = -1;
  const int32_t sets[] = {2, 1, 0};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_SET, sets[i]), PTO_EINVAL);
    assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), PTO_EINVAL);
    if (!strstr(det, "notify: this node task has no epoch")) fail_msg("details: %s", det);
    comm_task_begin(&f.c[0], 0, 3); /* clears the latched error */
  }
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), PTO_EINVAL);
  assert_int_equal(v, -1);
  assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, PTO_CMP_GE, 0, 30), PTO_EINVAL);
  assert_int_equal(pto_barrier(&f.k[1], 7), PTO_EINVAL);
  assert_int_equal(comm_task_error(&f.c[1], det, sizeof det), PTO_EINVAL);
  if (!strstr(det, "signal_read: this node task has no epoch")) fail_msg("details: %s", det);
  /* the cell is as epoch 1 left it */
  comm_task_begin(&f.c[1], 1, 3);
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
  assert_int_equal(v, 5);
  teardown_dom(&f);
}

static void test_put_get_chunked(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, true, 5);
  static float src[8 * 128], stage[2 * 4 * 64], back[8 * 128];
  for (int i = 0; i < 8 * 128; i++)
    src[i] = (float)i;
  int64_t sh[2] = {8, 128}, st[1] = {2 * 4 * 64};
  pto_tensor ts, td, tst, tb, peer;
  pto_tensor_init(&ts, src, sizeof src, PTO_F32, 2, sh);
  pto_tensor_init(&tst, stage, sizeof stage, PTO_F32, 1, st);
  pto_tensor_init(&tb, back, sizeof back, PTO_F32, 2, sh);
  win(&f, 0, "mat", PTO_F32, 2, sh, &td);
  win(&f, 1, "mat", PTO_F32, 2, sh, &peer);
  pto_xfer_opts o = {4, 64, &tst, false};
  assert_int_equal(pto_put(&f.k[0], 7, 1, &td, &ts, &o), 0);
  assert_int_equal(pto_quiet(&f.k[0], 7), 0);
  assert_memory_equal(peer.buf, src, sizeof src);
  /* get it back in 2x32 chunks through the same staging tile */
  pto_xfer_opts g = {2, 32, &tst, false};
  assert_int_equal(pto_get(&f.k[0], 7, 1, &tb, &td, &g), 0);
  assert_memory_equal(back, src, sizeof src);
  /* a staging tile too small is an argument error, nothing moves */
  pto_tensor tiny = tst;
  tiny.shape[0] = 8;
  pto_xfer_opts bad = {4, 64, &tiny, false};
  assert_int_equal(pto_put(&f.k[0], 7, 1, &td, &ts, &bad), PTO_EINVAL);
  teardown_dom(&f);
}

static void test_fault_injection_holds_and_reorders(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, true, 42);
  int64_t n64 = 64, one = 1;
  float v[64];
  for (int i = 0; i < 64; i++)
    v[i] = (float)(i + 1);
  pto_tensor src, dst, peer, sig, psig;
  pto_tensor_init(&src, v, sizeof v, PTO_F32, 1, &n64);
  win(&f, 0, "dst", PTO_F32, 1, &n64, &dst);
  win(&f, 1, "dst", PTO_F32, 1, &n64, &peer);
  win(&f, 0, "sig", PTO_I64, 1, &one, &sig);
  win(&f, 1, "sig", PTO_I64, 1, &one, &psig);
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &dst, &src), 0);
  /* held back: the peer still sees zeros */
  for (int i = 0; i < 64; i++)
    assert_true(((float *)peer.buf)[i] == 0.0f);
  /* the broken publisher: a plain store into the peer's signal cell is held
   * back too, and lands before the data when the batch lands */
  int64_t word = (int64_t)((uint64_t)1 << 32 | 1);
  pto_tensor wsrc;
  pto_tensor_init(&wsrc, &word, 8, PTO_I64, 1, &one);
  assert_int_equal(pto_remote_store(&f.k[0], 7, 1, &sig, &wsrc), 0);
  assert_int_equal(*(int64_t *)psig.buf, 0);
  /* notify lands everything first */
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, 1), 0);
  for (int i = 0; i < 64; i++)
    assert_true(((float *)peer.buf)[i] == v[i]);
  int32_t seen;
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &seen), 0);
  assert_int_equal(seen, 2);
  teardown_dom(&f);
}

typedef struct land_log {
  uint64_t seq[16];
  int n;
} land_log;
static void log_land(void *arg, const fault_op *op) {
  land_log *l = arg;
  l->seq[l->n++] = op->seq;
}

static void test_fault_order_seeded(void **s) {
  (void)s;
  uint64_t first[16];
  for (int rep = 0; rep < 2; rep++) {
    land_log l = {{0}, 0};
    fault_queue *q;
    assert_int_equal(fault_create(99, log_land, NULL, &l, &q), 0);
    char b = 0;
    for (int i = 0; i < 8; i++)
      assert_int_equal(fault_hold(q, i % 2, FAULT_PUT, PTO_U8, 0, &b, 1), 0);
    fault_flush(q, 1, false); /* only peer 1's four */
    assert_int_equal(l.n, 4);
    assert_int_equal(fault_pending(q), 4);
    bool inverted = false;
    for (int i = 1; i < 4; i++)
      inverted |= l.seq[i - 1] > l.seq[i];
    assert_true(inverted);
    for (int i = 0; i < 4; i++)
      assert_int_equal(l.seq[i] % 2, 1);
    fault_flush(q, -1, false);
    assert_int_equal(l.n, 8);
    if (rep == 0)
      memcpy(first, l.seq, sizeof first);
    else
      assert_memory_equal(first, l.seq, 8 * sizeof(uint64_t)); /* same seed, same order */
    fault_destroy(q);
  }
}

typedef struct bar_arg {
  fixture *f;
  int r;
  int rc;
} bar_arg;
static void *bar_rank(void *p) {
  bar_arg *a = p;
  for (int i = 0; i < 50 && !a->rc; i++)
    a->rc = pto_barrier(&a->f->k[a->r], 7);
  return NULL;
}

static void test_barrier(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  bar_arg a[2] = {{&f, 0, 0}, {&f, 1, 0}};
  pthread_t th[2];
  for (int r = 0; r < 2; r++)
    pthread_create(&th[r], NULL, bar_rank, &a[r]);
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  assert_int_equal(a[0].rc, 0);
  assert_int_equal(a[1].rc, 0);
  /* alone, a barrier times out and says who is missing */
  f.d.wait_timeout_ms = 30;
  comm_find(&f.c[0], 7)->desc.wait_timeout_ms = 30;
  assert_int_equal(pto_barrier(&f.k[0], 7), PTO_EWAIT_TIMEOUT);
  char det[384];
  comm_task_error(&f.c[0], det, sizeof det);
  assert_non_null(strstr(det, "rank 1 is at barrier 50"));
  teardown_dom(&f);
}

/* Signal arguments outside their enums or ranges fail naming them, before
 * anything is read or written. */
static void test_signal_bad_args(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  int64_t one = 1;
  pto_tensor sig;
  win(&f, 0, "sig", PTO_I64, 1, &one, &sig);
  char det[384];
  /* an unknown compare op: before, treated as >= (a wait for 0 returned 0) */
  assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, (pto_cmp)2, 0, 30), PTO_EINVAL);
  assert_int_equal(comm_task_error(&f.c[1], det, sizeof det), PTO_EINVAL);
  assert_non_null(strstr(det, "unknown compare op 2"));
  assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, (pto_cmp)-1, 0, 30), PTO_EINVAL);
  /* an add past the cell's 32-bit value: before, it wrapped (INT32_MAX + 1
   * read INT32_MIN) and the notify returned 0 */
  int32_t v = 0;
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_SET, INT32_MAX), 0);
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, 1), PTO_EINVAL);
  assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), PTO_EINVAL);
  assert_non_null(strstr(det, "overflows"));
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
  assert_int_equal(v, INT32_MAX); /* left as it was */
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_SET, INT32_MIN), 0);
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, -1), PTO_EINVAL);
  assert_int_equal(pto_signal_read(&f.k[1], 7, &sig, &v), 0);
  assert_int_equal(v, INT32_MIN);
  /* the extremes themselves are values like any other */
  assert_int_equal(pto_notify(&f.k[0], 7, 1, &sig, PTO_SIGNAL_ADD, INT32_MAX), 0);
  assert_int_equal(pto_signal_wait(&f.k[1], 7, &sig, PTO_CMP_EQ, -1, 30), 0);
  teardown_dom(&f);
}

/* ---- own-rank transfers whose views overlap ----
 * A put/store/get/load from a rank to itself may name a local tile that
 * shares bytes with the window region (both in its own window). It moves
 * as if the whole source were read before any byte of dst is written: the
 * result of a shift by one element either way. 4096 floats (16 KiB): large
 * enough that glibc's memcpy takes its forward/backward loops, which cope
 * with overlap; ASan's memcpy-param-overlap check does not. */
#define OWN_N 4096

static void setup_own(fixture *f) {
  pto_window_buffer bufs[] = {{"big", (OWN_N + 64) * 4}};
  comm_fixture_reserve(f, SPACE, bufs, 1, 7);
  comm_fixture_open(f, 'o', 1);
}

/* Rank 0's copy of "big" refilled with big[i] = i; its first n elements
 * as a 1-D view starting at element `at`. */
static float *own_fill(fixture *f, int64_t at, int64_t n, pto_tensor *t) {
  int64_t all = OWN_N + 64;
  win(f, 0, "big", PTO_F32, 1, &all, t);
  float *b = t->buf;
  for (int64_t i = 0; i < all; i++)
    b[i] = (float)i;
  t->shape[0] = n;
  t->offset = at;
  return b;
}

/* big[at + i] == i + from for i in [0, OWN_N), big[i] == i elsewhere */
static void own_shifted(const float *b, int64_t at, int64_t from) {
  for (int64_t i = 0; i < OWN_N + 64; i++) {
    float want = i >= at && i < at + OWN_N ? (float)(i - at + from) : (float)i;
    if (b[i] != want) fail_msg("big[%lld] = %g, want %g", (long long)i, b[i], want);
  }
}

typedef enum own_op { OWN_PUT, OWN_STORE, OWN_GET, OWN_LOAD } own_op;

/* dst = big[d, d + OWN_N), src = big[s, s + OWN_N), rank 0 to itself */
static void own_shift(fixture *f, own_op op, int64_t d, int64_t s) {
  pto_tensor dst, src;
  own_fill(f, d, OWN_N, &dst);
  float *b = own_fill(f, s, OWN_N, &src); /* the same buffer: refilled alike */
  int rc = op == OWN_PUT     ? pto_put(&f->k[0], 7, 0, &dst, &src, NULL)
           : op == OWN_STORE ? pto_remote_store(&f->k[0], 7, 0, &dst, &src)
           : op == OWN_GET   ? pto_get(&f->k[0], 7, 0, &dst, &src, NULL)
                             : pto_remote_load(&f->k[0], 7, 0, &dst, &src);
  assert_int_equal(rc, 0);
  assert_int_equal(pto_quiet(&f->k[0], 7), 0);
  own_shifted(b, d, s);
}

static void test_own_rank_overlap(void **s) {
  (void)s;
  fixture f;
  setup_own(&f);
  /* one element forward (dst above src) and back, every op: one run each.
   * Before, put and store went to the backend's memcpy with overlapping
   * buffers (get and load too): right under glibc, memcpy-param-overlap
   * under ASan */
  for (own_op op = OWN_PUT; op <= OWN_LOAD; op++) {
    own_shift(&f, op, 1, 0);
    own_shift(&f, op, 0, 1);
  }
  /* strided views (63 x 32 of a 64 x 64 matrix), dst a row below src: one
   * run per row. Before, row r + 1 was written before it was read as src
   * row r + 1: every row got row 0 */
  pto_tensor dst, src;
  int64_t all = OWN_N + 64;
  float *b = own_fill(&f, 0, all, &src);
  pto_tensor_init(&src, b, (size_t)all * 4, PTO_F32, 2, (int64_t[]){63, 64});
  src.shape[1] = 32; /* strides stay {64, 1} */
  dst = src;
  dst.offset = 64;
  assert_int_equal(pto_remote_store(&f.k[0], 7, 0, &dst, &src), 0);
  for (int64_t i = 0; i < all; i++) {
    float want = i >= 64 && i < 64 * 64 && i % 64 < 32 ? (float)(i - 64) : (float)i;
    if (b[i] != want) fail_msg("strided: big[%lld] = %g, want %g", (long long)i, b[i], want);
  }
  /* an atomic add adds the source as it was: big[i] += old big[i - 1].
   * Before, each element added its neighbour's new sum (a prefix sum) */
  own_fill(&f, 1, OWN_N, &dst);
  b = own_fill(&f, 0, OWN_N, &src);
  assert_int_equal(pto_remote_store_add(&f.k[0], 7, 0, &dst, &src), 0);
  for (int64_t i = 0; i < all; i++) {
    float want = i >= 1 && i <= OWN_N ? (float)(2 * i - 1) : (float)i;
    if (b[i] != want) fail_msg("add: big[%lld] = %g, want %g", (long long)i, b[i], want);
  }
  /* chunked through a staging tile: before, chunk 1 read src bytes that
   * chunk 0 had written */
  static float stage[512];
  pto_tensor tst;
  pto_tensor_init(&tst, stage, sizeof stage, PTO_F32, 1, (int64_t[]){512});
  pto_xfer_opts o = {0, 256, &tst, false};
  own_fill(&f, 1, OWN_N, &dst);
  b = own_fill(&f, 0, OWN_N, &src);
  assert_int_equal(pto_put(&f.k[0], 7, 0, &dst, &src, &o), 0);
  own_shifted(b, 1, 0);
  own_fill(&f, 0, OWN_N, &dst);
  b = own_fill(&f, 1, OWN_N, &src);
  assert_int_equal(pto_get(&f.k[0], 7, 0, &dst, &src, &o), 0);
  own_shifted(b, 0, 1);
  teardown_dom(&f);
}

/* A staging tile that shares bytes with the local tile is refused, naming
 * both: each chunk's copy into it would overwrite data still to move. */
static void test_staging_overlap_refused(void **s) {
  (void)s;
  fixture f;
  setup_dom(&f, false, 0);
  static float src[8 * 128];
  int64_t sh[2] = {8, 128};
  pto_tensor ts, td, tst, peer;
  pto_tensor_init(&ts, src, sizeof src, PTO_F32, 2, sh);
  pto_tensor_init(&tst, src + 256, 512 * 4, PTO_F32, 1, (int64_t[]){512});
  win(&f, 0, "mat", PTO_F32, 2, sh, &td);
  win(&f, 1, "mat", PTO_F32, 2, sh, &peer);
  for (int i = 0; i < 8 * 128; i++)
    src[i] = (float)i + 1;
  pto_xfer_opts o = {4, 64, &tst, false};
  assert_int_equal(pto_put(&f.k[0], 7, 1, &td, &ts, &o), PTO_EINVAL);
  char det[384];
  assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), PTO_EINVAL);
  assert_non_null(strstr(det, "put: staging tile overlaps src (local)"));
  for (int i = 0; i < 8 * 128; i++)
    assert_true(((float *)peer.buf)[i] == 0.0f); /* nothing moved */
  /* to my own rank, a staging tile in the window region itself */
  comm_task_begin(&f.c[0], 2, 3); /* clears the error latched above */
  pto_tensor_init(&tst, td.buf, 512 * 4, PTO_F32, 1, (int64_t[]){512});
  pto_tensor_init(&ts, src, sizeof src, PTO_F32, 2, sh);
  assert_int_equal(pto_put(&f.k[0], 7, 0, &td, &ts, &o), PTO_EINVAL);
  assert_int_equal(comm_task_error(&f.c[0], det, sizeof det), PTO_EINVAL);
  assert_non_null(strstr(det, "put: staging tile overlaps dst:"));
  for (int i = 0; i < 8 * 128; i++)
    assert_true(((float *)td.buf)[i] == 0.0f);
  teardown_dom(&f);
}

int main(void) {
  /* every wait here must end by a wake-up (as under park10s), not by a
   * parked waiter's periodic re-check: test_put_lands_for_waiter_at_quiet */
  setenv("PTO_PARK_MAX_MS", "10000", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_threads),
      cmocka_unit_test(test_bounds_write_nothing),
      cmocka_unit_test(test_atomic_add_dtypes),
      cmocka_unit_test(test_signal_epochs_and_timeout),
      cmocka_unit_test(test_signal_epochs_far_apart),
      cmocka_unit_test(test_put_lands_for_waiter_at_quiet),
      cmocka_unit_test(test_get_lands_earlier_puts),
      cmocka_unit_test(test_signal_no_epoch),
      cmocka_unit_test(test_put_get_chunked),
      cmocka_unit_test(test_fault_injection_holds_and_reorders),
      cmocka_unit_test(test_fault_order_seeded),
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_signal_bad_args),
      cmocka_unit_test(test_own_rank_overlap),
      cmocka_unit_test(test_staging_overlap_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
