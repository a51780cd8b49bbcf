#!/usr/bin/env bash
# The scripts' rule for "this directory is a configured build tree"
# (scripts/deps.sh, cmake_configured; used by scripts/python.sh,
# bench/run.sh, bench/commute/run.sh): build files, not a CMakeCache.txt,
# which a configure that failed or was interrupted leaves behind. Taking
# the cache for a build tree skipped the configure from then on, and every
# later build failed.
#   cmake_configured.sh SOURCE_DIR
set -uo pipefail
. "$1/scripts/deps.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
cmake_configured "$tmp" && fail "an empty directory counted as configured"
echo "# a failed configure's cache" >"$tmp/CMakeCache.txt"
cmake_configured "$tmp" && fail "a directory with only a CMakeCache.txt counted as configured"
touch "$tmp/Makefile"
cmake_configured "$tmp" || fail "a directory with a Makefile did not count as configured"
rm "$tmp/Makefile" && touch "$tmp/build.ninja"
cmake_configured "$tmp" || fail "a directory with a build.ninja did not count as configured"
echo "cmake_configured: a cache alone is no build tree; Makefile or build.ninja is"
