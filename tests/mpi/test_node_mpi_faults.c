/* test_node_mpi_faults.c — a node under mpirun when something is wrong.
 *
 *   refusals : (exit 0 when every check holds) a chip function that no other
 *              rank can find, a node wider than the ranks mpirun started and
 *              a chip_init_arg on the heap are refused with PTO_EINVAL naming
 *              them; then a ring shuffle on the same node still runs.
 *   kill     : chip 1's kernel kills its own process (SIGKILL) mid-task.
 *   stop     : chip 1's kernel stops its own process (SIGSTOP) mid-task.
 *   single   : (exit 0 when the check holds) the program initialised MPI
 *              with MPI_THREAD_SINGLE: pto_node_create fails on every rank
 *              with PTO_EMPI naming the thread level it needs.
 *   exit, _exit, root_exit : (-np 3) three chips run ring allreduces of
 *              1 Mi f32 in one kernel, back to back; chip 1 calls exit(3)
 *              or _exit(3) in its third (root_exit: chip 0, a thread of
 *              rank 0, calls _exit(3): rank 0's process is gone), while the
 *              other chips wait in theirs for its data (run
 *              with orte_abort_on_non_zero_status 0, so that mpirun does
 *              not end the job itself; PTO_MPI_SHARED_WINDOWS=0: the
 *              domain's windows are MPI RMA windows instead of shared memory).
 *   kill_late : (-np 3) as exit, but chip 1 raises SIGKILL, and the node's
 *              deadlines are long (control_timeout_ms 30 s, wait_timeout_ms
 *              40 s): rank 0 must still name it at once. Before, its chip
 *              0's thread, stopped, waited for the dead rank at the
 *              window's collective release (MPI_Win_free), or inside an
 *              MPI call to it, and the run ended after 30 s.
 *   root_kill : (-np 3) as exit, but chip 0 (a thread of rank 0) raises
 *              SIGKILL at the entry of its kernel, while rank 0's relay may
 *              still be sending the task's frames (5.6 KiB: a rendezvous
 *              rank 0 must live to complete) to ranks 1 and 2; they name
 *              rank 0 gone and end the job (a blocking receive of a frame
 *              rank 0 had begun to send once waited there for ever).
 *   coll_frozen, coll_frozen_rank : (PTO_MPI_SHARED_WINDOWS=0: the
 *              domain on MPI's collectives) chip 0's kernel (a thread of
 *              rank 0; coll_frozen_rank: chip 1's, rank 1) calls the MPI
 *              backend's allreduce directly with a 1 ms deadline, the other
 *              chip's kernel never calls: the caller ends the job after
 *              PTO_MPI_COLL_GRACE_MS, and the run's objects go first (the
 *              comm layer's job-end hook: before it, rank 0's MPI_Abort left
 *              the node's host memory object in 2 runs of 3).
 * kill, stop, exit, _exit and coll_frozen* are checked by rank_fault.sh:
 * the job ends within the deadline, naming rank 1 (or the collective),
 * and leaves no process or object behind. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "comm/comm.h"
#include "pto/coll.h"
#include "pto/comm.h"
#include "pto/node.h"
#include "small_node.h"

#define DEV0 116 /* device ids of this program: 116, 117 (and 120 for a third chip) */

static int k_fault = -1, k_ring = -1, k_die = -1, k_frozen = -1;
/* 0 refusals, 1 kill, 2 stop, 3 exit, 4 _exit, 5 root_exit, 6 root_kill, 7 kill_late,
 * 8 coll_frozen, 9 coll_frozen_rank */
static int mode;

#define DIE_COUNT  (1 << 20) /* f32 per allreduce */
#define DIE_ROUNDS 6         /* allreduces per kernel; chip 1 leaves in the third */

static int fault_kernel(const pto_kctx *ctx) {
  pto_comm *c = pto_kctx_comm(ctx);
  if (pto_comm_chip(c) == 1) raise(mode == 1 ? SIGKILL : SIGSTOP);
  return 0;
}

/* rank r stores its 4 floats into its peer's "dst", notifies, waits */
static int ring_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)ctx->scalars[0];
  const pto_tensor *in = &ctx->tensors[0], *dst = &ctx->tensors[1], *sig = &ctx->tensors[2];
  int peer = (pto_comm_rank(pto_kctx_comm(ctx), dom) + 1) % 2;
  int rc = pto_remote_store(ctx, dom, peer, dst, in);
  if (!rc) rc = pto_notify(ctx, dom, peer, sig, PTO_SIGNAL_ADD, 1);
  if (!rc) rc = pto_signal_wait(ctx, dom, sig, PTO_CMP_GE, 1, -1);
  if (!rc) memcpy(ctx->tensors[3].buf, dst->buf, 4 * sizeof(float));
  return rc;
}

