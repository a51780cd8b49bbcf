"""An Orch takes calls only from the thread running its orchestration
function (docs/python.md, "Chips and runs"). From another thread, submit
(and scope, read, write, wait) raises InvalidArgumentError, does nothing,
and fails the run naming the rule: 4 threads submitting on one Orch once
gave wrong arrays or a hang."""
import threading

import numpy as np
import pytest

import pto
from conftest import assert_array


@pytest.fixture
def chip():
    with pto.Chip(clusters=2, schedulers=1, watchdog_ms=20000) as c:
        yield c


def inc_(ctx, x):
    x += 1


def test_submits_from_four_threads(chip):
    inc = chip.kernel(inc_)
    own = np.zeros(64, np.float32)
    theirs = [np.zeros(64, np.float32) for _ in range(4)]
    errors = [None] * 4
    state = {}

    def other(i, o):
        try:
            for _ in range(50):
                o.submit(inc, pto.InOut(theirs[i]))
        except pto.Error as e:
            errors[i] = e

    def orch(o):
        ts = [threading.Thread(target=other, args=(i, o)) for i in range(4)]
        for t in ts:
            t.start()
        n = 0
        try:
            for _ in range(200):
                o.submit(inc, pto.InOut(own))
                n += 1
        except pto.Error:
            pass  # the run failed meanwhile: later submits are refused
        for t in ts:
            t.join()
        state["owner_submits"] = n
        state["status"] = o.status

    with pytest.raises(pto.InvalidArgumentError,
                       match="pto_submit called from a thread other than the one running the "
                             "orchestration function"):
        chip.run(orch)
    for i, e in enumerate(errors):
        assert isinstance(e, pto.InvalidArgumentError), (i, e)
        assert "Orch.submit called from a thread other than" in e.details
        assert_array(theirs[i], np.zeros(64, np.float32), f"array of thread {i}")
    assert state["status"] == -1
    # the owner's tasks ran in order, none twice: the count is a prefix
    assert 0 <= own[0] <= state["owner_submits"]
    assert_array(own, np.full(64, own[0], np.float32), "owner's array")
    # the chip runs again, correctly
    b = np.zeros(64, np.float32)
    chip.run(lambda o: [o.submit(inc, pto.InOut(b)) for _ in range(30)])
    assert_array(b, np.full(64, 30, np.float32), "after the refused run")


@pytest.mark.parametrize("call,c_name", [
    (lambda o, a: o.dummy(pto.In(a)), "pto_submit_dummy"),
    (lambda o, a: o.scope().__enter__(), "pto_scope_begin"),
    (lambda o, a: o.read(a), "pto_orch_read"),
    (lambda o, a: o.write(a, 1.0), "pto_orch_write"),
    (lambda o, a: o.wait(0), "pto_orch_wait_task"),
])
def test_each_call_from_another_thread(chip, call, c_name):
    inc = chip.kernel(inc_)
    a = np.zeros(8, np.float32)
    seen = {}

    def other(o):
        try:
            call(o, a)
        except pto.Error as e:
            seen["e"] = e
        seen["status"] = o.status  # status: from any thread

    def orch(o):
        o.submit(inc, pto.InOut(a))
        t = threading.Thread(target=other, args=(o,))
        t.start()
        t.join()

    with pytest.raises(pto.InvalidArgumentError, match=c_name + " called from a thread other"):
        chip.run(orch)
    assert isinstance(seen["e"], pto.InvalidArgumentError)
    assert "called from a thread other than" in seen["e"].details
    assert seen["status"] == -1
