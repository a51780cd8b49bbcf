#!/bin/sh
# cli_schedules.sh MPIEXEC PTO: controlled schedules of a node whose chips
# are MPI ranks, through `pto run` under `mpiexec -np 2` (docs/schedules.md,
# "Under mpirun"):
#   - `--fuzz-schedules 20 --record R` of the seed's race (dist_race_publisher)
#     fails under some seed, prints one title (rank 0's), and keeps that
#     seed's record: the node's file and both ranks' chip task files;
#   - `--replay R` prints that seed's wrong values again, twice (the 20 of 20
#     replays are in test_node_mpi_schedule, inside one job);
#   - correct scenes pass under seeds 1..5 with fault injection.
# Each job has a 60 s deadline (timeout); nothing depends on timing.
set -u
mpiexec=$1 pto=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}
job() { timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe "$pto" run "$@"; }

job dist_race_publisher --fuzz-schedules 20 --record "$tmp/r" >"$tmp/fuzz.out" 2>"$tmp/fuzz.err"
rc=$?
cat "$tmp/fuzz.out"
first=$(sed -n 's/.*(the first: seed \([0-9]*\);.*/\1/p' "$tmp/fuzz.out")
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ -n "$first" ] ||
  fail "fuzz of dist_race_publisher: job exit $rc, no failing seed of 20 reported"
[ "$(grep -c '^dist_race_publisher: ' "$tmp/fuzz.out")" -eq 1 ] ||
  fail "fuzz of dist_race_publisher: not one title"
for f in r r.t0.c0 r.t0.c1 r.t0.c0.land r.t0.c1.land; do
  [ -s "$tmp/$f" ] || fail "no $f in the record of seed $first"
done
[ -n "$first" ] || { echo "$fails failed"; exit 1; }

job dist_race_publisher --schedule-seed "$first" >/dev/null 2>"$tmp/seed.err"
grep -A8 ' actual \[128\]' "$tmp/seed.err" >"$tmp/seed.values"
[ -s "$tmp/seed.values" ] || fail "seed $first alone printed no wrong values"
same=0
for _ in 1 2; do
  job dist_race_publisher --replay "$tmp/r" >/dev/null 2>"$tmp/replay.err"
  grep -A8 ' actual \[128\]' "$tmp/replay.err" >"$tmp/replay.values"
  cmp -s "$tmp/seed.values" "$tmp/replay.values" && same=$((same + 1))
done
[ "$same" -eq 2 ] || fail "replays of seed $first's record: $same of 2 gave its values"
echo "dist_race_publisher: $same of 2 replays of seed $first's record gave its wrong values"

for s in ring_shuffle dist_separate_reader; do
  job "$s" --fault-inject --fuzz-schedules 5 >"$tmp/ok.out" 2>"$tmp/ok.err" ||
    fail "$s --fault-inject: $(tail -1 "$tmp/ok.out") $(head -3 "$tmp/ok.err")"
done
echo "$fails failed"
[ "$fails" -eq 0 ]
