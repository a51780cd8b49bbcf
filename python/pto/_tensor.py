"""Tensors: NumPy arrays (and buffer-protocol / DLPack objects) as pto views,
the access-mode markers of task arguments, and runtime-allocated views."""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Set as AbstractSet
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._cint import c_int
from ._errors import error_from, invalid
from ._pto import ffi, lib

# access modes (pto_access)
# (a REDUX argument's descriptor word is REDUX | op << 8: MODE_MASK takes the mode)
INPUT, OUTPUT, OUTPUT_EXISTING, INOUT, NO_DEP, COMMUTE, REDUX = 0, 1, 2, 3, 4, 5, 6
MODE_MASK = 0xFF
MODE_NAMES = {INPUT: "In", OUTPUT: "New", OUTPUT_EXISTING: "Out", INOUT: "InOut", NO_DEP: "NoDep",
              COMMUTE: "Commute", REDUX: "Redux"}
WRITES = (OUTPUT_EXISTING, INOUT, COMMUTE, REDUX)
#: built-in reductions of pto.Redux (pto_redux_builtin)
REDUX_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}

#: NumPy dtype -> pto_dtype code (bf16 has no NumPy type)
DTYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float16): 1,
    np.dtype(np.int32): 3,
    np.dtype(np.int16): 4,
    np.dtype(np.int8): 5,
    np.dtype(np.uint8): 6,
    np.dtype(np.int64): 7,
    np.dtype(np.float64): 8,
}
NP_DTYPES = {v: k for k, v in DTYPES.items()}
MAX_DIMS = int(lib.PTO_MAX_DIMS)
DESC_WORDS = 17  # [mode, buf, bytes, dtype, ndims, offset, shape[5], stride[5], alloc_tag]

ArrayLike = Any  # ndarray, buffer-protocol object or DLPack producer


def shape_arg(shape: Any, what: str) -> Tuple[int, ...]:
    """A shape argument (an int, or a sequence of ints) as a tuple of int64
    values; InvalidArgumentError naming ``what`` otherwise (a dict's keys
    or a set's order would pass as dims)."""
    if np.isscalar(shape):
        return (c_int(shape, what, "int64_t"),)
    if isinstance(shape, (Mapping, AbstractSet)):
        raise invalid(f"{what}: {type(shape).__name__} {shape!r} is not a sequence (a mapping "
                      "or set has no order of dims; pass a tuple)")
    try:
        items = list(shape)
    except TypeError:
        raise invalid(f"{what}: {type(shape).__name__} {shape!r} is not an int or a "
                      "sequence") from None
    return tuple(c_int(s, f"{what}[{i}]", "int64_t") for i, s in enumerate(items))


def as_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """``np.dtype(dtype)``, or InvalidArgumentError naming ``what`` when
    NumPy does not understand it (a bare TypeError otherwise)."""
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise invalid(f"{what}: {dtype!r} is not a dtype ({e})") from None


def pto_dtype(dtype: Any, what: str = "dtype") -> int:
    """The pto_dtype code of a NumPy dtype (InvalidArgumentError if pto has none)."""
    dt = as_dtype(dtype, what)
    code = DTYPES.get(dt.newbyteorder("=") if dt.byteorder not in "=|" else dt)
    if code is None or not dt.isnative:
        names = ", ".join(str(d) for d in DTYPES)
        raise invalid(f"{what}: dtype {dt} is not supported by pto (native {names})")
    return code


class _Alias:
    """A writable NumPy alias of a DLPack import (keeps it alive)."""

    def __init__(self, a: np.ndarray):
        self.keep = a
        ai = dict(a.__array_interface__)
        ai["data"] = (ai["data"][0], False)
        self.__array_interface__ = ai


