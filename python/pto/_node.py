"""pto.Node: several chips, each in its own (forked) process, driven by a
node orchestration function in this process."""
from __future__ import annotations

import gc
import math
import os
import re
import signal
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kernel
from ._chip import file_name, fill_chip_config, schedule_config
from ._cint import c_int, set_int_field
from ._errors import Error, check, error_from, error_from_info, exc_text, invalid
from ._kernel import Kernel, KernelSpec, as_spec, register
from ._orch import (MAX_SCALARS, MAX_TENSORS, OwnerThread, count_of, input_mask, orch_returned,
                    scalar_bits)
from ._pto import ffi, lib
from ._tensor import (INPUT, Arg, New, View, array_desc, as_array, as_dtype, pto_dtype,
                      shape_arg, tensor_to_array)


def coll_scratch_bytes(nranks: int, block_bytes: int) -> int:
    """Scratch bytes a collective over ``nranks`` needs for blocks of up to ``block_bytes``."""
    n = c_int(nranks, "coll_scratch_bytes: nranks", "int", 1, int(lib.PTO_COMM_MAX_RANKS))
    b = c_int(block_bytes, "coll_scratch_bytes: block_bytes", "size_t")
    r = int(lib.pto_coll_scratch_bytes(n, b))
    if r == 0:  # pto's answer for a collective it cannot run
        raise invalid(f"coll_scratch_bytes: block_bytes {b}: pto's collectives take blocks of "
                      "at most 2**48 bytes")
    return r


def _c_name(name: Any, what: str) -> bytes:
    """A window buffer's name as C gets it: ``str(name)``, UTF-8; a NUL
    byte is refused (C would read the name up to it: "x\\0y" would pass
    as "x", a buffer of another name)."""
    s = str(name)
    if "\0" in s:
        raise invalid(f"{what}: name {s!r} contains a NUL byte (C would see "
                      f"{s.split(chr(0))[0]!r})")
    return s.encode()


class _KeptHost:
    """Host memory of a node closed while arrays still viewed it
    (pto_node_host_keep): unmapped once the last of them is gone."""

    def __init__(self, base, nbytes: int):
        self.base, self.nbytes = base, nbytes

    def __del__(self) -> None:
        try:
            lib.pyk_munmap(self.base, self.nbytes)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class _HostMem:
    """Owner of one block of node host memory (the base of its NumPy arrays)."""

    def __init__(self, node: "Node", ptr, nbytes: int, shape, dtype):
        self.node = node
        self.kept: Optional[_KeptHost] = None  # the memory, once its node is closed
        self.__array_interface__ = {"data": (int(ffi.cast("intptr_t", ptr)), False),
                                    "shape": tuple(shape), "typestr": dtype.str, "version": 3}


class Domain(int):
    """A communication domain (an int id: pass it to kernels as a scalar)
    with its ``chips`` and window ``buffers`` (name -> bytes)."""

    chips: Tuple[int, ...]
    buffers: Dict[str, int]

    def __new__(cls, dom: int, chips, buffers):
        d = super().__new__(cls, dom)
        d.chips, d.buffers = tuple(chips), dict(buffers)
        return d


class WindowView(View):
    """A view of one rank's copy of a window buffer (from ``NodeOrch.window``)."""


# NodeOrch calls from another thread: the C call pto refuses there (_build.py)
_NODE_FOREIGN = {"domain": 0, "window": 1, "submit": 2, "submit_group": 3, "submit_host": 4,
                 "wait_all": 5, "read": 6, "allreduce": 7, "allgather": 8, "reduce_scatter": 9,
                 "broadcast": 10, "alltoall": 11}


