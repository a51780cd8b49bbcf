"""A failed run leaves nothing behind: after each way a run of a Chip or a
Node can fail (a kernel raising, the orchestration function raising, a
KeyboardInterrupt, a refused submit, a failed capture, a refused launch, a
reduction op raising, a host function raising, a refused collective), the
next run on the same object succeeds and computes the right data, with the
same kernels, ops, graphs and host arrays."""
import numpy as np
import pytest

import pto
from conftest import DEVICE_IDS, assert_array


def inc_(ctx, x):
    x += 1


def fail_if_(ctx, x):
    """x += 1, or raise when scalar 0 is 1."""
    if ctx.scalar_i64(0) == 1:
        raise RuntimeError("this task fails")
    x += 1


def interrupt_(ctx, x):
    raise KeyboardInterrupt


def put_(ctx, acc):
    acc += np.float32(ctx.scalar_i64(0))


# ---- Chip ----

@pytest.fixture
def chip():
    with pto.Chip(clusters=2, schedulers=1, task_slots=64, heap_bytes=1 << 20,
                  watchdog_ms=20000) as c:
        yield c


def the_next_run(chip, label):
    """A run touching what the failed one used: kernels, a scope with a
    runtime-allocated output, a chain of dependent tasks, a host read."""
    inc, add = chip.kernel(inc_), chip.kernel("add")
    a = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    seen = []

    def orch(o):
        with o.scope():
            t = o.submit(add, pto.In(a), pto.In(a), pto.New(64)).output
            for _ in range(20):
                o.submit(inc, pto.InOut(t))
            o.submit(add, pto.In(t), pto.In(a), pto.Out(y))
        seen.append(o.read(y))

    chip.run(orch)
    assert_array(y, 3 * a + 20, f"{label}: the next run's output")
    assert_array(seen[0], 3 * a + 20, f"{label}: the next run's read")


def test_chip_after_a_kernel_raising(chip):
    k = chip.kernel(fail_if_)
    x = np.zeros(16, np.float32)

    def orch(o):
        for i in range(30):
            o.submit(k, pto.InOut(x), scalars=[1 if i == 10 else 0])

    with pytest.raises(pto.KernelError):
        chip.run(orch)
    before = x.copy()
    assert before[0] <= 10  # nothing after the failed task ran
    chip.run(lambda o: [o.submit(k, pto.InOut(x), scalars=[0]) for _ in range(30)])
    assert_array(x, before + 30, "the same kernel on the same array")
    the_next_run(chip, "after a kernel raising")


def test_chip_after_the_orchestration_raising_inside_a_scope(chip):
    inc = chip.kernel(inc_)
    x = np.zeros(16, np.float32)

    def orch(o):
        with o.scope(manual=True):
            t = o.submit(inc, pto.New(16)).output
            o.submit(inc, pto.InOut(t))
            raise ValueError("the orchestration fails with a scope open")

    with pytest.raises(ValueError, match="scope open"):
        chip.run(orch)
    chip.run(lambda o: [o.submit(inc, pto.InOut(x)) for _ in range(5)])
    assert_array(x, np.full(16, 5, np.float32), "after the orchestration raised")
    the_next_run(chip, "after the orchestration raised")


@pytest.mark.parametrize("where", ["orchestration", "kernel"])
def test_chip_after_a_keyboard_interrupt(chip, where):
    intr = chip.kernel(interrupt_)
    inc = chip.kernel(inc_)
    x = np.zeros(16, np.float32)

    def orch(o):
        o.submit(inc, pto.InOut(x))
        if where == "kernel":
            o.submit(intr, pto.InOut(x))
            o.submit(inc, pto.InOut(x))
        else:
            raise KeyboardInterrupt

    with pytest.raises((KeyboardInterrupt, pto.KernelError)):
        chip.run(orch)
    x[:] = 0
    chip.run(lambda o: [o.submit(inc, pto.InOut(x)) for _ in range(7)])
    assert_array(x, np.full(16, 7, np.float32), f"after a KeyboardInterrupt in the {where}")
    the_next_run(chip, f"after a KeyboardInterrupt in the {where}")


