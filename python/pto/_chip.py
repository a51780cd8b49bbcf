"""pto.Chip: one simulated chip, its kernels and runs."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Mapping, Set as AbstractSet
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ._cint import c_int, set_int_field
from ._errors import error_from, error_from_info, exc_text, invalid
from ._kernel import PTO_EKERNEL, Kernel, as_spec, register
from ._orch import Orch, count_of, orch_returned, scalar_bits
from ._redux import ReduxOp, register_op, release_ops
from ._tensor import INPUT, NO_DEP, array_desc, as_array
from ._pto import ffi, lib

CHIP_OPTIONS = ("clusters", "aic_per_cluster", "aiv_per_cluster", "schedulers", "task_slots",
                "heap_bytes", "dep_entries", "tensormap_entries", "alloc_timeout_ms",
                "watchdog_ms", "shutdown_ms", "async_slots", "sched_threads", "spread_cores",
                "check", "check_seed")
_BOOL_OPTIONS = ("sched_threads", "spread_cores", "check")
PTO_EGRAPH = -19  # pto/status.h

# What the kernels left running by the runs of closed chips may still use
# (the runs' arrays, the chip's handle): kept for the life of the process.
_LEFT_BEHIND: List[Any] = []


def fill_chip_config(cfg, opts: Dict[str, Any], what: str) -> None:
    """Set pto_chip_config fields from keyword options (None: keep default)."""
    for k, v in opts.items():
        if v is None:
            continue
        if k not in CHIP_OPTIONS:
            raise invalid(f"{what}: unknown option '{k}' (options: {', '.join(CHIP_OPTIONS)})")
        if isinstance(v, bool) and k not in _BOOL_OPTIONS:
            raise invalid(f"{what}: {k} = {v!r} is not an int")
        set_int_field(cfg, k, v, what)


@dataclasses.dataclass
class RunStats:
    """What a run did (pto_run_stats): tasks, blocks and the time spans in µs."""
    tasks: int
    blocks: int
    host_us: float
    device_us: float
    orch_us: float
    sched_us: float
    effective_us: float
    sync_tasks: int
    sync_fast_launches: int
    drains: int
    drain_attempts: int
    drain_max_attempts: int
    cohort_spread_max_us: float
    cohort_spread_sum_us: float
    drain_latency_max_us: float
    drain_latency_sum_us: float
    pull_holds: int
    steals: int
    handoffs: int
    head_yields: int
    gathered: int

    @classmethod
    def _from(cls, st) -> "RunStats":
        return cls(**{f.name: getattr(st, f.name) for f in dataclasses.fields(cls)})


class _Run:
    """One Chip.run in progress: keeps every array a task uses alive."""

    def __init__(self, chip: "Chip", fn: Callable, args: tuple, what: str = "Chip.run"):
        self.chip, self.fn, self.args, self.what = chip, fn, args, what
        self.keep: List[Any] = []
        self.token = object()  # what this run's Tasks carry (Orch)
        self.orch_exc: Optional[BaseException] = None
        # (task id, exception) of each Python kernel that raised; the task
        # None: a reduction op's (the cause of a run failed otherwise)
        self.kernel_excs: List[tuple] = []
        # (op, "init" or "combine", exception) of reduction ops (_redux.py)
        self.redux_excs: List[tuple] = []
        # checking mode: each task's tensor arguments, to name the one a
        # ContractError points at
        self.task_args: Optional[Dict[int, tuple]] = {} if chip._check else None
        # a capture: the scalars submitted so far, and each Python kernel's
        # hidden one (the binding's: its position and value), which a
        # launch puts back among the caller's (Graph)
        self.scalars_seen = 0
        self.hidden_scalars: Optional[List[tuple]] = None
        # a capture: by base pointer, [first mode that writes it or None,
        # {(shape, element strides): None}] of each array a task used
        # (capture_use, _orch.py)
        self.captured: Optional[Dict[int, list]] = None


def file_name(path: Any, name: str, what: str) -> bytes:
    """``path`` (a str, bytes or os.PathLike) as the bytes of a C file
    name; InvalidArgumentError naming the option ``name`` otherwise (never
    os.fsencode's bare TypeError)."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise invalid(f"{what}: {name} = {path!r} is not a file name (a str, bytes or "
                      "os.PathLike)") from None
    if not b or b"\0" in b:
        raise invalid(f"{what}: {name} = {path!r} is not a file name ("
                      + ("empty" if not b else "it contains a NUL byte") + ")")
    return b


