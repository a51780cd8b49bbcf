"""What an orchestration function receives: submits, scopes, host access."""
from __future__ import annotations

import contextlib
import operator
import struct
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import Error, check, invalid
from ._kernel import Kernel
from ._pto import ffi, lib
from ._tensor import (DESC_WORDS, OUTPUT, Arg, New, View, array_desc, as_array, pto_dtype)

MAX_TENSORS = int(lib.PTO_MAX_TENSOR_ARGS)
MAX_SCALARS = int(lib.PTO_MAX_SCALAR_ARGS)


class f64:
    """A scalar passed as its f64 bit pattern (plain floats go as f32)."""

    __slots__ = ("value",)

    def __init__(self, value: float):
        self.value = float(value)


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


class Task:
    """A submitted task: ``id`` (pass it in ``deps``), ``outputs`` (one
    :class:`View` per ``pto.New`` argument, in argument order)."""

    __slots__ = ("id", "outputs")

    def __init__(self, tid: int, outputs: Tuple[View, ...]):
        self.id, self.outputs = tid, outputs

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


def task_id(d: Any) -> int:
    if isinstance(d, Task):
        return d.id
    try:
        return operator.index(d)
    except TypeError:
        raise invalid(f"deps: {d!r} is not a task") from None


class OutputView(View):
    """A runtime-allocated OUTPUT tensor (valid in its run, until its scope ends)."""


