"""Builds the `pto` Python package against libpto from a CMake build tree.

    cmake -S . -B build && cmake --build build -j
    PTO_BUILD_DIR=$PWD/build pip install --no-build-isolation ./python

PTO_BUILD_DIR defaults to ../build (next to this directory). The module
pto._pto is compiled by cffi (API mode) against include/pto/*.h and linked
to that tree's libpto.so, which is copied into the package (found through
the module's $ORIGIN rpath), so an installed package needs no build tree.
Needs Debian's python3-dev, python3-setuptools, python3-cffi, python3-numpy.
"""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("PTO_SOURCE_DIR", os.path.dirname(HERE))
os.environ.setdefault("PTO_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))


class BuildExtWithLibpto(build_ext):
    """build_ext that also copies libpto.so.<major> next to the module."""

    def run(self):
        src = os.path.join(os.path.abspath(os.environ["PTO_BUILD_DIR"]), "src")
        libs = sorted(glob.glob(os.path.join(src, "libpto.so.*")))
        if not libs:
            raise SystemExit(
                f"pto: no libpto.so in {src}; build libpto first "
                "(cmake -S . -B build && cmake --build build) or set PTO_BUILD_DIR")
        super().run()
        soname = min(libs, key=len)  # libpto.so.0 (a link to the versioned file)
        for ext in self.extensions:
            dest_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
            os.makedirs(dest_dir, exist_ok=True)
            shutil.copy2(os.path.realpath(soname), os.path.join(dest_dir, os.path.basename(soname)))


setup(
    name="pto",
    version="0.1.0",
    description="Python front end of pto, a task-graph runtime for simulated NPU chips",
    packages=["pto"],
    package_data={"pto": ["py.typed"]},
    python_requires=">=3.9",
    install_requires=["numpy", "cffi"],
    setup_requires=["cffi"],
    cffi_modules=["pto/_build.py:ffibuilder"],
    cmdclass={"build_ext": BuildExtWithLibpto},
    zip_safe=False,
)