def schedule_config(cfg, seed: Optional[int], record: Optional[str],
                    replay: Optional[str], what: str = "pto.Chip") -> list:
    """Set the controlled-schedule fields of a pto_chip_config; returns the
    path buffers, which must live until pto_chip_create (pto_node_create)
    has copied them."""
    if seed is not None:
        if isinstance(seed, bool):
            raise invalid(f"{what}: schedule_seed = {seed!r} is not an int")
        set_int_field(cfg, "schedule_seed", seed, what)
    keep = []
    for field, path in (("record_path", record), ("replay_path", replay)):
        if path is None:
            continue
        buf = ffi.new("char[]", file_name(path, field.split('_')[0], what))
        keep.append(buf)
        setattr(cfg, field, buf)
    return keep


class Chip:
    """One simulated chip: ``clusters`` clusters of (aic_per_cluster AIC +
    aiv_per_cluster AIV) cores plus ``schedulers`` schedulers.

    Options are those of ``pto_chip_config`` with the same defaults (None:
    pto's default, after the PTO_CLUSTERS / PTO_SCHEDULERS / PTO_WATCHDOG_MS
    / PTO_SCHED_THREADS / PTO_SPREAD_CORES environment overrides): clusters (8),
    aic_per_cluster (1), aiv_per_cluster (2), schedulers (min(3,
    clusters)), task_slots (16384), heap_bytes (256 MiB), dep_entries
    (16384), tensormap_entries (65536), alloc_timeout_ms (500), watchdog_ms
    (10000), shutdown_ms (5000), async_slots (64), sched_threads (0),
    spread_cores (1: pto binds the orchestrator and the core threads to CPUs
    while that pays and no other program's threads need those CPUs; 2: even
    then; 0 or False: never; docs/chip.md, "Where the threads run"), check (False: checking mode,
    docs/contracts.md; PTO_CHECK=contracts turns it on too: a kernel that
    touches memory its task did not declare raises pto.ContractError naming
    the argument), check_seed (0: from the clock; PTO_CHECK_SEED).
    ``trace``: write a Chrome/Perfetto trace of every run to this path.

    Controlled schedules (docs/schedules.md; one chip): ``schedule_seed``
    (a nonzero int) draws every scheduling choice of every run from the
    seed, blocks running one at a time; ``record`` writes each run's
    choices to that file; ``replay`` makes the choices of such a record,
    and a run that departs from it raises ReplayError naming the line.

    Example::

        chip = pto.Chip(clusters=2)
        add = chip.kernel("add")
        a, b = np.ones(8, np.float32), np.arange(8, dtype=np.float32)
        y = np.zeros(8, np.float32)
        chip.run(lambda o: o.submit(add, pto.In(a), pto.In(b), pto.Out(y)))

    Use as a context manager (or call ``close``) to stop it deterministically.
    """

    def __init__(self, clusters: Optional[int] = None, *, aic_per_cluster: Optional[int] = None,
                 aiv_per_cluster: Optional[int] = None, schedulers: Optional[int] = None,
                 task_slots: Optional[int] = None, heap_bytes: Optional[int] = None,
                 dep_entries: Optional[int] = None, tensormap_entries: Optional[int] = None,
                 alloc_timeout_ms: Optional[int] = None, watchdog_ms: Optional[int] = None,
                 shutdown_ms: Optional[int] = None, async_slots: Optional[int] = None,
                 sched_threads: Optional[bool] = None, spread_cores: Optional[int] = None,
                 trace: Optional[str] = None, check: Optional[bool] = None,
                 check_seed: Optional[int] = None, schedule_seed: Optional[int] = None,
                 record: Optional[str] = None, replay: Optional[str] = None):
        self._chip = None
        opts = dict(clusters=clusters, aic_per_cluster=aic_per_cluster,
                    aiv_per_cluster=aiv_per_cluster, schedulers=schedulers,
                    task_slots=task_slots, heap_bytes=heap_bytes, dep_entries=dep_entries,
                    tensormap_entries=tensormap_entries, alloc_timeout_ms=alloc_timeout_ms,
                    watchdog_ms=watchdog_ms, shutdown_ms=shutdown_ms, async_slots=async_slots,
                    sched_threads=sched_threads, spread_cores=spread_cores, check=check,
                    check_seed=check_seed)
        cfg = ffi.new("pto_chip_config *")
        lib.pto_chip_config_init(cfg)
        fill_chip_config(cfg, opts, "pto.Chip")
        paths = schedule_config(cfg, schedule_seed, record, replay)  # alive until create
        # checked before the chip exists (a refusal leaves nothing to close)
        trace_name = None if trace is None else file_name(trace, "trace", "pto.Chip")
        self._handle = ffi.new_handle(self)
        cfg.env = self._handle  # kernels find their chip (for Python kernel exceptions)
        self._keep: list = []
        self.kernels: Dict[str, Kernel] = {}
        self._kernel_specs: Dict[str, tuple] = {}  # what each name was registered as
        self.redux_ops: Dict[str, ReduxOp] = {}
        self._redux_ops: List[ReduxOp] = []  # every one registered (names may repeat)
        self._run: Optional[_Run] = None
        self._run_lock = threading.Lock()  # one run at a time, from any thread
        # the arrays of earlier runs that a kernel still running may use:
        # a run returns when a kernel ignored ctx.cancelled() past
        # shutdown_ms, and pto lets it finish its block (pto_chip_stuck)
        self._stuck_keep: List[Any] = []
        out = ffi.new("pto_chip **")
        err = ffi.new("pto_error_info *")
        rc = lib.pto_chip_create_ex(cfg, out, err)
        if rc:
            raise error_from_info(rc, err)
        self._chip = out[0]
        self._cfg = cfg
        self._check = bool(lib.pto_chip_get_config(self._chip).check)
        if trace_name is not None:
            self._trace = ffi.new("char[]", trace_name)
            rc = lib.pto_chip_set_trace(self._chip, self._trace)
            if rc:
                self.close()
                raise invalid(f"trace path {trace!r}: pto_chip_set_trace returned {rc}")

    @property
    def config(self) -> Dict[str, int]:
        """The effective configuration (defaults, overrides and pto's choices
        applied: ``schedulers`` is the count the chip runs, never 0)."""
        cfg = lib.pto_chip_get_config(self._live())
        return {k: int(getattr(cfg, k)) for k in CHIP_OPTIONS}

    def _live(self):
        if self._chip is None:
            raise invalid("pto.Chip used after close()")
        return self._chip

    @contextlib.contextmanager
    def _idle(self, refusal: str) -> Iterator[Any]:
        """The live chip, with no run in progress (from any thread) until
        the block ends: InvalidArgumentError ``refusal`` while one is."""
        if not self._run_lock.acquire(blocking=False):
            raise invalid(refusal)
        try:
            yield self._live()  # checked under the lock: close() takes it too
        finally:
            self._run_lock.release()

    def kernel(self, spec: Any, name: Optional[str] = None, *,
               read_check: bool = True) -> Kernel:
        """Register a kernel: a reference kernel's name (``"add"``), a Python
        callable (``fn(ctx, *tensors)``, an AIV kernel; use ``pto.py_kernel``
        for AIC or MIX) or a KernelSpec from ``pto.ref_kernel``,
        ``pto.c_kernel`` or ``pto.py_kernel``. Returns the Kernel to submit.
        ``read_check=False``: checking mode does not run it a second time to
        find undeclared reads (a kernel whose writes vary from run to run;
        pto_kernel_skip_read_check)."""
        with self._idle("Chip.kernel: register kernels before run, not during one") as chip:
            return self._kernel(chip, spec, name, read_check)

    def _kernel(self, chip, spec: Any, name: Optional[str], read_check: bool) -> Kernel:
        s = as_spec(spec, name)
        # the same kernel again is the one registered (C refuses a second
        # kernel of one name: names tell kernels apart in traces and records)
        same = (s.kind, s.core, s.aiv_count, s.fn, s.path, s.symbol, s.aic_symbol, read_check)
        k = self.kernels.get(s.name)
        if k is not None and self._kernel_specs.get(s.name) == same:
            return k
        kid = register(chip, s, self._keep)
        if not read_check:
            lib.pto_kernel_skip_read_check(chip, kid)
        k = Kernel(s.name, kid, s.kind, self)
        self.kernels[s.name] = k
        self._kernel_specs[s.name] = same
        return k

    def redux_op(self, name: str, dtype: Any, init: Callable[[np.ndarray], Any],
                 combine: Callable[[np.ndarray, np.ndarray], Any]) -> ReduxOp:
        """Register a reduction op over ``dtype`` for ``pto.Redux(array, op)``
        (pto_redux_register): ``init(dst)`` sets the 1-D array ``dst`` (a
        private copy) to the op's identity, in place or by returning it (a
        scalar or an array); ``combine(acc, src)`` sets ``acc`` to ``acc op
        src`` element-wise, in place or by returning it (``src`` is
        read-only). ``combine`` should be associative; pto folds in
        submission order (then block, then core), so results are
        reproducible bit for bit. Both run with the GIL: init on the core
        of each contribution, on its copy, before its kernel (on the
        orchestrator's thread for a dummy task and in checking mode),
        combine in the runtime's ``redux_combine`` tasks. An exception in
        either makes the run raise KernelError naming the op once it has
        ended (the exception as ``__cause__``). At most 16 ops per chip,
        registered between runs."""
        with self._idle("Chip.redux_op: register reduction ops before run, not during "
                        "one") as chip:
            op = register_op(self, chip, name, dtype, init, combine)
            self.redux_ops[name] = op
            self._redux_ops.append(op)
        return op

    def run(self, orchestrate: Callable[..., Any], *args: Any) -> RunStats:
        """Run ``orchestrate(orch, *args)`` on this thread while the chip
        executes the tasks it submits; return when all completed.

        The GIL is released while pto works and waits (C kernels run without
        it; Python kernels and the orchestration function take it). Every
        array passed to a task stays referenced until the run ends. Raises
        the Error subclass of the run's first failure (KernelError with the
        kernel's exception as ``__cause__``), or the orchestration
        function's own exception. Ctrl-C cancels the run at the next Python
        kernel: KeyboardInterrupt. The Orch takes calls from this thread only."""
        chip = self._live()
        if not callable(orchestrate):
            raise invalid(f"Chip.run: orchestrate {orchestrate!r} is not callable")
        run = _Run(self, orchestrate, args)
        stats = self._in_run("Chip.run", run,
                             lambda h, st, err, sig: lib.pyk_chip_run(chip, h, st, err, sig))
        run.keep.clear()
        return stats

    def _in_run(self, what: str, run: _Run, call: Callable) -> RunStats:
        """call(handle, stats, err, python_sigint) as this chip's one run,
        with run as the current _Run; raises the run's error."""
        if not self._run_lock.acquire(blocking=False):
            raise invalid(f"{what}: this chip is already running (run is not reentrant; "
                          "one run at a time per chip)")
        try:
            self._live()  # (closed by another thread since the caller looked)
            h = ffi.new_handle(run)
            stats = ffi.new("pto_run_stats *")
            err = ffi.new("pto_error_info *")
            self._run = run
            try:
                # Ctrl-C cancels the run at the next Python kernel (_build.py)
                py_sigint = callable(signal.getsignal(signal.SIGINT))
                rc = call(h, stats, err, py_sigint)
            finally:
                self._run = None
                if lib.pto_chip_stuck(self._chip):  # its arrays outlive the run
                    self._stuck_keep.append(list(run.keep))
                else:  # every kernel of the earlier runs has left
                    self._stuck_keep.clear()
        finally:
            self._run_lock.release()
        exc = run.orch_exc
        # an error of one of this run's own calls (check): the run's error
        # names it, with it as the cause; any other exception is raised as it is
        if exc is not None and getattr(exc, "_from_call", None) is not run.token:
            run.keep.clear()
            raise exc
        if run.redux_excs and not run.kernel_excs:
            op, role, e = run.redux_excs[0]
            if not rc:  # pto's op functions cannot fail: the run ended "well"
                run.keep.clear()
                raise error_from(PTO_EKERNEL, f"{what}: reduction op '{op.name}': its {role} "
                                 f"raised {exc_text(e)}; what it reduced holds no "
                                 "valid result") from e
            run.kernel_excs.append((None, e))
        if rc:
            run.keep.clear()
            e = error_from_info(rc, err)
            if run.task_args is not None and e.task is not None and int(err.arg) >= 0:
                e.arg = int(err.arg)
                targs = run.task_args.get(e.task, ())
                if e.arg < len(targs):
                    e.array = getattr(targs[e.arg], "obj", targs[e.arg])
            # the exception of the failed task's own kernel, never another's
            own = [x for t, x in run.kernel_excs if t is not None and t == e.task]
            cause = own[0] if own else exc if exc is not None else next(
                (x for t, x in run.kernel_excs if t is None), None)
            raise e from cause
        return RunStats._from(stats)

    def capture(self, orchestrate: Callable[..., Any], *args: Any) -> "Graph":
        """Run ``orchestrate(orch, *args)`` as ``run`` does (a real run: its
        results are valid) and record it as a :class:`Graph` that
        ``launch`` replays without dependency inference (pto/graph.h).
        The orchestration may not read, write or wait on the host side
        (GraphError), and the whole graph must fit the chip's rings at once."""
        chip = self._live()
        if not callable(orchestrate):
            raise invalid(f"Chip.capture: orchestrate {orchestrate!r} is not callable")
        run = _Run(self, orchestrate, args, "Chip.capture")
        run.hidden_scalars = []
        run.captured = {}
        out = ffi.new("pto_graph **")
        self._in_run("Chip.capture", run,
                     lambda h, st, err, sig: lib.pyk_graph_capture(chip, h, out, st, err, sig))
        return Graph(self, out[0], run.keep, run.hidden_scalars, run.captured)

    def launch(self, graph: "Graph", bind: Any = None, scalars: Any = None) -> RunStats:
        """Replay ``graph`` (captured on this chip) with new arrays bound:
        ``bind`` is a list of arrays in ``graph.buffers`` order (None keeps
        one) or a dict from buffer index (``graph.index(array)``) to array,
        each of the captured one's dtype, shape and strides (so its byte
        span), and writable where the graph's tasks write; ``scalars`` gives
        every scalar argument anew, in submission order (``graph.scalars`` of
        them). Refusals raise GraphError (InvalidArgumentError for an
        argument of the wrong kind or a read-only array where a task
        writes), and nothing runs."""
        chip = self._live()
        if not isinstance(graph, Graph):
            raise invalid("Chip.launch: not a live pto.Graph")
        g = graph._begin_launch()
        try:
            return self._launch(chip, graph, g, bind, scalars)
        finally:
            graph._end_launch()

    def _launch(self, chip, graph: "Graph", g, bind: Any, scalars: Any) -> RunStats:
        b = ffi.new("pto_graph_bindings *")
        # the captured arrays too: a kernel or another thread may close the
        # graph mid-launch (pto frees it when the launch ends), which drops
        # the graph's own references while the launch's tasks still use them
        keep: List[Any] = [b, graph._keep]
        if bind is not None:
            news = graph._bindings(bind)
            ts = ffi.new("pto_tensor[]", max(len(news), 1))
            for i, a in enumerate(news):
                if a is not None:
                    what = f"Chip.launch: buffer {i}"
                    # a buffer the graph's tasks write is described as they
                    # use it: a read-only array is refused, as in Chip.run
                    arr = as_array(a, what)
                    d = array_desc(arr, graph._writes[i], what)
                    if graph._writes[i] == NO_DEP and not arr.flags.writeable:
                        raise invalid(f"{what}: read-only array passed as NoDep (the capture "
                                      "passed a writable one, which the kernel may write)")
                    graph._check_layout(i, d)
                    ts[i].buf, ts[i].buf_bytes, ts[i].dtype = ffi.cast("void *", d[1]), d[2], d[3]
                    keep.append(a)
            b.buffers, b.nbuffers = ts, len(news)
            keep.append(ts)
        if scalars is not None:
            bits = graph._scalars(scalars)
            sc = ffi.new("uint64_t[]", bits or [0])
            b.scalars, b.nscalars = sc, len(bits)
            keep.append(sc)
        run = _Run(self, None, ())
        run.keep = keep
        stats = self._in_run("Chip.launch", run, lambda h, st, err, sig: lib.pyk_graph_launch(
            chip, g, b, st, err, sig))
        keep.clear()
        return stats

    def _kernel_exception(self, e: BaseException, task: int) -> None:
        run = self._run
        if run is not None:
            run.kernel_excs.append((task, e))

    def close(self) -> None:
        """Stop the chip's threads and free it (idempotent)."""
        if self._chip is None:
            return
        if not self._run_lock.acquire(blocking=False):  # a run on any thread
            raise invalid("Chip.close: the chip is running")
        try:
            if self._chip is not None:
                self._leave_behind()
                lib.pto_chip_destroy(self._chip)
                self._chip = None
                release_ops(self._redux_ops)
        finally:
            self._run_lock.release()

    def _leave_behind(self) -> None:
        """Before destroy: what a kernel still running (pto_chip_stuck)
        may use stays alive, the chip's handle included (a Python kernel
        reports its exception through it)."""
        if self._stuck_keep and lib.pto_chip_stuck(self._chip):
            _LEFT_BEHIND.append((self._stuck_keep, self._handle, self._keep))
        self._stuck_keep = []

    def __enter__(self) -> "Chip":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_chip", None) is not None and self._run is None:
                self._leave_behind()
                lib.pto_chip_destroy(self._chip)
                self._chip = None
                release_ops(self._redux_ops)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def _offsets(layout: tuple) -> np.ndarray:
    """The element offsets a layout (shape, element strides) addresses."""
    off = np.zeros(1, np.int64)
    for n, st in zip(*layout):
        off = (off[:, None] + np.arange(n, dtype=np.int64) * st).ravel()
    return off


