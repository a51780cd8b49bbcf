"""The README's Python tour runs and prints what it says."""
import os
import runpy

HERE = os.path.dirname(os.path.abspath(__file__))


def test_tour(capsys):
    g = runpy.run_path(os.path.join(HERE, "..", "examples", "tour.py"), run_name="__main__")
    out = capsys.readouterr().out
    a, b = g["a"], g["b"]
    want_rows = (2 * (a + b)).sum(axis=1)
    assert (g["rows"] == want_rows).all(), (g["rows"], want_rows)
    want_y = 2 * (a + b)
    want_y[:, ::2] *= 2
    assert (g["y"] == want_y).all(), (g["y"], want_y)
    assert "tasks: 5" in out and "y[1] + y[2] =" in out, out
