"""Chips, runs, tensors as NumPy views, kernels of the three kinds."""
import os
import pydoc
import threading
import time

import numpy as np
import pytest

import pto
from pto._pto import ffi, lib
from close_first import env as close_first_env
from conftest import assert_array


@pytest.fixture
def chip():
    with pto.Chip(clusters=2, schedulers=1) as c:
        yield c


def test_config_defaults_match_c():
    cfg = ffi.new("pto_chip_config *")
    lib.pto_chip_config_init(cfg)
    with pto.Chip() as c:
        got = c.config
    for k, v in got.items():
        if k != "schedulers":  # C's 0 means min(3, clusters): config shows that count
            assert v == int(getattr(cfg, k)), f"{k}: Python default {v}, C default {getattr(cfg, k)}"
    assert got["schedulers"] == min(3, got["clusters"]), got
    assert got["aiv_per_cluster"] == 2 and got["task_slots"] == 16384


def test_config_options_and_bad_values():
    with pto.Chip(clusters=3, schedulers=2, task_slots=512, heap_bytes=1 << 20) as c:
        assert c.config["clusters"] == 3 and c.config["schedulers"] == 2
        assert c.config["task_slots"] == 512 and c.config["heap_bytes"] == 1 << 20
    with pytest.raises(pto.InvalidArgumentError) as e:
        pto.Chip(clusters=0)
    assert e.value.status == "PTO_EINVAL" and "clusters = 0" in e.value.details
    with pytest.raises(pto.InvalidArgumentError, match="unknown option"):
        pto.Node(1, bogus=3)
    with pto.Chip(clusters=1, spread_cores=False) as c:
        assert c.config["spread_cores"] == 0
    with pto.Chip(clusters=1, spread_cores=2) as c:
        assert c.config["spread_cores"] == 2
    with pytest.raises(pto.InvalidArgumentError) as e:
        pto.Chip(spread_cores=3)
    assert "spread_cores = 3, must be 0, 1 or 2" in e.value.details


def test_help_is_useful():
    text = pydoc.render_doc(pto.Chip, renderer=pydoc.plaintext)
    for word in ("clusters", "schedulers", "run(self, orchestrate", "kernel(self, spec",
                 "GIL", "heap_bytes"):
        assert word in text, f"help(pto.Chip) lacks {word!r}"
    assert "remote_store" in pydoc.render_doc(pto.KernelContext, renderer=pydoc.plaintext)


def test_reference_kernels_and_stats(chip):
    add, scale, mm = chip.kernel("add"), chip.kernel("scale"), chip.kernel("matmul")
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), np.float32)
    y = np.zeros((4, 8), np.float32)
    w = np.arange(24, dtype=np.float32).reshape(8, 3)
    z = np.zeros((4, 3), np.float32)

    def orch(o):
        o.submit(add, pto.In(a), pto.In(b), pto.Out(y), block_num=3)
        o.submit(scale, pto.In(y), pto.Out(y), scalars=[0.5])
        o.submit(mm, pto.In(y), pto.In(w), pto.Out(z), block_num=2)

    st = chip.run(orch)
    assert_array(y, (a + b) * 0.5, "y")
    assert_array(z, ((a + b) * 0.5) @ w, "z")
    assert st.tasks == 3 and st.blocks == 6, st
    assert st.host_us > 0
    # 6 blocks: no core has timed 16 of its own, so none held (pull_hold.h)
    assert st.pull_holds == 0, st
    assert 0 <= st.steals <= st.blocks, st
    assert 0 <= st.handoffs <= st.blocks, st


def test_python_kernel_blocks_and_scalars(chip):
    seen = []

    def k(ctx, x, y):
        seen.append((ctx.block_idx, ctx.block_num, ctx.core_type))
        lo = ctx.block_idx * 4
        y[lo:lo + 4] = x[lo:lo + 4] * ctx.scalar_f32(0) + ctx.scalar_i64(1) + ctx.scalar_f64(2)

    kk = chip.kernel(k)
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    chip.run(lambda o: o.submit(kk, pto.In(x), pto.Out(y), block_num=4,
                                scalars=[2.0, -3, pto.f64(0.25)]))
    assert_array(y, x * 2 - 3 + 0.25, "y")
    assert sorted(seen) == [(i, 4, "aiv") for i in range(4)]