@pytest.mark.parametrize("bad", ["dtype", "read_only", "kernel_of_another_chip", "caught"])
def test_chip_after_a_refused_submit(chip, bad):
    add, inc = chip.kernel("add"), chip.kernel(inc_)
    a = np.ones(16, np.float32)
    ro = np.ones(16, np.float32)
    ro.flags.writeable = False
    x = np.zeros(16, np.float32)

    with pto.Chip(clusters=1) as other:
        theirs = other.kernel(inc_)

        def orch(o):
            o.submit(inc, pto.InOut(x))
            if bad == "dtype":
                o.submit(add, pto.In(a), pto.In(np.ones(16, np.int8)), pto.Out(x))
            elif bad == "read_only":
                o.submit(inc, pto.InOut(ro))
            elif bad == "caught":  # the orchestration goes on: the run fails all the same
                try:
                    o.submit(add, pto.In(a), pto.In(np.ones(16, np.int8)), pto.Out(x))
                except pto.InvalidArgumentError:
                    pass
                o.submit(inc, pto.InOut(x))
            else:
                o.submit(theirs, pto.InOut(x))

        with pytest.raises(pto.Error):
            chip.run(orch)
    x[:] = 0
    chip.run(lambda o: (o.submit(inc, pto.InOut(x)), o.submit(add, pto.In(x), pto.In(a),
                                                               pto.Out(x))))
    assert_array(x, np.full(16, 2, np.float32), f"after a refused submit ({bad})")
    the_next_run(chip, f"after a refused submit ({bad})")


def _program(o, a, y, k_add, k_inc):
    with o.scope():
        t = o.submit(k_add, pto.In(a), pto.In(a), pto.New(a.shape)).output
        o.submit(k_inc, pto.InOut(t))
        o.submit(k_add, pto.In(t), pto.In(a), pto.Out(y))


@pytest.mark.parametrize("how", ["kernel", "orchestration", "host_read", "interrupt", "ring"])
def test_chip_after_a_failed_capture(chip, how):
    add, inc, fail = chip.kernel("add"), chip.kernel(inc_), chip.kernel(fail_if_)
    a = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    good = chip.capture(_program, a, y, add, inc)  # a graph from before the failure
    assert_array(y, 3 * a + 1, "the first capture's run")

    def bad(o):
        _program(o, a, y, add, inc)
        if how == "kernel":
            o.submit(fail, pto.InOut(y), scalars=[1])
        elif how == "orchestration":
            raise ValueError("the capture's orchestration fails")
        elif how == "host_read":
            o.read(y)
        elif how == "ring":  # more tasks than task_slots: a graph holds them all at once
            for _ in range(80):
                o.submit(inc, pto.InOut(y))
        else:
            raise KeyboardInterrupt

    with pytest.raises((pto.Error, ValueError, KeyboardInterrupt)):
        chip.capture(bad)
    a2 = np.full(32, 2, np.float32)
    y2 = np.zeros(32, np.float32)
    chip.launch(good, [a2, y2])
    assert_array(y2, 3 * a2 + 1, f"a graph captured before the failed capture ({how})")
    g = chip.capture(_program, a, y, add, inc)
    a3 = np.full(32, 5, np.float32)
    y3 = np.zeros(32, np.float32)
    chip.launch(g, [a3, y3])
    assert_array(y3, 3 * a3 + 1, f"a graph captured after the failed capture ({how})")
    the_next_run(chip, f"after a failed capture ({how})")


@pytest.mark.parametrize("how", ["shape", "read_only", "dtype", "scalars", "kernel"])
def test_chip_after_a_refused_or_failed_launch(chip, how):
    add, inc, fail = chip.kernel("add"), chip.kernel(inc_), chip.kernel(fail_if_)
    a = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    s = np.zeros(32, np.float32)

    def prog(o, a, y, s, flag):
        _program(o, a, y, add, inc)
        o.submit(fail, pto.InOut(s), scalars=[flag])

    g = chip.capture(prog, a, y, s, 0)
    y2 = np.zeros(32, np.float32)
    if how == "shape":
        bind, sc = [np.zeros(16, np.float32), y2, s], None
    elif how == "read_only":
        ro = np.zeros(32, np.float32)
        ro.flags.writeable = False
        bind, sc = [a, ro, s], None
    elif how == "dtype":
        bind, sc = [a, np.zeros(32, np.int32), s], None
    elif how == "scalars":
        bind, sc = [a, y2, s], [1, 2]
    else:
        bind, sc = [a, y2, s], [1]  # the last task raises
    with pytest.raises(pto.Error):
        chip.launch(g, bind, scalars=sc)
    a3 = np.full(32, 4, np.float32)
    y3 = np.zeros(32, np.float32)
    s3 = np.zeros(32, np.float32)
    chip.launch(g, [a3, y3, s3], scalars=[0])
    assert_array(y3, 3 * a3 + 1, f"the next launch ({how})")
    assert_array(s3, np.ones(32, np.float32), f"the next launch's last task ({how})")
    the_next_run(chip, f"after a refused launch ({how})")


