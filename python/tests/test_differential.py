"""Randomized differential test: task graphs over views built by NumPy
slicing (steps, transposes, reshapes) of two arrays, run on a chip and
sequentially with NumPy; the results must be identical. Kernels yield the
GIL between reading and writing, so a missed dependency shows as a race."""
import time

import numpy as np
import pytest

import pto
from conftest import assert_array

R, C = 8, 12
M = 1000003


def rand_view(rng):
    """A function base -> view, built only with NumPy indexing."""
    kind = rng.integers(7)
    r0, c0 = int(rng.integers(R)), int(rng.integers(C))
    r1, c1 = int(rng.integers(r0 + 1, R + 1)), int(rng.integers(c0 + 1, C + 1))
    rs, cs = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if kind == 0:
        return lambda b: b[r0:r1:rs, c0:c1:cs]
    if kind == 1:
        return lambda b: b[r0:r1:rs, c0:c1:cs].T
    if kind == 2:
        return lambda b: b[r0:r1].reshape(-1)[::cs]
    if kind == 3:
        return lambda b: b[r0]
    if kind == 4:
        return lambda b: b[:, c0]
    if kind == 5:  # 3-D: pairs of rows
        k = int(rng.integers(R // 2))
        return lambda b: b.reshape(R // 2, 2, C)[k:, :, c0:c1:cs]
    return lambda b: b.reshape(R // 2, 2, C).transpose(2, 0, 1)[c0:c1:cs, ::rs]


def op_update(x, y, c):
    y[...] = (y * 3 + x.sum() + c) % M


def op_overwrite(x, y, c):
    y[...] = (x.max() * 7 + c) % M


def op_self(x, y, c):
    y[...] = (y * y + c) % M


OPS = {"update": op_update, "overwrite": op_overwrite, "self": op_self}


def make_kernel(op):
    def k(ctx, *t):
        if ctx.block_idx:
            return
        c = ctx.scalar_i64(0)
        if op is op_self:
            x, y = t[0], t[0]
        else:
            x, y = t
        xs = x.copy()
        if ctx.scalars[1]:
            time.sleep(0.0002)  # let other cores run between read and write
        op(xs, y, c)
    k.__name__ = "diff_" + op.__name__
    return k


@pytest.mark.parametrize("seed", range(12))
def test_random_graph_matches_sequential(seed):
    rng = np.random.default_rng(seed)
    init = [rng.integers(0, 100, size=(R, C)).astype(np.int64) for _ in range(2)]
    plan = []
    for _ in range(40):
        name = list(OPS)[int(rng.integers(len(OPS)))]
        plan.append((name, int(rng.integers(2)), rand_view(rng), int(rng.integers(2)),
                     rand_view(rng), int(rng.integers(1000)), int(rng.integers(2)),
                     int(rng.integers(1, 3))))
    # sequential reference
    ref = [b.copy() for b in init]
    for name, bx, vx, by, vy, c, _, _ in plan:
        x, y = vx(ref[bx]), vy(ref[by])
        if name == "self":
            op_self(y, y, c)
        else:
            OPS[name](x.copy(), y, c)
    # on the chip
    bases = [b.copy() for b in init]
    with pto.Chip(clusters=3, schedulers=2) as chip:
        ks = {n: chip.kernel(make_kernel(f), name="diff_" + n) for n, f in OPS.items()}

        def orch(o):
            for name, bx, vx, by, vy, c, nap, blocks in plan:
                y = vy(bases[by])
                if name == "self":
                    o.submit(ks[name], pto.InOut(y), scalars=[c, nap], block_num=blocks)
                else:
                    mode = pto.InOut if name == "update" else pto.Out
                    o.submit(ks[name], pto.In(vx(bases[bx])), mode(y), scalars=[c, nap],
                             block_num=blocks)

        chip.run(orch)
    for i in range(2):
        assert_array(bases[i], ref[i], f"seed {seed} base {i}")