/* tensors: this rank's scratch, src, dst (its own window); scalar: the domain.
 * The victim (chip 1; chip 0 in root_exit) leaves in its third allreduce. */
static int die_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)ctx->scalars[0];
  const pto_tensor *scratch = &ctx->tensors[0], *src = &ctx->tensors[1], *dst = &ctx->tensors[2];
  if (mode == 6 && pto_comm_chip(pto_kctx_comm(ctx)) == 0) raise(SIGKILL);
  for (int i = 0; i < DIE_ROUNDS; i++) {
    if (pto_comm_chip(pto_kctx_comm(ctx)) == (mode == 5 ? 0 : 1) && i == 2) {
      if (mode == 3) exit(3);
      if (mode == 7) raise(SIGKILL);
      _exit(3);
    }
    int rc = pto_allreduce(ctx, dom, scratch, dst, src, PTO_RED_SUM, PTO_COLL_RING);
    if (rc) return rc;
  }
  return 0;
}

/* scalar: the domain. The caller (chip 0 in coll_frozen, chip 1 in
 * coll_frozen_rank) calls the backend's collective directly with a 1 ms
 * deadline (test_mpi_comm's coll_frozen); the other chip never calls. */
#define FROZEN_COUNT (1 << 16)
static int frozen_kernel(const pto_kctx *ctx) {
  pto_domain dom = (pto_domain)ctx->scalars[0];
  pto_comm *c = pto_kctx_comm(ctx);
  if (pto_comm_chip(c) != (mode == 8 ? 0 : 1)) {
    sleep(20); /* past the test's bound */
    return 0;
  }
  static float in[FROZEN_COUNT], out[FROZEN_COUNT];
  comm_dom *d = comm_find(c, (int32_t)dom);
  if (!d || !d->be->coll) {
    fprintf(stderr,
            "FAILED: domain %d has no MPI collectives (run with "
            "PTO_MPI_SHARED_WINDOWS=0)\n",
            (int)dom);
    return PTO_EINVAL;
  }
  comm_coll_call call = {.kind = COMM_ALLREDUCE,
                         .dtype = PTO_F32,
                         .op = PTO_RED_SUM,
                         .count = FROZEN_COUNT,
                         .src = in,
                         .dst = out,
                         .buf = 0};
  char why[400] = "";
  int rc = d->be->coll(d->win, &call, 1, NULL, NULL, why, sizeof why);
  fprintf(stderr, "FAILED: chip %d's allreduce returned %s: %s (expected it to end the job)\n",
          pto_comm_chip(c), pto_status_name(rc), why);
  return rc ? rc : PTO_EINVAL;
}

static int init(pto_chip *chip, int rank, void *arg) {
  (void)rank;
  (void)arg;
  int rc = pto_kernel_register_aiv(chip, "fault", fault_kernel, &k_fault);
  if (!rc) rc = pto_kernel_register_aiv(chip, "die", die_kernel, &k_die);
  if (!rc) rc = pto_kernel_register_aiv(chip, "frozen", frozen_kernel, &k_frozen);
  return rc ? rc : pto_kernel_register_aiv(chip, "ring", ring_kernel, &k_ring);
}

static void chip_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_args *na = t->args;
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 4 && na->ntensors == 8; i++)
    pto_args_add(&a, (pto_access)na->access[4 * t->group_rank + i],
                 &na->tensors[4 * t->group_rank + i]);
  for (int i = 1; i < na->nscalars; i++)
    pto_args_scalar(&a, na->scalars[i]);
  pto_submit(o, (int)na->scalars[0], &a, NULL, NULL);
}

static const int pair[2] = {0, 1}, trio[3] = {0, 1, 2};

/* group rank r's three tensors (scratch, src, dst) and the domain */
static void die_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  const pto_args *na = t->args;
  pto_args a;
  pto_args_init(&a);
  for (int i = 0; i < 3; i++)
    pto_args_add(&a, (pto_access)na->access[3 * t->group_rank + i],
                 &na->tensors[3 * t->group_rank + i]);
  pto_args_scalar(&a, na->scalars[0]);
  pto_submit(o, k_die, &a, NULL, NULL);
}

/* A domain of the chips, or false, said on stderr. */
static bool domain(pto_node_orch *no, const int *chips, int n, const pto_window_buffer *bufs,
                   int nb, pto_domain *dom) {
  int rc = pto_node_domain_create(no, chips, n, bufs, nb, dom);
  if (rc) fprintf(stderr, "domain_create: %s\n", pto_status_name(rc));
  return rc == 0;
}

