"""python/bench/submit_bench.py still runs (tiny sizes; the figures are in docs/python.md)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_submit_bench_runs():
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "bench", "submit_bench.py"),
                        "64", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for word in ("1arg", "4arg", "chain of 64", "python kernel"):
        assert word in r.stdout, r.stdout
