#!/usr/bin/env bash
# bench/commute/run.sh [-w W] [-r R] [--alloc thp|default] — builds and runs
# the commute and priority benchmarks (commute_common.h) and the
# dot-product reduction (dot_common.h) for pto, OpenMP (gcc, clang) and
# StarPU, R rounds (default 1) of A B B A order, each program printing the
# median of 3 runs; W workers (default 2). Every program runs under the
# suite's allocator rule (bench/alloc_rule.sh; default thp, as bench/run.sh).
# Uses build-bench/ (configured as bench/run.sh does, if missing).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
W=2
R=1
ALLOC=thp
while [ $# -gt 0 ]; do
  case $1 in
    -w) W=$2; shift ;;
    -r) R=$2; shift ;;
    --alloc) ALLOC=$2; shift ;;
    *) echo "run.sh: unknown option $1 (-w W, -r R, --alloc thp|default)" >&2; exit 2 ;;
  esac
  shift
done
. "$ROOT/bench/alloc_rule.sh"
alloc_rule
echo "allocator rule: $ALLOC_LINE"
. "$ROOT/scripts/deps.sh" # cmake_configured: a failed configure leaves a cache, no build files
if ! cmake_configured "$BUILD"; then
  rm -f "$BUILD/CMakeCache.txt"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTO_BUILD_BENCH=ON -DPTO_BUILD_TESTS=OFF \
    >/dev/null
fi
cmake --build "$BUILD" -j 2 --target commute_all >/dev/null
B=$BUILD/bench
export OMP_MAX_TASK_PRIORITY=3 STARPU_SILENT=1
for ((r = 0; r < R; r++)); do
  for sys in pto omp_gcc omp_clang starpu starpu omp_clang omp_gcc pto; do
    bench_cmd "$B/commute_$sys" -w "$W"
    bench_cmd "$B/dot_$sys" -w "$W"
  done
done
