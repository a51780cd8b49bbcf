"""What an orchestration function receives: submits, scopes, host access."""
from __future__ import annotations

import contextlib
import inspect
import operator
import struct
import threading
from collections.abc import Mapping, Set as AbstractSet
from typing import Any, Iterator, List, Sequence, Tuple, Union

import numpy as np

from ._cint import INT_MAX, INT_MIN, c_int
from ._errors import check, invalid
from ._kernel import Kernel
from ._pto import ffi, lib
from ._redux import ReduxOp
from ._tensor import (DESC_WORDS, INPUT, MODE_MASK, NO_DEP, OUTPUT, REDUX, WRITES, Arg, Commute, In, InOut, New, NoDep, Out, View,
                      array_desc, as_array, pto_dtype)

MAX_TENSORS = int(lib.PTO_MAX_TENSOR_ARGS)
MAX_SCALARS = int(lib.PTO_MAX_SCALAR_ARGS)


class f64:
    """A scalar passed as its f64 bit pattern (plain floats go as f32)."""

    __slots__ = ("value",)

    def __init__(self, value: float):
        try:
            self.value = float(value)
        except (TypeError, ValueError):
            raise invalid(f"pto.f64: {value!r} is not a float") from None


def scalar_bits(v: Any, what: str) -> int:
    """The uint64 a scalar argument is passed as: ints (two's complement),
    floats as f32 bits (like pto_args_scalar_f32), ``pto.f64(x)`` as f64 bits."""
    if isinstance(v, f64):
        return struct.unpack("<Q", struct.pack("<d", v.value))[0]
    if isinstance(v, (float, np.floating)):
        try:
            return struct.unpack("<I", struct.pack("<f", float(v)))[0]
        except OverflowError:
            raise invalid(f"{what}: {v} does not fit an f32 (use pto.f64)") from None
    try:
        i = operator.index(v)
    except TypeError:
        raise invalid(f"{what}: {type(v).__name__} {v!r} is not an int or float") from None
    if not -(1 << 63) <= i < (1 << 64):
        raise invalid(f"{what}: {i} does not fit 64 bits")
    return i & 0xFFFFFFFFFFFFFFFF


_MODE_OF = {In: INPUT, Out: 2, InOut: 3, NoDep: 4, Commute: 5, New: OUTPUT}


def input_mask(args: Sequence[Any]) -> int:
    """Bit i set: tensor argument i is an INPUT, or a read-only array passed
    as NoDep (its view in a Python kernel is read-only)."""
    m = 0
    for i, a in enumerate(args):
        mode = getattr(a, "mode", None)
        if mode == INPUT:
            m |= 1 << i
        elif mode == NO_DEP and not isinstance(a.obj, View):
            obj = a.obj  # (described already: as_array cannot fail here)
            if not (obj if isinstance(obj, np.ndarray) else as_array(obj, "")).flags.writeable:
                m |= 1 << i
    return m


class Task:
    """A submitted task: ``id`` (pass it in ``deps``), ``outputs`` (one
    :class:`View` per ``pto.New`` argument, in argument order)."""

    __slots__ = ("id", "outputs", "_run")

    def __init__(self, tid: int, outputs: Tuple[View, ...], run: Any = None):
        # the run's token (ids start at 0 in every run), not the run: a
        # Task kept does not keep the run's function and arguments alive
        self.id, self.outputs, self._run = tid, outputs, run

    @property
    def output(self) -> View:
        """The first (usually only) runtime-allocated output."""
        if not self.outputs:
            raise invalid(f"task {self.id} has no pto.New argument")
        return self.outputs[0]

    def __int__(self) -> int:
        return self.id

    __index__ = __int__

    def __repr__(self) -> str:
        return f"<pto.Task {self.id}>"


