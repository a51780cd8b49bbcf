/* submit_v.c — the compact submit (pto_submit_v in pto/orch.h): a counted
 * list of tagged arguments turned into the argument builder's pto_args and
 * submit options, then pto_submit. Mistakes that the macros cannot catch at
 * compile time fail the submit like any bad argument (latched, details
 * naming the argument's position). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "chip/run.h"
#include "pto/orch.h"

static int argv_fail(pto_orch *o, int pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int argv_fail(pto_orch *o, int pos, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  run_fail(o->run, PTO_EINVAL, PTO_TASK_NONE, -1, "submit #%lld: pto_submit_v argument %d: %s",
           (long long)o->run->next_id, pos, what);
  return atomic_load_explicit(&o->run->status, memory_order_acquire);
}

int pto_submit_argv(pto_orch *o, int kernel_id, const pto_arg *argv, int argc) {
  /* as pto_submit, the id is PTO_TASK_NONE first: a submit that fails,
   * before its PTO_TASK_ID is read too, leaves no earlier value there */
  for (int i = 0; argv && i < argc; i++)
    if (argv[i].magic == PTO_ARG_MAGIC && argv[i].kind == PTO_ARGK_TASK_ID && argv[i].v.id)
      *argv[i].v.id = PTO_TASK_NONE;
  /* after a failure submits do nothing, as pto_submit; the owner's thread only */
  int rc = orch_gate(o, "pto_submit_v");
  if (rc) return rc;
  if (argc < 0 || (argc > 0 && !argv))
    return argv_fail(o, 0, "no argument list (%d arguments)", argc);
  pto_args a;
  pto_args_init(&a);
  pto_submit_opts opts = {0};
  pto_task_id *id = NULL;
  /* Tensors first, then scalars: the builder wants them in that order. */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < argc; i++) {
      const pto_arg *x = &argv[i];
      if (x->magic != PTO_ARG_MAGIC)
        return argv_fail(o, i + 1, "not made by PTO_IN, PTO_OUT, PTO_SCALAR, ... (tag 0x%x)",
                         (unsigned)x->magic);
      switch (x->kind) {
      case PTO_ARGK_TENSOR:
        if (pass) break;
        if (!x->v.t || (x->mode == PTO_REDUX && !x->v.rx->t))
          return argv_fail(o, i + 1, "NULL tensor");
        if (x->mode > PTO_REDUX)
          return argv_fail(o, i + 1, "bad access mode %u", (unsigned)x->mode);
        if (a.ntensors == PTO_MAX_TENSOR_ARGS)
          return argv_fail(o, i + 1, "more than %d tensor arguments", PTO_MAX_TENSOR_ARGS);
        if (x->mode == PTO_REDUX)
          pto_args_redux(&a, x->v.rx->t, x->v.rx->op);
        else
          pto_args_add(&a, (pto_access)x->mode, x->v.t);
        break;
      case PTO_ARGK_SCALAR:
        if (!pass) break;
        if (a.nscalars == PTO_MAX_SCALAR_ARGS)
          return argv_fail(o, i + 1, "more than %d scalar arguments", PTO_MAX_SCALAR_ARGS);
        pto_args_scalar(&a, x->v.u);
        break;
      case PTO_ARGK_BLOCKS:
        if (pass) break;
        if ((int64_t)x->v.u < 1 || (int64_t)x->v.u > INT32_MAX)
          return argv_fail(o, i + 1, "PTO_BLOCKS(%" PRId64 "): between 1 and %d", (int64_t)x->v.u,
                           INT32_MAX);
        opts.block_num = (int)x->v.u;
        break;
      case PTO_ARGK_SYNC_START: opts.sync_start = true; break;
      case PTO_ARGK_PRIORITY:
        if (pass) break;
        if ((int64_t)x->v.u < 0 || (int64_t)x->v.u > PTO_PRIORITY_MAX)
          return argv_fail(o, i + 1, "PTO_PRIORITY(%" PRId64 "): between 0 and %d", (int64_t)x->v.u,
                           PTO_PRIORITY_MAX);
        opts.priority = (int)x->v.u;
        break;
      case PTO_ARGK_TASK_ID:
        if (!x->v.id) return argv_fail(o, i + 1, "PTO_TASK_ID(NULL)");
        id = x->v.id;
        break;
      default: return argv_fail(o, i + 1, "unknown argument kind %u", (unsigned)x->kind);
      }
    }
  return pto_submit(o, kernel_id, &a, &opts, id);
}
