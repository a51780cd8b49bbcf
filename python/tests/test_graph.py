"""Captured graphs: Chip.capture records a real run, Chip.launch replays it
with new arrays and scalars; refusals raise GraphError and run nothing."""
import numpy as np
import pytest

import pto
from close_first import CloseFirst
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
    # each launch followed the last one with no run between: all but the
    # first wrote no task slot
    assert g.launches == (5, 4)
    chip.run(program, a, b, y, 2.0)  # a dynamic run writes the slots
    chip.launch(g)
    assert g.launches == (6, 4)
    chip.launch(g)
    assert_array(y, expected(a, b, 2.0), "warm launch after a cold one")
    assert g.launches == (7, 5)
    g.close()
    with pytest.raises(pto.InvalidArgumentError, match="closed"):
        g.launches


def test_refused_launches_run_nothing(chip):
    a, b, y = arrays(1)
    g = chip.capture(program, a, b, y, 2.0)
    a2, b2, y2 = arrays(2)
    y2[:] = 7.0
    with pytest.raises(pto.GraphError) as e:  # a smaller output
        chip.launch(g, [a2, b2, np.zeros((16, 16), np.float32)])
    assert e.value.status == "PTO_EGRAPH" and "captured as shape (16, 32)" in e.value.details
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


def test_launch_refuses_a_read_only_array_where_a_task_writes(chip, tmp_path):
    """The graph records which buffers its tasks write (Out, InOut,
    Commute, Redux); launch describes a binding of one as its task uses it,
    so a read-only array is refused as Chip.run refuses it. Before, every
    binding was described as an INPUT: a read-only array was written, one
    over a read-only mmap crashed the interpreter."""
    add = KERNELS["add"]
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    g = chip.capture(lambda o, x, y, z: o.submit(add, pto.In(x), pto.In(y), pto.Out(z)),
                     a, b, np.zeros(8, np.float32))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(pto.InvalidArgumentError,
                       match="buffer 2: read-only array passed as Out"):
        chip.launch(g, [a, b, ro])
    assert (ro == 0).all()
    path = tmp_path / "ro.bin"
    np.zeros(8, np.float32).tofile(path)
    mm = np.memmap(path, np.float32, mode="r", shape=(8,))
    with pytest.raises(pto.InvalidArgumentError, match="read-only array passed as Out"):
        chip.launch(g, {2: mm})
    ra = a.copy()
    ra.flags.writeable = False  # read-only where the graph only reads: fine
    y = np.zeros(8, np.float32)
    chip.launch(g, [ra, b, y])
    assert_array(y, a + 1, "a launch after the refusals")
    del mm
    g.close()


def test_launch_refuses_an_array_of_another_layout(chip):
    """A bound array needs the captured one's shape and (element) strides:
    the graph's views address it by the captured offsets. Before, only the
    byte span and dtype were checked: a Fortran-order array got a
    transposed result, a strided view of the same span was written outside
    its elements."""
    copy = chip.kernel(lambda ctx, x, y: y.__setitem__(slice(None), x), name="copy")
    s6 = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = np.zeros((2, 3), np.float32)
    g = chip.capture(lambda o: o.submit(copy, pto.In(s6), pto.Out(m)))
    mf = np.asfortranarray(np.zeros((2, 3), np.float32))
    with pytest.raises(pto.GraphError) as e:
        chip.launch(g, [s6, mf])
    assert ("buffer 1 is bound to an array of shape (2, 3), element strides (1, 2), captured "
            "as shape (2, 3), element strides (3, 1)") in e.value.details, e.value.details
    assert (mf == 0).all()
    with pytest.raises(pto.GraphError, match=r"buffer 1 .* shape \(3, 2\)"):
        chip.launch(g, {1: np.zeros((3, 2), np.float32)})  # same span, another shape
    m2 = np.zeros((2, 3), np.float32)
    chip.launch(g, [s6, m2])
    assert_array(m2, s6, "a launch after the refusals")

    add = KERNELS["add"]
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    g2 = chip.capture(lambda o, x, y, z: o.submit(add, pto.In(x), pto.In(y), pto.Out(z)),
                      a, b, np.zeros(8, np.float32))
    big = np.zeros((3, 3), np.float32)
    with pytest.raises(pto.GraphError, match=r"buffer 2 .* shape \(3, 2\), element strides "
                                             r"\(3, 1\), captured as shape \(8,\)"):
        chip.launch(g2, [a, b, big[:, :2]])  # the same 32-byte span, with gaps
    assert (big == 0).all()
    y = np.zeros(8, np.float32)
    chip.launch(g2, [a, b, y])
    assert_array(y, a + 1, "a launch after the refusal")
    g.close()
    g2.close()


def test_launch_binds_a_buffer_captured_in_several_layouts(chip):
    """One memory used as several arrays (same base pointer) is one buffer:
    a bound array may have the layout of a captured one that holds the
    others' elements; none holding them all, the buffer cannot be bound."""
    copy = chip.kernel(lambda ctx, x, y: y.__setitem__(slice(None), x), name="copy")
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)

    def prog(o):
        o.submit(copy, pto.In(x[:4]), pto.Out(y[:4]))  # y[:4] and y: one buffer
        o.submit(KERNELS["add"], pto.In(y), pto.In(x), pto.Out(y))

    g = chip.capture(prog)
    y2 = np.zeros(8, np.float32)
    with pytest.raises(pto.GraphError, match=r"captured as shape \(8,\)"):
        chip.launch(g, {1: y2[:4]})
    chip.launch(g, {1: y2})
    assert_array(y2, np.r_[x[:4] * 2, x[4:]], "a launch of the larger layout")

    z = np.zeros((3, 3), np.float32)
    g2 = chip.capture(lambda o: (o.submit(copy, pto.In(x[:6].reshape(3, 2)), pto.Out(z[:, :2])),
                                 o.submit(copy, pto.In(x[:3]), pto.Out(z[0]))))
    with pytest.raises(pto.GraphError, match="none of which holds the others"):
        chip.launch(g2, {1: np.zeros((3, 3), np.float32)[:, :2]})
    g.close()
    g2.close()


