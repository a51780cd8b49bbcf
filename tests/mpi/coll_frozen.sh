#!/bin/sh
# coll_frozen.sh MPIEXEC PROGRAM MODE LIMIT_S PATTERN...
# Runs `MPIEXEC -np 2 PROGRAM MODE` (test_mpi_comm coll_frozen: rank 0's
# allreduce on MPI's collectives reaches its deadline, rank 1 never calls)
# and checks that the job fails (a non-zero exit status), ends within
# LIMIT_S seconds, prints every PATTERN (grep -E) and no "FAILED" line of
# the program, crashes nowhere, and leaves behind no process of PROGRAM,
# no shared-memory object of Open MPI's for the job (its vader segments,
# named after the job id the ranks print) and no pto object of a rank's
# process. Prints the job's output, and actual vs expected on failure.
set -u
mpiexec=$1 prog=$2 mode=$3 limit=$4
shift 4
. "$(dirname "$0")/failed_job.sh"
failed_job_run "$mpiexec" 2 "$prog" "$mode" "$limit" "$@"
if grep -q "^FAILED" "$out"; then
  echo "FAILED: the program reported a failed check (above)"; fail=1
fi
# anywhere in a line: Open MPI's own messages may be written into the middle
# of it
pids=$(sed -n 's/.*rank [0-9]*: pid \([0-9]*\), Open MPI job [0-9]*.*/\1/p' "$out")
job=$(sed -n 's/.*rank [0-9]*: pid [0-9]*, Open MPI job \([0-9]*\).*/\1/p' "$out" | head -1)
if [ -z "$pids" ]; then
  echo "FAILED: the ranks did not say their pids and job"; fail=1
fi
if [ -n "$job" ] && [ "$job" != 0 ]; then
  hex=$(printf '%x' "$job")
  objs=$(ls /dev/shm | grep -F ".$hex." || true)
  if [ -n "$objs" ]; then
    echo "FAILED: shared-memory objects of the job left behind: $(echo $objs)"; fail=1
  fi
fi
for pid in $pids; do
  if ls /dev/shm/pto."$pid".* >/dev/null 2>&1; then
    echo "FAILED: objects of rank pid $pid left behind: $(ls /dev/shm/pto."$pid".* | tr '\n' ' ')"
    fail=1
  fi
done
rm -f "$out"
echo "mode $mode: exit $rc after $ms ms"
exit $fail
