"""Kernels: pto's reference kernels by name, C kernels from a shared library,
Python kernels; and the context a Python kernel receives."""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ._cint import c_int
from ._errors import Error, check, exc_text, invalid
from ._pto import ffi, lib
from ._tensor import array_tensor, as_array, tensor_to_array

#: reference kernels (pto/kernels.h) and their core type
REFERENCE_KERNELS: Dict[str, str] = {
    "add": "aiv", "mul": "aiv", "scale": "aiv", "exp": "aiv", "copy": "aiv", "fill": "aiv",
    "matmul": "aic", "matmul_acc": "aic", "softmax_rows": "aiv", "online_softmax": "aiv",
    "normalize_rows": "aiv", "row_sum": "aiv", "row_max": "aiv", "col_sum": "aiv",
    "col_max": "aiv",
}
CORES = ("aic", "aiv", "mix")
PTO_EKERNEL = -15


class KernelSpec:
    """What to register as a kernel; made by :func:`ref_kernel`,
    :func:`c_kernel` or :func:`py_kernel` (``Chip.kernel`` also accepts a
    reference kernel's name or a Python callable directly)."""

    def __init__(self, kind: str, name: str, core: str = "aiv", aiv_count: Optional[int] = None,
                 fn: Optional[Callable] = None, path: Optional[str] = None,
                 symbol: Optional[str] = None, aic_symbol: Optional[str] = None):
        if not isinstance(name, str):
            raise invalid(f"kernel name {name!r} is not a str")
        if not name or "\0" in name:
            raise invalid(f"kernel name {name!r} " + ("is empty" if not name else
                          "contains a NUL byte (C would see a shorter name)"))
        if core not in CORES:
            raise invalid(f"kernel '{name}': core {core!r}, must be one of {CORES}")
        if aiv_count is not None and (aiv_count.__class__ is bool or aiv_count not in (0, 1, 2)):
            raise invalid(f"kernel '{name}': aiv_count {aiv_count}, must be 0, 1 or 2")
        self.kind, self.name, self.core, self.aiv_count = kind, name, core, aiv_count
        self.fn, self.path, self.symbol, self.aic_symbol = fn, path, symbol, aic_symbol

    def __repr__(self) -> str:
        return f"<pto.KernelSpec {self.kind} '{self.name}' {self.core}>"


def ref_kernel(name: str) -> KernelSpec:
    """pto's reference kernel ``name`` (pto/kernels.h: "add", "matmul", ...)."""
    if name not in REFERENCE_KERNELS:
        raise invalid(f"unknown reference kernel '{name}' (known: "
                      f"{', '.join(REFERENCE_KERNELS)})")
    return KernelSpec("ref", name, REFERENCE_KERNELS[name], symbol=name)


def c_kernel(path: str, symbol: str, core: str = "aiv", aiv_count: Optional[int] = None,
             name: Optional[str] = None, aic_symbol: Optional[str] = None) -> KernelSpec:
    """A C kernel ``int symbol(const pto_kctx *)`` from the shared library at
    ``path``. core "aic" or "aiv" registers it on that core type; "mix" runs
    ``aic_symbol`` (default: ``symbol``) on the AIC and ``symbol`` on
    ``aiv_count`` (default 2) AIV cores of one cluster. C kernels run with
    the GIL released."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise invalid(f"c_kernel: path {path!r} is not a file name (a str, bytes or "
                      "os.PathLike)") from None
    for what, sym in (("symbol", symbol), ("aic_symbol", aic_symbol)):
        if sym is not None and (not isinstance(sym, str) or not sym or "\0" in sym):
            raise invalid(f"c_kernel: {what} {sym!r} is not a str naming a function")
    if symbol is None:
        raise invalid("c_kernel: symbol None is not a str naming a function")
    return KernelSpec("c", name or symbol, core, aiv_count, path=path, symbol=symbol,
                      aic_symbol=aic_symbol)


def py_kernel(fn: Callable[..., Optional[int]], core: str = "aiv",
              aiv_count: Optional[int] = None, name: Optional[str] = None) -> KernelSpec:
    """A Python kernel: ``fn(ctx, *tensors)`` is called for every block with a
    :class:`KernelContext` and NumPy views of the task's tensors (same memory,
    valid during the call; the views of ``In`` tensors, and of read-only arrays
    passed as ``NoDep``, are read-only; at most
    15 scalars, the binding passes one itself). Return None or 0, or a negative pto code (an int)
    to fail the run (any other value fails it too, naming the value); an exception fails the run
    with PTO_EKERNEL (KernelError, the exception as its ``__cause__``). Each call takes the GIL;
    after Ctrl-C the next call cancels the run instead (KeyboardInterrupt)."""
    if not callable(fn):
        raise invalid(f"py_kernel: {fn!r} is not callable")
    return KernelSpec("py", name or getattr(fn, "__name__", "python_kernel"), core, aiv_count,
                      fn=fn)


def as_spec(k: Any, name: Optional[str] = None) -> KernelSpec:
    """The KernelSpec of ``k``, registered as ``name`` when one is given: a
    copy, the caller's spec unchanged (one spec may go by several names)."""
    if isinstance(k, str):
        k = ref_kernel(k)
    if isinstance(k, KernelSpec):
        if name is None or name == k.name:
            return k
        return KernelSpec(k.kind, name, k.core, k.aiv_count, fn=k.fn, path=k.path,
                          symbol=k.symbol, aic_symbol=k.aic_symbol)
    if callable(k):
        return py_kernel(k, name=name)
    raise invalid(f"kernel {k!r}: need a reference kernel name, a callable or a KernelSpec")


