// C++ against pto's C API: y = a + b with the reference kernel pto_kern_add,
// submitted with the argument builder (pto_args and pto_submit; the
// compact pto_submit_v and its PTO_IN... macros are C only).
#include <cstdio>

#include "pto/kernels.h"
#include "pto/pto.h"

namespace {
const int N = 64;
float a[N], b[N], y[N];
int k_add = -1;

void orchestrate(pto_orch *o, void *) {
  int64_t n = N;
  pto_tensor ta, tb, ty;
  if (pto_tensor_init(&ta, a, sizeof a, PTO_F32, 1, &n) ||
      pto_tensor_init(&tb, b, sizeof b, PTO_F32, 1, &n) ||
      pto_tensor_init(&ty, y, sizeof y, PTO_F32, 1, &n)) {
    pto_orch_fatal(o, "cannot describe the tensors");
    return;
  }
  pto_args args;
  pto_args_init(&args);
  pto_args_input(&args, &ta);
  pto_args_input(&args, &tb);
  pto_args_output_existing(&args, &ty);
  pto_submit(o, k_add, &args, nullptr, nullptr);
}
} // namespace

int main() {
  for (int i = 0; i < N; i++) {
    a[i] = float(i);
    b[i] = 1.0f;
  }
  pto_chip_config cfg;
  pto_chip_config_init(&cfg);
  pto_chip *chip = nullptr;
  pto_error_info err;
  int rc = pto_chip_create_ex(&cfg, &chip, &err);
  if (rc) {
    pto_error_print(&err, stderr);
    return 1;
  }
  if ((rc = pto_kernel_register_aiv(chip, "add", pto_kern_add, &k_add)))
    std::fprintf(stderr, "pto_kernel_register_aiv: %s\n", pto_strerror(rc));
  else if ((rc = pto_chip_run(chip, orchestrate, nullptr, nullptr, &err)))
    pto_error_print(&err, stderr);
  pto_chip_destroy(chip);
  int wrong = 0;
  for (int i = 0; i < N; i++)
    wrong += y[i] != float(i) + 1.0f;
  std::printf("pto %s from C++: %s\n", pto_version(), rc || wrong ? "WRONG" : "ok");
  return rc || wrong;
}