def as_array(obj: ArrayLike, what: str) -> np.ndarray:
    """A NumPy array over the same memory as ``obj`` (never a copy)."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__"):
        try:
            a = np.from_dlpack(obj)
        except (TypeError, ValueError, BufferError, RuntimeError, AttributeError) as e:
            raise invalid(f"{what}: DLPack export failed: {e}") from None
        if not a.flags.writeable:
            # DLPack (before v1) has no read-only flag and NumPy < 2 imports
            # read-only by caution: the producer's memory is writable
            a = np.asarray(_Alias(a))
        return a
    try:
        mv = memoryview(obj)
    except TypeError:
        raise invalid(f"{what}: {type(obj).__name__} is not an array (need a NumPy array, a "
                      "buffer-protocol object or a DLPack tensor; a list would be copied)") from None
    try:
        return np.asarray(mv)
    except (TypeError, ValueError) as e:
        raise invalid(f"{what}: buffer format {mv.format!r}: {e}") from None


def array_desc(a: np.ndarray, mode: int, what: str) -> List[int]:
    """The 17-word descriptor of a NumPy view (same bytes, positive strides)."""
    dt = DTYPES.get(a.dtype)
    if dt is None:
        dt = pto_dtype(a.dtype, what)  # raises, naming the dtype
    nd = a.ndim
    if nd > MAX_DIMS:
        raise invalid(f"{what}: {nd} dims, pto views have at most {MAX_DIMS}")
    if mode & MODE_MASK in WRITES and not a.flags.writeable:
        raise invalid(f"{what}: read-only array passed as {MODE_NAMES[mode & MODE_MASK]} (the task "
                      "writes it)")
    item = a.itemsize
    ptr = a.__array_interface__["data"][0]
    shape = a.shape
    if nd == 1 and a.strides[0] == item and shape[0] > 0:  # the common contiguous vector
        n = shape[0]
        return [mode, ptr, n * item, dt, 1, 0, n, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    if a.size == 0:
        raise invalid(f"{what}: empty array (shape {shape})")
    strides = []
    span = 1
    for d, (n, s) in enumerate(zip(shape, a.strides)):
        if n == 1:
            strides.append(1)
            continue
        if s <= 0:
            kind = "negative (a reversed view)" if s < 0 else "zero (a broadcast view)"
            raise invalid(f"{what}: stride of dim {d} is {kind}; pto views need positive strides "
                          "(pass a copy: np.ascontiguousarray)")
        if s % item:
            raise invalid(f"{what}: stride of dim {d} ({s} bytes) is not a multiple of the "
                          f"element size ({item})")
        strides.append(s // item)
        span += (n - 1) * (s // item)
    if nd == 0:
        shape, strides, nd = (1,), [1], 1
    pad = MAX_DIMS - nd
    return ([mode, ptr, span * item, dt, nd, 0] + list(shape) + [0] * pad + strides +
            [1] * pad + [0])


def array_tensor(a: np.ndarray, what: str, writes: bool = False):
    """A ``pto_tensor *`` (cdata) viewing a NumPy array."""
    d = array_desc(a, OUTPUT_EXISTING if writes else INPUT, what)
    t = ffi.new("pto_tensor *")
    lib.pyk_tensor(t, ffi.new("int64_t[]", d))
    return t


def tensor_to_array(t, writable: bool = True) -> np.ndarray:
    """A NumPy view of the memory a ``pto_tensor`` names (no copy). Not
    ``writable``: over a read-only buffer, so that its flag cannot be set
    back either."""
    dt = NP_DTYPES.get(t.dtype)
    if dt is None:
        raise invalid(f"tensor dtype {int(t.dtype)} has no NumPy type")
    nd = t.ndims
    item = dt.itemsize

    def buf(base, nbytes):
        b = ffi.buffer(base, nbytes)
        return b if writable else memoryview(b).toreadonly()

    if nd == 1 and t.stride[0] == 1:  # contiguous vector: the cheap constructor
        return np.frombuffer(buf(ffi.cast("char *", t.buf) + t.offset * item, t.shape[0] * item),
                             dt)
    shape = tuple(t.shape[0:nd])
    stride = t.stride[0:nd]
    span = 1
    for n, s in zip(shape, stride):
        span += (n - 1) * s
    base = ffi.cast("char *", t.buf) + t.offset * item
    strides = tuple(s * item for s in stride)
    if writable:
        return np.ndarray(shape, dt, ffi.buffer(base, span * item), 0, strides)
    # (np.ndarray over a read-only buffer lets its flag be set back: a view
    # of a read-only array does not)
    return np.lib.stride_tricks.as_strided(np.frombuffer(buf(base, span * item), dt), shape,
                                           strides, writeable=False)


class Arg:
    """A tensor argument tagged with its access mode (see In, Out, InOut, NoDep)."""

    __slots__ = ("obj",)
    mode = INPUT

    def __init__(self, obj: Union[ArrayLike, "View"]):
        self.obj = obj

    def __repr__(self) -> str:
        return f"pto.{type(self).__name__}({self.obj!r})"


class In(Arg):
    """INPUT: the task reads it (waits for earlier overlapping writers)."""
    mode = INPUT


class Out(Arg):
    """OUTPUT_EXISTING: the task writes into this existing array."""
    mode = OUTPUT_EXISTING


class InOut(Arg):
    """INOUT: the task reads and writes it."""
    mode = INOUT


class NoDep(Arg):
    """NO_DEP: passed to the kernel, never tracked for dependencies."""
    mode = NO_DEP


class Commute(Arg):
    """COMMUTE: the task reads and writes it, in any order with the other
    COMMUTE tasks on the same bytes but never at the same time (an
    accumulation); ordered as InOut against every other access. At most 4
    per task."""
    mode = COMMUTE


class Redux(Arg):
    """REDUX: a contribution to a reduction of the array with ``op``
    (``"sum"``, ``"prod"``, ``"max"``, ``"min"``, a :class:`ReduxOp` from
    ``Chip.redux_op``, or the id of an op registered on the chip from C;
    an op of another chip is refused at submit). The kernel sees a private copy set to the op's
    identity and accumulates into it; the copies are folded into the array in
    submission order (bit-reproducible) before the next other access to its
    bytes, a read or write of it, the scope's end or the run's end
    (docs/chip.md, Reductions). Each core of a task of several blocks has
    a copy of its own."""
    __slots__ = ("mode", "op")

    def __init__(self, obj: Union[ArrayLike, "View"], op: Any = "sum"):
        super().__init__(obj)
        self.op = op  # a ReduxOp is checked against the submitting chip
        if isinstance(op, str):
            code = REDUX_OPS.get(op)
            if code is None:
                raise invalid(f"pto.Redux: unknown op {op!r} (the built-ins are "
                              f"{', '.join(REDUX_OPS)}; a registered op is passed by its id)")
        else:
            code = c_int(op, "pto.Redux: op", "int", lo=0, hi=(1 << 23) - 1)
        self.mode = REDUX | code << 8

    def __repr__(self) -> str:
        return f"pto.Redux({self.obj!r}, {self.mode >> 8})"


class New:
    """OUTPUT: a new tensor the runtime allocates from the chip's heap ring.

    ``submit`` returns it as a :class:`View` in ``Task.outputs``; pass that
    view to later tasks and read it with ``Orch.read`` (a NumPy copy). It
    lives until its scope ends (a later use fails with PTO_EINVAL).
    """

    __slots__ = ("shape", "dtype")
    mode = OUTPUT

    def __init__(self, shape: Union[int, Sequence[int]], dtype: Any = np.float32):
        self.shape = shape_arg(shape, "pto.New: shape")
        self.dtype = as_dtype(dtype, "pto.New: dtype")

    def __repr__(self) -> str:
        return f"pto.New({self.shape}, {self.dtype})"


class View:
    """A pto view that is not a NumPy array: a runtime-allocated OUTPUT
    (``Task.outputs``) or a node window buffer (``NodeOrch.window``).

    Views support basic slicing (``v[2:6, ::2]``, positive steps),
    ``transpose(d0, d1)``/``.T`` and ``reshape`` without copying, like
    ``pto_tensor_slice/_transpose/_reshape``. Read their data with the
    orchestrator's ``read``.
    """

    def __init__(self, t, owner, what: str):
        self._t = t  # pto_tensor * (cdata)
        self._owner = owner  # the run (or node run) the view is valid in
        self._what = what
        self._words: Optional[List[int]] = None

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(int(self._t.shape[i]) for i in range(int(self._t.ndims)))

    @property
    def dtype(self) -> np.dtype:
        return NP_DTYPES[int(self._t.dtype)]

    @property
    def ndim(self) -> int:
        return int(self._t.ndims)

    def __repr__(self) -> str:
        return f"<pto.View {self._what} shape={self.shape} dtype={self.dtype}>"

    def _derive(self, fn, what: str) -> "View":
        out = ffi.new("pto_tensor *")
        rc = fn(self._t, out)
        if rc:
            # not an orchestrator call: nothing in the run records it, so
            # the error is raised as it is, with its own details
            raise error_from(rc, f"{self._what}: {what}")
        return type(self)(out, self._owner, self._what)

    def _contiguous(self) -> bool:
        """Packed row-major (dims of size 1 may have any stride)."""
        want = 1
        for d in reversed(range(self.ndim)):
            n = int(self._t.shape[d])
            if n != 1 and int(self._t.stride[d]) != want:
                return False
            want *= n
        return True

    def __getitem__(self, key) -> "View":
        if not isinstance(key, tuple):
            key = (key,)
        shape, stride = list(self.shape), [int(self._t.stride[i]) for i in range(self.ndim)]
        if len(key) > len(shape):
            raise invalid(f"{self._what}: {len(key)} indices for {len(shape)} dims")
        off = 0
        nshape, nstride = [], []
        for d, n in enumerate(shape):
            k = key[d] if d < len(key) else slice(None)
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise invalid(f"{self._what}: slice step {step} in dim {d}; steps must be > 0")
                cnt = max(0, (stop - start + step - 1) // step)
                if cnt == 0:
                    raise invalid(f"{self._what}: empty slice in dim {d}")
                off += start * stride[d]
                nshape.append(cnt)
                nstride.append(stride[d] * step)
            else:
                try:
                    i = operator.index(k)
                except TypeError:
                    raise invalid(f"{self._what}: index {k!r} (ints and slices only)") from None
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise invalid(f"{self._what}: index {k} out of range for dim {d} of {n}")
                off += i * stride[d]
        if not nshape:
            nshape, nstride = [1], [1]
        sh, st, nd = ffi.new("int64_t[]", nshape), ffi.new("int64_t[]", nstride), len(nshape)
        return self._derive(lambda src, out: lib.pto_tensor_view(src, nd, sh, st, off, out),
                            f"index {key!r}")

    def transpose(self, d0: int = 0, d1: int = 1) -> "View":
        """Swap dims d0 and d1 (no copy)."""
        what = f"transpose({d0!r}, {d1!r}) of a {self.ndim}-dim view"
        i0, i1 = (c_int(d, f"{self._what}: {what}: dim", "int", 0, self.ndim - 1) for d in (d0, d1))
        return self._derive(lambda src, out: lib.pto_tensor_transpose(src, i0, i1, out), what)

    @property
    def T(self) -> "View":
        """The last two dims swapped."""
        return self.transpose(self.ndim - 2, self.ndim - 1) if self.ndim >= 2 else self

    def reshape(self, *shape: int) -> "View":
        """Same elements, new shape (the view must be contiguous)."""
        sh = list(shape_arg(shape[0] if len(shape) == 1 else shape,
                            f"{self._what}: reshape: shape"))
        n = math.prod(self.shape)
        what = f"reshape of shape {self.shape} to {tuple(sh)}"
        if not self._contiguous():
            what += (": pto reshapes contiguous views only, and this one is not (a transposed or "
                     "strided view); reshape before slicing or transposing, or read a copy")
        elif not 1 <= len(sh) <= MAX_DIMS or min(sh) < 1 or math.prod(sh) != n:
            what += f": the new shape needs 1..{MAX_DIMS} dims, each >= 1, and {n} elements"
        return self._derive(lambda src, out: lib.pto_tensor_reshape(
            src, len(sh), ffi.new("int64_t[]", sh), out), what)

    def _desc(self, mode: int) -> List[int]:
        w = self._words
        if w is None:  # a View never changes: describe it once
            t = self._t
            w = self._words = ([int(ffi.cast("intptr_t", t.buf)), int(t.buf_bytes), int(t.dtype),
                                int(t.ndims), int(t.offset)] + list(t.shape) + list(t.stride) +
                               [int(t.alloc_tag)])
        return [mode] + w