def test_c_kernel_from_shared_library(chip, ckernels):
    k = chip.kernel(pto.c_kernel(ckernels, "k_axpb"))
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    chip.run(lambda o: o.submit(k, pto.In(x), pto.Out(y), scalars=[3.0], block_num=2))
    assert_array(y, x * 3, "y")


def test_c_kernel_calling_libpto(chip, ckernels):
    k = chip.kernel(pto.c_kernel(ckernels, "k_tile_add"))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((4, 3), np.float32)
    chip.run(lambda o: o.submit(k, pto.In(a.T), pto.In(a.T), pto.Out(y)))
    assert_array(y, 2 * a.T, "y")


def test_c_kernel_library_not_linked_with_libpto(chip, tmp_path):
    """A kernel library that calls libpto but was built without -lpto loads
    (libpto's symbols are global); one that needs a symbol nothing defines is
    refused with a hint."""
    import subprocess
    from conftest import HERE
    so = str(tmp_path / "libnolink.so")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-I",
                    os.path.join(HERE, "..", "..", "include"), os.path.join(HERE, "ckernels.c"),
                    "-o", so], check=True)
    k = chip.kernel(pto.c_kernel(so, "k_tile_add"))
    a = np.arange(6, dtype=np.float32)
    y = np.zeros(6, np.float32)
    chip.run(lambda o: o.submit(k, pto.In(a), pto.In(a), pto.Out(y)))
    assert_array(y, 2 * a, "y")
    src = tmp_path / "missing.c"
    src.write_text("int no_such_function(void);\nint k(void) { return no_such_function(); }\n")
    bad = str(tmp_path / "libmissing.so")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", str(src), "-o", bad], check=True)
    with pytest.raises(pto.InvalidArgumentError, match="undefined symbol: no_such_function.*link "
                       "the library with the libraries it needs"):
        chip.kernel(pto.c_kernel(bad, "k"))


def test_mix_and_aic_python_kernels():
    with pto.Chip(clusters=1, schedulers=1) as c:
        got = []
        mix = c.kernel(pto.py_kernel(lambda ctx, t: got.append((ctx.core_type, ctx.sub_block_id)),
                                     core="mix", name="mix"))
        aic = c.kernel(pto.py_kernel(lambda ctx, t: got.append(("only", ctx.core_type)),
                                     core="aic", name="aic"))
        t = np.zeros(4, np.float32)
        c.run(lambda o: (o.submit(mix, pto.InOut(t)), o.submit(aic, pto.InOut(t))))
    assert sorted(got) == [("aic", 0), ("aiv", 0), ("aiv", 1), ("only", "aic")], got


def test_strided_views_are_the_same_memory(chip):
    """Slices, steps and transposes reach the kernel as views of the same
    bytes; dependency inference orders overlapping ones and runs disjoint ones."""
    def inc(ctx, t):
        t += 1

    k = chip.kernel(inc)
    base = np.zeros((6, 8), np.float32)
    views = [base[1:4, 2:7], base[::2, ::3], base.T[1:5], base[:, 5], base[5]]

    def orch(o):
        for v in views:
            o.submit(k, pto.InOut(v))

    chip.run(orch)
    want = np.zeros((6, 8), np.float32)
    for v in [want[1:4, 2:7], want[::2, ::3], want.T[1:5], want[:, 5], want[5]]:
        v += 1
    assert_array(base, want, "base")


