#!/bin/sh
# cli_schedule_refused.sh MPIEXEC PTO: controlled schedules cover a node's
# chips as processes of one machine, not MPI ranks (docs/schedules.md):
# `mpiexec -np 2 pto run ring_shuffle --schedule-seed 1` (and --record)
# fails on every rank with PTO_EINVAL naming the field and mpirun, at once,
# writing no record.
set -u
mpiexec=$1 pto=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for opt in "--schedule-seed 1" "--record $tmp/r.rec"; do
  # shellcheck disable=SC2086 # opt is two words
  out=$(timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe "$pto" run ring_shuffle $opt 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAILED: pto run ring_shuffle $opt: job exit $rc"; exit 1; }
  printf '%s\n' "$out" | grep -q "PTO_EINVAL" &&
    printf '%s\n' "$out" | grep -q "is set; controlled schedules of a node cover its chips as processes of one machine, not under mpirun" ||
    { echo "FAILED: pto run ring_shuffle $opt under mpiexec: not refused by name"; exit 1; }
  [ -e "$tmp/r.rec" ] && { echo "FAILED: a record was written"; exit 1; }
done
echo "controlled schedules under mpiexec -np 2: refused by name"