@pytest.mark.parametrize("how", ["kernel", "combine", "init"])
def test_chip_after_a_failed_run_of_reductions(chip, how):
    put, fail = chip.kernel(put_), chip.kernel(fail_if_)
    state = {"raise": how}

    def init(dst):
        if state["raise"] == "init":
            raise ValueError("no init today")
        dst[:] = 0

    def combine(acc, src):
        if state["raise"] == "combine":
            raise ValueError("no combine today")
        return acc + src

    op = chip.redux_op("mysum", np.float32, init, combine)
    acc = np.zeros(8, np.float32)

    def orch(o, acc, fail_at):
        for i in range(12):
            o.submit(put, pto.Redux(acc, op), scalars=[i])
            if i == fail_at:
                o.submit(fail, pto.InOut(np.zeros(1, np.float32)), scalars=[1])

    with pytest.raises(pto.Error):
        chip.run(orch, acc, 5 if how == "kernel" else -1)
    state["raise"] = None
    acc2 = np.full(8, 3, np.float32)
    chip.run(orch, acc2, -1)
    assert_array(acc2, np.full(8, 3 + sum(range(12)), np.float32),
                 f"the op's next reduction (after its {how} failed)")
    acc3 = np.full(8, 1, np.float32)
    chip.run(lambda o: [o.submit(put, pto.Redux(acc3, "sum"), scalars=[i]) for i in range(5)])
    assert_array(acc3, np.full(8, 11, np.float32), f"a built-in op's (after {how})")
    the_next_run(chip, f"after a failed reduction ({how})")


def test_chip_in_checking_mode_after_a_contract_error():
    """The next run's ContractError names the next run's array, and a
    correct run after it passes with the right data."""
    a = np.arange(8, dtype=np.float32)
    with pto.Chip(clusters=1, check=True) as chip:
        add = chip.kernel("add")
        for rnd in range(2):
            y = np.zeros(8, np.float32)
            with pytest.raises(pto.ContractError) as e:
                chip.run(lambda o: o.submit(add, pto.In(a), pto.In(a), pto.In(y)))
            assert e.value.array is y and e.value.arg == 2, rnd
        y = np.zeros(8, np.float32)
        chip.run(lambda o: o.submit(add, pto.In(a), pto.In(a), pto.Out(y)))
        assert_array(y, 2 * a, "the correct run after two contract errors")


# ---- Node ----

def host_inc(ctx, x):
    if ctx.scalars and ctx.scalars[0] == 1:
        raise OSError("this host task fails")
    x += 1


@pytest.fixture(scope="module")
def node():
    with pto.Node(2, {"inc": inc_, "fail": fail_if_, "intr": interrupt_, "add": "add"},
                  host_fns={"inc": host_inc}, nworkers=1,
                  device_ids=DEVICE_IDS["thread"][:2], clusters=1, schedulers=1, quiet=True,
                  lease_wait_ms=60000, startup_timeout_ms=30000, wait_timeout_ms=10000,
                  host_bytes=4 << 20, window_space=64 << 20) as n:
        yield n


def node_next_run(node, label):
    """Every kind of node call: a domain (its window zeroed), a group task,
    a host task, a collective, a read."""
    src = node.host_array((2, 64))
    src[:] = np.arange(64) * (1 + np.arange(2)[:, None])
    dst = node.host_array((2, 64))
    y = node.host_array((2, 64))
    seen = {}

    def orch(no):
        dom = no.domain([0, 1], {"scratch": pto.coll_scratch_bytes(2, 64 * 4), "w": 64 * 4})
        seen["w"] = no.read(no.window(dom, 1, "w", np.float32, 64))
        no.allreduce(dom, "scratch", [dst[0], dst[1]], [src[0], src[1]])
        no.submit_group([0, 1], node.kernels["add"],
                        [[pto.In(dst[r]), pto.In(src[r]), pto.Out(y[r])] for r in range(2)])
        no.submit_host("inc", pto.InOut(y[0]), scalars=[0])
        no.submit(1, node.kernels["inc"], pto.InOut(y[1]))
        seen["y"] = no.read(y)

    node.run(orch)
    total = src[0] + src[1]
    want = np.stack([total + src[0] + 1, total + src[1] + 1])
    assert_array(seen["w"], np.zeros(64, np.float32), f"{label}: a new domain's window")
    assert_array(y, want, f"{label}: the next run's output")
    assert_array(seen["y"], want, f"{label}: the next run's read")


