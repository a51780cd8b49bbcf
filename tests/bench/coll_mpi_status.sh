#!/bin/sh
# coll_mpi_status.sh SRC — bench/coll_mpi_status.py's tables follow issue
# 24's targets: a cell is the median over runs of each run's pto ratio,
# over the target above 1.1x (put and get: 1.2x), shown with the runs'
# min-max, and counted; other systems' rows and the header rows are left
# out. Checked on three made-up runs.
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hdr=ranks,windows,collective,size_bytes,system,us_median,us_min,us_max,ratio_median,ratio_min,ratio_max
for r in 1 2 3; do
  echo "$r,$hdr"
  # allreduce 8 B: 1.0, 1.2, 1.3 (median 1.2: over); 64 B: 1.05 (under)
  echo "$r,2,rma,allreduce,8,pto,1,1,1,1.$((r == 1 ? 0 : r == 2 ? 2 : 3)),1,1"
  echo "$r,2,rma,allreduce,8,pto-mesh,9,9,9,9.0,9,9"
  echo "$r,2,rma,allreduce,64,pto,1,1,1,1.05,1,1"
  # put 1.15 (under put's 1.2), get 1.25 (over)
  echo "$r,2,rma,put,8,pto,1,1,1,1.15,1,1"
  echo "$r,2,rma,get,8,pto,1,1,1,1.25,1,1"
done >"$tmp/x.csv"
out=$(python3 "$src/bench/coll_mpi_status.py" "$tmp" "made up=x.csv")
fail() {
  echo "coll_mpi_status: $1; the output was:" >&2
  echo "$out" >&2
  exit 1
}
echo "$out" | grep -q '^| call | 8 B | 64 B |$' || fail "the sizes' header is not 8 B, 64 B"
echo "$out" | grep -q '^| allreduce | \*\*1.20\*\* (1.00-1.30) | 1.05 |$' ||
  fail "allreduce: expected 1.20 over the target (1.00-1.30), 1.05 under it"
echo "$out" | grep -q '^| put | 1.15 | - |$' || fail "put: 1.15 is under put's 1.2x target"
echo "$out" | grep -q '^| get | \*\*1.25\*\* (1.25-1.25) | - |$' || fail "get: 1.25 is over 1.2x"
echo "$out" | grep -q '^cells over target: 2$' || fail "expected 2 cells over the targets"
echo "coll_mpi_status: ok"
