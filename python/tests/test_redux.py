"""pto.Redux arguments: docs/chip.md, "Reductions (PTO_REDUX)"."""
import numpy as np
import pytest

import pto
from conftest import assert_array


def test_redux_sum_is_the_sequential_fold_bit_for_bit():
    """Python kernels add terms of very different sizes into private copies
    of one f32 array; the result equals the sequential loop's, bit for bit,
    with InOut tasks before and after the group and a read in the middle."""
    rng = np.random.default_rng(5)
    terms = (rng.integers(-1000, 1000, 300) * rng.choice([1e7, 1.0, 1e-3], 300) / 7).astype(np.float32)

    def add(ctx, acc):
        acc += np.float32(terms[ctx.scalar_i64(0)])

    def twice(ctx, x):
        x *= np.float32(2)

    acc = np.full(3, 0.5, np.float32)
    want = np.full(3, 0.5, np.float32) * np.float32(2)
    mid = None
    for k, t in enumerate(terms):
        want = want + t
        if k == 150:
            mid = want.copy()
    want = want * np.float32(2)
    backwards = np.full(3, 1.0, np.float32)
    for t in terms[::-1]:
        backwards = backwards + t
    assert not np.array_equal(backwards * np.float32(2), want)  # the order shows

    seen = []
    with pto.Chip(clusters=4, schedulers=2) as chip:
        k_add = chip.kernel(pto.py_kernel(add))
        k_twice = chip.kernel(pto.py_kernel(twice))

        def orch(o):
            o.submit(k_twice, pto.InOut(acc))
            for k in range(len(terms)):
                o.submit(k_add, pto.Redux(acc, "sum"), scalars=[k], priority=k % 4)
                if k == 150:
                    seen.append(o.read(acc))
            o.submit(k_twice, pto.InOut(acc))

        chip.run(orch)
    assert_array(seen[0], mid, "acc read in the middle of the group")
    assert acc.tobytes() == want.tobytes(), (acc, want)


def test_redux_max_min_prod():
    """Built-in ops by name over int32 and float64."""
    def put(ctx, acc):
        v = ctx.scalar_i64(0)
        acc[...] = np.maximum(acc, v) if ctx.scalar_i64(1) == 0 else \
            np.minimum(acc, v) if ctx.scalar_i64(1) == 1 else acc * v

    vals = [3, -7, 12, 5, -2, 2]
    with pto.Chip(clusters=2) as chip:
        k = chip.kernel(pto.py_kernel(put))
        hi = np.zeros(2, np.int32)
        lo = np.zeros(2, np.int32)
        pr = np.ones(2, np.float64)

        def orch(o):
            for v in vals:
                o.submit(k, pto.Redux(hi, "max"), scalars=[v, 0])
                o.submit(k, pto.Redux(lo, "min"), scalars=[v, 1])
                o.submit(k, pto.Redux(pr, "prod"), scalars=[v, 2])

        chip.run(orch)
    assert_array(hi, np.full(2, 12, np.int32), "max")
    assert_array(lo, np.full(2, -7, np.int32), "min")
    assert_array(pr, np.full(2, float(np.prod(vals)), np.float64), "prod")


def test_redux_blocks_have_copies_of_their_own():
    """A task of 4 blocks: each block's copy is its own (each stores, not
    adds, its block index + 1), so the sum is 1 + 2 + 3 + 4 per task."""
    def put(ctx, acc):
        acc[...] = ctx.block_idx + 1

    acc = np.zeros(3, np.int64)
    with pto.Chip(clusters=2) as chip:
        k = chip.kernel(pto.py_kernel(put))
        chip.run(lambda o: [o.submit(k, pto.Redux(acc), block_num=4) for _ in range(5)])
    assert_array(acc, np.full(3, 5 * 10, np.int64), "sum of the blocks' copies")


def test_bad_redux_is_named():
    a = np.zeros(8, np.int32)
    with pto.Chip(clusters=1) as chip:
        k = chip.kernel(pto.py_kernel(lambda ctx, *t: None))
        with pytest.raises(pto.InvalidArgumentError, match="unknown op 'avg'"):
            pto.Redux(a, "avg")
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, pto.Redux(a, 40)))
        assert "tensor argument 0 (REDUX): unknown op 40" in e.value.details
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, pto.Redux(a[0:4]), pto.In(a[2:6])))
        assert "its bytes overlap tensor argument 1 (INPUT)" in e.value.details
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, pto.Redux(a), pto.Redux(a[4:], "max")))
        assert "its bytes overlap tensor argument 1 (REDUX)" in e.value.details
        ro = np.zeros(4, np.int32)
        ro.flags.writeable = False
        with pytest.raises(pto.InvalidArgumentError, match="read-only array passed as Redux"):
            chip.run(lambda o: o.submit(k, pto.Redux(ro)))
    assert not a.any()  # nothing was folded
