#!/usr/bin/env bash
# Installs the pto Python package (python/) into a virtual environment,
# .venv/ (or $PTO_VENV), made by Debian's /usr/bin/python3 with Debian's
# NumPy and cffi visible in it (--system-site-packages). Debian's pip
# refuses to install into the system Python (externally-managed-environment),
# and another python3 first on PATH (pyenv's, say) may lack NumPy, cffi or
# wheel, so neither is used. Installs the Debian packages it needs when
# missing, builds libpto (in $PTO_BUILD_DIR, default build/; configured
# there if it is not a build tree yet) and pip-installs ./python, offline.
# Then run Python programs with .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '== %s\n' "$*"; }
. scripts/deps.sh
say "checking the packages (installed from Debian if missing): ${PTO_PYTHON_PACKAGES[*]}"
deps_install build-essential cmake "${PTO_PYTHON_PACKAGES[@]}"
build=${PTO_BUILD_DIR:-build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
venv=${PTO_VENV:-.venv}
log="$build/python-build.log"
if ! cmake_configured "$build"; then
  rm -f "$build/CMakeCache.txt"
  say "configuring libpto in $build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
say "building libpto in $build (log: $log)"
cmake --build "$build" -j "$(nproc)" --target pto_shared >>"$log" 2>&1 ||
  { tail -n 40 "$log" >&2; say "build failed (the end of $log is above)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  say "making the virtual environment $venv (/usr/bin/python3, with Debian's packages)"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
say "installing the pto package into $venv"
PTO_BUILD_DIR="$build" "$venv/bin/python" -m pip install -q --no-index --no-build-isolation \
  --disable-pip-version-check ./python >>"$log" 2>&1 ||
  { tail -n 40 "$log" >&2; say "pip install failed (the end of $log is above)" >&2; exit 1; }
"$venv/bin/python" -c 'import pto; print("== installed: pto", pto.__version__)'
say "run Python programs with $venv/bin/python (e.g. $venv/bin/python python/examples/tour.py)"