def test_new_outputs_views_scope_read_write(chip):
    add, copy = chip.kernel("add"), chip.kernel("copy")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    res = {}

    def orch(o):
        with o.scope():
            t = o.submit(add, pto.In(a), pto.In(a), pto.New((3, 4)))
            tmp = t.output
            assert tmp.shape == (3, 4) and tmp.dtype == np.float32
            res["full"] = o.read(tmp)
            res["col"] = o.read(tmp[:, 1])
            res["T"] = o.read(tmp.T)
            o.write(tmp[1], 7.0)
            u = o.submit(copy, pto.In(tmp.reshape(12)), pto.New(12))
            res["copy"] = o.read(u.output)
        # an OUTPUT may not be used after its scope
        with pytest.raises(pto.InvalidArgumentError):
            o.read(tmp)

    with pytest.raises(pto.InvalidArgumentError):
        chip.run(orch)
    assert_array(res["full"], 2 * a, "full")
    assert_array(res["col"], 2 * a[:, 1], "col")
    assert_array(res["T"], (2 * a).T, "T")
    want = 2 * a
    want[1] = 7
    assert_array(res["copy"], want.reshape(12), "copy")


def inc_(ctx, t):  # a kernel returns None (or an int code), not the array
    t += 1


def twice_(ctx, t):
    t *= 2


def test_host_read_write_waits_for_tasks(chip, ckernels):
    slow = chip.kernel(pto.c_kernel(ckernels, "k_sleep"))
    inc = chip.kernel(inc_)
    a = np.zeros(8, np.float32)
    got = {}

    def orch(o):
        o.submit(slow, pto.InOut(a), scalars=[20000])
        o.submit(inc, pto.InOut(a))
        got["read"] = o.read(a)  # waits for both writers
        o.write(a[2:4], [5, 6])  # waits for them too
        o.submit(inc, pto.InOut(a[2:4]))

    chip.run(orch)
    assert_array(got["read"], np.ones(8, np.float32), "read")
    assert_array(a, np.array([1, 1, 6, 7, 1, 1, 1, 1], np.float32), "a")


def test_nodep_deps_dummy_sync_start(chip):
    order = []

    def rec(name):
        def k(ctx, *t):
            if ctx.block_idx == 0:
                time.sleep(0.01 if name == "first" else 0)
                order.append(name)
        return k

    k1, k2, k3 = (chip.kernel(rec(n), name=n) for n in ("first", "second", "third"))
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    tasks = {}

    def orch(o):
        t1 = o.submit(k1, pto.Out(a))
        d = o.dummy(pto.In(a))              # orders after t1 through a
        t2 = o.submit(k2, pto.Out(b), deps=[d])  # explicit dep, disjoint memory
        t3 = o.submit(k3, pto.NoDep(a), deps=[t2.id], block_num=2, sync_start=True)
        o.wait(t3)
        tasks.update(t1=t1.id, t2=t2.id, t3=t3.id, d=d.id, status=o.status)

    st = chip.run(orch)
    assert order == ["first", "second", "third"], order
    assert tasks["status"] == 0 and st.sync_tasks == 1 and st.tasks == 4


def test_manual_scope(chip):
    inc = chip.kernel(inc_)
    a = np.zeros(4, np.float32)

    def orch(o):
        with o.scope(manual=True):
            t = o.submit(inc, pto.InOut(a))
            o.submit(inc, pto.InOut(a), deps=[t])

    chip.run(orch)
    assert_array(a, np.full(4, 2, np.float32), "a")


def test_buffer_protocol_and_dlpack(chip):
    twice = chip.kernel(twice_)

    class DL:  # exposes only DLPack, like a CPU torch tensor
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    ba = bytearray(np.arange(4, dtype=np.float32).tobytes())
    mv = memoryview(ba).cast("f")
    under = np.arange(6, dtype=np.float32)
    dl = DL(under)
    chip.run(lambda o: (o.submit(twice, pto.InOut(mv)), o.submit(twice, pto.InOut(dl))))
    assert_array(np.frombuffer(ba, np.float32), np.arange(4, dtype=np.float32) * 2, "bytearray")
    assert_array(under, np.arange(6, dtype=np.float32) * 2, "dlpack")


def test_failed_run_raises_error_with_details(chip, ckernels):
    bad = chip.kernel(pto.c_kernel(ckernels, "k_fail"))
    a = np.zeros(4, np.float32)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(bad, pto.Out(a)))
    err = e.value
    assert err.status == "PTO_EKERNEL" and err.code == -15 and isinstance(err, pto.Error)
    assert err.kernel == "k_fail" and err.task == 0 and err.core is not None
    assert err.hint and err.details, str(err)


