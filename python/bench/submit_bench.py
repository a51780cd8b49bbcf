"""Cost of the Python layer, next to bench/submit_bench.c (same graph, same chip).

1. submit: orchestrator CPU time per pto submit from Python (µs per task)
   for bench/submit_bench.c's two forms, on 1 cluster x 2 AIV + 1
   scheduler, kernels empty C functions (python/tests/ckernels.c k_empty):
     1arg: one OUTPUT_EXISTING row of a 64 x 256 f32 grid (rows rotate;
           the 64 row views are made once, as the C bench's pto_tensors;
           "fresh" makes a new NumPy view g[k % 64] for every submit);
     4arg: rows i-1, i, i+1 of grid A as In, row i of grid B as Out, grids
           swapping every sweep.
   Timed with the orchestrator thread's CPU clock (time.thread_time), median
   of the runs, as the C bench does.
   chain: every task InOut on the same 256-float row (each depends on the
          one before); its C twin, python/bench/chain_bench.c, is built
          against the package's libpto and run here, side by side.
2. Python kernel per-call overhead: one task of N blocks on a single AIV
   core, empty Python kernel vs empty C kernel: (host_us difference) / N.

Run from the repository root after building libpto and the module, e.g.
    PYTHONPATH=build-test-python/py /usr/bin/python3 python/bench/submit_bench.py [tasks] [runs]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import pto

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def build_ckernels() -> str:
    out = os.path.join(tempfile.mkdtemp(), "libckernels.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I", os.path.join(ROOT, "include"),
                    os.path.join(ROOT, "python", "tests", "ckernels.c"), "-o", out,
                    "-L", os.path.dirname(pto.__file__), "-l:libpto.so.0"], check=True)
    return out


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    lib = build_ckernels()
    grid = np.zeros((2, 64, 256), np.float32)
    rows = [[grid[g, i] for i in range(64)] for g in range(2)]
    out = {}
    with pto.Chip(clusters=1, aic_per_cluster=0, aiv_per_cluster=2, schedulers=1) as chip:
        empty = chip.kernel(pto.c_kernel(lib, "k_empty"))

        def orch_1arg(o):
            r = rows[0]
            t0 = time.thread_time()
            for k in range(tasks):
                o.submit(empty, pto.Out(r[k % 64]))
            out["s"] = (time.thread_time() - t0) / tasks

        def orch_4arg(o):
            t0 = time.thread_time()
            for k in range(tasks):
                sweep, i = divmod(k, 64)
                src = rows[sweep & 1]
                o.submit(empty, pto.In(src[i - 1 if i else i]), pto.In(src[i]),
                         pto.In(src[i + 1 if i < 63 else i]), pto.Out(rows[not sweep & 1][i]))
            out["s"] = (time.thread_time() - t0) / tasks

        def orch_1arg_fresh(o):  # a new NumPy view object per submit
            g = grid[0]
            t0 = time.thread_time()
            for k in range(tasks):
                o.submit(empty, pto.Out(g[k % 64]))
            out["s"] = (time.thread_time() - t0) / tasks

        def orch_chain(o):
            r = rows[0][0]
            t0 = time.thread_time()
            for _ in range(tasks):
                o.submit(empty, pto.InOut(r))
            out["s"] = (time.thread_time() - t0) / tasks

        res = {}
        for name, fn in (("1arg", orch_1arg), ("4arg", orch_4arg), ("fresh", orch_1arg_fresh),
                         ("chain", orch_chain)):
            v = []
            for _ in range(runs):
                chip.run(fn)
                v.append(out["s"])
            res[name] = statistics.median(v) * 1e6
        print(f"python submit tasks={tasks} runs={runs}: 1arg {res['1arg']:.2f} us/submit, "
              f"4arg {res['4arg']:.2f} us/submit, 1arg with a new view per submit "
              f"{res['fresh']:.2f} us/submit")
        cbin = os.path.join(os.path.dirname(lib), "chain_bench")
        subprocess.run(["cc", "-O2", "-I", os.path.join(ROOT, "include"),
                        os.path.join(HERE, "chain_bench.c"), "-o", cbin, "-L",
                        os.path.dirname(pto.__file__), "-l:libpto.so.0",
                        "-Wl,-rpath," + os.path.dirname(pto.__file__)], check=True)
        c_ns = float(subprocess.run([cbin, str(tasks), str(runs)], check=True,
                                    capture_output=True, text=True).stdout)
        print(f"chain of {tasks} empty C-kernel tasks (InOut, same row): Python "
              f"{res['chain']:.2f} us/submit, C {c_ns / 1000:.2f} us/submit")

    with pto.Chip(clusters=1, aic_per_cluster=0, aiv_per_cluster=1, schedulers=1) as chip:
        ck = chip.kernel(pto.c_kernel(lib, "k_empty"))
        pk = chip.kernel(lambda ctx, *t: None, name="py_empty")
        a = np.zeros(16, np.float32)
        n = min(4096, tasks)
        t = {}
        for name, k in (("c", ck), ("py", pk)):
            v = [chip.run(lambda o: o.submit(k, pto.InOut(a), block_num=n)).host_us
                 for _ in range(max(3, runs // 3))]
            t[name] = min(v)  # wall time: the least disturbed run
        print(f"python kernel: {n} blocks of one tensor on one AIV core: C {t['c'] / n:.2f} "
              f"us/block, Python {t['py'] / n:.2f} us/block, overhead "
              f"{(t['py'] - t['c']) / n:.2f} us per call")


if __name__ == "__main__":
    main()
