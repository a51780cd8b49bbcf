#!/usr/bin/env bash
# Builds pto and runs the flagship demo: a paged-attention decode step as a
# task graph, verified against a sequential reference. Says what it is
# doing at each step; the compiler's own output goes to build/demo-build.log
# (shown if the build fails). Builds only the pto command (target pto_cli:
# the library, the scenes and the command), not the test suite, which
# scripts/test.sh builds in build-test-* trees of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '== %s\n' "$*"; }
. scripts/deps.sh
say "checking the build tools (build-essential, cmake; installed from Debian if missing)"
deps_install build-essential cmake
mkdir -p build
log=build/demo-build.log
say "configuring in build/ (RelWithDebInfo)"
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1; then
  cat "$log" >&2
  say "configure failed (above; also in $log)" >&2
  exit 1
fi
jobs=$(nproc)
say "building the library, the pto command and the scenes with $jobs job$([ "$jobs" -eq 1 ] || echo s) (about a minute the first time; log: $log)"
start=$SECONDS
if ! cmake --build build -j "$jobs" --target pto_cli >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  say "build failed (the end of $log is above)" >&2
  exit 1
fi
say "built in $((SECONDS - start)) s"
say "running: build/pto run paged_attention${*:+ $*}"
exec build/pto run paged_attention "$@"