def test_python_kernel_exception_is_the_cause(chip):
    def boom(ctx, t):
        raise ZeroDivisionError("kernel bug")

    k = chip.kernel(boom)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(k, pto.Out(np.zeros(2, np.float32))))
    assert isinstance(e.value.__cause__, ZeroDivisionError) and e.value.kernel == "boom"
    # the exception's type and text are in the details (and so in str(e))
    assert e.value.details.endswith(": ZeroDivisionError: kernel bug"), e.value.details
    assert "ZeroDivisionError: kernel bug" in str(e.value), str(e.value)
    # the chip is usable after a failed run
    ok = chip.kernel(lambda ctx, t: None, name="ok")
    chip.run(lambda o: o.submit(ok, pto.Out(np.zeros(2, np.float32))))


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("str() of this exception fails")


def test_exception_whose_text_fails_still_fails_the_run(chip):
    """An exception whose str() raises, from a Python kernel or the
    orchestration, still fails the run and is the error's cause. Before:
    building the details raised inside the callback, cffi printed it and
    returned 0, so the kernel passed as a success and the run succeeded."""
    def boom(ctx, t):
        raise _Unprintable()

    k = chip.kernel(boom)
    with pytest.raises(pto.KernelError) as e:
        chip.run(lambda o: o.submit(k, pto.Out(np.zeros(2, np.float32))))
    assert isinstance(e.value.__cause__, _Unprintable), repr(e.value.__cause__)
    assert "_Unprintable" in e.value.details, e.value.details

    def orch(o):
        o.submit(k, pto.Out(np.zeros(2, np.float32)))
        raise _Unprintable()

    with pytest.raises(_Unprintable):
        chip.run(orch)
    ok = chip.kernel(lambda ctx, t: None, name="ok")
    chip.run(lambda o: o.submit(ok, pto.Out(np.zeros(2, np.float32))))


def test_cause_is_the_failed_tasks_own_exception(chip):
    """The run's error has as its cause the exception of the Python kernel
    of its own task, never another task's. Before: the first exception any
    Python kernel raised was the cause, so a C kernel's error (task 1) came
    with an unrelated Python kernel's exception (task 0) as its cause."""
    add = chip.kernel("add")

    def late(ctx, t):
        time.sleep(0.05)  # after add has failed the run
        raise RuntimeError("late python failure")

    kl = chip.kernel(late)
    a, bad, t = np.ones(8, np.float32), np.zeros(4, np.float32), np.zeros(2, np.float32)
    with pytest.raises(pto.InvalidArgumentError) as e:
        chip.run(lambda o: (o.submit(kl, pto.Out(t)),
                            o.submit(add, pto.In(a), pto.In(a), pto.Out(bad))))
    assert e.value.task == 1 and e.value.kernel == "add", str(e.value)
    assert e.value.__cause__ is None, repr(e.value.__cause__)


def test_failure_setting_up_the_orchestration_fails_the_run(chip, monkeypatch):
    """An exception before the orchestration function is called (making
    its Orch: a MemoryError, say) fails the run and is raised. Before: it
    escaped the C callback, cffi printed it, and the run, which had run
    nothing, returned as a success."""
    import pto._chip as chip_module

    class Broken:
        def __init__(self, o, run):
            raise MemoryError("no memory for the Orch")

    monkeypatch.setattr(chip_module, "Orch", Broken)
    with pytest.raises(MemoryError, match="no memory for the Orch"):
        chip.run(lambda o: None)
    monkeypatch.undo()
    chip.run(lambda o: o.dummy(pto.InOut(np.zeros(2, np.float32))))


def _refused_registration():
    """A pto.Error from a pto call that is no call of the run's orchestrator
    (another chip's kernel registration, refused: one name, two kernels)."""
    with pto.Chip(clusters=1) as other:
        other.kernel(lambda ctx: None, name="twice")
        other.kernel(lambda ctx: 1, name="twice")


