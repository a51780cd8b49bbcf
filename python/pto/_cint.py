"""The one range check of the integers the Python front end passes to C.

cffi converts a Python int to a C integer only when it fits, and otherwise
raises a bare OverflowError ("integer 1099511627776 does not fit '32-bit
int'") that names neither the call nor the argument; a float or a string
gives a TypeError. Every int that reaches C (a call's argument, a struct
field, an array element) goes through :func:`c_int` or
:func:`set_int_field` first, which raise InvalidArgumentError naming the
argument and the range instead.
"""
from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Tuple

from ._errors import invalid
from ._pto import ffi


def _range(ctype: str) -> Tuple[int, int]:
    bits = 8 * ffi.sizeof(ctype)
    if int(ffi.cast(ctype, -1)) < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


_RANGES: Dict[str, Tuple[int, int]] = {}


def c_range(ctype: str) -> Tuple[int, int]:
    """(lowest, highest) value of the C integer type ``ctype``."""
    r = _RANGES.get(ctype)
    if r is None:
        r = _RANGES[ctype] = _range(ctype)
    return r


INT_MIN, INT_MAX = c_range("int")


def c_int(v: Any, what: str, ctype: str = "int", lo: Optional[int] = None,
          hi: Optional[int] = None, allow_bool: bool = False) -> int:
    """``v`` as an int that fits ``ctype`` and ``lo..hi`` (each default: the
    type's own limit); InvalidArgumentError naming ``what`` otherwise. A
    bool is refused unless ``allow_bool`` (a flag): Python takes True for
    1, which as a count, a priority or an op id ("prod") is a mistake that
    would pass."""
    if v.__class__ is bool and not allow_bool:
        raise invalid(f"{what}: bool {v!r} is not an int")
    try:
        i = operator.index(v)
    except TypeError:
        raise invalid(f"{what}: {type(v).__name__} {v!r} is not an int") from None
    tlo, thi = c_range(ctype)
    low = tlo if lo is None else max(lo, tlo)
    high = thi if hi is None else min(hi, thi)
    if not low <= i <= high:
        raise invalid(f"{what} {i}, must be {low}..{high}"
                      + (f" (a C {ctype})" if (low, high) == (tlo, thi) else ""))
    return i


def set_int_field(struct: Any, name: str, v: Any, what: str) -> None:
    """``struct.name = v`` for an integer field of a cffi struct (or a
    pointer to one), range-checked against the field's own C type (a bool
    is taken: config fields include flags)."""
    t = ffi.typeof(struct)
    ctype = dict((t.item if t.kind == "pointer" else t).fields)[name].type.cname
    setattr(struct, name, c_int(v, f"{what}: {name}", ctype, allow_bool=True))
