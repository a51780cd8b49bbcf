"""pto from Python: orchestrate pto chips and nodes with NumPy arrays,
kernels in C or Python. A thin layer over libpto's C API (see docs/python.md).

    import numpy as np, pto

    chip = pto.Chip(clusters=2)
    add = chip.kernel("add")                      # a reference kernel
    a = np.arange(8, dtype=np.float32); y = np.zeros(8, np.float32)

    def orchestrate(o: pto.Orch):
        o.submit(add, pto.In(a), pto.In(a), pto.Out(y))

    stats = chip.run(orchestrate)                 # y == 2 * a
"""
from ._errors import *  # noqa: F401,F403 - Error and its subclasses
from ._errors import ERRORS, Error, error_from, status_hint, status_name
from ._tensor import DTYPES, Commute, In, InOut, New, NoDep, Out, Redux, View
from ._kernel import (REFERENCE_KERNELS, Kernel, KernelContext, KernelSpec, c_kernel, py_kernel,
                      ref_kernel)
from ._orch import Orch, Task, f64
from ._chip import Chip, Graph, RunStats
from ._redux import ReduxOp
from ._node import (Domain, HostContext, HostFn, Node, NodeOrch, WindowView,
                    coll_scratch_bytes)
from ._pto import ffi as _ffi, lib as _lib

__version__ = _ffi.string(_lib.pto_version()).decode()

__all__ = ["Chip", "Graph", "Orch", "Task", "RunStats", "Kernel", "KernelContext", "KernelSpec",
           "ref_kernel", "c_kernel", "py_kernel", "In", "Out", "InOut", "NoDep", "Commute", "Redux", "ReduxOp", "New", "View",
           "f64", "Error", "ERRORS", "error_from", "status_name", "status_hint", "DTYPES",
           "REFERENCE_KERNELS", "Node", "NodeOrch", "Domain", "WindowView", "HostFn",
           "HostContext",
           "coll_scratch_bytes"] + [c.__name__ for c in ERRORS.values()]