def test_orchestration_raising_another_calls_error_raises_it(chip):
    """An orchestration that raises the pto.Error of a call that is not its
    own run's (another chip's) gets that exception from run. Before: it was
    taken for an error of the run's own calls, whose run error names it,
    and run raised FatalError ('Python orchestration raised ...') instead."""
    with pytest.raises(pto.InvalidArgumentError, match="twice"):
        chip.run(lambda o: _refused_registration())


def test_kernel_returning_a_pto_code(chip):
    k = chip.kernel(lambda ctx, t: -9, name="fatal")
    with pytest.raises(pto.FatalError):
        chip.run(lambda o: o.submit(k, pto.Out(np.zeros(2, np.float32))))


def test_orchestration_exception_propagates(chip):
    def orch(o):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        chip.run(orch)


def test_watchdog_error_names_the_stall():
    with pto.Chip(clusters=1, schedulers=1, watchdog_ms=200) as c:
        def stuck(ctx, t):
            while not ctx.cancelled():
                time.sleep(0.005)

        k = c.kernel(stuck)
        with pytest.raises(pto.SchedTimeoutError) as e:
            c.run(lambda o: o.submit(k, pto.Out(np.zeros(2, np.float32))))
        assert e.value.stall == "TASK_STUCK" or "stuck" in str(e.value).lower(), str(e.value)


def _straggler_run(chip, seen, release):
    """A run whose one kernel ignores ctx.cancelled() past shutdown_ms: the
    run returns with that kernel still running, on an array only the run
    references. The kernel says whether the array is alive once released."""
    import gc
    import weakref

    def straggler(ctx, y):
        release.wait(20)
        gc.collect()
        seen["alive"] = seen["ref"]() is not None  # (never writes: freed memory, before)
        seen["done"] = True

    k = chip.kernel(straggler)

    def orch(o):
        y = np.zeros(1 << 20, np.float32)
        seen["ref"] = weakref.ref(y)
        o.submit(k, pto.Out(y))

    with pytest.raises(pto.SchedTimeoutError, match="did not leave the run"):
        chip.run(orch)


def test_arrays_outlive_a_kernel_left_running_past_its_run():
    """A kernel still running when its run returned (it ignored
    ctx.cancelled() past shutdown_ms; pto lets it finish its block) keeps
    the run's arrays alive until it has left, on an open chip and on a
    closed one. Before: run returned and dropped them at once, so the
    kernel (a C one writing, or a Python one through its views) used freed
    memory."""
    import gc
    nop = np.zeros(4, np.float32)
    for close in (False, True):
        seen, release = {}, threading.Event()
        chip = pto.Chip(clusters=1, schedulers=1, watchdog_ms=200, shutdown_ms=100)
        _straggler_run(chip, seen, release)
        gc.collect()
        if close:
            chip.close()
            del chip
            gc.collect()
        release.set()
        deadline = time.monotonic() + 20
        while "done" not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen.get("alive"), f"an array freed under a kernel still running (close={close})"
        if not close:  # once it has left, the chip runs again and the array goes
            while True:
                try:
                    chip.run(lambda o: o.dummy(pto.InOut(nop)))
                    break
                except pto.ShutdownError:
                    assert time.monotonic() < deadline, "the straggler never left"
                    time.sleep(0.01)
            gc.collect()
            assert seen["ref"]() is None, "the straggler's run kept its array after it left"
            chip.close()


def test_gil_released_while_c_kernels_run(chip, ckernels):
    """A Python thread keeps running while chip.run waits for C kernels
    (with the GIL held it would get no tick in between)."""
    slow = chip.kernel(pto.c_kernel(ckernels, "k_sleep"))
    ticks = []
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    th = threading.Thread(target=counter)
    th.start()
    try:
        time.sleep(0.01)
        t0 = time.monotonic()
        chip.run(lambda o: [o.submit(slow, scalars=[100000]) for _ in range(4)])
        t1 = time.monotonic()
    finally:
        stop.set()
        th.join()
    during = [t for t in ticks if t0 < t < t1]
    assert t1 - t0 >= 0.09 and len(during) >= 5, (t1 - t0, len(during))


