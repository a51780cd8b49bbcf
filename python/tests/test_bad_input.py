"""Bad input from Python raises a clear pto.Error; nothing crashes."""
import numpy as np
import pytest

import pto
from conftest import assert_array


@pytest.fixture
def chip():
    with pto.Chip(clusters=1, schedulers=1, watchdog_ms=2000) as c:
        yield c


def nop(ctx, *t):
    pass


def run_one(chip, *args, kernel=None, **kw):
    k = kernel or chip.kernel(nop)  # registered once: the same kernel again is that one
    return chip.run(lambda o: o.submit(k, *args, **kw))


@pytest.mark.parametrize("dtype", [np.bool_, np.complex64, np.uint16, ">f4", "U3", object])
def test_wrong_dtype(chip, dtype):
    a = np.zeros(4, dtype=dtype)
    with pytest.raises(pto.InvalidArgumentError, match="tensor argument 0.*dtype") as e:
        run_one(chip, pto.In(a))
    assert e.value.status == "PTO_EINVAL"


def test_wrong_dtype_for_a_reference_kernel(chip):
    add = chip.kernel("add")
    a = np.zeros(4, np.int32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        run_one(chip, pto.In(a), pto.In(a), pto.Out(a), kernel=add)
    assert e.value.kernel == "add"
    # the details name the argument, what it got and what the kernel needs
    assert "add: tensor 0 (a) is i32, needs f32" in e.value.details, e.value.details


def test_wrong_shape_for_a_reference_kernel(chip):
    add = chip.kernel("add")
    a, y = np.zeros((4, 8), np.float32), np.zeros((4, 4), np.float32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        run_one(chip, pto.In(a), pto.In(a), pto.Out(y), kernel=add)
    assert "add: shapes a [4, 8], b [4, 8], out [4, 4]" in e.value.details, e.value.details


@pytest.mark.parametrize("view,why", [
    (lambda a: a[::-1], "negative"),
    (lambda a: np.broadcast_to(a[:1], (4,)), "zero"),
    (lambda a: a.view(np.uint8)[1:13].view(np.float32)[::1], None),  # misaligned is fine
])
def test_strides_pto_cannot_express(chip, view, why):
    a = np.zeros(16, np.float32)
    v = view(a)
    if why is None:
        run_one(chip, pto.In(v))
        return
    with pytest.raises(pto.InvalidArgumentError, match=why):
        run_one(chip, pto.In(v))


def test_non_contiguous_where_contiguity_is_needed(chip):
    a = np.zeros((4, 4), np.float32)
    cp = chip.kernel("copy")  # registered before the run (not inside it)

    with pytest.raises(pto.InvalidArgumentError, match="reshapes contiguous views only"):
        chip.run(lambda o: o.submit(cp, pto.In(a), pto.New((4, 4))).output.T.reshape(16))
    with pytest.raises(pto.InvalidArgumentError, match="16 elements"):
        chip.run(lambda o: o.submit(cp, pto.In(a), pto.New((4, 4))).output.reshape(15))
    with pytest.raises(pto.InvalidArgumentError, match="transpose"):
        chip.run(lambda o: o.submit(cp, pto.In(a), pto.New((4, 4))).output.transpose(0, 2))


@pytest.mark.parametrize("index,msg", [((5,), "out of range"), ((slice(None, None, -1),), "step"),
                                       ((0, 0, 0), "3 indices"), ((slice(2, 2),), "empty"),
                                       (("x",), "ints and slices")])
def test_bad_view_indexing(chip, index, msg):
    def orch(o):
        t = o.submit(fill, pto.New((4, 4)), scalars=[1.0])
        t.output[index]

    fill = chip.kernel("fill")
    with pytest.raises(pto.InvalidArgumentError, match=msg):
        chip.run(orch)


def test_read_only_array_as_output(chip):
    a = np.zeros(4, np.float32)
    a.setflags(write=False)
    run_one(chip, pto.In(a))  # reading is fine
    for mode in (pto.Out, pto.InOut):
        with pytest.raises(pto.InvalidArgumentError, match="read-only array passed as"):
            run_one(chip, mode(a))
    with pytest.raises(pto.InvalidArgumentError, match="read-only"):
        run_one(chip, pto.Out(memoryview(b"\0" * 16).cast("f")))


def test_resized_array_is_refused_while_in_use(chip, ckernels):
    slow = chip.kernel(pto.c_kernel(ckernels, "k_sleep"))
    a = np.zeros(1024, np.float32)
    ba = bytearray(64)
    errors = []

    def orch(o):
        o.submit(slow, pto.InOut(a), pto.InOut(memoryview(ba).cast("f")), scalars=[20000])
        try:
            a.resize(1 << 20)
        except ValueError as e:
            errors.append(("numpy", str(e)))
        try:
            ba.extend(b"x" * 4096)
        except BufferError as e:
            errors.append(("bytearray", str(e)))

    chip.run(orch)
    assert [k for k, _ in errors] == ["numpy", "bytearray"], errors
    # after the run the arrays are released: resizing works again
    ba.extend(b"x")
    assert len(ba) == 65


def test_freed_array_stays_alive_until_the_run_ends(chip):
    def inc_(ctx, t):
        t += 1

    inc = chip.kernel(inc_)
    seen = {}

    def orch(o):
        a = np.zeros(1 << 16, np.float32)
        o.submit(inc, pto.InOut(a))
        o.submit(inc, pto.InOut(a))
        b = a[::2]
        seen["b"] = b
        del a  # the runtime still holds it: no use-after-free
        import gc
        gc.collect()
        o.submit(inc, pto.InOut(b))

    chip.run(orch)
    assert_array(seen["b"], np.full(1 << 15, 3, np.float32), "b")


def test_unknown_kernels(chip, ckernels):
    with pytest.raises(pto.InvalidArgumentError, match="unknown reference kernel 'nope'"):
        chip.kernel("nope")
    with pytest.raises(pto.InvalidArgumentError, match="cannot load library"):
        chip.kernel(pto.c_kernel("/nonexistent/libk.so", "k"))
    with pytest.raises(pto.InvalidArgumentError, match="no symbol 'missing'"):
        chip.kernel(pto.c_kernel(ckernels, "missing"))
    with pytest.raises(pto.InvalidArgumentError, match="core"):
        chip.kernel(pto.py_kernel(lambda c: None, core="gpu"))
    with pytest.raises(pto.InvalidArgumentError, match="not a pto.Kernel"):
        chip.run(lambda o: o.submit("add"))
    with pto.Chip(clusters=1) as other:
        k = other.kernel("add")
        with pytest.raises(pto.InvalidArgumentError, match="another chip"):
            chip.run(lambda o: o.submit(k))


def test_arguments_without_modes_and_non_arrays(chip):
    with pytest.raises(pto.InvalidArgumentError, match="without an access mode"):
        run_one(chip, np.zeros(4, np.float32))
    with pytest.raises(pto.InvalidArgumentError, match="a list would be copied"):
        run_one(chip, pto.Out([1.0, 2.0]))
    with pytest.raises(pto.InvalidArgumentError, match="at most 5"):
        run_one(chip, pto.In(np.zeros((1,) * 6, np.float32)))
    with pytest.raises(pto.InvalidArgumentError, match="empty"):
        run_one(chip, pto.In(np.zeros(0, np.float32)))
    with pytest.raises(pto.InvalidArgumentError, match="at most 32"):
        run_one(chip, *[pto.In(np.zeros(1, np.float32))] * 33)
    with pytest.raises(pto.InvalidArgumentError, match="New shape"):
        run_one(chip, pto.New((0, 3)))


def test_bad_scalars_and_options(chip):
    for bad, msg in (("x", "not an int or float"), (1 << 64, "64 bits"), (1e300, "f32")):
        with pytest.raises(pto.InvalidArgumentError, match=msg):
            run_one(chip, scalars=[bad])
    with pytest.raises(pto.InvalidArgumentError, match="at most 15 for a Python kernel"):
        run_one(chip, scalars=[0] * 16)  # one scalar is the binding's
    with pytest.raises(pto.InvalidArgumentError, match="at most 16"):
        run_one(chip, scalars=[0] * 17, kernel=chip.kernel("fill"))
    with pytest.raises(pto.InvalidArgumentError, match="block_num 0"):
        run_one(chip, block_num=0)
    with pytest.raises(pto.InvalidArgumentError, match="deps"):
        run_one(chip, deps=["t"])
    with pytest.raises(pto.InvalidArgumentError):  # a task that does not exist yet
        run_one(chip, deps=[12345])


@pytest.mark.parametrize("call,msg", [
    (lambda k, a: pto.Redux(a, True), "pto.Redux: op: bool True is not an int"),
    (lambda k, a: run_one_k(k, a, priority=True), "priority: bool True is not an int"),
    (lambda k, a: run_one_k(k, a, block_num=True), "block_num: bool True is not an int"),
    (lambda k, a: run_one_k(k, a, scalars=5), "scalars: int 5 is not a sequence"),
    (lambda k, a: run_one_k(k, a, deps=3), "deps: int 3 is not a sequence"),
])
def test_counts_of_the_wrong_kind(chip, call, msg):
    """A bool where a count, priority or op id goes (True would pass as 1:
    the op "prod", priority 1), or a number where a list goes, raises
    InvalidArgumentError naming it, never passes or raises a bare TypeError;
    the chip runs on."""
    k = chip.kernel(lambda ctx, *t: None, name="nop")
    a = np.zeros(4, np.float32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.run(lambda o: call((o, k), a))
    assert msg in str(e.value), str(e.value)
    chip.run(lambda o: o.submit(k, pto.InOut(a)))


def run_one_k(ok, a, **kw):
    o, k = ok
    return o.submit(k, pto.In(a), **kw)


BIG = 1 << 40  # fits no C int; 1 << 70 fits no int64 either


@pytest.mark.parametrize("call,name", [
    (lambda o, k, a: o.submit(k, pto.In(a), block_num=BIG), "block_num"),
    (lambda o, k, a: o.submit(k, pto.In(a), block_num=-BIG), "block_num"),
    (lambda o, k, a: o.submit(k, pto.In(a), block_num=2.0), "block_num"),
    (lambda o, k, a: o.submit(k, pto.In(a), deps=[1 << 70]), "deps"),
    (lambda o, k, a: o.submit(k, pto.New((1 << 70, 2))), "shape"),
    (lambda o, k, a: o.read(a, timeout_ms=1 << 70), "timeout_ms"),
    (lambda o, k, a: o.write(a, 0, timeout_ms=-(1 << 70)), "timeout_ms"),
    (lambda o, k, a: o.wait(1 << 70), "wait"),
    (lambda o, k, a: o.wait(o.submit(k, pto.In(a)), timeout_ms=1 << 70), "timeout_ms"),
    (lambda o, k, a: o.submit(k, pto.New((4, 4))).output.reshape(1 << 70), "reshape"),
    (lambda o, k, a: o.submit(k, pto.New((4, 4))).output.transpose(BIG, 0), "transpose"),
])
def test_integers_that_do_not_fit_c(chip, call, name):
    """Every int the front end passes to C is range-checked: an
    InvalidArgumentError naming it, never cffi's bare OverflowError."""
    k = chip.kernel(lambda ctx, *t: None, name="nop")
    a = np.zeros(4, np.float32)
    with pytest.raises(pto.InvalidArgumentError, match=name):
        chip.run(lambda o: call(o, k, a))


@pytest.mark.parametrize("make", [
    lambda: pto.Chip(clusters=1, task_slots=1 << 40),
    lambda: pto.Chip(clusters=1 << 40),
    lambda: pto.Chip(clusters=1, watchdog_ms=1 << 70),
    lambda: pto.Node(1 << 40),
    lambda: pto.Node(2, device_ids=[BIG, 0]),
    lambda: pto.Node(2, host_bytes=-1),
    lambda: pto.coll_scratch_bytes(BIG, 4),
    lambda: pto.coll_scratch_bytes(2, -1),
])
def test_integers_that_do_not_fit_c_outside_runs(make):
    with pytest.raises(pto.InvalidArgumentError, match="must be"):
        make()


@pytest.mark.parametrize("value,code", [
    (-(1 << 40), pto.KernelError), (1 << 40, pto.KernelError), ("x", pto.KernelError),
    (2.5, pto.KernelError), (np.zeros(2), pto.KernelError), (True, pto.KernelError),
    (5, pto.KernelError), (-9, pto.FatalError), (None, None), (0, None), (np.int32(0), None),
])
def test_python_kernel_return_values(chip, value, code):
    """None or 0 is success; an int32 is pto's code (any other value fails
    the run); anything else fails it naming the value (cffi turned
    -(1 << 40) into 0: success)."""
    k = chip.kernel(lambda ctx: value, name="ret")
    if code is None:
        chip.run(lambda o: o.submit(k))
        return
    with pytest.raises(code) as e:
        chip.run(lambda o: o.submit(k))
    if type(value) is int and -(1 << 31) <= value < 1 << 31:
        assert f"returned {value}" in e.value.details
    else:
        assert isinstance(e.value.__cause__, ValueError)
        assert f"returned {repr(value)[:20]}" in str(e.value.__cause__)


def test_handles_used_out_of_their_time(chip):
    kept = {}

    def keep_ctx(ctx, t):
        kept["ctx"] = ctx

    k = chip.kernel(keep_ctx)
    q = chip.kernel(lambda ctx: ctx.quiet(0), name="q")

    def orch(o):
        kept["orch"] = o
        kept["out"] = o.submit(k, pto.New(4)).output

    chip.run(orch)
    with pytest.raises(pto.InvalidArgumentError, match="after its orchestration"):
        kept["orch"].submit(k)
    with pytest.raises(pto.InvalidArgumentError, match="after its kernel call"):
        kept["ctx"].cancelled()
    with pytest.raises(pto.InvalidArgumentError, match="another run"):
        chip.run(lambda o: o.submit(k, pto.In(kept["out"])))
    with pytest.raises(pto.InvalidArgumentError, match="not reentrant"):
        chip.run(lambda o: chip.run(lambda o2: None))
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.run(lambda o: o.submit(q))
    assert "need a kernel running on a chip of a pto.Node" in str(e.value.__cause__)
    chip.close()
    with pytest.raises(pto.InvalidArgumentError, match="after close"):
        chip.kernel("add")


def test_task_of_another_run_is_refused(chip):
    """A Task names a task of its own run: task ids start again at 0 in
    every run, so one kept from an earlier run names whatever task has its
    id now. Before: deps=[old_task] and wait(old_task) took it silently (a
    dependency on an unrelated task, or on none); now they are refused, as
    a View of another run is. A bare int stays the caller's to get right."""
    k = chip.kernel(nop)
    a = np.zeros(4, np.float32)
    kept = {}
    chip.run(lambda o: kept.update(t=o.submit(k, pto.InOut(a))))

    def orch(o):
        o.submit(k, pto.InOut(a))
        o.submit(k, pto.In(a), deps=[kept["t"]])

    with pytest.raises(pto.InvalidArgumentError, match="task 0 belongs to another run"):
        chip.run(orch)
    with pytest.raises(pto.InvalidArgumentError, match="task 0 belongs to another run"):
        chip.run(lambda o: (o.submit(k, pto.InOut(a)), o.wait(kept["t"])))
    chip.run(lambda o: (o.submit(k, pto.InOut(a)), o.wait(0)))


def test_in_place_dtype_change_is_seen(chip):
    """An array reused in a run after `a.dtype = ...` is described anew.
    Readers of the same bytes are not ordered among themselves: the
    orchestration waits for both earlier readers before it changes the dtype,
    and the first of them sleeps, so a wait that did not hold would show."""
    import time
    got = []

    def dt(ctx, t):
        time.sleep(ctx.scalars[0] / 1e3)
        got.append((ctx.scalars[1], t.dtype))

    k = chip.kernel(dt, name="dt")
    a = np.zeros(4, np.float32)

    def orch(o):
        t0 = o.submit(k, pto.In(a), scalars=[50, 0])  # 50 ms: the other core runs t1 first
        t1 = o.submit(k, pto.In(a), scalars=[0, 1])
        o.wait(t0)
        o.wait(t1)
        a.dtype = np.int32
        o.submit(k, pto.In(a), scalars=[0, 2])

    chip.run(orch)
    # t0 and t1 in either order; t2 (the only int32 one) after both
    assert sorted(got[:2], key=lambda r: r[0]) == [(0, np.float32), (1, np.float32)], got
    assert got[2] == (2, np.int32), got


def test_concurrent_runs_of_one_chip_are_refused(chip, ckernels):
    import threading
    slow = chip.kernel(pto.c_kernel(ckernels, "k_sleep"))
    errors = []

    def second():
        try:
            chip.run(lambda o: None)
        except pto.InvalidArgumentError as e:
            errors.append(str(e))

    def orch(o):
        o.submit(slow, scalars=[20000])
        th = threading.Thread(target=second)
        th.start()
        th.join()

    chip.run(orch)
    assert len(errors) == 1 and "already running" in errors[0], errors


def test_python_kernel_cannot_write_an_input(chip):
    """INPUT views are read-only in a Python kernel: writing one would be a
    write the dependency inference does not know about."""
    def writes_input(ctx, x, y):
        y[:] = x
        x[0] = 1  # not allowed: x is In

    k = chip.kernel(writes_input)
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(k, pto.In(x), pto.Out(y), scalars=[7]))
    assert isinstance(e.value.__cause__, ValueError) and "read-only" in str(e.value.__cause__)
    assert x[0] == 0 and (y == x).all()
    seen = {}
    k2 = chip.kernel(lambda ctx, x, y, z: seen.update(
        sc=ctx.scalars, w=(x.flags.writeable, y.flags.writeable, z.flags.writeable)), name="flags")
    chip.run(lambda o: o.submit(k2, pto.In(x), pto.InOut(y), pto.NoDep(x), scalars=[5, 6]))
    assert seen == {"sc": (5, 6), "w": (False, True, True)}, seen


def test_python_kernel_cannot_make_an_input_writable(chip):
    """An INPUT view cannot be made writable again in a Python kernel: its
    buffer is read-only, not only its flag. Before: x.flags.writeable = True
    was allowed and the kernel then wrote the In array."""
    def unlocks(ctx, x):
        x.flags.writeable = True
        x[0] = 1

    k = chip.kernel(unlocks)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(k, pto.In(x)))
    assert isinstance(e.value.__cause__, ValueError), e.value.__cause__
    assert x[0] == 0, x
    y = np.arange(64, dtype=np.float32).reshape(8, 8)[:, ::2]  # strided: the other constructor
    with pytest.raises(pto.KernelError):
        chip.run(lambda o: o.submit(k, pto.In(y)))
    assert y[0, 0] == 0, y


def test_python_kernel_cannot_write_a_read_only_nodep(chip):
    """A read-only array passed as NoDep (a table the kernel only reads) is
    read-only in a Python kernel too. Before: its view was writable, so a
    kernel wrote into read-only memory: an immutable bytes object changed
    under Python (or a read-only mapping: segfault)."""
    def writes(ctx, x):
        x[:] = 1

    k = chip.kernel(writes)
    b = bytes(16)
    x = np.frombuffer(b, np.float32)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(k, pto.NoDep(x)))
    assert isinstance(e.value.__cause__, ValueError) and "read-only" in str(e.value.__cause__)
    assert b == bytes(16), b
    for ro in (b, memoryview(b)):  # a buffer-protocol object as it is
        with pytest.raises(pto.KernelError):
            chip.run(lambda o: o.submit(k, pto.NoDep(ro)))
        assert b == bytes(16), b
    w = np.zeros(4, np.float32)  # a writable one stays writable
    chip.run(lambda o: o.submit(k, pto.NoDep(w)))
    assert (w == 1).all()


