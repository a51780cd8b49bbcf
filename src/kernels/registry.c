/* registry.c — registers every reference kernel on a chip under its
 * standard name (pto_kernels_register). */
#include <stdbool.h>
#include <stddef.h>

#include "pto/kernels.h"

typedef struct reg_entry {
  const char *name;
  pto_kernel_fn fn;
  bool aic;
  size_t id_offset; /* where its id goes in pto_kernel_ids */
} reg_entry;

#define REG(NAME, AIC)                                                                             \
  { #NAME, pto_kern_##NAME, AIC, offsetof(pto_kernel_ids, NAME) }

static const reg_entry reg_table[] = {
    REG(add, false),
    REG(mul, false),
    REG(scale, false),
    REG(exp, false),
    REG(copy, false),
    REG(fill, false),
    REG(matmul, true),
    REG(matmul_acc, true),
    REG(softmax_rows, false),
    REG(online_softmax, false),
    REG(normalize_rows, false),
    REG(row_sum, false),
    REG(row_max, false),
    REG(col_sum, false),
    REG(col_max, false),
};

int pto_kernels_register(pto_chip *chip, pto_kernel_ids *ids) {
  if (!chip || !ids) return PTO_EINVAL;
  for (size_t i = 0; i < sizeof reg_table / sizeof reg_table[0]; i++) {
    const reg_entry *e = &reg_table[i];
    int *id = (int *)((char *)ids + e->id_offset);
    int rc = e->aic ? pto_kernel_register_aic(chip, e->name, e->fn, id)
                    : pto_kernel_register_aiv(chip, e->name, e->fn, id);
    if (rc != PTO_OK) return rc;
  }
  return PTO_OK;
}