def test_python_kernels_on_many_cores_share_the_gil():
    with pto.Chip(clusters=4, schedulers=2) as c:
        def k(ctx, x, y):
            lo, hi = ctx.block_idx * 64, (ctx.block_idx + 1) * 64
            y[lo:hi] = np.sqrt(x[lo:hi]) + ctx.block_idx

        kk = c.kernel(k)
        x = np.arange(64 * 16, dtype=np.float32)
        y = np.zeros_like(x)
        c.run(lambda o: o.submit(kk, pto.In(x), pto.Out(y), block_num=16))
        want = np.sqrt(x) + np.repeat(np.arange(16, dtype=np.float32), 64)
        assert_array(y, want, "y")


def test_trace_file(tmp_path):
    p = tmp_path / "t.json"
    with pto.Chip(clusters=1, schedulers=1, trace=str(p)) as c:
        k = c.kernel("fill")
        c.run(lambda o: o.submit(k, pto.Out(np.zeros(4, np.float32)), scalars=[1.0]))
    assert p.stat().st_size > 0 and b"traceEvents" in p.read_bytes()


def test_mix_c_kernel(ckernels):
    with pto.Chip(clusters=1, schedulers=1) as c:
        k = c.kernel(pto.c_kernel(ckernels, "k_empty", core="mix", aic_symbol="k_empty",
                                  name="mix_empty"))
        st = c.run(lambda o: o.submit(k, block_num=2))
    assert st.blocks == 2 and st.tasks == 1, st


def test_read_deadline_raises_tensor_wait_timeout(chip, ckernels):
    slow = chip.kernel(pto.c_kernel(ckernels, "k_sleep"))
    a = np.zeros(4, np.float32)

    def orch(o):
        o.submit(slow, pto.Out(a), scalars=[300000])
        o.read(a, timeout_ms=20)

    with pytest.raises(pto.TensorWaitTimeoutError) as e:
        chip.run(orch)
    assert isinstance(e.value, TimeoutError) and e.value.status == "PTO_ETENSOR_WAIT_TIMEOUT"


def test_errors_pickle():
    import pickle
    e = pto.error_from(-12, "no progress", task=3, core=1, kernel="k", stall="TASK_STUCK")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is pto.SchedTimeoutError and (f.task, f.core, f.kernel, f.details) == (
        3, 1, "k", "no progress")
    assert pto.ERRORS[-15] is pto.KernelError and issubclass(pto.KernelError, pto.Error)


_CLOSE_RACE = r"""
import numpy as np, pto
from close_first import race
chip = pto.Chip(clusters=1, schedulers=1)
a = np.zeros(4, np.float32)
race(chip, lambda o: o.dummy(pto.InOut(a)))
"""


def test_close_from_another_thread_never_frees_a_chip_a_run_uses():
    """close() on one thread and run() on another: a run never uses a
    destroyed chip. Before: run looked the chip up before taking the run
    lock and close() did not take it, so a close between the two freed the
    chip under the run (use after free: a crash). Now close takes the lock
    (refused while a run holds it), and run checks the chip under it."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _CLOSE_RACE], capture_output=True, text=True,
                       timeout=60, env=close_first_env())
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.splitlines() == ["closed", "run refused: pto.Chip used after close()"], r.stdout


def test_batch_gathers_until_its_end(chip):
    """``with o.batch():`` pushes the tasks ready at their submit together:
    none runs before the block ends (or a wait inside it), all run after."""
    add = chip.kernel("add")
    outs = [np.zeros(4, np.float32) for _ in range(10)]
    one = np.ones(4, np.float32)
    seen = {}

    def orch(o):
        with o.batch():
            for out in outs:
                o.submit(add, pto.In(one), pto.In(one), pto.Out(out))
            time.sleep(0.03)
            seen["during"] = sum(int(out[0]) for out in outs)
            seen["read"] = o.read(outs[3])  # a wait pushes first
        seen["after"] = o.read(outs[9])

    chip.run(orch)
    assert seen["during"] == 0, f"{seen['during'] // 2} gathered tasks ran before the batch ended"
    assert_array(seen["read"], 2 * one, "outs[3] read inside the batch")
    for i, out in enumerate(outs):
        assert_array(out, 2 * one, f"outs[{i}]")
