"""pto.Commute arguments and submit(priority=...): docs/chip.md, "Commutative
access" and "Priorities"."""
import threading

import numpy as np
import pytest

import pto
from conftest import assert_array


def test_commute_adds_in_any_order_never_at_once():
    """Python kernels add into 4 bins through pto.Commute between InOut
    tasks; each counts itself in while it adds: the sums are the serial
    ones and no bin ever had two tasks inside."""
    lock = threading.Lock()
    inside = [0] * 4
    most = [0] * 4

    def add(ctx, acc):
        b = ctx.scalar_i64(0)
        with lock:
            inside[b] += 1
            most[b] = max(most[b], inside[b])
        acc[0] += ctx.scalar_i64(1)
        with lock:
            inside[b] -= 1

    bins = np.zeros(4, np.int32)
    expect = np.zeros(4, np.int64)
    with pto.Chip(clusters=4, schedulers=2) as chip:
        k_add = chip.kernel(pto.py_kernel(add))

        def orch(o):
            for i in range(200):
                b, v = i % 4, (i * 7) % 13
                o.submit(k_add, pto.Commute(bins[b:b + 1]), scalars=[b, v], priority=i % 4)
                expect[b] += v
            # a plain read after the group waits for all of it
            assert_array(o.read(bins), expect.astype(np.int32), "bins read after the group")

        chip.run(orch)
    assert_array(bins, expect.astype(np.int32), "bins")
    assert most == [1, 1, 1, 1], most


def test_bad_commute_and_priority_are_named():
    a = np.zeros(8, np.int32)
    with pto.Chip(clusters=1) as chip:
        k = chip.kernel(pto.py_kernel(lambda ctx, *t: None))
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, *[pto.Commute(a[i:i + 1]) for i in range(5)]))
        assert "at most 4 COMMUTE arguments" in e.value.details
        with pytest.raises(pto.InvalidArgumentError) as e:
            chip.run(lambda o: o.submit(k, pto.In(a), priority=4))
        assert "priority 4: must be 0..3" in e.value.details
        # past a C int: named as any other (before: a bare OverflowError from cffi)
        for big in (2**31, -2**31 - 1, 2**40):
            with pytest.raises(pto.InvalidArgumentError) as e:
                chip.run(lambda o: o.submit(k, pto.In(a), priority=big))
            assert f"priority {big}, must be" in e.value.details, e.value.details
        chip.run(lambda o: o.submit(k, pto.In(a), priority=3))  # and the next run is fine
