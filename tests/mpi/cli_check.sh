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
for shared in 1 0; do
  out=$(PTO_MPI_SHARED_WINDOWS=$shared timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe \
    "$pto" run err_contract_remote_store --check 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] &&
    printf '%s\n' "$out" | grep -q "chip rank 0, node task 0: .*remote_store to rank 1 of domain 1: buffer 'dst' byte 128 is outside the node task's window targets (0x00, would be 0x31)" ||
    fail "err_contract_remote_store --check, shared windows $shared: exit $rc: $(printf '%s\n' "$out" | grep PTO_ | head -3)"
  out=$(PTO_MPI_SHARED_WINDOWS=$shared timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe \
    "$pto" run err_contract_remote_load --check 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] &&
    printf '%s\n' "$out" | grep -q "chip rank 0, node task 0: .*remote_load from rank 1 of domain 1: buffer 'stage' byte 128 (0x00) is outside every view of the node task" ||
    fail "err_contract_remote_load --check, shared windows $shared: exit $rc: $(printf '%s\n' "$out" | grep PTO_ | head -3)"
  out=$(PTO_MPI_SHARED_WINDOWS=$shared timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe \
    "$pto" run err_contract_signal --check 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] &&
    printf '%s\n' "$out" | grep -q "chip rank 0, node task 0: .*notify to rank 1 of domain 1: signal cell 'sig'\[1\] (byte 8) is outside the node task's window targets (an add of 1)" ||
    fail "err_contract_signal --check, shared windows $shared: exit $rc: $(printf '%s\n' "$out" | grep PTO_ | head -3)"
  for s in ring_shuffle dist_put dist_epochs dist_get; do
    out=$(PTO_MPI_SHARED_WINDOWS=$shared timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe \
      "$pto" run "$s" --check 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] || fail "$s --check, shared windows $shared: exit $rc: $(printf '%s\n' "$out" | grep PTO_ | head -3)"
  done
done
echo "checking mode under mpiexec -np 2 (shared and RMA windows): $fails failed"
[ "$fails" -eq 0 ]
