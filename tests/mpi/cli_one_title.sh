#!/bin/sh
# cli_one_title.sh MPIEXEC PTO: `mpiexec -np 2 pto run ring_shuffle` prints
# the scene's title and report once (rank 0), not once per rank.
set -u
mpiexec=$1 pto=$2
out=$(timeout -k 5 120 "$mpiexec" -np 2 --oversubscribe "$pto" run ring_shuffle 2>&1)
rc=$?
echo "$out"
n=$(printf '%s\n' "$out" | grep -c '^ring_shuffle: ')
[ "$rc" -eq 0 ] || { echo "FAILED: the job exited with $rc"; exit 1; }
[ "$n" -eq 1 ] || { echo "FAILED: the title is printed $n times, expected once"; exit 1; }
echo "pto run under mpiexec -np 2: one title, one report"