static void die_node(pto_node_orch *no, void *arg) {
  (void)arg;
  size_t sb = pto_coll_scratch_bytes(3, DIE_COUNT * sizeof(float));
  const pto_window_buffer bufs[] = {
      {"scratch", sb}, {"src", DIE_COUNT * sizeof(float)}, {"dst", DIE_COUNT * sizeof(float)}};
  pto_domain dom;
  if (!domain(no, trio, 3, bufs, 3, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 3; r++) {
    int64_t bytes = (int64_t)sb, count = DIE_COUNT;
    pto_tensor s, src, dst;
    pto_node_window_tensor(no, dom, r, "scratch", PTO_U8, 1, &bytes, &s);
    pto_node_window_tensor(no, dom, r, "src", PTO_F32, 1, &count, &src);
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &count, &dst);
    pto_args_inout(&a, &s);
    pto_args_input(&a, &src);
    pto_args_output_existing(&a, &dst);
  }
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, trio, 3, die_orch, &a, NULL);
}

static void frozen_node(pto_node_orch *no, void *arg) {
  (void)arg;
  const pto_window_buffer bufs[] = {
      {"scratch", pto_coll_scratch_bytes(2, FROZEN_COUNT * sizeof(float))}};
  pto_domain dom;
  if (!domain(no, pair, 2, bufs, 1, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, (uint64_t)k_frozen);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, pair, 2, chip_orch, &a, NULL);
}

static void fault_node(pto_node_orch *no, void *arg) {
  (void)arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_scalar(&a, (uint64_t)k_fault);
  pto_node_submit_group(no, pair, 2, chip_orch, &a, NULL);
}

typedef struct ring_io {
  pto_tensor in[2], out[2];
  int bad_rc;
  char bad_why[512];
} ring_io;

static void ring_node(pto_node_orch *no, void *arg) {
  ring_io *io = arg;
  /* a chip function no other rank can find: refused, naming it */
  unsigned char *heap = calloc(1, 64);
  pto_args b;
  pto_args_init(&b);
  io->bad_rc = pto_node_submit(no, 1, (pto_orch_fn)(void *)heap, &b, NULL);
  free(heap);
  const pto_window_buffer bufs[] = {{"dst", 16}, {"sig", 8}};
  pto_domain dom;
  if (pto_node_domain_create(no, pair, 2, bufs, 2, &dom)) return;
  pto_args a;
  pto_args_init(&a);
  for (int r = 0; r < 2; r++) {
    int64_t four = 4, one = 1;
    pto_tensor dst, sig;
    pto_node_window_tensor(no, dom, r, "dst", PTO_F32, 1, &four, &dst);
    pto_node_window_tensor(no, dom, r, "sig", PTO_I64, 1, &one, &sig);
    pto_args_input(&a, &io->in[r]);
    pto_args_inout(&a, &dst);
    pto_args_inout(&a, &sig);
    pto_args_output_existing(&a, &io->out[r]);
  }
  pto_args_scalar(&a, (uint64_t)k_ring);
  pto_args_scalar(&a, (uint64_t)dom);
  pto_node_submit_group(no, pair, 2, chip_orch, &a, NULL);
}

static pto_node_config config(void) {
  static const int devs[2] = {DEV0, DEV0 + 1};
  pto_node_config cfg = small_node(2, devs, init);
  cfg.host_bytes = 1u << 20;
  cfg.window_space = 16u << 20;
  cfg.startup_timeout_ms = 30000;
  cfg.control_timeout_ms = 2000; /* a stopped rank is named after 2 s */
  return cfg;
}

static int fails;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAILED: %s: ", #cond);                                                      \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      fails++;                                                                                     \
    }                                                                                              \
  } while (0)

