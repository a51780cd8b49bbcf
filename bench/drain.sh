#!/usr/bin/env bash
# Drain benchmark (issue: sync_start): for 1-4 schedulers, runs the
# sync_start normal and stress scenes ROUNDS times and reports the drain
# latency (drain entry to cohort start), the cohort start spread and the
# Effective time per round. A benchmark, not a test: it verifies nothing
# beyond what the scenes verify themselves.
#   bench/drain.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-20}
pto="$build/pto"
[ -x "$pto" ] || { echo "no $pto: build first (cmake -S . -B $build && cmake --build $build)"; exit 2; }
printf '%-12s %5s %8s %8s %14s %14s %16s %14s\n' scene sched drains attempts \
  "drain mean us" "drain max us" "spread mean us" "Effective us"
for scene in sync_normal sync_stress; do
  for s in 1 2 3 4; do
    out=$("$pto" run "$scene" --schedulers "$s" --rounds "$rounds")
    echo "$out" | grep -q '^verified' || { echo "$out"; exit 1; }
    drains=$(echo "$out" | sed -n 's/.*drains \([0-9]*\).*/\1/p' | head -1)
    attempts=$(echo "$out" | sed -n 's/.*attempts \([0-9]*\).*/\1/p' | head -1)
    spread=$(echo "$out" | sed -n 's/.*spread max [0-9.]* us, mean \([0-9.]*\) us.*/\1/p' | head -1)
    lat_mean=$(echo "$out" | sed -n 's/.*drain latency.*mean \([0-9.]*\) us, max.*/\1/p' | head -1)
    lat_max=$(echo "$out" | sed -n 's/.*drain latency.*max \([0-9.]*\) us.*/\1/p' | head -1)
    eff=$(echo "$out" | sed -n 's/.*Effective \([0-9.]*\) us.*/\1/p' | head -1)
    printf '%-12s %5s %8s %8s %14s %14s %16s %14s\n' "$scene" "$s" "${drains:-0}" \
      "${attempts:-0}" "${lat_mean:--}" "${lat_max:--}" "${spread:--}" "$eff"
  done
done
echo "(Effective: the last round; drains, attempts and latencies: over $rounds rounds)"
