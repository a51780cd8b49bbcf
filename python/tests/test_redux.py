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


# ---- ops registered from Python (Chip.redux_op) ----

def test_python_op_max_abs_matches_numpy():
    """A "max-abs" op over f64 registered from Python: tasks of 3 blocks
    fold signed values into private copies (each block its own), and the
    result equals NumPy's max of |values| over the initial contents and
    every contribution; InOut tasks before and after order against it."""
    rng = np.random.default_rng(11)
    vals = rng.normal(0, 100, (40, 3, 6))

    def put(ctx, acc):
        acc[...] = np.maximum(np.abs(acc), np.abs(vals[ctx.scalar_i64(0), ctx.block_idx]))

    def negate(ctx, x):
        x *= -1

    acc = rng.normal(0, 50, 6)
    want = -np.maximum(np.abs(-acc), np.abs(vals).max(axis=(0, 1)))
    with pto.Chip(clusters=2, schedulers=2) as chip:
        maxabs = chip.redux_op("maxabs", np.float64, lambda d: 0.0,
                               lambda a, s: np.maximum(np.abs(a), np.abs(s)))
        assert maxabs.id >= 16 and chip.redux_ops["maxabs"] is maxabs
        k_put, k_neg = chip.kernel(put), chip.kernel(negate)

        def orch(o):
            o.submit(k_neg, pto.InOut(acc))
            for k in range(len(vals)):
                o.submit(k_put, pto.Redux(acc, maxabs), scalars=[k], block_num=3)
            o.submit(k_neg, pto.InOut(acc))

        chip.run(orch)
    assert_array(acc, want, "max-abs")


def test_python_op_logsumexp_replayed_bit_for_bit():
    """A "logsumexp" op (identity -inf, combine logaddexp): the result is
    the sequential fold in submission order bit for bit, agrees with
    NumPy's logaddexp.reduce, and a captured graph replays it with new data
    to the same bytes as the sequential fold (every launch starts the
    copies from the identity again)."""
    rng = np.random.default_rng(3)

    def contrib(ctx, acc, x):
        acc[...] = np.logaddexp(acc, x)

    def fold(start, xs):
        want = start.copy()
        for x in xs:  # copy = logaddexp(-inf, x) = x, folded in submission order
            want = np.logaddexp(want, np.logaddexp(np.full_like(x, -np.inf), x))
        return want

    with pto.Chip(clusters=2) as chip:
        lse = chip.redux_op("logsumexp", "float64", lambda d: np.full_like(d, -np.inf),
                            lambda a, s: np.logaddexp(a, s, out=a))
        k = chip.kernel(contrib)
        xs = [rng.normal(0, 3, 5) for _ in range(30)]
        acc = np.full(5, -np.inf)

        def orch(o):
            for x in xs:
                o.submit(k, pto.Redux(acc, lse), pto.In(x))

        g = chip.capture(orch)
        want = fold(np.full(5, -np.inf), xs)
        assert acc.tobytes() == want.tobytes()
        np.testing.assert_allclose(acc, np.logaddexp.reduce(np.stack(xs), axis=0), rtol=1e-12)
        for rep in range(3):
            for x in xs:
                x[...] = rng.normal(rep, 3, 5)
            acc[...] = rng.normal(0, 1, 5)
            start = acc.copy()
            chip.launch(g)
            assert acc.tobytes() == fold(start, xs).tobytes(), rep
        g.close()


def test_python_op_errors_are_named():
    a = np.zeros(4, np.float32)
    with pto.Chip(clusters=1) as chip, pto.Chip(clusters=1) as other:
        k = chip.kernel(pto.py_kernel(lambda ctx, *t: None))
        with pytest.raises(pto.InvalidArgumentError, match="is not callable"):
            chip.redux_op("bad", np.float32, None, lambda a, s: a)
        with pytest.raises(pto.InvalidArgumentError, match="must be a str of 1"):
            chip.redux_op("x" * 40, np.float32, lambda d: 0, lambda a, s: a)
        # before: registered in C as "mx" (its name in traces and errors)
        with pytest.raises(pto.InvalidArgumentError, match="contains a NUL byte \\(C would see 'mx'"):
            chip.redux_op("mx\0junk", np.float32, lambda d: 0, lambda a, s: a)
        # before: registered with its newline (the C library refuses it now)
        with pytest.raises(pto.InvalidArgumentError,
                           match="name 'm\\\\nx' has a control character \\(0x0a\\) at byte 1"):
            chip.redux_op("m\nx", np.float32, lambda d: 0, lambda a, s: a)
        with pytest.raises(pto.InvalidArgumentError, match="not supported by pto"):
            chip.redux_op("c", np.complex64, lambda d: 0, lambda a, s: a)
        f64op = chip.redux_op("f64max", np.float64, lambda d: -np.inf, np.maximum)
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, pto.Redux(a, f64op)))
        assert "op 'f64max' reduces f64 but the view is f32" in e.value.details
        theirs = other.redux_op("f32max", np.float32, lambda d: -np.inf, np.maximum)
        with pytest.raises(pto.InvalidArgumentError, match="registered on another chip"):
            chip.run(lambda o: o.submit(k, pto.Redux(a, theirs)))

        def boom(acc, src):
            raise ValueError("no combine today")

        bad = chip.redux_op("boom", np.float32, lambda d: 0.0, boom)
        with pytest.raises(pto.KernelError, match="reduction op 'boom': its combine raised "
                           "ValueError: no combine today") as e:
            chip.run(lambda o: o.submit(k, pto.Redux(a, bad)))
        assert isinstance(e.value.__cause__, ValueError)
        with pytest.raises(pto.InvalidArgumentError, match="before run, not during one"):
            chip.run(lambda o: chip.redux_op("late", np.float32, lambda d: 0, np.add))
        ok = chip.redux_op("sum32", np.float32, lambda d: 0.0, np.add)
        chip.run(lambda o: o.submit(k, pto.Redux(a, ok)))  # the chip runs on


def test_python_op_limits_and_slots_come_back():
    """A chip takes 16 ops (the 17th is refused, naming it); the C entry
    points of a closed chip's ops are given back, so 5 chips of 16 ops in
    turn (80 registrations, more than the 64 pairs) all register."""
    for c in range(5):
        with pto.Chip(clusters=1) as chip:
            ops = [chip.redux_op(f"op{i}", np.int32, lambda d: 0, np.add) for i in range(16)]
            assert len({op.id for op in ops}) == 16
            with pytest.raises(pto.InvalidArgumentError, match="op16.*at most 16 ops per chip"):
                chip.redux_op("op16", np.int32, lambda d: 0, np.add)
