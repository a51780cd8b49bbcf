/* own_symbols.c — an application that happens to define functions named
 * like pto's internals (ring_init, run_fail, trace_write, orch_setup,
 * trace_create) runs a real chip run. Built twice, against libpto.so and
 * libpto.a: with pto's private symbols visible, the shared build silently
 * calls the application's functions from inside pto (the run fails) and the
 * static build does not even link (duplicate symbols). */
#include <stdio.h>

#include "pto/pto.h"

static int calls; /* how often pto called one of ours */

/* Same names as pto's private functions, other signatures and meanings. */
int ring_init(void *r, unsigned long cap) {
  (void)r, (void)cap;
  calls++;
  return -1;
}
void run_fail(void) { calls++; }
int trace_write(const char *what) {
  (void)what;
  calls++;
  return -1;
}
int orch_setup(void *r) {
  (void)r;
  calls++;
  return -1;
}
void *trace_create(int pid, const char *name) {
  (void)pid, (void)name;
  calls++;
  return NULL;
}

enum { N = 256 };
static float x[N], y[N];
static int k_scale;

static int scale(const pto_kctx *k) { /* y = 3 * x */
  for (int i = 0; i < N; i++)
    pto_tensor_f32(&k->tensors[1])[i] = 3.0f * pto_tensor_f32(&k->tensors[0])[i];
  return 0;
}

static void orchestrate(pto_orch *o, void *arg) {
  (void)arg;
  int64_t n = N;
  pto_tensor tx, ty, tmp;
  pto_tensor_init(&tx, x, sizeof x, PTO_F32, 1, &n);
  pto_tensor_init(&ty, y, sizeof y, PTO_F32, 1, &n);
  pto_tensor_desc(&tmp, PTO_F32, 1, &n);
  pto_args a;
  pto_args_init(&a); /* tmp = 3x, in the heap ring */
  pto_args_input(&a, &tx);
  pto_args_output(&a, &tmp);
  pto_submit(o, k_scale, &a, NULL, NULL);
  pto_args_init(&a); /* y = 3 tmp */
  pto_args_input(&a, &tmp);
  pto_args_output_existing(&a, &ty);
  pto_submit(o, k_scale, &a, NULL, NULL);
}

int main(void) {
  for (int i = 0; i < N; i++)
    x[i] = (float)i;
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  cfg.clusters = 2;
  pto_chip *chip = NULL;
  pto_error_info err;
  int rc = pto_chip_create(&cfg, &chip);
  if (rc) {
    fprintf(stderr, "FAILED: pto_chip_create: %s\n", pto_status_name(rc));
    return 1;
  }
  rc = pto_kernel_register_aiv(chip, "scale", scale, &k_scale);
  if (!rc) rc = pto_chip_run(chip, orchestrate, NULL, NULL, &err);
  if (rc) pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  int wrong = 0;
  for (int i = 0; i < N; i++)
    if (y[i] != 9.0f * (float)i && wrong++ < 3)
      fprintf(stderr, "y[%d] = %g, expected %g\n", i, y[i], 9.0 * i);
  if (calls) fprintf(stderr, "pto called the application's own functions %d times\n", calls);
  if (rc || wrong || calls) {
    fprintf(stderr, "FAILED: status %s, %d wrong values, %d calls into the application\n",
            pto_status_name(rc), wrong, calls);
    return 1;
  }
  printf("ok: a run next to the application's own ring_init, run_fail, trace_write, ...\n");
  return 0;
}