class Kernel:
    """A registered kernel: pass it to ``Orch.submit``."""

    __slots__ = ("name", "id", "kind", "_owner")

    def __init__(self, name: str, kid: int, kind: str, owner: Any):
        self.name, self.id, self.kind, self._owner = name, kid, kind, owner

    def __repr__(self) -> str:
        return f"<pto.Kernel '{self.name}' id={self.id} ({self.kind})>"


# ---- Python kernels: one C trampoline slot per callable, process-wide ----
_slots: List[Callable] = []
_slot_of: Dict[int, int] = {}
_slot_lock = threading.Lock()
_libs: Dict[str, ctypes.CDLL] = {}  # C kernel libraries, never unloaded


def _slot_for(fn: Callable) -> int:
    with _slot_lock:
        s = _slot_of.get(id(fn))
        if s is not None and _slots[s] is fn:
            return s
        if len(_slots) >= lib.pyk_ntrampolines():
            raise invalid(f"too many Python kernels: at most {lib.pyk_ntrampolines()} per process")
        _slots.append(fn)
        _slot_of[id(fn)] = len(_slots) - 1
        return len(_slots) - 1


def _c_symbol(path: str, symbol: str):
    try:
        dll = _libs.get(path)
        if dll is None:
            # libpto's symbols made global first (the copy next to this
            # module, which is loaded already): a kernel library that calls
            # pto_* functions then loads without being linked with -lpto
            libpto = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "libpto.so.%d" % lib.PTO_VERSION_MAJOR)
            ctypes.CDLL(libpto if os.path.exists(libpto) else os.path.basename(libpto),
                        mode=ctypes.RTLD_GLOBAL)
            dll = ctypes.CDLL(path)
            _libs[path] = dll
    except OSError as e:
        hint = (" (a symbol the library uses is defined by none loaded: link the library with "
                "the libraries it needs)") if "undefined symbol" in str(e) else ""
        raise invalid(f"c_kernel: cannot load library '{path}': {e}{hint}") from None
    try:
        f = getattr(dll, symbol)
    except AttributeError:
        raise invalid(f"c_kernel: no symbol '{symbol}' in '{path}'") from None
    return ffi.cast("pto_kernel_fn", ctypes.cast(f, ctypes.c_void_p).value)


