#!/usr/bin/env bash
# Builds pto and runs the flagship demo: a paged-attention decode step as a
# task graph, verified against a sequential reference.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
deps_install build-essential cmake
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
exec build/pto run paged_attention "$@"
