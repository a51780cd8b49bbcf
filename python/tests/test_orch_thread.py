"""An Orch takes calls only from the thread running its orchestration
function (docs/python.md, "Chips and runs"). From another thread, submit
(and scope, read, write, wait) raises InvalidArgumentError, does nothing,
and fails the run naming the rule: 4 threads submitting on one Orch once
gave wrong arrays or a hang. A Node's NodeOrch follows the same rule
(below)."""
import threading
import time

import numpy as np
import pytest

import pto
from conftest import DEVICE_IDS, assert_array


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
    (lambda o, a: o.batch().__enter__(), "pto_orch_batch_begin"),
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


def test_orch_kept_past_its_run_and_used_on_another_thread():
    """After the run, an Orch is refused as used after its run from any
    thread. Before, from another thread it was refused as a call from the
    wrong thread that 'fails the run', of a run that had ended."""
    with pto.Chip(clusters=1, schedulers=1) as chip:
        inc = chip.kernel(inc_)
        a = np.zeros(4, np.float32)
        kept = []
        chip.run(lambda o: kept.append(o))
        seen = {}

        def other():
            try:
                kept[0].submit(inc, pto.InOut(a))
            except pto.Error as e:
                seen["e"] = e

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert isinstance(seen["e"], pto.InvalidArgumentError)
        assert "pto.Orch used after its orchestration function returned" in seen["e"].details
        chip.run(lambda o: o.submit(inc, pto.InOut(a)))
        assert_array(a, np.ones(4, np.float32), "the next run's array")


# ---- a Node's orchestrator (pto.NodeOrch): the same rule ----
# (docs/python.md, "One thread orchestrates"; pto's own rule for node
# orchestrators: docs/node.md). Before, a NodeOrch had no thread check: a
# call from another thread did its Python work there (arguments, the
# run's lists) and reached C with the handle, which failed the run but
# raised only "submit 'inc' on chips [0]" in that thread; a call racing
# the orchestration's return could reach C after the node was freed.

def host_inc(ctx, x):
    x += 1


@pytest.fixture(scope="module")
def node():
    with pto.Node(2, {"inc": inc_}, host_fns={"inc": host_inc}, nworkers=1,
                  device_ids=DEVICE_IDS["thread"][:2], clusters=1, schedulers=1, quiet=True,
                  lease_wait_ms=60000) as n:
        yield n


class Spy:
    """An int argument that records whether anything read it."""

    def __init__(self, value):
        self.value, self.read = value, False

    def __index__(self):
        self.read = True
        return self.value


SB = 1024  # the scratch buffer of the owner's domain (>= coll_scratch_bytes(2, 64))


def _coll(name, **kw):
    return lambda no, node, dom, x, s: getattr(no, name)(dom, "scratch", [x[0], x[1]],
                                                        [x[2], x[3]], **kw)


# method -> (the C call it stands for, the call made from another thread;
# s: a Spy among its arguments where it takes an int)
NODE_CALLS = {
    "domain": ("domain_create", lambda no, node, dom, x, s: no.domain([0, 1], {"y": s})),
    "window": ("window_tensor", lambda no, node, dom, x, s: no.window(dom, 0, "scratch",
                                                                      np.float32, [s])),
    "submit": ("submit", lambda no, node, dom, x, s: no.submit(0, node.kernels["inc"],
                                                               pto.InOut(x[0]), scalars=[s])),
    "submit_group": ("submit_group", lambda no, node, dom, x, s: no.submit_group(
        [0, 1], node.kernels["inc"], [[pto.InOut(x[0])], [pto.InOut(x[1])]], scalars=[s])),
    "submit_host": ("submit_host", lambda no, node, dom, x, s: no.submit_host(
        "inc", pto.InOut(x[0]), scalars=[s])),
    "submit_host(read_check=False)": ("submit_host", lambda no, node, dom, x, s: no.submit_host(
        "inc", pto.InOut(x[0]), scalars=[s], read_check=False)),
    "wait_all": ("wait_all", lambda no, node, dom, x, s: no.wait_all()),
    "read": ("read", lambda no, node, dom, x, s: no.read(x[0])),
    "allreduce": ("allreduce", _coll("allreduce")),
    "allgather": ("allgather", _coll("allgather")),
    "reduce_scatter": ("reduce_scatter", _coll("reduce_scatter")),
    "broadcast": ("broadcast", lambda no, node, dom, x, s: no.broadcast(
        dom, "scratch", [x[0], x[1]], [x[2], x[3]], root=s)),
    "alltoall": ("alltoall", _coll("alltoall")),
}


@pytest.mark.parametrize("method", list(NODE_CALLS))
def test_node_each_call_from_another_thread(node, method):
    c_name, call = NODE_CALLS[method]
    own = node.host_array(16)
    x = node.host_array((4, 16))
    x[:] = 5
    spy = Spy(0 if method == "broadcast" else 16)
    seen = {}

    def other(no, dom):
        try:
            call(no, node, dom, x, spy)
        except pto.Error as e:
            seen["e"] = e

    def orch(no):
        dom = no.domain([0, 1], {"scratch": SB})
        no.submit(0, node.kernels["inc"], pto.InOut(own))
        t = threading.Thread(target=other, args=(no, dom))
        t.start()
        t.join()

    with pytest.raises(pto.InvalidArgumentError,
                       match=f"pto_node_{c_name} was called from a thread other than the one "
                             "running the node's orchestration"):
        node.run(orch)
    e = seen.get("e")
    assert isinstance(e, pto.InvalidArgumentError), e
    name = method.split("(")[0]
    assert (f"NodeOrch.{name} called from a thread other than the one running the "
            "orchestration function: a NodeOrch takes calls from that thread only") in e.details
    assert not spy.read, "the call's arguments were read on the other thread"
    assert_array(x, np.full((4, 16), 5, np.float32), "the other thread's arrays")
    assert_array(own, np.ones(16, np.float32), "the owner's array")
    # the node runs again, correctly
    node.run(lambda no: no.submit_group([0, 1], node.kernels["inc"],
                                        [[pto.InOut(x[0])], [pto.InOut(x[1])]]))
    assert_array(x[:2], np.full((2, 16), 6, np.float32), "the next run's arrays")


