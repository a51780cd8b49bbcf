"""A run lock whose first acquire lets another thread's close() run to its
end first: what a thread switch between a run's check of its object and
its lock allows (test_chip, test_node: in a subprocess, this directory on
its path; test_graph: closing the graph a launch takes)."""
import threading

import pto


class CloseFirst:
    """Stands for ``lock``; its first acquire runs ``close`` on another
    thread, to its end, before taking ``lock``."""

    def __init__(self, lock, close):
        self.real, self.close, self.first = lock, close, True

    def acquire(self, blocking=True):
        if self.first:
            self.first = False
            t = threading.Thread(target=self.close)
            t.start()
            t.join()
        return self.real.acquire(blocking)

    def release(self):
        self.real.release()


def race(obj, orchestrate):
    """obj.run(orchestrate) with another thread's obj.close() first; prints
    what each did."""
    def close():
        try:
            obj.close()
            print("closed")
        except pto.Error as e:
            print("close refused:", e.details)

    obj._run_lock = CloseFirst(obj._run_lock, close)
    try:
        obj.run(orchestrate)
        print("ran")
    except pto.InvalidArgumentError as e:
        print("run refused:", e.details)


def env():
    """The environment of the subprocess that runs a race: this directory
    on its path, and a traceback on a crash."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=path)
