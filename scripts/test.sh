#!/usr/bin/env bash
# Installs what the tests need (Debian packages, when missing) and runs the
# whole suite four ways: plain, ASan+UBSan, TSan, park10s, then the tests
# run under mpiexec (label mpi) on a plain build, then runs every fuzz
# target for 20 s (scripts/fuzz.sh), then the Python front end's pytest
# suite (python/tests). Warnings are errors.
#   scripts/test.sh            all seven
#   scripts/test.sh plain      one of: plain address thread park10s mpi fuzz python
#   scripts/test.sh python-asan  the Python suite over an ASan (python-tsan: TSan)
#                                build of libpto, the sanitizer's runtime
#                                LD_PRELOADed; not in the default list
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

# The usage (this header) and the modes are checked before anything is installed.
all_modes=(plain address thread park10s mpi fuzz python python-asan python-tsan)
for mode in "$@"; do
  case "$mode" in
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) [[ " ${all_modes[*]} " == *" $mode "* ]] ||
         { echo "unknown mode '$mode' (${all_modes[*]}; --help)" >&2; exit 2; } ;;
  esac
done

. scripts/deps.sh
# The Python packages too: cli.readme_python (plain builds) makes a venv.
deps_install build-essential cmake pkg-config libcmocka-dev "${PTO_MPI_PACKAGES[@]}" \
  "${PTO_PYTHON_PACKAGES[@]}"

jobs=$(nproc)
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(plain address thread park10s mpi fuzz python)

# The Python front end: libpto, the cffi module built against it, pytest.
# Debian's interpreter (/usr/bin/python3) has the packages deps_install adds.
run_python() {
  local san="$1" dir="build-test-$2" py=/usr/bin/python3 mpi=AUTO
  [ -n "$san" ] && mpi=OFF # Open MPI is noisy under the sanitizers (see above)
  echo "== $2: build libpto and the pto module in $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTO_WERROR=ON -DPTO_SANITIZE="$san" \
    -DPTO_BUILD_TESTS=OFF -DPTO_MPI="$mpi" >/dev/null
  cmake --build "$dir" -j "$jobs" --target pto_shared >/dev/null
  (cd python && PTO_BUILD_DIR="../$dir" "$py" setup.py -q build --build-base "../$dir/py-build" \
    --build-lib "../$dir/py" >/dev/null)
  echo "== $2: pytest"
  local pre=""
  [ "$san" = address ] && pre="$(gcc -print-file-name=libasan.so)"
  [ "$san" = thread ] && pre="$(gcc -print-file-name=libtsan.so)"
  PYTHONPATH="$PWD/$dir/py" PYTHONDONTWRITEBYTECODE=1 LD_PRELOAD="$pre" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 TSAN_OPTIONS=halt_on_error=1 \
    "$py" -m pytest -q -p no:cacheprovider python/tests
}

for mode in "${modes[@]}"; do
  park="" labels=(-LE mpi)
  case "$mode" in
    python) run_python "" python; continue ;;
    python-asan) run_python address python-asan; continue ;;
    python-tsan) run_python thread python-tsan; continue ;;
    plain) san="" ;;
    mpi) san="" labels=(-L mpi) ;;
    address|thread) san="$mode" ;;
    park10s) san="" park=10000 ;;
    fuzz) PTO_FUZZ_BUILD=build-test-fuzz scripts/fuzz.sh; continue ;;
    *) exit 2 ;; # (refused above)
  esac
  dir="build-test-$mode"
  # The mpi tests are part of the plain build (MPI is installed above, so
  # AUTO takes it); mode mpi requires it (ON) and runs them from there.
  [ "$mode" = mpi ] && dir=build-test-plain
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
  # Under the sanitizers a chip's default rings (256 MiB of heap, 16384
  # task slots) cost more to map and free than most tests take to run
  # (TSan clears its metadata of the whole range: 0.7 s per `pto run`,
  # against 0.2 s with these). Smaller rings also wrap more often. Tests
  # that set their own sizes keep them.
  if [ -n "$san" ]; then export PTO_HEAP_MB=32 PTO_TASK_SLOTS=2048; else unset PTO_HEAP_MB PTO_TASK_SLOTS; fi
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600 "${labels[@]}")
done
echo "== all test runs passed: ${modes[*]}"
