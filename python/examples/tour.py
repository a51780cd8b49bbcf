"""The README's Python tour: a complete program (run by python/tests/test_tour.py)."""
import numpy as np

import pto

chip = pto.Chip(clusters=2)              # options and defaults of pto_chip_config
add = chip.kernel("add")                 # one of pto's reference kernels, by name


@chip.kernel                             # a Python kernel: NumPy views of its tensors
def twice(ctx: pto.KernelContext, y: np.ndarray) -> None:
    y *= 2


@chip.kernel
def row_sum(ctx: pto.KernelContext, y: np.ndarray, rows: np.ndarray) -> None:
    rows[ctx.block_idx] = y[ctx.block_idx].sum()   # one block per row


a = np.arange(32, dtype=np.float32).reshape(4, 8)
b = np.ones((4, 8), np.float32)
y = np.zeros((4, 8), np.float32)
rows = np.zeros(4, np.float32)


def orchestrate(o: pto.Orch) -> None:
    o.submit(add, pto.In(a), pto.In(b), pto.Out(y))           # y = a + b
    o.submit(twice, pto.InOut(y))                              # runs after the add
    o.submit(row_sum, pto.In(y), pto.Out(rows), block_num=4)   # after twice
    o.submit(twice, pto.InOut(y[:, ::2]))      # even columns: waits for row_sum (it reads y)
    t = o.submit(add, pto.In(y[1]), pto.In(y[2]), pto.New(8))  # runtime-allocated output
    print("y[1] + y[2] =", o.read(t.output))   # a NumPy copy, once the task is done


try:
    stats = chip.run(orchestrate)            # the GIL is released while pto works
except pto.Error as e:                       # KernelError, SchedTimeoutError, ...
    print(e.status, e.details)
    raise
print("row sums:", rows, "tasks:", stats.tasks)
chip.close()
