#!/usr/bin/env bash
# Installs what the tests need (Debian packages, when missing) and runs the
# whole suite four ways: plain, ASan+UBSan, TSan, park10s, then the tests
# run under mpiexec (label mpi) on a plain build, then runs every fuzz
# target for 20 s (scripts/fuzz.sh). Warnings are errors.
#   scripts/test.sh            all six
#   scripts/test.sh plain      one of: plain address thread park10s mpi fuzz
# The mpi tests run only in mode mpi (-DPTO_MPI=ON): Open MPI under ASan and
# TSan reports its own leaks and races. The sanitizer builds are built
# without MPI (-DPTO_MPI=OFF), which also keeps that configuration tested;
# plain and park10s take MPI when it is installed (AUTO).
# park10s is a plain build whose futex parks last up to 10 s instead of
# 20 ms (PTO_PARK_MAX_MS): every wait must end by a wake-up, so a wait that
# relies on the periodic re-check makes its test 10 s slower (or trips a
# watchdog). It costs about 25 s (build and suite) on 2 CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/deps.sh
deps_install build-essential cmake pkg-config libcmocka-dev python3 "${PTO_MPI_PACKAGES[@]}"

jobs=$(nproc)
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(plain address thread park10s mpi fuzz)
for mode in "${modes[@]}"; do
  park="" labels=(-LE mpi)
  case "$mode" in
    plain) san="" ;;
    mpi) san="" labels=(-L mpi) ;;
    address|thread) san="$mode" ;;
    park10s) san="" park=10000 ;;
    fuzz) PTO_FUZZ_BUILD=build-test-fuzz scripts/fuzz.sh; continue ;;
    *) echo "unknown mode '$mode' (plain, address, thread, park10s, mpi, fuzz)" >&2; exit 2 ;;
  esac
  dir="build-test-$mode"
  mpi=AUTO
  case "$mode" in mpi) mpi=ON ;; address|thread) mpi=OFF ;; esac
  echo "== $mode: configure and build in $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTO_WERROR=ON -DPTO_SANITIZE="$san" \
    -DPTO_PARK_MAX_MS="$park" -DPTO_MPI="$mpi" >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
  echo "== $mode: ctest"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600 "${labels[@]}")
done
echo "== all test runs passed: ${modes[*]}"
