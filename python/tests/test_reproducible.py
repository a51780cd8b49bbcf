"""Reproducible reductions from Python (PTO_RED_REPRODUCIBLE, docs/comm.md):
with reproducible=True an f32 sum over 3 chips is the rank-order sum, bit
for bit, on every rank and whichever algorithm runs it; the data are
chosen so that another order gives another sum."""
import numpy as np
import pytest

import pto
from conftest import DEVICE_IDS, assert_array

NR = 3


def rank_order_sum(src):
    acc = src[0].copy()
    for r in range(1, NR):
        acc = (acc + src[r]).astype(np.float32)
    return acc


@pytest.mark.parametrize("count", [64, 16384], ids=["small", "ring_size"])
def test_reproducible_allreduce_is_the_rank_order_sum(count):
    with pto.Node(NR, {}, device_ids=DEVICE_IDS["repro"], clusters=1, schedulers=1,
                  task_slots=256, heap_bytes=1 << 20, host_bytes=8 << 20,
                  window_space=64 << 20, lease_wait_ms=60000, quiet=True) as node:
        src = node.host_array((NR, count))
        # (1e8 + -1e8) + 1 = 1, but 1e8 + (-1e8 + 1) = 0 in f32: the order shows
        src[0], src[1], src[2] = 1e8, -1e8, 1.0
        src[:, 1::2] = np.float32(0.5) * np.arange(1, NR + 1)[:, None]
        dst = node.host_array((NR, count))
        want = rank_order_sum(src)
        assert want[0] == np.float32(1.0)
        scratch = pto.coll_scratch_bytes(NR, count * 4)
        for algo in ("auto", "mesh", "ring", "mpi"):
            dst[:] = 0

            def orch(no):
                dom = no.domain(list(range(NR)), {"scratch": scratch})
                no.allreduce(dom, "scratch", [dst[r] for r in range(NR)],
                             [src[r] for r in range(NR)], op="sum", algo=algo,
                             reproducible=True)

            node.run(orch)
            for r in range(NR):
                assert_array(dst[r], want, f"rank {r}, algo {algo}, {count} elements")
        src = dst = None  # Node.close refuses while host arrays live


def test_reproducible_must_be_a_bool():
    with pto.Node(NR, {}, device_ids=DEVICE_IDS["repro"], clusters=1, schedulers=1,
                  task_slots=256, heap_bytes=1 << 20, host_bytes=4 << 20,
                  window_space=16 << 20, lease_wait_ms=60000, quiet=True) as node:
        a = node.host_array((NR, 4))

        def orch(no):
            dom = no.domain(list(range(NR)), {"scratch": pto.coll_scratch_bytes(NR, 16)})
            no.allreduce(dom, "scratch", [a[r] for r in range(NR)], [a[r] for r in range(NR)],
                         reproducible="yes")

        with pytest.raises(pto.InvalidArgumentError, match="reproducible = 'yes' is not a bool"):
            node.run(orch)
        a = None
