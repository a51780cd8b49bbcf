#!/bin/sh
# rank_death.sh MPIEXEC PROGRAM LAYOUT RUNS
# A rank that dies while mpirun keeps the job running
# (orte_abort_on_non_zero_status 0): runs `PROGRAM exit` and `PROGRAM _exit`
# (test_node_mpi_faults, -np 3: chip 1 calls exit(3) or _exit(3) in the
# middle of ring allreduces of 1 Mi f32) RUNS times each through
# rank_fault.sh, with the domain's windows in shared memory (LAYOUT shm) or
# MPI RMA windows (LAYOUT rma: PTO_MPI_SHARED_WINDOWS=0). Every run must
# end within 10 s naming rank 1's exit (PTO_ECHIP_DIED; exit(3): "exited
# with status 3"), with no segmentation fault and no process or object of
# the run left. Prints one line per run and a summary; exits 1 if any run
# failed (its whole output is printed).
set -u
mpiexec=$1 prog=$2 layout=$3 runs=$4
here=$(dirname "$0")
export OMPI_MCA_orte_abort_on_non_zero_status=0 NP=3
case $layout in
  shm) export PTO_MPI_SHARED_WINDOWS=1 ;;
  rma) export PTO_MPI_SHARED_WINDOWS=0 ;;
  *) echo "rank_death.sh: layout must be shm or rma, not '$layout'"; exit 2 ;;
esac
log=$(mktemp)
bad=0 slowest=0
for mode in exit _exit; do
  want="exited"
  [ "$mode" = exit ] && want="exited with status 3"
  i=1
  while [ "$i" -le "$runs" ]; do
    sh "$here/rank_fault.sh" "$mpiexec" "$prog" "$mode" 10 \
       "PTO_ECHIP_DIED: chip rank 1 \(MPI rank 1 .*\) $want" >"$log" 2>&1
    rc=$?
    ms=$(sed -n 's/^mode .*: exit .* after \([0-9]*\) ms$/\1/p' "$log")
    [ -n "$ms" ] && [ "$ms" -gt "$slowest" ] && slowest=$ms
    if [ "$rc" -ne 0 ]; then
      bad=$((bad + 1))
      cat "$log"
    fi
    echo "rank_death $layout $mode run $i: $([ "$rc" -eq 0 ] && echo named || echo FAILED) after ${ms:-?} ms: $(grep -m1 '^run: ' "$log")"
    i=$((i + 1))
  done
done
rm -f "$log"
echo "rank_death $layout: $((2 * runs - bad)) of $((2 * runs)) runs named within 10 s (slowest $slowest ms), $bad failed"
[ "$bad" -eq 0 ]
