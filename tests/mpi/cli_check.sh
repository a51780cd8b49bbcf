#!/bin/sh
# cli_check.sh MPIEXEC PTO: checking mode (docs/contracts.md, "Under
# mpirun") through `pto run --check` under `mpiexec -np 2`, on
# shared-memory windows and on MPI RMA windows (PTO_MPI_SHARED_WINDOWS=0):
# the remote store one element past its window target
# (err_contract_remote_store) and the remote load one element past the
# declared view (err_contract_remote_load) are caught and named with their
# byte, so is the notify of a signal cell no view declares
# (err_contract_signal), and the correct scenes ring_shuffle, dist_put, dist_epochs and
# dist_get (loads by pto_get) pass. Each job has
# a 60 s deadline (timeout).
set -u
mpiexec=$1 pto=$2
fails=0
fail() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}
. "$(dirname "$0")/check_expect.sh"
for shared in 1 0; do
  for s in err_contract_remote_store err_contract_remote_load err_contract_signal \
    ring_shuffle dist_put dist_epochs dist_get; do
    out=$(PTO_MPI_SHARED_WINDOWS=$shared timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe \
      "$pto" run "$s" --check 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q "$(check_want "$s")" ||
      fail "$s --check, shared windows $shared: exit $rc: $(printf '%s\n' "$out" | grep PTO_ | head -3)"
  done
done
echo "checking mode under mpiexec -np 2 (shared and RMA windows): $fails failed"
[ "$fails" -eq 0 ]
