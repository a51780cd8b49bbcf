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
. "$here/check_expect.sh"
for s in err_contract_remote_store err_contract_remote_load err_contract_signal ring_shuffle \
  dist_put; do
  out=$(timeout -k 5 120 sh "$here/../../scripts/two_hosts.sh" "$build" "$pto" run "$s" --check 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && { printf '%s\n' "$out" | tail -1; exit 2; }
  if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q "$(check_want "$s")"; then
    echo "ok: $s --check on two hosts"
  else
    fail "$s --check on two hosts: exit $rc: $(printf '%s\n' "$out" | grep -E 'PTO_|FAILED' | head -3)"
  fi
done
[ "$fails" -eq 0 ] && echo "checking mode on two hosts: all 5 as expected"
exit $((fails > 0))
