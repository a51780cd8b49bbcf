"""pto.Error and one subclass per pto status code."""
from __future__ import annotations

import operator
import os
from typing import Any, Dict, Optional, Type

# The first import of the compiled module (the package imports this one
# first): when it is missing, or libpto.so.0 beside it is, say which and
# what fixes it, not only "No module named 'pto._pto'".
try:
    from ._pto import ffi, lib
except ImportError as e:
    _where = os.path.dirname(os.path.abspath(__file__))
    if getattr(e, "name", None) == "pto._pto":
        _why = ("is missing", "build it with scripts/python.sh (docs/python.md), and do not run "
                "from the python/ source directory, whose pto/ hides the installed package")
    else:  # the module is there, but not what it links (libpto.so.0)
        _why = ("cannot be loaded", "build and install it again with scripts/python.sh "
                "(docs/python.md)")
    raise ImportError(f"pto's compiled module {_why[0]} ({e}; pto was imported from {_where}): "
                      f"{_why[1]}") from e

# What `from ._errors import *` gives the package: the error classes only
# (ERRORS' values, appended below), not this module's helpers or imports.
__all__ = ["Error"]


def _status_code(code: Any, what: str) -> int:
    """A status code as the C int pto's calls take: anything else (a
    string, a float, an int beyond an int's range) raises
    InvalidArgumentError naming it (before: a bare ValueError or
    OverflowError, or a float silently truncated). (_cint's rule, which
    imports this module.)"""
    if code.__class__ is bool:
        raise invalid(f"{what}: bool {code!r} is not a status code")
    try:
        i = operator.index(code)
    except TypeError:
        raise invalid(f"{what}: {type(code).__name__} {code!r} is not a status code (an "
                      "int)") from None
    if not -(1 << 31) <= i < 1 << 31:
        raise invalid(f"{what}: {i} is not a status code (a C int)")
    return i


def status_name(code: int) -> str:
    """The name of a pto status code, e.g. ``"PTO_EHEAP_DEADLOCK"``."""
    return ffi.string(lib.pto_status_name(_status_code(code, "status_name"))).decode()


def status_hint(code: int) -> str:
    """pto's one-line hint for a status code (what it means, what fixes it)."""
    return ffi.string(lib.pto_strerror(_status_code(code, "status_hint"))).decode()


class Error(Exception):
    """A pto call or run failed.

    Attributes: ``code`` (the negative PTO_E* value), ``status`` (its name),
    ``hint`` (pto's one-line explanation), ``details`` (the specifics: which
    argument, task, rank...), ``task`` (task id or None), ``core`` (core id
    or None), ``kernel`` (kernel name or None), ``stall`` (stall class name
    for PTO_ESCHED_TIMEOUT, else None). A ContractError (PTO_ECONTRACT,
    checking mode) also has ``arg`` (the index of the task's tensor argument
    it names, or None) and ``array`` (the object passed there: the NumPy
    array, or the output view of a ``pto.New``).
    """

    code: int = 0
    arg: Optional[int] = None
    array: Any = None

    def __init__(self, code: Optional[int] = None, details: str = "", *, task: Optional[int] = None,
                 core: Optional[int] = None, kernel: Optional[str] = None,
                 stall: Optional[str] = None):
        self.code = int(code if code is not None else type(self).code)
        self.status = status_name(self.code)
        self.hint = status_hint(self.code)
        self.details = details
        self.task = task
        self.core = core
        self.kernel = kernel
        self.stall = stall
        super().__init__(str(self))

    def __str__(self) -> str:
        s = f"{self.status}: {self.hint}"
        where = []
        if self.kernel:
            where.append(f"kernel '{self.kernel}'")
        if self.task is not None:
            where.append(f"task {self.task}")
        if self.core is not None:
            where.append(f"core {self.core}")
        if self.stall:
            where.append(f"stall {self.stall}")
        if where:
            s += " [" + ", ".join(where) + "]"
        if self.details:
            s += "\n  " + self.details
        return s

    def __reduce__(self):
        return (_rebuild, (self.code, self.details, self.task, self.core, self.kernel, self.stall))


