/* fence.h — a full fence right after a locked read-modify-write.
 *
 * C11 asks for atomic_thread_fence(memory_order_seq_cst) where a protocol
 * needs a store before an RMW (a release store among them) ordered before
 * a load after it, against another thread's store, fence and load (the
 * Dekker pairs of pto's waits: tests/unit/test_wait_model.c). On x86-64 a
 * lock-prefixed RMW is a full barrier already, and the fence compiles to
 * one more locked instruction (`lock or` on the stack) that orders
 * nothing more: only the compiler must be kept from moving accesses across
 * it, as Linux's smp_mb__after_atomic() does on x86. Elsewhere, and under
 * ThreadSanitizer (which models the C11 fence, not the instruction), it
 * is the fence. Use it only right after an RMW, with nothing between. */
#ifndef PTO_COMMON_FENCE_H
#define PTO_COMMON_FENCE_H

#include <stdatomic.h>

/* A macro, not an inline function: gcc 12 with -fsanitize=thread rejects
 * (-Wtsan) the fence inlined from a function, where it takes it written in
 * the caller, mostly: where it rejects it there too (sched.c sched_kick),
 * PTO_FENCE_AFTER_RMW_CALL is the same fence, out of line where it is
 * one. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define PTO_FENCE_AFTER_RMW()      atomic_signal_fence(memory_order_seq_cst)
#define PTO_FENCE_AFTER_RMW_CALL() atomic_signal_fence(memory_order_seq_cst)
#else
#define PTO_FENCE_AFTER_RMW()      atomic_thread_fence(memory_order_seq_cst)
static __attribute__((noinline, unused)) void pto_fence_out_of_line(void) {
  atomic_thread_fence(memory_order_seq_cst);
}
#define PTO_FENCE_AFTER_RMW_CALL() pto_fence_out_of_line()
#endif

#endif
