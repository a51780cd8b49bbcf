/* test_node_ship_refused.c — a chip task on another host whose chip
 * function the chip rank refuses (its code differs there: fnref's check)
 * leaves nothing behind for the next task. Rank 0 sends the host tensors of
 * a task to a chip on another host right after its frame; the chip rank
 * must take them even when it refuses the frame, or the next task's
 * receive takes them instead of its own.
 *
 * Run by scripts/two_hosts.sh (one rank per simulated host). Rank 1 changes
 * the first bytes of `refused_orch` before pto_node_create (it never runs
 * there), so that task fails naming the function; then tasks on chip 1
 * with host tensors of other sizes must give exact results. The last line:
 * "summary: refused=S next=S" (S: verified, or what stopped it). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pto/node.h"
#include "small_node.h"

#define DEV0 121 /* device ids of this program: 121, 122 */

static int k_scale = -1;

/* out = 2 in + 1 */
static int scale_kernel(const pto_kctx *ctx) {
  const pto_tensor *in = &ctx->tensors[0], *out = &ctx->tensors[1];
  for (int64_t i = 0; i < pto_tensor_numel(in); i++)
    *(float *)pto_tensor_at_linear(out, i) = 2.0f * *(float *)pto_tensor_at_linear(in, i) + 1.0f;
  return 0;
}

static int init(pto_chip *chip, int rank, void *arg) {
  (void)rank, (void)arg;
  return pto_kernel_register_aiv(chip, "scale", scale_kernel, &k_scale);
}

static void scale_orch(pto_orch *o, void *arg) {
  const pto_node_task *t = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &t->args->tensors[0]);
  pto_args_output_existing(&a, &t->args->tensors[1]);
  pto_submit(o, k_scale, &a, NULL, NULL);
}

/* The same, but rank 1's copy of its code is changed: refused there. */
__attribute__((noinline, aligned(64))) void refused_orch(pto_orch *o, void *arg) {
  scale_orch(o, arg);
  __asm__ volatile("" ::: "memory");
}

static void spoil_code_here(void) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t at = (uintptr_t)(void *)refused_orch, lo = at & ~(uintptr_t)(page - 1);
  if (mprotect((void *)lo, (size_t)page * 2, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    perror("mprotect");
    exit(3);
  }
  unsigned char *p = (unsigned char *)at;
  for (int i = 0; i < 8; i++)
    p[i] ^= 0x5a;
  mprotect((void *)lo, (size_t)page * 2, PROT_READ | PROT_EXEC);
}

typedef struct io {
  pto_tensor in, out;
  pto_orch_fn fn;
  int rc;
} io;

static void one_task(pto_node_orch *no, void *arg) {
  io *x = arg;
  pto_args a;
  pto_args_init(&a);
  pto_args_input(&a, &x->in);
  pto_args_output_existing(&a, &x->out);
  x->rc = pto_node_submit(no, 1, x->fn, &a, NULL);
}

static const char *check(const io *x, int64_t count, float base) {
  static char why[160];
  for (int64_t i = 0; i < count; i++) {
    float want = 2.0f * (base + (float)i) + 1.0f, got = ((const float *)x->out.buf)[i];
    if (got != want) {
      snprintf(why, sizeof why, "element %lld: %g, expected %g", (long long)i, got, want);
      return why;
    }
  }
  return NULL;
}

int main(void) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (r && atoi(r) == 1) spoil_code_here();
  static const int devs[2] = {DEV0, DEV0 + 1};
  pto_node_config cfg = small_node(2, devs, init);
  cfg.quiet = true;
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(&cfg, &n, &err);
  if (rc) {
    printf("create: %s: %s\nsummary: refused=%s next=not-run\n", pto_status_name(rc), err.details,
           pto_status_name(rc));
    return 1;
  }
  const char *refused = "verified", *next = "verified";
  static char said[600];
  /* the refused task: 300 floats in */
  io x = {.fn = refused_orch};
  int64_t c0 = 300;
  pto_node_host_tensor(n, PTO_F32, 1, &c0, &x.in);
  pto_node_host_tensor(n, PTO_F32, 1, &c0, &x.out);
  for (int64_t i = 0; i < c0; i++)
    ((float *)x.in.buf)[i] = -1.0f;
  rc = pto_node_run(n, one_task, &x, &err);
  printf("refused task: %s: %s\n", pto_status_name(rc), err.details);
  if (rc != PTO_EINVAL || !strstr(err.details, "chip function")) refused = "not-refused";
  /* the next tasks, each with host tensors of another size */
  const int64_t counts[3] = {100, 1000, 300};
  for (int k = 0; k < 3 && !strcmp(next, "verified"); k++) {
    io y = {.fn = scale_orch};
    int64_t c = counts[k];
    pto_node_host_tensor(n, PTO_F32, 1, &c, &y.in);
    pto_node_host_tensor(n, PTO_F32, 1, &c, &y.out);
    for (int64_t i = 0; i < c; i++)
      ((float *)y.in.buf)[i] = (float)(10 * k) + (float)i;
    rc = pto_node_run(n, one_task, &y, &err);
    const char *bad = rc ? NULL : check(&y, c, (float)(10 * k));
    printf("next task %d (%lld f32): %s%s%s\n", k, (long long)c, pto_status_name(rc),
           rc ? ": " : "",
           rc    ? err.details
           : bad ? bad
                 : " verified");
    if (rc || bad) {
      snprintf(said, sizeof said, "%s", rc ? pto_status_name(rc) : "wrong-data");
      next = said;
    }
  }
  pto_node_destroy(n);
  printf("summary: refused=%s next=%s\n", refused, next);
  return strcmp(refused, "verified") || strcmp(next, "verified");
}