def register(chip_ptr, spec: KernelSpec, keep: list) -> int:
    """Registers ``spec`` on a pto_chip; returns the kernel id."""
    if spec.kind == "ref":
        # (by the reference kernel's own name: the spec may be registered as another)
        aiv = aic = ffi.addressof(lib, "pto_kern_" + (spec.symbol or spec.name))
    elif spec.kind == "c":
        aiv = _c_symbol(spec.path, spec.symbol)
        aic = _c_symbol(spec.path, spec.aic_symbol) if spec.aic_symbol else aiv
    else:
        aiv = aic = lib.pyk_trampoline(_slot_for(spec.fn))
    d = ffi.new("pto_kernel_desc *")
    name = ffi.new("char[]", spec.name.encode())
    keep.append(name)
    d.name = name
    d.aic = aic if spec.core in ("aic", "mix") else ffi.NULL
    d.aiv = aiv if spec.core in ("aiv", "mix") else ffi.NULL
    d.aiv_count = spec.aiv_count if spec.aiv_count is not None else (2 if spec.core == "mix" else 0)
    if spec.core == "aiv" and spec.aiv_count is None:
        d.aiv_count = 1
    if spec.core == "aic":
        d.aiv_count = 0
    kid = ffi.new("int *")
    rc = lib.pto_kernel_register(chip_ptr, d, kid)
    if rc < 0:  # the call takes no pto_error_info: pto_last_error says why
        check(rc, ffi.string(lib.pto_last_error()).decode(errors="replace"))
    return int(kid[0])


# ---- what a Python kernel sees ----
_OPS = {"add": 0, "set": 1}
_CMPS = {"eq": 0, "ge": 1}
_RED = {"sum": 0, "max": 1, "min": 2, "prod": 3}
_REPRODUCIBLE = 0x100  # PTO_RED_REPRODUCIBLE: reduce in rank order on every path


def _red(op: Any, reproducible: Any) -> int:
    """A reduction op's code, with PTO_RED_REPRODUCIBLE or-ed in when asked."""
    if not isinstance(reproducible, bool):
        raise invalid(f"reproducible = {reproducible!r} is not a bool")
    return _pick(_RED, op, "op") | (_REPRODUCIBLE if reproducible else 0)


_ALGO = {"auto": 0, "mesh": 1, "ring": 2, "mpi": 3}


def _pick(table: Dict[str, int], v: Any, what: str) -> int:
    if isinstance(v, str):
        if v not in table:
            raise invalid(f"{what}: {v!r}, must be one of {', '.join(table)}")
        return table[v]
    return c_int(v, what)


def _domain_why(rc: int, what: str, d: int, chip: int) -> str:
    """What a failed pto_comm_rank / pto_comm_size means (they say only
    the code): the details of the error the kernel raises."""
    if rc == -1:  # PTO_EINVAL: no such domain here
        return (f"{what}: chip {chip} has no domain {d}: the chip is not among the domain's "
                "chips, or the domain is not of this node run (a domain lives for the run "
                "that made it: pass the Domain that NodeOrch.domain returned in this run)")
    if rc == -36:  # PTO_EPEER
        return f"{what}: chip {chip} is not a rank of domain {d}"
    return what


def _dom(d: Any, op: str) -> int:
    return c_int(d, f"{op}: domain", "int32_t")


def _peer(p: Any, op: str) -> int:
    return c_int(p, f"{op}: peer")


