"""Shared fixtures: the C kernel library, device ids, array printing."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# device lease ids reserved for the Python tests: 130-139
DEVICE_IDS = {"scenes": [130, 131], "node": [132, 133], "coll": [134, 135], "misc": [136, 137],
              "repro": [140, 141, 142], "contracts": [138, 139], "host_array": [209],
              "coll3": [143, 144, 145], "thread": [146, 147, 148],
              "interrupt": [212, 213]}


@pytest.fixture(scope="session")
def ckernels(tmp_path_factory) -> str:
    """Path of tests/ckernels.c built as a shared library."""
    out = str(tmp_path_factory.mktemp("ck") / "libckernels.so")
    cc = os.environ.get("CC", "cc")
    import pto  # link the libpto.so.0 the package loads, by its soname
    pkg = os.path.dirname(pto.__file__)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I", os.path.join(ROOT, "include"),
                    os.path.join(HERE, "ckernels.c"), "-o", out, "-L", pkg, "-l:libpto.so.0"],
                   check=True)
    return out


def assert_array(actual, expected, label: str) -> None:
    """Equal arrays, or fail printing both whole arrays."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or not np.array_equal(actual, expected):
        with np.printoptions(threshold=sys.maxsize, linewidth=200):
            pytest.fail(f"{label}: arrays differ\nactual {actual.shape}:\n{actual}\n"
                        f"expected {expected.shape}:\n{expected}", pytrace=False)