def _rebuild(code, details, task, core, kernel, stall):
    return error_from(code, details, task=task, core=core, kernel=kernel, stall=stall)


# name -> (code, extra bases)
_TABLE = [
    ("InvalidArgumentError", -1, (ValueError,)),
    ("NoMemoryError", -2, (MemoryError,)),
    ("ScopeDeadlockError", -3, ()),
    ("HeapDeadlockError", -4, ()),
    ("TaskRingDeadlockError", -5, ()),
    ("DepOverflowError", -6, ()),
    ("SyncWidthError", -7, ()),
    ("TensorWaitTimeoutError", -8, (TimeoutError,)),
    ("FatalError", -9, ()),
    ("ScopeOverflowError", -10, ()),
    ("TensorMapOverflowError", -11, ()),
    ("SchedTimeoutError", -12, (TimeoutError,)),
    ("AsyncInvalidError", -13, ()),
    ("AsyncOverflowError", -14, ()),
    ("KernelError", -15, ()),
    ("ShutdownError", -16, ()),
    ("BusyError", -17, ()),
    ("InternalError", -18, ()),
    ("GraphError", -19, ()),
    ("ContractError", -20, ()),
    ("ReplayError", -21, ()),
    ("DeviceBusyError", -30, ()),
    ("ChipDiedError", -31, ()),
    ("StartupTimeoutError", -32, (TimeoutError,)),
    ("ControlTimeoutError", -33, (TimeoutError,)),
    ("WaitTimeoutError", -34, (TimeoutError,)),
    ("BoundsError", -35, ()),
    ("PeerError", -36, ()),
    ("PoisonedError", -37, ()),
    ("SystemCallError", -38, (OSError,)),
    ("MPIError", -39, ()),
    ("AlignError", -40, ()),
    ("CancelledError", -41, ()),
]

ERRORS: Dict[int, Type[Error]] = {}
for _name, _code, _bases in _TABLE:
    _cls = type(_name, (Error,) + _bases, {
        "code": _code,
        "__doc__": f"{status_name(_code)}: {status_hint(_code)}",
        "__module__": "pto",
        "__str__": Error.__str__,
        "__init__": Error.__init__,
    })
    ERRORS[_code] = _cls
    globals()[_name] = _cls
    __all__.append(_name)
del _name, _code, _bases, _cls


def error_from(code: int, details: str = "", **kw) -> Error:
    """The Error subclass instance for ``code`` (plain Error for unknown codes)."""
    code = _status_code(code, "error_from")
    return ERRORS.get(code, Error)(code, details, **kw)


def error_from_info(code: int, info) -> Error:
    """An Error from a filled ``pto_error_info``."""
    details = ffi.string(info.details).decode(errors="replace")
    kernel = ffi.string(info.kernel).decode(errors="replace") or None
    task = int(info.task_id)
    core = int(info.core_id)
    stall = None
    if int(info.stall):
        stall = ffi.string(lib.pto_stall_class_name(info.stall)).decode()
    return error_from(code, details, task=None if task < 0 else task,
                      core=None if core < 0 else core, kernel=kernel, stall=stall)


def exc_text(e: BaseException) -> str:
    """``"Type: text"`` of an exception, even when its ``__str__`` raises
    (the text then says so): what pto's details say of a Python exception,
    built inside callbacks that must not raise."""
    try:
        return f"{type(e).__name__}: {e}"
    except Exception:  # noqa: BLE001 - any failure of a user's __str__
        return f"{type(e).__name__}: <str() of the exception raised>"


def invalid(details: str) -> Error:
    """InvalidArgumentError (PTO_EINVAL) with ``details``: bad input from Python."""
    return error_from(-1, details)


def check(rc: int, what: str, run: Any = None) -> None:
    """Raise the matching Error when a pto call returned a negative code;
    ``run``: the token of the run whose orchestrator made the call (the
    run's latched error info then has the specifics), None for any other."""
    if rc < 0:
        e = error_from(rc, what)
        e._from_call = run
        raise e
