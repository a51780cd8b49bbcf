#!/bin/sh
# rank_fault.sh MPIEXEC PROGRAM MODE LIMIT_S PATTERN...
# Runs `MPIEXEC -np NP PROGRAM MODE` (NP from the environment, default 2;
# test_node_mpi_faults: chip 1 = rank 1 kills, stops or exits itself
# mid-task) and checks that the job fails, ends within LIMIT_S seconds,
# prints every PATTERN (grep -E), crashes nowhere (no segmentation fault),
# and leaves no process of PROGRAM and no object of the run behind. Prints
# the job's output, and actual vs expected on failure.
set -u
mpiexec=$1 prog=$2 mode=$3 limit=$4
shift 4
out=$(mktemp)
start=$(date +%s%N)
timeout -k 5 $((limit + 30)) "$mpiexec" -np "${NP:-2}" --oversubscribe "$prog" "$mode" >"$out" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
cat "$out"
fail=0
if [ "$rc" -eq 0 ]; then
  echo "FAILED: the job exited 0, expected a failure"; fail=1
fi
if [ "$ms" -ge $(((limit + 30) * 1000)) ]; then
  echo "FAILED: the job hung (ended by timeout after $((limit + 30)) s)"; fail=1
fi
if [ "$ms" -gt $((limit * 1000)) ]; then
  echo "FAILED: the job took $ms ms, expected at most $((limit * 1000)) ms"; fail=1
fi
for p in "$@"; do
  if ! grep -Eq "$p" "$out"; then
    echo "FAILED: the output does not say /$p/"; fail=1
  fi
done
if grep -Eq "Segmentation fault|signal 11|SIGSEGV" "$out"; then
  echo "FAILED: a process crashed (segmentation fault)"; fail=1
fi
sleep 0.5
left=$(pgrep -f -x "$prog $mode" || true)
if [ -n "$left" ]; then
  echo "FAILED: processes left behind: $left"; fail=1
fi
# anywhere in a line: Open MPI's own messages may be written into the middle
# of it
objs=$(sed -n 's|.*run objects: \(/dev/shm/pto\.[0-9a-f.]*[0-9a-f]\)\.\*.*|\1|p' "$out" | head -1)
if [ -z "$objs" ]; then
  echo "FAILED: the program did not say where its run's objects are"; fail=1
elif ls "$objs".* >/dev/null 2>&1; then
  echo "FAILED: objects of the run left behind: $(ls "$objs".* | tr '\n' ' ')"; fail=1
fi
rm -f "$out"
echo "mode $mode: exit $rc after $ms ms"
exit $fail
