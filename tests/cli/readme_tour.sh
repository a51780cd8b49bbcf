#!/usr/bin/env bash
# The README's tour is a program that works as shown: its C block is
# examples/quickstart/quickstart.c, compiles without a warning under -Wall
# -Wextra -Werror against the built library, runs, and prints the sums it
# computed, each equal to the expected value, and "ok".
#   readme_tour.sh SOURCE_DIR CC LIBPTO_A [LIBS]
# LIBS: what the static library needs beyond libc (";"-separated, as CMake
# lists: the MPI libraries of a build with MPI).
set -uo pipefail
src=$1 cc=$2 lib=$3 libs=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^## A tour of the API/ {tour = 1} tour && /^```c$/ {on = 1; next} on && /^```$/ {exit} on' \
  "$src/README.md" >"$tmp/tour.c"
[ -s "$tmp/tour.c" ] || { echo "FAILED: no C block under '## A tour of the API' in README.md"; exit 1; }
if ! diff -u "$src/examples/quickstart/quickstart.c" "$tmp/tour.c"; then
  echo "FAILED: the README's tour differs from examples/quickstart/quickstart.c (diff above)"
  exit 1
fi
if ! "$cc" -std=c11 -Wall -Wextra -Werror -I"$src/include" "$tmp/tour.c" "$lib" ${libs//;/ } -lpthread -lrt -lm \
  -o "$tmp/tour" 2>"$tmp/cc.log"; then
  cat "$tmp/cc.log"
  echo "FAILED: the README's tour does not compile cleanly with -Wall -Wextra -Werror"
  exit 1
fi
"$tmp/tour" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out" "$tmp/err"
[ "$rc" -eq 0 ] || { echo "FAILED: the tour exited with $rc"; exit 1; }
want=(132 156 180 204)
for i in 0 1 2 3; do
  line="row $i: sum ${want[$i]} (expected ${want[$i]})"
  grep -qxF "$line" "$tmp/out" || { echo "FAILED: no line '$line'"; exit 1; }
done
grep -qE '^3 tasks, 6 blocks, [0-9]+ us: ok$' "$tmp/out" ||
  { echo "FAILED: no final line '3 tasks, 6 blocks, N us: ok'"; exit 1; }
[ -s "$tmp/err" ] && { echo "FAILED: the tour wrote to stderr"; exit 1; }
echo "README tour: compiled with -Wall -Wextra -Werror, ran, printed the expected sums"
