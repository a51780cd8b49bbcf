#!/bin/sh
# bench/commute/run.sh [-w W] — builds and runs the commute and priority
# benchmarks (commute_common.h) for pto, OpenMP (gcc, clang) and StarPU in
# A B B A order, each printing the median of 3 runs; W workers (default 2).
# Uses build-bench/ (configured as bench/run.sh does, if missing).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
W=2
[ "${1:-}" = "-w" ] && W=$2
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTO_BUILD_BENCH=ON -DPTO_BUILD_TESTS=OFF \
    >/dev/null
fi
cmake --build "$BUILD" -j 2 --target commute_all >/dev/null
B=$BUILD/bench
export OMP_MAX_TASK_PRIORITY=3 STARPU_SILENT=1
for sys in pto omp_gcc omp_clang starpu starpu omp_clang omp_gcc pto; do
  "$B/commute_$sys" -w "$W"
done