class NodeOrch(OwnerThread):
    """The orchestrator of one ``Node.run``: domains, window views, node
    tasks (one kernel per chip), collectives on host arrays, reads. Valid
    only during the orchestration function, and only on its thread: a call
    from another thread raises InvalidArgumentError and fails the run
    (docs/python.md), as an Orch's does."""

    _name, _article = "NodeOrch", "a"

    def __init__(self, no, run: "_NodeRun"):
        self._own(no)
        self._run = run

    def _foreign(self, no, call: str) -> None:
        lib.pyk_node_foreign_call(no, _NODE_FOREIGN[call])

    def domain(self, chips: Sequence[int], buffers: Mapping[str, int]) -> Domain:
        """A domain over ``chips`` (domain rank r is node chip chips[r]) with
        window buffers ``{name: bytes}`` in each rank's window (zeroed)."""
        no = self._live("domain")
        count_of(chips, "domain: chips")
        if not isinstance(buffers, Mapping):
            raise invalid(f"domain: buffers: {type(buffers).__name__} {buffers!r} is not a "
                          "mapping (name -> bytes)")
        ch = [c_int(c, "domain: chip") for c in chips]
        names = [ffi.new("char[]", _c_name(k, "domain: window buffer")) for k in buffers]
        wb = ffi.new("pto_window_buffer[]", max(1, len(names)))
        for i, (k, v) in enumerate(buffers.items()):
            wb[i].name, wb[i].bytes = names[i], c_int(v, f"domain: buffer '{k}' bytes", "size_t")
        out = ffi.new("pto_domain *")
        check(lib.pto_node_domain_create(no, ffi.new("int[]", ch), len(ch), wb, len(names), out),
              f"domain over chips {ch}", self._run.token)
        self._run.domains[int(out[0])] = len(ch)
        return Domain(int(out[0]), ch, buffers)

    def window(self, dom: Domain, rank: int, name: str, dtype: Any,
               shape: Union[int, Sequence[int]]) -> WindowView:
        """A view of rank ``rank``'s copy of window buffer ``name`` (a task
        argument for dependency inference; readable with ``read``)."""
        no = self._live("window")
        what = f"window '{name}'"
        sh = list(shape_arg(shape, f"{what}: shape"))
        t = ffi.new("pto_tensor *")
        check(lib.pto_node_window_tensor(no, c_int(dom, f"{what}: domain", "int32_t"),
                                         c_int(rank, f"{what}: rank"), _c_name(name, "window"),
                                         pto_dtype(dtype, "window"), len(sh),
                                         ffi.new("int64_t[]", sh), t),
              f"window '{name}' of rank {rank}", self._run.token)
        return WindowView(t, self._run, f"window '{name}' of rank {rank}")

    def _desc(self, a: Any, what: str) -> List[int]:
        if isinstance(a, New):
            raise invalid(f"{what}: pto.New is not supported for node tasks; allocate with "
                          "node.host_array and pass pto.Out(array)")
        if not isinstance(a, Arg):
            raise invalid(f"{what}: {type(a).__name__} without an access mode; wrap it: "
                          "pto.In(x), pto.Out(x), pto.InOut(x), pto.NoDep(x)")
        if isinstance(a.obj, View):
            if a.obj._owner is not self._run:
                raise invalid(f"{what}: {a.obj._what} belongs to another run")
            return a.obj._desc(a.mode)
        arr = as_array(a.obj, what)
        self._run.keep.append(arr)
        return array_desc(arr, a.mode, what)

    def submit(self, chip: int, kernel: Kernel, *args: Arg, scalars: Sequence[Any] = (),
               block_num: int = 1, sync_start: bool = False) -> int:
        """A node task on one chip running ``kernel`` with ``args`` (views of
        node host arrays or window buffers); returns the node task id."""
        return self._submit(self._live("submit"), [chip], kernel, [list(args)], scalars,
                            block_num, sync_start)

    def submit_group(self, chips: Sequence[int], kernel: Kernel, args: Sequence[Sequence[Arg]],
                     scalars: Sequence[Any] = (), block_num: int = 1,
                     sync_start: bool = False) -> int:
        """One node task dispatched to all ``chips`` at once: chip chips[g]
        runs ``kernel`` with ``args[g]`` (the same number of tensors for every
        chip) and ``scalars``. Every rank's tensors are declared, so node-level
        dependency inference sees all of them. Returns the node task id."""
        return self._submit(self._live("submit_group"), chips, kernel, args, scalars, block_num,
                            sync_start)

    def _submit(self, no, chips, kernel, args, scalars, block_num, sync_start) -> int:
        if not isinstance(kernel, Kernel) or kernel._owner is not self._run.node:
            raise invalid(f"submit: {kernel!r} is not a kernel of this node (Node(kernels=...))")
        count_of(chips, f"submit '{kernel.name}': chips")
        ch = [c_int(c, f"submit '{kernel.name}': chip") for c in chips]
        count_of(args, f"submit '{kernel.name}': args")
        for g, al in enumerate(args):
            count_of(al, f"submit '{kernel.name}': argument list of chip {g}")
        if len(args) != len(ch):
            raise invalid(f"submit '{kernel.name}': {len(args)} argument lists for {len(ch)} chips")
        k = len(args[0]) if args else 0
        if any(len(a) != k for a in args):
            raise invalid(f"submit '{kernel.name}': every chip needs the same number of tensors")
        if k * len(ch) > MAX_TENSORS:
            raise invalid(f"submit '{kernel.name}': {k * len(ch)} tensors, at most {MAX_TENSORS}")
        if count_of(scalars, f"submit '{kernel.name}': scalars") > MAX_SCALARS - 3:
            raise invalid(f"submit '{kernel.name}': {len(scalars)} scalars, at most "
                          f"{MAX_SCALARS - 3} for node tasks")
        flat: List[int] = []
        for g, al in enumerate(args):
            for i, a in enumerate(al):
                flat += self._desc(a, f"submit '{kernel.name}': chip {ch[g]} tensor {i}")
        sc = [scalar_bits(s, f"submit '{kernel.name}': scalar {i}") for i, s in enumerate(scalars)]
        py = kernel.kind == "py"
        if py:  # which tensors are INPUTs (read-only in the kernel), every rank's:
            # bit g * k + i for tensor i of rank g; each chip's kernel gets its own
            if len(sc) > MAX_SCALARS - 4:
                raise invalid(f"submit '{kernel.name}': {len(sc)} scalars, at most "
                              f"{MAX_SCALARS - 4} for a Python kernel on a node")
            sc.append(sum(input_mask(al) << (g * k) for g, al in enumerate(args)))
        bn = c_int(block_num, f"submit '{kernel.name}': block_num", "int", lo=1)
        tid = ffi.new("pto_task_id *")
        check(lib.pyk_node_submit(no, ffi.new("int[]", ch), len(ch), kernel.id, k,
                                  ffi.new("int64_t[]", flat) if flat else ffi.NULL, len(sc),
                                  ffi.new("uint64_t[]", sc) if sc else ffi.NULL, bn,
                                  1 if sync_start else 0, 1 if py else 0, tid),
              f"submit '{kernel.name}' on chips {ch}", self._run.token)
        if self._run.task_args is not None:
            self._run.task_args[int(tid[0])] = tuple(a for al in args for a in al)
        return int(tid[0])

    def submit_host(self, fn: Union["HostFn", str], *args: Arg, scalars: Sequence[Any] = (),
                    worker: int = -1, read_check: bool = True) -> int:
        """A node task on a host sub-worker process (``worker`` < 0: any):
        ``fn(ctx, *tensors)`` with a :class:`HostContext` and NumPy views of
        ``args`` (node host arrays or window views; ``In`` views read-only).
        Return None or 0, or a negative pto code; an exception fails the task
        with PTO_EKERNEL (its traceback goes to the worker's stderr).
        ``read_check=False``: checking mode does not run it a second time to
        look for undeclared reads (a function whose writes vary from run to
        run; ``pto_node_skip_read_check``)."""
        no = self._live("submit_host")
        node = self._run.node
        if isinstance(fn, str):
            if fn not in node.host_fns:
                raise invalid(f"submit_host: no host function '{fn}' (Node(host_fns=...) has "
                              f"{', '.join(node.host_fns) or 'none'})")
            fn = node.host_fns[fn]
        if not isinstance(fn, HostFn) or fn._owner is not node:
            raise invalid(f"submit_host: {fn!r} is not a host function of this node")
        ns = count_of(scalars, f"submit_host '{fn.name}': scalars")
        if len(args) > MAX_TENSORS or ns > MAX_SCALARS:
            raise invalid(f"submit_host '{fn.name}': at most {MAX_TENSORS} tensors and "
                          f"{MAX_SCALARS} scalars")
        flat: List[int] = []
        for i, a in enumerate(args):
            flat += self._desc(a, f"submit_host '{fn.name}': tensor {i}")
        sc = [scalar_bits(s, f"submit_host '{fn.name}': scalar {i}") for i, s in enumerate(scalars)]
        tid = ffi.new("pto_task_id *")
        check(lib.pyk_node_submit_host(no, c_int(worker, f"submit_host '{fn.name}': worker"),
                                       fn.index, len(args),
                                       ffi.new("int64_t[]", flat) if flat else ffi.NULL, len(sc),
                                       ffi.new("uint64_t[]", sc) if sc else ffi.NULL,
                                       1 if read_check else 0, tid),
              f"submit_host '{fn.name}' (worker {worker})", self._run.token)
        if self._run.task_args is not None:
            self._run.task_args[int(tid[0])] = tuple(args)
            self._run.host_names[int(tid[0])] = fn.name
        return int(tid[0])

    def wait_all(self) -> None:
        """Wait for every submitted node task."""
        check(lib.pto_node_wait_all(self._live("wait_all")), "wait_all", self._run.token)

    def read(self, x: Union[np.ndarray, View]) -> np.ndarray:
        """A packed NumPy copy of ``x`` once every earlier writer task finished."""
        no = self._live("read")
        if isinstance(x, View):
            if x._owner is not self._run:  # its domain may be gone, its place another's
                raise invalid(f"read: {x._what} belongs to another run")
            t, shape, dt = x._t, x.shape, x.dtype
        else:
            arr = as_array(x, "read")
            t = ffi.new("pto_tensor *")
            lib.pyk_tensor(t, ffi.new("int64_t[]", array_desc(arr, 0, "read")))
            shape, dt = arr.shape or (1,), arr.dtype
        out = np.empty(shape, dtype=dt)
        check(lib.pto_node_read(no, t, ffi.from_buffer(out)), "read", self._run.token)
        return out

    def _coll(self, name, fn, dom, scratch, dst, src, extra=tuple, rooted=False):
        # extra(): the C call's last arguments (op, algo; a broadcast's root,
        # which is then also the one rank whose src is read), read once the
        # call is known to be the owner's, as every other argument
        no = self._live(name)
        extra = extra()
        root = extra[0] if rooted else None
        for w, x in (("dst", dst), ("src", src)):
            if isinstance(x, np.ndarray) or not isinstance(x, (list, tuple)):
                raise invalid(f"{name}: {w}: {type(x).__name__} is not a list of arrays (one "
                              "per rank)")
        # C reads one dst and one src per rank of the domain as this run
        # made it: its own count, not a Domain's (of another node, with the
        # same id) nor the lists' (for an int id)
        d = c_int(dom, f"{name}: domain", "int32_t")
        n = self._run.domains.get(d)
        if n is None:
            raise invalid(f"{name}: no domain {d} in this run (NodeOrch.domain makes one; a "
                          "domain lives for the run that made it)")
        if len(dst) != n or len(src) != n:
            raise invalid(f"{name}: need {n} dst and src arrays (one per rank of domain {d}), "
                          f"got {len(dst)} and {len(src)}")
        dt = ffi.new("pto_tensor[]", n)
        st = ffi.new("pto_tensor[]", n)
        for r in range(n):
            for arr, tt, w, wr in ((dst[r], dt, "dst", True), (src[r], st, "src", False)):
                if arr is None:
                    # C reads every dst and src but a broadcast's other
                    # ranks' src (root: the broadcast's): None there would
                    # reach it as a NULL buf, named as such
                    if wr or root is None or r == root:
                        raise invalid(f"{name}: {w}[{r}] is None (rank {r} of domain {d} "
                                      f"needs an array)")
                    continue
                a = as_array(arr, f"{name}: {w}[{r}]")
                if not a.flags.c_contiguous:
                    raise invalid(f"{name}: {w}[{r}] must be contiguous")
                self._run.keep.append(a)
                lib.pyk_tensor(tt + r, ffi.new("int64_t[]", array_desc(
                    a, 2 if wr else 0, f"{name}: {w}[{r}]")))
        check(fn(no, d, _c_name(scratch, f"{name}: scratch"), dt, st, *extra),
              f"{name} on domain {d}", self._run.token)

    def allreduce(self, dom: Domain, scratch: str, dst: Sequence[np.ndarray],
                  src: Sequence[np.ndarray], op: str = "sum", algo: str = "auto",
                  reproducible: bool = False) -> None:
        """dst[r] = op over every src[r'] (host arrays, one per rank); algo:
        auto, mesh, ring or mpi; reproducible: reduced in rank order,
        bit-identical on every path (PTO_RED_REPRODUCIBLE)."""
        self._coll("allreduce", lib.pto_node_allreduce, dom, scratch, dst, src,
                   lambda: (_kernel._red(op, reproducible),
                            _kernel._pick(_kernel._ALGO, algo, "algo")))

    def allgather(self, dom: Domain, scratch: str, dst, src) -> None:
        """dst[r] (nranks x count) = every rank's src."""
        self._coll("allgather", lib.pto_node_allgather, dom, scratch, dst, src)

    def reduce_scatter(self, dom: Domain, scratch: str, dst, src, op: str = "sum",
                       reproducible: bool = False) -> None:
        """dst[r] = op over block r of every rank's src (reproducible: as for
        allreduce)."""
        self._coll("reduce_scatter", lib.pto_node_reduce_scatter, dom, scratch, dst, src,
                   lambda: (_kernel._red(op, reproducible),))

    def broadcast(self, dom: Domain, scratch: str, dst, src, root: int) -> None:
        """dst[r] = src[root] for every rank."""
        self._coll("broadcast", lib.pto_node_broadcast, dom, scratch, dst, src,
                   lambda: (c_int(root, "broadcast: root"),), rooted=True)

    def alltoall(self, dom: Domain, scratch: str, dst, src) -> None:
        """dst block s on rank r = src block r of rank s."""
        self._coll("alltoall", lib.pto_node_alltoall, dom, scratch, dst, src)


