"""A pto whose compiled module cannot be imported says which part is missing
and what fixes it (before: a bare "No module named 'pto._pto'", or
"libpto.so.0: cannot open shared object file"), the original error chained."""
import os
import shutil
import subprocess
import sys

import pto

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def import_pto(cwd: str, pythonpath: str = "") -> str:
    """stderr of `import pto` in a fresh interpreter, which must fail."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    r = subprocess.run([sys.executable, "-c", "import pto"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, f"import pto succeeded in {cwd}"
    return r.stderr


def test_running_from_the_source_directory():
    # python/ on sys.path first: its pto/ (no compiled module) hides the built one
    err = import_pto(SOURCE)
    assert "ModuleNotFoundError: No module named 'pto._pto'" in err, err
    assert "The above exception was the direct cause" in err, err
    assert ("ImportError: pto's compiled module is missing (No module named 'pto._pto'; pto was "
            f"imported from {os.path.realpath(os.path.join(SOURCE, 'pto'))}): build it with "
            "scripts/python.sh (docs/python.md), and do not run from the python/ source "
            "directory") in err, err


def test_bundled_libpto_missing(tmp_path):
    pkg = tmp_path / "pto"
    shutil.copytree(os.path.dirname(pto.__file__), pkg)
    for f in pkg.glob("libpto.so*"):
        f.unlink()
    err = import_pto(str(tmp_path), str(tmp_path))
    assert ("ImportError: pto's compiled module cannot be loaded (libpto.so.0: cannot open "
            "shared object file") in err, err
    assert "build and install it again with scripts/python.sh (docs/python.md)" in err, err