def test_node_call_racing_the_orchestrations_return(node):
    """Another thread calls submit while the orchestration function returns:
    either the call comes first (refused, the run fails naming the rule) or
    the return does (refused as used after its run; the run passes). Which
    one, the run's outcome and the thread's error always agree."""
    a = node.host_array(16)
    b = node.host_array(16)
    for i in range(40):
        seen = {}
        calling = threading.Event()

        delay = 1e-4 * (i % 3)  # one side or the other waits a little

        def other(no):
            calling.set()
            if i % 2:
                time.sleep(delay)
            try:
                no.submit(1, node.kernels["inc"], pto.InOut(b))
            except pto.Error as e:
                seen["e"] = e

        box = []

        def orch(no):
            no.submit(0, node.kernels["inc"], pto.InOut(a))
            t = threading.Thread(target=other, args=(no,))
            t.start()
            box.append(t)
            calling.wait()
            if not i % 2:
                time.sleep(delay)

        try:
            node.run(orch)
            failed = False
        except pto.InvalidArgumentError as e:
            assert "pto_node_submit was called from a thread other than" in e.details
            failed = True
        box[0].join()
        e = seen.get("e")
        assert isinstance(e, pto.InvalidArgumentError), e
        if failed:
            assert "NodeOrch.submit called from a thread other than" in e.details
        else:
            assert "pto.NodeOrch used after its orchestration function returned" in e.details
        assert_array(a, np.full(16, i + 1, np.float32), f"run {i}: the owner's array")
        assert_array(b, np.zeros(16, np.float32), f"run {i}: the other thread's array")


_NODE_FOREIGN_AFTER_CLOSE = r"""
import sys, threading, time
import pto

def inc(ctx, x):
    x += 1

node = pto.Node(1, {"inc": inc}, device_ids=[int(sys.argv[1])], clusters=1, schedulers=1,
                quiet=True, lease_wait_ms=60000)
k = node.kernels["inc"]
inside, closed, done = threading.Event(), threading.Event(), threading.Event()
seen = {}

class Slow:
    def __index__(self):  # read on the other thread, the handle in hand
        inside.set()
        closed.wait(10)
        return 1

def other(no):
    try:
        no.submit(0, k, scalars=[Slow()])
    except pto.Error as e:
        seen["e"] = e
    finally:
        done.set()

def orch(no):
    threading.Thread(target=other, args=(no,), daemon=True).start()
    while not (inside.is_set() or done.is_set()):
        time.sleep(0.001)

try:
    node.run(orch)
    print("run passed")
except pto.Error as e:
    print("run failed:", e.details)
node.close()
closed.set()
done.wait(10)
print("thread:", seen["e"].details.split(":")[0] if "e" in seen else None)
"""


def test_node_call_from_another_thread_never_uses_a_freed_node():
    """Before: the other thread's submit took the handle, then read its
    arguments (here a scalar that waits until the node is closed) and
    passed the handle of a freed node to C (a crash with freed memory
    scribbled over: MALLOC_PERTURB_). Now it is refused before it reads
    anything, and the run fails."""
    import subprocess
    import sys
    from close_first import env
    e = env()
    e["MALLOC_PERTURB_"] = "165"
    r = subprocess.run([sys.executable, "-c", _NODE_FOREIGN_AFTER_CLOSE,
                        str(DEVICE_IDS["thread"][2])], capture_output=True, text=True,
                       timeout=120, env=e)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.splitlines() == [
        "run failed: pto_node_submit was called from a thread other than the one running the "
        "node's orchestration; a node orchestrator takes calls from its own thread only",
        "thread: NodeOrch.submit called from a thread other than the one running the "
        "orchestration function"], r.stdout


def test_node_orch_kept_past_its_run(node):
    """A NodeOrch kept past its run is refused, on its own thread and on
    another, and a call of it from another thread during a later run does
    not touch that run."""
    a = node.host_array(16)
    kept = []
    node.run(lambda no: kept.append(no))
    old = kept[0]
    with pytest.raises(pto.InvalidArgumentError,
                       match="pto.NodeOrch used after its orchestration function returned"):
        old.submit(0, node.kernels["inc"], pto.InOut(a))
    seen = {}

    def other():
        try:
            old.submit(0, node.kernels["inc"], pto.InOut(a))
        except pto.Error as e:
            seen["e"] = e

    def orch(no):
        no.submit(1, node.kernels["inc"], pto.InOut(a))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        no.submit(0, node.kernels["inc"], pto.InOut(a))

    node.run(orch)
    assert isinstance(seen["e"], pto.InvalidArgumentError)
    assert "pto.NodeOrch used after its orchestration function returned" in seen["e"].details
    assert_array(a, np.full(16, 2, np.float32), "the later run's array")