static int refusals(void) {
  pto_error_info err;
  pto_node *n = NULL;
  /* wider than the job */
  pto_node_config wide = config();
  wide.nchips = 64;
  int rc = pto_node_create(&wide, &n, &err);
  fprintf(stderr, "64 chips: %s: %s\n", pto_status_name(rc), err.details);
  CHECK(rc == PTO_EINVAL && strstr(err.details, "nchips is 64, but mpirun started"), "got %s: %s",
        pto_status_name(rc), err.details);
  /* a chip_init_arg on the heap */
  pto_node_config heap_arg = config();
  heap_arg.chip_init_arg = malloc(8);
  rc = pto_node_create(&heap_arg, &n, &err);
  free(heap_arg.chip_init_arg);
  fprintf(stderr, "heap chip_init_arg: %s: %s\n", pto_status_name(rc), err.details);
  CHECK(rc == PTO_EINVAL && strstr(err.details, "chip_init_arg cannot reach the other MPI ranks"),
        "got %s: %s", pto_status_name(rc), err.details);
  /* a good node: the bad submit is refused, the ring shuffle runs */
  pto_node_config cfg = config();
  rc = pto_node_create(&cfg, &n, &err);
  CHECK(rc == 0, "create: %s: %s", pto_status_name(rc), err.details);
  if (rc) return 1;
  static ring_io io;
  int64_t four = 4;
  for (int r = 0; r < 2; r++) {
    pto_node_host_tensor(n, PTO_F32, 1, &four, &io.in[r]);
    pto_node_host_tensor(n, PTO_F32, 1, &four, &io.out[r]);
    for (int i = 0; i < 4; i++)
      ((float *)io.in[r].buf)[i] = (float)(10 * r + i);
  }
  rc = pto_node_run(n, ring_node, &io, &err);
  fprintf(stderr, "bad chip function: %s; run: %s: %s\n", pto_status_name(io.bad_rc),
          pto_status_name(rc), err.details);
  CHECK(io.bad_rc == PTO_EINVAL, "submit of a heap address: %s", pto_status_name(io.bad_rc));
  CHECK(rc == PTO_EINVAL && strstr(err.details, "lies in no loaded code segment"), "run: %s: %s",
        pto_status_name(rc), err.details);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 4; i++) {
      float got = ((float *)io.out[r].buf)[i], want = (float)(10 * (1 - r) + i);
      CHECK(got == want, "out[%d][%d] = %g, expected %g", r, i, got, want);
    }
  pto_node_destroy(n);
  return fails ? 1 : 0;
}

static int thread_single(void) {
  int provided = -1;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided);
  pto_node_config cfg = config();
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  fprintf(stderr, "MPI_THREAD_SINGLE (provided %d): %s: %s\n", provided, pto_status_name(rc),
          err.details);
  CHECK(rc == PTO_EMPI && strstr(err.details, "pto needs MPI_THREAD_MULTIPLE"), "got %s: %s",
        pto_status_name(rc), err.details);
  MPI_Finalize();
  return fails ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "refusals";
  if (!strcmp(m, "single")) return thread_single();
  mode = !strcmp(m, "kill")               ? 1
         : !strcmp(m, "stop")             ? 2
         : !strcmp(m, "exit")             ? 3
         : !strcmp(m, "_exit")            ? 4
         : !strcmp(m, "root_exit")        ? 5
         : !strcmp(m, "root_kill")        ? 6
         : !strcmp(m, "kill_late")        ? 7
         : !strcmp(m, "coll_frozen")      ? 8
         : !strcmp(m, "coll_frozen_rank") ? 9
                                          : 0;
  if (mode == 0) return refusals();
  pto_node_config cfg = config();
  if (mode >= 3 && mode <= 7) {
    static const int devs[3] = {DEV0, DEV0 + 1, DEV0 + 4};
    cfg.nchips = 3;
    cfg.device_ids = devs;
    cfg.host_bytes = 1u << 20;
    cfg.window_space = 256u << 20;
    cfg.wait_timeout_ms = 10000; /* the survivors' waits: longer than the control deadline */
  }
  if (mode == 7) { /* the defaults' order of size: a death must not wait for them */
    cfg.control_timeout_ms = 30000;
    cfg.wait_timeout_ms = 40000;
  }
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rc) {
    fprintf(stderr, "create: %s: %s\n", pto_status_name(rc), err.details);
    return 1;
  }
  printf("run objects: /dev/shm/%s.*\n", pto_node_shm_prefix(n));
  fflush(stdout);
  rc = pto_node_run(n, mode >= 8 ? frozen_node : mode >= 3 ? die_node : fault_node, NULL, &err);
  fprintf(stderr, "run: %s: %s\n", pto_status_name(rc), err.details);
  if (mode >= 3 && mode <= 7) {
    /* the program goes on for a while before it destroys the failed node:
     * nothing of the node may still run on windows it released */
    usleep(500 * 1000);
    pto_error_info again;
    int rc2 = pto_node_run(n, die_node, NULL, &again);
    fprintf(stderr, "a later run: %s: %s\n", pto_status_name(rc2), again.details);
  }
  pto_node_destroy(n); /* a failed node ends the job here */
  return rc ? 1 : 0;
}
