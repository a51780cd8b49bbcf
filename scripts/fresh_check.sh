#!/usr/bin/env bash
# A newcomer's first hour, checked: clones this repository (its committed
# HEAD) into a temporary directory and, there, with nothing built and a
# fresh venv, runs what the README says, timing each step:
#   1. scripts/demo.sh;
#   2. scripts/test.sh (all modes, or those given with --modes "...";
#      --modes none skips it);
#   3. the README's Python lines (scripts/python.sh, then the tour with the
#      venv's python), comparing the tour's output with the README's;
#   4. the consumers: the demo's build tree built whole, then
#      tests/install/check.sh (find_package of pto::pto,
#      pto::pto_shared, pto::pto_static, and the README's pkg-config lines,
#      in the build as configured and in one of the other PTO_MPI setting).
# Debian packages missing on the machine are installed by the scripts
# themselves (as root, or through sudo), as for a new user.
#   scripts/fresh_check.sh [--modes "plain python ..."|--modes none] [--keep]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
modes="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --modes) modes=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh_check.sh: unknown argument '$1' (--modes \"...\", --keep)" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
[ $keep = 1 ] || trap 'rm -rf "$tmp"' EXIT
times=()
step() { # step NAME COMMAND...: runs it in the clone, logs, times
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== $name: $*"
  (cd "$tmp/pto" && "$@") >"$tmp/$name.log" 2>&1 || rc=$?
  times+=("$(printf '%-10s %4d s  %s' "$name" $((SECONDS - t0)) "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
  if [ $rc != 0 ]; then
    tail -n 30 "$tmp/$name.log"
    echo "FAILED: $name (log: $tmp/$name.log)"
    printf '%s\n' "${times[@]}"
    trap - EXIT
    exit 1
  fi
  tail -n 3 "$tmp/$name.log" | sed 's/^/   /'
}
git clone -q --no-local "$src" "$tmp/pto"
echo "== a fresh clone of $(git -C "$tmp/pto" log -1 --format='%h %s' | cut -c1-72) in $tmp/pto"
step demo scripts/demo.sh
if [ "$modes" != none ]; then
  # shellcheck disable=SC2086 # the modes are words
  step test scripts/test.sh $modes
fi
readme_block() { # the Nth block of a language under "## A tour in Python"
  awk -v lang="$1" '/^## A tour in Python/ {t = 1; next} t && /^## / {exit}
    t && /^```/ {if (!fence) {fence = 1; if (substr($0, 4) == lang && ++k == 1) on = 1}
                 else {if (on) exit; fence = 0}; next}
    on' "$tmp/pto/README.md"
}
readme_block sh >"$tmp/python_lines.sh"
readme_block "" >"$tmp/tour_want.txt"
step python bash -e "$tmp/python_lines.sh"
tail -n "$(wc -l <"$tmp/tour_want.txt")" "$tmp/python.log" | diff -u "$tmp/tour_want.txt" - ||
  { echo "FAILED: the tour printed something else than the README shows"; exit 1; }
# the demo builds the pto command only (scripts/demo.sh); the install
# takes every target
step build cmake --build build -j "$(nproc)"
step consumers tests/install/check.sh build .
echo "== times"
printf '%s\n' "${times[@]}"