def orch_returned(r: Any, fn: Any, what: str) -> None:
    """What an orchestration function returned: a coroutine, a generator or
    an async generator is refused (InvalidArgumentError naming ``what``).
    Such a function (``async def``, or a body with ``yield``) returns at
    once without running its body: the run would submit nothing and pass
    as a success. The object is closed (no "never awaited" warning)."""
    if r is None:
        return
    for test, kind, fix in ((inspect.iscoroutine, "a coroutine", "an async def function"),
                            (inspect.isgenerator, "a generator", "a function whose body has yield"),
                            (inspect.isasyncgen, "an async generator",
                             "an async def function whose body has yield")):
        if test(r):
            try:
                if kind == "an async generator":
                    r.aclose().close()
                else:
                    r.close()
            except Exception:  # noqa: BLE001 - closing is a courtesy
                pass
            raise invalid(f"{what}: orchestration function {_fn_name(fn)} returned {kind} "
                          f"({fix}): none of its body ran, so nothing was submitted; pto calls "
                          "it as a plain function, which submits before it returns (use def, "
                          "without yield)")


def _fn_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None)
    return repr(name) if isinstance(name, str) else repr(fn)


def count_of(seq: Any, what: str) -> int:
    """len(seq), or InvalidArgumentError naming ``what`` when it has none (a
    number where a list goes) or is no sequence: a dict (whose keys would
    pass as the items) or a set (no order)."""
    c = seq.__class__
    if c is tuple or c is list:
        return len(seq)
    if isinstance(seq, (Mapping, AbstractSet)):
        raise invalid(f"{what}: {c.__name__} {seq!r} is not a sequence (a mapping or set "
                      "has no order of items; pass a list)")
    try:
        return len(seq)
    except TypeError:
        raise invalid(f"{what}: {c.__name__} {seq!r} is not a sequence") from None


def capture_use(cap: dict, mode: int, words: List[int], writable: bool) -> None:
    """Record, for a capture, one use of an array as a task argument (its
    descriptor ``words`` after the mode): by base pointer, the first mode
    that writes it (NoDep of a writable array: the kernel may write it,
    unless a mode that writes comes later) and every layout (shape, element
    strides) it was used with. A launch refuses a read-only array for a
    written buffer and an array of another layout (Graph)."""
    rec = cap.get(words[0])
    if rec is None:
        rec = cap[words[0]] = [None, {}]
    m = mode & MODE_MASK
    if m in WRITES:
        if rec[0] is None or rec[0] == NO_DEP:
            rec[0] = m
    elif m == NO_DEP and writable and rec[0] is None:
        rec[0] = m
    nd = words[3]
    rec[1][(tuple(words[5:5 + nd]), tuple(words[10:10 + nd]))] = None


def task_id(d: Any, what: str = "deps", run: Any = None) -> int:
    """A dependency's task id; a Task must be of the run whose token is ``run``."""
    if isinstance(d, Task):
        if d._run is not run:  # its id names another task in this run
            raise invalid(f"{what}: task {d.id} belongs to another run")
        return d.id
    return c_int(d, f"{what}: task", "int64_t")


class OutputView(View):
    """A runtime-allocated OUTPUT tensor (valid in its run, until its scope ends)."""


# Orch calls from another thread: the C call pto refuses there (_build.py)
_FOREIGN = {"submit": 0, "dummy": 1, "scope": 2, "read": 3, "write": 4, "wait": 5, "batch": 6}
_get_ident = threading.get_ident  # once per submit: no module attribute lookup


class OwnerThread:
    """The rule an orchestrator of one run (Orch, NodeOrch) follows: its C
    handle ``_o`` is valid only during the orchestration function and only
    on that function's thread. A call from another thread raises
    InvalidArgumentError naming the rule before anything of the call or of
    the orchestrator is touched (its buffers and the run's lists are the
    owner's), and fails the run through pto's own refusal of the same C
    call (``_foreign``); a call after the run raises, the handle unused."""

    _name = "Orch"  # for messages: "pto.Orch used after ...", "an Orch takes ..."
    _article = "an"

    def _own(self, o) -> None:
        self._o = o
        self._thread = _get_ident()  # the orchestration function's
        self._end_lock = threading.Lock()  # a refusal holds it: _o stays valid meanwhile

    def _live(self, call: str = "submit"):
        if _get_ident() != self._thread:
            self._refuse_thread(call)
        if self._o is None:
            raise self._ended()
        return self._o

    def _ended(self):
        return invalid(f"pto.{self._name} used after its orchestration function returned")

    def _refuse_thread(self, call: str) -> None:
        # The lock keeps the orchestration from returning (and its handle
        # from going away) during the C call, which pto refuses on this
        # thread and which fails the run, naming the rule.
        with self._end_lock:
            o = self._o
            if o is not None:
                self._foreign(o, call)
        if o is None:  # the run has ended: there is no run to fail
            raise self._ended()
        raise invalid(f"{self._name}.{call} called from a thread other than the one running the "
                      f"orchestration function: {self._article} {self._name} takes calls from "
                      "that thread only (submitting from several threads is not supported); "
                      "nothing was done, and the run fails")

    def _foreign(self, o, call: str) -> None:
        lib.pyk_foreign_call(o, _FOREIGN[call])

    def _end(self) -> None:
        """The orchestration function returned: the orchestrator is no longer valid."""
        with self._end_lock:
            self._o = None