class Orch:
    """The orchestrator of one ``Chip.run``: submit tasks, open scopes, read
    and write tensor data. Valid only during the orchestration function."""

    def __init__(self, o, run):
        self._o = o
        self._run = run

    def _live(self):
        if self._o is None:
            raise invalid("pto.Orch used after its orchestration function returned")
        return self._o

    def _descs(self, args: Sequence[Any], ctx: str):
        if len(args) > MAX_TENSORS:
            raise invalid(f"{ctx}: {len(args)} tensor arguments, at most {MAX_TENSORS}")
        flat: List[int] = []
        news: List[int] = []
        keep = self._run.keep
        for i, a in enumerate(args):
            what = f"{ctx}: tensor argument {i}"
            if isinstance(a, New):
                if len(a.shape) < 1 or len(a.shape) > 5 or min(a.shape) < 1:
                    raise invalid(f"{what}: pto.New shape {a.shape} (1..5 dims, each >= 1)")
                dt = pto_dtype(a.dtype, what)
                sh = list(a.shape)
                flat += [OUTPUT, 0, 0, dt, len(sh), 0] + sh + [0] * (5 - len(sh)) + [1] * 5 + [0]
                news.append(i)
                continue
            if not isinstance(a, Arg):
                raise invalid(f"{what}: {type(a).__name__} without an access mode; wrap it: "
                              "pto.In(x), pto.Out(x), pto.InOut(x), pto.NoDep(x) or pto.New(shape)")
            obj = a.obj
            if isinstance(obj, View):
                if obj._owner is not self._run:
                    raise invalid(f"{what}: {obj._what} belongs to another run")
                flat += obj._desc(a.mode)
            else:
                arr = as_array(obj, what)
                flat += array_desc(arr, a.mode, what)
                keep.append(arr)  # alive (and not resizable) until the run ends
                if arr is not obj:
                    keep.append(obj)
        return flat, news

    def submit(self, kernel: Kernel, *args: Union[Arg, New], scalars: Sequence[Any] = (),
               block_num: int = 1, sync_start: bool = False, deps: Sequence[Any] = ()) -> Task:
        """Submit ``kernel`` with tensor ``args`` (each ``pto.In/Out/InOut/NoDep(array)``
        or ``pto.New(shape, dtype)``), ``scalars`` (ints, floats as f32,
        ``pto.f64``), ``block_num`` blocks (SPMD), all blocks started as one
        cohort with ``sync_start``, and explicit ``deps`` (earlier tasks)."""
        o = self._live()
        if not isinstance(kernel, Kernel):
            raise invalid(f"submit: {kernel!r} is not a pto.Kernel (register it with chip.kernel)")
        if kernel._owner is not self._run.chip:
            raise invalid(f"submit: kernel '{kernel.name}' was registered on another chip")
        return self._submit(o, kernel.id, f"submit '{kernel.name}'", args, scalars, block_num,
                            sync_start, deps, 0)

    def dummy(self, *args: Union[Arg, New], deps: Sequence[Any] = ()) -> Task:
        """A task with no kernel: it only orders its tensor arguments and ``deps``."""
        return self._submit(self._live(), -1, "dummy", args, (), 1, False, deps, 1)

    def _submit(self, o, kid, ctx, args, scalars, block_num, sync_start, deps, dummy) -> Task:
        flat, news = self._descs(args, ctx)
        if len(scalars) > MAX_SCALARS:
            raise invalid(f"{ctx}: {len(scalars)} scalars, at most {MAX_SCALARS}")
        sc = [scalar_bits(s, f"{ctx}: scalar {i}") for i, s in enumerate(scalars)]
        try:
            bn = operator.index(block_num)
        except TypeError:
            raise invalid(f"{ctx}: block_num {block_num!r} is not an int") from None
        if bn < 1:
            raise invalid(f"{ctx}: block_num {bn}, must be >= 1")
        dl = [task_id(d) for d in deps]
        n = len(args)
        outs = ffi.new("pto_tensor[]", max(n, 1)) if news else ffi.NULL
        tid = ffi.new("pto_task_id *")
        rc = lib.pyk_submit(o, kid, n, ffi.new("int64_t[]", flat) if flat else ffi.NULL,
                            len(sc), ffi.new("uint64_t[]", sc) if sc else ffi.NULL, bn,
                            1 if sync_start else 0, ffi.new("int64_t[]", dl) if dl else ffi.NULL,
                            len(dl), dummy, outs, tid)
        check(rc, ctx)
        views = []
        for i in news:
            t = ffi.new("pto_tensor *")
            t[0] = outs[i]
            views.append(OutputView(t, self._run, f"output {i} of task {int(tid[0])}"))
        return Task(int(tid[0]), tuple(views))

    @contextlib.contextmanager
    def scope(self, manual: bool = False) -> Iterator[None]:
        """``with orch.scope():`` bounds the lifetime of ``pto.New`` outputs
        submitted inside (reclaimed once the scope ended and their consumers
        completed). ``manual=True``: only explicit deps apply inside."""
        check(lib.pto_scope_begin(self._live(), 1 if manual else 0), "scope begin")
        try:
            yield
        finally:
            if self._o is not None:
                check(lib.pto_scope_end(self._o), "scope end")

    def _tensor(self, x: Any, what: str, writes: bool):
        if isinstance(x, View):
            if x._owner is not self._run:
                raise invalid(f"{what}: {x._what} belongs to another run")
            return x._t, x.shape, x.dtype
        if isinstance(x, Arg):
            x = x.obj
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
        t, shape, dt = self._tensor(x, "read", False)
        out = np.empty(shape, dtype=dt)
        check(lib.pto_orch_read(self._live(), t, ffi.from_buffer(out), int(timeout_ms)), "read")
        return out

    def write(self, x: Union[np.ndarray, View], data: Any, timeout_ms: int = -1) -> None:
        """Copy ``data`` (broadcast to x's shape) into ``x`` once every earlier
        reader and writer of its bytes completed."""
        t, shape, dt = self._tensor(x, "write", True)
        src = np.ascontiguousarray(np.broadcast_to(np.asarray(data, dtype=dt), shape))
        check(lib.pto_orch_write(self._live(), t, ffi.from_buffer(src), int(timeout_ms)), "write")

    def wait(self, task: Union[Task, int], timeout_ms: int = -1) -> None:
        """Wait until ``task`` completed."""
        check(lib.pto_orch_wait_task(self._live(), task_id(task), int(timeout_ms)), "wait")

    @property
    def status(self) -> int:
        """The run's latched status (0 while healthy)."""
        return int(lib.pto_orch_status(self._live()))
