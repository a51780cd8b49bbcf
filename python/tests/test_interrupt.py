"""Ctrl-C during a run of Python kernels cancels the run at the next Python
kernel: the run ends (nothing more is dispatched), KeyboardInterrupt is
raised from chip.run, and the chip runs again correctly (docs/python.md,
"The GIL and what it costs")."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import DEVICE_IDS

CHILD = r"""
import os, signal, sys, time
import numpy as np
import pto

# Python's own handler, as a terminal's Python has it: a child started by a
# shell's background job inherits SIGINT ignored, and keeps it so
signal.signal(signal.SIGINT, signal.default_int_handler)
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


NODE_CHILD = r"""
import os, signal, sys, time
import numpy as np
import pto

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in CHILD
go, dev = sys.argv[1], int(sys.argv[2])  # go: the parent made it once it had sent SIGINT

def slow(ctx, x):  # in the chip process
    if x[0] == 0:  # hold the first task until the signal has been sent
        print("started", flush=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(1.0)
    x += 1

def inc(ctx, x):
    x += 1

def host_inc(ctx, x):  # in the host sub-worker process
    x += 1

node = pto.Node(1, {"slow": slow, "inc": inc}, host_fns={"host_inc": host_inc}, nworkers=1,
                device_ids=[dev], clusters=1, schedulers=1, quiet=True,
                startup_timeout_ms=30000, lease_wait_ms=60000)
a = node.host_array(4)
try:
    node.run(lambda no: [no.submit(0, node.kernels["slow"], pto.InOut(a)) for _ in range(5)])
    print("finished", int(a[0]), flush=True)
except KeyboardInterrupt:
    print("interrupted", int(a[0]), flush=True)
b = node.host_array(4)
node.run(lambda no: [(no.submit(0, node.kernels["inc"], pto.InOut(b)),
                      no.submit_host("host_inc", pto.InOut(b))) for _ in range(3)])
print("again", int(b[0]), int(b[3]), flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)  # Python's own handler is back
    time.sleep(1)
    print("not raised", flush=True)
except KeyboardInterrupt:
    print("handler restored", flush=True)
del a, b
node.close()
print("closed", flush=True)
"""


@pytest.mark.parametrize("to", ["process", "group"])
def test_ctrl_c_cancels_a_node_run(to):
    """Ctrl-C during Node.run: the node task running finishes, none of the
    others starts, Node.run raises KeyboardInterrupt at once, and the node
    runs again correctly. `group`: SIGINT to the whole process group, as a
    terminal's Ctrl-C sends it, so the chip process gets it too. (Before,
    every node task ran: KeyboardInterrupt came after all five, 4 s late.)"""
    dev = DEVICE_IDS["interrupt"][0 if to == "process" else 1]
    with tempfile.TemporaryDirectory() as d:
        go = os.path.join(d, "go")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(os.path.join(d, "err"), "w+") as errf:
            p = subprocess.Popen([sys.executable, "-c", NODE_CHILD, go, str(dev)],
                                 stdout=subprocess.PIPE, stderr=errf, text=True, env=env,
                                 start_new_session=True)
            try:
                line = p.stdout.readline().strip()
                assert line == "started", (line, p.poll())
                if to == "group":
                    os.killpg(p.pid, signal.SIGINT)
                else:
                    p.send_signal(signal.SIGINT)
                t0 = time.monotonic()
                open(go, "w").close()
                first = p.stdout.readline().strip()
                took = time.monotonic() - t0
                rest = p.stdout.read()
                p.wait(timeout=120)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            errf.seek(0)
            err = errf.read()
        lines = [first] + rest.split("\n")
        # the held task ran (1 s more), the 4 others (4 s) did not start
        assert lines[0] == "interrupted 1", (lines, took, err)
        assert took < 3.0, (took, lines, err)
        # the host sub-worker (a Python host function) and the chip process
        # took no SIGINT of their own (`group`: they ignore it)
        assert lines[1] == "again 6 6", (lines, err)
        assert lines[2] == "handler restored", (lines, err)
        assert lines[3] == "closed", (lines, err)
        assert p.returncode == 0, (lines, err)