class Orch(OwnerThread):
    """The orchestrator of one ``Chip.run``: submit tasks, open scopes, read
    and write tensor data. Valid only during the orchestration function, and
    only on its thread (``status`` excepted): a call from another thread
    raises InvalidArgumentError and fails the run (docs/python.md)."""

    def __init__(self, o, run):
        self._own(o)
        self._run = run
        self._token = run.token  # what this run's Tasks carry
        self._cache: dict = {}  # id(ndarray) -> (array, shape, strides, dtype, descriptor words)
        self._flat = ffi.new("int64_t[]", MAX_TENSORS * DESC_WORDS)
        self._sc = ffi.new("uint64_t[]", MAX_SCALARS)
        self._outs = ffi.new("pto_tensor[]", MAX_TENSORS)
        self._tid = ffi.new("pto_task_id *")

    def _descs(self, args: Sequence[Any], ctx: str):
        if len(args) > MAX_TENSORS:
            raise invalid(f"{ctx}: {len(args)} tensor arguments, at most {MAX_TENSORS}")
        flat: List[int] = []
        news: List[int] = []
        cache = self._cache
        cap = self._run.captured  # a capture: what each bound buffer's tasks do (Graph)
        for i, a in enumerate(args):
            mode = _MODE_OF.get(a.__class__)
            if mode is None and isinstance(a, (Arg, New)):  # a subclass
                mode = a.mode
                if (mode & MODE_MASK == REDUX and isinstance(a.op, ReduxOp) and
                        a.op.chip() is not self._run.chip):
                    raise invalid(f"{ctx}: tensor argument {i}: pto.Redux op {a.op!r} is "
                                  "registered on another chip (op ids are per chip)")
            if mode is None:
                raise invalid(f"{ctx}: tensor argument {i}: {type(a).__name__} without an access "
                              "mode; wrap it: pto.In(x), pto.Out(x), pto.InOut(x), pto.NoDep(x), pto.Commute(x), "
                              "pto.Redux(x, op) "
                              "or pto.New(shape)")
            if mode == OUTPUT:
                what = f"{ctx}: tensor argument {i}"
                if len(a.shape) < 1 or len(a.shape) > 5 or min(a.shape) < 1:
                    raise invalid(f"{what}: pto.New shape {a.shape} (1..5 dims, each >= 1)")
                dt = pto_dtype(a.dtype, what)
                sh = list(a.shape)
                flat += [OUTPUT, 0, 0, dt, len(sh), 0] + sh + [0] * (5 - len(sh)) + [1] * 5 + [0]
                news.append(i)
                continue
            obj = a.obj
            # fast path: an array already used in this run, same shape and strides
            # (it is referenced by the run, so its id and data pointer are stable)
            c = cache.get(id(obj))
            if (c is not None and c[0] is obj and c[1] == obj.shape and c[2] == obj.strides and
                    c[3] == obj.dtype and (mode & MODE_MASK not in WRITES or obj.flags.writeable)):
                flat.append(mode)
                flat += c[4]
                if cap is not None:
                    capture_use(cap, mode, c[4], obj.flags.writeable)
                continue
            if isinstance(obj, View):
                if obj._owner is not self._run:
                    raise invalid(f"{ctx}: tensor argument {i}: {obj._what} belongs to another run")
                flat += obj._desc(mode)
                continue
            what = f"{ctx}: tensor argument {i}"
            arr = as_array(obj, what)
            d = array_desc(arr, mode, what)
            flat += d
            if cap is not None:
                capture_use(cap, mode, d[1:], arr.flags.writeable)
            self._run.keep.append(obj)  # alive (and not resizable) until the run ends
            if arr is not obj:
                self._run.keep.append(arr)
            elif type(obj) is np.ndarray:
                cache[id(obj)] = (obj, obj.shape, obj.strides, obj.dtype, d[1:])
        return flat, news

    def submit(self, kernel: Kernel, *args: Union[Arg, New], scalars: Sequence[Any] = (),
               block_num: int = 1, sync_start: bool = False, deps: Sequence[Any] = (),
               priority: int = 0) -> Task:
        """Submit ``kernel`` with tensor ``args`` (each ``pto.In/Out/InOut/NoDep/
        Commute(array)``, ``pto.Redux(array, op)`` or ``pto.New(shape, dtype)``), ``scalars`` (ints, floats
        as f32, ``pto.f64``), ``block_num`` blocks (SPMD), all blocks started as
        one cohort with ``sync_start``, explicit ``deps`` (earlier tasks), and a
        ``priority`` (0 .. 3: ready blocks of a higher one are dispatched first)."""
        o = self._live()
        if not isinstance(kernel, Kernel):
            raise invalid(f"submit: {kernel!r} is not a pto.Kernel (register it with chip.kernel)")
        if kernel._owner is not self._run.chip:
            raise invalid(f"submit: kernel '{kernel.name}' was registered on another chip")
        return self._submit(o, kernel.id, kernel.name, args, scalars, block_num, sync_start, deps,
                            0, kernel.kind == "py", priority)

    def dummy(self, *args: Union[Arg, New], deps: Sequence[Any] = ()) -> Task:
        """A task with no kernel: it only orders its tensor arguments and ``deps``."""
        return self._submit(self._live("dummy"), -1, None, args, (), 1, False, deps, 1)

    def _submit(self, o, kid, kname, args, scalars, block_num, sync_start, deps, dummy,
                py=False, priority=0) -> Task:
        ctx = "dummy" if kname is None else f"submit '{kname}'"  # noqa: F841 (cheap)
        flat, news = self._descs(args, ctx)
        ns = count_of(scalars, f"{ctx}: scalars")
        if ns:
            if ns > MAX_SCALARS - py:
                raise invalid(f"{ctx}: {ns} scalars, at most {MAX_SCALARS - py}"
                              + (" for a Python kernel" if py else ""))
            self._sc[0:ns] = [scalar_bits(s, f"{ctx}: scalar {i}") for i, s in enumerate(scalars)]
        if py:  # hidden last scalar: which tensors the Python kernel may only read
            self._sc[ns] = input_mask(args)
            ns += 1
        if block_num.__class__ is not int or not 0 < block_num <= INT_MAX:
            block_num = c_int(block_num, f"{ctx}: block_num", "int", lo=1)
        if priority.__class__ is not int or not INT_MIN <= priority <= INT_MAX:
            priority = c_int(priority, f"{ctx}: priority", "int")
        nd = count_of(deps, f"{ctx}: deps")
        dl = (ffi.new("int64_t[]", [task_id(d, f"{ctx}: deps", self._token) for d in deps])
              if nd else ffi.NULL)
        n = len(args)
        if flat:
            self._flat[0:len(flat)] = flat
        rc = lib.pyk_submit(o, kid, n, self._flat, ns, self._sc, block_num,
                            1 if sync_start else 0, dl, nd, dummy, self._outs, self._tid,
                            priority)
        if rc:
            check(rc, ctx, self._token)
        hidden = self._run.hidden_scalars
        if hidden is not None:  # a capture: where the hidden scalar lies (Graph)
            if py:
                hidden.append((self._run.scalars_seen + ns - 1, int(self._sc[ns - 1])))
            self._run.scalars_seen += ns
        tid = int(self._tid[0])
        if not news:
            if self._run.task_args is not None:
                self._run.task_args[tid] = args
            return Task(tid, (), self._token)
        views = []
        for i in news:
            t = ffi.new("pto_tensor *")
            t[0] = self._outs[i]
            views.append(OutputView(t, self._run, f"output {i} of task {tid}"))
        if self._run.task_args is not None:  # a pto.New is named by its output view
            named = list(args)
            for i, v in zip(news, views):
                named[i] = v
            self._run.task_args[tid] = tuple(named)
        return Task(tid, tuple(views), self._token)

    @contextlib.contextmanager
    def scope(self, manual: bool = False) -> Iterator[None]:
        """``with orch.scope():`` bounds the lifetime of ``pto.New`` outputs
        submitted inside (reclaimed once the scope ended and their consumers
        completed). ``manual=True``: only explicit deps apply inside."""
        check(lib.pto_scope_begin(self._live("scope"), 1 if manual else 0), "scope begin",
              self._token)
        try:
            yield
        finally:
            if self._o is not None:
                check(lib.pto_scope_end(self._o), "scope end", self._token)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """``with orch.batch():`` gathers the tasks that are ready at their
        submit and pushes them together (up to 64 at a time), instead of one
        by one: for loops of many independent tasks. A gathered task starts
        when 64 are gathered, at a submit that waits on earlier tasks, at a
        wait (``read``, ``write``, ``wait``) or at the block's end
        (pto_orch_batch_begin, pto/orch.h)."""
        check(lib.pto_orch_batch_begin(self._live("batch")), "batch begin", self._token)
        try:
            yield
        finally:
            if self._o is not None:
                check(lib.pto_orch_batch_end(self._o), "batch end", self._token)

    def _tensor(self, x: Any, what: str, writes: bool):
        if isinstance(x, Arg):  # pto.In(x) reads as x does
            x = x.obj
        if isinstance(x, View):
            if x._owner is not self._run:
                raise invalid(f"{what}: {x._what} belongs to another run")
            return x._t, x.shape, x.dtype
        arr = as_array(x, what)
        d = array_desc(arr, 2 if writes else 0, what)
        t = ffi.new("pto_tensor *")
        lib.pyk_tensor(t, ffi.new("int64_t[]", d))
        self._run.keep.append(arr)
        return t, tuple(arr.shape) or (1,), arr.dtype

    def read(self, x: Union[np.ndarray, View], timeout_ms: int = -1) -> np.ndarray:
        """A packed NumPy copy of ``x`` (an array or View), taken once every
        earlier writer of its bytes completed (deadline ``timeout_ms``; < 0:
        the chip's watchdog)."""
        o = self._live("read")
        tmo = c_int(timeout_ms, "read: timeout_ms", "int64_t")
        t, shape, dt = self._tensor(x, "read", False)
        out = np.empty(shape, dtype=dt)
        check(lib.pto_orch_read(o, t, ffi.from_buffer(out), tmo), "read", self._token)
        return out

    def write(self, x: Union[np.ndarray, View], data: Any, timeout_ms: int = -1) -> None:
        """Copy ``data`` (broadcast to x's shape) into ``x`` once every earlier
        reader and writer of its bytes completed."""
        o = self._live("write")
        tmo = c_int(timeout_ms, "write: timeout_ms", "int64_t")
        t, shape, dt = self._tensor(x, "write", True)
        try:
            src = np.asarray(data, dtype=dt)
        except (TypeError, ValueError, OverflowError) as e:
            raise invalid(f"write: data ({type(data).__name__}) does not convert to "
                          f"{dt}: {e}") from None
        try:
            src = np.ascontiguousarray(np.broadcast_to(src, shape))
        except ValueError:
            raise invalid(f"write: data of shape {src.shape} does not broadcast to the "
                          f"shape {shape} of what it writes") from None
        check(lib.pto_orch_write(o, t, ffi.from_buffer(src), tmo), "write", self._token)

    def wait(self, task: Union[Task, int], timeout_ms: int = -1) -> None:
        """Wait until ``task`` completed."""
        o = self._live("wait")
        check(lib.pto_orch_wait_task(o, task_id(task, "wait", self._token),
                                     c_int(timeout_ms, "wait: timeout_ms", "int64_t")), "wait", self._token)

    @property
    def status(self) -> int:
        """The run's latched status (0 while healthy); from any thread."""
        with self._end_lock:
            if self._o is None:
                raise self._ended()
            return int(lib.pto_orch_status(self._o))
