#!/bin/sh
# cli_check_two_hosts.sh BUILD_DIR PTO: checking mode (docs/contracts.md,
# "Under mpirun") with the two chips on two hosts (scripts/two_hosts.sh:
# network namespaces, TCP, MPI RMA windows): the remote store past its
# window target, the remote load past the declared views and the notify
# of an undeclared signal cell are named by the breaching rank with their
# byte; the correct scenes ring_shuffle and dist_put pass. Exit 2 when the
# namespaces cannot be made here (two_hosts.sh says why).
set -u
build=$1 pto=$2
here=$(cd "$(dirname "$0")" && pwd)
fails=0
fail() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}
# run SCENE WANT: `pto run SCENE --check` on two hosts prints WANT (a grep
# pattern)
run() {
  out=$(timeout -k 5 120 sh "$here/../../scripts/two_hosts.sh" "$build" "$pto" run "$1" --check 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && { printf '%s\n' "$out" | tail -1; exit 2; }
  if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q "$2"; then
    echo "ok: $1 --check on two hosts"
  else
    fail "$1 --check on two hosts: exit $rc: $(printf '%s\n' "$out" | grep -E 'PTO_|FAILED' | head -3)"
  fi
}
run err_contract_remote_store "chip rank 0, node task 0: .*remote_store to rank 1 of domain 1: buffer 'dst' byte 128 is outside the node task's window targets (0x00, would be 0x31)"
run err_contract_remote_load "chip rank 0, node task 0: .*remote_load from rank 1 of domain 1: buffer 'stage' byte 128 (0x00) is outside every view of the node task"
run err_contract_signal "chip rank 0, node task 0: .*notify to rank 1 of domain 1: signal cell 'sig'\[1\] (byte 8) is outside the node task's window targets"
run ring_shuffle "verified: matches the sequential reference"
run dist_put "verified: matches the sequential reference"
[ "$fails" -eq 0 ] && echo "checking mode on two hosts: all 5 as expected"
exit $((fails > 0))