def _python_host_words(details: str, name: str) -> str:
    """A host task's read-check error in Python's words: every Python host
    function runs through one C trampoline, which the C details name."""
    details = re.sub(r"host function ('[^']*'|at 0x[0-9a-f]+)",
                     lambda m: f"Python host function '{name}'", details)
    return details.replace("opts out with pto_node_skip_read_check",
                           "opts out with submit_host(..., read_check=False)")


# Python callables of host sub-worker tasks, process-wide: filled before a
# Node forks, so an index names the same callable in its worker processes.
_host_fns: List[Callable] = []


class HostFn:
    """A host sub-worker function of a Node (``Node(host_fns=...)``)."""

    __slots__ = ("name", "index", "_owner")

    def __init__(self, name: str, index: int, owner: "Node"):
        self.name, self.index, self._owner = name, index, owner

    def __repr__(self) -> str:
        return f"<pto.HostFn '{self.name}'>"


class HostContext:
    """What a host sub-worker function gets besides its tensors: ``scalars``
    (uint64 values, as submitted)."""

    __slots__ = ("scalars",)

    def __init__(self, scalars: tuple):
        self.scalars = scalars


class _NodeRun:
    def __init__(self, node: "Node", fn: Callable, args: tuple):
        self.node, self.fn, self.args = node, fn, args
        self.keep: List[Any] = []
        self.domains: Dict[int, int] = {}  # the run's domains: id -> number of ranks
        self.token = object()  # what the errors of this run's own calls carry (check)
        self.exc: Optional[BaseException] = None
        # checking mode: each node task's tensor arguments, which a
        # ContractError from the node's own check points at
        self.task_args: Optional[Dict[int, tuple]] = {} if node._check else None
        self.host_names: Dict[int, str] = {}  # checking mode: host tasks' function names


