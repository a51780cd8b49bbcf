#!/bin/sh
# rank_death.sh MPIEXEC PROGRAM LAYOUT RUNS [MODES]
# A rank that dies while mpirun keeps the job running
# (orte_abort_on_non_zero_status 0): runs `PROGRAM exit`, `PROGRAM _exit`
# and `PROGRAM root_exit` (test_node_mpi_faults, -np 3: chip 1 calls
# exit(3) or _exit(3) in the middle of ring allreduces of 1 Mi f32; in
# root_exit chip 0 does, ending rank 0; `PROGRAM root_kill`, in MODES only:
# chip 0 raises SIGKILL at its kernel's entry; `PROGRAM kill_late`: chip 1
# raises SIGKILL, with deadlines of 30 and 40 s) RUNS times each through
# rank_fault.sh, with the domain's windows in shared memory (LAYOUT shm) or
# MPI RMA windows (LAYOUT rma: PTO_MPI_SHARED_WINDOWS=0). Every run must
# end within 10 s, named: rank 0 names rank 1's exit (PTO_ECHIP_DIED;
# exit(3): "exited with status 3"), or ranks 1 and 2 name rank 0 gone;
# with no segmentation fault and no process or object of the run left.
# MODES (default "exit _exit root_exit") picks some of them. Prints one
# line per run and a summary; exits 1 if any run failed (its whole output
# is printed).
set -u
mpiexec=$1 prog=$2 layout=$3 runs=$4 modes=${5:-exit _exit root_exit}
here=$(dirname "$0")
export OMPI_MCA_orte_abort_on_non_zero_status=0 NP=3
case $layout in
  shm) export PTO_MPI_SHARED_WINDOWS=1 ;;
  rma) export PTO_MPI_SHARED_WINDOWS=0 ;;
  *) echo "rank_death.sh: layout must be shm or rma, not '$layout'"; exit 2 ;;
esac
log=$(mktemp)
bad=0 slowest=0
total=0
for mode in $modes; do
  case $mode in
    exit) want="PTO_ECHIP_DIED: chip rank 1 \(MPI rank 1 .*\) exited with status 3" ;;
    _exit) want="PTO_ECHIP_DIED: chip rank 1 \(MPI rank 1 .*\) exited" ;;
    kill_late) want="PTO_ECHIP_DIED: chip rank 1 \(MPI rank 1 .*\) (was killed by signal 9|exited)" ;;
    root_exit|root_kill) want="chip rank [12] \(MPI rank [12]\): rank 0 \(pid [0-9]+\), which runs the node, is gone" ;;
  esac
  i=1
  while [ "$i" -le "$runs" ]; do
    sh "$here/rank_fault.sh" "$mpiexec" "$prog" "$mode" 10 "$want" >"$log" 2>&1
    rc=$?
    total=$((total + 1))
    ms=$(sed -n 's/^mode .*: exit .* after \([0-9]*\) ms$/\1/p' "$log")
    [ -n "$ms" ] && [ "$ms" -gt "$slowest" ] && slowest=$ms
    if [ "$rc" -ne 0 ]; then
      bad=$((bad + 1))
      cat "$log"
    fi
    echo "rank_death $layout $mode run $i: $([ "$rc" -eq 0 ] && echo named || echo FAILED) after ${ms:-?} ms: $(grep -m1 -E '^run: |which runs the node, is gone' "$log")"
    i=$((i + 1))
  done
done
rm -f "$log"
echo "rank_death $layout: $((total - bad)) of $total runs named within 10 s (slowest $slowest ms), $bad failed"
[ "$bad" -eq 0 ]
