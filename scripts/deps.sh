#!/usr/bin/env bash
# Installs the given Debian packages when they are missing (as root, or
# through sudo). Sourced by the other scripts: deps_install PKG...
deps_install() {
  local need=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  [ ${#need[@]} -eq 0 ] && return 0
  echo "== installing: ${need[*]}"
  local sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
}

# Whether directory $1 is a configured CMake build tree: it has build files.
# A configure that failed or was interrupted leaves a CMakeCache.txt and no
# build files; the scripts that took the cache for a build tree skipped the
# configure from then on, and every later build failed (bench/run.sh: every
# system, "No rule to make target 'Makefile'"). Configure when this is
# false, after removing the stale cache.
cmake_configured() { [ -f "$1/Makefile" ] || [ -f "$1/build.ninja" ]; }

# Open MPI, for the MPI communication backend (PTO_MPI) and its tests.
PTO_MPI_PACKAGES=(libopenmpi-dev openmpi-bin)
# ip (network namespaces) for scripts/two_hosts.sh, the mpi test of two
# hosts, and gdb for the stacks it prints of a job that hangs.
PTO_MPI_PACKAGES+=(iproute2 gdb)

# The Python front end (scripts/python.sh): Debian's interpreter, NumPy and
# cffi, what pip needs to build it in a venv (venv, setuptools, wheel), and
# pytest for its suite.
PTO_PYTHON_PACKAGES=(python3 python3-dev python3-venv python3-setuptools python3-wheel python3-numpy
  python3-cffi python3-pytest)