class KernelContext:
    """The block a Python kernel runs: its indices, scalars, tensors and
    (on the chips of a Node) the in-kernel communication operations.

    Tensors given to comm operations are NumPy views: of the kernel's own
    tensors (window buffers name the same offsets on every rank, so a view
    of my window names the peer's region), slices of them, or local arrays.
    Every operation raises a pto.Error on failure (the kernel then fails
    with that code unless it catches it). Valid only during the call.
    """

    __slots__ = ("_ctx", "scalars", "tensors")

    def __init__(self, ctx):
        self._ctx = ctx
        # the last scalar is the binding's: which tensors are INPUTs (read-only here)
        ns = ctx.nscalars - 1
        ro = ctx.scalars[ns] if ns >= 0 else 0
        #: scalar arguments as unsigned 64-bit integers
        self.scalars: tuple = tuple(ctx.scalars[0:ns]) if ns > 0 else ()
        ts = ctx.tensors
        views = []
        for i in range(ctx.ntensors):
            views.append(tensor_to_array(ts[i], writable=not ro >> i & 1))
        #: NumPy views of the task's tensors, in argument order (INPUTs read-only)
        self.tensors: tuple = tuple(views)

    @property
    def block_idx(self) -> int:
        """This block's index, 0..block_num-1."""
        return self._live().block_idx

    @property
    def block_num(self) -> int:
        """The task's number of blocks."""
        return self._live().block_num

    @property
    def sub_block_id(self) -> int:
        """0 or 1 for the two AIV of a MIX block, else 0."""
        return self._live().sub_block_id

    @property
    def core_id(self) -> int:
        """Chip-wide index of the core running the block."""
        return self._live().core_id

    @property
    def cluster_id(self) -> int:
        """The cluster of that core."""
        return self._live().cluster_id

    @property
    def core_type(self) -> str:
        """"aic" or "aiv"."""
        return "aic" if self._live().core_type == 0 else "aiv"

    @property
    def task_id(self) -> int:
        """The task's id."""
        return self._live().task_id

    def scalar_f32(self, i: int) -> float:
        """Scalar ``i`` read as an f32 bit pattern (floats passed to submit)."""
        return struct.unpack("<f", struct.pack("<I", self.scalars[i] & 0xFFFFFFFF))[0]

    def scalar_f64(self, i: int) -> float:
        """Scalar ``i`` read as an f64 bit pattern (``pto.f64(x)``)."""
        return struct.unpack("<d", struct.pack("<Q", self.scalars[i]))[0]

    def scalar_i64(self, i: int) -> int:
        """Scalar ``i`` as a signed 64-bit integer."""
        v = self.scalars[i]
        return v - (1 << 64) if v >= 1 << 63 else v

    def cancelled(self) -> bool:
        """True once the run failed or is shutting down, or (on a node's
        chip) the node cancelled the node task it runs: return early."""
        return bool(lib.pto_kctx_cancelled(self._live()))

    def _live(self):
        if self._ctx is None:
            raise invalid("KernelContext used after its kernel call returned")
        return self._ctx

    # -- communication (kernels on the chips of a pto.Node) --
    def _comm(self):
        c = lib.pyk_comm(self._live())
        if c == ffi.NULL or self._ctx.env == ffi.NULL or not _in_node_child():
            raise invalid("communication operations need a kernel running on a chip of a pto.Node")
        return c

    @property
    def chip(self) -> int:
        """This chip's rank in the node."""
        return int(lib.pto_comm_chip(self._comm()))

    def rank(self, dom: int) -> int:
        """My rank in domain ``dom``."""
        d = _dom(dom, "rank")
        r = lib.pto_comm_rank(self._comm(), d)
        check(r, _domain_why(r, f"rank(domain {d})", d, self.chip))
        return int(r)

    def size(self, dom: int) -> int:
        """Number of ranks of domain ``dom``."""
        d = _dom(dom, "size")
        r = lib.pto_comm_size(self._comm(), d)
        check(r, _domain_why(r, f"size(domain {d})", d, self.chip))
        return int(r)

    @staticmethod
    def _t(a: Any, what: str, writes: bool = False):
        return array_tensor(as_array(a, what), what, writes)

    def remote_store(self, dom: int, peer: int, dst: np.ndarray, src: np.ndarray) -> None:
        """Write local ``src`` into region ``dst`` (a view of my window) of peer's window."""
        self._comm()
        check(lib.pto_remote_store(self._ctx, _dom(dom, "remote_store"),
                                   _peer(peer, "remote_store"), self._t(dst, "dst"),
                                   self._t(src, "src")), "remote_store")

    def remote_store_add(self, dom: int, peer: int, dst: np.ndarray, src: np.ndarray) -> None:
        """Atomic ``dst += src`` on the peer."""
        self._comm()
        check(lib.pto_remote_store_add(self._ctx, _dom(dom, "remote_store_add"),
                                       _peer(peer, "remote_store_add"), self._t(dst, "dst"),
                                       self._t(src, "src")), "remote_store_add")

    def remote_load(self, dom: int, peer: int, dst: np.ndarray, src: np.ndarray) -> None:
        """Read region ``src`` of peer's window into local ``dst``."""
        self._comm()
        check(lib.pto_remote_load(self._ctx, _dom(dom, "remote_load"),
                                  _peer(peer, "remote_load"), self._t(dst, "dst", True),
                                  self._t(src, "src")), "remote_load")

    def _xfer(self, chunk_rows, chunk_cols, staging, atomic_add):
        o = ffi.new("pto_xfer_opts *")
        o.chunk_rows = c_int(chunk_rows, "chunk_rows", "int64_t")
        o.chunk_cols = c_int(chunk_cols, "chunk_cols", "int64_t")
        o.atomic_add = atomic_add
        keep = None
        if staging is not None:
            keep = self._t(staging, "staging", True)
            o.staging = keep
        return o, keep

    def put(self, dom: int, peer: int, dst: np.ndarray, src: np.ndarray, *, chunk_rows: int = 0,
            chunk_cols: int = 0, staging: Optional[np.ndarray] = None,
            atomic_add: bool = False) -> None:
        """Bulk transfer local ``src`` -> peer's ``dst`` (pto_put)."""
        self._comm()
        o, _k = self._xfer(chunk_rows, chunk_cols, staging, atomic_add)
        check(lib.pto_put(self._ctx, _dom(dom, "put"), _peer(peer, "put"), self._t(dst, "dst"),
                          self._t(src, "src"), o), "put")

    def get(self, dom: int, peer: int, dst: np.ndarray, src: np.ndarray, *, chunk_rows: int = 0,
            chunk_cols: int = 0, staging: Optional[np.ndarray] = None) -> None:
        """Bulk transfer peer's ``src`` -> local ``dst`` (pto_get)."""
        self._comm()
        o, _k = self._xfer(chunk_rows, chunk_cols, staging, False)
        check(lib.pto_get(self._ctx, _dom(dom, "get"), _peer(peer, "get"),
                          self._t(dst, "dst", True), self._t(src, "src"), o), "get")

    def notify(self, dom: int, peer: int, cell: np.ndarray, value: int = 1,
               op: str = "add") -> None:
        """Signal peer's ``cell`` (int64 window view): op "add" or "set" ``value``;
        releases my earlier stores to that peer first."""
        self._comm()
        check(lib.pto_notify(self._ctx, _dom(dom, "notify"), _peer(peer, "notify"),
                             self._t(cell, "cell"), _pick(_OPS, op, "notify op"),
                             c_int(value, "notify: value", "int32_t")), "notify")

    def wait(self, dom: int, cell: np.ndarray, value: int, cmp: str = "ge",
             timeout_ms: int = -1) -> None:
        """Wait until my ``cell`` == / >= ``value`` (acquire); WaitTimeoutError after
        ``timeout_ms`` (< 0: the node's wait_timeout_ms)."""
        self._comm()
        check(lib.pto_signal_wait(self._ctx, _dom(dom, "wait"), self._t(cell, "cell"),
                                  _pick(_CMPS, cmp, "wait cmp"),
                                  c_int(value, "wait: value", "int32_t"),
                                  c_int(timeout_ms, "wait: timeout_ms", "int64_t")), "wait")

    def signal_read(self, dom: int, cell: np.ndarray) -> int:
        """Current value of my ``cell`` in this task."""
        self._comm()
        v = ffi.new("int32_t *")
        check(lib.pto_signal_read(self._ctx, _dom(dom, "signal_read"), self._t(cell, "cell"), v),
              "signal_read")
        return int(v[0])

    def quiet(self, dom: int) -> None:
        """Complete every earlier store of this chip to every peer of ``dom``."""
        self._comm()
        check(lib.pto_quiet(self._ctx, _dom(dom, "quiet")), "quiet")

    def barrier(self, dom: int) -> None:
        """Quiet, then wait for every rank of ``dom`` (one block per rank)."""
        self._comm()
        check(lib.pto_barrier(self._ctx, _dom(dom, "barrier")), "barrier")

    # -- collectives (pto/coll.h); scratch: a window-buffer view sized with coll_scratch_bytes
    def allreduce(self, dom: int, scratch: np.ndarray, dst: np.ndarray, src: np.ndarray,
                  op: str = "sum", algo: str = "auto", reproducible: bool = False) -> None:
        """dst = op over every rank's src; algo: auto, mesh, ring or mpi (the
        MPI backend's own collective); reproducible: reduced in rank order,
        bit-identical on every path (PTO_RED_REPRODUCIBLE)."""
        self._comm()
        check(lib.pto_allreduce(self._ctx, _dom(dom, "allreduce"), self._t(scratch, "scratch"),
                                self._t(dst, "dst", True), self._t(src, "src"),
                                _red(op, reproducible), _pick(_ALGO, algo, "algo")), "allreduce")

    def allgather(self, dom: int, scratch: np.ndarray, dst: np.ndarray, src: np.ndarray) -> None:
        """dst (nranks x count) = every rank's src, in rank order."""
        self._comm()
        check(lib.pto_allgather(self._ctx, _dom(dom, "allgather"), self._t(scratch, "scratch"),
                                self._t(dst, "dst", True), self._t(src, "src")), "allgather")

    def reduce_scatter(self, dom: int, scratch: np.ndarray, dst: np.ndarray, src: np.ndarray,
                       op: str = "sum", reproducible: bool = False) -> None:
        """dst on rank r = op over every rank's block r of src (reproducible:
        as for allreduce)."""
        self._comm()
        check(lib.pto_reduce_scatter(self._ctx, _dom(dom, "reduce_scatter"),
                                     self._t(scratch, "scratch"), self._t(dst, "dst", True),
                                     self._t(src, "src"),
                                     _red(op, reproducible)), "reduce_scatter")

    def broadcast(self, dom: int, scratch: np.ndarray, dst: np.ndarray,
                  src: Optional[np.ndarray], root: int) -> None:
        """dst on every rank = src of ``root``."""
        self._comm()
        s = self._t(src, "src") if src is not None else ffi.NULL
        check(lib.pto_broadcast(self._ctx, _dom(dom, "broadcast"), self._t(scratch, "scratch"),
                                self._t(dst, "dst", True), s, c_int(root, "broadcast: root")),
              "broadcast")

    def alltoall(self, dom: int, scratch: np.ndarray, dst: np.ndarray, src: np.ndarray) -> None:
        """dst block s on rank r = src block r of rank s."""
        self._comm()
        check(lib.pto_alltoall(self._ctx, _dom(dom, "alltoall"), self._t(scratch, "scratch"),
                               self._t(dst, "dst", True), self._t(src, "src")), "alltoall")