def test_node_after_a_chip_kernel_raising(node):
    x = node.host_array((2, 16))

    def orch(no):
        for i in range(6):
            no.submit_group([0, 1], node.kernels["fail"], [[pto.InOut(x[0])], [pto.InOut(x[1])]],
                            scalars=[1 if i == 3 else 0])

    with pytest.raises(pto.Error):
        node.run(orch)
    x[:] = 0
    node.run(lambda no: [no.submit(r, node.kernels["fail"], pto.InOut(x[r]), scalars=[0])
                         for r in (0, 1, 0)])
    assert_array(x, np.stack([np.full(16, 2), np.full(16, 1)]).astype(np.float32),
                 "the same kernel after it raised")
    node_next_run(node, "after a chip kernel raising")


def test_node_after_a_host_function_raising(node):
    x = node.host_array(16)

    def orch(no):
        no.submit_host("inc", pto.InOut(x), scalars=[0])
        no.submit_host("inc", pto.InOut(x), scalars=[1])
        no.submit_host("inc", pto.InOut(x), scalars=[0])

    with pytest.raises(pto.KernelError, match="this host task fails"):
        node.run(orch)
    x[:] = 0
    node.run(lambda no: [no.submit_host("inc", pto.InOut(x), scalars=[0]) for _ in range(3)])
    assert_array(x, np.full(16, 3, np.float32), "the same host function after it raised")
    node_next_run(node, "after a host function raising")


@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
def test_node_after_the_orchestration_raising(node, exc):
    x = node.host_array((2, 16))

    def orch(no):
        dom = no.domain([0, 1], {"w": 64})
        no.submit_group([0, 1], node.kernels["inc"],
                        [[pto.InOut(no.window(dom, r, "w", np.float32, 16))] for r in range(2)])
        no.submit(0, node.kernels["inc"], pto.InOut(x[0]))
        raise exc("the node orchestration fails")

    with pytest.raises(exc):
        node.run(orch)
    x[:] = 0
    node.run(lambda no: [no.submit(r, node.kernels["inc"], pto.InOut(x[r])) for r in (0, 1)])
    assert_array(x, np.ones((2, 16), np.float32), f"after {exc.__name__}")
    node_next_run(node, f"after the orchestration raised {exc.__name__}")


def test_node_after_a_kernel_raising_keyboard_interrupt(node):
    x = node.host_array(16)
    with pytest.raises(pto.Error):
        node.run(lambda no: (no.submit(0, node.kernels["intr"], pto.InOut(x)),
                             no.submit(0, node.kernels["inc"], pto.InOut(x))))
    x[:] = 0
    node.run(lambda no: no.submit(0, node.kernels["inc"], pto.InOut(x)))
    assert_array(x, np.ones(16, np.float32), "after a chip kernel's KeyboardInterrupt")
    node_next_run(node, "after a chip kernel's KeyboardInterrupt")


@pytest.mark.parametrize("bad", ["chip_index", "new", "read_only", "coll_scratch",
                                 "coll_domain", "window_name", "domain_chip", "caught"])
def test_node_after_a_refused_call(node, bad):
    x = node.host_array((2, 16))
    ro = node.host_array(16)
    ro.flags.writeable = False

    def orch(no):
        dom = no.domain([0, 1], {"scratch": pto.coll_scratch_bytes(2, 64)})
        no.submit(0, node.kernels["inc"], pto.InOut(x[0]))
        if bad == "chip_index":
            no.submit(5, node.kernels["inc"], pto.InOut(x[1]))
        elif bad == "new":
            no.submit(0, node.kernels["inc"], pto.New(16))
        elif bad == "read_only":
            no.submit(0, node.kernels["inc"], pto.InOut(ro))
        elif bad == "coll_scratch":
            no.allreduce(dom, "nope", [x[0], x[1]], [x[0], x[1]])
        elif bad == "coll_domain":
            no.allreduce(dom + 7, "scratch", [x[0], x[1]], [x[0], x[1]])
        elif bad == "window_name":
            no.window(dom, 0, "nope", np.float32, 4)
        elif bad == "caught":  # the orchestration goes on: the run fails all the same
            try:
                no.submit(5, node.kernels["inc"], pto.InOut(x[1]))
            except pto.InvalidArgumentError:
                pass
            no.submit(1, node.kernels["inc"], pto.InOut(x[1]))
        else:
            no.domain([0, 9], {"s": 64})

    with pytest.raises(pto.Error):
        node.run(orch)
    x[:] = 0
    node.run(lambda no: [no.submit(r, node.kernels["inc"], pto.InOut(x[r])) for r in (0, 1)])
    assert_array(x, np.ones((2, 16), np.float32), f"after a refused call ({bad})")
    node_next_run(node, f"after a refused call ({bad})")
