"""Ctrl-C during a run of Python kernels cancels the run at the next Python
kernel: the run ends (nothing more is dispatched), KeyboardInterrupt is
raised from chip.run, and the chip runs again correctly (docs/python.md,
"The GIL and what it costs")."""
import os
import signal
import subprocess
import sys
import tempfile

CHILD = r"""
import os, signal, sys, time
import numpy as np
import pto

go = sys.argv[1]  # the parent creates this file once it has sent SIGINT
chip = pto.Chip(clusters=1, schedulers=1, watchdog_ms=60000)
calls = [0]

def slow(ctx, x):
    calls[0] += 1
    if calls[0] == 1:  # hold the run here until the signal has been sent
        print("started", flush=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(0.02)
    x += 1

def inc(ctx, x):
    x += 1

k, k2 = chip.kernel(slow), chip.kernel(inc)
a = np.zeros(4, np.float32)
try:
    chip.run(lambda o: [o.submit(k, pto.InOut(a)) for _ in range(400)])
    print("finished", calls[0], flush=True)
except KeyboardInterrupt:
    print("interrupted", calls[0], int(a[0]), flush=True)
b = np.zeros(4, np.float32)
chip.run(lambda o: [o.submit(k2, pto.InOut(b)) for _ in range(50)])
print("again", int(b[0]), int(b[3]), flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)  # Python's own handler is back
    time.sleep(1)
    print("not raised", flush=True)
except KeyboardInterrupt:
    print("handler restored", flush=True)
"""


def test_ctrl_c_cancels_a_run_of_python_kernels():
    with tempfile.TemporaryDirectory() as d:
        go = os.path.join(d, "go")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        p = subprocess.Popen([sys.executable, "-c", CHILD, go],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = p.stdout.readline().strip()
            assert line == "started", (line, p.stderr.read() if p.poll() is not None else "")
            p.send_signal(signal.SIGINT)
            open(go, "w").close()
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        lines = out.split("\n")
        # kernel 1 held the run until SIGINT was sent, kernel 2 saw it and
        # cancelled the run: 1 of the 400 (8 s of kernels) ran
        assert lines[0] == "interrupted 1 1", (out, err)
        assert lines[1] == "again 50 50", (out, err)
        assert lines[2] == "handler restored", (out, err)
        assert p.returncode == 0, (out, err)
