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
. "$(dirname "$0")/failed_job.sh"
failed_job_run "$mpiexec" "${NP:-2}" "$prog" "$mode" "$limit" "$@"
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
