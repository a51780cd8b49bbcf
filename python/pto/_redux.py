"""Reduction ops registered from Python (pto_redux_register, pto/redux.h):
an init and a combine function over NumPy views, called by pto through a
pair of C trampolines per registration (_build.py), since the C op
functions take no context argument."""
from __future__ import annotations

import sys
import threading
import traceback
import weakref
from typing import Any, Callable, List, Optional

import numpy as np

from ._errors import check, invalid
from ._pto import ffi, lib
from ._tensor import NP_DTYPES, pto_dtype


class ReduxOp:
    """A reduction op registered on a chip with ``Chip.redux_op``: pass it
    as ``pto.Redux(array, op)`` in that chip's runs (its ``id`` is the C
    op id). Valid until its chip is closed."""

    __slots__ = ("name", "id", "dtype", "init", "combine", "_chip", "_slot")

    def __init__(self, name: str, dtype: np.dtype, init: Callable, combine: Callable, chip: Any):
        self.name, self.dtype, self.init, self.combine = name, dtype, init, combine
        self.id = -1
        self._chip = weakref.ref(chip)
        self._slot = -1

    def __index__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"<pto.ReduxOp '{self.name}' id={self.id} {self.dtype}>"

    def chip(self) -> Any:
        """The Chip it is registered on (None once that chip is gone)."""
        return self._chip()

    def _raised(self, e: BaseException, what: str) -> None:
        """An exception in init or combine: pto's op functions cannot fail,
        so the chip's run raises it once it has ended (Chip._in_run)."""
        chip = self._chip()
        run = chip._run if chip is not None else None
        if run is not None:
            run.redux_excs.append((self, what, e))
            return
        sys.stderr.write(f"pto: reduction op '{self.name}' ({what}) raised outside a run:\n" +
                         "".join(traceback.format_exception(type(e), e, e.__traceback__)))


# ---- one trampoline pair per registration, process-wide; a closed chip's come back ----
_slots: List[Optional[ReduxOp]] = []
_slot_lock = threading.Lock()


def register_op(chip: Any, chip_ptr, name: Any, dtype: Any, init: Any, combine: Any) -> ReduxOp:
    """Registers an op on a pto_chip (Chip.redux_op checks the chip is idle)."""
    what = f"Chip.redux_op '{name}'"
    if not isinstance(name, str) or not name or len(name.encode()) >= lib.PTO_REDUX_MAX_NAME:
        raise invalid(f"Chip.redux_op: name {name!r} must be a str of 1..."
                      f"{lib.PTO_REDUX_MAX_NAME - 1} bytes")
    if "\0" in name:  # C reads the name up to it: the op would go by another name
        raise invalid(f"Chip.redux_op: name {name!r} contains a NUL byte (C would see "
                      f"{name.split(chr(0))[0]!r})")
    for fn, role in ((init, "init"), (combine, "combine")):
        if not callable(fn):
            raise invalid(f"{what}: {role} {fn!r} is not callable")
    dt = pto_dtype(dtype, f"{what}: dtype")
    op = ReduxOp(name, NP_DTYPES[dt], init, combine, chip)
    with _slot_lock:
        free = [i for i, s in enumerate(_slots) if s is None]
        slot = free[0] if free else len(_slots)
        if slot >= lib.pyr_ntrampolines():
            raise invalid(f"{what}: {lib.pyr_ntrampolines()} reduction ops registered from "
                          "Python on live chips already, the most at once (close a chip to "
                          "free its ops)")
        if slot == len(_slots):
            _slots.append(None)
        out = ffi.new("int *")
        rc = lib.pyr_register(chip_ptr, name.encode(), dt, slot, out)
        if rc == 0:
            op.id, op._slot = int(out[0]), slot
            _slots[slot] = op
    if rc < 0:  # the call takes no pto_error_info: pto_last_error says why
        check(rc, f"{what}: " + ffi.string(lib.pto_last_error()).decode(errors="replace"))
    return op


def release_ops(ops: List[ReduxOp]) -> None:
    """A chip's ops, once the chip is destroyed: their trampolines are free."""
    with _slot_lock:
        for op in ops:
            if 0 <= op._slot < len(_slots) and _slots[op._slot] is op:
                _slots[op._slot] = None
            op._slot = -1


def _view(ptr, n: int, dtype: np.dtype, writable: bool) -> np.ndarray:
    a = np.frombuffer(ffi.buffer(ffi.cast("char *", ptr), n * dtype.itemsize), dtype)
    if not writable:
        a.flags.writeable = False
    return a


@ffi.def_extern()
def _pyr_init(slot, dst, n):
    op = _slots[slot]
    try:
        a = _view(dst, n, op.dtype, True)
        r = op.init(a)
        if r is not None:
            a[...] = r
    except BaseException as e:  # noqa: B902 - must not unwind into C
        op._raised(e, "init")


@ffi.def_extern()
def _pyr_combine(slot, acc, src, n):
    op = _slots[slot]
    try:
        a = _view(acc, n, op.dtype, True)
        r = op.combine(a, _view(src, n, op.dtype, False))
        if r is not None:
            a[...] = r
    except BaseException as e:  # noqa: B902 - must not unwind into C
        op._raised(e, "combine")
