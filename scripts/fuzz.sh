#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c, clang, ASan+UBSan) and
# runs each for a bounded time on its seed corpus tests/fuzz/corpus/fuzz_NAME/.
# The seed corpus is only read: new inputs go to a scratch corpus in the
# build dir, crashes to BUILD/fuzz/artifacts/. Fails when a target crashes,
# leaks, hits UB or a failed oracle.
#   scripts/fuzz.sh                    every target, 20 s each (CI)
#   scripts/fuzz.sh --seconds 600      longer runs
#   scripts/fuzz.sh --seconds 60 cli   only fuzz_cli (names with or without fuzz_)
# The build dir is build-fuzz, or $PTO_FUZZ_BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds needs a positive integer" >&2; exit 2; }
      seconds=$2
      shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    *) names+=("${1#fuzz_}"); shift ;;
  esac
done

. scripts/deps.sh
deps_install build-essential cmake clang libclang-rt-14-dev

dir=${PTO_FUZZ_BUILD:-build-fuzz}
jobs=$(nproc)
echo "== fuzz: configure and build in $dir"
CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTO_WERROR=ON -DPTO_FUZZ=ON \
  -DPTO_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" -j "$jobs" --target pto_fuzz >/dev/null

if [ ${#names[@]} -eq 0 ]; then
  for src in tests/fuzz/fuzz_*.c; do
    n=$(basename "$src" .c)
    names+=("${n#fuzz_}")
  done
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for n in "${names[@]}"; do
  bin="$dir/fuzz/fuzz_$n"
  [ -x "$bin" ] || { echo "fuzz.sh: no target fuzz_$n (tests/fuzz/fuzz_$n.c)" >&2; exit 2; }
  seeds="tests/fuzz/corpus/fuzz_$n"
  work="$dir/fuzz/corpus/fuzz_$n"
  art="$dir/fuzz/artifacts/fuzz_$n/"
  mkdir -p "$work" "$art"
  args=()
  [ -d "$seeds" ] && args+=("$seeds")
  dict="tests/fuzz/fuzz_$n.dict" # optional libFuzzer dictionary
  [ -f "$dict" ] && dictopt=(-dict="$dict") || dictopt=()
  log="$dir/fuzz/fuzz_$n.log"
  echo "== fuzz_$n: ${seconds} s"
  # The scratch corpus comes first: libFuzzer writes new inputs into it.
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$art" "${dictopt[@]}" "$work" "${args[@]}" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "   ok: ${execs:-?} executions, ${rate:-?} exec/s"
  else
    tail -n 40 "$log"
    echo "   FAILED: fuzz_$n (log $log, input in $art)" >&2
    failed+=("fuzz_$n")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzz: all targets ran ${seconds} s without a finding: ${names[*]/#/fuzz_}"
