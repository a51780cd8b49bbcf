#!/bin/sh
# coll_reference.sh — bench_coll_mpi's reference at another thread level,
# end to end: bench/coll_mpi_repeat.sh alternates a run of pto's systems
# with a run of Open MPI's calls alone at MPI_THREAD_SINGLE
# (--mpi-thread single), and bench/coll_mpi_summary.py --reference puts
# pto's time over that run's MPI call beside the in-trial ratio.
#   sh coll_reference.sh SOURCE_DIR BENCH_COLL_MPI
set -u
src=$1 bench=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAILED: $1"
  for f in "$out"/pto.csv "$out"/single.csv "$out"/summary.md; do
    [ -f "$f" ] && { echo "--- $f"; cat "$f"; }
  done
  exit 1
}
sh "$src/bench/coll_mpi_repeat.sh" 2 2 "$out" "pto=$bench single=$bench,--mpi-thread,single" \
  --sizes 8,4096 --trials 1 --only allreduce,put || fail "coll_mpi_repeat.sh exited $?"
# the reference runs hold Open MPI's calls only, each marked with its level
grep -q ',MPI_Allreduce@single,' "$out/single.csv" || fail "no MPI_Allreduce@single row"
grep -q ',MPI_Put+flush@single,' "$out/single.csv" || fail "no MPI_Put+flush@single row"
grep -q ',pto' "$out/single.csv" && fail "pto ran in the reference run"
# pto's runs: pto and the MPI call at pto's level (unmarked), 2 runs each
[ "$(grep -c ',allreduce,8,pto,' "$out/pto.csv")" = 2 ] || fail "not 2 runs of pto's allreduce"
grep -q '@' "$out/pto.csv" && fail "a row of pto's runs is marked with a level"
python3 "$src/bench/coll_mpi_summary.py" "$out" pto,single pto --reference single \
  >"$out/summary.md" || fail "coll_mpi_summary.py exited $?"
grep -q '| pto ÷ MPI at single (single.s runs) |' "$out/summary.md" || fail "no reference column"
# each point: the in-trial ratio, then pto over the reference, both numbers
for p in 'allreduce | 8 ' 'allreduce | 4096 ' 'put | 8 ' 'put | 4096 '; do
  grep -Eq "\| $p\| pto \| [0-9.]+ \([0-9.]+-[0-9.]+\) \[[0-9.]+\] \| [0-9.]+ \([0-9.]+-[0-9.]+\) \[[0-9.]+\] \|" \
    "$out/summary.md" || fail "no figures for $p"
done
echo "coll_reference: ok"