def _show_layout(layout: tuple) -> str:
    return f"shape {layout[0]}, element strides {layout[1]}"


_EXACT_ELEMENTS = 1 << 20  # above: only a dense layout is known to hold the others


def bindable_layouts(layouts: List[tuple]) -> tuple:
    """(the layouts an array bound to a buffer may have, all captured
    ones) for the captured layouts of the arrays at one base pointer: the
    one layout, or of several those whose elements include every other's
    (the graph's views of the others address those elements)."""
    if len(layouts) == 1:
        return layouts, layouts

    def span(la):
        return 1 + sum((n - 1) * st for n, st in zip(*la))

    def size(la):
        return int(np.prod(la[0]))

    ok = []
    for la in layouts:
        if size(la) == span(la) and all(span(o) <= span(la) for o in layouts):
            ok.append(la)  # dense: holds every element up to its span
        elif sum(size(o) for o in layouts) <= _EXACT_ELEMENTS:
            mine = _offsets(la)
            if all(np.isin(_offsets(o), mine).all() for o in layouts if o is not la):
                ok.append(la)
    return ok, layouts


class Graph:
    """An orchestration captured by ``Chip.capture``, replayed by
    ``Chip.launch``. ``buffers``: the arrays it bound, in order of first use
    (one per distinct base pointer; None for memory that is no array the
    orchestration passed); ``tasks``, ``edges``, ``scalars``: its counts
    (``scalars``: those the orchestration gave, which a launch may give
    anew; a Python kernel's own hidden one is not among them).
    It keeps its captured arrays alive; ``close`` frees it."""

    def __init__(self, chip: Chip, g, keep: List[Any], hidden: List[tuple],
                 captured: Dict[int, list]):
        self._g, self.chip = g, chip
        self._keep = list(keep)  # every object the capture's tasks used: launches use them too
        # launches in progress (any thread) and a close that came during one:
        # the last launch to end frees the graph (pto frees one closed
        # mid-launch only once the launch has marked it, so the binding
        # never hands it a graph a close may free under it)
        self._lock = threading.Lock()
        self._launches = 0
        self._doomed = False
        self._hidden = hidden  # (position, value) of each Python kernel's hidden scalar
        info = ffi.new("pto_graph_info *")
        lib.pto_graph_get_info(g, info)
        self.tasks, self.edges = int(info.tasks), int(info.edges)
        self.scalars, self.heap_bytes = int(info.scalars) - len(hidden), int(info.heap_bytes)
        by_ptr = {}
        for a in keep:
            if isinstance(a, np.ndarray):
                by_ptr.setdefault(a.__array_interface__["data"][0], a)
        t = ffi.new("pto_tensor *")
        self.buffers: List[Optional[np.ndarray]] = []
        # per buffer: the access mode a launch describes its array with (a
        # writing one where a task writes it) and the layouts (shape,
        # element strides) a bound array may have
        self._writes: List[int] = []
        self._layouts: List[Optional[tuple]] = []
        for i in range(info.buffers):
            lib.pto_graph_buffer(g, i, t)
            ptr = int(ffi.cast("uintptr_t", t.buf))
            self.buffers.append(by_ptr.get(ptr))
            rec = captured.get(ptr)
            self._writes.append(INPUT if rec is None or rec[0] is None else rec[0])
            self._layouts.append(None if rec is None else bindable_layouts(list(rec[1])))

    def _check_layout(self, i: int, d: List[int]) -> None:
        """GraphError unless the descriptor ``d`` of the array bound to
        buffer ``i`` has a layout the graph's views of that buffer allow:
        they address it by the captured offsets, so an array of another
        shape or other strides would be read transposed or written outside
        its elements."""
        lay = self._layouts[i]
        if lay is None:
            return
        nd = d[4]
        got = (tuple(d[6:6 + nd]), tuple(d[11:11 + nd]))
        ok, captured = lay
        if got in ok:
            return
        show = _show_layout
        if not ok:
            why = ("it was captured as several views of one memory, none of which holds the "
                   "others' elements (" + "; ".join(show(la) for la in captured) + "), so no "
                   "array can stand for it")
        else:
            why = ("captured as " + " or ".join(show(la) for la in ok) + "; a bound array "
                   "needs the captured one's shape and strides (np.ascontiguousarray or a "
                   "copy in that layout)")
        raise error_from(PTO_EGRAPH, f"Chip.launch refused: buffer {i} is bound to an array "
                         f"of {show(got)}, {why}")

    def index(self, array: Any) -> int:
        """The buffer index of an array the capture bound (by identity)."""
        for i, a in enumerate(self.buffers):
            if a is array:
                return i
        raise invalid("Graph.index: not an array the graph bound (graph.buffers lists them)")

    def _scalars(self, scalars: Any) -> List[int]:
        """The launch's scalars as the C graph numbers them: the caller's,
        with each Python kernel's hidden one put back where it was."""
        n = count_of(scalars, "launch: scalars")
        if n != self.scalars:
            raise error_from(PTO_EGRAPH, f"Chip.launch refused: bindings give {n} scalars, "
                             f"the graph has {self.scalars} (graph.scalars)")
        mine = iter([scalar_bits(v, f"launch: scalar {i}") for i, v in enumerate(scalars)])
        bits: List[int] = []
        for pos, value in self._hidden:
            bits.extend(next(mine) for _ in range(pos - len(bits)))
            bits.append(value)
        bits.extend(mine)
        return bits

    def _bindings(self, bind: Any) -> List[Any]:
        if isinstance(bind, Mapping):
            news: List[Any] = [None] * len(self.buffers)
            for k, new in bind.items():
                if not news:
                    raise invalid(f"Chip.launch: bind key {k!r}: the graph bound no buffers")
                # an int or a NumPy integer (never a bool): c_int's rule
                i = c_int(k, "Chip.launch: bind key", "int64_t", lo=0, hi=len(news) - 1)
                news[i] = new
            return news
        if isinstance(bind, AbstractSet):
            raise invalid(f"Chip.launch: bind: a {type(bind).__name__} has no order; pass a "
                          "list in graph.buffers order or a dict from buffer index to array")
        try:
            news = list(bind)
        except TypeError:
            raise invalid(f"Chip.launch: bind: {type(bind).__name__} {bind!r} is not a list of "
                          "arrays (in graph.buffers order) or a dict from buffer index to "
                          "array") from None
        if len(news) != len(self.buffers):
            raise invalid(f"Chip.launch: bind lists {len(news)} arrays, the graph bound "
                          f"{len(self.buffers)}")
        return news

    def _begin_launch(self):
        with self._lock:
            if self._g is None or self._doomed:
                raise invalid("Chip.launch: not a live pto.Graph")
            self._launches += 1
            return self._g

    def _end_launch(self) -> None:
        with self._lock:
            self._launches -= 1
            if self._doomed and not self._launches:
                lib.pto_graph_destroy(self._g)
                self._g = None

    @property
    def launches(self) -> Tuple[int, int]:
        """(launches that ran, warm ones among them): a warm launch followed
        this graph's successful launch on the same chip with no run between,
        and wrote no task slot (docs/graphs.md, "Warm launches")."""
        with self._lock:
            if self._g is None:
                raise invalid("Graph.launches: the graph is closed")
            info = ffi.new("pto_graph_info *")
            lib.pto_graph_get_info(self._g, info)
            return int(info.launches), int(info.warm_launches)

    def close(self) -> None:
        """Free the graph (idempotent); during a launch, once it has ended."""
        with self._lock:
            if self._launches:
                self._doomed = True
            elif self._g is not None:
                lib.pto_graph_destroy(self._g)
                self._g = None
            self.buffers, self._keep = [], []

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


@ffi.def_extern()
def _pyk_orch(o, arg):
    run: _Run = ffi.from_handle(arg)
    orch = None
    try:
        orch = Orch(o, run)  # (inside: a failure here fails the run too)
        orch_returned(run.fn(orch, *run.args), run.fn, run.what)
    except BaseException as e:  # noqa: B902 - must not unwind into C
        run.orch_exc = e
        msg = f"Python orchestration raised {exc_text(e)}"
        lib.pyk_fatal(o, msg.encode(errors="replace")[:480])
    finally:
        if orch is not None:
            orch._end()