_NODE_OPTIONS = ("nworkers", "host_bytes", "window_space", "startup_timeout_ms", "control_timeout_ms",
                 "task_timeout_ms", "lease_wait_ms", "wait_timeout_ms", "fault_seed",
                 "host_task_timeout_ms", "tensormap_entries")


# The variables by which libpto knows it runs under mpirun (node_mpi.c).
_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")
_PTO_EMPI = -39  # pto/status.h


def _refuse_under_mpirun() -> None:
    """Under mpirun pto_node_create makes the MPI ranks the node's chips and
    needs the kernels and chip_init_arg at addresses every rank's program
    shares, which a Python program's are not: say so before anything starts."""
    found = [v for v in _MPI_ENV if v in os.environ]
    if found:
        raise error_from(_PTO_EMPI, (
            f"pto.Node does not run under mpirun ({found[0]} is set): from Python a node's "
            "chips are forked processes of this interpreter; run the program without mpirun "
            "(C programs can run a node under mpirun, docs/node.md)"))


class Node:
    """``nchips`` chips, each in its own forked process running its own chip
    runtime, driven from this process (``pto_node``).

    ``host_fns`` maps names to Python functions that host sub-worker tasks
    run (``NodeOrch.submit_host``; ``nworkers`` of them, default 0); like
    kernels they must exist before the Node does.
    ``kernels`` maps names to kernels (reference kernel names, Python
    callables or KernelSpecs); they are registered in every chip process
    when it starts, so Python kernels must exist before the Node is created
    (the chip processes are forks of this interpreter taken at creation).
    ``device_ids``: device ids to lease (default 0..nchips-1). Chip options
    as for :class:`Chip` (``clusters``, ``schedulers``, ...). Node options
    as ``pto_node_config``: host_bytes (64 MiB), window_space (1 GiB),
    startup_timeout_ms, control_timeout_ms, task_timeout_ms, lease_wait_ms
    (0), wait_timeout_ms (10000), fault_inject, fault_seed, quiet,
    trace, host_task_timeout_ms, tensormap_entries. ``check=True`` (or
    ``PTO_CHECK=contracts``) is checking mode (docs/contracts.md, "Node
    runs"): a ContractError from a host task's stray write names the node
    task's argument in ``arg`` and ``array``.

    Controlled schedules (docs/schedules.md, "Several chips"):
    ``schedule_seed``, ``record`` and ``replay`` as for :class:`Chip`, for
    the whole node: node tasks one at a time in the seed's (the record's)
    order, each chip task under its own chip schedule, and, with
    ``fault_inject``, the landing order of held-back remote stores. A
    record is ``record`` and its chip tasks' ``record.t<k>.c<c>[.land]``.

    Create a Node before this process starts threads (it forks). Use it as
    a context manager or call ``close`` (refused while host arrays live).
    Not under ``mpirun``: there pto's chips are the MPI ranks, which a
    Python program's kernels cannot reach; it raises ``MPIError`` at once.
    """

    def __init__(self, nchips: int, kernels: Optional[Mapping[str, Any]] = None, *,
                 host_fns: Optional[Mapping[str, Callable]] = None,
                 device_ids: Optional[Sequence[int]] = None, fault_inject: bool = False,
                 quiet: bool = False, trace: Optional[str] = None,
                 schedule_seed: Optional[int] = None, record: Optional[str] = None,
                 replay: Optional[str] = None, **options: Any):
        self._node = None
        _refuse_under_mpirun()
        cfg = ffi.new("pto_node_config *")
        lib.pto_node_config_init(cfg)
        set_int_field(cfg, "nchips", nchips, "pto.Node")
        for what, m in (("kernels", kernels), ("host_fns", host_fns)):
            if m is not None and not isinstance(m, Mapping):
                raise invalid(f"pto.Node: {what}: {type(m).__name__} {m!r} is not a mapping "
                              "(name -> kernel or function)")
        if device_ids is not None:
            count_of(device_ids, "pto.Node: device_ids")
        chip_opts = {k: options.pop(k) for k in list(options) if k not in _NODE_OPTIONS}
        fill_chip_config(cfg.chip, chip_opts, "pto.Node")
        for k, v in options.items():
            if v is not None:
                set_int_field(cfg, k, v, "pto.Node")
        cfg.fault_inject, cfg.quiet = bool(fault_inject), bool(quiet)
        self._keepalive: list = schedule_config(cfg.chip, schedule_seed, record, replay, "pto.Node")
        if device_ids is not None:
            ids = ffi.new("int[]", [c_int(i, "pto.Node: device_ids") for i in device_ids])
            if len(ids) != cfg.nchips:
                raise invalid(f"pto.Node: {len(ids)} device_ids for {cfg.nchips} chips")
            cfg.device_ids = ids
            self._keepalive.append(ids)
        if trace is not None:
            tp = ffi.new("char[]", file_name(trace, "trace", "pto.Node"))
            cfg.trace_path = tp
            self._keepalive.append(tp)
        # registered as their keys: copies where the spec had another name
        # (the caller's specs unchanged: one may go by several names)
        self._specs: List[KernelSpec] = [as_spec(v, str(k)) for k, v in (kernels or {}).items()]
        names: Dict[str, Any] = {}
        for s, k in zip(self._specs, (kernels or {})):
            if s.name in names:  # keys of one text ({1: f, "1": g}): C refuses the second
                raise invalid(f"pto.Node: kernels {names[s.name]!r} and {k!r} are both named "
                              f"'{s.name}'")
            names[s.name] = k
            if s.kind == "c":
                _kernel._c_symbol(s.path, s.symbol)  # load before the fork
            if s.kind == "py":
                _kernel._slot_for(s.fn)  # a trampoline slot before the fork
        self.kernels: Dict[str, Kernel] = {s.name: Kernel(s.name, i, s.kind, self)
                                           for i, s in enumerate(self._specs)}
        self.host_fns: Dict[str, HostFn] = {}
        for name, f in (host_fns or {}).items():
            if not callable(f):
                raise invalid(f"pto.Node: host function '{name}' is not callable")
            _host_fns.append(f)
            self.host_fns[str(name)] = HostFn(str(name), len(_host_fns) - 1, self)
        self._handle = ffi.new_handle(self)
        cfg.chip_init = lib.pyk_chip_init_fn()
        cfg.chip_init_arg = self._handle
        self._host: "weakref.WeakSet[_HostMem]" = weakref.WeakSet()
        self._running = False
        self._run_lock = threading.Lock()
        out = ffi.new("pto_node **")
        err = ffi.new("pto_error_info *")
        try:
            rc = lib.pyk_node_create(cfg, out, err)  # forks as os.fork does (_build.py)
            if rc:
                raise error_from_info(rc, err)
            self._node = out[0]
        except BaseException:
            # a KeyboardInterrupt as the call returns (Python raises it at
            # the first bytecode after): the node made is no one's, and its
            # chip processes and device leases would stay for the life of
            # the process (every later Node of its devices: DeviceBusyError)
            if self._node is None and out[0] != ffi.NULL:
                lib.pto_node_destroy(out[0])
            raise
        self.nchips = int(cfg.nchips)
        self._check = int(cfg.chip.check) == 1

    def _live(self):
        if self._node is None:
            raise invalid("pto.Node used after close()")
        return self._node

    def host_array(self, shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> np.ndarray:
        """A zeroed NumPy array in node host memory (visible to every chip
        process at the same address): the only arrays node tasks accept
        besides window views. Lives as long as the array (and the node)."""
        node = self._live()
        dt = as_dtype(dtype, "host_array: dtype")
        pto_dtype(dt, "host_array: dtype")
        # every dim >= 1 before anything is allocated (two negative dims
        # would multiply to a positive size)
        if np.isscalar(shape):
            sh: Tuple[int, ...] = (c_int(shape, "host_array: shape", "int64_t", lo=1),)
        else:
            count_of(shape, "host_array: shape")
            sh = tuple(c_int(s, f"host_array: shape[{i}]", "int64_t", lo=1)
                       for i, s in enumerate(shape))
        n = math.prod(sh) * dt.itemsize
        p = lib.pto_node_host_alloc(node, c_int(n, f"host_array: shape {sh}: bytes", "size_t"))
        if p == ffi.NULL:
            raise invalid(f"host_array: {n} bytes do not fit what is left of host_bytes")
        mem = _HostMem(self, p, n, sh, dt)
        self._host.add(mem)
        return np.asarray(mem)

    def run(self, orchestrate: Callable[..., Any], *args: Any) -> None:
        """Run the node orchestration ``orchestrate(node_orch, *args)``;
        returns when every node task finished. Raises the Error of the first
        root failure (details name the chip rank), or the orchestration
        function's own exception."""
        self._live()
        if not callable(orchestrate):  # (before: a TypeError once an empty run had ended)
            raise invalid(f"Node.run: orchestrate {orchestrate!r} is not callable")
        if not self._run_lock.acquire(blocking=False):
            raise invalid("Node.run: already running (one run at a time per node)")
        try:
            node = self._live()  # under the lock: close() takes it too
            run = _NodeRun(self, orchestrate, args)
            h = ffi.new_handle(run)
            err = ffi.new("pto_error_info *")
            self._running = True
            try:
                # Ctrl-C cancels the run: no node task starts after it (_build.py)
                py_sigint = callable(signal.getsignal(signal.SIGINT))
                rc = lib.pyk_node_run(node, h, err, py_sigint)
            finally:
                self._running = False
        finally:
            self._run_lock.release()
        run.keep.clear()
        # an error of one of this run's own calls: the run's error names it,
        # with it as the cause; any other exception is raised as it is
        if run.exc is not None and (getattr(run.exc, "_from_call", None) is not run.token
                                    or not rc):
            raise run.exc
        if rc:
            e = error_from_info(rc, err)
            name = run.host_names.get(e.task) if e.kernel is None and e.task is not None else None
            if name is not None and " host function " in e.details:
                e = error_from(rc, _python_host_words(e.details, name), task=e.task, core=e.core)
            if run.task_args is not None and e.task is not None and int(err.arg) >= 0:
                # a chip's error names its kernel and its chip task's argument;
                # the node's own check (no kernel) a node task's argument
                e.arg = int(err.arg)
                targs = run.task_args.get(e.task, ()) if e.kernel is None else ()
                if e.arg < len(targs):
                    e.array = getattr(targs[e.arg], "obj", targs[e.arg])
            raise e from run.exc

    @property
    def child_pids(self) -> List[int]:
        """Process ids of the chip processes."""
        pids = ffi.new("int[]", 128)
        n = lib.pto_node_child_pids(self._live(), pids, 128)
        check(n, "child_pids")
        return [int(pids[i]) for i in range(n)]

    @property
    def shm_prefix(self) -> str:
        """Shared-memory name prefix of this node's objects."""
        return ffi.string(lib.pto_node_shm_prefix(self._live())).decode()

    def close(self) -> None:
        """Stop the chip processes and release everything. Refused while
        arrays from host_array are alive (their memory would go away)."""
        if self._node is None:
            return
        if not self._run_lock.acquire(blocking=False):  # a run on any thread
            raise invalid("Node.close: the node is running")
        try:
            self._close()
        finally:
            self._run_lock.release()

    def _close(self, keep_arrays: bool = False) -> None:
        if self._node is None:
            return
        live = len(self._host)
        if live:
            gc.collect()  # arrays held only by reference cycles (tracebacks)
            live = len(self._host)
        kept = None
        if live and keep_arrays:
            # the node goes, its host memory stays for the arrays that view
            # it (this process's own now), unmapped after the last of them
            nbytes = ffi.new("size_t *")
            base = lib.pto_node_host_keep(self._node, nbytes)
            if base != ffi.NULL:
                kept = _KeptHost(base, int(nbytes[0]))
        if live and kept is None:
            raise invalid(f"Node.close: {live} host arrays are still referenced; drop them first")
        for mem in list(self._host):
            mem.kept = kept
        lib.pto_node_destroy(self._node)
        self._node = None

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
            return
        # Leaving on an exception: the frames of its traceback still hold
        # the block's host arrays, so close() would be refused and the node
        # (its chip processes, its device leases) left alive until the
        # traceback goes (kept for ever in an interactive session: a new
        # Node of the same devices then raised DeviceBusyError). The node
        # is closed; its host memory stays for those arrays.
        if not self._run_lock.acquire(blocking=False):  # a run on another thread
            return
        try:
            self._close(keep_arrays=True)
        except Error:
            pass
        finally:
            self._run_lock.release()

    def __del__(self) -> None:
        try:
            if getattr(self, "_node", None) is not None and not self._running:
                lib.pto_node_destroy(self._node)
                self._node = None
        except Exception:  # pragma: no cover
            pass


@ffi.def_extern(error=-1)  # whatever escapes fails the chip's start
def _pyk_chip_init(chip, rank, arg):
    """In each chip process: register the node's kernels in order."""
    _kernel._node_child = True
    try:
        node: Node = ffi.from_handle(arg)
        keep = node._keepalive
        for i, s in enumerate(node._specs):
            kid = register(chip, s, keep)
            if kid != i:
                raise invalid(f"kernel '{s.name}' got id {kid} on chip {rank}, expected {i}")
        rc = lib.pto_coll_register(chip)
        return int(rc)
    except BaseException as e:  # noqa: B902
        import sys
        import traceback
        sys.stderr.write(f"pto: chip {rank}: registering the node's kernels failed:\n" +
                         "".join(traceback.format_exception(type(e), e, e.__traceback__)))
        sys.stderr.flush()
        return e.code if isinstance(e, Error) else -1


@ffi.def_extern()
def _pyk_node_orch(no, arg):
    run: _NodeRun = ffi.from_handle(arg)
    o = None
    try:
        o = NodeOrch(no, run)
        orch_returned(run.fn(o, *run.args), run.fn, "Node.run")
    except BaseException as e:  # noqa: B902
        run.exc = e
    finally:
        if o is not None:
            o._end()
        # Ctrl-C before the run began (the handler found no run to cancel),
        # or raised here by Python: the tasks submitted do not start
        if lib.pyk_sigint_tripped():
            lib.pto_node_cancel(lib.pto_node_orch_node(no))


@ffi.def_extern(error=-15)  # (PTO_EKERNEL) whatever escapes fails the task
def _pyk_host(args, arg):
    """In a host sub-worker process: run host function number ``arg``."""
    try:
        fn = _host_fns[int(ffi.cast("intptr_t", arg))]
        views = []
        for i in range(args.ntensors):
            views.append(tensor_to_array(args.tensors[i], writable=args.access[i] != INPUT))
        r = fn(HostContext(tuple(args.scalars[0:args.nscalars])), *views)
        return _kernel.kernel_code(r, f"Python host function '{getattr(fn, '__name__', fn)}'")
    except BaseException as e:  # noqa: B902
        import sys
        import traceback
        sys.stderr.write("pto: Python host function raised:\n" + "".join(
            traceback.format_exception(type(e), e, e.__traceback__)))
        sys.stderr.flush()
        # the exception's type and text end the run's details (the parent
        # sees nothing else of it)
        why = ffi.new("char[]", exc_text(e).encode(errors="replace"))
        return lib.pto_host_fail(args, e.code if isinstance(e, Error) and e.code < 0 else -15,
                                 b"%s", why)