@pytest.mark.parametrize("key,msg", [
    (True, "bind key: bool True is not an int"),
    (3, "bind key 3, must be 0..2"),
    ("2", "bind key: str '2' is not an int"),
])
def test_launch_bind_keys(chip, key, msg):
    """A dict binds by buffer index: an int or a NumPy integer. Before, a
    bool passed as 1 (rebinding buffer 1) and np.int64(2) was refused as
    "not a buffer index (0..2)"."""
    add = KERNELS["add"]
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    g = chip.capture(lambda o, x, y, z: o.submit(add, pto.In(x), pto.In(y), pto.Out(z)),
                     a, b, np.zeros(8, np.float32))
    y3 = np.zeros(8, np.float32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.launch(g, {key: y3})
    assert msg in str(e.value), str(e.value)
    chip.launch(g, {np.int64(2): y3})
    assert_array(y3, a + 1, "bound by a NumPy integer key")
    g.close()


@pytest.mark.parametrize("bind", [5, {2}, 1.5])
def test_launch_bind_of_the_wrong_kind(chip, bind):
    """bind is a list or a dict: anything else raises InvalidArgumentError
    naming it (before: a bare TypeError "'int' object is not iterable", a
    set passed in no order)."""
    a, b, y = arrays(1)
    g = chip.capture(program, a, b, y, 2.0)
    with pytest.raises(pto.InvalidArgumentError, match="Chip.launch: bind: "):
        chip.launch(g, bind)
    a2, b2, y2 = arrays(2)
    chip.launch(g, [a2, b2, y2])
    assert_array(y2, expected(a2, b2, 2.0), "a launch after the refusal")
    g.close()


def test_graph_closed_during_its_launch_keeps_its_arrays(chip):
    """A kernel (or another thread) may close a graph mid-launch (pto frees
    it when the launch ends). The arrays it captured, which the launch's
    tasks still use, must stay alive until then: before, Graph.close
    dropped them at once, so the next task wrote freed memory (segfault
    when NumPy had unmapped a large array)."""
    import gc
    import weakref
    seen = {}

    def closer(ctx, y):
        if "graph" in seen:  # in the launch (not the capture)
            seen.pop("graph").close()
            gc.collect()
            seen["alive"] = seen["ref"]() is not None

    k = chip.kernel(closer)
    y = np.zeros(1 << 20, np.float32)
    g = chip.capture(lambda o, y: o.submit(k, pto.InOut(y)), y)
    seen["graph"], seen["ref"] = g, weakref.ref(y)
    del y  # the graph holds the only reference
    chip.launch(g)
    assert seen["alive"], "the captured array was freed while its launch still ran"
    del g
    gc.collect()
    assert seen["ref"]() is None, "the closed graph's array outlived its launch"


def test_launch_refuses_a_read_only_array_for_a_writable_nodep(chip):
    """A NoDep argument is passed to the kernel untracked, which may write
    it (a Python kernel's view of a writable NoDep array is writable, and
    the launch keeps the captured views' modes). A launch binding a
    read-only array there is refused, as for Out. Before: it was taken, and
    the kernel wrote into read-only memory (an immutable bytes object)."""
    def writes(ctx, x):
        if x.flags.writeable:
            x[:] = 1

    k = chip.kernel(writes)
    g = chip.capture(lambda o: o.submit(k, pto.NoDep(np.zeros(4, np.float32))))
    b = bytes(16)
    with pytest.raises(pto.InvalidArgumentError, match="buffer 0: read-only array passed as NoDep"):
        chip.launch(g, [np.frombuffer(b, np.float32)])
    assert b == bytes(16), b
    w = np.zeros(4, np.float32)
    chip.launch(g, [w])
    assert (w == 1).all()
    g.close()
    ro = np.frombuffer(b, np.float32)  # captured read-only: its view is, and it binds one
    g = chip.capture(lambda o: o.submit(k, pto.NoDep(ro)))
    chip.launch(g, [np.frombuffer(bytes(16), np.float32)])
    assert b == bytes(16), b
    g.close()


def test_graph_closed_by_another_thread_as_its_launch_starts(chip):
    """Graph.close on one thread while chip.launch on another is starting:
    pto frees a graph closed mid-launch when the launch ends, but not one
    closed before the launch has marked it busy, so the binding must not
    hand pto a graph that a close may free under it. Now a close during a
    launch (from its start) leaves the freeing to the launch's end. Before:
    the launch read the graph after the close (a bare TypeError here; freed
    memory when the close came between that read and pto's mark)."""
    a, b, y = arrays(1)
    g = chip.capture(program, a, b, y, 2.0)
    real = chip._run_lock
    chip._run_lock = CloseFirst(real, g.close)  # the launch's lock, taken after the close
    try:
        a2, b2, y2 = arrays(2)
        chip.launch(g, [a2, b2, y2], scalars=[3.0])
    finally:
        chip._run_lock = real
    assert_array(y2, expected(a2, b2, 3.0), "the launch the close came during")
    assert g._g is None, "the graph closed during its launch was not freed at its end"
    with pytest.raises(pto.InvalidArgumentError, match="not a live pto.Graph"):
        chip.launch(g)