# ---- the trampoline's Python side ----
_node_child = False  # set in the chip processes of a pto.Node


def _in_node_child() -> bool:
    return _node_child


def kernel_code(r: Any, what: str) -> int:
    """The status a Python kernel (or host function) hands back to C: None
    is 0; an int that fits an int32 passes as it is (0 succeeds, any other
    value fails the run, pto's details naming it); anything else raises,
    naming the value (cffi would print a warning and pass 0: success)."""
    if r is None:
        return 0
    if isinstance(r, (int, np.integer)) and not isinstance(r, bool) and -(1 << 31) <= r < 1 << 31:
        return int(r)
    s = repr(r)
    raise ValueError(f"{what} returned {s if len(s) <= 80 else s[:77] + '...'}: it must return "
                     "None, 0 or a negative pto status code (an int)")


# error=: whatever escapes the handler below fails the kernel, never passes as 0
@ffi.def_extern(error=PTO_EKERNEL)
def _pyk_kernel(slot, ctx):
    kc = None
    try:
        fn = _slots[slot]
        if lib.pyk_sigint_tripped():  # Ctrl-C: the run is cancelled (_build.py)
            raise KeyboardInterrupt("SIGINT (Ctrl-C) during the run: the run is cancelled at "
                                    "this Python kernel, which did not run")
        kc = KernelContext(ctx)
        r = fn(kc, *kc.tensors)
        return kernel_code(r, f"Python kernel '{getattr(fn, '__name__', fn)}'")
    except BaseException as e:  # noqa: B902 - a kernel must never unwind into C
        code = e.code if isinstance(e, Error) and e.code < 0 else PTO_EKERNEL
        _report_kernel_exception(ctx, e)
        # the exception's type and text end the run's details
        why = exc_text(e).encode(errors="replace")
        return lib.pto_kctx_fail(ctx, code, b"%s", ffi.new("char[]", why))
    finally:
        if kc is not None:
            kc._ctx = None


def _report_kernel_exception(ctx, e: BaseException) -> None:
    if not _node_child and ctx.env != ffi.NULL:
        try:
            ffi.from_handle(ctx.env)._kernel_exception(e, int(ctx.task_id))
            return
        except Exception:  # pragma: no cover
            pass
    # in a node's chip process: the parent only sees the code; say it here
    sys.stderr.write(f"pto: Python kernel (task {int(ctx.task_id)}, block "
                     f"{int(ctx.block_idx)}) raised:\n" + "".join(
                         traceback.format_exception(type(e), e, e.__traceback__)))
    sys.stderr.flush()