@pytest.mark.parametrize("field,value", [("scalars", {1: 2}), ("scalars", {1, 2}),
                                         ("deps", {0: 0}), ("deps", frozenset())])
def test_a_mapping_or_set_is_no_sequence(chip, field, value):
    """scalars and deps take sequences: a dict (whose keys passed as the
    scalars: the kernel saw [1]) or a set (no order) raises
    InvalidArgumentError naming the argument; the chip runs on."""
    seen = []
    k = chip.kernel(lambda ctx, y: seen.append(list(ctx.scalars)), name="sc")
    y = np.zeros(4, np.float32)
    with pytest.raises(pto.InvalidArgumentError,
                       match=f"submit 'sc': {field}: {type(value).__name__} .* is not a sequence"):
        chip.run(lambda o: o.submit(k, pto.Out(y), **{field: value}))
    assert seen == []
    chip.run(lambda o: o.submit(k, pto.Out(y), scalars=[2]))
    assert seen == [[2]]


@pytest.mark.parametrize("data,msg", [
    (np.ones(3), "write: data of shape (3,) does not broadcast to the shape (8,)"),
    (1 + 2j, "write: data (complex) does not convert to float32"),
    ("x", "write: data (str) does not convert to float32"),
])
def test_write_of_data_that_does_not_fit(chip, data, msg):
    """Orch.write with data of the wrong shape or kind raises
    InvalidArgumentError naming write and the data (before: NumPy's bare
    ValueError or TypeError); a correct write works after it."""
    a = np.zeros(8, np.float32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.run(lambda o: o.write(a, data))
    assert msg in str(e.value), str(e.value)
    assert (a == 0).all()
    chip.run(lambda o: o.write(a, np.arange(8)))
    assert_array(a, np.arange(8, dtype=np.float32), "a write after the refusal")


def test_bad_dtype_names():
    """A dtype NumPy does not understand raises InvalidArgumentError naming
    the dtype (before: a bare TypeError "data type 'bogus' not understood")."""
    with pytest.raises(pto.InvalidArgumentError, match="pto.New: dtype: 'bogus' is not a dtype"):
        pto.New(4, "bogus")
    with pytest.raises(pto.InvalidArgumentError, match="pto.New: dtype"):
        pto.New(4, 3.5)
    assert pto.New(4, "int32").dtype == np.int32


@pytest.mark.parametrize("option", ["trace", "record", "replay"])
@pytest.mark.parametrize("value,why", [(123, "a str, bytes or os.PathLike"), ("", "empty"),
                                       ("a\0b", "NUL")])
def test_file_name_options_are_checked_before_the_chip_exists(option, value, why):
    """trace, record and replay must be file names: InvalidArgumentError
    naming the option, raised before any chip is created (before: trace=123
    raised os.fsencode's bare TypeError from a created chip)."""
    with pytest.raises(pto.InvalidArgumentError,
                       match=f"pto.Chip: {option} = .* is not a file name") as e:
        pto.Chip(1, **{option: value})
    assert why in str(e.value)
    tb = e.value.__traceback__
    while tb is not None:  # no chip was created by the refused call
        made = tb.tb_frame.f_locals.get("self")
        assert not (isinstance(made, pto.Chip) and made._chip is not None)
        tb = tb.tb_next
    with pto.Chip(1) as c:
        assert c.config["clusters"] == 1


def test_kernel_name_registered_twice(chip):
    assert chip.kernel(nop) is chip.kernel(nop)  # the same kernel again is the one registered
    chip.kernel(lambda ctx, *t: None, name="twice")
    # names tell kernels apart in traces and schedule records; the reason
    # comes from the C library (pto_last_error), not a bare PTO_EINVAL
    with pytest.raises(pto.InvalidArgumentError,
                       match="a kernel named 'twice' is already registered"):
        chip.kernel(lambda ctx, *t: None, name="twice")


@pytest.mark.parametrize("name,msg", [
    ("a\nb", "name 'a\\nb' has a control character (0x0a) at byte 1"),
    ("k" * 48, "is 48 bytes long, more than the 47 a name may have"),
])
def test_kernel_name_that_a_record_cannot_hold(chip, name, msg):
    """A kernel name is one line of a schedule record, kept in 48 bytes: a
    newline or a longer name is refused by pto_kernel_register, the reason
    raised. Before: registered ("a\\nb" split its record's line, making it
    unreplayable; a long name was cut to 47 bytes, so two went by one)."""
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.kernel(nop, name=name)
    assert msg in str(e.value), str(e.value)
    assert chip.kernel(nop, name="k" * 47).name == "k" * 47


@pytest.mark.parametrize("call,msg", [
    (lambda c: c.run(5), "Chip.run: orchestrate 5 is not callable"),
    (lambda c: c.capture(None), "Chip.capture: orchestrate None is not callable"),
    (lambda c: c.kernel(nop, name=5), "kernel name 5 is not a str"),
    (lambda c: c.kernel(pto.py_kernel(nop, name=b"k")), "kernel name b'k' is not a str"),
    (lambda c: c.kernel(nop, name="a\0b"), "contains a NUL byte"),
    (lambda c: pto.py_kernel(nop, aiv_count=True), "aiv_count True, must be 0, 1 or 2"),
    (lambda c: pto.c_kernel(None, "k"), "c_kernel: path None is not a file name"),
    (lambda c: pto.c_kernel("libm.so.6", 5), "c_kernel: symbol 5 is not a str"),
    (lambda c: pto.c_kernel("libm.so.6", "cos", aic_symbol=3), "aic_symbol 3 is not a str"),
    (lambda c: pto.Node(2, ["add"]), "pto.Node: kernels: list ['add'] is not a mapping"),
    (lambda c: pto.Node(2, {}, host_fns=[nop]), "pto.Node: host_fns: list"),
    (lambda c: pto.Node(2, {}, device_ids=5), "pto.Node: device_ids: int 5 is not a sequence"),
])
def test_arguments_of_the_wrong_type(chip, call, msg):
    """An argument of the wrong type raises InvalidArgumentError naming it.
    Before: a bare TypeError or AttributeError from deep inside ("'int'
    object has no attribute 'encode'"), or, for a name with a NUL byte, a
    kernel registered in C under a shorter name than the one Python shows."""
    with pytest.raises(pto.InvalidArgumentError) as e:
        call(chip)
    assert msg in str(e.value), str(e.value)
    a = np.zeros(4, np.float32)
    run_one(chip, pto.InOut(a))


@pytest.mark.parametrize("shape,msg", [
    ({1: 2}, "pto.New: shape: dict {1: 2} is not a sequence"),
    ({4}, "pto.New: shape: set {4} is not a sequence"),
    (None, "pto.New: shape: NoneType None is not an int or a sequence"),
])
def test_shape_of_the_wrong_kind(chip, shape, msg):
    """A shape that is no int and no sequence of ints is refused, naming it.
    Before: pto.New({1: 2}) took the dict's keys as the dims (shape (1,),
    silently), a set was taken in its own order, None raised a bare
    TypeError; View.reshape(None) too."""
    with pytest.raises(pto.InvalidArgumentError) as e:
        pto.New(shape)
    assert msg in str(e.value), str(e.value)

    k = chip.kernel(nop)

    def orch(o):
        v = o.submit(k, pto.New((4, 4))).output
        with pytest.raises(pto.InvalidArgumentError, match="reshape: shape"):
            v.reshape(shape)
        # an Arg around a View reads as the View does (as around an array)
        assert o.read(pto.In(v)).shape == (4, 4)
        o.write(pto.Out(v), 1)
        assert (o.read(v) == 1).all()

    chip.run(orch)


def test_f64_of_a_non_number():
    with pytest.raises(pto.InvalidArgumentError, match="pto.f64: 'x' is not a float"):
        pto.f64("x")


@pytest.mark.parametrize("nranks,block", [(0, 4), (-1, 4), (1 << 20, 4), (2, 1 << 50)])
def test_coll_scratch_bytes_of_a_collective_pto_cannot_run(nranks, block):
    """pto_coll_scratch_bytes answers 0 for a rank count or block size out
    of its range. Before: coll_scratch_bytes returned that 0 as a size
    (a window buffer of 0 bytes, refused only at the collective); now it
    raises, naming the ranges."""
    with pytest.raises(pto.InvalidArgumentError, match="coll_scratch_bytes"):
        pto.coll_scratch_bytes(nranks, block)
    assert pto.coll_scratch_bytes(2, 64) > 128


def test_orchestration_that_returns_without_running_its_body(chip):
    """An orchestration function written as async def, or with a yield in
    its body, returns a coroutine or a generator at once and runs none of
    its body. Before: the run submitted nothing and passed as a success
    (the output untouched; a coroutine only warned "never awaited"). Now
    run and capture raise InvalidArgumentError saying so, and the chip runs
    again."""
    k = chip.kernel(lambda ctx, y: y.fill(5), name="fill5")
    y = np.zeros(4, np.float32)

    def gen(o):
        o.submit(k, pto.Out(y))
        yield

    async def coro(o):
        o.submit(k, pto.Out(y))

    async def agen(o):
        o.submit(k, pto.Out(y))
        yield

    import warnings
    for fn, kind in ((gen, "a generator"), (coro, "a coroutine"), (agen, "an async generator")):
        for call in (chip.run, chip.capture):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the coroutine is closed: no warning
                with pytest.raises(pto.InvalidArgumentError,
                                   match=f"orchestration function .*{fn.__name__}' returned "
                                   f"{kind}.*nothing was submitted"):
                    call(fn)
    assert_array(y, np.zeros(4, np.float32), "y after the refused runs")
    st = chip.run(lambda o: o.submit(k, pto.Out(y)))
    assert st.tasks == 1
    assert_array(y, np.full(4, 5, np.float32), "y after a plain run")


@pytest.mark.parametrize("call", [pto.status_name, pto.status_hint, pto.error_from])
@pytest.mark.parametrize("code, why", [(1 << 70, "is not a status code \\(a C int\\)"),
                                       ("x", "str 'x' is not a status code"),
                                       (-1.5, "float -1.5 is not a status code"),
                                       (True, "bool True is not a status code")])
def test_status_code_of_the_wrong_kind(call, code, why):
    """Before: a bare OverflowError ("int too big to convert"), ValueError
    (int("x")), or a float truncated to a code (-1.5 as PTO_EINVAL)."""
    with pytest.raises(pto.InvalidArgumentError, match=why):
        call(code)
    assert pto.status_name(-15) == "PTO_EKERNEL"
    assert type(pto.error_from(-15, "d")) is pto.KernelError
