#!/usr/bin/env bash
# The README's Python lines work as written: in a copy of the sources (so
# the repository gets no .venv), the commands of the sh block under "## A
# tour in Python" run one by one (scripts/python.sh, then the tour with the
# venv's python), with PTO_BUILD_DIR naming this build tree so that libpto
# is not built a second time; the tour must print what the README says it
# prints, and the README's Python block must be python/examples/tour.py.
#   readme_python.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# block N: the Nth fenced block of the given language under the heading
block() {
  awk -v lang="$1" -v n="$2" '/^## A tour in Python/ {t = 1; next} t && /^## / {exit}
    t && /^```/ {if (!fence) {fence = 1; if (substr($0, 4) == lang && ++k == n) on = 1}
                 else {if (on) exit; fence = 0}; next}
    on' "$src/README.md"
}
block sh 1 >"$tmp/cmds"
block python 1 >"$tmp/tour.py"
block "" 1 >"$tmp/want"
for f in cmds tour.py want; do
  [ -s "$tmp/$f" ] || { echo "FAILED: README.md's '## A tour in Python' lacks its $f block"; exit 1; }
done
if ! diff -u <(grep -v '^"""' "$src/python/examples/tour.py") "$tmp/tour.py"; then
  echo "FAILED: the README's Python tour differs from python/examples/tour.py (diff above)"
  exit 1
fi
mkdir "$tmp/src"
cp -r "$src/scripts" "$src/python" "$src/include" "$tmp/src/"
rm -rf "$tmp/src/python/build" "$tmp/src/python/"*.egg-info
cd "$tmp/src"
while IFS= read -r line; do
  echo "\$ $line"
  PTO_BUILD_DIR="$build" bash -c "$line" >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || { echo "FAILED: the README's line '$line' exited with $rc"; exit 1; }
done <"$tmp/cmds"
# the last line is the tour: its output is what the README shows
if ! diff -u "$tmp/want" "$tmp/out"; then
  echo "FAILED: the tour printed something else than the README shows (diff above)"
  exit 1
fi
echo "README Python lines: ran as written, the tour printed what the README shows"
