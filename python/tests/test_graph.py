"""Captured graphs: Chip.capture records a real run, Chip.launch replays it
with new arrays and scalars; refusals raise GraphError and run nothing."""
import numpy as np
import pytest

import pto
from conftest import assert_array


def program(o, a, b, y, alpha):
    """t = a + b (runtime-allocated, in a scope); y = t * alpha; y = y + a."""
    add, scale = KERNELS["add"], KERNELS["scale"]
    with o.scope():
        t = o.submit(add, pto.In(a), pto.In(b), pto.New(a.shape, a.dtype)).output
        o.submit(scale, pto.In(t), pto.Out(y), scalars=[alpha])
    o.submit(add, pto.In(y), pto.In(a), pto.Out(y))


def expected(a, b, alpha):
    return ((a + b) * np.float32(alpha) + a).astype(np.float32)


KERNELS = {}


@pytest.fixture
def chip():
    with pto.Chip(clusters=2, schedulers=1, task_slots=64) as c:
        KERNELS["add"], KERNELS["scale"] = c.kernel("add"), c.kernel("scale")
        yield c


def arrays(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 32)).astype(np.float32),
            rng.standard_normal((16, 32)).astype(np.float32), np.zeros((16, 32), np.float32))


def test_capture_then_launch_with_new_arrays(chip):
    a, b, y = arrays(1)
    g = chip.capture(program, a, b, y, 2.0)
    assert_array(y, expected(a, b, 2.0), "the capture's own run")
    assert (g.tasks, g.edges, g.scalars) == (3, 2, 1)
    assert len(g.buffers) == 3 and g.buffers[0] is a and g.buffers[1] is b and g.buffers[2] is y
    for seed in (2, 3, 4):
        a2, b2, y2 = arrays(seed)
        st = chip.launch(g, [a2, b2, y2], scalars=[0.5 * seed])
        assert st.tasks == 3
        assert_array(y2, expected(a2, b2, 0.5 * seed), f"launch {seed}")
    a3, b3, y3 = arrays(5)  # by index, one kept; the captured scalars
    b[:] = b3
    chip.launch(g, {g.index(a): a3, g.index(y): y3})
    assert_array(y3, expected(a3, b3, 2.0), "launch by index")
    a[:] = 1.0  # as captured: the captured arrays' new contents
    chip.launch(g)
    assert_array(y, expected(a, b, 2.0), "launch as captured")
    g.close()


def test_refused_launches_run_nothing(chip):
    a, b, y = arrays(1)
    g = chip.capture(program, a, b, y, 2.0)
    a2, b2, y2 = arrays(2)
    y2[:] = 7.0
    with pytest.raises(pto.GraphError) as e:  # a smaller output
        chip.launch(g, [a2, b2, np.zeros((16, 16), np.float32)])
    assert e.value.status == "PTO_EGRAPH" and "captured with 2048" in e.value.details
    with pytest.raises(pto.GraphError, match="bound as i32, captured as f32"):
        chip.launch(g, {2: np.zeros((16, 32), np.int32)})
    with pytest.raises(pto.GraphError, match="overlap .* but were disjoint"):  # y aliases a
        chip.launch(g, [a2, b2, a2])
    with pytest.raises(pto.GraphError, match="bindings give 2 scalars"):
        chip.launch(g, scalars=[1.0, 2.0])
    with pto.Chip(clusters=2, schedulers=1) as other:
        with pytest.raises(pto.GraphError, match="another chip"):
            other.launch(g)
    assert (y2 == 7.0).all()  # nothing ran
    chip.launch(g, [a2, b2, y2])  # and the chip runs on
    assert_array(y2, expected(a2, b2, 2.0), "after the refusals")


def test_capture_refuses_host_access(chip):
    a, b, y = arrays(1)

    def reads(o):
        program(o, a, b, y, 2.0)
        o.read(y)

    with pytest.raises(pto.GraphError, match="pto_orch_read"):
        chip.capture(reads)
    chip.run(program, a, b, y, 3.0)
    assert_array(y, expected(a, b, 3.0), "a run after the refused capture")


def test_python_kernels_launch_with_their_own_scalars(chip):
    """A Python kernel's task carries a hidden scalar of the binding's (which
    tensors are INPUTs): graph.scalars counts and launch takes only the
    caller's own. Before, graph.scalars counted the hidden ones too, and a
    launch with the caller's scalars was refused ("bindings give 1 scalars,
    the graph has 2")."""
    def scale(ctx, x, y):
        if ctx.scalar_f64(0) < 0:
            raise ValueError("asked to fail")
        y[:] = x * np.float32(ctx.scalar_f64(0))
        assert not x.flags.writeable  # the hidden scalar still marks x read-only

    k = chip.kernel(scale, name="scale_py")

    def prog(o, x, y, s, t):
        o.submit(k, pto.In(x), pto.Out(y), scalars=[pto.f64(s)])
        o.submit(KERNELS["scale"], pto.In(y), pto.Out(y), scalars=[t])

    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    g = chip.capture(prog, x, y, 2.0, 3.0)
    assert_array(y, x * 6, "the capture's own run")
    assert g.scalars == 2
    x2, y2 = np.ones(8, np.float32), np.zeros(8, np.float32)
    chip.launch(g, [x2, y2], scalars=[pto.f64(5.0), 0.5])
    assert_array(y2, x2 * 2.5, "a launch with new scalars")
    with pytest.raises(pto.GraphError, match="3 scalars, the graph has 2"):
        chip.launch(g, scalars=[pto.f64(1.0), 1.0, 1.0])
    with pytest.raises(pto.KernelError) as e:  # a launch that fails, then one that runs
        chip.launch(g, [x2, y2], scalars=[pto.f64(-1.0), 1.0])
    assert isinstance(e.value.__cause__, ValueError)
    chip.launch(g, [x2, y2], scalars=[pto.f64(4.0), 2.0])
    assert_array(y2, x2 * 8, "a launch after a failed one")
    g.close()
